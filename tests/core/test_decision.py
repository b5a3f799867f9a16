"""The book's decision rule: its error rate under no difference, its power at the effect it
says it detects, and how claims use it."""

import numpy as np
import pytest

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.claims import (
    INCONCLUSIVE,
    KNOWN,
    PASS,
    UNEXPECTED,
    evaluate,
    reevaluate,
)
from implicit_bias.core.verdicts.decision import (
    Evidence,
    equivalence_region,
    paired,
    per_seed,
    region,
    welch,
)

DRAWS = 4000


def _pass_rate(sample, where, rng) -> float:
    return float(np.mean([sample(rng).decide(where) == decision.PASS for _ in range(DRAWS)]))


@pytest.mark.parametrize("n", [3, 5, 10])
def test_no_difference_passes_at_most_at_the_stated_rate(n):
    rng = np.random.default_rng(n)
    rate = _pass_rate(lambda r: per_seed(r.normal(0.0, 1.0, n)), region("<", 0.0), rng)
    # one-sided at 2.5%: binomial sd over 4000 draws is 0.0025
    assert rate <= 0.025 + 3 * 0.0025
    assert rate >= 0.025 - 3 * 0.0025  # and the rule is not so strict that it never passes


def test_welch_no_difference_rate():
    rng = np.random.default_rng(7)
    rate = _pass_rate(lambda r: welch(r.normal(0, 1, 4), r.normal(0, 3, 6)), region(">", 0.0), rng)
    assert rate <= 0.025 + 3 * 0.0025


def test_equivalence_at_the_margin_passes_at_most_at_the_stated_rate():
    rng = np.random.default_rng(3)
    margin = 0.5
    rate = _pass_rate(lambda r: per_seed(r.normal(margin, 0.3, 6)), equivalence_region(margin), rng)
    assert rate <= 0.025 + 3 * 0.0025


@pytest.mark.parametrize("n", [3, 5, 10])
def test_detects_the_effect_it_says_it_detects(n):
    """A planted effect of `detectable` (computed at the true standard error) is detected with
    probability POWER."""
    sigma = 1.0
    effect = decision.detectable_factor(n - 1) * sigma / np.sqrt(n)
    rng = np.random.default_rng(100 + n)
    rate = _pass_rate(lambda r: per_seed(r.normal(-effect, sigma, n)), region("<", 0.0), rng)
    assert abs(rate - decision.POWER) < 3 * np.sqrt(0.8 * 0.2 / DRAWS)


def test_outcomes_and_interval():
    e = per_seed([-0.03, -0.02, -0.04])
    low, high = e.interval()
    assert low < e.estimate < high < 0
    assert e.decide(region("<", 0.0)) == decision.PASS
    assert e.decide(region(">", 0.0)) == decision.FAIL
    assert e.decide(region("<", -0.03)) == decision.INCONCLUSIVE
    # "much" lower (2 points) moves the edge: the interval must lie below -0.02
    assert region("<", 0.0, 0.02).high == pytest.approx(-0.02)
    assert per_seed([1.0]).decide(region("<", 2.0)) == decision.INCONCLUSIVE  # one seed
    # every seed agrees: the interval is the point
    assert per_seed([0.5, 0.5, 0.5]).decide(region(">", 0.0)) == decision.PASS


def test_paired_pairs_by_seed_and_round_trips():
    e = paired({0: 1.0, 1: 2.0, 2: 4.0, 3: 9.0}, {1: 1.5, 0: 0.0, 2: 3.0})
    assert e.seeds == (0, 1, 2) and e.values == (1.0, 0.5, 1.0) and e.test == "paired t"
    again = Evidence.from_json(e.to_json())
    assert again.values == e.values and again.interval() == e.interval()
    w = welch([1, 2, 3], [2, 4, 6, 8])
    assert w.estimate == pytest.approx(2.0 - 5.0) and 2 < w.df < 5


def test_effect_words_need_a_known_unit():
    assert decision.effect_size("much", "error_rate") == 0.02
    with pytest.raises(decision.DecisionError, match="unknown unit"):
        decision.effect_size("much", "furlongs")
    with pytest.raises(decision.DecisionError, match="no size"):
        decision.effect_size("enormous", "error_rate")
    with pytest.raises(decision.DecisionError, match="non-finite"):
        Evidence((1.0, float("inf")), "one-sample t")


CLAIM = {
    "id": "a_better",
    "where": "Sec. 1",
    "quote": "A is better than B",
    "metric": "a_minus_b",
    "expect": "< 0",
    "profiles": ["paper"],
}


def test_claims_decide_evidence_on_its_interval():
    row = evaluate(CLAIM, {"a_minus_b": per_seed([-0.01, 0.004, -0.02])}, "paper")
    assert row["status"] == INCONCLUSIVE and row["seeds"]["n"] == 3
    row = evaluate(CLAIM, {"a_minus_b": per_seed([-0.01, -0.012, -0.011])}, "paper")
    assert row["status"] == PASS and row["value"] == pytest.approx(-0.011)
    # "much" better in error rate: the whole interval must lie below -0.02
    much = {**CLAIM, "effect": "much", "unit": "error_rate"}
    row = evaluate(much, {"a_minus_b": per_seed([-0.01, -0.012, -0.011])}, "paper")
    assert row["status"] == "fail" and row["region"] == "< -0.02"
    # the same value as a plain number is decided on the value
    assert evaluate(CLAIM, {"a_minus_b": -0.011}, "paper")["status"] == PASS


def test_known_deviation_with_evidence():
    claim = {**CLAIM, "known_deviation": {"profiles": ["paper"], "evidence": "B wins"}}
    assert evaluate(claim, {"a_minus_b": per_seed([0.02, 0.03, 0.025])}, "paper")["status"] == KNOWN
    assert (
        evaluate(claim, {"a_minus_b": per_seed([-0.02, -0.03, -0.025])}, "paper")["status"]
        == UNEXPECTED
    )
    assert (
        evaluate(claim, {"a_minus_b": per_seed([-0.02, 0.03, 0.0])}, "paper")["status"]
        == INCONCLUSIVE
    )


def test_a_setting_that_cannot_test_a_claim_is_not_testable_only_where_it_shows_no_effect():
    similar = {**CLAIM, "expect": "< 0", "unit": "error_rate"}
    nil = {"a_minus_b": per_seed([0.0001, -0.0002, 0.0])}  # inside the negligible 0.01
    assert evaluate(similar, nil, "paper")["status"] == "no practical effect"
    ceiling = {"profiles": ["paper"], "evidence": "no room", "cause": "not_testable"}
    row = evaluate({**similar, "known_deviation": ceiling}, nil, "paper")
    assert row["status"] == KNOWN and row["cause"] == "not_testable"
    # another cause keeps the rule's "no practical effect": only a floor or ceiling is no test
    fails = {**ceiling, "cause": "paper_fails"}
    assert evaluate({**similar, "known_deviation": fails}, nil, "paper")["status"] == (
        "no practical effect"
    )
    # a setting declared untestable that shows the effect after all is an unexpected pass
    shown = {"a_minus_b": per_seed([-0.03, -0.031, -0.029])}
    assert evaluate({**similar, "known_deviation": ceiling}, shown, "paper")["status"] == UNEXPECTED


def test_similar_claims():
    claim = {**CLAIM, "expect": "similar", "unit": "error_rate"}
    assert evaluate(claim, {"a_minus_b": per_seed([0.001, -0.002, 0.0])}, "paper")["status"] == PASS
    assert (
        evaluate(claim, {"a_minus_b": per_seed([0.03, 0.04, 0.035])}, "paper")["status"] == "fail"
    )
    assert evaluate(claim, {"a_minus_b": 0.005}, "paper")["status"] == PASS


def test_reevaluate_decides_again_from_stored_seeds():
    row = evaluate(CLAIM, {"a_minus_b": per_seed([-0.01, -0.012, -0.011])}, "paper")
    report = {"profile": "paper", "claims": [row]}
    assert reevaluate(report, [CLAIM]) == []
    stricter = {**CLAIM, "effect": "much", "unit": "error_rate"}
    assert any("fail" in p for p in reevaluate(report, [stricter]))


def test_claims_file_rejects_an_effect_without_a_size(tmp_path):
    import yaml

    from implicit_bias.core.verdicts.claims import ClaimsError, load_claims

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump([{**CLAIM, "effect": "much"}]))
    with pytest.raises(ClaimsError, match="needs a unit"):
        load_claims("c", path)
    path.write_text(yaml.safe_dump([{**CLAIM, "effect": "vast", "unit": "error_rate"}]))
    with pytest.raises(ClaimsError, match="no size for the word"):
        load_claims("c", path)
    path.write_text(yaml.safe_dump([{**CLAIM, "effect": "much", "unit": "error_rate"}]))
    assert load_claims("c", path)[0]["effect"] == "much"


def test_unconverged_runs_are_dropped_and_counted():
    import pandas as pd

    from implicit_bias.core.verdicts.evidence import Value, converged_runs

    frame = pd.DataFrame({"status": ["ok", "unconverged", "ok"], "x": [1.0, 99.0, 3.0]})
    kept, dropped = converged_runs(frame)
    assert list(kept["x"]) == [1.0, 3.0] and dropped == 1
    row = evaluate(
        {**CLAIM, "expect": "> 0"}, {"a_minus_b": Value(kept["x"].mean(), dropped)}, "paper"
    )
    assert row["status"] == PASS and row["dropped_runs"] == 1 and row["value"] == 2.0
    e = Evidence((1.0, 2.0), "one-sample t", dropped=2)
    assert Evidence.from_json(e.to_json()).dropped == 2
    assert evaluate({**CLAIM, "expect": "> 0"}, {"a_minus_b": e}, "paper")["dropped_runs"] == 2


def test_unconverged_seeds_name_each_dropped_run_so_a_plan_counts_only_its_own():
    import pandas as pd

    from implicit_bias.core.verdicts.evidence import converged_runs, unconverged_seeds

    frame = pd.DataFrame(
        {"seed": [0, 0, 3, 4, 4], "status": ["ok", "unconverged", "ok", "unconverged", "x"]}
    )
    named = unconverged_seeds(frame)
    assert sorted(named) == [0, 4, 4] and len(named) == converged_runs(frame)[1]
    assert unconverged_seeds(frame.drop(columns="status")) == []
    ev = decision.per_seed({0: 1.0, 3: 2.0, 4: 3.0}).with_dropped_runs(named)
    assert ev.dropped == 3
    assert ev.restricted([3, 4]).dropped == 2 and ev.restricted([3]).dropped == 0


def test_least_favourable_cell_is_the_one_whose_interval_reaches_furthest():
    from implicit_bias.core.verdicts.decision import least_favourable, paired_differences

    by_h = {
        10: paired_differences([-0.05, -0.04, -0.06]),  # clearly below zero
        20: paired_differences([-0.01, 0.01, -0.02]),  # straddles zero
        50: paired_differences([-0.03, -0.02, -0.025]),
    }
    assert least_favourable(by_h, "high")[0] == 20
    assert least_favourable(by_h, "low")[0] == 10
    assert (
        least_favourable({1: per_seed([0.1, 0.2, 0.15]), 2: per_seed([-0.3, -0.2, -0.25])}, "both")[
            0
        ]
        == 2
    )
    by_h[100] = paired_differences([-0.5])  # one seed: no interval, least favourable
    assert least_favourable(by_h, "high")[0] == 100
    with pytest.raises(decision.DecisionError):
        least_favourable(by_h, "<")


def test_a_least_favourable_choice_restricted_to_some_seeds_is_made_again_on_them():
    """A seed plan decides on some seeds alone: the cell least favourable on seeds 0-5 need
    not be the one on seeds 3-5, and the choice must not look at the seeds it leaves out."""
    from implicit_bias.core.verdicts.decision import least_favourable, paired_differences

    seeds = [0, 1, 2, 3, 4, 5]
    cells = {
        # worst on seeds 0-2, fine on 3-5
        "a": paired_differences(dict(zip(seeds, [0.1, -0.2, 0.3, 1.0, 1.1, 1.2]))),
        # fine on 0-2, worst on 3-5
        "b": paired_differences(dict(zip(seeds, [1.0, 1.1, 1.2, 0.5, 0.6, 0.7]))),
    }
    key, chosen = least_favourable(cells, "low")
    assert key == "a"
    assert chosen.restricted([3, 4, 5]).values == (0.5, 0.6, 0.7)  # b's, chosen on 3-5
    assert chosen.restricted([0, 1, 2]).values == (0.1, -0.2, 0.3)  # a's, chosen on 0-2
    # can fail: the cell chosen on every seed, then restricted, is a's on 3-5 as well
    naive = paired_differences(dict(zip(seeds, cells["a"].values))).restricted([3, 4, 5])
    assert naive.values == (1.0, 1.1, 1.2) != chosen.restricted([3, 4, 5]).values
    # the choice survives what chapters do to the evidence (dropped runs, resolution)
    import dataclasses

    dropped = dataclasses.replace(chosen, dropped=2)
    assert dropped.restricted([3, 4, 5]).values == (0.5, 0.6, 0.7)
    assert dropped == dataclasses.replace(cells["a"], dropped=2)  # cells are not compared


def test_a_metric_on_a_grid_is_never_more_certain_than_its_grid_step():
    """Identical per-seed values read on a grid of step 8 give an interval of +/- 8, not a
    point: a claim whose edge lies within one step of them is inconclusive."""
    same = per_seed([64.0, 64.0, 64.0], resolution=8)
    assert same.interval() == (56.0, 72.0)
    assert same.decide(region(">", 60.0)) == decision.INCONCLUSIVE
    assert per_seed([64.0, 64.0, 64.0]).decide(region(">", 60.0)) == decision.PASS  # no step
    assert same.decide(region(">", 50.0)) == decision.PASS  # beyond the step it decides
    # a wide spread is not narrowed, and the resolution survives the stored form
    wide = per_seed([40.0, 64.0, 90.0], resolution=8)
    assert wide.interval() == per_seed([40.0, 64.0, 90.0]).interval()
    assert Evidence.from_json(same.to_json()).interval() == same.interval()
    assert same.detectable == 8.0
    with pytest.raises(decision.DecisionError, match="resolution"):
        per_seed([1.0, 2.0], resolution=-1)


def test_a_claimed_difference_within_the_negligible_size_is_no_practical_effect():
    tiny = decision.paired_differences([0.0002, -0.0001, 0.0004])
    assert tiny.decide(region("<", 0.0)) == decision.INCONCLUSIVE
    assert tiny.decide(region("<", 0.0), negligible=0.01) == decision.NEGLIGIBLE
    # a pass stays a pass, even when small; an interval reaching beyond the size stays open
    small = per_seed([-0.0002, -0.0003, -0.00025])
    assert small.decide(region("<", 0.0), negligible=0.01) == decision.PASS
    assert tiny.decide(region("<", 0.0), negligible=0.0005) == decision.INCONCLUSIVE
    # beyond the size in the wrong direction: a fail, not "no practical effect"
    assert per_seed([0.3, 0.31, 0.32]).decide(region("<", 0.0), 0.01) == decision.FAIL
    assert decision.effect_size("negligible", "error_rate") == 0.001
    assert set(decision.NEGLIGIBLE_REASONS) == set(decision.EFFECT_SIZES)
    for unit, sizes in decision.EFFECT_SIZES.items():  # finer than what "similar" allows
        assert 0 < sizes["negligible"] <= sizes.get("similar", np.inf) / 10 + 1e-12, unit


def test_runs_left_out_are_counted_on_the_seeds_a_verdict_rests_on():
    """A confirmatory verdict on seeds 3-5 reports the runs left out of those seeds, not those
    of seed 6 (a chapter that names the seeds of its dropped runs), and the seeds survive the
    JSON round trip; a bare count stays as it is (nothing tells whose runs they were)."""
    import dataclasses

    from implicit_bias.core.verdicts.decision import Evidence, paired_differences

    ev = paired_differences({3: 0.5, 4: 0.6, 5: 0.7, 7: 0.8})
    named = ev.with_dropped_runs([6, 6, 4])
    assert named.dropped == 3
    assert named.restricted([3, 4, 5]).dropped == 1  # seed 4's run, not seed 6's two
    assert named.restricted([7]).dropped == 0
    assert Evidence.from_json(named.to_json()) == named
    assert "dropped_seeds" not in ev.to_json()  # other chapters' reports keep their form
    # can fail: a bare count carries over whole
    assert dataclasses.replace(ev, dropped=3).restricted([3, 4, 5]).dropped == 3
