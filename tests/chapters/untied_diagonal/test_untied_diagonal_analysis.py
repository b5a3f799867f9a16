"""The tables and metrics of the untied_diagonal chapter (Azulay et al. 2021)."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
import yaml

from implicit_bias.chapters.untied_diagonal import analysis
from implicit_bias.chapters.untied_diagonal import tasks as tk
from implicit_bias.core.chapter import load_profile
from implicit_bias.core.engine.paths import project_root


def _scale_shape_result(points, offset=0.0):
    """A `scale_shape_task` result with made-up numbers at the given (alpha, s) points."""
    k = len(points)
    alpha, shape = (list(v) for v in zip(*points))
    ramp = np.arange(k, dtype=float) + offset
    return {
        "alpha": alpha,
        "shape": shape,
        "m": [a * (s + 1 / s) for a, s in points],
        "pop_error_gd": (0.1 + ramp).tolist(),
        "pop_error_q": (0.1 + ramp).tolist(),
        "gd_vs_q": [1e-4] * k,
        "dist_l1": (1 + ramp).tolist(),
        "dist_l2": (2 + ramp).tolist(),
        "steps": [100 + i for i in range(k)],
        "converged": [True] * (k - 1) + [False],
        "pop_error_l1": 0.05,
        "pop_error_l2": 0.9,
        "extra_m_dist_l1": [0.02 + offset],
    }


def test_every_claim_metric_is_named_in_analysis():
    claims = yaml.safe_load((project_root() / "data/claims/untied_diagonal.yaml").read_text())
    source = inspect.getsource(analysis)
    missing = [c["metric"] for c in claims if f'"{c["metric"]}"' not in source]
    assert not missing


def test_step_slope_and_fig71_metrics():
    steps = [0.4, 0.2, 0.1]
    errors = np.array([[4e-3, 1e-2], [2e-3, 2.5e-3], [1e-3, 6.25e-4]])
    assert np.allclose(analysis.step_slope(errors, steps), [1.0, 2.0])
    rows = []
    for alpha, errs in ((1e-4, [0.8, 0.3, 0.1, 0.3, 0.8]), (1e-1, [0.9, 0.9, 0.89, 0.9, 0.9])):
        for s, e in zip([0.01, 0.1, 1.0, 10.0, 100.0], errs):
            rows.append(
                {
                    "seed": 0,
                    "alpha": alpha,
                    "shape": s,
                    "pop_error_gd": e,
                    "pop_error_q": e,
                    "converged": True,
                }
            )
    # a second data seed, a little worse everywhere: two per-seed values
    rows += [
        {
            **r,
            "seed": 1,
            "pop_error_gd": 1.1 * r["pop_error_gd"],
            "pop_error_q": 1.1 * r["pop_error_q"],
        }
        for r in rows
    ]
    met = analysis.fig71_metrics(pd.DataFrame(rows), small_alpha_max=1e-3)
    assert met["fig71_rows_used"] == 2
    margin = met["fig71_balanced_margin"]
    assert margin.test == "one-sample t" and margin.seeds == (0, 1)
    assert margin.values == pytest.approx((2.0, 2.0))  # 0.3 / 0.1 - 1
    assert met["fig71_extreme_over_balanced_min_ratio"].values == pytest.approx((8.0, 8.0))
    assert met["fig71_min_relative_growth_away_from_s1"].values == pytest.approx((5 / 3, 5 / 3))
    # A row whose minimum is off the balanced line gives a negative margin for its seed.
    rows[2]["pop_error_gd"] = 0.35
    met = analysis.fig71_metrics(pd.DataFrame(rows), small_alpha_max=1e-3)
    assert met["fig71_balanced_margin"].values[0] == pytest.approx(0.3 / 0.35 - 1)
    assert met["fig71_min_relative_growth_away_from_s1"].values[0] < 0
    # ... unless that row holds an unconverged run: then no claim rests on it.
    rows[2]["converged"] = False
    met = analysis.fig71_metrics(pd.DataFrame(rows), small_alpha_max=1e-3)
    assert met["fig71_rows_used"] == 1 and met["fig71_balanced_margin"].seeds == (1,)
    assert met["fig71_balanced_margin"].dropped == 5
    # An unconverged run far from Theorem 1 does not count for fig71_gd_vs_q either.
    rows[2].update(pop_error_gd=9.0, converged=False)
    gd_vs_q = analysis.fig71_metrics(pd.DataFrame(rows), 1e-3)["fig71_gd_vs_q_max_rel_pop_error"]
    assert gd_vs_q.value == 0 and gd_vs_q.dropped == 1
    rows[2]["converged"] = True
    assert (
        analysis.fig71_metrics(pd.DataFrame(rows), 1e-3)["fig71_gd_vs_q_max_rel_pop_error"].value
        > 1
    )


def test_q_shape_limits():
    met = analysis.q_shape_metrics()
    assert met["qm_max_dev_from_square_m1e3"] < 1e-6
    # The rich-limit correction |b| log|b| / (log(2/m) - 1) peaks at 1/e / (log(2e12) - 1).
    assert met["qm_max_dev_from_abs_m1e-12"] == pytest.approx(
        np.exp(-1) / (np.log(2e12) - 1), rel=0.05
    )


def test_q_shape_frame():
    frame = analysis.q_shape_frame([1e-12, 1e3], num=11)
    assert list(frame.columns) == ["beta", "abs", "square", "m=1e-12", "m=1000"]
    one = frame["beta"] == 1.0
    assert np.allclose(frame.loc[one, ["m=1e-12", "m=1000"]], 1.0)  # normalized at beta = 1
    assert np.allclose(frame["m=1000"], frame["square"], atol=1e-5)


def test_mirror_shapes_puts_the_copy_at_one_over_s():
    frame = pd.DataFrame(
        {"seed": [0, 0], "alpha": [1.0, 1.0], "shape": [1.0, 10.0], "pop_error_gd": [0.1, 0.5]}
    )
    mirrored = analysis.mirror_shapes(frame)
    assert list(mirrored["shape"]) == [0.1, 1.0, 10.0]
    assert list(mirrored["pop_error_gd"]) == [0.5, 0.1, 0.5]


def test_metrics_table():
    table = analysis.metrics_table({"a": 1.0, "b": True})
    assert list(table.columns) == ["value"] and list(table.index) == ["a", "b"]


def test_regimes_frames_split_table_and_metrics():
    cfg = load_profile("untied_diagonal", "smoke")
    cfg = {**cfg, "data": {**cfg["data"], "seeds": [0, 1]}}
    balanced_pts, unbalanced_pts = tk.regimes_points(cfg)
    points = balanced_pts + unbalanced_pts
    results = [_scale_shape_result(points), _scale_shape_result(points, offset=0.5)]
    frame = analysis.scale_shape_frame(results, [0, 1])
    assert len(frame) == 2 * len(points) and list(frame["seed"].unique()) == [0, 1]
    balanced, unbalanced = analysis.split_regimes(frame, cfg)
    assert len(balanced) == 2 * len(balanced_pts) and (balanced["shape"] == 1.0).all()
    assert len(unbalanced) == 2 * len(unbalanced_pts)
    assert (unbalanced["alpha"] == cfg["regimes_tiny_alpha"]).all()
    table = analysis.regimes_table(frame)
    assert list(table.columns) == ["m", "dist_l1", "dist_l2", "steps"]
    met = analysis.metrics_table(analysis.regimes_metrics(balanced, unbalanced, results))["value"]
    # dist_l1 grows with the index, i.e. with alpha along the balanced line
    assert met["regimes_dist_l1_monotone"] is True
    assert met["regimes_qmin_tiny_m_dist_l1"] == pytest.approx(0.52)
    assert met["regimes_large_alpha_dist_l2"] == pytest.approx(2 + len(balanced_pts) - 0.5)
    # the last point of each seed is unconverged (see _scale_shape_result): left out
    assert met["regimes_unbalanced_dist_l2"] == pytest.approx(len(points) + 0.5)


def test_rich_limit_frame_and_table():
    rows = [
        {
            "m": m,
            "dist_l1": d,
            "dist_times_log_1_over_m": d * np.log(1 / m),
            "kkt": 0.0,
            "residual": 0.0,
        }
        for m, d in ((1e-5, 0.2), (1e-30, 0.02))
    ]
    frame = analysis.rich_limit_frame([{"rows": rows}, {"rows": rows}], [0, 3])
    assert len(frame) == 4 and list(frame["seed"]) == [0, 0, 3, 3]
    table = analysis.rich_limit_table(frame)
    assert table.loc[1e-30, ("dist_l1", 3)] == 0.02
    assert set(table.columns.get_level_values(0)) == {"dist_l1", "dist_times_log_1_over_m"}


@pytest.mark.parametrize("mirror", [False, True])
def test_fig71_frame_table_summary_and_heatmap(mirror):
    cfg = load_profile("untied_diagonal", "smoke")
    cfg = {
        **cfg,
        "fig71_log10_alpha": [-2, 0, 3],
        "fig71_log10_shape": [-2, 2, 5],
        "fig71_mirror": mirror,
    }
    points = tk.fig71_points(cfg)
    frame = analysis.fig71_frame([_scale_shape_result(points)], cfg)
    assert len(frame) == 15 and sorted(frame["shape"].unique()) == [0.01, 0.1, 1.0, 10.0, 100.0]
    table = analysis.fig71_table(frame)
    assert list(table.columns) == [
        "alpha",
        "shape",
        "m",
        "pop_error_gd",
        "pop_error_q",
        "pop_error_l1",
        "pop_error_l2",
    ]
    heat = analysis.fig71_heatmap_table(table)
    assert heat.shape == (3, 5)
    if mirror:  # the mirrored half repeats the values at 1/s
        assert np.array_equal(heat.to_numpy(), heat.to_numpy()[:, ::-1])
    summary = analysis.fig71_summary(frame, 1e-7)
    assert summary.startswith(
        f"15 GD runs, {int(frame['converged'].sum())} reached relative residual 1e-07 "
        "(unconverged at alpha <= "
    )


def _theorem1_result(gf_errors, gf_converged, gd_converged=True):
    k = len(gf_errors)
    return {
        "inits": [f"init{i}" for i in range(k)],
        "rel_steps": [0.4, 0.2],
        "gd_error": [[2e-3] * k, [1e-3] * k],
        "gd_steps": [[10] * k, [20] * k],
        "gd_converged": [[gd_converged] * k, [True] * k],
        "gf_error": gf_errors,
        "gf_converged": gf_converged,
        "wrong_half": [0.1] * k,
        "wrong_double": [0.1] * k,
        "qmin_kkt": [1e-15] * k,
        "dist_weighted_l2": [1e-4] * k,
        "dist_plain_l2": [1e-1] * k,
        "tied_error": 1e-3,
        "tied_converged": True,
    }


def test_theorem1_metrics_leave_out_unconverged_runs():
    res = _theorem1_result([1e-12, 0.5], [True, True])
    frame = analysis.theorem1_frame([res], [0])
    assert analysis.theorem1_metrics(frame, [res])["thm1_gf_max_rel_error"].value == 0.5
    res = _theorem1_result([1e-12, 0.5], [True, False])
    frame = analysis.theorem1_frame([res], [0])
    gf = analysis.theorem1_metrics(frame, [res])["thm1_gf_max_rel_error"]
    assert gf.value == 1e-12 and gf.dropped == 1
    assert "gradient flow 1 of 2" in analysis.theorem1_unconverged(frame, [res])
    res = _theorem1_result([1e-12, 0.5], [False, False], gd_converged=False)
    res["tied_converged"] = False
    frame = analysis.theorem1_frame([res], [0])
    met = analysis.metrics_table(analysis.theorem1_metrics(frame, [res]))["value"]
    assert np.isnan(met["thm1_gf_max_rel_error"]) and np.isnan(met["thm1_gd_max_rel_error"])
    assert np.isnan(met["tied_rel_error"])


def _rich_result(slack, exponent, m=(1e-20, 1e-30)):
    """A `rich_limit_task` result whose off-support coordinates decay with `exponent`."""
    slack, exponent = np.asarray(slack, float), np.asarray(exponent, float)
    logb = [(np.log10(mi) * exponent).tolist() for mi in m]
    rows = [{"m": mi, "dist_l1": 0.01} for mi in m]
    return {
        "rows": rows,
        "slack": slack.tolist(),
        "log10_abs_beta": logb,
        "dual_objective": 1.0,
        "l1_norm": 1.0,
    }


def test_rich_limit_metrics_compare_exponents_with_dual_slacks():
    slack = [0.0, 0.0, 0.01, 0.2, 0.7]
    good = _rich_result(slack, [0.0, 0.0, 0.012, 0.21, 0.69])
    met = analysis.rich_limit_metrics([good], [0])
    assert met["rich_limit_max_exponent_minus_slack"] == pytest.approx(0.01)
    bad = _rich_result(slack, [0.0, 0.0, 0.2, 0.7, 0.01])  # rates not those of the slacks
    assert analysis.rich_limit_metrics([bad], [0])["rich_limit_max_exponent_minus_slack"] > 0.05
    table = analysis.rich_limit_slack_table([good, bad], [0, 1])
    assert list(table.index) == [0, 1] and table.loc[0, "n slack < 0.05"] == 1
