"""Per-seed evidence for gln_norm's claims (the book's rule: implicit_bias.core.verdicts.decision).

The points of one seed share its training subset and contexts, so they are not independent of
each other; the seeds are. Every quantity a claim compares is reduced to one value per seed
(the mean over that seed's points) and handed to the claim as `Evidence`, decided on the 95%
t interval of those values (book page "How claims are decided").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.decision import Evidence
from implicit_bias.core.verdicts.evidence import converged_runs, unconverged_seeds


def paired_evidence(points: pd.DataFrame, value: str = "diff") -> Evidence:
    """Per-point differences (a minus b, same seed) -> their mean per seed -> paired t."""
    return decision.paired_differences(decision.seed_means(points, value))


def level_evidence(points: pd.DataFrame, value: str) -> Evidence:
    """A level (an inconsistency, a share) -> its mean per seed -> one-sample t."""
    return decision.per_seed(decision.seed_means(points, value))


def contrast_evidence(points: pd.DataFrame, col: str, value: str = "diff") -> Evidence:
    """For "grows with `col`": per seed, (mean `value` at the largest `col`) minus (mean at the
    smallest), paired t over the seeds that have both ends."""
    d = points.dropna(subset=[value])
    if d[col].nunique() < 2:
        return decision.paired_differences({})
    hi = d[d[col] == d[col].max()].groupby("seed")[value].mean()
    lo = d[d[col] == d[col].min()].groupby("seed")[value].mean()
    return decision.paired_differences((hi - lo).dropna())


def share_evidence(points: pd.DataFrame, value: str = "diff") -> Evidence:
    """For "in most configurations": per seed, the share of its points (one per configuration)
    where `value` is below zero, one-sample t over the seeds."""
    d = points.dropna(subset=[value])
    share = d.assign(below=d[value] < 0).groupby("seed")["below"].mean()
    return decision.per_seed(share.astype(float))


def correlation_evidence(points: pd.DataFrame, x: str, y: str) -> Evidence:
    """Pearson r of `x` and `y` over each seed's points (its configurations), one value per
    seed (a seed with fewer than three points has none)."""
    d = points.dropna(subset=[x, y])
    r = {
        s: float(np.corrcoef(g[x], g[y])[0, 1])
        for s, g in d.groupby("seed")
        if len(g) > 2 and g[x].std() > 0 and g[y].std() > 0
    }
    return decision.per_seed(r)


def with_dropped(ev: Evidence, frame: pd.DataFrame, methods) -> Evidence:
    """`ev` with the number of `methods`' runs of `frame` that did not end optimal or ok
    (infeasible SVMs: the paper's missing points) recorded as dropped, with their seeds (so
    that a verdict on a plan's seeds counts only the runs of those seeds)."""
    runs = frame[frame["method"].isin(list(methods))]
    if "seed" in runs.columns:
        return ev.with_dropped_runs(unconverged_seeds(runs))
    return dataclasses.replace(ev, dropped=converged_runs(runs)[1])


def estimate(value):
    """A metric as a number for the chapter's tables: an `Evidence`'s mean over seeds."""
    return value.estimate if isinstance(value, Evidence) else value


def evidence_table(metrics: dict, names) -> pd.DataFrame:
    """The per-seed evidence of `names` (metric names, or {label: name}) as the claims table
    decides it: mean over seeds, 95% interval, number of seeds; a plain value as its estimate."""
    names = names if isinstance(names, dict) else {n: n for n in names}
    rows = []
    for label, name in names.items():
        value = metrics.get(name, float("nan"))
        low, high = value.interval() if isinstance(value, Evidence) else (np.nan, np.nan)
        seeds = len(value.values) if isinstance(value, Evidence) else np.nan
        rows.append(
            {"": label, "mean over seeds": estimate(value), "95% low": low, "95% high": high}
            | {"seeds": seeds}
        )
    return pd.DataFrame(rows).set_index("").astype(float).round(4)
