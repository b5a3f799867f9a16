"""A practical size for every claimed difference: each unit's negligible size with its reason,
the schema refusing a claimed difference without a unit, and the state for a significant
difference below the practical size (never green), with its error rates simulated."""

import numpy as np
import pytest
import yaml

from implicit_bias.core.verdicts import decision, tally
from implicit_bias.core.verdicts.claims import PASS, SMALL, ClaimsError, evaluate, load_claims
from implicit_bias.core.verdicts.decision import per_seed, region

DRAWS = 4000
SD = 3 * np.sqrt(0.025 * 0.975 / DRAWS)  # three binomial standard deviations at 2.5%


def test_every_unit_has_a_negligible_size_with_its_reason():
    assert set(decision.NEGLIGIBLE_REASONS) == set(decision.EFFECT_SIZES)
    for unit, sizes in decision.EFFECT_SIZES.items():
        assert sizes["negligible"] > 0, unit
        assert len(decision.NEGLIGIBLE_REASONS[unit]) > 40, unit


def test_the_practical_size_is_the_negligible_size_or_a_tenth_of_the_papers_value():
    assert decision.practical_size(0.001, 0.0794, +1) == pytest.approx(0.00794)
    assert decision.practical_size(0.001, 0.005, +1) == 0.001  # the larger of the two
    # a paper value on the other side of 0 states no size of the claimed difference
    assert decision.practical_size(0.001, -0.0794, +1) == 0.001
    assert decision.practical_size(None, -0.05, -1) == pytest.approx(0.005)
    assert decision.practical_size(None, None, +1) == 0.0


def test_a_significant_difference_below_the_practical_size_is_not_a_pass():
    tiny = per_seed([0.0012, 0.0014, 0.0013, 0.0011])  # significant: interval above 0
    assert tiny.decide(region(">", 0.0)) == decision.PASS
    assert tiny.decide(region(">", 0.0), practical=0.008) == decision.SMALL
    # can fail: an interval reaching the practical size stays a pass
    assert tiny.decide(region(">", 0.0), practical=0.0014) == decision.PASS
    # "< 0" mirrors it; "similar" and intervals carry their size in their region
    assert per_seed([-0.0012, -0.0014, -0.0013]).decide(region("<", 0.0), practical=0.008) == (
        decision.SMALL
    )
    assert tiny.decide(decision.equivalence_region(0.01), practical=0.008) == decision.PASS
    # an interval that does not pass is never "below practical size"
    assert per_seed([-0.001, 0.002, 0.0005]).decide(region(">", 0.0), practical=0.008) == (
        decision.INCONCLUSIVE
    )


def _rate(effect: float, practical: float, n: int, rule, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return float(
        np.mean([rule(per_seed(rng.normal(effect, 1.0, n)), practical) for _ in range(DRAWS)])
    )


def _small(evidence, practical) -> bool:
    return evidence.decide(region(">", 0.0), practical=practical) == decision.SMALL


def _small_on_the_mean(evidence, practical) -> bool:
    """A rule that reads "below" on the estimate, not on the interval's far end."""
    return evidence.decide(region(">", 0.0)) == decision.PASS and evidence.estimate < practical


@pytest.mark.parametrize("n", [5, 20])
def test_below_practical_size_errs_at_most_at_the_stated_rate(n):
    """With the true difference at the practical size the state is reached in at most 2.5%
    of repetitions (its far end is a one-sided test at 2.5%); with none, in at most 2.5% (it
    needs a pass); and well inside the band, with seeds enough, it is found."""
    practical = 1.0
    assert _rate(practical, practical, n, _small, n) <= 0.025 + SD
    assert _rate(0.0, practical, n, _small, n + 1) <= 0.025 + SD
    if n == 20:
        assert _rate(1.5 * practical, 3 * practical, n, _small, n + 2) > 0.8


def test_below_practical_size_on_the_mean_alone_fails_the_same_simulation():
    """The can-fail companion: reading "below the practical size" from the estimate instead of
    the interval's far end calls a difference at that size small about half the time."""
    rate = _rate(1.0, 1.0, 20, _small_on_the_mean, 7)
    assert rate > 0.025 + SD and rate > 0.3


CLAIM = {
    "id": "a_more_consistent",
    "where": "Sec. 1",
    "quote": "A is more consistent than B",
    "metric": "a_minus_b",
    "kind": "comparison",
    "expect": "> 0",
    "unit": "error_rate",
    "profiles": ["paper"],
}


def test_a_claim_far_below_the_papers_size_reads_below_practical_size():
    values = {"a_minus_b": per_seed([0.0011, 0.0016, 0.0012, 0.0015, 0.0013])}
    row = evaluate({**CLAIM, "paper_value": 0.0794}, values, "paper")
    assert row["status"] == SMALL and row["practical"] == pytest.approx(0.00794)
    assert tally.state(row) == SMALL and SMALL in tally.STATES
    # can fail: the paper's value of the same order as ours leaves it a pass
    assert evaluate({**CLAIM, "paper_value": 0.002}, values, "paper")["status"] == PASS
    # within the unit's negligible size, with no paper value: below practical size too
    row = evaluate(CLAIM, {"a_minus_b": per_seed([0.0004, 0.0005, 0.0006])}, "paper")
    assert row["status"] == SMALL


def test_the_schema_refuses_a_claimed_difference_without_a_unit(tmp_path):
    path = tmp_path / "c.yaml"
    bare = {k: v for k, v in CLAIM.items() if k != "unit"}
    path.write_text(yaml.safe_dump([bare]))
    with pytest.raises(ClaimsError, match="needs a `unit`"):
        load_claims("c", path)
    path.write_text(yaml.safe_dump([{**CLAIM, "unit": "furlongs"}]))
    with pytest.raises(ClaimsError, match="unknown unit"):
        load_claims("c", path)
    # a bound other than 0 carries its own size; a statement about every run has no interval
    path.write_text(
        yaml.safe_dump([{**bare, "expect": "> 0.1"}, {**bare, "id": "b", "scope": "every_run"}])
    )
    assert len(load_claims("c", path)) == 2
    path.write_text(yaml.safe_dump([CLAIM]))
    assert load_claims("c", path)[0]["unit"] == "error_rate"
