"""Tests of the figures of the tensor-networks chapter: each returns a Figure with the expected
axes, drawn from small made-up frames."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from implicit_bias.chapters.tensor_networks import analysis, figures
from implicit_bias.core.site.plotting import PALETTE

STEPS = [1, 10, 100]


@pytest.fixture()
def cls():
    tasks, runs = [], []
    for arch in ("diag", "conv", "fc"):
        for L in (2, 3):
            tasks.append({"arch": arch, "L": L, "data_seed": 0})
            runs.append(
                {
                    "reference": "ref",
                    "steps": STEPS,
                    "log_inv_loss": [1.0, 10.0, 1e3],
                    "cosine_gap": [0.1, 0.01, 0.0],
                    "final_cosine_gap": 0.0,
                    "thm1_kkt_residual": 1e-3,
                    "thm1_kkt_residual_path": [1.0, 0.1, 1e-3],
                    "thm1_uavg_residual": 0.1,
                    "fourier_magnitudes": [1.0, 0.5, 0.0],
                }
            )
    yield analysis.classification_frame(tasks, runs)
    plt.close("all")


def _titles(fig):
    return [ax.get_title() for ax in fig.axes]


def test_plot_by_group_draws_one_line_per_group_at_the_floor():
    fig, ax = plt.subplots()
    frame = pd.DataFrame(
        {
            "x": [0, 1, 2, 1, 2],
            "y": [1.0, 0.0, 1.0, 2.0, 3.0],
            "g": ["diag L=2"] * 3 + ["fc L=4"] * 2,
        }
    )
    figures.plot_by_group(ax, frame, "x", "y", "g", floor=1e-9)
    lines = ax.get_lines()
    # the runs in words, never the program's "diag L=2"
    assert [line.get_label() for line in lines] == ["diagonal, L = 2", "fully connected, L = 4"]
    np.testing.assert_array_equal(lines[0].get_xdata(), [1, 2])  # x = 0 dropped
    np.testing.assert_array_equal(lines[0].get_ydata(), [1e-9, 1.0])  # zero at the floor
    plt.close(fig)


def test_every_run_of_a_seed_is_drawn_differently():
    """3 architectures x depths 2-4 (the paper profile's 9 runs of a seed): no two share both
    colour and line style (a palette cycled by run index repeated one)."""
    runs = [f"{a} L={L}" for a in ("diag", "conv", "fc") for L in (2, 3, 4)]
    styles = {(figures.run_style(r)["color"], figures.run_style(r)["linestyle"]) for r in runs}
    assert len(styles) == len(runs)
    assert {figures.run_style(r)["color"] for r in runs} <= set(PALETTE)


def test_classification_figures(cls):
    fig = figures.thm1_residuals(analysis.residual_paths(cls), cls, seed=0)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert _titles(fig) == [
        "Theorem 1: residual along training",
        r"Theorem 1: two estimates of $u_\infty$",
    ]
    assert len(fig.axes[0].get_lines()) == 6
    # the right panel: each estimate one point per run, over its case's column
    points = [len(c.get_offsets()) for c in fig.axes[1].collections]
    cases = {(a, int(L)) for a, L in zip(cls["arch"], cls["L"])}
    assert points == [len(cls), len(cls)]
    assert len(fig.axes[1].get_xticks()) == len(cases)
    fig = figures.cor123_convergence(analysis.cosine_curves(cls), seed=0)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [ax.get_xlabel() for ax in fig.axes] == ["GD step", "log(1 / loss)"]
    fig = figures.cor3_fourier_spectra(analysis.fourier_spectra(cls), seed=0)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert fig.axes[0].get_xscale() == "linear" and fig.axes[0].get_yscale() == "log"


def test_lemma4_figure():
    curves = analysis.hl_curves(Ls=(2, 3), grid=np.linspace(-6, 6, 13))
    ode = pd.DataFrame({"L": [2, 3], "tau": [0.5, 0.5], "h_ode": [0.6, 0.7], "H_ode": [0.2, 0.3]})
    fig = figures.lemma4_hl(curves, ode)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert _titles(fig) == ["Lemma 4: $h_L^{-1}$ (dots: ODE)", "Thm 5: $H_L$ (dots: ODE)"]
    assert len(fig.axes[1].get_lines()) == 2 * 2 + 1  # curves, ODE dots, t^2 / 2
    np.testing.assert_array_equal(fig.axes[1].get_lines()[-1].get_xdata(), np.linspace(-6, 6, 13))
    plt.close(fig)


def test_argument_figure():
    bars = pd.DataFrame(
        {
            "arch": ["diag", "diag", "conv"],
            "L": [2, 2, 2],
            "seed": [0, 0, 0],
            "formula": ["error_derived", "error_thm5_printed", "error_derived"],
            "relative_error": [1e-3, 0.1, 2e-3],
        }
    )
    fig = figures.thm5_argument(bars)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert fig.axes[0].get_yscale() == "log" and len(fig.axes[0].collections) == 2
    # one column per case (architecture and depth), its runs over it: diag L = 2 at x near 1
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["conv\nL=2", "diag\nL=2"]  # abbreviated: 5 inches wide, it fits a phone
    assert fig.get_figwidth() <= 5.0
    xs = [float(x) for c in fig.axes[0].collections for x, _ in c.get_offsets()]
    assert sorted(round(x) for x in xs) == [0, 1, 1]
    fig.canvas.draw()  # the y label lies inside the figure (it was cut at the old height)
    box = fig.axes[0].yaxis.label.get_window_extent()
    assert box.y0 >= 0 and box.y1 <= fig.bbox.height
    plt.close(fig)


def test_alpha_sweep_figure():
    theory = pd.DataFrame(
        {
            "L": [2, 2, 3, 3],
            "alpha": [0.1, 1.0, 0.1, 1.0],
            "distance_l1": [0.1, 0.5, 0.01, 0.5],
            "distance_l2": [0.5, 0.0, 0.5, 0.1],
        }
    )
    gd = theory.assign(error_derived=1e-3)
    fig = figures.cor5_alpha_sweep(theory, gd, depths=[2, 3])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert _titles(fig) == [
        "Cor. 5: limit vs. min-$\\ell_1$ interpolator",
        "Cor. 5: limit vs. min-$\\ell_2$ interpolator",
    ]
    assert all(len(ax.get_lines()) == 4 for ax in fig.axes)
    plt.close(fig)
