"""Tests for the tables and metrics of the low_rank_invariants chapter."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

from implicit_bias.chapters.low_rank_invariants import analysis, tasks
from implicit_bias.core.verdicts.claims import evaluate, load_claims


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


def test_require_done_accepts_unconverged_runs_but_not_errors():
    runs = [{"status": "ok"}, {"status": "unconverged"}]
    assert analysis.require_done(runs) is runs
    with pytest.raises(RuntimeError, match="1 task"):
        analysis.require_done(runs + [{"status": "error", "error": "boom"}])


def test_lemma1_table_data_and_metrics():
    results = [
        dict(tasks.lemma1_check({"arch": a, "seed": 0, "n": 3}), status="ok")
        for a in tasks.lemma1_architectures()
    ]
    table = analysis.lemma1_table(results)
    assert list(table.index) == list(tasks.lemma1_architectures())
    assert (table["rel_error_same_tree_rescaled"] < 1e-12).all() and (
        table["rel_error"] < 1e-12
    ).all()
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
    return [dict(r, reached_floor=True) for r in rows]


def test_theorem2_and_reduced_alignment_metrics_by_hand():
    rows = _final_frame()
    final = analysis.low_rank_final(rows)
    assert len(final) == 5  # the step-0 snapshot of the synthetic run is not final
    assert final.loc[final["run"] == "synthetic", "gap_over_bound_max"].item() == 0.8
    metrics = analysis.theorem2_metrics(final)
    assert np.isnan(metrics.pop("thm2_fc_ratio_min_deep"))  # no synthetic_deep run here
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
    assert red["conv_ratio_prediction_error"] == pytest.approx(0.01)
    assert list(analysis.reduced_alignment_table(final)["layer"]) == ["1", "2.VR", "1.K"]
    assert set(analysis.rank_one_table(final)["run"]) == {"synthetic", "mnist"}


def test_the_deeper_set_up_s_rank_one_ratio_is_its_own_metric():
    rows = _final_frame()
    deep = [dict(r, run="synthetic_deep", ratio=r["ratio"] - 0.01) for r in rows]
    deep = [r for r in deep if r["step"] == 9 and r["layer"] == "1"]  # its last snapshot
    final = analysis.low_rank_final(rows + deep)
    metrics = analysis.theorem2_metrics(final)
    assert metrics["thm2_fc_ratio_min_deep"] == pytest.approx(0.985)
    assert metrics["thm2_fc_ratio_min_synthetic"] == 0.995  # can fail: the runs kept apart
    unconverged = [dict(r, reached_floor=False) for r in deep]
    final = analysis.low_rank_final(rows + unconverged)
    assert np.isnan(analysis.theorem2_metrics(final)["thm2_fc_ratio_min_deep"])


def _path(u_values, run="synthetic"):
    """Snapshots of one layer on a fixed path: at log(1/loss) = u, ||W||_F^2 = u^2 and
    1 - ratio = 0.5 / u^2 (gap 0.5); the first snapshot is the initial one (u = log 2)."""
    u = np.array([np.log(2.0), *u_values])
    return pd.DataFrame(
        {
            "run": run,
            "seed": 0,
            "layer": "1",
            "act": "linear",
            "step": np.arange(len(u)) * 7,
            "loss": np.exp(-u),
            "frob_sq": u**2,
            "ratio": 1.0 - 0.5 / u**2,
            "gap_bound": 0.6,
            "alignment": 1.0 - 0.1 / u,
        }
    )


def test_at_loss_levels_do_not_depend_on_where_the_snapshots_fall():
    """Two runs along one path whose snapshots fall at different places (as when backtracking
    decisions differ) give the same figure data at the loss levels."""
    a = analysis.at_loss_levels(_path([5.0, 40.0, 300.0, 600.0]), ["frob_sq"], ("frob_sq",))
    b = analysis.at_loss_levels(_path([3.0, 90.0, 590.0]), ["frob_sq"], ("frob_sq",))
    assert a["loss"].iloc[0] == 0.5 and a["frob_sq"].iloc[0] == pytest.approx(np.log(2) ** 2)
    # the initial snapshot, then every level but 0.6 (above the initial loss 0.5)
    assert a["loss"].iloc[-1] == 1e-250 and len(a) == len(b) == len(analysis.LOSS_LEVELS)
    u = np.log(1.0 / a["loss"].to_numpy())
    np.testing.assert_allclose(a["frob_sq"], u**2, rtol=1e-12)
    np.testing.assert_allclose(a["frob_sq"], b["frob_sq"], rtol=1e-12)
    # a run that stopped earlier has no value at the losses it did not reach
    short = analysis.at_loss_levels(_path([5.0, 40.0]), ["frob_sq"], initial=False)
    assert short["loss"].min() >= np.exp(-40.0) and short["loss"].max() <= 0.6
    data = analysis.rank_one_data(_path([5.0, 40.0, 300.0, 600.0]))
    np.testing.assert_allclose(
        data["rank_one"]["one_minus_ratio"] * data["rank_one"]["frob_sq"], 0.5, rtol=1e-9
    )
    np.testing.assert_allclose(data["rank_one"]["bound"] * data["rank_one"]["frob_sq"], 0.6)
    assert len(data["alignment"]) == len(data["rank_one"])
    res = _path([5.0, 600.0], run="resfree").assign(n_resfree_after=1, predicted_ratio=np.nan)
    conv = _path([5.0, 600.0], run="conv").assign(n_resfree_after=0, predicted_ratio=0.4)
    data = analysis.reduced_alignment_data(pd.concat([res, conv]))
    assert (data["resfree"]["n_resfree_after"] == 1).all() and len(data["conv"]) == len(a)
    assert (data["conv"]["predicted_ratio"] == 0.4).all()


@pytest.mark.parametrize(
    "run, metric_keys",
    [
        ("mnist", ["thm2_fc_ratio_min_mnist", "thm2_gap_over_bound_max_mnist"]),
        ("synthetic", ["thm2_fc_ratio_min_synthetic", "thm2_fc_alignment_min_synthetic"]),
        ("conv", ["conv_ratio_prediction_error"]),
        ("resfree", ["thm2_resfree_ratio_times_bound_min", "thm2_resfree_block_ratio_min"]),
    ],
)
def test_an_unconverged_run_carries_no_claim(run, metric_keys):
    """One run stopped by its step limit makes the metrics of its kind NaN (the claim fails),
    and leaves the other kinds' metrics as they were."""
    rows = [dict(r, reached_floor=r["run"] != run) for r in _final_frame()]
    final = analysis.low_rank_final(rows)
    metrics = analysis.theorem2_metrics(final) | analysis.reduced_alignment_metrics(final)
    good = analysis.low_rank_final(_final_frame())
    good_metrics = analysis.theorem2_metrics(good) | analysis.reduced_alignment_metrics(good)
    for key, value in metrics.items():
        if key in metric_keys or key.endswith(f"_{run}"):
            assert np.isnan(value), key
        elif np.isfinite(good_metrics[key]):
            assert value == good_metrics[key], key
    claims = [c["id"] for c in CLAIMS.values() if c["metric"] in metric_keys]
    assert claims and all(_status(c, metrics) == "missing metric" for c in claims)


def test_trajectories_and_run_table():
    run_tasks = [
        {"run": "synthetic", "seed": 0, "eta": 0.1, "loss_floor": 1e-8},
        {"run": "conv", "seed": 1, "eta": 0.1, "loss_floor": 1e-8},
    ]
    results = [
        {"rows": [{"step": 0}, {"step": 3}], "final_step": 3, "final_loss": 1e-9, "status": "ok"},
        {"rows": [{"step": 0}], "final_step": 0, "final_loss": 0.5, "status": "unconverged"},
    ]
    traj = analysis.trajectories(run_tasks, results)
    assert traj[["run", "seed", "step", "reached_floor"]].values.tolist() == [
        ["synthetic", 0, 0, True],
        ["synthetic", 0, 3, True],
        ["conv", 1, 0, False],
    ]
    table = analysis.run_table(run_tasks, results)
    assert table["steps"].tolist() == [3, 0] and table["final loss"].tolist() == [1e-9, 0.5]
    assert table["stopped by"].tolist() == ["loss floor", "step limit (unconverged)"]
    # the status decides as well as the loss: an unconverged status is never "reached"
    assert not analysis.reached_floor(run_tasks[0], dict(results[0], status="unconverged"))


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


CLAIMS = {c["id"]: c for c in load_claims("low_rank_invariants")}


def _status(claim_id: str, metrics: dict) -> str:
    return evaluate(CLAIMS[claim_id], metrics, "paper")["status"]


def _rate_traj(one_minus_ratio, run="synthetic", floor=True, relu=None):
    """Snapshots of one hidden linear layer (bound 0.5) and optionally a ReLU layer."""
    frob = np.array([1.0, 10.0, 20.0, 40.0, 80.0])
    loss = np.array([0.7, 1e-12, 1e-30, 1e-60, 1e-120])
    rows = []
    for k in range(len(frob)):
        base = dict(run=run, seed=0, step=k, loss=loss[k], frob_sq=frob[k], reached_floor=floor)
        rows.append(
            dict(base, layer="1", act="linear", gap_bound=0.5, ratio=1.0 - one_minus_ratio(frob[k]))
        )
        if relu is not None:
            rows.append(
                dict(base, layer="0", act="relu", gap_bound=np.nan, ratio=1.0 - relu(frob[k]))
            )
    return pd.DataFrame(rows)


def test_rank_one_rates_by_hand_and_the_claim_can_fail():
    good = _rate_traj(lambda f: 0.4 / f, relu=lambda f: 0.7)
    rates = analysis.rank_one_rates(good)
    lin = rates[rates["act"] == "linear"].iloc[0]
    assert lin["late_points"] == 4 and lin["slope"] == pytest.approx(-1.0)
    assert rates[rates["act"] == "relu"]["slope"].iloc[0] == pytest.approx(0.0, abs=1e-12)
    metrics = analysis.rank_one_rate_metrics(rates)
    assert metrics["thm2_rank_one_slope_min_synthetic"] == pytest.approx(-1.0)
    assert _status("theorem2_rank_one_rate_synthetic_min", metrics) == "pass"
    # a faster (1/F^2) or no approach to rank one fails the claim
    for bad in (lambda f: 5.0 / f**2, lambda f: 0.3):
        m = analysis.rank_one_rate_metrics(analysis.rank_one_rates(_rate_traj(bad)))
        assert _status("theorem2_rank_one_rate_synthetic_max", m) == "fail"
    # a run that stopped at its step limit carries no claim
    m = analysis.rank_one_rate_metrics(
        analysis.rank_one_rates(_rate_traj(lambda f: 0.4 / f, floor=False))
    )
    assert np.isnan(m["thm2_rank_one_slope_min_synthetic"])
    deep = analysis.rank_one_rates(_rate_traj(lambda f: 0.4 / f, run="synthetic_deep"))
    assert analysis.rank_one_rate_metrics(deep)["thm2_rank_one_slope_max_deep"] == pytest.approx(-1)
    data = analysis.rate_data(good, rates)  # the 8 loss levels from 1e-10 to 1e-100
    assert len(data) == 8 and data["loss"].max() == 1e-10 and data["loss"].min() == 1e-100
    np.testing.assert_allclose(data["one_minus_ratio"] * data["frob_sq"], 0.4, rtol=1e-12)


def _step_rows(values):
    """Final snapshots of the synthetic runs: ``values[eta] = gap_over_bound per seed``."""
    rows = []
    for eta, per_seed in values.items():
        run = "synthetic" if eta == 0.1 else f"synthetic eta={eta:g}"
        for seed, v in enumerate(per_seed):
            rows.append(
                dict(
                    run=run,
                    seed=seed,
                    eta=eta,
                    step=5,
                    layer="1",
                    n_resfree_after=0,
                    act="linear",
                    gap=v,
                    gap_bound=1.0,
                    reached_floor=True,
                )
            )
    return analysis.low_rank_final(rows)


def test_step_size_trend_and_metrics_by_hand():
    final = _step_rows({0.1: [0.90, 0.80], 0.05: [0.95, 0.85], 0.025: [0.975, 0.875]})
    table = analysis.step_size_table(final)
    assert len(table) == 6 and sorted(table["eta"].unique()) == [0.025, 0.05, 0.1]
    trend = analysis.step_size_trend(table).iloc[0]
    assert trend["eta=0.1"] == pytest.approx(0.85) and trend["eta=0.025"] == pytest.approx(0.925)
    assert trend["change_smallest_minus_largest_eta"] == pytest.approx(0.075)
    assert trend["change_se"] == pytest.approx(0.0, abs=1e-12)
    assert trend["eta_to_0_max"] == pytest.approx(1.0)  # 0.9 + ... : exact line to 1.0
    metrics = analysis.step_size_metrics(table)
    assert metrics["thm2_gap_over_bound_max_synthetic_all_etas"] == pytest.approx(0.975)
    assert _status("theorem2_gap_bound_synthetic_all_etas", metrics) == "pass"
    # a gap that grows towards its bound as eta shrinks and would cross it in the flow limit
    rising = _step_rows({0.1: [0.90], 0.05: [0.96], 0.025: [0.99]})
    m = analysis.step_size_metrics(analysis.step_size_table(rising))
    assert m["thm2_gap_over_bound_max_synthetic_eta_to_0"] > 1.0
    assert _status("theorem2_gap_bound_synthetic_flow_limit", m) == "fail"
    one_eta = analysis.step_size_table(_step_rows({0.1: [0.9]}))
    assert np.isnan(
        analysis.step_size_metrics(one_eta)["thm2_gap_over_bound_max_synthetic_eta_to_0"]
    )


def _conv_traj(kernel, floor=True):
    frob = [1.0, 10.0, 20.0, 40.0]
    loss = [0.7, 1e-12, 1e-30, 1e-60]
    rows = []
    for k, (f, lo) in enumerate(zip(frob, loss)):
        base = dict(
            run="conv", seed=0, step=k, loss=lo, frob_sq=f, act="linear", reached_floor=floor
        )
        rows += [
            dict(base, layer="1.K", ratio=kernel(f), predicted_ratio=0.4),
            dict(base, layer="2", ratio=1.0 - 0.3 / f, predicted_ratio=np.nan),
            dict(base, layer="3", ratio=1.0, predicted_ratio=np.nan),
        ]
    return pd.DataFrame(rows)


def test_conv_limits_by_hand_and_the_claim_can_fail():
    limits = analysis.conv_limits(_conv_traj(lambda f: 0.4 + 2.0 / f))
    assert limits["layer"].tolist() == ["1.K", "2"]  # the output layer is left out
    metrics = analysis.conv_limit_metrics(limits)
    assert metrics["conv_ratio_limit"] == pytest.approx(0.4)
    assert metrics["conv_run_dense_ratio_limit_min"] == pytest.approx(1.0)
    assert _status("reduced_alignment_conv", metrics) == "pass"
    # starts low like the real kernel but becomes rank one: the limit is 1 and the claim fails
    rank_one = analysis.conv_limit_metrics(analysis.conv_limits(_conv_traj(lambda f: 1 - 0.5 / f)))
    assert rank_one["conv_ratio_limit"] == pytest.approx(1.0)
    assert _status("reduced_alignment_conv", rank_one) == "fail"
    # a conv run stopped by its step limit carries no claim
    capped = analysis.conv_limit_metrics(
        analysis.conv_limits(_conv_traj(lambda f: 0.4 + 2 / f, False))
    )
    assert np.isnan(capped["conv_ratio_limit"]) and np.isnan(
        capped["conv_run_dense_ratio_limit_min"]
    )
    assert _status("reduced_alignment_conv", capped) == "missing metric"


def test_sign_settling_summary_by_hand():
    table = pd.DataFrame(
        {
            "relu_share_at_half": [0.1, 0.0, 0.05],
            "relu_share_at_penultimate": [0.0, 0.0, 0.05],
            "linear_share_at_half": [0.2, 0.1, 0.1],
            "linear_share_at_penultimate": [0.1, 0.05, 0.01],
        }
    )
    out = analysis.sign_settling_summary(table).set_index("layers")
    assert out.loc["relu"].tolist()[:4] == [3, 2, 1, 1]
    assert out.loc["linear"].tolist()[:4] == [3, 3, 3, 0]
    assert out.loc["linear", "largest_share_at_penultimate"] == 0.1
