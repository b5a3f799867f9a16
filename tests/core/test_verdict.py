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
    assert verdict.counts_text(rows) == (
        "11 claims of the paper: 6 pass, 3 known deviations, 1 inconclusive, 1 fail"
    )
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
    assert ">known deviation</span> 1" in box and "3 claims of the paper" in box
    # a known deviation shows its cause, in the badge and in its sentence's first word
    caused = [row("a", "pass"), row("c", "known deviation", cause="not_testable")]
    box = verdict.verdict_html({"profile": "paper", "claims": caused})
    assert "status-not-testable-here" in box and "Not testable here. Fig. 2a" in box
    # the book's own checks and the audits are counted apart and stay out of the findings
    apart = [row("a", "pass"), row("b", "pass", origin="book"), row("c", "pass", audit_of="a")]
    box = verdict.verdict_html({"profile": "paper", "claims": apart})
    assert "1 claim of the paper" in box and box.count("<li>") == 1
    assert "1 check of the book's own: 1 pass; 1 audit: 1 pass" in box
    assert verdict.verdict_html({"claims": []}) == ""


def test_why_inconclusive_sets_the_interval_against_the_region_and_shows_seeds_needed():
    r = row("i", "inconclusive", seeds=SEEDS, region="in [-0.01, 0.01]")
    why = verdict.why_inconclusive(r)
    assert "[−0.0114, −0.005]" in why and "in [-0.01, 0.01]" in why and "3 seeds" in why
    assert "would need" not in why  # no plan: nothing made up
    assert "need about 12 new seeds" in verdict.why_inconclusive({**r, "needs_seeds": 12})
    assert "need more than 1000 new seeds" in verdict.why_inconclusive({**r, "needs_seeds": None})
    # a plan that cannot decide says so: registered with power below one half, or refused
    weak = {"registered": True, "power": 0.05, "seeds": 20}
    assert (
        "Its registered plan of 20 seeds had power 0.05, below one half: the book would not run"
        in verdict.why_inconclusive({**r, "undecidable": weak})
    )
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
        "both claims of the paper it checks reproduce."
    )
    one = verdict.figure_run([row("a", "pass", paper_value=0.4)])
    assert one == "the claim it checks reproduces: ours 0.5 (the paper 0.4)."
    failing = row("b", "known deviation", quote="SVM_L2 performs much worse", cause="paper_fails")
    mixed = verdict.figure_run(
        [row("a", "pass"), failing, row("c", "inconclusive"), row("d", "pass", origin="book")]
    )
    # the paper's claims only, every other state counted, the first named against its region
    assert mixed.startswith(
        "1 of the 3 claims of the paper it checks reproduce (1 does not reproduce, "
        "1 inconclusive); first does not reproduce: "
    )
    strict = verdict.figure_run([row("a", "pass"), {**failing, "region": "> 0.02"}])
    assert "“SVM L2 performs much worse” (ours 0.5, needs > 0.02)" in strict
    undecided = verdict.figure_run([row("i", "inconclusive", seeds=SEEDS, region="in [0, 1]")])
    assert undecided.startswith("inconclusive: ") and "needs in [0, 1]" in undecided
    # a quote too long for the line is not cut short (a misquote): the claim is named by what
    # it measures instead (can fail: the first ten words and an ellipsis)
    long = "For larger output dimensions GaLU is slightly better than ReLU at every width we tried"
    cut = {**failing, "quote": long, "measure": "the MSE difference GaLU minus ReLU"}
    said = verdict.figure_run([cut])
    assert "the MSE difference GaLU minus ReLU (ours" in said and "…”" not in said, said
    # a figure that checks only the book's own checks says so
    own = verdict.figure_run([row("a", "pass", origin="book"), row("b", "pass", origin="book")])
    assert own == "both checks of the book's own on this figure pass."


def test_numbers_in_e_notation_read_as_powers_of_ten():
    """As the page's typeset tables write them (a reader met '2.22e−16' beside '2.2 × 10⁻¹⁶');
    can fail: the plain '.3g' format."""
    assert verdict._number(2.220446049250313e-16) == "2.22 × 10⁻¹⁶"
    assert verdict._maths_words("<= 1e-10") == "≤ 10⁻¹⁰" and verdict._number(0.5) == "0.5"
    assert verdict._maths_words("in [0.8, 1.2]") == "in [0.8, 1.2]"


def test_a_figures_line_names_the_books_checks_and_audits_as_such_and_never_quotes_the_paper():
    """A check of the book's own or an audit passes (only a claim of the paper reproduces), and
    the line names it by what it measures, not by the paper's words it stands beside."""
    quote = "For almost all data sets the residual is bounded"
    book = row("b", "pass", origin="book", quote=quote, measure="the residual's drift")
    assert (
        verdict.figure_run([book]) == "the check of the book's own on this figure passes: ours 0.5."
    )
    audit = {**book, "origin": "paper", "audit_of": "a"}
    assert verdict.figure_run([audit]) == "the audit on this figure passes: ours 0.5."
    assert verdict.figure_run([audit, audit]) == "both audits on this figure pass."
    assert verdict.figure_run([book, audit]).endswith("(the book's own and audits) pass.")
    missed = {**book, "status": "known deviation", "cause": "target_missed", "region": "< 0"}
    line = verdict.figure_run([book, missed])
    # its count names the kind; the first other row by its measure, with its reason, short
    assert line == (
        "1 of the 2 checks of the book's own on this figure pass (1 target missed); target "
        "missed: the residual's drift (ours 0.5, needs < 0); why: a target the book set itself "
        "is missed; not a finding against the paper."
    )
    assert "For almost" not in line and "reproduce" not in line
    alone = verdict.figure_run([{**missed, "audit_of": "a"}])
    assert alone.startswith("target missed: the audit of the residual's drift (ours 0.5")
    # a measure is named by its first clause (never split inside a formula), whole where the
    # line has room (can fail: the six words it was cut to before, mid-phrase), and cut from
    # its end only as far as the line needs
    open_row = {**book, "status": "inconclusive", "region": "< 0"}
    whole = {**open_row, "measure": "the measured decay exponent of the residual's distance"}
    assert "inconclusive: the measured decay exponent of the residual's distance (ours" in (
        verdict.figure_run([book, whole])
    )
    clauses = {**open_row, "measure": "SVM-LC's error minus SVM-RC's, where both are solved"}
    assert "inconclusive: SVM-LC's error minus SVM-RC's (ours" in verdict.figure_run(
        [book, clauses]
    )
    formula = {**open_row, "measure": "the gap $f(x, y)$ between the two (its aside), at the end"}
    assert "the gap $f(x, y)$ between the two (ours" in verdict.figure_run([book, formula])
    wordy = {**missed, "measure": " ".join(["the residual's distance to its limit"] * 6)}
    line = verdict.figure_run([book, wordy])
    assert len(line) <= verdict.RUN_LINE_CHARS and "missed: the residual's distance" in line
    # the paper's claims keep their words and their verb
    paper = verdict.figure_run([row("a", "pass"), {**missed, "origin": "paper", "cause": None}])
    assert paper.startswith("1 of the 2 claims of the paper it checks reproduce")
    assert "(1 known deviation); known deviation: “For almost all data sets" in paper


KNOWN = {"status": "known deviation", "region": "< 0.05", "value": 0.0716}


def test_a_deviation_not_against_the_paper_says_why_in_a_clause_of_its_evidence():
    """The box's finding and the figure's line of a transcription error, a limit not reached, a
    setting that cannot test the claim or a target missed give its reason: the evidence's own
    statement of its cause, or its first sentence (its first clause where that is long), with no
    claim id; the cause's meaning where the evidence has no such clause or points to a file."""
    from implicit_bias.core.verdicts import tally

    bounded = row(
        "t",
        **KNOWN,
        cause="not_testable",
        evidence="Not testable in a finite run: the theorem bounds the residual over all time, "
        "and every run of finite length has a bounded residual, so no run can show the "
        "statement false or true. The proxy moves 7%.",
    )
    said = verdict.finding(bounded)
    assert said.endswith("the claim needs < 0.05; why: not testable in a finite run.")
    assert verdict.figure_run([bounded]).endswith(
        "needs < 0.05); why: not testable in a finite run."
    )
    short = {**bounded, "evidence": "The printed v₂ repeats v₁'s bracket. More follows here."}
    assert verdict.reason(short) == "the printed v₂ repeats v₁'s bracket"
    # the row's own statement of its cause, its aside naming another claim left out
    stated = {
        **bounded,
        "cause": "limit_not_reached",
        "evidence": "Decided on every run: 2 of 11 runs end above 0.01. Cause (limit not "
        "reached): the statement is asymptotic (check cor2_direction_keeps_converging: every "
        "gap falls), and the gap still shrinks.",
    }
    assert verdict.reason(stated) == "the statement is asymptotic, and the gap still shrinks"
    # a pointer to a file, or no evidence: the cause's meaning
    header = {
        **bounded,
        "cause": "transcription",
        "evidence": "Lost symbols (see the file's header).",
    }
    assert verdict.reason(header) == tally.CAUSE_MEANINGS["transcription"]
    assert verdict.reason({**bounded, "evidence": None}) == tally.CAUSE_MEANINGS["not_testable"]
    # a finding against the paper, and every other state, give none
    assert verdict.reason({**bounded, "cause": "paper_fails"}) == ""
    assert "why:" not in verdict.finding({**bounded, "cause": "erratum"})
    assert verdict.reason(row("p", "pass", evidence="Holds.")) == ""


def test_no_committed_reason_names_a_claim_or_a_file_or_runs_long():
    problems = []
    for r in paper_rows_with_current_claims():
        said = verdict.reason(r)
        if verdict.CLAIM_ID.search(said) or verdict.FILE_REFERENCE.search(said):
            problems.append(f"{r['id']}: {said!r}")
        if len(said.split()) > 40:  # a clause, or the cause's meaning
            problems.append(f"{r['id']}: {len(said.split())} words")
    assert not problems, "\n".join(problems)


def paper_rows_with_current_claims():
    """Every claim of every committed paper report, with its current `quote`, `display`,
    `measure` and `where` (the report keeps what its run had; the sentence reads them from the
    claims file)."""
    import json

    from implicit_bias.core.engine.paths import claims_results
    from implicit_bias.core.verdicts.claims import load_claims

    rows = []
    for path in sorted(claims_results("paper").glob("*.json")):
        claims = {c["id"]: c for c in load_claims(path.stem)}
        for r in json.loads(path.read_text())["claims"]:
            claim = claims.get(r["id"], {})
            current = {k: claim.get(k) for k in ("display", "measure")}
            current["quote"] = claim.get("quote", r["quote"])
            rows.append({**r, **current, "where": claim.get("where", r["where"])})
    return rows


def test_every_finding_says_what_it_measures_and_shows_no_ascii_maths():
    """Each claim's sentence (the verdict box's and the findings page's) names what its number
    measures, gives the paper's value where the paper has one, and writes its maths as maths."""
    from reader_checks import ascii_maths

    problems = []
    for r in paper_rows_with_current_claims():
        said = verdict.finding(r)
        if not r.get("measure"):
            problems.append(f"{r['id']}: no measure")
        if r.get("paper_value") is not None and "the paper reports" not in said:
            problems.append(f"{r['id']}: the paper's value is not in its sentence")
        if ascii_maths(said):
            problems.append(f"{r['id']}: {ascii_maths(said)} in {said[:80]!r}")
    assert not problems, f"{len(problems)} claims:\n" + "\n".join(problems[:40])


def test_the_ascii_maths_check_can_fail():
    from reader_checks import ascii_maths

    assert ascii_maths("the norm ||beta||_1 is small") == ["||", "beta", "||"]
    assert ascii_maths("w^T x <= 1") == ["w^T", "<="]
    assert ascii_maths("the norm $\\|\\beta\\|_1$ is small, as in Fig. 2a") == []
    said = verdict.finding(row("a", "pass", display="the norm $\\|\\beta\\|_1$ falls"))
    assert ascii_maths(said) == [] and "$\\|\\beta\\|_1$" in said
    assert verdict.math_html("a $x_1 < 2$") == (
        'a <span class="math notranslate nohighlight">\\(x_1 &lt; 2\\)</span>'
    )


def test_a_quote_is_cut_at_a_sentence_never_at_an_abbreviation_or_inside_maths():
    q = verdict._quote
    assert q("It holds for a.e. time [Eq. (14)]. Then more.") == (
        "It holds for a.e. time [Eq. (14)]. […]"
    )
    assert q("As Fig. 2a shows, it is worse. And more.") == "As Fig. 2a shows, it is worse. […]"
    assert q("One sentence only.") == "One sentence only."
    long = "word " * 38 + "$\\|\\beta\\|_1 + x$ end."
    assert q(long).endswith("word…") and "$" not in q(long)


def test_a_quote_that_is_part_of_a_sentence_is_marked_so():
    q = verdict._quote
    assert (
        q("In contrast, SVM-L2 performs much worse") == "In contrast, SVM-L2 performs much worse…"
    )
    assert q("biased towards the minimum [L₂]-norm") == "…biased towards the minimum [L₂]-norm…"
    assert q("its performance is only weakly correlated.") == (
        "…its performance is only weakly correlated."
    )
    said = verdict.finding(row("a", "pass", quote="In contrast, SVM-L2 performs much worse"))
    assert "“In contrast, SVM-L2 performs much worse…” This run" in said


def test_a_statement_about_every_run_is_quoted_by_its_worst_run():
    every = {"scope": "every_run", "runs": 20, "outside": 7, "worst": 0.00112}
    said = verdict.finding(row("a", "known deviation", seeds=every, expect="<= 1e-3"))
    assert (
        "This run: 0.00112 at the worst of 20 seeds (7 outside), each seed at its worst run; "
        "the claim needs ≤ 10⁻³" in said
    )
    # a seed's value that is the smallest over its runs is not called its worst run
    smallest = "the smallest relative distance to the printed form, over the seed's runs"
    said = verdict.finding(row("a", "known deviation", seeds=every, measure=smallest))
    assert "each seed at its smallest value" in said and "worst run" not in said


def test_an_exploratory_verdict_of_a_planned_claim_says_so():
    seeds = {"n": 3, "interval": [0.1, 0.3], "test": "paired t"}
    plan = {"seeds": [3, 4, 5], "void": "its protocol changed"}
    said = verdict.finding(row("a", "pass", seeds=seeds, stage="exploratory", seed_plan=plan))
    assert "3 seeds; exploratory seeds, no confirmatory verdict)" in said
    confirmed = verdict.finding(row("a", "pass", seeds=seeds, stage="confirmatory", seed_plan=plan))
    assert "exploratory" not in confirmed


def test_a_figure_whose_paper_claims_all_hold_names_its_other_checks_that_do_not():
    rows = [row("a", "pass"), row("b", "pass"), row("c", "inconclusive", origin="book")]
    assert verdict.figure_run(rows) == (
        "both claims of the paper it checks reproduce; of the book's own checks and audits "
        "beside them, 1 inconclusive."
    )


def test_a_written_takeaway_is_labelled_the_papers_and_this_run_says_what_it_found():
    from implicit_bias.core.site.website import report_findings

    def figure(claims: str) -> str:
        return (
            "<figure class='book-figure'><figcaption><span class='written-caption'>Left: x. "
            "<span class='figure-expectation'><br><em>Expected:</em> the paper predicts y."
            "</span></span></figcaption></figure><p class='figure-provenance'>"
            f"checks: {claims}</p>"
        )

    report = {"claims": [row("a", "pass")]}
    checked = report_findings(figure("<a href='#claim-a'>a</a>"), report)
    assert "<em>This run:</em> the claim it checks reproduces" in checked
    assert checked.index("<em>This run:</em>") < checked.index("<em>Expected:</em> the paper")
    # a figure that decides no claim: its written takeaway is still the paper's, said so
    alone = report_findings(figure("none"), report)
    assert "<em>This run:</em> no claim is decided on this figure" in alone
    assert alone.index("<em>This run:</em>") < alone.index("<em>Expected:</em>")


def test_the_box_headline_gives_the_qualifiers_every_count_gives():
    """The headline of the box says which passes rest on exploratory seeds alone and which
    verdicts came at a second registered stage, as the claims footer does (`tally`)."""
    from implicit_bias.core.verdicts import tally

    seeds = {"n": 3, "interval": [0.1, 0.2]}
    rows = [
        row("a", "pass", seeds=seeds, stage="exploratory"),
        row("b", "pass", seeds=seeds, stage="confirmatory"),
        row("c", "pass", seeds=seeds, stage="second stage"),
        row("d", "pass", seeds=seeds, stage=None, origin="book"),
    ]
    box = verdict.verdict_html({"profile": "paper", "claims": rows})
    title = box.split("<p class='verdict-title'>")[1].split("</p>")[0]
    qualifier = tally.qualifiers(rows)["paper"]
    assert qualifier and qualifier in title
    assert "1 of the passes rests on exploratory seeds alone" in title
    assert "this verdict" not in title and "second registered stage, false-pass bound 5%" in title
    # the book's check beside it, briefly: said in full once
    assert (
        "1 check of the book's own: 1 pass (that pass likewise on exploratory seeds alone)" in box
    )
    footer = tally.tally_text(rows)
    assert footer.split("; 1 check")[0].endswith(qualifier)
    plain = verdict.verdict_html({"profile": "paper", "claims": rows[1:2]})
    plain_title = plain.split("<p class='verdict-title'>")[1].split("</p>")[0]
    assert "exploratory" not in plain_title and "second" not in plain_title


def test_the_box_links_the_papers_findings_page():
    rows = [row("a", "pass")]
    box = verdict.verdict_html({"profile": "paper", "chapter": "demo", "claims": rows})
    assert "href='../findings/demo.html'" in box
    assert "findings/" not in verdict.verdict_html({"profile": "paper", "claims": rows})


def test_a_figures_line_says_which_seeds_its_value_rests_on():
    """A value decided on a seed plan's seeds is quoted with them: the figure beside it may
    average every seed the profile ran (0.816 on seeds 10-12 beside a mean of 0.73 over 30)."""
    plan = {"exploratory_seeds": list(range(10)), "seeds": [10, 11, 12]}
    decided = {**SEEDS, "seeds": [12, 10, 11]}
    registered = row("a", "pass", seeds=decided, seed_plan=plan, stage="confirmatory")
    assert verdict.figure_run([registered]) == (
        "the claim it checks reproduces: ours 0.5 on registered seeds 10–12."
    )
    # a line that names the seeds quotes fewer of the claim's words: it stays one line
    words = " ".join(f"w{i}" for i in range(12))
    failing = {**registered, "status": "inconclusive", "region": "> 0", "quote": words}
    line = verdict.figure_run([failing])
    assert "“w0 w1 w2 w3 w4 w5…” (ours 0.5 on registered seeds 10–12, interval [" in line
    assert "“w0 w1 w2 w3 w4 w5 w6 w7 w8 w9…” (ours 0.5, interval [" in verdict.figure_run(
        [{**failing, "seed_plan": None}]
    )
    early = {**registered, "stage": "exploratory", "seeds": {**SEEDS, "seeds": [0, 1, 2, 7]}}
    assert "ours 0.5 on exploratory seeds 0–2, 7." in verdict.figure_run([early])
    # no plan: the value rests on every seed the profile ran, as the figure's does
    assert verdict.figure_run([row("b", "pass", seeds=decided)]).endswith("ours 0.5.")
    assert verdict.seed_list([3, 10, 4, 5, 6, 7, 8, 9, 20]) == "3–10, 20"
