"""The book's one decision rule for claims that rest on several seeds.

A claim says that a quantity lies in a region: below or above a bound ("A is better than B":
the per-seed difference A - B is below 0), inside an interval, or within a margin of zero
("A is similar to B"). When the quantity varies from seed to seed, the chapter hands the claim
its per-seed values (`Evidence`), and the claim is decided on the 95% confidence interval of
their mean (Student's t with the seeds' degrees of freedom):

- **pass**: the whole interval lies in the claimed region (for a one-sided claim this is the
  one-sided t-test at the 2.5% level; for "similar" it is two one-sided tests, each at 2.5%);
- **fail**: the whole interval lies outside it;
- **inconclusive**: the interval straddles the region's edge: these seeds cannot decide.

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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95  # the interval's coverage; each one-sided test is at (1 - LEVEL) / 2 = 2.5%
POWER = 0.80  # the probability at which `Evidence.detectable` is detected

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"

# What the papers' words mean, per unit of the metric. "better" / "worse" with no qualifier
# needs only the sign (size 0); "much" / "substantially" a difference beyond the size; "similar"
# / "matches" / "comparable" a difference within the size (the equivalence margin). Written
# once, before the claims that use them were decided; a chapter adds a unit here, not a number
# in its claims file.
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
    },
    # a relative difference (0.2 = 20% of the reference quantity)
    "relative": {
        "slightly": 0.0,
        "much": 0.5,
        "substantially": 0.5,
        "considerably": 0.5,
        "similar": 0.2,
        "matches": 0.1,
        "comparable": 0.2,
    },
    # a mean-squared error of a regression fit (targets of unit variance)
    "mse": {
        "slightly": 0.0,
        "much": 0.1,
        "substantially": 0.1,
        "considerably": 0.1,
        "similar": 0.05,
        "matches": 0.02,
    },
    # a number of neurons or steps, relative to the reference (same as `relative`)
    "count_ratio": {
        "slightly": 0.0,
        "much": 0.5,
        "considerably": 0.5,
        "similar": 0.2,
        "matches": 0.1,
    },
}
EQUIVALENCE_WORDS = ("similar", "matches", "comparable")


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

    def __post_init__(self):
        if self.test not in ("paired t", "one-sample t", "Welch t"):
            raise DecisionError(f"unknown test {self.test!r}")
        if self.test == "Welch t" and not self.values_b:
            raise DecisionError("Welch's test needs a second sample")
        if any(not math.isfinite(v) for v in self.values + self.values_b):
            raise DecisionError(f"non-finite per-seed value in {self.values + self.values_b}")

    @property
    def n(self) -> int:
        return len(self.values) + len(self.values_b)

    @property
    def estimate(self) -> float:
        if not self.values:
            return float("nan")
        a = float(np.mean(self.values))
        return a - float(np.mean(self.values_b)) if self.test == "Welch t" else a

    @property
    def se(self) -> float:
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
        when fewer than two seeds)."""
        se, df, m = self.se, self.df, self.estimate
        if not math.isfinite(se) or not df >= 1:
            return (float("nan"), float("nan"))
        half = _t_quantile(df) * se
        return (m - half, m + half)

    @property
    def detectable(self) -> float:
        """The smallest distance from a region's edge that these seeds detect with probability
        `POWER` (NaN when the spread cannot be estimated)."""
        se, df = self.se, self.df
        if not math.isfinite(se) or not df >= 1:
            return float("nan")
        return detectable_factor(df) * se

    def decide(self, where: Region) -> str:
        low, high = self.interval()
        if math.isnan(low):
            return INCONCLUSIVE
        return where.decide(low, high)

    def to_json(self) -> dict:
        low, high = self.interval()
        return {
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
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Evidence:
        return cls(
            tuple(float(v) for v in data["values"]),
            data["test"],
            tuple(float(v) for v in data.get("values_b") or ()),
            tuple(data.get("seeds") or ()),
            int(data.get("dropped") or 0),
        )


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


def per_seed(values) -> Evidence:
    """One quantity measured once per seed (a Series indexed by seed, a dict or a list)."""
    data = _by_seed(values)
    seeds = tuple(sorted(data, key=str))
    return Evidence(tuple(data[s] for s in seeds), "one-sample t", seeds=seeds)


def paired(a, b) -> Evidence:
    """a - b, paired by seed: both runs of a seed share its data and initialization, so the
    per-seed difference removes what they share. Seeds missing from either side are dropped."""
    da, db = _by_seed(a), _by_seed(b)
    seeds = tuple(sorted(set(da) & set(db), key=str))
    return Evidence(tuple(da[s] - db[s] for s in seeds), "paired t", seeds=seeds)


def paired_differences(differences) -> Evidence:
    """Per-seed differences a - b already computed by the chapter (a Series indexed by seed)."""
    e = per_seed(differences)
    return Evidence(e.values, "paired t", seeds=e.seeds)


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
    this one straddles the edge, the claim reads inconclusive rather than fail (conservative)."""
    if side not in ("low", "high", "both"):
        raise DecisionError(f"side must be low, high or both, got {side!r}")
    if not cells:
        raise DecisionError("no cells to choose from")

    def badness(item) -> float:
        low, high = item[1].interval()
        if math.isnan(low):
            return math.inf
        return {"low": -low, "high": high, "both": max(-low, high)}[side]

    return max(cells.items(), key=badness)
