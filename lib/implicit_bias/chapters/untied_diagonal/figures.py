"""The chapter's figures, one function each, returning a matplotlib Figure in the book's style
(the notebook saves it with `Chapter.save_figure`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below, power_of_ten

# Theorem 1's initializations in words (the analysis names them for the program)
INIT_NAMES = {"v0_zero": "$v_0 = 0$"}

# ----------------------------------------------------------------------------------------------
# Panels (axes in, nothing returned)
# ----------------------------------------------------------------------------------------------

# Gradient flow stops once its relative residual and KKT residual are below gf_tol = 1e-9, so
# its distance to argmin Q is ~1e-9 times the problem's conditioning, set by the chunk at which
# it stopped (CPU-dependent), not by Theorem 1: below this floor it is drawn at the floor.
GF_ERROR_FLOOR = 1e-8


def _plot_theorem1(ax, frame: pd.DataFrame, palette) -> None:
    """GD limit's relative distance to argmin Q against the relative step, one line per init
    (seed 0), with the gradient-flow error as a marker at the left edge, drawn at no less than
    GF_ERROR_FLOOR: below it the error reflects where the flow stopped (its tolerance), not the
    theorem, and would otherwise set the axis and move the whole picture."""
    cols = [c for c in frame.columns if c.startswith("gd_error_step_")]
    steps = [float(c.removeprefix("gd_error_step_")) for c in cols]
    first = frame[frame["seed"] == frame["seed"].min()]
    for color, (_, row) in zip(palette, first.iterrows()):
        ax.loglog(
            steps,
            row[cols].to_numpy(float),
            "o-",
            color=color,
            label=INIT_NAMES.get(row["init"], row["init"]),
        )
        ax.loglog(
            [min(steps) / 2], [max(row["gf_error"], GF_ERROR_FLOOR)], "s", color=color, mfc="none"
        )
    ax.axhline(GF_ERROR_FLOOR, color="0.6", lw=0.8, ls=":")
    ax.annotate(
        "gradient flow: at or below this line",
        (min(steps) / 2, GF_ERROR_FLOOR),
        textcoords="offset points",
        xytext=(2, 2),  # above the line: below it, the text crossed the axis
        fontsize=6,
        color="0.4",
    )
    ax.set_xlabel("relative step size (1 = stability edge)")
    ax.set_ylabel(r"$\|\beta_{GD} - \beta_Q\| / \|\beta_Q\|$")
    # below the panel: inside, it met the gradient-flow floor's label and the lines
    legend_below(ax, ncol=3, title="open squares: gradient flow", title_fontsize=7)


def _plot_q_shape(ax, frame: pd.DataFrame, palette) -> None:
    """Normalized Q_m(b) / Q_m(1) for several m, with |b| and b^2 (App. E)."""
    ax.plot(frame["beta"], frame["abs"], "k--", lw=1, label=r"$|\beta|$")
    ax.plot(frame["beta"], frame["square"], "k:", lw=1, label=r"$\beta^2$")
    for color, col in zip(palette, [c for c in frame.columns if c.startswith("m=")]):
        m = float(col.removeprefix("m="))
        ax.plot(frame["beta"], frame[col], color=color, label=f"m = {power_of_ten(m)}")
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"$Q_m(\beta) / Q_m(1)$")
    ax.set_ylim(0, 2.3)
    ax.legend(fontsize=7, loc="upper center")  # above the cusp at 0, where no curve reaches


def _plot_distances(ax, frame: pd.DataFrame, x: str, palette, xlabel: str) -> None:
    """Relative distance of the GD limit to the min-L1 and min-L2 interpolators (mean over
    seeds) against scale or shape."""
    mean = frame.groupby(x)[["dist_l1", "dist_l2"]].mean().reset_index()
    ax.loglog(mean[x], mean["dist_l1"], "o-", color=palette[0], label="to min-$\\ell_1$")
    ax.loglog(mean[x], mean["dist_l2"], "s-", color=palette[1], label="to min-$\\ell_2$")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("relative distance")
    ax.legend(fontsize=7, loc="lower left")  # at small scale or shape both curves lie high


def _plot_fig71(fig, ax, table: pd.DataFrame) -> None:
    """Fig. 7.1: heatmap of the population error over log scale and log shape, s = 1 dashed."""
    grid = table.pivot(index="alpha", columns="shape", values="pop_error_gd")
    la, ls = np.log10(grid.index.to_numpy()), np.log10(grid.columns.to_numpy())

    def edges(v):
        h = (v[1] - v[0]) / 2 if len(v) > 1 else 0.5
        return np.concatenate([v - h, [v[-1] + h]])

    mesh = ax.pcolormesh(edges(ls), edges(la), grid.to_numpy(), cmap="viridis", shading="flat")
    fig.colorbar(mesh, ax=ax, label=r"population error $\|\beta - \beta^*\|^2$")
    ax.axvline(0.0, color="white", ls="--", lw=1.2)
    # a cross on each cell whose mean holds a run stopped by the step cap (no claim rests on
    # it): white with a dark edge, seen on viridis' dark and light ends alike
    stopped = table[table[STOPPED] > 0]
    if len(stopped):
        ax.plot(
            np.log10(stopped["shape"]),
            np.log10(stopped["alpha"]),
            "X",
            ms=5,
            mfc="white",
            mec="black",
            mew=0.6,
            ls="none",
            label=STOPPED_LABEL,
        )
        legend_below(ax, offset=0.2)
    ax.set_xlabel(r"shape $\log_{10} s$,  $s = |u_0 / v_0|$")
    ax.set_ylabel(r"scale $\log_{10} \alpha$,  $\alpha = |u_0 v_0|$")


def _plot_collapse(ax, table: pd.DataFrame, palette) -> None:
    """Population error against m = alpha (s + 1/s): GD (dots) on Theorem 1's curve (line)."""
    t = table.sort_values("m")
    ax.semilogx(t["m"], t["pop_error_q"], "-", color=palette[1], label="Theorem 1 (argmin Q)")
    done = t[STOPPED] == 0 if STOPPED in t else np.ones(len(t), bool)
    ax.semilogx(
        t["m"][done], t["pop_error_gd"][done], "o", ms=3, color=palette[0], label="gradient descent"
    )
    if not done.all():  # hollow: a run stopped by the step cap, short of its limit
        ax.semilogx(
            t["m"][~done],
            t["pop_error_gd"][~done],
            "o",
            ms=3,
            mfc="none",
            color=palette[0],
            label=STOPPED_LABEL,
        )
    ax.axhline(t["pop_error_l1"].iloc[0], color="k", ls="--", lw=1, label="min-$\\ell_1$")
    ax.axhline(t["pop_error_l2"].iloc[0], color="k", ls=":", lw=1, label="min-$\\ell_2$")
    ax.set_xlabel(r"$m = \alpha (s + 1/s)$")
    ax.set_ylabel("population error")
    legend_below(ax, ncol=2)  # inside, it covered Theorem 1's curve at its rise


# ----------------------------------------------------------------------------------------------
# The figures
# ----------------------------------------------------------------------------------------------

# Fig. 7.1's grid points whose gradient-descent runs did not reach the tolerance within the step
# cap: the claims leave them out (`analysis.fig71_per_seed`), the figure marks them
STOPPED = "stopped_runs"
STOPPED_LABEL = "stopped by the step cap"


def fig7_1_data(frame: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """`table` (`analysis.fig71_table`, the mean over data seeds) with, per grid point, how
    many of its seeds' runs the step cap stopped (`STOPPED`, from `frame`'s `converged`)."""
    stopped = (
        (~frame["converged"].astype(bool))
        .groupby([frame["alpha"], frame["shape"]])
        .sum()
        .rename(STOPPED)
        .reset_index()
    )
    out = table.merge(stopped, on=["alpha", "shape"], how="left", validate="one_to_one")
    return out.assign(**{STOPPED: out[STOPPED].fillna(0).astype(int)})


def theorem1_step_data(frame: pd.DataFrame) -> pd.DataFrame:
    """The numbers `theorem1_step` draws: the frame with gf_error raised to GF_ERROR_FLOOR."""
    return frame.assign(gf_error=frame["gf_error"].clip(lower=GF_ERROR_FLOOR))


def theorem1_step(frame: pd.DataFrame) -> Figure:
    """Figure `theorem1_step`: the GD limit's distance to argmin Q against the step size, and
    gradient flow's (from `analysis.theorem1_frame`, seed 0)."""
    fig, ax = figure(1, 1, width=5.0, height=3.6)
    _plot_theorem1(ax, frame, PALETTE)
    ax.set_title("Theorem 1: GD limit vs argmin Q (seed 0)")
    return fig


def q_shape(frame: pd.DataFrame) -> Figure:
    """Figure `q_shape`: the normalized scalar Q_m between |b| and b^2 (from
    `analysis.q_shape_frame`)."""
    fig, ax = figure(1, 1, width=4.6, height=3.4)
    _plot_q_shape(ax, frame, PALETTE)
    ax.set_title("Shape of $q_m$ (App. E)")
    return fig


def regimes(balanced: pd.DataFrame, unbalanced: pd.DataFrame, tiny_alpha: float) -> Figure:
    """Figure `regimes`: distances of the GD limit to min-L1 and min-L2 along the balanced line
    (left, against alpha) and at the tiny scale `tiny_alpha` (right, against s)."""
    fig, axes = figure(1, 2, width=8.0, height=3.3)
    axes = axes.ravel()
    _plot_distances(axes[0], balanced, "alpha", PALETTE, r"scale $\alpha$ (shape $s = 1$)")
    tiny = power_of_ten(tiny_alpha)
    _plot_distances(axes[1], unbalanced, "shape", PALETTE, rf"shape $s$ (scale $\alpha$ = {tiny})")
    axes[0].set_title(r"Sec. 7.1: $\alpha \to 0$ rich, $\alpha \to \infty$ NTK")
    axes[1].set_title(r"Sec. 7.1: $s \to \infty$ NTK at any $\alpha$")
    return fig


def fig7_1(table: pd.DataFrame) -> Figure:
    """Figure `fig7_1` (the paper's Fig. 7.1): population error over (log alpha, log s), and the
    same runs against m with Theorem 1's curve (from `analysis.fig71_table`)."""
    fig, axes = figure(1, 2, width=9.0, height=3.6)
    axes = axes.ravel()
    _plot_fig71(fig, axes[0], table)
    _plot_collapse(axes[1], table, PALETTE)
    # the balanced line named in the title: a legend on the heatmap hid cells, and under
    # the panel its white line showed nothing
    axes[0].set_title("Fig. 7.1: population error (GD)\ndashed: balanced, s = 1")
    axes[1].set_title("the same runs against m")
    return fig
