"""A chapter's claims table as a reader scans it, rewritten on the website from the claims
report the page shows (the executed notebook's table, `core.verdicts.claims`, is the
maintainer's: claim ids, metric names, the reason for every bound).

Each row is titled by what was measured, in words (the claim's `measure`; its quote where it
has none), with where the paper says it and its words (maths typeset) under it; the claim's id
stays the row's anchor. The "expected" cell says what the claim needs in one short phrase
("≤ 1e−10", "between 0.8 and 1.2", "> 0.02 (“much”, error rate)") and the paper's value;
the reason for the bound's number folds under it. No metric name is shown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from .verdict import CLAIM_ID, first_sentence, math_html

HEADER = re.compile(r"<thead><tr><th>claim</th><th>ours</th><th>expected</th><th>status</th>", re.S)
NEW_HEADER = "<thead><tr><th>claim</th><th>this run</th><th>the claim needs</th><th>state</th>"
ROW = re.compile(r"<tr id='claim-([\w-]+)'>(.*?)</tr>", re.S)
CELL = re.compile(r"<td(?: [^>]*)?>.*?</td>", re.S)
UNITS = {"error_rate": "error rate", "relative": "relative"}
TITLE_WORDS = 24  # a title longer than this is cut at a word, marked "…"


def title(row: dict) -> str:
    """What the claim measures, in words, as the row's title: its `measure` without the unit
    in brackets at its end, its first letter capital; else the first sentence of its quote;
    else its id in words."""
    words = str(row.get("measure") or "").strip()
    if words:
        words = re.sub(r"\s*\([^()]*\)$", "", words)
    else:
        words = first_sentence(" ".join(str(row.get("display") or row.get("quote") or "").split()))
        words = words.rstrip(".")
    if not words:
        words = str(row["id"]).replace("_", " ")
    parts = words.split(" ")
    if len(parts) > TITLE_WORDS:
        cut = " ".join(parts[:TITLE_WORDS])
        if cut.count("$") % 2:  # never cut inside maths
            cut = cut[: cut.rindex("$")].rstrip()
        words = cut.rstrip(".,;:") + "…"
    return words[:1].upper() + words[1:]


def link_claims(
    text: str, titles: dict[str, str], href: Callable[[str], str], escape: Callable[[str], str]
) -> str:
    """`text` in a page's markup (`escape`), each id of a claim of `titles` in it a link to
    that claim's row (`href(id)`) whose text is the claim's title (`titles[id]`, already in
    the page's markup): a note that names another claim reads as words a reader can quote."""
    out, last = [], 0
    for found in CLAIM_ID.finditer(text):
        if found.group(0) not in titles:
            continue
        cid = found.group(0)
        out += [escape(text[last : found.start()]), f"<a href='{href(cid)}'>{titles[cid]}</a>"]
        last = found.end()
    return "".join(out) + escape(text[last:])


def unit_words(row: dict) -> str:
    """A claim's effect word and unit, in words ("“much”, error rate"); '' without them."""
    extra = [f"“{row['effect']}”"] if row.get("effect") else []
    if row.get("unit"):
        extra.append(UNITS.get(str(row["unit"]), str(row["unit"]).replace("_", " ")))
    return ", ".join(extra)


def _number(text: str) -> str:
    """A bound as a reader writes it: a minus sign, not a hyphen."""
    return re.sub(r"(?<![\w.])-(?=\d)", "−", text)


def needs(row: dict) -> str:
    """What the claim needs, in one short phrase: the region it is decided on (else its
    expectation) in words, with its effect word and unit."""
    target = str(row.get("region") or row.get("expect") or "").strip()
    if target.lower() in ("true", "false"):
        phrase = "yes" if target.lower() == "true" else "no"
    elif target == "similar":
        phrase = "similar values"
    else:
        found = re.fullmatch(r"in \[([^,]+),\s*([^\]]+)\]", target)
        phrase = (
            f"between {found[1]} and {found[2]}"
            if found
            else target.replace("<=", "≤").replace(">=", "≥").replace("==", "=")
        )
    if unit_words(row):
        phrase += f" ({unit_words(row)})"
    return _number(phrase)


def _value(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _number(f"{value:.4g}")
    return html.escape(str(value))


def first_cell(row: dict, origin: str) -> str:
    where, words = row.get("where") or "", row.get("display") or row.get("quote") or ""
    said = f"<br><small>{math_html(str(where))}: “{math_html(str(words))}”</small>" if words else ""
    return f"<td><b>{math_html(title(row))}</b>{origin}{said}</td>"


def needs_cell(row: dict) -> str:
    paper = row.get("paper_value")
    paper_text = f"<br><small>the paper: {_value(paper)}</small>" if paper is not None else ""
    bound = row.get("bound") or {}
    why = (
        "<details class='claim-bound'><summary>why this number</summary><small>"
        f"{'The paper’s' if bound.get('origin') == 'paper' else 'The book’s'}: "
        f"{html.escape(str(bound['why']))}</small></details>"
        if bound.get("why")
        else ""
    )
    return f"<td>{html.escape(needs(row))}{paper_text}{why}</td>"


ORIGIN = re.compile(r"</b>((?: <small>\([^<]*\)</small>)*)")
MARKUP = re.compile(r"(<a\b[^>]*>.*?</a>|<[^>]+>)", re.S)  # a link whole, or any other tag
BARE_LINK = re.compile(r"<a href='#claim-([\w-]+)'>\1</a>")  # a link whose text is its id


def _titled(match: re.Match, titles: dict[str, str]) -> str:
    cid = match.group(1)
    return f"<a href='#claim-{cid}'>{titles[cid]}</a>" if cid in titles else match.group(0)


WHY = re.compile(r"<tr class='claim-why'>.*?</tr>", re.S)  # a row's evidence, folded


def rewrite(text: str, report: dict | None) -> str:
    """The claims table of a chapter page (`text`) in words, from `report` (the claims report
    the page shows): its header, and each row's first and "expected" cells; a boolean value
    as yes or no; a claim of the chapter that a row's text names by id, by its title, linked
    to its row. Rows the report does not hold stay as they are."""
    if not report or "<tr id='claim-" not in text:
        return text
    rows = {row["id"]: row for row in report["claims"]}
    titles = {cid: math_html(title(row)) for cid, row in rows.items()}

    def linked(part: str) -> str:  # already HTML: ids have no character it escapes
        # ids in text only: not inside a tag (an href names the id) nor a link's text, which
        # becomes the claim's title where it is the bare id
        pieces = MARKUP.split(part)
        return "".join(
            (
                BARE_LINK.sub(lambda m: _titled(m, titles), piece)
                if i % 2
                else link_claims(piece, titles, lambda cid: f"#claim-{cid}", lambda t: t)
            )
            for i, piece in enumerate(pieces)
        )

    def row_html(match: re.Match) -> str:
        row = rows.get(match.group(1))
        cells = CELL.findall(match.group(2))
        if row is None or len(cells) < 4:
            return match.group(0)
        origin = ORIGIN.search(cells[0])  # "(the book's own check)", "(an audit of ...)"
        cells[0] = first_cell(row, linked(origin.group(1)) if origin else "")
        if isinstance(row.get("value"), bool):
            cells[1] = cells[1].replace(f"<td>{row['value']}", f"<td>{_value(row['value'])}", 1)
        cells[1] = linked(cells[1])  # a plan borrowed from the claim an audit audits
        cells[2] = needs_cell(row)
        return f"<tr id='claim-{match.group(1)}'>{''.join(cells)}</tr>"

    text = WHY.sub(lambda m: linked(m.group(0)), ROW.sub(row_html, text))
    return HEADER.sub(NEW_HEADER, text)
