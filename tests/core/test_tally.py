"""The book's one count (core.verdicts.tally): three kinds apart, a known deviation by its
cause, and the same numbers in the committed reports and the README."""

import json

import pytest

from implicit_bias.core.verdicts import tally


def row(status, **extra):
    return {"id": "c", "status": status, "origin": "paper", "audit_of": None, **extra}


def test_three_kinds_are_counted_apart_and_a_deviation_by_its_cause():
    rows = [
        row("pass"),
        row("known deviation", cause="paper_fails"),
        row("known deviation", cause="erratum"),
        row("known deviation", cause="not_testable"),
        row("pass", origin="book"),
        row("known deviation", origin="book", cause="limit_not_reached"),
        row("inconclusive", audit_of="c"),
        row("pass", origin="book", audit_of="c"),  # an audit, whatever its origin
    ]
    counted = tally.tally(rows)
    assert counted["paper"] == {
        "pass": 1,
        "does not reproduce": 1,
        "erratum": 1,
        "not testable here": 1,
    }
    assert counted["book"] == {"pass": 1, "limit not reached": 1}
    assert counted["audit"] == {"pass": 1, "inconclusive": 1}
    # only the paper's failures and its algebra count against it
    assert tally.against_paper(counted["paper"]) == 2
    assert tally.against_paper(counted["book"]) == 0
    assert tally.tally_text(rows) == (
        "4 claims of the paper: 1 pass, 1 does not reproduce, 1 erratum, 1 not testable here; "
        "2 checks of the book's own: 1 pass, 1 limit not reached; "
        "2 audits: 1 pass, 1 inconclusive"
    )
    assert tally.states_text({"does not reproduce": 2}) == "2 do not reproduce"


def test_a_count_says_its_states_in_the_plural_and_the_badges_keep_their_word():
    counts = {
        "erratum": 2,
        "transcription error": 3,
        "target missed": 9,
        "limit not reached": 1,
        "does not reproduce": 2,
    }
    assert tally.states_text(counts) == (
        "2 do not reproduce, 2 errata, 3 transcription errors, 1 limit not reached, "
        "9 targets missed"
    )
    assert tally.states_text({"erratum": 1, "known deviation": 3}) == (
        "1 erratum, 3 known deviations"
    )
    # a badge is one row's: its word stays singular
    assert tally.state(row("known deviation", cause="erratum")) == "erratum"
    assert tally.state(row("known deviation", cause="target_missed")) == "target missed"


def test_the_decision_page_defines_each_cause_as_the_counts_do():
    """The decision page's table of causes gives each badge the meaning the verdict boxes'
    glosses and the claims files' schema give it (`tally.CAUSE_MEANINGS`)."""
    from implicit_bias.core.engine.paths import project_root

    page = (project_root() / "book" / "decision-rule.md").read_text()
    for cause, name in tally.CAUSE_STATES.items():
        line = next((x for x in page.splitlines() if x.startswith(f"| **{name}** |")), "")
        assert tally.CAUSE_MEANINGS[cause] in line, f"{name}: {line[:160]!r}"
    # a report written before causes were recorded still counts, as a plain known deviation
    assert tally.tally([row("known deviation")])["paper"] == {"known deviation": 1}


def test_every_cause_has_a_state_a_meaning_and_a_badge_colour():
    from implicit_bias.core.engine.paths import project_root

    css = (project_root() / "book" / "_css" / "book.css").read_text()
    assert set(tally.CAUSES) == set(tally.CAUSE_MEANINGS) == set(tally.CAUSE_STATES)
    for name in tally.CAUSE_STATES.values():
        assert f".status-{name.replace(' ', '-')}" in css, name
    assert len(set(tally.CAUSE_STATES.values())) == len(tally.CAUSES)


def committed_paper_reports():
    from implicit_bias.core.engine.paths import claims_results

    return sorted(claims_results("paper").glob("*.json"))


@pytest.mark.parametrize("path", committed_paper_reports(), ids=lambda p: p.stem)
def test_a_committed_report_stores_the_one_count(path):
    report = json.loads(path.read_text())
    counted = tally.tally(report["claims"])
    stored = {
        "paper": report["counts"],
        "book": report.get("book_counts"),
        "audit": report["audit_counts"],
    }
    assert stored == counted, (
        f"{path.name}: its counts are not the book's one count of its rows; render it again"
    )


def test_the_readme_counts_are_the_committed_reports():
    from implicit_bias.core.engine.paths import project_root
    from implicit_bias.core.site.status_page import README_COUNTS, dashboard_rows, readme_counts

    text = (project_root() / "README.md").read_text()
    found = README_COUNTS.search(text)
    assert found, "README.md has no count markers"
    want = readme_counts(dashboard_rows(("paper",)))
    assert found.group(2) == want, (
        "README.md's counts are not the committed paper reports': "
        "run `python -m implicit_bias status-page`"
    )


def test_the_readme_check_can_fail(tmp_path):
    from implicit_bias.core.site.status_page import write_readme_counts

    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- counts: here -->\n- old\n<!-- /counts -->\ny\n")
    rows = [{"profile": "paper", "chapter": "a", **row("pass")}]
    assert write_readme_counts(rows, readme)
    assert "1 claim of the paper: 1 pass" in readme.read_text() and "old" not in readme.read_text()
    assert not write_readme_counts(rows, readme)  # written once, nothing to change


def test_the_book_says_how_many_false_passes_chance_would_give():
    rows = [row("pass", stage="confirmatory") for _ in range(30)]
    rows += [row("inconclusive", stage="confirmatory"), row("pass", stage="exploratory")]
    rows += [row("pass", stage="confirmatory", origin="book")]  # not the paper's
    text = tally.multiplicity_text(rows)
    assert text.startswith("31 claims of the paper are decided on confirmatory seeds")
    assert "about 0.8 of them would pass by chance; 30 pass." in text
    assert tally.multiplicity_text([row("pass")]).startswith("No claim")


def test_passes_on_exploratory_seeds_alone_are_said_apart():
    seeds = {"n": 3, "interval": [0.1, 0.2]}
    rows = [
        {"status": "pass", "stage": "confirmatory", "seeds": seeds},
        {"status": "pass", "stage": "exploratory", "seeds": seeds},  # a plan not yet run
        {"status": "pass", "stage": None, "seeds": seeds},  # no plan at all
        {"status": "pass", "stage": None, "seeds": None},  # one deterministic value: no seeds
        {"status": "pass", "stage": None, "seeds": seeds, "origin": "book"},
    ]
    assert tally.exploratory_passes(rows) == {"paper": 2, "book": 1, "audit": 0}
    # an audit on its claim's exploratory seeds is said too; one on its plan's seeds is not
    audits = [
        {"status": "pass", "stage": "exploratory", "seeds": seeds, "audit_of": "x"},
        {"status": "pass", "stage": "confirmatory", "seeds": seeds, "audit_of": "x"},
    ]
    assert tally.tally_text(audits) == (
        "2 audits: 2 pass (1 of the passes rests on exploratory seeds alone, with no "
        "registered plan in force behind it)"
    )
    text = tally.tally_text(rows)
    # said in full once, and briefly for the next kind
    assert text.startswith(
        "4 claims of the paper: 4 pass (2 of the passes rest on exploratory seeds alone, with "
        "no registered plan in force behind them); 1 check of the book's own: 1 pass (that pass "
        "likewise on exploratory seeds alone)"
    )
    assert text.count("exploratory seeds alone") == 2 and text.count("registered plan") == 1
    alone = tally.tally_text(rows[-1:])  # the book's alone: in full
    assert alone == (
        "1 check of the book's own: 1 pass (that pass rests on exploratory seeds alone, with no "
        "registered plan in force behind it)"
    )
    assert "exploratory" not in tally.tally_text(rows[:1])  # can fail: none, nothing said


def test_exploratory_and_second_stage_clauses_share_one_parenthesis():
    seeds = {"n": 3}
    rows = [
        {"status": "pass", "stage": "second stage", "seeds": seeds},
        {"status": "pass", "stage": None, "seeds": seeds},
        {"status": "fail", "stage": "confirmatory", "seeds": seeds},
    ]
    text = tally.tally_text(rows)
    assert "(1 of the passes rests on exploratory seeds alone, with no registered plan in " in text
    assert "force behind it; 1 of these verdicts decided at a second registered stage" in text
    assert ") (" not in text


def test_second_stage_verdicts_of_two_kinds_give_their_bound_once():
    seeds = {"n": 3}
    rows = [
        {"status": "pass", "stage": "second stage", "seeds": seeds},
        {"status": "fail", "stage": "confirmatory", "seeds": seeds},
        {"status": "pass", "stage": "second stage", "seeds": seeds, "audit_of": "c"},
    ]
    text = tally.tally_text(rows)
    assert text.count("false-pass bound 5%") == 1
    assert text.endswith(
        "1 audit: 1 pass (this verdict likewise at a second registered stage: 1 pass)"
    )


def test_deviations_that_share_another_s_cause_are_said_apart():
    rows = [
        {"status": "known deviation", "cause": "paper_fails"},
        {"status": "known deviation", "cause": "paper_fails", "same_cause_as": "a"},
        {"status": "known deviation", "cause": "paper_fails", "same_cause_as": "a"},
    ]
    assert tally.shared_causes(rows) == {"paper": 2, "book": 0, "audit": 0}
    assert tally.tally_text(rows) == (
        "3 claims of the paper: 3 do not reproduce (2 of the deviations follow from the cause "
        "of another, not findings of their own)"
    )
    # can fail: without the field, nothing is said
    assert "cause of another" not in tally.tally_text(rows[:1])


def test_passes_with_an_estimate_below_the_practical_size_are_said_apart():
    small = {
        "status": "pass",
        "stage": "confirmatory",
        "practical": 0.002,
        "seeds": {"estimate": -0.0016},
    }
    big = {**small, "seeds": {"estimate": -0.003}}
    assert tally.small_estimate_passes([small, big]) == {"paper": 1, "book": 0, "audit": 0}
    assert tally.tally_text([small, big]) == (
        "2 claims of the paper: 2 pass (1 of the passes has an estimate below the practical size "
        "of the difference claimed, the size of the effect not established)"
    )
    assert "practical" not in tally.tally_text([big])  # can fail: a clear pass says nothing
