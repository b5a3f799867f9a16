"""An identity checked by Monte Carlo: a claim whose effect word is `exact`.

A paper's formula stated with "=" ("E[min L_S] = 1 - rank/m") checked by an unbiased Monte
Carlo is not a statement of similarity. Judged with the equivalence margin of "matches" alone,
a deviation the Monte Carlo resolves but that is smaller than the margin would read as a pass.
So an `exact` claim (expect "similar", its per-seed values the Monte Carlo estimate minus the
formula, per batch) is decided at the Monte Carlo's own precision as well:

- **fail**: in some cell (a case of the formula), the interval at the familywise level excludes
  0 by more than round-off (`ROUND_OFF`): the Monte Carlo resolves a deviation from the formula;
- otherwise the equivalence test with the "matches" margin of the unit, as any "similar"
  claim: **pass** when the interval lies within the margin (the Monte Carlo is precise enough
  to bound any deviation by it), **inconclusive** when it reaches beyond.

The cells are tested together (Bonferroni: each at 5% / k two-sided), so a true formula fails
in at most 5% of repetitions however many cases it is checked on, for batch means close to
normal (each an average of many draws of a quantity with a finite third moment);
tests/core/test_identities.py simulates that, shows uncorrected per-cell intervals failing a
true formula far more often, and skewed batch means too (skewness 1: about 10%). A formula
whose quantity has an infinite third moment is judged with "matches", not "exact".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .decision import FAIL, LEVEL, Evidence

EXACT = "exact"  # the effect word
FAMILY_ERROR = 1 - LEVEL  # a true formula fails in at most this share of repetitions
# The Monte Carlo's arithmetic is float64 on quantities of order one (a mean-squared error of
# unit-variance targets, a relative deviation): a difference within this of 0 is round-off (a
# case where both sides are 0, up to it), not a deviation of the formula.
ROUND_OFF = 1e-9


def _quantile(level: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - level) / 2, df))


@dataclass(frozen=True)
class IdentityCheck:
    """The formula's cells tested at the familywise level: how many, at which level each, and
    the cells whose interval excludes 0 (the deviations the Monte Carlo resolves)."""

    cells: int
    level: float
    resolved: tuple[str, ...]
    # the cell shown: a resolved one where there is one, else the one whose interval at that
    # level reaches farthest from 0; its estimate and that interval
    farthest: str
    interval: tuple[float, float]
    estimate: float = math.nan

    @property
    def outcome(self) -> str | None:
        return FAIL if self.resolved else None

    def to_json(self) -> dict:
        return {
            "cells": self.cells,
            "level": self.level,
            "resolved": list(self.resolved),
            "farthest": self.farthest,
            "estimate": self.estimate,
            "interval": list(self.interval),
        }


def _interval(evidence: Evidence, level: float) -> tuple[float, float]:
    se, df = evidence.se, evidence.df
    if evidence.transformed or evidence.test == "Welch t":
        raise ValueError("an identity is checked on one-sample or paired, unbounded values")
    if not (math.isfinite(se) and df >= 1):
        return (math.nan, math.nan)
    half = _quantile(level, df) * se
    return (evidence.estimate - half, evidence.estimate + half)


def check(evidence: Evidence) -> IdentityCheck:
    """Test every cell of `evidence` (its least-favourable choice's cells, or itself) for a
    deviation from 0 at the familywise level."""
    cells = [(str(k), e) for k, e in evidence.cells] or [("all", evidence)]
    level = 1 - FAMILY_ERROR / len(cells)
    intervals = {key: _interval(e, level) for key, e in cells}
    resolved = tuple(k for k, (lo, hi) in intervals.items() if lo > ROUND_OFF or hi < -ROUND_OFF)

    def reach(item) -> tuple[bool, float]:  # resolved first, then how far from 0 (NaN: least)
        lo, hi = item[1]
        return (item[0] in resolved, -math.inf if math.isnan(lo) else max(-lo, hi))

    farthest, interval = max(intervals.items(), key=reach)
    estimate = dict(cells)[farthest].estimate
    return IdentityCheck(len(cells), level, resolved, farthest, interval, estimate)


def decided(claim: dict, evidence: Evidence, outcome: str | None) -> tuple[str | None, dict | None]:
    """A claim's outcome on `evidence` (`outcome`: the rule's), failed where the claim is
    `exact` and the Monte Carlo resolves a deviation; with the check's record (None for other
    claims)."""
    if claim.get("effect") != EXACT or not evidence.values:
        return outcome, None
    if evidence.identity is not None and not evidence.cells:  # a stored report's own record
        record = dict(evidence.identity)
        return (FAIL if record.get("resolved") else outcome), record
    result = check(evidence)
    return result.outcome or outcome, result.to_json()
