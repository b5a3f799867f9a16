"""What a claim may rest on: converged runs only.

Every iterative solver a claim depends on reports whether it met its stopping rule; a run
stopped by a step or iteration cap is `unconverged` and is not evidence. Chapters select the
runs a claim rests on with `converged_runs`, which keeps the converged ones and counts the
rest, and hand the claim its value as `Value(x, dropped=n)` (or per-seed `Evidence` built from
the kept runs, with `dropped=n`), so the claims table says how many runs a claim lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the frames come from the caller: the runner, which reads reports, needs none
    import pandas as pd

CONVERGED = ("ok", "converged", "optimal")


@dataclass(frozen=True)
class Value:
    """A deterministic metric value and how many unconverged runs were left out of it."""

    value: object
    dropped: int = 0


def converged_runs(
    frame: pd.DataFrame, status: str = "status", converged=CONVERGED
) -> tuple[pd.DataFrame, int]:
    """The rows of `frame` whose `status` says the run met its stopping rule, and the number
    of rows left out. A frame without a status column is taken as it is (nothing to drop)."""
    if status not in frame.columns:
        return frame, 0
    keep = frame[status].isin(converged)
    return frame[keep], int((~keep).sum())


def unconverged_seeds(
    frame: pd.DataFrame, seed: str = "seed", status: str = "status", converged=CONVERGED
) -> list:
    """The seed of each row `converged_runs` leaves out (one entry a run), for
    `Evidence.with_dropped_runs`: a verdict restricted to some seeds then counts only the runs
    of those seeds."""
    if status not in frame.columns:
        return []
    return frame.loc[~frame[status].isin(converged), seed].tolist()


def seeds_in(seeds):
    """A function keeping the rows of a frame whose `seed` is one of `seeds`: a table or figure
    on the seeds every one of its lines ran, or on the exploratory seeds alone (comparisons
    with an authors' three seeds a cell), while the claims read every seed."""
    keep = [int(s) for s in seeds]
    return lambda frame: frame[frame["seed"].isin(keep)]
