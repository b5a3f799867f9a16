"""The claims table as the website shows it (core.site.claims_table): rows titled in words, no
metric name, what a claim needs in one phrase, the reason for its number folded."""

from __future__ import annotations

from implicit_bias.core.site import claims_table, verdict

ROW = {
    "id": "svm_l2_much_worse",
    "where": "Fig. 2a",
    "quote": "In contrast, SVM-L2 performs much worse",
    "display": None,
    "measure": "the validation-error difference SVM-L2 minus SVM-GLN (error rate, 0 to 1)",
    "metric": "err_gap_l2_gln",
    "expect": "> 0",
    "effect": "much",
    "unit": "error_rate",
    "region": "> 0.02",
    "paper_value": 0.0797,
    "value": -0.00228,
    "bound": {"origin": "book", "why": "a boilerplate reason"},
    "status": "fail",
}
TABLE = (
    "<table class='claims-table'><thead><tr><th>claim</th><th>ours</th><th>expected</th>"
    "<th>status</th></tr></thead><tbody><tr id='claim-svm_l2_much_worse'><td>"
    "<b>svm_l2_much_worse</b> <small>(the book's own check)</small><br><small>Fig. 2a: "
    "“In contrast”</small><br><small>metric: <code>err_gap_l2_gln</code></small></td>"
    "<td>-0.00228</td><td>&gt; 0 (much, error_rate); decided on: &gt; 0.02<br><small>number: "
    "the book's: a boilerplate reason</small><br><small>paper: 0.0797</small></td><td><span "
    "class='claim-status status-fail'>fail</span></td></tr></tbody></table>"
)


def test_rows_are_titled_in_words_and_need_one_phrase():
    page = claims_table.rewrite(TABLE, {"claims": [ROW]})
    assert "<b>The validation-error difference SVM-L2 minus SVM-GLN</b>" in page
    assert "metric:" not in page and "err_gap_l2_gln" not in page
    assert "<td>&gt; 0.02 (“much”, error rate)<br><small>the paper: 0.0797</small>" in page
    assert "<summary>why this number</summary>" in page  # the bound's reason, folded
    assert "(the book's own check)" in page and "id='claim-svm_l2_much_worse'" in page
    assert "<th>the claim needs</th>" in page
    assert claims_table.rewrite(TABLE, None) == TABLE  # no report: the table as it was


def test_needs_and_titles_read_as_words():
    assert claims_table.needs({"expect": "in [0.8, 1.2]"}) == "between 0.8 and 1.2"
    assert claims_table.needs({"expect": "true"}) == "yes"
    assert claims_table.needs({"expect": "<= 1e-10", "region": None}) == "≤ 1e-10"
    assert claims_table.needs({"expect": "< 0", "region": "< -0.02"}) == "< −0.02"
    bare = {"id": "gap_closes", "quote": "The gap closes. Slowly."}
    assert claims_table.title(bare) == "The gap closes"
    assert claims_table.title({"id": "gap_closes"}) == "Gap closes"


def test_a_short_quote_keeps_its_formula_whole_for_mathjax():
    row = {"quote": "||beta||_1 is small", "display": "the norm $\\|\\beta\\|_1$ is small"}
    assert verdict._short_quote(row) == "“the norm $\\|\\beta\\|_1$ is small”"
    long = {"display": " ".join(["w"] * 9) + " $a + b$ end"}
    assert verdict._short_quote(long).endswith("$a + b$…”")  # not cut inside the formula
    html = verdict.math_html(verdict._short_quote(row))
    assert '<span class="math notranslate nohighlight">\\(' in html and "||" not in html


def test_a_row_that_names_another_claim_by_id_says_its_title_linked():
    """The folded evidence and the cells of a chapter's table say a claim of the chapter by
    its title, linked to its row, where the notebook's table names it by id."""
    why = (
        "<tr class='claim-why'><td colspan='4'><details><summary>why: fail</summary><small>"
        "Follows from (svm_l2_much_worse).</small></details></td></tr>"
    )
    audit = TABLE.replace("svm_l2_much_worse", "svm_l2_gap_audit", 2).replace(
        "(the book's own check)", "(an audit of svm_l2_much_worse)"
    )
    other = {**ROW, "id": "svm_l2_gap_audit", "audit_of": "svm_l2_much_worse"}
    page = claims_table.rewrite(audit + why, {"claims": [ROW, other]})
    link = "<a href='#claim-svm_l2_much_worse'>The validation-error difference SVM-L2 minus"
    assert f"Follows from ({link}" in page and f"(an audit of {link}" in page
    text = page.replace("href='#claim-svm_l2_much_worse'", "")
    assert "svm_l2_much_worse" not in text.replace("id='claim-svm_l2_gap_audit'", "")


def test_a_link_the_notebook_made_is_titled_and_never_linked_again():
    """An id inside a tag (the href of a link the notebook's table already made) is not
    linked again: 'decided on the seeds of <a href='#claim-x'>x</a>' became a link inside an
    href, its markup shown as text ('>SVM ...'). The bare id as the link's text becomes the
    claim's title."""
    borrowed = TABLE.replace(
        "</td>",
        " <small>decided on the seeds of <a href='#claim-svm_l2_much_worse'>"
        "svm_l2_much_worse</a></small></td>",
        2,
    )
    page = claims_table.rewrite(borrowed, {"claims": [ROW]})
    assert "href='#claim-<a" not in page and "'>The validation-error difference" in page
    assert page.count("<a href='#claim-svm_l2_much_worse'>") == 1
