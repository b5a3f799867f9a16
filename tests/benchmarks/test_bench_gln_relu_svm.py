"""The SVM-HL benchmark's feature-space solve against today's `gln_solvers.svm_linear` (kernel
form): the same solution, status and certificate on problems of SVM-HL's shape (hidden ReLU
activations, fewer features than samples), and the report built from its rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmark_modules import load
from implicit_bias.models import gln_solvers as gs

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load("bench_gln_relu_svm")


@pytest.fixture(scope="module")
def bench():
    return _bench()


def relu_features(seed: int, n: int, constant: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(30, 40))
    F = np.maximum(rng.normal(size=(n, 30)) @ W, 0)
    F = np.c_[F, np.ones(n)] if constant else F
    return F, rng.normal(size=F.shape[1])


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feature_space_equals_kernel_form(bench, seed, constant):
    F_all, teacher = relu_features(seed, 2400, constant)
    F, F_val = F_all[:400], F_all[400:]
    y = np.sign(F @ teacher - 0.1)
    new, old = bench.svm_linear_features(F, y), gs.svm_linear(F, y)
    assert new.status == old.status == "optimal"
    assert 0 <= new.gap_relative <= 1e-8 and new.primal_infeasibility <= 1e-8
    assert abs(new.objective - old.objective) <= 1e-9 * old.objective
    assert float((new.weights - old.weights).norm() / old.weights.norm()) <= 1e-6
    f_new, f_old = F_val @ new.primal, F_val @ old.primal
    np.testing.assert_allclose(f_new, f_old, atol=1e-6 * np.abs(f_old).max())


def test_non_separable_is_infeasible_in_both_forms(bench):
    rng = np.random.default_rng(3)
    F = np.maximum(rng.normal(size=(200, 10)), 0)
    y = np.where(rng.random(200) < 0.5, 1.0, -1.0)
    new, old = bench.svm_linear_features(F, y), gs.svm_linear(F, y)
    assert new.status == old.status == "infeasible"
    assert new.weights is None and old.weights is None


def test_report_counts_solves_and_flags_status_changes(bench):
    row = {
        "part": "SVM-HL",
        "H": 10,
        "N": 500,
        "momentum": 0.0,
        "seed": 0,
        "old_cpu_s": 2.0,
        "new_cpu_s": 0.5,
        "old_iterations": 12,
        "new_iterations": 12,
        "old_status": "optimal",
        "new_status": "optimal",
        "objective_rel_diff": 1e-12,
        "weights_rel_diff": 1e-10,
        "val_output_max_abs_diff": 1e-10,
        "val_output_max_rel_diff": 1e-11,
        "val_error_old": 0.1,
        "val_error_new": 0.1,
        "inconsistency_old": 0.01,
        "inconsistency_new": 0.01,
    }
    changed = {**row, "part": "SVM-HL (no constant)", "new_status": "max_iter"}
    for k in ("objective_rel_diff", "weights_rel_diff", "val_output_max_abs_diff"):
        changed.pop(k)
    s = bench.summarize([row, changed], Counter({(10, 500): 124}))
    assert s["agreement"]["status_changes"] == 1 and s["agreement"]["solved"] == 1
    (config,) = s["per_config"]
    assert config["paper_old_cpu_s"] == pytest.approx(2.0 * 124)
    assert config["paper_new_cpu_s"] == pytest.approx(0.5 * 124)
