"""__title__

The figures: one function per figure, each returning a matplotlib Figure
(saving, with the figure's data and provenance, is `Chapter.save_figure`'s job)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from implicit_bias.core.site.plotting import PALETTE, figure


def distance_to_min_norm(frame: pd.DataFrame) -> Figure:
    """Relative distance of the gradient-descent limit to the minimum-norm interpolator."""
    fig, ax = figure()
    for i, (seed, rows) in enumerate(frame.groupby("seed")):
        ax.semilogy(
            rows["d"],
            rows["rel_distance"],
            marker="o",
            color=PALETTE[i % len(PALETTE)],
            label=f"seed {seed}",
        )
    ax.set_xlabel("dimension d (n fixed)")
    ax.set_ylabel(r"$\|w_{GD} - w^\star\| / \|w^\star\|$")
    ax.legend()
    return fig
