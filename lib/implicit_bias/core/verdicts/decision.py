"""The book's one decision rule for claims that rest on several seeds.

A claim says that a quantity lies in a region: below or above a bound ("A is better than B":
the per-seed difference A - B is below 0), inside an interval, or within a margin of zero
("A is similar to B"). When the quantity varies from seed to seed, the chapter hands the claim
its per-seed values (`Evidence`), and the claim is decided on the 95% confidence interval of
their mean (Student's t with the seeds' degrees of freedom):

- **pass**: the whole interval lies in the claimed region (for a one-sided claim this is the
  one-sided t-test at the 2.5% level; for "similar" it is two one-sided tests, each at 2.5%);
- **fail**: the whole interval lies outside it;
- **inconclusive**: the interval straddles the region's edge: these seeds cannot decide;
- **no practical effect**: a claimed difference (a one-sided claim against 0, in a unit) whose
  interval does not pass and lies wholly within +/- the unit's negligible size;
- **below practical size**: a claimed difference whose interval passes (it excludes 0 on the
  claimed side) but lies wholly below its practical size (`practical_size`: the unit's
  negligible size, or a tenth of the paper's own value where that is larger): significant,
  and too small to be the paper's effect. Never green. With a true difference at the practical
  size it is reached in at most 2.5% of repetitions (the interval's far end is a one-sided
  test at 2.5% that the difference is below that size); with none, in at most 2.5% (it needs
  a pass). Every unit has a negligible size, each with its written reason
  (`NEGLIGIBLE_REASONS`), and every claimed difference names its unit (the schema refuses
  one without).

A metric read on a grid carries its resolution: its interval is never narrower than one grid
step on each side. Seeds are added only by the registered confirmatory plan
(`core.verdicts.planning`), sized honestly: at the one-sided
80% upper confidence limit of the exploratory spread, asking for about n / yield seeds where
only a share of the exploratory seeds yielded a value (`Evidence.ran_seeds`), and refused where
even the cap decides with probability below one half (the claim is "undecidable at this margin
within 20 seeds"). A plan also registers the protocol and the metric's code it was sized under
(`core.verdicts.protocol`): if either changes, the plan is void.

**An interval that fits the quantity** (a claim's `range`, `RANGES`). Student's t assumes the
per-seed values spread symmetrically without bounds; a share, an R^2 or a correlation near its
bound, or a residual, gap or ratio that can only be positive and is skewed, does not: the plain
interval then reaches past 1 or below 0, and a positive quantity whose every seed lies far above
its bound reads "inconclusive" because its interval reaches below 0. A claim whose metric has a
range declares it: `unit` ([0, 1]: the t interval on the logit scale), `signed_unit` ([-1, 1]:
on Fisher's z = artanh), `positive` (> 0: on the log scale); the default `unbounded` is the plain
t. The interval is computed on the transformed per-seed values and transformed back, so it never
leaves the range; it is then an interval for the quantity's centre on that scale transformed
back (the geometric mean of a positive quantity), which is also the estimate the row shows. A
value exactly at a bound has no transform (log 0): then, said in the row, the interval is the
plain t interval cut to the range (the true mean lies in the range, so the cut loses no
coverage; a point when every seed sits at the bound). Only one-sample quantities have a range
(a difference has none). The seed planner works on the transformed scale too (the region's
edges transformed the same way; exact as for the plain t, resolution and the negligible band
not applied there), and on the plain t where a seed sits at a bound (an approximation for
planning only). tests/core/test_decision_ranges.py simulates each range and shows the plain t
leaving it.

**A statement about every run** (a claim's `scope: every_run`: "converges", an identity, a
theorem's bound checked with the book's finite-run tolerance) is not a statement about a mean:
it is decided on every run (`every_run`): pass when every run's value lies in the region, fail
otherwise (a known deviation where recorded), with the count of runs outside it; no interval and
no seed plan. Per-seed values that are already each seed's worst run make the worst over seeds
the worst run. It is read on every committed run of its setting, whichever claim's plan the
run was made for: a run outside the region refutes a statement about every run, so a plan's
seeds alone would leave out runs that can refute it (the book adopted this after the runs were
seen; it can only turn a pass into a deviation).

So with no true difference a "better" claim passes in at most 2.5% of repetitions, and a claim
passes only where its seeds carry it. Paired by seed where the two runs share a seed (the
difference is computed per seed), Welch's unequal-variance test otherwise. The smallest effect
a profile's seeds can detect (`Evidence.detectable`) is the distance from the region's edge at
which the test passes with 80% probability (noncentral t, with this sample's standard error).

Words of the papers that imply a size ("much", "slightly", "similar") map to a size once, here,
per unit of the metric (`EFFECT_SIZES`); a claim names the word and the unit, never a number of
its own.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LEVEL = 0.95  # the interval's coverage; each one-sided test is at (1 - LEVEL) / 2 = 2.5%
POWER = 0.80  # the probability at which `Evidence.detectable` is detected

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
NEGLIGIBLE = "no practical effect"  # a claimed difference within +/- the unit's negligible size

# What the papers' words mean, per unit of the metric. "better" / "worse" with no qualifier
# needs only the sign (size 0); "much" / "substantially" a difference beyond the size; "similar"
# / "matches" / "comparable" a difference within the size (the equivalence margin); "exact" (a
# formula stated with "=", checked by Monte Carlo) the margin of "matches", and also fails where
# the Monte Carlo resolves any deviation (`core.verdicts.identities`). Written once, before the
# claims that use them were decided ("exact" after its claims had been decided with "matches":
# it only adds a way to fail); a chapter adds a unit here, not a number in its claims file.
EFFECT_SIZES: dict[str, dict[str, float]] = {
    # a share of misclassified points (0.02 = 2 percentage points of error or inconsistency)
    "error_rate": {
        "slightly": 0.0,
        "much": 0.02,
        "substantially": 0.02,
        "considerably": 0.02,
        "similar": 0.01,
        "matches": 0.01,
        "comparable": 0.02,
        "negligible": 0.001,
    },
    # a relative difference (0.2 = 20% of the reference quantity)
    "relative": {
        "slightly": 0.0,
        "much": 0.5,
        "substantially": 0.5,
        "considerably": 0.5,
        "similar": 0.2,
        "matches": 0.1,
        "exact": 0.1,
        "comparable": 0.2,
        "negligible": 0.02,
    },
    # a mean-squared error of a regression fit (targets of unit variance)
    "mse": {
        "slightly": 0.0,
        "much": 0.1,
        "substantially": 0.1,
        "considerably": 0.1,
        "similar": 0.05,
        "matches": 0.02,
        "exact": 0.02,
        "negligible": 0.005,
    },
    # a number of neurons or steps, relative to the reference (same as `relative`)
    "count_ratio": {
        "slightly": 0.0,
        "much": 0.5,
        "considerably": 0.5,
        "similar": 0.2,
        "matches": 0.1,
        "negligible": 0.02,
    },
    # Units of the unitless metrics, each with its negligible size only (no paper word uses
    # them yet): a share or an index that runs from 0 to 1
    "share": {"negligible": 0.01},
    # an error relative to the target's norm (a relative Frobenius error): a difference of two
    # such errors is a fraction of the one target's norm
    "relative_error": {"negligible": 0.001},
    # an effective rank (the exponential of the singular values' entropy), against the rank
    # of the paper's ground truth, 5
    "effective_rank": {"negligible": 0.05},
    # a number of neurons (a width)
    "neurons": {"negligible": 1.0},
}
EQUIVALENCE_WORDS = ("similar", "matches", "comparable", "exact")

# "negligible" in each unit above: a claimed difference whose whole interval lies within +/- this
# size of zero is "no effect of practical size". Written once, before any claim was decided with
# it; each is a tenth of its unit's "similar" margin, for the reason below.
NEGLIGIBLE_REASONS: dict[str, str] = {
    "error_rate": "a tenth of a percentage point: the finest step at which the papers report an "
    "error rate (one decimal of a percentage), so no table of theirs could show a smaller "
    "difference; a tenth of the 'similar' margin",
    "relative": "2% of the reference quantity: a tenth of the 'similar' margin, below what a "
    "reader can see between two curves of the papers' figures",
    "mse": "0.005 on targets of unit variance: a tenth of the 'similar' margin (half a percent "
    "of the targets' variance)",
    "count_ratio": "2% of the reference count: a tenth of the 'similar' margin, finer than the "
    "papers' grids of widths and steps",
    "share": "0.01 of the whole (one percentage point of a share, of a norm's mass or of "
    "configurations, or a hundredth of an index's range from 0 to 1): below what a reader "
    "can read off the papers' figures of such quantities, drawn on axes from 0 to 1",
    "relative_error": "a thousandth of the target's norm: a tenth of a percent, below the "
    "errors the papers plot as recovered on their logarithmic axes, so a difference this "
    "small is not one of recovery",
    "effective_rank": "0.05, 1% of the reference rank (the paper's ground truth has rank 5): "
    "a twentieth of one direction, which no plot of effective ranks can show",
    "neurons": "one neuron: a width is a whole number of neurons, so a smaller difference "
    "of widths is no difference of networks",
}

# A claimed difference can be significant and still of no practical size: its interval lies
# on the claimed side of 0 (the one-sided test passes) but wholly below the practical size.
# That size is the unit's negligible size, or, where the paper states the size of the
# difference it claims (its value lies on the claimed side), a tenth of the paper's value when
# that is larger: an order of magnitude below the paper's own difference is "far below" it,
# whatever the unit. Such a claim is "below practical size": never green, never a failure.
SMALL = "below practical size"
PAPER_FRACTION = 0.1


def practical_size(negligible: float | None, paper_value: float | None, sign: int) -> float:
    """The practical size of a claimed difference of sign `sign` (+1: "> 0", -1: "< 0"): the
    unit's negligible size, or a tenth of the paper's value where it lies on the claimed side
    and is larger (0 where neither is known)."""
    size = negligible or 0.0
    if paper_value is not None and math.isfinite(paper_value) and paper_value * sign > 0:
        size = max(size, PAPER_FRACTION * abs(paper_value))
    return size


class DecisionError(ValueError):
    """Evidence or a region the rule cannot work with."""


def effect_size(word: str, unit: str) -> float:
    """The size `word` ("much", "similar", ...) implies for a metric in `unit`."""
    if unit not in EFFECT_SIZES:
        raise DecisionError(f"unknown unit {unit!r}; known: {', '.join(sorted(EFFECT_SIZES))}")
    sizes = EFFECT_SIZES[unit]
    if word not in sizes:
        raise DecisionError(
            f"no size for the word {word!r} in unit {unit!r}; known: {', '.join(sorted(sizes))}"
        )
    return sizes[word]


@dataclass(frozen=True)
class Region:
    """Where a claim says the quantity lies: `low < x < high` (None: unbounded); `closed`
    says whether the edges belong to it (`<=`, `>=`, `in [a, b]`, "similar")."""

    low: float | None
    high: float | None
    closed: bool = False
    text: str = ""

    def contains(self, x: float) -> bool:
        above = self.low is None or (x >= self.low if self.closed else x > self.low)
        below = self.high is None or (x <= self.high if self.closed else x < self.high)
        return above and below

    def decide(self, low: float, high: float) -> str:
        """pass / fail / inconclusive for an interval [low, high]."""
        if self.contains(low) and self.contains(high):
            return PASS
        outside_low = self.low is not None and (
            high < self.low or (not self.closed and high == self.low)
        )
        outside_high = self.high is not None and (
            low > self.high or (not self.closed and low == self.high)
        )
        return FAIL if outside_low or outside_high else INCONCLUSIVE

    def violation(self, x: float) -> float:
        """How far `x` lies beyond the region (negative inside it: minus its distance to the
        nearer edge); the run with the largest is the worst run of an `every_run` claim."""
        beyond = [
            d
            for d in (
                None if self.low is None else self.low - x,
                None if self.high is None else x - self.high,
            )
            if d is not None
        ]
        return max(beyond) if beyond else -math.inf

    def on_scale(self, scale: Scale) -> Region:
        """The same region on a range's transformed scale (the transforms are increasing, so
        `low < x < high` iff `f(low) < f(x) < f(high)`); an edge at or beyond the range's own
        bound constrains nothing (None) or excludes everything (+-inf)."""

        def edge(x: float | None, is_low: bool) -> float | None:
            if x is None:
                return None
            if x <= scale.lower:
                return None if is_low else -math.inf
            if x >= scale.upper:
                return math.inf if is_low else None
            return float(scale.forward(np.float64(x)))

        return Region(edge(self.low, True), edge(self.high, False), self.closed, self.text)


def region(op: str, bound: float, effect: float = 0.0) -> Region:
    """The region of a comparison `op bound`, moved `effect` further in the claim's direction
    ("much lower than 0" with a size of 0.02 is `< -0.02`)."""
    if op in ("<", "<="):
        return Region(None, bound - effect, op == "<=", f"{op} {bound - effect:g}")
    if op in (">", ">="):
        return Region(bound + effect, None, op == ">=", f"{op} {bound + effect:g}")
    raise DecisionError(f"no region for the comparison {op!r} on evidence over seeds")


def equivalence_region(margin: float, center: float = 0.0) -> Region:
    """'similar': within `margin` of `center` (two one-sided tests)."""
    if margin <= 0:
        raise DecisionError(f"an equivalence margin must be positive, got {margin}")
    return Region(
        center - margin, center + margin, True, f"in [{center - margin:g}, {center + margin:g}]"
    )


@dataclass(frozen=True)
class Scale:
    """A range a metric's values live in, and the increasing transform that maps its open
    interior onto the whole line (where a t interval fits)."""

    name: str
    lower: float
    upper: float
    forward: Callable[[Any], Any]  # a numpy ufunc-like map, for arrays and scalars
    inverse: Callable[[Any], Any]
    centre: str  # what the estimate is: the mean on the transformed scale, transformed back

    def contains(self, values: np.ndarray) -> bool:
        return bool(np.all((values >= self.lower) & (values <= self.upper)))

    def interior(self, values: np.ndarray) -> bool:
        return bool(np.all((values > self.lower) & (values < self.upper)))


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def _logit(x: np.ndarray) -> np.ndarray:
    return np.log(x) - np.log1p(-x)


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# A claim's `range` (data/schemas/claims.yaml); `unbounded` is the plain t of the rule above.
RANGES: dict[str, Scale] = {
    "unbounded": Scale("unbounded", -math.inf, math.inf, _identity, _identity, "mean"),
    "unit": Scale("unit", 0.0, 1.0, _logit, _expit, "mean on the logit scale, transformed back"),
    "signed_unit": Scale(
        "signed_unit", -1.0, 1.0, np.arctanh, np.tanh, "mean Fisher z, transformed back"
    ),
    "positive": Scale("positive", 0.0, math.inf, np.log, np.exp, "geometric mean"),
}
RANGE_SCALE_NAMES = {"unit": "logit", "signed_unit": "Fisher z", "positive": "log"}


@functools.lru_cache(maxsize=1024)
def _t_quantile(df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - LEVEL) / 2, df))


def detectable_factor(df: float) -> float:
    """How many standard errors from the region's edge the true value must lie for the test to
    pass with probability `POWER` (noncentral t with `df` degrees of freedom)."""
    from scipy import optimize, stats

    crit = _t_quantile(df)
    return float(optimize.brentq(lambda nc: stats.nct.sf(crit, df, nc) - POWER, 0.0, 200.0))


@dataclass(frozen=True)
class Evidence:
    """Per-seed values of one quantity and the test that turns them into an interval.

    `values` are the per-seed values (differences, for a paired comparison); for Welch's
    test `values_b` is the second sample and the quantity is mean(values) - mean(values_b)."""

    values: tuple[float, ...]
    test: str  # "paired t", "one-sample t", "Welch t"
    values_b: tuple[float, ...] = ()
    seeds: tuple = ()
    dropped: int = 0  # unconverged runs left out before the per-seed values were formed
    # the seed of each run in `dropped`, where the chapter gives it: restricted to some seeds,
    # the evidence then counts only the runs of those seeds (a seed-6 run left out is not one
    # of the confirmatory seeds 20-22's)
    dropped_seeds: tuple = ()
    # the step of the grid the metric is read on (a neuron count found on a grid of 8, a
    # crossing step on a grid of 100; in the metric's own units): the interval reaches at
    # least this far on each side of the estimate, so seeds that agree exactly read as
    # "within one grid step", not as certainty
    resolution: float = 0.0
    # a least-favourable choice (`least_favourable`): the cells it chose from, and its side,
    # so that the evidence restricted to some seeds is the choice made again on those seeds
    # alone (the cell least favourable on seeds 0-9 need not be on seeds 3-9)
    cells: tuple = field(default=(), compare=False, repr=False)
    side: str = field(default="", compare=False, repr=False)
    # the range of the quantity (`RANGES`; a claim's `range`): the interval is computed on its
    # transformed scale and transformed back, so it never leaves the range
    value_range: str = "unbounded"
    # seeds that ran but yielded no value for this quantity (an infeasible program, a NaN),
    # where the chapter handed them over: with `seeds`, `dropped_seeds` and the seeds of the
    # cells of a least-favourable choice they are the seeds that ran (`ran_seeds`), and the
    # share of them with a value is the yield a seed plan accounts for
    unyielded: tuple = field(default=(), compare=False, repr=False)
    # a stored report's record of an "exact" claim's check over its cells
    # (`core.verdicts.identities`), which the stored evidence of the chosen cell alone cannot
    # redo: read back from the JSON, so that a stored verdict is decided again as it was
    identity: Mapping | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.test not in ("paired t", "one-sample t", "Welch t"):
            raise DecisionError(f"unknown test {self.test!r}")
        if self.test == "Welch t" and not self.values_b:
            raise DecisionError("Welch's test needs a second sample")
        if any(not math.isfinite(v) for v in self.values + self.values_b):
            raise DecisionError(f"non-finite per-seed value in {self.values + self.values_b}")
        if not (math.isfinite(self.resolution) and self.resolution >= 0):
            raise DecisionError(f"a resolution must be finite and >= 0, got {self.resolution}")
        if self.value_range not in RANGES:
            raise DecisionError(
                f"unknown range {self.value_range!r}; known: {', '.join(sorted(RANGES))}"
            )
        if self.value_range != "unbounded":
            if self.test != "one-sample t":
                raise DecisionError(
                    f"a range belongs to a quantity measured once per seed, not to a "
                    f"difference ({self.test}): declare it on a one-sample metric"
                )
            if not self.scale.contains(np.asarray(self.values, dtype=float)):
                raise DecisionError(
                    f"a per-seed value lies outside the declared range {self.value_range!r} "
                    f"([{self.scale.lower:g}, {self.scale.upper:g}]): {self.values}"
                )

    @property
    def scale(self) -> Scale:
        return RANGES[self.value_range]

    @property
    def transformed(self) -> bool:
        """Whether the interval is computed on the range's transformed scale: a declared
        range with no seed at its bound (where the transform is infinite)."""
        return self.value_range != "unbounded" and self.scale.interior(
            np.asarray(self.values, dtype=float)
        )

    @property
    def method(self) -> str:
        """How the interval is computed, in words."""
        if self.value_range == "unbounded":
            return "t"
        if self.transformed:
            return f"t on the {RANGE_SCALE_NAMES[self.value_range]} scale"
        return f"t cut to [{self.scale.lower:g}, {self.scale.upper:g}]: a seed at the range's bound"

    def on_scale(self) -> Evidence:
        """The per-seed values on the transformed scale the interval is computed on (this
        evidence itself where there is none)."""
        if not self.transformed:
            return self
        values = self.scale.forward(np.asarray(self.values, dtype=float))
        return Evidence(tuple(float(v) for v in values), self.test, seeds=self.seeds)

    def with_range(self, name: str) -> Evidence:
        """This evidence as a quantity with range `name`; a least-favourable choice is made
        again with the intervals of that range."""
        if self.cells:
            ranged = {k: e.with_range(name) for k, e in self.cells}
            return least_favourable(ranged, self.side)[1]
        return dataclasses.replace(self, value_range=name)

    @property
    def n(self) -> int:
        return len(self.values) + len(self.values_b)

    @property
    def ran_seeds(self) -> tuple:
        """The seeds that ran for this quantity, whether or not they yielded a value: its own
        seeds, the seeds of its runs left out, those that yielded none (`unyielded`), and, for
        a least-favourable choice, those of every cell it chose from."""
        seen = set(self.seeds) | set(self.dropped_seeds) | set(self.unyielded)
        for _, cell in self.cells:
            seen |= set(cell.ran_seeds)
        return tuple(sorted(seen, key=str))

    @property
    def estimate(self) -> float:
        """The mean (on a range's transformed scale, transformed back: `Scale.centre`)."""
        if not self.values:
            return float("nan")
        if self.transformed:
            return float(self.scale.inverse(np.float64(self.on_scale().estimate)))
        a = float(np.mean(self.values))
        return a - float(np.mean(self.values_b)) if self.test == "Welch t" else a

    @property
    def se(self) -> float:
        """The standard error (on the transformed scale where the interval is computed on it)."""
        if self.transformed:
            return self.on_scale().se
        a = np.asarray(self.values, dtype=float)
        if self.test != "Welch t":
            return float(a.std(ddof=1) / math.sqrt(len(a))) if len(a) >= 2 else float("nan")
        b = np.asarray(self.values_b, dtype=float)
        if len(a) < 2 or len(b) < 2:
            return float("nan")
        return float(math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))

    @property
    def df(self) -> float:
        if self.test != "Welch t":
            return float(len(self.values) - 1)
        a, b = (np.asarray(v, dtype=float) for v in (self.values, self.values_b))
        if len(a) < 2 or len(b) < 2:
            return float("nan")
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        if va + vb == 0:
            return float(len(a) + len(b) - 2)
        return float((va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)))

    def interval(self) -> tuple[float, float]:
        """The `LEVEL` confidence interval of the quantity (a point when every seed agrees; NaN
        when fewer than two seeds). With a range: computed on its transformed scale and
        transformed back, or, with a seed at the bound, the plain interval cut to the range."""
        if self.transformed:
            low, high = self.on_scale().interval()
            if math.isnan(low):
                return (low, high)
            low, high = (float(self.scale.inverse(np.float64(x))) for x in (low, high))
            m = self.estimate
            low, high = min(low, m - self.resolution), max(high, m + self.resolution)
        else:
            se, df, m = self.se, self.df, self.estimate
            if not math.isfinite(se) or not df >= 1:
                return (float("nan"), float("nan"))
            half = max(_t_quantile(df) * se, self.resolution)
            low, high = m - half, m + half
        return (max(low, self.scale.lower), min(high, self.scale.upper))

    @property
    def detectable(self) -> float:
        """The smallest distance from a region's edge that these seeds detect with probability
        `POWER` (NaN when the spread cannot be estimated); with a range, on its transformed
        scale (a distance in log units for a positive quantity)."""
        se, df = self.se, self.df
        if not math.isfinite(se) or not df >= 1:
            return float("nan")
        return max(detectable_factor(df) * se, self.resolution)

    def decide(
        self, where: Region, negligible: float | None = None, practical: float | None = None
    ) -> str:
        """pass / fail / inconclusive on the interval; with `negligible` (a claimed difference,
        the unit's negligible size) an interval within +/- negligible that does not pass is
        "no practical effect"; with `practical` (`practical_size`) a pass whose interval lies
        wholly below it, on the claimed side of 0, is "below practical size" (`SMALL`)."""
        low, high = self.interval()
        if math.isnan(low):
            return INCONCLUSIVE
        outcome = where.decide(low, high)
        if outcome != PASS and negligible and -negligible <= low and high <= negligible:
            return NEGLIGIBLE
        if outcome == PASS and practical and _below(where, low, high, practical):
            return SMALL
        return outcome

    def restricted(self, seeds) -> Evidence:
        """The same evidence on `seeds` only (a paired or one-sample sample; the confirmatory
        stage decides on its new seeds alone)."""
        if self.test == "Welch t":
            raise DecisionError("Welch evidence has no seeds to restrict to")
        if self.cells:  # a least-favourable choice: made again on these seeds alone
            return least_favourable({k: e.restricted(seeds) for k, e in self.cells}, self.side)[1]
        keep = [i for i, s in enumerate(self.seeds) if s in set(seeds)]
        dropped_seeds = tuple(s for s in self.dropped_seeds if s in set(seeds))
        return Evidence(
            tuple(self.values[i] for i in keep),
            self.test,
            seeds=tuple(self.seeds[i] for i in keep),
            dropped=len(dropped_seeds) if self.dropped_seeds else self.dropped,
            dropped_seeds=dropped_seeds,
            resolution=self.resolution,
            value_range=self.value_range,
            unyielded=tuple(s for s in self.unyielded if s in set(seeds)),
        )

    def with_dropped_runs(self, seeds: Iterable) -> Evidence:
        """This evidence with the runs left out before its values were formed, named by their
        seeds (one entry a run), so that `restricted` counts only the runs of its seeds."""
        named = tuple(int(s) for s in seeds)
        return dataclasses.replace(self, dropped=len(named), dropped_seeds=named)

    def to_json(self) -> dict:
        low, high = self.interval()
        listed = {"dropped_seeds": [_plain(s) for s in self.dropped_seeds]}
        ranged = {"range": self.value_range, "method": self.method}
        ran = self.ran_seeds if self.test != "Welch t" else ()
        ran_listed = {"ran_seeds": [_plain(s) for s in ran]}
        return (
            {
                "test": self.test,
                "n": self.n,
                "df": _finite_or_none(self.df),
                "estimate": _finite_or_none(self.estimate),
                "se": _finite_or_none(self.se),
                "interval": [_finite_or_none(low), _finite_or_none(high)],
                "detectable": _finite_or_none(self.detectable),
                "values": list(self.values),
                "values_b": list(self.values_b),
                "seeds": [_plain(s) for s in self.seeds],
                "dropped": self.dropped,
                "resolution": self.resolution,
            }
            | (listed if self.dropped_seeds else {})
            | (ranged if self.value_range != "unbounded" else {})
            | (ran_listed if set(ran) - set(self.seeds) - set(self.dropped_seeds) else {})
        )

    @classmethod
    def from_json(cls, data: Mapping) -> Evidence:
        return cls(
            tuple(float(v) for v in data["values"]),
            data["test"],
            tuple(float(v) for v in data.get("values_b") or ()),
            tuple(data.get("seeds") or ()),
            int(data.get("dropped") or 0),
            tuple(data.get("dropped_seeds") or ()),
            float(data.get("resolution") or 0.0),
            value_range=data.get("range") or "unbounded",
            unyielded=tuple(
                s
                for s in data.get("ran_seeds") or ()
                if s not in set(data.get("seeds") or ()) | set(data.get("dropped_seeds") or ())
            ),
            identity=data.get("identity"),
        )


def _below(where: Region, low: float, high: float, practical: float) -> bool:
    """Whether an interval that passes a one-sided claimed difference lies wholly below the
    practical size: under it for "> 0" (only a low edge), above minus it for "< 0"."""
    if where.high is None:
        return high < practical
    if where.low is None:
        return low > -practical
    return False  # an interval or "similar": its region's bounds are its size


def _finite_or_none(x: float):
    return float(x) if math.isfinite(x) else None


def _plain(x):
    return x.item() if hasattr(x, "item") else x


def _by_seed(values) -> dict:
    """A mapping seed -> value from a pandas Series indexed by seed, a dict, or a sequence
    (position as seed)."""
    if hasattr(values, "to_dict"):
        values = values.to_dict()
    if not isinstance(values, Mapping):
        values = dict(enumerate(values))
    return {
        _plain(k): float(v) for k, v in values.items() if v is not None and not math.isnan(float(v))
    }


def _all_seeds(values) -> set:
    """Every seed handed over, with a value or without one (None or NaN: it ran and yielded
    nothing)."""
    if hasattr(values, "to_dict"):
        values = values.to_dict()
    if not isinstance(values, Mapping):
        values = dict(enumerate(values))
    return {_plain(k) for k in values}


def per_seed(values, resolution: float = 0.0) -> Evidence:
    """One quantity measured once per seed (a Series indexed by seed, a dict or a list);
    `resolution`: the step of the grid it is read on (see `Evidence.resolution`). A seed handed
    over without a value (None, NaN) is left out of the values and kept in `unyielded`."""
    data = _by_seed(values)
    seeds = tuple(sorted(data, key=str))
    missing = tuple(sorted(_all_seeds(values) - set(data), key=str))
    return Evidence(
        tuple(data[s] for s in seeds),
        "one-sample t",
        seeds=seeds,
        resolution=resolution,
        unyielded=missing,
    )


def paired(a, b, resolution: float = 0.0) -> Evidence:
    """a - b, paired by seed: both runs of a seed share its data and initialization, so the
    per-seed difference removes what they share. Seeds missing from either side are dropped."""
    da, db = _by_seed(a), _by_seed(b)
    seeds = tuple(sorted(set(da) & set(db), key=str))
    missing = tuple(sorted((_all_seeds(a) | _all_seeds(b)) - set(seeds), key=str))
    return Evidence(
        tuple(da[s] - db[s] for s in seeds),
        "paired t",
        seeds=seeds,
        resolution=resolution,
        unyielded=missing,
    )


def paired_differences(differences, resolution: float = 0.0) -> Evidence:
    """Per-seed differences a - b already computed by the chapter (a Series indexed by seed)."""
    e = per_seed(differences)
    return Evidence(
        e.values, "paired t", seeds=e.seeds, resolution=resolution, unyielded=e.unyielded
    )


def welch(a: Iterable[float], b: Iterable[float]) -> Evidence:
    """mean(a) - mean(b) for two independent samples (runs that share no seed)."""
    va = tuple(float(v) for v in a if not math.isnan(float(v)))
    vb = tuple(float(v) for v in b if not math.isnan(float(v)))
    return Evidence(va, "Welch t", values_b=vb)


def seed_means(frame, value: str, seed: str = "seed"):
    """The mean of `value` per seed over a frame's rows (the points of one seed share its
    training data, so they are not independent of each other; the seeds are)."""
    d = frame.dropna(subset=[value])
    return d.groupby(seed)[value].mean()


def least_favourable(cells: Mapping, side: str) -> tuple[object, Evidence]:
    """For a claim that must hold in every cell ("uniformly", "at every width"): the cell
    whose evidence is least favourable to it, with that evidence. For a claim "> bound" the
    cell whose interval reaches lowest (`side` "low"), for "< bound" highest ("high"), for
    "similar" farthest from zero on either side ("both"); a cell that cannot be decided (fewer
    than two seeds) is least favourable of all. The claim passes exactly when every cell's
    interval lies in its region; when another cell's interval lies wholly outside it while
    this one straddles the edge, the claim reads inconclusive rather than fail (conservative).
    The evidence returned carries the cells and the side: restricted to some seeds (a seed
    plan's confirmatory or exploratory seeds), it is the choice made again on those seeds."""
    if side not in ("low", "high", "both"):
        raise DecisionError(f"side must be low, high or both, got {side!r}")
    if not cells:
        raise DecisionError("no cells to choose from")

    def badness(item) -> float:
        low, high = item[1].interval()
        if math.isnan(low):
            return math.inf
        return {"low": -low, "high": high, "both": max(-low, high)}[side]

    key, chosen = max(cells.items(), key=badness)
    return key, dataclasses.replace(chosen, cells=tuple(cells.items()), side=side)


@dataclass(frozen=True)
class EveryRun:
    """The verdict of a statement about every run (`every_run`): how many runs there are, how
    many lie outside the region, and the worst one (the largest `Region.violation`)."""

    runs: int
    outside: int
    worst: float
    outcome: str

    def to_json(self) -> dict:
        return {
            "scope": "every_run",
            "runs": self.runs,
            "outside": self.outside,
            "worst": self.worst,
        }


def every_run(evidence: Evidence, where: Region) -> EveryRun:
    """Decide a statement about every run on every run: pass iff each run's value lies in
    `where` (no interval, no seeds to plan). A least-favourable choice counts the runs of
    every cell, not only the chosen one's. Welch evidence (two groups of runs, a difference of
    their means) states nothing about each run."""
    if evidence.test == "Welch t":
        raise DecisionError("a statement about every run needs one value per run, not Welch's")
    values = [v for _, cell in evidence.cells for v in cell.values] or list(evidence.values)
    if not values:
        raise DecisionError("no runs to decide on")
    worst = max(values, key=where.violation)
    outside = sum(not where.contains(v) for v in values)
    return EveryRun(len(values), outside, float(worst), PASS if outside == 0 else FAIL)
