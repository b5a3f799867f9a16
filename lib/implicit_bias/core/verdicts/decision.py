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
  interval does not pass and lies wholly within +/- the unit's negligible size.

A metric read on a grid carries its resolution: its interval is never narrower than one grid
step on each side. Seeds are added only by the registered confirmatory plan (`plan`, below).

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
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

LEVEL = 0.95  # the interval's coverage; each one-sided test is at (1 - LEVEL) / 2 = 2.5%
POWER = 0.80  # the probability at which `Evidence.detectable` is detected

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
NEGLIGIBLE = "no practical effect"  # a claimed difference within +/- the unit's negligible size

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
}
EQUIVALENCE_WORDS = ("similar", "matches", "comparable")

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
}


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

    def __post_init__(self):
        if self.test not in ("paired t", "one-sample t", "Welch t"):
            raise DecisionError(f"unknown test {self.test!r}")
        if self.test == "Welch t" and not self.values_b:
            raise DecisionError("Welch's test needs a second sample")
        if any(not math.isfinite(v) for v in self.values + self.values_b):
            raise DecisionError(f"non-finite per-seed value in {self.values + self.values_b}")
        if not (math.isfinite(self.resolution) and self.resolution >= 0):
            raise DecisionError(f"a resolution must be finite and >= 0, got {self.resolution}")

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
        half = max(_t_quantile(df) * se, self.resolution)
        return (m - half, m + half)

    @property
    def detectable(self) -> float:
        """The smallest distance from a region's edge that these seeds detect with probability
        `POWER` (NaN when the spread cannot be estimated)."""
        se, df = self.se, self.df
        if not math.isfinite(se) or not df >= 1:
            return float("nan")
        return max(detectable_factor(df) * se, self.resolution)

    def decide(self, where: Region, negligible: float | None = None) -> str:
        """pass / fail / inconclusive on the interval; with `negligible` (a claimed difference,
        the unit's negligible size) an interval within +/- negligible that does not pass is
        "no practical effect"."""
        low, high = self.interval()
        if math.isnan(low):
            return INCONCLUSIVE
        outcome = where.decide(low, high)
        if outcome != PASS and negligible and -negligible <= low and high <= negligible:
            return NEGLIGIBLE
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
        )

    def with_dropped_runs(self, seeds: Iterable) -> Evidence:
        """This evidence with the runs left out before its values were formed, named by their
        seeds (one entry a run), so that `restricted` counts only the runs of its seeds."""
        named = tuple(int(s) for s in seeds)
        return dataclasses.replace(self, dropped=len(named), dropped_seeds=named)

    def to_json(self) -> dict:
        low, high = self.interval()
        listed = {"dropped_seeds": [_plain(s) for s in self.dropped_seeds]}
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
            "resolution": self.resolution,
        } | (listed if self.dropped_seeds else {})

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


def per_seed(values, resolution: float = 0.0) -> Evidence:
    """One quantity measured once per seed (a Series indexed by seed, a dict or a list);
    `resolution`: the step of the grid it is read on (see `Evidence.resolution`)."""
    data = _by_seed(values)
    seeds = tuple(sorted(data, key=str))
    return Evidence(
        tuple(data[s] for s in seeds), "one-sample t", seeds=seeds, resolution=resolution
    )


def paired(a, b, resolution: float = 0.0) -> Evidence:
    """a - b, paired by seed: both runs of a seed share its data and initialization, so the
    per-seed difference removes what they share. Seeds missing from either side are dropped."""
    da, db = _by_seed(a), _by_seed(b)
    seeds = tuple(sorted(set(da) & set(db), key=str))
    return Evidence(
        tuple(da[s] - db[s] for s in seeds), "paired t", seeds=seeds, resolution=resolution
    )


def paired_differences(differences, resolution: float = 0.0) -> Evidence:
    """Per-seed differences a - b already computed by the chapter (a Series indexed by seed)."""
    e = per_seed(differences)
    return Evidence(e.values, "paired t", seeds=e.seeds, resolution=resolution)


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


# ---- the seed plan: a confirmatory replication, registered before it runs --------------------
# Seeds 0-2 of the paper profile are the exploratory stage: they have been seen (and many claims
# were written after them). Each comparison gets a fixed number of NEW seeds from a power
# analysis on the exploratory estimate and spread, committed before the run that adds them; the
# confirmatory verdict is the fixed-n rule above on the new seeds alone. Because the new seeds
# are independent of the exploratory ones that chose their number, the rule's 2.5% error for a
# false pass (and for a false fail) holds for the whole procedure (tests/core/test_seed_plan.py).
CONFIRM_POWER = 0.90  # the probability of a decision a plan aims for at the exploratory effect
MIN_NEW_SEEDS = 3  # never fewer: three seeds' spread is itself barely an estimate
MAX_NEW_SEEDS = 20  # the cap: a claim needing more stays inconclusive and says how many
SEARCH_SEEDS = 1000  # "seeds needed" is reported up to this; beyond it, "more than 1000"
_NODES = 48  # quadrature nodes over the sample standard deviation (chi distribution)


def decided_probability(
    effect,
    sd,
    n,
    where: Region,
    negligible: float | None = None,
    resolution: float = 0.0,
) -> dict[str, np.ndarray]:
    """The probabilities that the fixed-n rule on `n` new seeds of a one-sample (or paired)
    quantity with true mean `effect` and per-seed standard deviation `sd` passes, fails, says
    "no practical effect" (with `negligible`), and decides at all. Broadcasts over arrays of
    `effect`, `sd` and `n` (exact in the mean, quadrature over the sample's spread)."""
    from scipy import stats

    effect, sd, n = np.broadcast_arrays(
        np.asarray(effect, float), np.asarray(sd, float), np.asarray(n, float)
    )
    e, sd, n = effect[..., None], sd[..., None], n[..., None]
    df = n - 1
    q = (np.arange(_NODES) + 0.5) / _NODES
    s = sd * np.sqrt(stats.chi2.ppf(q, df) / df)  # the sample sd at equally likely quantiles
    half = np.maximum(stats.t.ppf(1 - (1 - LEVEL) / 2, df) * s / np.sqrt(n), resolution)
    scale = np.maximum(sd / np.sqrt(n), 1e-300)  # sd 0: the mean is the effect itself

    def prob(a, b):  # P(a <= mean <= b), 0 for an empty range
        lo = np.minimum(a, b)
        return np.clip(stats.norm.cdf((b - e) / scale) - stats.norm.cdf((lo - e) / scale), 0, 1)

    inf = np.inf
    low = -inf if where.low is None else where.low
    high = inf if where.high is None else where.high
    p_pass = prob(low + half, high - half)
    p_fail = prob(-inf, low - half) + prob(high + half, inf)
    p_neg = np.zeros_like(p_pass)
    if negligible:
        a, b = -negligible + half, negligible - half
        p_neg = (
            prob(a, b)
            - prob(np.maximum(a, low + half), np.minimum(b, high - half))
            - prob(a, np.minimum(b, low - half))
            - prob(np.maximum(a, high + half), b)
        )
    out = {"pass": p_pass, "fail": p_fail, "negligible": np.clip(p_neg, 0, 1)}
    out = {k: v.mean(axis=-1) for k, v in out.items()}
    out["decided"] = np.clip(out["pass"] + out["fail"] + out["negligible"], 0, 1)
    return out


def seeds_needed(
    effect,
    sd,
    where: Region,
    negligible: float | None = None,
    resolution: float = 0.0,
    power: float = CONFIRM_POWER,
    n_max: int = SEARCH_SEEDS,
) -> np.ndarray:
    """The fewest new seeds (at least `MIN_NEW_SEEDS`) that decide with probability `power` if
    the true mean and spread are `effect` and `sd` (arrays broadcast); `n_max + 1` where even
    `n_max` seeds do not."""
    effect, sd = np.broadcast_arrays(np.asarray(effect, float), np.asarray(sd, float))
    ns = np.arange(MIN_NEW_SEEDS, n_max + 1)
    p = decided_probability(effect[..., None], sd[..., None], ns, where, negligible, resolution)
    ok = p["decided"] >= power
    return np.where(ok.any(axis=-1), ns[np.argmax(ok, axis=-1)], n_max + 1)


@dataclass(frozen=True)
class SeedPlan:
    """A claim's confirmatory stage: `new_seeds` seeds after the exploratory ones, the power
    that number has at the exploratory estimate, and the seeds a decision needs uncapped."""

    new_seeds: int
    needed: int | None  # None: more than SEARCH_SEEDS (or no exploratory spread)
    power: float  # the probability of a decision with `new_seeds`, at the exploratory effect
    target: float
    estimate: float
    sd: float

    def to_json(self) -> dict:
        return {
            "new_seeds": self.new_seeds,
            "needed": self.needed,
            "power": round(self.power, 3),
            "target": self.target,
            "estimate": float(f"{self.estimate:.6g}"),
            "sd": float(f"{self.sd:.6g}"),
        }


def spread(evidence: Evidence) -> float:
    """The per-seed standard deviation of the quantity (Welch: of a difference of one new seed
    per side, so that a plan's n seeds per side have the paired formula's power)."""
    a = np.asarray(evidence.values, dtype=float)
    if len(a) < 2:
        return float("nan")
    if evidence.test != "Welch t":
        return float(a.std(ddof=1))
    b = np.asarray(evidence.values_b, dtype=float)
    return float(math.sqrt(a.var(ddof=1) + b.var(ddof=1))) if len(b) >= 2 else float("nan")


def plan(
    evidence: Evidence,
    where: Region,
    negligible: float | None = None,
    power: float = CONFIRM_POWER,
    cap: int = MAX_NEW_SEEDS,
) -> SeedPlan:
    """The confirmatory plan for a claim from its exploratory `evidence`: the fewest new seeds
    that decide it (pass, fail or no practical effect) with probability `power` if the
    exploratory estimate and spread are the truth, capped at `cap`."""
    sd, estimate = spread(evidence), evidence.estimate
    if not (math.isfinite(sd) and math.isfinite(estimate)):
        return SeedPlan(cap, None, float("nan"), power, estimate, sd)
    needed = int(seeds_needed(estimate, sd, where, negligible, evidence.resolution, power))
    new = min(needed, cap)
    got = decided_probability(estimate, sd, new, where, negligible, evidence.resolution)
    return SeedPlan(
        new,
        needed if needed <= SEARCH_SEEDS else None,
        float(got["decided"]),
        power,
        estimate,
        sd,
    )
