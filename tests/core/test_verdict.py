"""The verdict a chapter opens with, the "why" of an inconclusive claim and what a figure's
claims found (core.site.verdict), from a claims report's rows."""

from implicit_bias.core.site import verdict


def row(cid, status, **extra):
    base = {
        "id": cid,
        "where": "Fig. 2a",
        "quote": f"the words of {cid}",
        "value": 0.5,
        "expect": "> 0",
        "paper_value": None,
        "status": status,
        "region": None,
        "seeds": None,
    }
    return {**base, **extra}


SEEDS = {"test": "paired t", "n": 3, "interval": [-0.0114, -0.005]}


def test_counts_and_findings_put_problems_first_and_stay_within_five():
    rows = [row(f"p{i}", "pass") for i in range(6)]
    rows += [
        row("k1", "known deviation"),
        row("k2", "known deviation"),
        row("k3", "known deviation"),
    ]
    rows += [row("i1", "inconclusive", seeds=SEEDS, region="in [-0.01, 0.01]"), row("f1", "fail")]
    assert verdict.counts_text(rows) == "6 pass, 3 known deviation, 1 inconclusive, 1 fail"
    chosen = [r["id"] for r in verdict.findings(rows)]
    assert len(chosen) == 5 and chosen[0] == "f1"
    assert {"k1", "k2", "i1"} <= set(chosen) and "k3" not in chosen
    # one finding per quote: a variant of a claim says the same words
    twins = [row("a", "pass", quote="same"), row("b", "pass", quote="same"), row("c", "pass")]
    assert [r["id"] for r in verdict.findings(twins)] == ["a", "c"]


def test_the_box_links_each_finding_to_its_row():
    rows = [row("a_b", "pass"), row("c", "known deviation"), row("d", "pass")]
    box = verdict.verdict_html({"profile": "paper", "claims": rows})
    assert box.count("<li>") == 3 and "href='#claim-a_b'" in box and "href='#claim-c'" in box
    assert "status-known-deviation'>known deviation</span> 1" in box
    assert verdict.verdict_html({"claims": []}) == ""


def test_why_inconclusive_sets_the_interval_against_the_region_and_shows_seeds_needed():
    r = row("i", "inconclusive", seeds=SEEDS, region="in [-0.01, 0.01]")
    why = verdict.why_inconclusive(r)
    assert "[−0.0114, −0.005]" in why and "in [-0.01, 0.01]" in why and "3 seeds" in why
    assert "would need" not in why  # no plan: nothing made up
    assert "need about 12 new seeds" in verdict.why_inconclusive({**r, "needs_seeds": 12})
    assert "need more than 1000 new seeds" in verdict.why_inconclusive({**r, "needs_seeds": None})
    # an interval as wide as its grid's resolution: seeds cannot narrow it, and it says so
    grid = {"test": "paired t", "n": 3, "interval": [0.125, 0.375], "resolution": 0.125}
    r = row("g", "inconclusive", seeds=grid, region="in [-0.2, 0.2]", needs_seeds=None)
    why = verdict.why_inconclusive(r)
    assert "a finer grid would" in why and "new seeds" not in why
    wider = {**grid, "interval": [0.1, 0.4]}  # the seeds' spread beyond the resolution
    assert "finer grid" not in verdict.why_inconclusive({**r, "seeds": wider})
    # one usable seed: no interval, and no count of seeds claimed (it is not "more than 1000")
    one = {"test": "paired t", "n": 1, "interval": [None, None], "values": [-0.06]}
    r = row("o", "inconclusive", seeds=one, region="> 0", needs_seeds=None, dropped_runs=2)
    why = verdict.why_inconclusive(r)
    assert "one seed has no spread" in why and "2 runs left out" in why and "1000" not in why
    from implicit_bias.core.verdicts.claims import plan_summary

    assert "unknown until a second" in plan_summary(r) and "1000" not in plan_summary(r)
    assert "more than 1000" in plan_summary({**r, "seeds": {**one, "n": 3}})
    # the claims table's row of a grid-bound interval says what the verdict box says
    g = row("g", "inconclusive", seeds=grid, region="in [-0.2, 0.2]", needs_seeds=None)
    assert "more seeds cannot decide it" in plan_summary(g) and "1000" not in plan_summary(g)
    assert "more than 1000" in plan_summary({**g, "seeds": wider})


def test_what_a_figure_found_says_where_the_run_disagrees():
    assert verdict.figure_run([]) == ""
    assert verdict.figure_run([row("a", "pass"), row("b", "pass")]) == (
        "all 2 claims it checks reproduce."
    )
    one = verdict.figure_run([row("a", "pass", paper_value=0.4)])
    assert one == "the claim it checks reproduces: ours 0.5 (paper 0.4)."
    mixed = verdict.figure_run(
        [row("a", "pass"), row("b", "known deviation", quote="SVM_L2 performs much worse")]
    )
    assert mixed.startswith("1 of the 2 claims it checks reproduce; not reproduced: ")
    assert "“SVM L2 performs much worse” (ours 0.5, expected > 0)" in mixed
    undecided = verdict.figure_run([row("i", "inconclusive", seeds=SEEDS, region="in [0, 1]")])
    assert undecided.startswith("undecided: ") and "against in [0, 1]" in undecided
