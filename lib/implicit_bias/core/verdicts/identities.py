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

**Screen, then confirm** (`confirm`). A true formula fails in up to 5% of stages, so a fail on
cases the margin passes is read again: each case the stage resolved is drawn anew at seeds no
task uses, with a standard error at most a third of the stage's (`CONFIRM_PRECISION`), and
tested at 5% / r (r the cases resolved). Where the confirmation resolves a deviation again, or
is less precise than required, the fail stands (the paper's formula does not reproduce); where
it resolves none, the fail was one of the rule's false alarms (cause `false_alarm`). The
verdict stays the stage's either way: the confirmation decides only the cause.
tests/core/test_identities.py simulates the two looks (16 cases of 20 batches, a confirmation
exactly as precise as required): a true formula ends as a deviation in about 0.25% of
repetitions (5% times 5%) and as a false alarm in about 4.6%; a formula off by δ in one case is
called a false alarm in at most those 4.6% (at small δ, where the stage resolves other cases by
chance), and a deviation the stage did resolve is missed by the confirmation in at most about
0.3% of repetitions (δ about half a stage standard error), none from δ = 1.5 on. Read at the
stage's own precision instead, the confirmation misses a resolved deviation in up to about 5%
(δ = 2.5).
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
# The confirmation's standard error, per resolved case, is at most the stage's over this: a
# deviation the stage resolved (3.4 of its standard errors with 16 cases) lies about 10 of the
# confirmation's away, so it is not missed
CONFIRM_PRECISION = 3.0


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
    resolved_se: tuple[float, ...] = ()  # the standard error of each resolved cell

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
            "resolved_se": dict(zip(self.resolved, self.resolved_se, strict=True)),
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
    by_key = dict(cells)
    ses = tuple(float(by_key[k].se) for k in resolved)
    return IdentityCheck(
        len(cells), level, resolved, farthest, interval, by_key[farthest].estimate, ses
    )


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


@dataclass(frozen=True)
class Confirmation:
    """The second look at the cells a stage resolved: each cell's independent draws combined
    (inverse-variance weights), their standard error against the one required, and whether a
    deviation is resolved again at 5% / r (two-sided, normal: each draw is a mean of millions)."""

    level: float
    cells: dict[str, dict]  # per resolved cell: estimate, se, required_se, resolved, precise

    @property
    def cause(self) -> str | None:
        """`false_alarm` where every resolved cell is confirmed precisely and none resolves a
        deviation again; None where the stage's fail stands (does not reproduce)."""
        ok = all(c["precise"] and not c["resolved"] for c in self.cells.values())
        return "false_alarm" if self.cells and ok else None

    def to_json(self) -> dict:
        return {"level": self.level, "cells": self.cells, "cause": self.cause}


def confirm(stage: dict, draws: dict[str, list[tuple[float, float]]]) -> Confirmation:
    """Confirm the cells a stage resolved (`stage`: its identity record, `IdentityCheck.to_json`)
    on independent `draws`: per cell, (estimate, standard error) of each draw. A resolved cell
    without draws is not confirmed: the fail stands."""
    from scipy import stats

    resolved = list(stage.get("resolved") or [])
    stage_se = stage.get("resolved_se") or {}
    level = 1 - FAMILY_ERROR / max(len(resolved), 1)
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    out = {}
    for cell in resolved:
        pairs = [(float(e), float(s)) for e, s in draws.get(cell, []) if s > 0]
        weights = [1 / s**2 for _, s in pairs]
        se = math.sqrt(1 / sum(weights)) if weights else math.inf
        estimate = (
            sum(w * e for w, (e, _) in zip(weights, pairs, strict=True)) * se**2
            if pairs
            else math.nan
        )
        required = float(stage_se.get(cell, math.nan)) / CONFIRM_PRECISION
        out[cell] = {
            "estimate": estimate,
            "se": se,
            "required_se": required,
            "precise": bool(se <= required * (1 + 1e-9)),  # up to the division's rounding
            "resolved": bool(abs(estimate) - z * se > ROUND_OFF) if pairs else False,
        }
    return Confirmation(level, out)


def confirmed_cause(deviation: dict, seeds: dict | None) -> str | None:
    """A known deviation's cause as its row shows it: as written, except a false alarm, which
    the rule decides (`confirm`) from the stage's record (`seeds["identity"]`) and the draws of
    the file its `confirmation` names (`{"cells": {case: [{"estimate", "se"}, ...]}}`, relative
    to the project); where the rule does not clear the stage's fail, the cause is
    `paper_fails`. The confirmation's record is added to `seeds["identity"]`."""
    cause = deviation.get("cause")
    stage = (seeds or {}).get("identity")
    if cause != "false_alarm" or not isinstance(stage, dict):
        return cause
    import json

    from ..engine.paths import project_root

    path = project_root() / str(deviation.get("confirmation") or "")
    cells = json.loads(path.read_text())["cells"] if path.is_file() else {}
    draws = {case: [(d["estimate"], d["se"]) for d in rows] for case, rows in cells.items()}
    result = confirm(stage, draws)
    stage["confirmation"] = {"file": deviation.get("confirmation"), **result.to_json()}
    return result.cause or "paper_fails"
