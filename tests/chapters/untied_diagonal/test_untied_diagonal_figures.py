"""The figures of the untied_diagonal chapter: each function returns a Figure with its panels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from implicit_bias.chapters.untied_diagonal import analysis, figures


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def _theorem1_frame():
    rows = []
    for b, init in enumerate(["random", "v0_zero"]):
        rows.append(
            {
                "seed": 0,
                "init": init,
                "gd_error_step_0.4": 4e-3 * (b + 1),
                "gd_error_step_0.2": 2e-3 * (b + 1),
                "gf_error": 1e-12 if b else 1e-6,
            }
        )
    return pd.DataFrame(rows)


def _scale_shape_frame(x, values):
    return pd.DataFrame(
        {
            "seed": 0,
            x: values,
            "dist_l1": np.linspace(0.5, 0.1, len(values)),
            "dist_l2": np.linspace(0.01, 0.4, len(values)),
        }
    )


def test_theorem1_step():
    fig = figures.theorem1_step(_theorem1_frame())
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "Theorem 1: GD limit vs argmin Q (seed 0)"
    # initializations in words, the legend under the panel (inside, it met the floor's label)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["random", "$v_0 = 0$"]
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    legend, frame = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.y1 < frame.y0


def test_q_shape():
    fig = figures.q_shape(analysis.q_shape_frame([1e-12, 1.0], num=21))
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert len(fig.axes[0].get_lines()) == 4  # |b|, b^2 and one per m
    assert fig.axes[0].get_title() == "Shape of $q_m$ (App. E)"
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[2:] == ["m = 10⁻¹²", "m = 1"]  # powers of ten, never "m=1e-12"


def test_regimes():
    balanced = _scale_shape_frame("alpha", [1e-6, 1e-3, 1.0])
    unbalanced = _scale_shape_frame("shape", [1.0, 1e3, 1e6])
    fig = figures.regimes(balanced, unbalanced, 1e-6)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert "10⁻⁶" in fig.axes[1].get_xlabel() and "e-" not in fig.axes[1].get_xlabel()
    for ax in fig.axes:
        assert len(ax.get_lines()) == 2 and ax.get_xscale() == "log"


def _fig71_frame(stopped=()):
    """Two data seeds on a 3 x 3 grid; the runs at (alpha, shape, seed) in `stopped` did not
    converge."""
    return pd.DataFrame(
        [
            {
                "seed": seed,
                "alpha": a,
                "shape": s,
                "m": a * (s + 1 / s),
                "pop_error_gd": a + abs(np.log(s)) + seed,
                "pop_error_q": a + abs(np.log(s)),
                "pop_error_l1": 0.1,
                "pop_error_l2": 0.9,
                "converged": (a, s, seed) not in stopped,
            }
            for seed in (0, 1)
            for a in [1e-4, 1e-2, 1.0]
            for s in [0.1, 1.0, 10.0]
        ]
    )


def test_fig7_1():
    frame = _fig71_frame()
    fig = figures.fig7_1(figures.fig7_1_data(frame, analysis.fig71_table(frame)))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # heatmap, its colorbar, the collapse on m
    assert fig.axes[0].get_title() == "Fig. 7.1: population error (GD)\ndashed: balanced, s = 1"
    assert fig.axes[0].get_legend() is None  # a legend on the heatmap hid its cells
    assert fig.axes[1].get_title() == "the same runs against m"


def test_fig7_1_marks_the_points_the_step_cap_stopped():
    """A grid point with a run stopped by the step cap (unconverged, left out of the claims) is
    marked: a cross on its heatmap cell, an open circle against m, each named in a legend under
    its panel."""
    stopped = {(1e-4, 1.0, 0), (1e-4, 1.0, 1), (1e-4, 10.0, 1)}
    frame = _fig71_frame(stopped)
    data = figures.fig7_1_data(frame, analysis.fig71_table(frame))
    counts = data.set_index(["alpha", "shape"])[figures.STOPPED]
    assert counts[1e-4, 1.0] == 2 and counts[1e-4, 10.0] == 1 and counts.sum() == 3
    fig = figures.fig7_1(data)
    heatmap, collapse = fig.axes[0], fig.axes[1]
    crosses = [line for line in heatmap.get_lines() if line.get_marker() == "X"]
    assert len(crosses) == 1
    assert sorted(zip(crosses[0].get_xdata(), crosses[0].get_ydata())) == [(0.0, -4.0), (1.0, -4.0)]
    hollow = [line for line in collapse.get_lines() if line.get_markerfacecolor() == "none"]
    assert len(hollow) == 1 and len(hollow[0].get_xdata()) == 2
    for ax in (heatmap, collapse):
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert figures.STOPPED_LABEL in labels
    fig.draw_without_rendering()  # the heatmap's legend is under it: it hides no cell
    renderer = fig.canvas.get_renderer()
    assert (
        heatmap.get_legend().get_window_extent(renderer).y1 < heatmap.get_window_extent(renderer).y0
    )


def test_theorem1_step_data_raises_gf_error_to_the_floor():
    frame = _theorem1_frame()
    data = figures.theorem1_step_data(frame)
    assert (data["gf_error"] >= figures.GF_ERROR_FLOOR).all()
    big = frame["gf_error"] > figures.GF_ERROR_FLOOR
    assert (data.loc[big, "gf_error"] == frame.loc[big, "gf_error"]).all()
    assert big.any() and (~big).any()
