"""Tests of the task functions of the tensor-networks chapter (Yun, Krishnan & Mobahi 2021) and of
the task lists its sweeps run."""

from __future__ import annotations

import pytest
import torch

from implicit_bias.chapters.tensor_networks import tasks as tn
from implicit_bias.core.chapter import load_profile
from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.engine.sweep import task_hash
from implicit_bias.core.engine.tasks import spec_of

torch.set_num_threads(1)


def test_gd_limit_matches_q_minimizer_and_error_halves():
    """Cor 5 on a small diagonal net (L = 2): GD's limit is the Q-minimizer up to an O(step)
    bias that halves with the step; the printed Thm 5 argument (alpha L) is farther off."""
    common = dict(arch="diag", L=2, n=3, d=8, data_seed=0, alpha=0.5, wbar="1", steps=50000)
    errors = [
        tn.regression_task(dict(common, rel_step=0.02 * f, stability=0.2 * f)) for f in (1.0, 0.5)
    ]
    assert errors[1]["loss"] < 1e-20
    assert errors[1]["error_derived"] < 5e-3
    assert 1.6 < errors[0]["error_derived"] / errors[1]["error_derived"] < 2.4
    assert errors[1]["error_thm5_printed"] > 10 * errors[1]["error_derived"]


def test_theorem6_closed_form_small_case():
    """Thm 6: the corrected closed form equals gradient flow; the printed v_2 does not."""
    result = tn.theorem6_task(dict(d=6, k1=3, seed=0, y=1.2, alpha=0.7, lr_factor=0.1))
    assert result["lambda"] > 0
    assert result["flow_error"] < 1e-9
    assert result["flow_error_printed"] > 1e-2
    assert 1.6 < result["gd_error"] / result["gd_error_half"] < 2.4


def test_theorem6_low_rank_case_reaches_the_out_of_range_terms():
    """A band-limited point: rank M(x) = 3 < k1 = 4, both out-of-range terms nonzero, and the
    corrected closed form still equals gradient flow."""
    result = tn.theorem6_task(dict(d=8, k1=4, seed=0, y=1.2, alpha=0.7, lr_factor=0.1, bandwidth=2))
    assert result["m"] == 3 < result["k1"] == 4
    assert min(result["out_of_range_v1"], result["out_of_range_v2"]) > 0.05
    assert result["flow_error"] < 1e-9
    generic = tn.theorem6_task(dict(d=8, k1=4, seed=0, y=1.2, alpha=0.7, lr_factor=0.1))
    assert generic["m"] == 4 and generic["out_of_range_v1"] < 1e-12


def test_irl1_control_moves_non_gd_starts():
    result = tn.irl1_control_task(dict(arch="diag", L=3, n=10, d=20, sparsity=2, data_seed=0))
    assert result["moved_from_l2_svm"] > 0.05
    assert len(result["stationary_from_l2_reference"]) == 20


def test_theorem3_single_point_limit():
    result = tn.theorem3_task(dict(d=8, k1=3, seed=0, y=-1.0, alpha=0.5, steps=600, rel_step=0.2))
    assert result["lambda"] > 0
    assert max(result["error_v1"], result["error_v2"]) < 1e-10
    assert result["sign_rule_holds"]
    assert result["norm_ratio"] == pytest.approx(1.0, abs=1e-8)


def test_fc_classification_aligns_with_svm():
    """Cor 1 on a tiny problem: a 2-layer fc net's direction approaches the l2 SVM."""
    task = dict(
        arch="fc",
        L=2,
        n=8,
        d=5,
        sparsity=2,
        data_seed=0,
        init_seed=0,
        alpha=0.1,
        steps=2000,
        rel_step=0.02,
        decay=50,
        record=[1, 2000],
    )
    result = tn.classification_task(task)
    assert result["cosine_gap"][-1] < 1e-4 < 0.1 < result["cosine_gap"][0]
    assert result["thm1_kkt_residual"] < 1e-2


def test_task_functions_are_declared():
    """The two training sweeps read the run's device; all run on one torch thread."""
    for fn, uses_device in (
        (tn.classification_task, True),
        (tn.regression_task, True),
        (tn.theorem3_task, False),
        (tn.theorem6_task, False),
        (tn.irl1_control_task, False),
    ):
        spec = spec_of(fn)
        assert spec is not None and spec.threads == 1 and spec.uses_device is uses_device


SWEEPS = {
    "classification": "classification_tasks",
    "theorem3": "theorem3_tasks",
    "regression_argument": "argument_tasks",
    "alpha_sweep": "alpha_sweep_tasks",
    "theorem6": "theorem6_tasks",
    "irl1_control": "irl1_control_tasks",
}


@pytest.mark.parametrize("sweep", sorted(SWEEPS))
def test_task_lists_are_those_of_the_committed_paper_results(sweep):
    """Built from the paper profile, each sweep's task list is exactly the set of tasks whose
    results are committed (the cache holds one file per task, named by its hash)."""
    folder = project_root() / "results" / "paper" / "tensor_networks" / sweep
    committed = {p.stem for p in folder.glob("*.json")}
    if not committed:
        pytest.skip(f"no committed results of the sweep {sweep}")
    built = getattr(tn, SWEEPS[sweep])(load_profile("tensor_networks", "paper"))
    hashes = [task_hash({**t, "device": "cpu"}) for t in built]
    assert len(set(hashes)) == len(hashes)
    assert set(hashes) == committed


def test_smoke_task_lists():
    cfg = load_profile("tensor_networks", "smoke")
    cls = tn.classification_tasks(cfg)
    base = len(cfg["cls_seeds"]) * 3 * len(cfg["cls_depths"])
    assert len(cls) == base + len(cfg["cls_seeds"]) * len(cfg["cls_step_factors"])
    assert all(t["arch"] == "diag" and t["L"] == 2 for t in cls[base:])
    assert {t["rel_step"] for t in cls[base:]} == {
        cfg["cls_rel_step"] * f for f in cfg["cls_step_factors"]
    }
    record = cls[0]["record"]
    assert record[0] == 1 and record[-1] == cfg["cls_steps"] and record == sorted(set(record))
    args = tn.argument_tasks(cfg)
    assert {t["arch"] for t in args} == {"diag", "conv"}
    assert all(t["L"] <= 3 for t in args if t["arch"] == "conv")
    assert sorted({t["rel_step"] for t in args}) == [cfg["reg_rel_step"] / 2, cfg["reg_rel_step"]]
    assert len(tn.theorem3_tasks(cfg)) == 2 * len(cfg["single_seeds"])
    assert len(tn.theorem6_tasks(cfg)) == 2 * len(cfg["single_seeds"])
    ctrl = tn.irl1_control_tasks(cfg)
    assert {(t["arch"], t["L"]) for t in ctrl} == {
        (a, L) for a in ("diag", "conv") for L in cfg["cls_depths"] if L >= 3
    }
    assert len(tn.alpha_sweep_tasks(cfg)) == len(cfg["reg_depths"]) * len(cfg["reg_alphas"])
