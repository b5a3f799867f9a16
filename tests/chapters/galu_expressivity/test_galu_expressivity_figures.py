"""Tests of the figures of the chapter galu_expressivity: each figure function returns a matplotlib
Figure with the panels, titles and curves the chapter describes (on small synthetic frames)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from implicit_bias.chapters.galu_expressivity import analysis, figures, tasks
from implicit_bias.models import galu


@pytest.fixture(autouse=True)
def agg_backend():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def titles(fig: Figure) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def test_fig1_one_panel_per_dataset_and_a_curve_per_model():
    runs = [
        {"dataset": ds, "k": k, "seed": s, "models": list(galu.DEEP_MODELS)}
        for ds in ("mnist", "fashion_mnist")
        for k in (8, 16)
        for s in (0, 1)
    ]
    results = [
        {
            **{f"{m}_test_acc": 0.8 + 0.01 * i for i, m in enumerate(galu.DEEP_MODELS)},
            **{f"{m}_train_acc": 0.9 for m in galu.DEEP_MODELS},
        }
        for _ in runs
    ]
    fig = figures.fig1(analysis.fig1_frame(runs, results))
    assert isinstance(fig, Figure)
    assert titles(fig) == ["Fig. 1: MNIST, PCA to 64", "Fig. 1: Fashion-MNIST, PCA to 64"]
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == [figures.MODEL_LABELS[m] for m in galu.DEEP_MODELS]


def test_theorem1_two_panels():
    cfg = {
        "thm1_cases": [[24, 4, 3, "step"], [24, 4, 8, "sigmoid"]],
        "thm1_seeds": [0],
        "thm1_n_labels": 50,
        "thm1_rank_cases": [[24, 4, 3]],
        "thm1_few_gate_cases": [[16, 16, 1]],
        "thm1_low_dim_cases": [[32, 1, 4]],
        "thm1_rank_draws": 2,
    }
    runs = tasks.theorem1_tasks(cfg, "cpu")
    fig = figures.theorem1(analysis.theorem1_frame(runs, [tasks.theorem1_task(t) for t in runs]))
    assert isinstance(fig, Figure)
    assert titles(fig) == [
        "Theorem 1: formula vs Monte Carlo",
        "Rank statement: few 0-1 gates, low d",
    ]
    assert len(fig.axes[1].patches) == 6  # two (m, d, k) cases: three bars each


def test_fig2_four_curves_and_theorem1():
    df = pd.DataFrame(
        {
            "seed": 0,
            "k": [1, 2, 4],
            "galu": [0.9, 0.8, 0.6],
            "galu_2k": [0.8, 0.6, 0.2],
            "galu_alg1": [0.85, 0.75, 0.55],
            "relu": [0.85, 0.7, 0.5],
            "relu_converged": [True, True, False],
        }
    )
    fig = figures.fig2(df, 48, 4)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert titles(fig) == ["Fig. 2: memorizing N(0,1) labels (m = 48, d = 4)"]
    assert len(fig.axes[0].lines) == 5
    relu = next(line for line in fig.axes[0].lines if line.get_label().startswith("ReLU"))
    assert np.isnan(relu.get_ydata()[2])  # the unconverged run is not plotted


def test_fig3_regression_and_classification_panels():
    rows = [
        {
            "task": task,
            "seed": 0,
            "model": model,
            "noise": noise,
            "train": 0.1 * noise,
            "test": noise + 0.1,
            "test_clean": 0.1,
        }
        for task in ("regression", "classification")
        for model in figures.FIG3_LABELS
        for noise in (0.0, 0.5)
    ]
    fig = figures.fig3(pd.DataFrame(rows))
    assert isinstance(fig, Figure)
    assert titles(fig) == [
        "Fig. 3: cluster model, regression",
        "Fig. 3: cluster model, classification",
    ]
    # train, test and test on the clean labels for three models
    assert all(len(ax.lines) == 9 for ax in fig.axes)
    # one legend for both panels, under them (inside a panel, it covered the test errors)
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    below = fig.legends[0].get_window_extent(renderer).y1
    assert all(below < ax.get_window_extent(renderer).y0 for ax in fig.axes)


def test_fig4_gap_against_both_norms():
    df = pd.DataFrame(
        {
            "seed": [0, 0, 1, 1, 0, 0, 1],
            "sigma_y": [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
            "fit": ["closed_form"] * 4 + ["adam"] * 3,
            "gap": [0.1, 1.1, 0.2, 1.3, 0.1, 0.2, 0.1],
            "l2_sq": [1.0, 10.0, 2.0, 12.0, 1.0, 2.0, 3.0],
            "l1_sq": [3.0, 30.0, 5.0, 33.0, 3.0, 4.0, 5.0],
        }
    )
    fig = figures.fig4(df)
    assert isinstance(fig, Figure)
    assert titles(fig) == [r"Fig. 4: gap vs $\|w\|_2^2$", r"Fig. 4: gap vs $\|w\|_1^2$"]


def test_lemma1_two_panels():
    cfg = {
        "lemma1_d": 3,
        "lemma1_m_minus_d": [2, 5, 10],
        "lemma1_n_rep": 100,
        "lemma1_n_rep_d_plus_2": 100,
        "lemma1_sigma_small": 0.1,
        "lemma1_seed": 0,
    }
    runs = tasks.lemma1_tasks(cfg, "cpu")
    fig = figures.lemma1(analysis.lemma1_frame(runs, [tasks.lemma1_task(t) for t in runs]))
    assert isinstance(fig, Figure)
    assert titles(fig) == ["Lemma 1 on $D_{1,0}$ (d = 3)", "m = d + 2 = 5"]


def test_fig5_smallest_width_and_curves():
    runs = [{"d_out": dout, "seed": 0} for dout in (1, 2)]
    results = [
        {
            "k": [2, 4, 8],
            "galu_acs": [0.6, 0.4, 0.1],
            "acs_converged": [True, True, True],
            "galu_adam": [0.6, 0.2, 0.1],
            "galu_adam_converged": [True, True, True],
            "relu": [0.5, 0.2, 0.1],
            "relu_converged": [True, True, True],
        }
        for _ in runs
    ]
    curves, mins = analysis.fig5_frames(runs, results, 0.3)
    fig = figures.fig5(curves, mins, 0.3, 32, 4)
    assert isinstance(fig, Figure)
    assert titles(fig) == ["Fig. 5 (m = 32, d = 4)", "Training MSE against width"]
    assert fig.axes[0].get_legend_handles_labels()[1] == list(figures.FIG5_LABELS.values())
    assert list(figures.FIG5_LABELS) == list(analysis.FIG5_MODELS)
    right = fig.axes[1]
    assert right.get_legend_handles_labels()[1][:2] == ["d′ = 1: GaLU", "d′ = 1: ReLU"]
    fig.draw_without_rendering()  # the curves' legend under its panel, off the curves
    renderer = fig.canvas.get_renderer()
    legend = right.get_legend().get_window_extent(renderer)
    assert legend.y1 < right.get_window_extent(renderer).y0
