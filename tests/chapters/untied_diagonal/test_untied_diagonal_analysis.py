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
from implicit_bias.core.paths import project_root


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
                {"seed": 0, "alpha": alpha, "shape": s, "pop_error_gd": e, "pop_error_q": e}
            )
    met = analysis.fig71_metrics(pd.DataFrame(rows), small_alpha_max=1e-3)
    assert met["fig71_small_alpha_rows_argmin_at_s1"] == 1.0
    assert met["fig71_extreme_over_balanced_min_ratio"] == pytest.approx(8.0)
    assert met["fig71_max_relative_drop_away_from_s1"] < 0
    # A row whose minimum is off the balanced line is caught.
    rows[2]["pop_error_gd"] = 0.35
    met = analysis.fig71_metrics(pd.DataFrame(rows), small_alpha_max=1e-3)
    assert met["fig71_small_alpha_rows_argmin_at_s1"] == 0.0


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
    met = analysis.regimes_metrics(balanced, unbalanced, results)
    # dist_l1 grows with the index, i.e. with alpha along the balanced line
    assert met["regimes_dist_l1_monotone"] is True
    assert met["regimes_qmin_tiny_m_dist_l1"] == pytest.approx(0.52)
    assert met["regimes_large_alpha_dist_l2"] == pytest.approx(2 + len(balanced_pts) - 0.5)
    assert met["regimes_unbalanced_dist_l2"] == pytest.approx(2 + len(points) - 0.5)


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
        f"15 GD runs, {int(frame['converged'].sum())} reached relative residual 1e-07; max steps"
    )
