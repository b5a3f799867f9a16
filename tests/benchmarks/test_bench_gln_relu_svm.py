"""The SVM-HL benchmark's report built from its rows (the feature-space solve it times against
the kernel form is the library's, tested in tests/models/test_gln_solvers.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from benchmark_modules import load

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    return load("bench_gln_relu_svm")


@pytest.fixture(scope="module")
def bench():
    return _bench()


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
