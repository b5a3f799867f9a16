"""Tests of the gln_norm chapter's figures (`implicit_bias.chapters.gln_norm.figures`): each
draws from the tables of `analysis` and returns a Figure with the expected panels."""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from implicit_bias.chapters.gln_norm import analysis, figures, reference
from implicit_bias.models import gln_svm, gln_theory

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny tensors: one thread avoids oversubscribing a small shared CPU (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _titles(fig: Figure) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def _frame() -> pd.DataFrame:
    rows = []
    for method, base in (("GD-GLN", 0.2), ("SVM-GLN", 0.18), ("SVM-L2", 0.25)):
        for H, seed in itertools.product((10, 20), (0, 1)):
            rows.append(
                {
                    "method": method,
                    "depth": "deep",
                    "H": H,
                    "C": 2,
                    "N": 5,
                    "median_init": True,
                    "momentum": 0.0,
                    "seed": seed,
                    "val_error": base + 0.01 * seed,
                    "gd_val_error": 0.2,
                    "inconsistency": None if method == "GD-GLN" else 0.1,
                }
            )
    return pd.DataFrame(rows)


def _relu() -> pd.DataFrame:
    rows = []
    for H, N, momentum, seed in itertools.product((10, 20), (50, 100), (0.0, 0.9), (0, 1)):
        base = {"H": H, "N": N, "momentum": momentum, "seed": seed, "status": "ok"}
        rows.append({"method": "GD-ReLU", **base, "val_error": 0.2 + 0.01 * seed})
        for method, shift in (("SVM-RC", 0.03), ("SVM-LC", 0.01), ("SVM-HL", 0.0)):
            rows.append(
                {
                    "method": method,
                    **base,
                    "val_error": 0.2 + shift + 0.01 * seed,
                    "inconsistency": 0.05 + shift,
                    "incons_uncorrelated": 0.32,
                    "gd_val_error": 0.2 + 0.01 * seed,
                }
            )
    return pd.DataFrame(rows)


def test_figures_draw_from_result_tables():
    frame = _frame()
    table = analysis.pair_table(frame, methods=("SVM-GLN", "SVM-L2"))
    assert set(table["method"]) == {"SVM-GLN", "SVM-L2"} and len(table) == 4
    assert isinstance(figures.fig2ab(table), Figure)
    data = analysis.error_vs_h(analysis.summarize(frame), ["GD-GLN", "SVM-GLN"])
    assert len(data) == 4
    assert isinstance(figures.fig2d(analysis.summarize(frame)), Figure)
    best = analysis.best_table(frame, {"SVM-GLN": "deep GLN, SVM-GLN"})
    assert best["mean"].iloc[0] == pytest.approx(0.185)
    assert isinstance(figures.fig2c(best), Figure)


def test_toy_figures():
    p = gln_theory.toy_problem(20, seed=2)
    svm = gln_svm.svm_gln(p["X"], p["y"], p["ctx"], 2)
    snaps = gln_theory.train_full_batch_gln(
        p["X"], p["y"], p["ctx"], 2, 400, 0.5, record=[0, 100, 400]
    )
    fig = figures.fig1_toy(p, snaps[-1], svm)
    assert _titles(fig) == [
        "Fig. 1d-f: data and contexts",
        "Fig. 1g: GD-GLN (trained)",
        "Fig. 1g: SVM-GLN (Eq. 52)",
    ]
    traj = pd.DataFrame(gln_theory.theorem_trajectory(p, snaps, svm))
    fig = figures.theorem31(traj)
    assert _titles(fig) == ["Theorem 3.1: distance to SVM-GLN", "Eq. 7: approximate KKT residuals"]


def test_errors_and_inconsistency_figures():
    frame = _frame()
    table = analysis.pair_table(frame)
    ref = reference.load_reference()
    fig = figures.fig2ab(table, analysis.deep_reference(ref, median_init=True))
    assert _titles(fig) == ["Fig. 2a: errors", "Fig. 2b: inconsistency"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "SVM-GLN (authors')" in labels  # the authors' configuration means, hollow
    fig = figures.fig4ab_no_mi(table, analysis.deep_reference(ref, median_init=False))
    assert _titles(fig) == ["Fig. 4 (no MI)a: errors", "Fig. 4 (no MI)b: inconsistency"]
    relu = _relu()
    fig = figures.fig3ab(analysis.relu_pair_table(relu, momentum=0.0))
    assert _titles(fig) == ["Fig. 3a: errors", "Fig. 3b: inconsistency"]
    assert fig.axes[1].get_ylabel() == "inconsistency with GD-ReLU"
    fig = figures.fig5ab(analysis.relu_pair_table(relu, momentum=0.9))
    assert _titles(fig) == [
        "Fig. 5 (momentum 0.9)a: errors",
        "Fig. 5 (momentum 0.9)b: inconsistency",
    ]
    ref_relu = reference.load_relu_reference()
    fig = figures.fig5ab(
        analysis.relu_pair_table(relu, momentum=0.9), ref_relu[ref_relu["momentum"] == 0.9]
    )
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    for m in ("SVM-RC", "SVM-LC", "SVM-HL"):
        assert f"{m} (authors')" in labels  # the authors' published ReLU cell means


def test_error_vs_h_figures_have_one_panel_per_training_size():
    base = pd.concat([_frame(), _frame().assign(N=10)])
    frame = pd.concat([base, base.assign(C=4)])
    mi = analysis.mi_summary(analysis.summarize(frame))
    ref = reference.load_reference()
    fig = figures.fig2d(mi, ref[ref["median_init"]])
    assert _titles(fig) == ["Fig. 2d: C = 2, N = 5", "Fig. 2d: C = 2, N = 10"]
    fig = figures.fig4c_c4(mi)
    assert _titles(fig) == ["Fig. 4c: C = 4, N = 5", "Fig. 4c: C = 4, N = 10"]
    rs = analysis.relu_summary(_relu())
    fig = figures.fig3d(rs)
    assert _titles(fig) == ["Fig. 3d: C = 2, N = 50", "Fig. 3d: C = 2, N = 100"]
    ref_relu = reference.load_relu_reference()
    fig = figures.fig3d(rs.assign(N=500), ref_relu[ref_relu["momentum"] == 0.0])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "GD-ReLU (authors')" in labels
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["10", "20"]


def test_best_model_figures():
    frame, relu = _frame(), _relu()
    fig = figures.fig2c(
        analysis.best_table(frame, {"SVM-GLN": "deep GLN, SVM-GLN"}), reference.reference_best()
    )
    assert _titles(fig) == ["Fig. 2c: best models"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "deep GLN, SVM-GLN" in labels and "shallow GLN, GD (authors')" in labels
    fig = figures.fig3c(analysis.best_relu(relu, frame))
    assert _titles(fig) == ["Fig. 3c: best models"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # the frames' labels, their comparison words typeset ("H ≤ 50", not "H <= 50")
    assert labels == [v.replace("<=", "≤") for v in analysis.RELU_BEST_LABELS.values()]
    assert not any("<=" in label for label in labels)
    assert np.all(np.isfinite(fig.axes[0].get_xlim()))


def test_finite_time_figure_has_one_line_per_cell_and_the_checkpoints_as_ticks():
    rows = [
        {"H": H, "C": 2, "N": N, "seed": s, "steps": t, "val_error": 0.2, "svm_val_error": 0.19,
         "inconsistency": 0.1 - 0.01 * k + 0.001 * s, "train_error": 0.0, "train_loss": 0.1}
        for H in (10, 20) for N in (500,) for s in (0, 1) for k, t in enumerate((3200, 6400))
    ]  # fmt: skip
    fig = figures.finite_time(analysis.finite_time_summary(pd.DataFrame(rows)))
    a, b = fig.axes
    assert [t.get_text() for t in a.get_legend().get_texts()] == [
        "H = 10, N = 500",
        "H = 20, N = 500",
    ]
    assert [t.get_text() for t in a.get_xticklabels()] == ["3,200", "6,400"]
    assert len(b.lines) >= 4  # two GD lines, two SVM-GLN levels (and the paper's step count)


def test_the_identity_checks_are_named_in_the_papers_notation():
    """No ASCII maths left in the check names (can fail: the table as analysis names it)."""
    from implicit_bias.chapters.gln_norm import analysis, figures

    table, _ = analysis.norm_checks()
    named = figures.in_notation(table)["check"]
    assert not named.str.contains(r"\|\||\^|zeta|beta| vs |=\d", regex=True).any(), list(named)
    assert named.str.contains("‖β‖² = Cᴴ⁻² ζᵀMζ").any() and len(named) == len(table)
    assert table["check"].str.contains("zeta").any()  # the input is left as it was
