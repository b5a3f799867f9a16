"""Tests of the warped_imd chapter's figures: each returns a Figure with the expected panels."""

from __future__ import annotations

import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from implicit_bias.chapters.warped_imd import analysis, figures, tasks
from implicit_bias.core.site.plotting import make_legible
from implicit_bias.models import fully_connected as fc

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _headless_figures():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def _panels(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


def test_hessian_map_figure():
    hm = tasks.task_hessian_map({"dim": 3, "deltas": [0.0], "n_points": 2, "seed": 0})
    fig = figures.hessian_map(analysis.hessian_map_frame(hm))
    assert isinstance(fig, Figure) and len(_panels(fig)) == 1
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and len(ax.collections) == 3  # one strip per variant


def test_time_warping_figure():
    tw = tasks.task_time_warp(
        {"alpha": 0.5, "s": 2.0, "seed": 0, "end": 3.0, "dt": 5e-3, "n_plot": 20}
    )
    fig = figures.time_warping(tw)
    assert isinstance(fig, Figure) and len(_panels(fig)) == 2
    assert fig.axes[1].get_xlabel() == "gradient-flow time $t$"


def test_theorem2_figure():
    case = {
        "delta": 1.0,
        "sign_changed": False,
        "gf_err": 1e-7,
        "gd_err": [0.02, 0.01],
        "newton_vs_closed_form": 1e-15,
        "kkt_residual_gf": 1e-7,
        "wrong_err": {"unit_w0": 0.3, "sigma_from_a0": 1e-7, "delta_zero": 0.2},
        "wrong_differs": {"unit_w0": 0.3, "sigma_from_a0": 0.0, "delta_zero": 0.2},
    }
    res = [{"cases": [{**case, "name": "a"}, {**case, "name": "b"}]}]
    fig = figures.theorem2(analysis.theorem2_table(res, [0], [0.8, 0.4]), [0.8, 0.4])
    assert isinstance(fig, Figure) and len(_panels(fig)) == 2
    assert len(fig.axes[1].patches) == 2 * 4  # 4 bars per case


def test_theorem2_figure_lays_out_the_paper_cases_without_a_warning():
    """With the paper profile's six cases and three steps, the legends under the panels (fonts
    raised to the book's 9 pt) had grown wider than the panels: constrained layout gave up
    ("axes sizes collapsed to zero") and the panels were drawn a few pixels wide."""
    case = {
        "delta": 1.0,
        "sign_changed": False,
        "gf_err": 1e-7,
        "gd_err": [0.02, 0.01, 0.005],
        "newton_vs_closed_form": 1e-15,
        "kkt_residual_gf": 1e-7,
        "wrong_err": {"unit_w0": 0.3, "sigma_from_a0": 1e-7, "delta_zero": 0.2},
        "wrong_differs": {"unit_w0": 0.3, "sigma_from_a0": 0.0, "delta_zero": 0.2},
    }
    names = ["delta_pos", "delta_pos_large", "delta_zero", "delta_neg", "sign_change",
             "sign_change_small"]  # fmt: skip
    res = [{"cases": [{**case, "name": name} for name in names]}]
    etas = [0.8, 0.4, 0.2]
    fig = figures.theorem2(analysis.theorem2_table(res, [0], etas), etas)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = make_legible(fig)
    assert record["tick_overlaps"] == 0
    assert all(ax.get_position().width > 0.3 for ax in _panels(fig))
    # the cases in words, as a reader names them, never the profile's names
    words = ["$\\delta > 0$", "$\\delta > 0$, large", "$\\delta = 0$", "$\\delta < 0$",
             "sign change", "sign change, small"]  # fmt: skip
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == words
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:6] == words


def test_anti_ntk_figure():
    anti = [{"eps": [0.1, 0.01], "dist_l2": [1e-2, 1e-3], "slope": 1.0}]
    fig = figures.anti_ntk(anti, [0], 3)
    assert isinstance(fig, Figure) and len(_panels(fig)) == 1
    assert "k = 3" in fig.axes[0].get_title() and len(fig.axes[0].lines) == 2
    # eight problems' legend lies under the panel: inside, it covered their lines
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    legend = fig.axes[0].get_legend().get_window_extent(renderer)
    assert legend.y1 < fig.axes[0].get_window_extent(renderer).y0


def test_regimes_figure():
    rows = [
        {
            "seed": 0,
            "sweep": sweep,
            "alpha": a,
            "s": s,
            "gf_dist_l2": 0.1,
            "gf_dist_ntk": 0.2,
            "gf_vs_q": 1e-8,
        }
        for sweep, pts in (
            ("alpha", [[0.1, 1.0], [10.0, 1.0]]),
            ("shape", [[1.0, 10.0]]),
            ("alpha_zero_output", [[0.1, 1.0], [10.0, 1.0]]),
        )
        for a, s in pts
    ]
    theory = analysis.regime_theory(3, 7, 0)
    fig = figures.regimes(pd.DataFrame(rows), theory)
    assert isinstance(fig, Figure) and len(_panels(fig)) == 2
    assert len(fig.axes[0].lines) == 6 and len(fig.axes[1].lines) == 4  # + zero-output control
    assert fig._suptitle.get_text().endswith("problem 0")


def test_fig7_2_figure():
    grids = analysis.q_level_grids(
        {"alphas": [0.01, 1.0, 100.0], "shapes": [1.0, 10.0, 100.0], "n_grid": 9, "radius": 1.5}
    )
    fig = figures.fig7_2(grids)
    assert isinstance(fig, Figure) and len(_panels(fig)) == 6
    assert fig.axes[0].get_title().startswith("$\\alpha$ = 1, s = 1, mismatch")
    # two panels a row, three rows: the shapes down the left column, the scales down the right
    assert fig.get_size_inches()[1] <= 9.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained layout gives up with a warning
        make_legible(fig)
    boxes = [ax.get_position() for ax in fig.axes]
    assert len({round(b.x0, 2) for b in boxes}) == 2 and len({round(b.y0, 2) for b in boxes}) == 3
    left = [ax.get_title() for ax, b in zip(fig.axes, boxes, strict=True) if b.x0 < 0.5]
    assert all(title.startswith("$\\alpha$ = 1, s =") for title in left)
    assert all(b.width > 0.35 for b in boxes)  # each panel fills its half of the width
    # a single grid draws in the first panel
    one = [("a", fc.q_level_grid(1.0, 1.0, np.array([1.0, 0.0]), 9, 1.0))]
    assert isinstance(figures.fig7_2(one), Figure)
