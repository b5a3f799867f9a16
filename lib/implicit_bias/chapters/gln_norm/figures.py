"""The gln_norm chapter's figures, one function each, returning a matplotlib Figure in the book's
style (the notebook saves it with `Chapter.save_figure`, beside the numbers it plots, which
`analysis` computes)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below
from implicit_bias.models.gln import predict_gln
from implicit_bias.models.gln_svm import SVMResult
from implicit_bias.models.gln_theory import toy_contexts

from .analysis import GLN_METHODS, GLN_SVMS, RELU_METHODS, RELU_SVMS, toy_zetas

METHOD_COLORS = {
    "GD-GLN": 7,
    "SVM-GLN": 0,
    "SVM-L2": 1,
    "SVM-L2-eq23": 4,
    "GD-ReLU": 7,
    "SVM-RC": 1,
    "SVM-LC": 0,
    "SVM-HL": 2,
    "GD-shallow-GLN": 3,
    "SVM-shallow": 5,
}


def _color(method: str) -> str:
    return PALETTE[METHOD_COLORS.get(method, 6)]


def _palette(i: int) -> str:
    return PALETTE[i]


# ----------------------------------------------------------------------------------------------
# Theorem 3.1 on the toy problem (Fig. 1)
# ----------------------------------------------------------------------------------------------


def fig1_toy(problem: dict, snap: dict, svm: SVMResult) -> Figure:
    """Fig. 1: the toy GLN (H = C = 2): data and the two units' contexts; the GD-GLN's output
    and its four per-region predictors; the SVM-GLN's output."""
    fig, axes = figure(1, 3)
    axes = np.ravel(axes)
    X, y = problem["X"], problem["y"]
    g = np.linspace(-1, 1, 201)
    gx, gy = np.meshgrid(g, g)
    grid = np.stack([gx.ravel(), gy.ravel(), np.ones(gx.size)], 1)
    gctx = toy_contexts(grid)
    ax = axes[0]
    for label, color in ((1, 0), (-1, 1)):
        sel = y == label
        ax.scatter(X[sel, 0], X[sel, 1], s=14, color=_palette(color), label=f"y = {label:+d}")
    ax.axvline(0, color="0.4", lw=1, ls="--", label="unit 1 context boundary")
    ax.axhline(0, color="0.4", lw=1, ls=":", label="unit 2 context boundary")
    ax.set(title="Fig. 1d-f: data and contexts", xlabel="$x_1$", ylabel="$x_2$")
    legend_below(ax, ncol=2, fontsize=6)  # inside, it covered data points
    for ax, (name, z) in zip(axes[1:], toy_zetas(snap, svm).items()):
        f = predict_gln(z, grid, gctx).reshape(gx.shape)
        ax.contourf(
            gx, gy, np.sign(f), levels=[-2, 0, 2], colors=[_palette(1), _palette(0)], alpha=0.25
        )
        ax.contour(gx, gy, f, levels=[0], colors="k", linewidths=1.2)
        ax.scatter(X[:, 0], X[:, 1], s=8, c=[_palette(0 if v > 0 else 1) for v in y])
        ax.axvline(0, color="0.4", lw=0.8, ls="--")
        ax.axhline(0, color="0.4", lw=0.8, ls=":")
        ax.set(title=f"Fig. 1g: {name}", xlabel="$x_1$", ylabel="$x_2$")
    return fig


def theorem31(traj: pd.DataFrame) -> Figure:
    """Theorem 3.1 numerically: GD's normalized predictor approaches the SVM-GLN solution, and
    the approximate KKT residuals of Eq. 7 shrink."""
    fig, axes = figure(1, 2, height=3.6)  # room for the legends under the panels
    axes = np.ravel(axes)
    t = traj[traj["step"] > 0]
    ax = axes[0]
    ax.plot(
        t["step"], 1 - t["cos_zeta"], "o-", color=_palette(0), label=r"1 - cos($\zeta$, $\zeta^*$)"
    )
    ax.plot(
        t["step"], 1 - t["cos_beta"], "s-", color=_palette(2), label=r"1 - cos($\beta$, $\beta^*$)"
    )
    ax.plot(
        t["step"],
        1 - t["margin_ratio"],
        "^-",
        color=_palette(1),
        label="1 - normalized margin / SVM's",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="full-batch GD step",
        title="Theorem 3.1: distance to SVM-GLN",
    )
    legend_below(ax, fontsize=7)  # inside, it covered the margin's curve
    ax = axes[1]
    ax.plot(t["step"], t["stationarity"], "o-", color=_palette(3), label="stationarity (Eq. 7)")
    ax.plot(
        t["step"],
        t["complementary_slackness"],
        "s-",
        color=_palette(4),
        label="complementary slackness",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="full-batch GD step",
        ylabel="residual",
        title="Eq. 7: approximate KKT residuals",
    )
    legend_below(ax, fontsize=7)
    return fig


# ----------------------------------------------------------------------------------------------
# Errors and inconsistency of the SVMs against the network (Fig. 2a, b; 3a, b; 4a, b; 5)
# ----------------------------------------------------------------------------------------------


def _errorbar(ax, x, y, xerr, yerr, method, label=None, marker="o", alpha=1.0, **kw):
    ax.errorbar(
        x,
        y,
        xerr=xerr,
        yerr=yerr,
        fmt=marker,
        ms=4,
        color=_color(method),
        label=label or method,
        alpha=alpha,
        elinewidth=0.8,
        capsize=0,
        **kw,
    )


def _errors_and_inconsistency(
    table: pd.DataFrame, ref: pd.DataFrame | None, x_method: str, methods, title: str
) -> Figure:
    """(a) error of the network vs. the SVMs' and (b) inconsistency vs. the network's error,
    with the grey line 2p(1-p); config means ± 1 s.e. over seeds (`analysis.pair_table`). The
    authors' numbers (hollow markers) where they exist."""
    fig, axes = figure(1, 2, width=7.6, height=4.4)  # room for the legends under the panels
    axes = np.ravel(axes)
    for m in methods:
        t = table[table["method"] == m]
        _errorbar(axes[0], t["gd_error"], t["val_error"], t["gd_error_se"], t["val_error_se"], m)
        _errorbar(
            axes[1], t["gd_error"], t["inconsistency"], t["gd_error_se"], t["inconsistency_se"], m
        )
    if ref is not None and len(ref):
        for m in methods:
            r = ref[ref["method"] == m].dropna(subset=["val_error_mean"])
            if not len(r):
                continue
            axes[0].scatter(
                r["gd_ref_val_error_mean"],
                r["val_error_mean"],
                s=16,
                facecolors="none",
                edgecolors=_color(m),
                label=f"{m} (authors')",
            )
            axes[1].scatter(
                r["gd_ref_val_error_mean"],
                r["inconsistency_mean"],
                s=16,
                facecolors="none",
                edgecolors=_color(m),
                label=f"{m} (authors')",
            )
    values = np.concatenate([table["gd_error"], table["val_error"]])
    lo, hi = 0.8 * float(np.nanmin(values)), 1.1 * float(np.nanmax(values))
    if ref is not None and len(ref):
        lo = min(lo, 0.8 * float(np.nanmin(ref["val_error_mean"])))
        hi = max(hi, 1.05 * float(np.nanmax(ref["val_error_mean"])))
    line = np.linspace(lo, hi, 50)
    axes[0].plot(line, line, color="0.6", lw=1, zorder=0, label="identical error")
    axes[1].plot(
        line, 2 * line * (1 - line), color="0.6", lw=1, zorder=0, label="2p(1-p): uncorrelated"
    )
    axes[0].set(
        xlabel=f"{x_method} validation error",
        ylabel="SVM validation error",
        title=f"{title}a: errors",
    )
    axes[1].set(
        xlabel=f"{x_method} validation error",
        ylabel=f"inconsistency with {x_method}",
        title=f"{title}b: inconsistency",
    )
    for ax in axes:  # inside, they covered points and the reference curve
        legend_below(ax, ncol=2, fontsize=6)
    return fig


def fig2ab(table: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 2a, b: the deep GLN's SVMs against the GD-GLN, with median init (`ref`: the
    authors' configuration means, `analysis.deep_reference`)."""
    return _errors_and_inconsistency(table, ref, "GD-GLN", GLN_SVMS, "Fig. 2")


def fig4ab_no_mi(table: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 4a, b: as Fig. 2a, b without median initialization."""
    return _errors_and_inconsistency(table, ref, "GD-GLN", GLN_SVMS, "Fig. 4 (no MI)")


def fig3ab(table: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 3a, b (Fig. 5's momentum-0 panels): the FReLU and hidden-layer SVMs against the
    GD-ReLU at momentum 0 (`ref`: the authors' cell means, `reference.load_relu_reference`)."""
    return _errors_and_inconsistency(table, ref, "GD-ReLU", RELU_SVMS, "Fig. 3")


def fig5ab(table: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """As Fig. 3a, b with momentum 0.9 (the paper's Fig. 3 setting)."""
    return _errors_and_inconsistency(table, ref, "GD-ReLU", RELU_SVMS, "Fig. 5 (momentum 0.9)")


# ----------------------------------------------------------------------------------------------
# Error against the number of hidden units (Fig. 2d, 3d, 4c)
# ----------------------------------------------------------------------------------------------


def _error_vs_h(
    summary: pd.DataFrame, ref: pd.DataFrame | None, methods, C: int, title: str
) -> Figure:
    """Validation error vs. number of hidden units, one panel per N; ours solid (± 1 s.e.,
    the numbers of `analysis.error_vs_h`), the authors' dashed."""
    Ns = sorted(summary["N"].unique())
    fig, axes = figure(1, len(Ns), width=max(3.4 * len(Ns), 3.8))
    axes = np.atleast_1d(axes).ravel()
    for ax, N in zip(axes, Ns):
        for m in methods:
            s = summary[
                (summary["method"] == m) & (summary["N"] == N) & (summary["C"] == C)
            ].sort_values("H")
            if not len(s):
                continue
            ax.errorbar(
                s["H"],
                s["val_error_mean"],
                yerr=s["val_error_se"],
                marker="o",
                ms=4,
                color=_color(m),
                label=m,
            )
            if ref is not None:
                r = ref[
                    (ref["method"] == m) & (ref["N"] == N) & (ref["C"] == C) & (ref["n_files"] > 0)
                ].sort_values("H")
                if len(r):
                    ax.plot(
                        r["H"],
                        r["val_error_mean"],
                        ls="--",
                        marker="x",
                        ms=4,
                        color=_color(m),
                        label=f"{m} (authors')",
                    )
        ax.set(
            xscale="log",
            xlabel="hidden units H",
            ylabel="validation error",
            title=f"{title}: C = {C}, N = {N}",
        )
        hs = sorted(summary["H"].unique())
        ax.set_xticks(hs, [str(int(h)) for h in hs])
        ax.minorticks_off()
        legend_below(ax, ncol=2, fontsize=6, offset=0.3)  # in the panel it covered curves
    return fig


def fig2d(summary: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 2d: GD-GLN and its SVMs against H with C = 2 (`analysis.mi_summary`)."""
    return _error_vs_h(summary, ref, GLN_METHODS, 2, "Fig. 2d")


def fig4c_c4(summary: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 4c: as Fig. 2d with C = 4 contexts per unit."""
    return _error_vs_h(summary, ref, GLN_METHODS, 4, "Fig. 4c")


def fig3d(summary: pd.DataFrame, ref: pd.DataFrame | None = None) -> Figure:
    """Fig. 3d: the GD-ReLU and its SVMs against H (`analysis.relu_summary`; `ref`: the authors'
    cell means at the same momentum)."""
    return _error_vs_h(summary, ref, RELU_METHODS, 2, "Fig. 3d")


# ----------------------------------------------------------------------------------------------
# Best models per training size (Fig. 2c, 3c)
# ----------------------------------------------------------------------------------------------


def _best_models(
    best: pd.DataFrame, ref_best: pd.DataFrame | None, title: str, squares: tuple = ()
) -> Figure:
    """The best model of each kind per training size (min over hyperparameters per seed, mean
    ± 1 s.e. over seeds; `analysis.best_table`); the authors' numbers dashed; the labels in
    `squares` with square markers (a second family of models in the same colours)."""
    fig, ax = figure(1, 1, width=6.4)
    for m, s in best.groupby("label", sort=False):
        ax.errorbar(
            s["N"],
            s["mean"],
            yerr=s["se"],
            marker="s" if m in squares else "o",
            ms=4,
            color=_color(s["method"].iloc[0]),
            label=m.replace("<=", "≤"),  # the frames' query words, typeset
        )
    if ref_best is not None:
        for m, s in ref_best.groupby("label", sort=False):
            ax.plot(
                s["N"],
                s["mean"],
                ls="--",
                marker="x",
                ms=4,
                color=_color(s["method"].iloc[0]),
                label=f"{m} (authors')".replace("<=", "≤"),
            )
    ax.set(
        xscale="log",
        xlabel="training set size N",
        ylabel="best validation error",
        title=f"{title}: best models",
    )
    ns = sorted(best["N"].unique())
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.minorticks_off()
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the curves
    return fig


def fig2c(best: pd.DataFrame, ref_best: pd.DataFrame | None = None) -> Figure:
    """Fig. 2c: best shallow vs deep GLNs (`analysis.best_gln`; `ref_best`:
    `reference.reference_best`)."""
    return _best_models(best, ref_best, "Fig. 2c")


def fig3c(best: pd.DataFrame) -> Figure:
    """Fig. 3c: best ReLU models vs deep GLNs of similar size (`analysis.best_relu`; the deep
    GLNs with square markers)."""
    gln = tuple(label for label in best["label"].unique() if label.startswith("deep GLN"))
    return _best_models(best, None, "Fig. 3c", squares=gln)


# ----------------------------------------------------------------------------------------------
# Finite against infinite time (Discussion)
# ----------------------------------------------------------------------------------------------


def finite_time(summary: pd.DataFrame) -> Figure:
    """The GD-GLN trained past the paper's step count (dotted line) at the final learning rate:
    (a) its inconsistency with the SVM-GLN of the same seed, (b) its validation error (solid)
    beside the SVM-GLN's (dashed); means ± 1 s.e. over seeds (`analysis.finite_time_summary`)."""
    fig, axes = figure(1, 2, width=7.2)
    a, b = axes[0]
    for i, ((H, N), s) in enumerate(summary.groupby(["H", "N"])):
        s, color, cell = s.sort_values("steps"), _palette(i), f"H = {H}, N = {N}"
        a.errorbar(
            s["steps"], s["inconsistency_mean"], yerr=s["inconsistency_se"], marker="o", ms=4,
            color=color, label=cell,
        )  # fmt: skip
        b.errorbar(
            s["steps"], s["val_error_mean"], yerr=s["val_error_se"], marker="o", ms=4,
            color=color, label=f"GD-GLN, {cell}",
        )  # fmt: skip
        b.axhline(s["svm_val_error_mean"].iloc[0], ls="--", lw=1, color=color)
    for ax in (a, b):
        ax.axvline(summary["steps"].min(), color="0.6", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        steps = sorted(summary["steps"].unique())
        ax.set_xticks(steps, [f"{int(t):,}" for t in steps])
        ax.minorticks_off()
        ax.set_xlabel("SGD steps (dotted: the paper's)")
        legend_below(ax, ncol=1, fontsize=6, offset=0.3)  # in it, it covered the SVM-GLN's
    a.set(ylabel="inconsistency with SVM-GLN", title="(a) GD-GLN against SVM-GLN")
    b.set(ylabel="validation error", title="(b) GD-GLN (solid), SVM-GLN (dashed)")
    return fig


# the names `analysis.norm_checks` gives its checks in ASCII, in the paper's notation
NOTATION = (
    (
        "||beta||^2: C^(H-2) zeta'M zeta vs enumeration",
        "‖β‖² = Cᴴ⁻² ζᵀMζ (Eq. 24) against enumeration",
    ),
    (
        "||beta||^2: C^(H-2) ||A zeta||^2 (Eq. 23/25)",
        "‖β‖² = Cᴴ⁻² ‖Aζ‖² (Eqs. 23, 25) against enumeration",
    ),
    ("max |A^2 - M|, Eq. 25 coefficients", "largest |A² − M|, Eq. 25's coefficients"),
    ("max |A^2 - M|, corrected coefficients", "largest |A² − M|, corrected coefficients"),
    (" vs ", " against "),
    ("H=", "H = "),
    (", C=", ", C = "),
    (" C=", ", C = "),
)


def in_notation(table: pd.DataFrame) -> pd.DataFrame:
    """The table of norm identities with its checks named in the paper's notation."""
    named = table.copy()
    for ascii_name, name in NOTATION:
        named["check"] = named["check"].str.replace(ascii_name, name, regex=False)
    return named
