"""The confirmatory seed plan: how many new seeds a claim gets, sized honestly.

Seeds 0-2 of the paper profile are the exploratory stage: they have been seen (and many claims
were written after them). Each comparison gets a fixed number of NEW seeds from a power
analysis on the exploratory estimate and spread, committed before the run that adds them; the
confirmatory verdict is the fixed-n rule of `core.verdicts.decision` on the new seeds alone.
Because the new seeds are independent of the exploratory ones that chose their number, the
rule's 2.5% error for a false pass (and for a false fail) holds for the whole procedure
(tests/core/test_seed_plan.py).

Sized honestly (plans written since; registered plans are never resized):

- **at an upper limit of the spread**: the one-sided 80% upper confidence limit of the
  exploratory standard deviation (chi-square with its degrees of freedom: 2.1 times the SD of
  three seeds), not the SD itself, which three seeds put below the true one about half the
  time (Browne 1995: a plan sized at the 100(1 - g)% upper limit reaches its power with
  probability at least 1 - g; 90% would triple the SD of three seeds and send most plans to
  the cap);
- **for the seeds that yield a value**: where only a share of the exploratory seeds yielded a
  value for the claim (`Evidence.ran_seeds`: an infeasible program), a plan of n usable seeds
  asks for about n / share, and states its power over the binomial number that will yield one;
- **not at all below a power floor**: a plan whose probability of a decision at the cap is
  below one half is not written; the claim reads "undecidable at this margin within 20 seeds",
  with the numbers (`undecidable_text`), as does a plan registered with such a power.

"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .decision import LEVEL, Evidence, Region

CONFIRM_POWER = 0.90  # the probability of a decision a plan aims for at the exploratory effect
MIN_NEW_SEEDS = 3  # never fewer: three seeds' spread is itself barely an estimate
MAX_NEW_SEEDS = 20  # the cap: a claim needing more stays inconclusive and says how many
# A plan is sized at the one-sided 80% upper confidence limit of the exploratory standard
# deviation (chi-square with the exploratory degrees of freedom), not at the sample SD: three
# seeds' SD is below the true one about half the time, often by a factor of several, and a
# plan sized on it then falls short of its power (Browne 1995: sizing at the 100(1 - g)% upper
# limit reaches the planned power with probability at least 1 - g). 80%, not 90%: at two
# degrees of freedom the 90% limit is 3.1 times the SD (about 9 times the seeds), which sends
# most plans to the cap; the 80% limit is 2.1 times it.
SD_CONFIDENCE = 0.80
# A plan whose probability of a decision at the cap is below one half is not written: the
# claim reads "undecidable at this margin within MAX_NEW_SEEDS seeds", with the numbers
POWER_FLOOR = 0.5
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
    spread_at, t_at = _sd_quantiles(n)
    s = sd * spread_at  # the sample sd at equally likely quantiles
    half = np.maximum(t_at * s / np.sqrt(n), resolution)
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


def _sd_quantiles(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each entry of `n` (shape (..., 1)): the sample sd's quantiles at the `_NODES`
    equally likely levels, in units of the true sd (shape (..., _NODES)), and the rule's t
    quantile (shape (..., 1)). They depend on n alone, and `seeds_needed` asks for the same
    998 counts for every claim (with every effect and sd broadcast over them), so they are
    computed once per distinct n in a process: the same numbers, element by element."""
    distinct, where = np.unique(n, return_inverse=True)
    spread_at, t_at = _quantiles_of(tuple(distinct.tolist()))
    shape = n.shape[:-1]
    return spread_at[where].reshape(*shape, _NODES), t_at[where].reshape(*shape, 1)


@functools.lru_cache(maxsize=32)
def _quantiles_of(counts: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    from scipy import stats

    df = np.asarray(counts, float)[:, None] - 1
    q = (np.arange(_NODES) + 0.5) / _NODES
    spread_at = np.sqrt(stats.chi2.ppf(q, df) / df)
    t_at = stats.t.ppf(1 - (1 - LEVEL) / 2, df)
    spread_at.flags.writeable = t_at.flags.writeable = False
    return spread_at, t_at


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
    that number has at the exploratory estimate and the planned spread (`sd_upper`), and the
    seeds a decision needs uncapped. `yielded` of the `ran` exploratory seeds gave a value: the
    new seeds are expected to yield in the same share. `undecidable`: the power at the cap is
    below `POWER_FLOOR`, so no plan is written."""

    new_seeds: int
    needed: int | None  # None: more than SEARCH_SEEDS (or no exploratory spread)
    power: float  # the probability of a decision with `new_seeds`, at the exploratory effect
    target: float
    estimate: float
    sd: float  # the exploratory standard deviation
    sd_upper: float = float("nan")  # its upper confidence limit, at which the plan is sized
    confidence: float = SD_CONFIDENCE
    yielded: int = 0
    ran: int = 0

    @property
    def share(self) -> float:
        """The share of the exploratory seeds that yielded a value (1 where none is known)."""
        return self.yielded / self.ran if self.ran else 1.0

    @property
    def undecidable(self) -> bool:
        """Whether even the cap decides with probability below `POWER_FLOOR` (False where the
        power is unknown: one usable seed has no spread to size from)."""
        return math.isfinite(self.power) and self.power < POWER_FLOOR

    def to_json(self) -> dict:
        sizing = (
            {
                "sizing": {
                    "sd_upper": float(f"{self.sd_upper:.6g}"),
                    "confidence": self.confidence,
                    "yielded": self.yielded,
                    "ran": self.ran,
                }
            }
            if math.isfinite(self.sd_upper) and self.ran
            else {}
        )
        return {
            "new_seeds": self.new_seeds,
            "needed": self.needed,
            "power": round(self.power, 3),
            "target": self.target,
            "estimate": float(f"{self.estimate:.6g}"),
            "sd": float(f"{self.sd:.6g}"),
        } | sizing


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


def upper_sd(sd: float, df: float, confidence: float = SD_CONFIDENCE) -> float:
    """The one-sided `confidence` upper limit of a standard deviation estimated as `sd` with
    `df` degrees of freedom: sd * sqrt(df / chi2_{1 - confidence}(df)) (NaN without df)."""
    from scipy import stats

    if not (df >= 1 and math.isfinite(sd)):
        return float("nan")
    return float(sd * math.sqrt(df / stats.chi2.ppf(1 - confidence, df)))


def decided_with_yield(
    effect,
    sd,
    n: int,
    where: Region,
    negligible: float | None = None,
    resolution: float = 0.0,
    share: float = 1.0,
) -> float:
    """The probability that `n` new seeds decide, when each yields a value with probability
    `share` (binomially; fewer than two values decide nothing)."""
    if share >= 1.0:
        return float(decided_probability(effect, sd, n, where, negligible, resolution)["decided"])
    from scipy import stats

    k = np.arange(2, n + 1)
    if not len(k):
        return 0.0
    p = decided_probability(effect, sd, k, where, negligible, resolution)["decided"]
    return float(np.sum(stats.binom.pmf(k, n, share) * p))


def plan(
    evidence: Evidence,
    where: Region,
    negligible: float | None = None,
    power: float = CONFIRM_POWER,
    cap: int = MAX_NEW_SEEDS,
    confidence: float = SD_CONFIDENCE,
) -> SeedPlan:
    """The confirmatory plan for a claim from its exploratory `evidence`: the fewest new seeds
    that decide it (pass, fail or no practical effect) with probability `power` if the
    exploratory estimate is the truth and the spread is the `confidence` upper limit of the
    exploratory one (`upper_sd`), capped at `cap`; where some exploratory seeds yielded no
    value (`Evidence.ran_seeds`), the seeds are asked for in proportion (about n / yield for n
    usable ones, the power computed over the binomial number that yield). A plan whose power
    at the cap is below `POWER_FLOOR` is `undecidable`. A quantity with a range is planned on
    its transformed scale (its `estimate` and `sd` are reported there), without the negligible
    band; with a seed at its bound, on the plain t (an approximation)."""
    yielded = len(evidence.values)
    ran = yielded if evidence.test == "Welch t" else max(len(evidence.ran_seeds), yielded)
    share = yielded / ran if ran else 1.0
    if evidence.transformed:
        where, negligible = where.on_scale(evidence.scale), None
        evidence = evidence.on_scale()
    sd, estimate = spread(evidence), evidence.estimate
    sd_up = upper_sd(sd, evidence.df, confidence)
    if not (math.isfinite(sd_up) and math.isfinite(estimate) and share > 0):
        return SeedPlan(
            cap, None, float("nan"), power, estimate, sd, sd_up, confidence, yielded, ran
        )
    res = evidence.resolution
    usable = int(seeds_needed(estimate, sd_up, where, negligible, res, power))
    needed = math.ceil(usable / share) if usable <= SEARCH_SEEDS else None
    new = min(needed or cap + 1, cap)
    got = decided_with_yield(estimate, sd_up, new, where, negligible, res, share)
    while new < cap and got < power:  # the binomial number of usable seeds: ask a few more
        new += 1
        got = decided_with_yield(estimate, sd_up, new, where, negligible, res, share)
    if needed is not None and needed < new:
        needed = new
    return SeedPlan(
        new,
        needed if needed is None or needed <= SEARCH_SEEDS else None,
        got,
        power,
        estimate,
        sd,
        sd_up,
        confidence,
        yielded,
        ran,
    )


# ---- a plan that cannot decide, in its claim's row -------------------------------------------


def undecidable(planned: SeedPlan, registered: dict | None = None) -> dict:
    """The row's reading of a plan refused by the power floor: its power at the cap and how it
    was sized; with `registered`, the row's reading of a registered plan that was below the
    floor too (kept, so the row says both)."""
    return {
        **({"registered_plan": registered} if registered else {}),
        "registered": False,
        "power": round(planned.power, 3),
        "seeds": planned.new_seeds,
        "sd_upper": float(f"{planned.sd_upper:.6g}"),
        "confidence": planned.confidence,
        "yielded": planned.yielded,
        "ran": planned.ran,
    }


def undecidable_text(row: dict) -> str:
    """A plan that cannot decide, in words ("" where the row has none)."""
    u = row.get("undecidable")
    if not u:
        return ""
    if u.get("registered_plan"):  # a registered plan below the floor, then a refused one
        earlier = undecidable_text({"undecidable": u["registered_plan"]})
        later = undecidable_text(
            {"undecidable": {k: v for k, v in u.items() if k != "registered_plan"}}
        )
        return f"{earlier}; {later}"
    if u.get("registered"):  # said whatever the verdict: a plan the floor would refuse now
        power = u.get("power")
        if power is None or not math.isfinite(float(power)):
            return (
                f"its registered plan of {u['seeds']} seeds had no power estimate (no spread "
                "to size it from): the book would not run such a plan now"
            )
        return (
            f"its registered plan of {u['seeds']} seeds had power {float(power):.2g}, below "
            "one half: the book would not run such a plan now"
        )
    share = (
        f"; {u['yielded']} of {u['ran']} exploratory seeds yielded a value"
        if u.get("ran") and u["yielded"] < u["ran"]
        else ""
    )
    plan = "second stage" if u.get("second_stage") else "plan"  # after a confirmatory stage
    return (
        f"undecidable at this margin within {u['seeds']} seeds: a {plan} of {u['seeds']} new "
        f"seeds would decide with probability {u['power']:.2g} (sized at the "
        f"{u['confidence']:.0%} upper limit of the spread, {u['sd_upper']:.3g}{share}); no "
        f"{plan} is run"
    )
