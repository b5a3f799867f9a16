"""Intervals that fit their quantity (a claim's `range`) and statements about every run (a
claim's `scope: every_run`): coverage by simulation, each beside the plain t failing the same
check on the same data, and how claims use them."""

import dataclasses
import functools

import numpy as np
import pytest
from scipy import special

from implicit_bias.core.verdicts import decision, planning
from implicit_bias.core.verdicts.claims import FAIL, INCONCLUSIVE, KNOWN, PASS, evaluate
from implicit_bias.core.verdicts.decision import DecisionError, Evidence, per_seed, region

REPS, N = 2000, 3  # three seeds: the paper profile's exploratory stage, where t fits worst
COVERAGE_TOLERANCE = 0.02  # four binomial sds of a 95% coverage over 2000 repetitions


def _correlations(rng, rho: float, points: int, count: int) -> np.ndarray:
    """`count` sample correlations of `points` bivariate normal points with correlation rho."""
    x = rng.standard_normal((count, points))
    y = rho * x + np.sqrt(1 - rho**2) * rng.standard_normal((count, points))
    x, y = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    return (x * y).sum(1) / np.sqrt((x * x).sum(1) * (y * y).sum(1))


@functools.lru_cache
def _draws(kind: str) -> tuple[np.ndarray, float, float]:
    """REPS x N per-seed values of one range, the centre the ranged interval is for (the mean
    on the transformed scale, transformed back) and the plain mean the plain t is for."""
    rng = np.random.default_rng(57)
    if kind == "unit":  # a share near 1 (an R^2, an accuracy): Beta(30, 3), mean 0.91
        a, b = 30.0, 3.0
        centre = float(special.expit(special.digamma(a) - special.digamma(b)))  # E logit X
        return rng.beta(a, b, (REPS, N)), centre, a / (a + b)
    if kind == "positive":  # a skewed residual: log-normal, geometric mean 0.08
        sigma = 0.6
        return rng.lognormal(np.log(0.08), sigma, (REPS, N)), 0.08, 0.08 * np.exp(sigma**2 / 2)
    # a correlation near 1: the sample correlation of 20 points at rho = 0.95; its centre on
    # Fisher's z from 200,000 draws (z is not exactly normal, nor centred at artanh(rho))
    many = _correlations(rng, 0.95, 20, 200_000)
    centre = float(np.tanh(np.arctanh(many).mean()))
    return _correlations(rng, 0.95, 20, REPS * N).reshape(REPS, N), centre, float(many.mean())


def _intervals(values: np.ndarray, kind: str) -> np.ndarray:
    return np.array(
        [Evidence(tuple(v), "one-sample t", value_range=kind).interval() for v in values]
    )


def _leaves(intervals: np.ndarray, kind: str) -> float:
    scale = decision.RANGES[kind]
    return float(np.mean((intervals[:, 0] < scale.lower) | (intervals[:, 1] > scale.upper)))


def _covers(intervals: np.ndarray, target: float) -> float:
    return float(np.mean((intervals[:, 0] <= target) & (target <= intervals[:, 1])))


RANGED = ["unit", "positive", "signed_unit"]


@pytest.mark.parametrize("kind", RANGED)
def test_a_ranged_interval_covers_at_its_level_and_never_leaves_its_range(kind):
    values, centre, _ = _draws(kind)
    intervals = _intervals(values, kind)
    assert _leaves(intervals, kind) == 0.0
    # strictly inside: the transform never merely cuts the plain interval at the bound
    scale = decision.RANGES[kind]
    assert np.all(intervals[:, 0] > scale.lower) and np.all(intervals[:, 1] < scale.upper)
    assert abs(_covers(intervals, centre) - decision.LEVEL) <= COVERAGE_TOLERANCE


@pytest.mark.parametrize("kind", RANGED)
def test_the_plain_t_fails_the_same_check_on_the_same_data(kind):
    """The companion that shows the check above can fail: on the same draws the plain t
    interval leaves the range in a fifth or more of the repetitions (and, for a skewed
    positive quantity, also covers its own mean too rarely)."""
    values, _, mean = _draws(kind)
    plain = _intervals(values, "unbounded")
    assert _leaves(plain, kind) > 0.2
    if kind == "positive":
        assert _covers(plain, mean) < decision.LEVEL - COVERAGE_TOLERANCE


def test_a_skewed_positive_residual_far_above_its_bound_fails_instead_of_inconclusive():
    """tensor_networks thm1_singular_vectors: every seed 5-15 times above `<= 0.01`."""
    e = per_seed([0.05, 0.06, 0.149])
    where = region("<=", 0.01)
    assert e.decide(where) == INCONCLUSIVE  # the plain t reaches below 0
    ranged = e.with_range("positive")
    low, high = ranged.interval()
    assert 0.01 < low < min(e.values) and high > max(e.values) / 2
    assert ranged.decide(where) == FAIL
    assert ranged.estimate == pytest.approx(float(np.exp(np.mean(np.log(e.values)))))


def test_values_at_a_bound_use_the_plain_t_cut_to_the_range_and_say_so():
    ones = Evidence((1.0, 1.0, 1.0), "one-sample t", value_range="unit")
    assert ones.interval() == (1.0, 1.0) and "bound" in ones.method
    one_at_bound = Evidence((0.9, 1.0, 0.95), "one-sample t", value_range="unit")
    plain = Evidence((0.9, 1.0, 0.95), "one-sample t").interval()
    assert plain[1] > 1.0  # the plain t leaves [0, 1] ...
    assert one_at_bound.interval() == (plain[0], 1.0)  # ... the rule cuts it at the bound
    zero = Evidence((0.0, 2e-16, 1e-16), "one-sample t", value_range="positive")
    assert zero.interval()[0] == 0.0 and not zero.transformed
    assert zero.to_json()["method"].startswith("t cut to [0, inf]")


def test_a_range_is_checked():
    with pytest.raises(DecisionError, match="outside the declared range"):
        Evidence((0.5, 1.2), "one-sample t", value_range="unit")
    with pytest.raises(DecisionError, match="difference"):
        Evidence((0.5, 0.2), "paired t", value_range="unit")
    with pytest.raises(DecisionError, match="unknown range"):
        Evidence((0.5, 0.2), "one-sample t", value_range="share")


def test_a_ranged_interval_survives_json_and_restriction():
    e = Evidence((0.2, 0.3, 0.5, 0.4), "one-sample t", seeds=(0, 1, 2, 3), value_range="unit")
    assert Evidence.from_json(e.to_json()) == e
    assert e.restricted([1, 2, 3]).value_range == "unit"


def test_the_planner_of_a_ranged_quantity_states_the_power_the_ranged_rule_has():
    """The plan works on the transformed scale: the probability of a decision it states is the
    one the ranged rule realizes on simulated seeds (log-normal, so exact on the log scale)."""
    rng = np.random.default_rng(3)
    where = region("<=", 0.1)
    explore = per_seed([0.05, 0.09, 0.06]).with_range("positive")
    got = planning.plan(explore, where)
    assert 3 <= got.new_seeds <= planning.MAX_NEW_SEEDS
    # on the log scale, at the spread the plan is sized at (the upper limit of the sample's)
    mu, sd, n = got.estimate, got.sd_upper, got.new_seeds
    draws = np.exp(rng.normal(mu, sd, (2000, n)))
    decided = np.mean(
        [per_seed(v).with_range("positive").decide(where) != INCONCLUSIVE for v in draws]
    )
    assert abs(decided - got.power) < 0.04
    # the plain planner on the same seeds states another power: the range changes the plan
    assert planning.plan(per_seed(explore.values), where).power != pytest.approx(got.power)


# ---- statements about every run ----------------------------------------------------------------

COR1 = {  # a theorem's bound on each run, checked with the book's finite-run tolerance
    "id": "cor1",
    "where": "Cor. 1",
    "quote": "converges to the max-margin direction",
    "metric": "worst_gap",
    "expect": "<= 1e-3",
    "profiles": ["paper"],
    "kind": "comparison",
}


def _cor1_values() -> dict[int, float]:
    """20 per-seed worst runs, 7 of them above the bound, whose mean is well below it."""
    below = np.linspace(0.00068, 0.00085, 13)
    above = np.linspace(0.00101, 0.00112, 7)
    return dict(enumerate(np.concatenate([below, above]).tolist()))


def test_a_bound_on_every_run_fails_on_the_runs_outside_it():
    metrics = {"worst_gap": per_seed(_cor1_values())}
    on_the_mean = evaluate(COR1, metrics, "paper")
    assert on_the_mean["status"] == PASS  # the mean's interval lies below 1e-3 ...
    every = evaluate({**COR1, "scope": "every_run"}, metrics, "paper")
    assert every["status"] == FAIL  # ... but 7 of the 20 runs do not
    assert every["seeds"]["outside"] == 7 and every["seeds"]["runs"] == 20
    assert every["value"] == pytest.approx(0.00112) and every["seeds"]["interval"] == [None, None]
    assert every["needs_seeds"] is None and every["scope"] == "every_run"
    known = {
        **COR1,
        "scope": "every_run",
        "known_deviation": {"evidence": "7 of 20 above", "profiles": ["paper"]},
    }
    assert evaluate(known, metrics, "paper")["status"] == KNOWN


def test_a_bound_on_every_run_passes_when_every_run_meets_it():
    values = {s: v for s, v in _cor1_values().items() if v <= 1e-3}
    row = evaluate({**COR1, "scope": "every_run"}, {"worst_gap": per_seed(values)}, "paper")
    assert row["status"] == PASS and row["seeds"]["outside"] == 0
    # one round-off identity: values at 1e-16, one run at 0, decided on every run
    identity = {**COR1, "expect": "<= 1e-8", "scope": "every_run"}
    roundoff = per_seed([0.0, 2.2e-16, 1.1e-16])
    assert evaluate(identity, {"worst_gap": roundoff}, "paper")["status"] == PASS


def test_every_run_under_a_plan_is_decided_on_every_committed_run_of_its_setting():
    # a run outside the region refutes a statement about every run, whichever plan it ran for
    values = {0: 0.0005, 1: 0.0005, 2: 0.0006, 3: 0.0004, 4: 0.0007, 5: 0.0009}
    plan = {"exploratory_seeds": [0, 1, 2], "seeds": [3, 4, 5], "new_seeds": 3}
    claim = {**COR1, "scope": "every_run", "seed_plan": plan}
    row = evaluate(claim, {"worst_gap": per_seed(values)}, "paper")
    assert row["stage"] == "confirmatory" and row["status"] == PASS
    assert row["seeds"]["runs"] == 6
    for outside in (0, 4, 7):  # an exploratory seed, a plan seed, a seed run for another plan
        bad = evaluate(claim, {"worst_gap": per_seed({**values, outside: 0.002})}, "paper")
        assert bad["status"] == FAIL and bad["seeds"]["outside"] == 1, outside


def test_every_run_counts_every_cell_of_a_least_favourable_choice():
    cells = {"a": per_seed([0.1, 0.2, 0.3]), "b": per_seed([0.5, 0.52, 0.55])}
    _, chosen = decision.least_favourable(cells, "high")
    assert chosen.values == cells["b"].values
    got = decision.every_run(chosen, region("<", 0.54))
    assert got.runs == 6 and got.outside == 1 and got.worst == 0.55


def test_every_run_needs_one_value_per_run():
    with pytest.raises(DecisionError, match="Welch"):
        decision.every_run(decision.welch([1.0, 2.0], [1.0, 3.0]), region("<", 0.0))


def test_the_worst_run_of_an_interval_region_is_the_one_farthest_out():
    where = decision.Region(0.8, 1.2, True)
    assert decision.every_run(per_seed([0.9, 1.25, 0.7]), where).worst == 0.7
    inside = decision.every_run(per_seed([0.9, 1.15, 1.0]), where)
    assert inside.outcome == PASS and inside.worst == 1.15  # nearest an edge


def test_ranged_evidence_is_left_as_it_is_by_a_claim_without_a_range():
    e = per_seed([0.2, 0.3, 0.4])
    row = evaluate({**COR1, "expect": "< 0.5"}, {"worst_gap": e}, "paper")
    assert "range" not in row["seeds"] and row["range"] is None
    ranged = evaluate({**COR1, "expect": "< 0.5", "range": "unit"}, {"worst_gap": e}, "paper")
    assert ranged["seeds"]["range"] == "unit" and ranged["value"] != pytest.approx(0.3)
    assert dataclasses.replace(e, value_range="unit").interval() == tuple(
        ranged["seeds"]["interval"]
    )


def test_the_claims_schema_knows_range_and_scope(tmp_path):
    import yaml

    from implicit_bias.core.verdicts.claims import claims_file, load_claims
    from implicit_bias.core.verdicts.schema import ClaimsError

    data = yaml.safe_load(claims_file("gln_norm").read_text())
    path = tmp_path / "gln_norm.yaml"
    data[3] |= {"range": "unit", "scope": "every_run"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_claims("gln_norm", path=path)[3]["range"] == "unit"
    for key, bad in (("range", "share"), ("scope", "every_seed")):
        path.write_text(yaml.safe_dump([{**data[3], key: bad}, *data[4:]], sort_keys=False))
        with pytest.raises(ClaimsError, match=key):
            load_claims("gln_norm", path=path)
