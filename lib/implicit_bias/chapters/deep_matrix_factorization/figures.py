"""The figures of the deep matrix factorization chapter: one function per figure, each
returning a matplotlib Figure (saving, with the figure's data and provenance, is
`Chapter.save_figure`'s job)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below


def recovery(table: pd.DataFrame) -> Figure:
    """Fig. 1: reconstruction error against the number of observed entries, per depth and for
    the minimum nuclear-norm solution (mean over seeds, bars: standard deviation)."""
    fig, ax = figure(height=3.6)  # room for the legend under the panel
    for i, (method, rows) in enumerate(table.groupby("method", sort=True)):
        style = "k--" if method == "min nuclear norm" else "-"
        ax.errorbar(
            rows["count"],
            rows["mean"],
            yerr=rows["std"].fillna(0),
            fmt=style,
            marker="o",
            ms=3,
            capsize=2,
            label=method,
            color=None if style == "k--" else PALETTE[i % len(PALETTE)],
        )
    ax.set_yscale("log")
    ax.set_xlabel("number of observed entries")
    ax.set_ylabel(r"$\|W - W^\star\|_F / \|W^\star\|_F$")
    legend_below(ax, ncol=2)  # inside, it covered error bars
    return fig


def init_scale(ratios: pd.DataFrame) -> Figure:
    """Fig. 2: nuclear norm over the minimum (top) and reconstruction error (bottom) against
    the initialization scale, per depth, for each observation count (columns)."""
    counts = sorted(ratios["count"].unique())
    fig, axes = figure(2, len(counts), height=5.0)
    axes = np.asarray(axes).reshape(2, len(counts))
    for j, count in enumerate(counts):
        part = ratios[ratios["count"] == count]
        for i, (depth, rows) in enumerate(part.groupby("depth")):
            stats = rows.groupby("scale")[["nuclear_ratio", "rel_error"]].mean()
            for row, col in enumerate(["nuclear_ratio", "rel_error"]):
                axes[row, j].plot(
                    stats.index, stats[col], "o-", ms=3, color=PALETTE[i], label=f"depth {depth}"
                )
        axes[0, j].set_title(f"{count} observed entries")
        axes[1, j].set_xlabel("end-to-end initialization scale")
        for row in range(2):
            axes[row, j].set_xscale("log")
        axes[1, j].set_yscale("log")
    axes[0, 0].set_ylabel("nuclear norm / minimum")
    axes[1, 0].set_ylabel("reconstruction error")
    axes[0, 0].legend()
    return fig


def singular_values(traj: pd.DataFrame, dyn: pd.DataFrame) -> Figure:
    """Theorem 3: measured singular values (solid) against the equation integrated along the
    run (dashed), per depth at the smallest step (left); the largest gap against the step size
    (right, log-log, dotted: slope 1)."""
    fig, axes = figure(1, 2, height=3.8)  # room for the legends under the panels
    axes = np.ravel(axes)
    finest = traj[traj["lr_factor"] == traj["lr_factor"].min()]
    for i, (depth, rows) in enumerate(finest.groupby("depth")):
        for r, part in rows.groupby("r"):
            axes[0].plot(
                part["t"] / part["t"].max(),
                part["sigma"],
                "-",
                color=PALETTE[i],
                label=f"depth {depth}" if r == 1 else None,
            )
            axes[0].plot(part["t"] / part["t"].max(), part["sigma_ode"], "--", color="k", lw=0.7)
    axes[0].set_xlabel("time / horizon")
    axes[0].set_ylabel(r"$\sigma_r(t)$ (dashed: Theorem 3)")
    legend_below(axes[0], ncol=3)  # inside, it covered the curves' rise
    for i, (depth, rows) in enumerate(dyn.groupby("depth")):
        axes[1].loglog(
            rows["lr_factor"], rows["deviation"], "o-", color=PALETTE[i], label=f"depth {depth}"
        )
    x = np.array(sorted(dyn["lr_factor"].unique()))
    axes[1].loglog(x, dyn["deviation"].max() * x / x.max(), "k:", lw=0.8, label="slope 1")
    axes[1].set_xlabel("step / base step")
    axes[1].set_ylabel("largest gap / $\\sigma_1$")
    legend_below(axes[1], ncol=2)
    return fig
