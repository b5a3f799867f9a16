"""The status page: chapter titles, counts, claims linked to their rows, a reason for each
known deviation, text badges."""

import re

from implicit_bias.core.site import status_page
from implicit_bias.core.site.status_page import claim_row, counts_text, first_sentence

EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2705\u274c]")


def row(status="pass", **extra):
    base = {
        "chapter": "gln_norm",
        "profile": "paper",
        "id": "svm_gln_matches_gd_gln",
        "where": "Fig. 2a",
        "value": 0.5,
        "paper_value": None,
        "expect": "<= 0.01",
        "status": status,
        "stale": False,
    }
    return {**base, **extra}


def test_first_sentence():
    assert first_sentence("At s = 1 the gap is 0.11 (Fig. 2). Later runs agree.") == (
        "At s = 1 the gap is 0.11 (Fig. 2)."
    )
    assert first_sentence("No full stop here") == "No full stop here"
    long = first_sentence("words " * 100)
    assert len(long) <= 160 and long.endswith("words…")  # cut at a word, never inside one
    assert first_sentence("a " * 150).endswith("a…")


def test_counts_in_a_fixed_order():
    rows = [row("inconclusive"), row("pass"), row("known deviation"), row("pass")]
    assert counts_text(rows) == "4 claims of the paper: 2 pass, 1 known deviation, 1 inconclusive"


def test_a_row_links_its_claim_and_gives_a_deviation_its_reason():
    evidence = "Eq. 21 is twice |b|_2^2 with $x$ *exactly*. The rest is long."
    line = claim_row(row("known deviation", evidence=evidence), "")
    assert "<a href='chapters/gln_norm.html#claim-svm_gln_matches_gd_gln'>" in line
    assert "status-known-deviation'>known deviation</span>" in line
    reason = re.search(r"<small><em>Why:</em> (.*?)</small>", line).group(1)
    assert reason.startswith("Eq. 21 is twice") and "The rest" not in reason
    assert not re.search(r"[|*$`]|_2", reason), reason  # nothing markdown would read
    assert line.count(" | ") == 4  # five cells
    assert "<small>" not in claim_row(row("pass", evidence=evidence), "")


def test_the_page_has_titles_counts_and_no_emoji(monkeypatch):
    monkeypatch.setattr(status_page, "_registrations", lambda chapter: {})
    rows = [row(), row("known deviation", evidence="Too small."), row(profile="smoke")]
    page = status_page.status_markdown(rows)
    assert page.index("## Profile `paper`") < page.index("## Profile `smoke`")
    assert "**Gated linear networks" in page and "**gln_norm" not in page
    assert "1 pass, 1 known deviation · [read the chapter](chapters/gln_norm.ipynb)" in page
    assert not EMOJI.search(page)
    assert EMOJI.search("status \u2705")  # the scan sees an emoji badge


def test_the_overview_comes_first_and_registration_is_said_once(monkeypatch):
    """A chapter x state table before any chapter's rows; the registration most of a chapter's
    claims share is said once, a claim registered otherwise says its own; a profile without
    results has no section; claim ids break only after an underscore."""
    regs = {
        "a_b": "registered 1111111, before its result",
        "c": "registered 2222222, no result yet",
    }
    regs["d"] = regs["a_b"]
    monkeypatch.setattr(status_page, "_registrations", lambda chapter: regs)
    rows = [row(id="a_b"), row(id="d", status="inconclusive"), row(id="c")]
    page = status_page.status_markdown(rows)
    overview = page.index("## Every chapter at a glance")
    assert overview < page.index("## Profile `paper`") and "## Profile `smoke`" not in page
    assert (
        "| <a href='#paper-gln_norm'>Gated linear networks" in page[overview:]
        and "| 2 | 1 |" in page
    )
    assert page.count("registered 1111111") == 1 and page.count("registered 2222222") == 1
    assert (
        "When each claim below was defined (its wording and expectation), unless its row says "
        "otherwise: registered 1111111, before its result." in page
    )
    assert "a_<wbr>b" not in page and ">a_b</a>" not in page  # titled in words, not by id
    # can fail: with every claim registered alike, no row repeats it
    monkeypatch.setattr(
        status_page, "_registrations", lambda chapter: {k: regs["a_b"] for k in regs}
    )
    assert "<small>registered" not in status_page.status_markdown(rows)


# a claim id or a config key: snake_case with two underscores or more
ID_SHAPED = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+){2,}\b")


def title_problems(page: str) -> list[str]:
    """Rows of the status page's tables whose title (the first cell's link text) is shaped
    like a claim id."""
    titles = re.findall(r"^\| <a href='chapters/[^']*'>(.*?)</a>", page, re.M)
    return [t for t in titles if ID_SHAPED.search(re.sub(r"<[^>]+>", "", t))]


def test_rows_are_titled_in_words_not_by_claim_ids(monkeypatch):
    monkeypatch.setattr(status_page, "_registrations", lambda chapter: {})
    measured = row(measure="the gap between $\\|w\\|_2$ and the bound (error rate)")
    quoted = row(id="fig2_algorithm1_closes_gap", quote="The algorithm closes the gap. More.")
    audit = row(id="svm_gln_audit_of_it", audit_of="svm_gln_matches_gd_gln", quote="Again.")
    page = status_page.status_markdown([measured, quoted, audit])
    assert title_problems(page) == []
    assert '>The gap between <span class="math notranslate nohighlight">\\\\(' in page
    # the maths survives markdown: its backslashes doubled, its bars and underscores entities
    assert "\\\\&#124;w\\\\&#124;&#95;2\\\\)</span> and the bound</a>" in page
    assert ">The algorithm closes the gap</a>" in page
    audited = "<a href='chapters/gln_norm.html#claim-svm_gln_matches_gd_gln'>The gap"
    assert f"an audit of {audited}" in page
    # can fail: a row titled by its id
    assert title_problems("| <a href='chapters/c.html#claim-a_b_c'>fig2_a_<wbr>b</a> | x |")


def visible_ids(page: str, ids: set[str]) -> list[str]:
    """Claim ids (id-shaped tokens equal to a claim's id) in a page's text, outside its
    href, id and title attributes (markdown's and MyST's escapes of "_" undone)."""
    text = re.sub(r"\b(?:href|id|title)=(['\"])[^'\"]*\1", "", page)
    text = text.replace("&#95;", "_").replace("\\_", "_")
    return [t for t in ID_SHAPED.findall(text) if t in ids]


def test_row_texts_name_other_claims_by_their_titles_not_their_ids(monkeypatch):
    """Evidence and a borrowed plan that name a claim of the chapter by id say its title,
    linked to its row; the registration in words, its commit in a title attribute; the
    expectation's effect word and unit in words."""
    monkeypatch.setattr(
        status_page, "_registrations", lambda c: {"svm_l2_much_worse": "<span title='x'>y</span>"}
    )
    named = row(
        "known deviation",
        id="svm_l2_weakly_correlated",
        evidence="Follows from the SVM-L2 deviation (svm_l2_much_worse): more.",
        expect="similar",
        effect="matches",
        unit="error_rate",
    )
    audit = row(
        id="svm_l2_gap_largest_here",
        audit_of="svm_l2_much_worse",
        seed_plan={"borrowed_from": "svm_l2_much_worse"},
        stage="confirmatory",
    )
    target = row(id="svm_l2_much_worse", measure="SVM-L2's error minus GD-GLN's (error rate)")
    page = status_page.status_markdown([named, audit, target])
    ids = {"svm_l2_weakly_correlated", "svm_l2_gap_largest_here", "svm_l2_much_worse"}
    assert visible_ids(page, ids) == []
    link = "<a href='chapters/gln_norm.html#claim-svm_l2_much_worse'>SVM-L2&#x27;s error"
    assert f"deviation ({link}" in page and f"seeds of {link}" in page
    assert "similar (“matches”, error rate)" in page and "error_rate" not in page
    # can fail: a row that names a claim by its id, as the evidence was written
    assert visible_ids("| x | <small>Why: (svm&#95;l2&#95;much&#95;worse)</small> |", ids)


def test_the_committed_status_page_names_no_claim_by_id():
    """The page the site shows, from the committed reports: no claim id in its text, no
    commit hash outside a title attribute."""
    rows = [r for r in status_page.dashboard_rows() if r["profile"] == "paper"]
    assert rows
    page = status_page.status_markdown(rows)
    assert visible_ids(page, {r["id"] for r in rows}) == []
    text = re.sub(r"\btitle='[^']*'", "", page)
    assert "at commit" not in text and "registered at" not in text
