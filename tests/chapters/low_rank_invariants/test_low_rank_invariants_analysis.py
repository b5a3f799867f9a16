"""Tests for the tables and metrics of the low_rank_invariants chapter."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

from implicit_bias.chapters.low_rank_invariants import analysis, tasks
from implicit_bias.core.claims import load_claims


def test_every_claim_metric_is_named_in_analysis():
    source = inspect.getsource(analysis)
    missing = [
        c["metric"] for c in load_claims("low_rank_invariants") if f'"{c["metric"]}"' not in source
    ]
    assert not missing


def test_require_ok():
    good = [{"status": "ok"}]
    assert analysis.require_ok(good) is good
    with pytest.raises(RuntimeError, match="1 task"):
        analysis.require_ok([{"status": "ok"}, {"status": "error", "error": "boom"}])


def test_lemma1_table_data_and_metrics():
    results = [
        dict(tasks.lemma1_check({"arch": a, "seed": 0, "n": 3}), status="ok")
        for a in tasks.lemma1_architectures()
    ]
    table = analysis.lemma1_table(results)
    assert list(table.index) == list(tasks.lemma1_architectures())
    assert table["unchanged_by_magnitudes"].all() and (table["rel_error"] < 1e-12).all()
    data = analysis.lemma1_tree_data(results)
    assert len(data) == 3 * len(results)
    np.testing.assert_allclose(data["network"], data["tree_of_paths"], rtol=1e-12, atol=1e-14)
    metrics = analysis.lemma1_metrics(results)
    assert metrics["lemma1_max_rel_error"] < 1e-12 and metrics["lemma1_sign_determined"] is True


def _summary_rows():
    base = {
        "arch": "a",
        "seed": 0,
        "act": "linear",
        "case": "1",
        "vertex_ok": True,
        "matrix_ok": True,
        "n_stable": 3,
    }
    rows = []
    for eta in (0.01, 0.02, 0.04):
        rows.append(
            dict(
                base,
                kind="interface",
                name="0.out",
                eta=eta,
                final_loss=0.1,
                vertex=eta,
                full=2 * eta,
                active=0.0,
            )
        )
        rows.append(
            dict(
                base,
                kind="interface",
                name="1.out",
                act="relu",
                eta=eta,
                final_loss=0.1,
                vertex=eta**2,
                full=1.0,
                active=eta,
            )
        )
        rows.append(dict(base, kind="layer", name="0|1", eta=eta, final_loss=0.1, drift=eta))
    return rows


def test_drift_summary_groups_and_metrics_by_hand():
    rows = _summary_rows()
    summary = analysis.drift_summary(rows)
    groups = dict(zip(zip(summary["invariant"], summary["group"]), summary["slope"]))
    assert groups[("0.out", "lemma2")] == pytest.approx(1.0)
    assert groups[("0.out", "theorem1_linear")] == pytest.approx(1.0)
    assert groups[("1.out", "lemma2")] == pytest.approx(2.0)
    assert groups[("1.out", "theorem1_active")] == pytest.approx(1.0)
    assert groups[("1.out", "lemma4")] == pytest.approx(0.0, abs=1e-12)
    assert groups[("0|1", "lemma3")] == pytest.approx(1.0)
    metrics = analysis.invariance_metrics(summary)
    assert metrics["lemma2_vertex_slope_min"] == pytest.approx(1.0)
    assert metrics["lemma2_vertex_slope_max"] == pytest.approx(2.0)
    assert metrics["lemma4_full_drift_ratio_min"] == pytest.approx(1.0)
    table = analysis.drift_table(summary)
    assert table.loc[analysis.DRIFT_GROUPS["lemma2"], "invariants"] == 2
    losses = analysis.final_losses(rows)
    assert list(losses.columns) == [0.01, 0.02, 0.04] and (losses.to_numpy() == 0.1).all()
    data = analysis.drift_data(rows, summary)
    assert len(data) == 3 * len(summary)
    assert analysis.invariance_rows([{"seed": 5}], [{"rows": [{"x": 1}]}]) == [{"x": 1, "seed": 5}]


def _final_frame():
    rows = [
        # synthetic: hidden linear layer "1" with a bound, output "2"
        dict(
            run="synthetic",
            seed=0,
            step=0,
            layer="1",
            act="linear",
            ratio=0.5,
            alignment=0.2,
            gap=0.5,
            gap_bound=1.0,
            frob_sq=1.0,
            n_resfree_after=0,
            predicted_ratio=np.nan,
        ),
        dict(
            run="synthetic",
            seed=0,
            step=9,
            layer="1",
            act="linear",
            ratio=0.995,
            alignment=0.999,
            gap=0.8,
            gap_bound=1.0,
            frob_sq=100.0,
            n_resfree_after=0,
            predicted_ratio=np.nan,
        ),
        dict(
            run="mnist",
            seed=0,
            step=5,
            layer="1",
            act="linear",
            ratio=0.99,
            alignment=0.98,
            gap=0.4,
            gap_bound=0.5,
            frob_sq=50.0,
            n_resfree_after=0,
            predicted_ratio=np.nan,
        ),
        dict(
            run="resfree",
            seed=0,
            step=5,
            layer="1",
            act="linear",
            ratio=0.9,
            alignment=np.nan,
            gap=0.1,
            gap_bound=np.nan,
            frob_sq=5.0,
            n_resfree_after=1,
            predicted_ratio=np.nan,
        ),
        dict(
            run="resfree",
            seed=0,
            step=5,
            layer="2.VR",
            act="linear",
            ratio=0.97,
            alignment=np.nan,
            gap=0.1,
            gap_bound=np.nan,
            frob_sq=5.0,
            n_resfree_after=0,
            predicted_ratio=np.nan,
        ),
        dict(
            run="conv",
            seed=0,
            step=5,
            layer="1.K",
            act="linear",
            ratio=0.6,
            alignment=np.nan,
            gap=0.1,
            gap_bound=np.nan,
            frob_sq=5.0,
            n_resfree_after=0,
            predicted_ratio=0.61,
        ),
    ]
    return rows


def test_theorem2_and_reduced_alignment_metrics_by_hand():
    rows = _final_frame()
    final = analysis.low_rank_final(rows)
    assert len(final) == 5  # the step-0 snapshot of the synthetic run is not final
    assert final.loc[final["run"] == "synthetic", "gap_over_bound_max"].item() == 0.8
    metrics = analysis.theorem2_metrics(final)
    assert metrics == {
        "thm2_fc_ratio_min_synthetic": 0.995,
        "thm2_fc_alignment_min_synthetic": 0.999,
        "thm2_gap_over_bound_max_synthetic": 0.8,
        "thm2_fc_ratio_min_mnist": 0.99,
        "thm2_fc_alignment_min_mnist": 0.98,
        "thm2_gap_over_bound_max_mnist": 0.8,
    }
    red = analysis.reduced_alignment_metrics(final)
    assert red["thm2_resfree_ratio_times_bound_min"] == pytest.approx(0.9 * 8)
    assert red["thm2_resfree_block_ratio_min"] == 0.97
    assert red["conv_ratio_final"] == 0.6
    assert red["conv_ratio_prediction_error"] == pytest.approx(0.01)
    assert list(analysis.reduced_alignment_table(final)["layer"]) == ["1", "2.VR", "1.K"]
    assert set(analysis.rank_one_table(final)["run"]) == {"synthetic", "mnist"}
    traj = pd.DataFrame(rows)
    data = analysis.rank_one_data(traj)
    assert len(data["rank_one"]) == 3 and len(data["alignment"]) == 3
    assert data["rank_one"]["bound"].tolist() == [1.0, 0.01, 0.01]
    data = analysis.reduced_alignment_data(traj)
    assert len(data["resfree"]) == 2 and len(data["conv"]) == 1


def test_trajectories_and_run_table():
    run_tasks = [{"run": "synthetic", "seed": 0}, {"run": "conv", "seed": 1}]
    results = [
        {"rows": [{"step": 0}, {"step": 3}], "final_step": 3, "final_loss": 1e-9},
        {"rows": [{"step": 0}], "final_step": 0, "final_loss": 0.5},
    ]
    traj = analysis.trajectories(run_tasks, results)
    assert traj[["run", "seed", "step"]].values.tolist() == [
        ["synthetic", 0, 0],
        ["synthetic", 0, 3],
        ["conv", 1, 0],
    ]
    table = analysis.run_table(run_tasks, results)
    assert table["steps"].tolist() == [3, 0] and table["final loss"].tolist() == [1e-9, 0.5]


def test_sign_settling_by_hand():
    traj = pd.DataFrame(
        {
            "run": ["a"] * 6,
            "seed": [0] * 6,
            "step": [0, 0, 10, 10, 20, 20],
            "act": ["relu", "linear"] * 3,
            "sign_mismatch_final": [0.5, 0.2, 0.1, 0.0, 0.0, 0.0],
        }
    )
    out = analysis.sign_settling(traj).iloc[0]
    assert (out["last_step"], out["half_step"], out["penultimate_step"]) == (20, 10, 10)
    assert out["relu_share_at_half"] == 0.1 and out["linear_share_at_penultimate"] == 0.0
