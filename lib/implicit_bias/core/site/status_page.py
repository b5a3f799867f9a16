"""The book's status page, `book/status.md` (`python -m implicit_bias status-page`): every
claim of every chapter, the paper profile first; per chapter its title (linked to the chapter),
its counts, and one row per claim, the claim's id linked to its row of the chapter's claims
table, a known deviation with the first sentence of its evidence, statuses as text badges."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from ..engine.paths import claims_results, known_chapters, project_root
from ..engine.profiles import PROFILES
from ..verdicts import claims as claims_module
from ..verdicts import tally
from . import claims_table
from .verdict import MATH, MATH_SPAN, ORDER  # ORDER: one order of the states for the site

INTRO = (
    "Every quantitative claim of the papers, as each chapter's claims file "
    "({repo}`data/claims/`) states it and the chapter decides it: the paper's claims, the "
    "book's own checks and the audits counted apart, a known deviation by its cause "
    "([How claims are decided](decision-rule.md)). *paper* is the papers' protocol, shown in "
    "the chapters; *smoke* the small profile CI runs. Each chapter's table folds under its line."
)


def dashboard_rows(profiles=PROFILES) -> list[dict]:
    """One row per claim per profile from the claims reports on disk."""
    rows = []
    for profile in profiles:
        for chapter in known_chapters():
            path = claims_results(profile) / f"{chapter}.json"
            if not path.exists():
                continue
            report = json.loads(path.read_text())
            stale = claims_module.stale_code(report)
            for claim in report["claims"]:
                rows.append({"chapter": chapter, "profile": profile, **claim, "stale": stale})
    return rows


def status_badge(status: str) -> str:
    """The status as a coloured text badge (book/_css/book.css), readable without an emoji font."""
    return f"<span class='claim-status status-{status.replace(' ', '-')}'>{status}</span>"


def chapter_title(chapter: str) -> str:
    """The chapter's title: the first level-1 heading of `notebooks/<chapter>.md`."""
    path = project_root() / "notebooks" / f"{chapter}.md"
    try:
        found = re.search(r"^# (.+)$", path.read_text(), re.M)
    except OSError:
        found = None
    return found.group(1).strip() if found else chapter


def short_title(chapter: str) -> str:
    """The chapter's title up to its colon or its bracket ("Gated linear networks"): one line
    in the overview's narrow column."""
    return re.split(r":| \(", chapter_title(chapter), maxsplit=1)[0].strip()


def first_sentence(text: str | None, limit: int = 160) -> str:
    """The first sentence of `text` (up to a full stop, ! or ? followed by a capital, an opening
    bracket or the end), at most `limit` characters: a longer one cut at a word, marked "…"."""
    text = " ".join((text or "").split())
    found = re.match(r"(.+?[.!?])(?=\s+[A-Z(\"']|$)", text)
    sentence = found.group(1) if found else text
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1]
    cut = cut[: cut.rfind(" ")] if " " in cut else cut  # never inside a word
    return cut.rstrip(".,;: ") + "…"


def counts_text(rows: list[dict]) -> str:
    """The book's one count (`verdicts.tally`): the paper's claims by state, the book's own
    checks and the audits apart."""
    return tally.tally_text(rows)


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _html(text: str) -> str:
    """Text for a table cell, as it is: escaped for HTML, and the characters markdown would
    read (a table's |, emphasis, math, code) as entities."""
    marks = {"|": "&#124;", "*": "&#42;", "_": "&#95;", "$": "&#36;", "`": "&#96;"}
    return "".join(marks.get(c, c) for c in html.escape(text))


def _registrations(chapter: str) -> dict[str, str]:
    """Per claim: the commit that registered its current definition, and whether it came before
    its first stored paper value (from git), as words."""
    from ..verdicts.registration import (
        HistoryError,
        decided_on_new_seeds,
        registration_words,
        registrations,
    )

    try:
        regs = registrations(chapter)
        fresh = decided_on_new_seeds(chapter, regs)
    except HistoryError:
        return {}

    def commits(r) -> str:
        # as long as the figures' provenance and the run record give theirs (12)
        text = f"registered at commit {(r.defined or 'uncommitted')[:12]}"
        if r.after_data:
            text += f"; a value first stored at commit {(r.data_seen or '')[:12]}"
        return text

    # in words; the commits in a title attribute, for the maintainer who looks them up
    return {
        cid: f"<span title='{commits(r)}'>{registration_words(r, fresh)}</span>"
        for cid, r in regs.items()
    }


def _markdown_maths(text: str) -> str:
    """`$...$` maths of a title in a markdown table cell: the spans MathJax typesets, their
    backslashes doubled and the characters a table or emphasis would read as entities, so
    markdown hands MathJax the maths as written."""
    parts = MATH.split(text)
    return "".join(
        _html(part)
        if i % 2 == 0
        else f"{MATH_SPAN}\\\\({_html(part.replace(chr(92), chr(92) * 2))}\\\\)</span>"
        for i, part in enumerate(parts)
    )


def row_title(row: dict) -> str:
    """A claim's row title in words (`claims_table.title`: what it measures, else its quote
    cut at a word), never its id, which stays the link's anchor."""
    return _markdown_maths(claims_table.title(row))


def expected_text(row: dict) -> str:
    """The expectation in words: its bound, its effect word and unit ("> 0 (“much”, error
    rate)"), the region it is decided on where that differs, and its practical size."""
    words = {"<=": "≤", ">=": "≥", "==": "="}
    text = re.sub(r"<=|>=|==", lambda m: words[m.group(0)], str(row["expect"]))
    if claims_table.unit_words(row):
        text += f" ({claims_table.unit_words(row)})"
    if row.get("region") and row["region"] != row["expect"]:
        text += "; decided on: " + re.sub(r"<=|>=|==", lambda m: words[m.group(0)], row["region"])
    if row.get("practical"):  # a significant difference wholly below it is not green
        text += f"; practical size {row['practical']:.3g}"
    return text


def _linked(text: str, chapter: str, titles: dict[str, str] | None) -> str:
    """`text` for a cell, each id of a claim of the chapter in it its title, linked."""

    def href(cid: str) -> str:
        return f"chapters/{chapter}.html#claim-{html.escape(cid)}"

    return claims_table.link_claims(text, titles or {}, href, _html)


def claim_row(row: dict, registered: str, titles: dict[str, str] | None = None) -> str:
    """One claim's row; `registered`: its registration, where it differs from its chapter's;
    `titles`: the row titles of its chapter's claims by id (an audit names its claim's, and a
    text that names a claim by id says its title)."""
    chapter, cid = row["chapter"], row["id"]
    claim = f"<a href='chapters/{chapter}.html#claim-{html.escape(cid)}'>{row_title(row)}</a>"
    if registered:
        claim += f"<br><small>{registered}</small>"
    paper = "" if row["paper_value"] is None else f" ({_cell(row['paper_value'])})"
    seeds = "; ".join(
        t
        for t in (claims_module.seeds_summary(row.get("seeds")), claims_module.plan_summary(row))
        if t
    )
    seeds = _linked(seeds, chapter, titles)
    ours = _cell(row["value"]) + (f"<br><small>{seeds}</small>" if seeds else "")
    if row.get("audit_of"):  # the audited claim by its title, linked
        audited = (titles or {}).get(row["audit_of"])
        target = f"<a href='chapters/{chapter}.html#claim-{html.escape(row['audit_of'])}'>"
        claim += f"<br><small>an audit of {target}{audited or 'another claim'}</a></small>"
    status = status_badge(tally.state(row)) + (" (stale)" if row["stale"] else "")
    if row["status"] == "known deviation" and row.get("evidence"):  # in the widest column
        why = _linked(first_sentence(row["evidence"]), chapter, titles)
        claim += f"<br><small><em>Why:</em> {why}</small>"
    return (
        f"| {claim} | {_cell(row['where'])} | {ours} | "
        f"{_html(expected_text(row))}{paper} | {status} |"
    )


def overview(rows: list[dict]) -> list[str]:
    """The compact table first: per profile, one row per chapter, one column per state."""
    shown = {tally.state(r) for r in rows if tally.kind(r) == "paper"}
    states = [s for s in ORDER if s in shown] + sorted(shown - set(ORDER))
    lines = []
    for profile in sorted(PROFILES, key=lambda p: p != "paper"):
        mine = [r for r in rows if r["profile"] == profile]
        if not mine:
            continue
        folded = profile != "paper"  # the site shows the paper profile; the rest folds
        lines += (
            [f"::::{{dropdown}} The {profile} profile, the paper's claims by state", ""]
            if folded
            else [f"*{profile} profile, the paper's claims by state:*", ""]
        )
        lines += [
            ":::{div} status-overview",
            "| chapter | " + " | ".join(states) + " |",
            "|---|" + "---|" * len(states),
        ]
        for chapter in dict.fromkeys(r["chapter"] for r in mine):
            counted = tally.tally(r for r in mine if r["chapter"] == chapter)["paper"]
            counts = [counted.get(s, 0) for s in states]
            cells = " | ".join(str(n) if n else "–" for n in counts)
            # raw HTML: the smoke profile's anchors are in a fold, no heading MyST resolves
            title = html.escape(short_title(chapter), quote=False)
            lines.append(f"| <a href='#{profile}-{chapter}'>{title}</a> | {cells} |")
        lines += [":::", *(["::::"] if folded else []), ""]
    return lines


def status_markdown(rows: list[dict]) -> str:
    out = ["# Status of every claim", "", INTRO, ""]
    if rows:
        out += ["## Every chapter at a glance", "", *overview(rows), ""]
    for profile in sorted(PROFILES, key=lambda p: p != "paper"):  # the site shows paper results
        prof_rows = [r for r in rows if r["profile"] == profile]
        if not prof_rows:  # a profile without results has no section
            continue
        out += [f"## Profile `{profile}`", ""]
        out += [f"All chapters: {counts_text(prof_rows)}.", ""]
        if profile == "paper":
            out += [tally.multiplicity_text(prof_rows), ""]
        stale = sorted({r["chapter"] for r in prof_rows if r["stale"]})
        if stale:
            out += [
                "**Stale:** the results of " + ", ".join(stale) + " were computed by code "
                "that has changed since (their rows say *stale*); recompute with "
                f"`python -m implicit_bias run <chapter> --profile {profile}`.",
                "",
            ]
        # the paper profile is what the site shows: a heading per chapter; the smoke profile's
        # chapters fold under one line (the page stays two screens long)
        folded = profile != "paper"
        if folded:
            out += [f":::::{{dropdown}} Each chapter at the {profile} profile", ""]
        for chapter in dict.fromkeys(r["chapter"] for r in prof_rows):
            ch_rows = [r for r in prof_rows if r["chapter"] == chapter]
            titles = {r["id"]: row_title(r) for r in ch_rows}
            registered = _registrations(chapter)
            # the registration most claims share is said once; a claim that differs says its own
            said = [registered.get(r["id"], "") for r in ch_rows]
            common = max(set(said), key=said.count) if said else ""
            shared = (
                [
                    f"When each claim below was defined (its wording and expectation), "
                    f"unless its row says otherwise: {common}.",
                    "",
                ]
                if common
                else []
            )
            # one narrow table per chapter (a phone shows it without scrolling sideways); the
            # wrapper's class lets book/_css/book.css wrap long claim ids
            # the chapter's line open, its table folded: a maintainer reads the page in two
            # screens and opens the chapter they came for
            line = f"{counts_text(ch_rows)} · [read the chapter](chapters/{chapter}.ipynb)"
            title = html.escape(chapter_title(chapter), quote=False)
            # a line, not a heading: each chapter one line and its fold (and no section title
            # can stand inside the smoke profile's fold)
            out += [f'<a id="{profile}-{chapter}"></a>**{title}**: {line}', ""]
            out += [
                f"::::{{dropdown}} Every claim, one row each ({len(ch_rows)} rows)",
                *shared,
                ":::{div} status-table",
                "| claim | where | ours | expected (paper) | status |",
                "|---|---|---|---|---|",
                *(claim_row(r, "" if s == common else s, titles) for r, s in zip(ch_rows, said)),
                ":::",
                "::::",
                "",
            ]
        if folded:
            out += [":::::", ""]
    return "\n".join(out)


README_COUNTS = re.compile(r"(<!-- counts:[^\n]*-->\n)(.*?)(<!-- /counts -->)", re.S)


def readme_counts(rows: list[dict]) -> str:
    """The README's lines of counts from the committed paper reports' rows: the whole book,
    then one line per chapter, each the book's one count (`verdicts.tally`)."""
    mine = [r for r in rows if r["profile"] == "paper"]
    lines = [f"- **All chapters** (paper profile): {counts_text(mine)}."]
    for chapter in dict.fromkeys(r["chapter"] for r in mine):
        ch_rows = [r for r in mine if r["chapter"] == chapter]
        lines.append(f"- `{chapter}`: {counts_text(ch_rows)}.")
    return "\n".join(lines) + "\n"


def write_readme_counts(rows: list[dict], readme: Path | None = None) -> bool:
    """Write `readme_counts` between the README's count markers (atomically); True where the
    README changed. A README without the markers is left as it is."""
    from ..engine.paths import write_atomic

    readme = readme or project_root() / "README.md"
    try:
        text = readme.read_text()
    except OSError:
        return False
    new = README_COUNTS.sub(lambda m: m.group(1) + readme_counts(rows) + m.group(3), text)
    if new == text:
        return False
    write_atomic(readme, new)
    return True


def write_status_page(path: Path | None = None) -> Path:
    """Write `book/status.md` from the claims reports on disk."""
    path = path or project_root() / "book" / "status.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(status_markdown(dashboard_rows()))
    return path
