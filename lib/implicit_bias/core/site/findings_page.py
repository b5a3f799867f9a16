"""Findings pages: for each paper a short referee's report a reader can cite, and one page for
the whole book of what does not reproduce, written from the claims reports of the runs the
chapter pages show (so they cannot drift from them).

A paper's report says, in sentences generated from its decided claims: what reproduced, what
did not and why (the cause of each known deviation: a failure here, an erratum in the paper's
algebra, a transcription error of the source, a limit not reached, a setting that cannot test
it), what stays open and what deciding it would take, and what the book checked of its own.
`write_findings_pages` writes them as `book/findings/<id>.md` and `book/findings/index.md`
when the website is built (`_toc.yml` lists them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..verdicts import tally
from . import verdict

FINDINGS = "book/findings"


def _escape(text: str) -> str:
    """Text as MyST reads it literally: no emphasis, math or roles from a quote's characters."""
    marks = {"*": "\\*", "_": "\\_", "$": "\\$", "`": "\\`", "[": "\\[", "]": "\\]", "<": "&lt;"}
    return "".join(marks.get(c, c) for c in text)


def _item(row: dict, chapter: str, extra: str = "") -> str:
    # raw HTML: an anchor inside a page is no document MyST could resolve
    link = f"<a href='../chapters/{chapter}.html#claim-{row['id']}'>(claim)</a>"
    said = verdict.finding(row)
    if verdict.has_maths(row):  # its maths as MyST's dollar maths, the words literal
        parts = verdict.MATH.split(said)
        said = "".join(_escape(p) if i % 2 == 0 else f"${p}$" for i, p in enumerate(parts))
    else:
        said = _escape(said)
    return f"- {said}{_escape(extra)} {link}"


def _evidence(row: dict, sentences: int | None = 2) -> str:
    """The row's evidence, its first `sentences` sentences (all of it with None: where the
    cause is argued further on, as a setting that cannot test a claim is)."""
    text, said = " ".join(str(row.get("evidence") or "").split()), []
    if sentences is None:
        return f" Evidence: {text}" if text else ""
    for _ in range(sentences):
        if not text:
            break
        first = verdict.first_sentence(text)  # never at "e.g." or "Eq."
        said.append(first)
        text = text[len(first) :].strip()
    return (" Evidence: " + " ".join(said)) if said else ""


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _negligible(row: dict) -> str:
    low_high = (row.get("seeds") or {}).get("interval") or [None, None]
    if None in low_high:
        return ""
    from ..verdicts.decision import EFFECT_SIZES

    low, high = (verdict._number(x) for x in low_high)
    size = EFFECT_SIZES.get(str(row.get("unit")), {}).get("negligible")
    band = f" (±{verdict._number(size)})" if size is not None else ""
    return (
        f"Its 95% interval [{low}, {high}] lies inside the negligible size of its unit{band}: "
        "whatever difference there is, it is too small to matter."
    )


def _below_practical(row: dict) -> str:
    low_high = (row.get("seeds") or {}).get("interval") or [None, None]
    practical = row.get("practical")
    if None in low_high or practical is None:
        return ""
    low, high = (verdict._number(x) for x in low_high)
    return (
        f"Its 95% interval [{low}, {high}] lies on the claimed side of zero, but below the "
        f"practical size {verdict._number(practical)} (its unit's negligible size, or a tenth "
        "of the paper's value): a real difference, too small to be the paper's effect."
    )


# the sections of a paper's report, in order: (state, heading, lead, how an item is told)
SECTION_LEADS = {
    "no practical effect": "The paper claims a difference; these seeds find one within the "
    "negligible size of its unit, in either direction.",
    "below practical size": "The paper claims a difference; these seeds find one in its "
    "direction, but too small to be the paper's effect.",
}


def paper_findings(chapter: str, title: str, report: dict) -> str:
    """The findings page of one chapter's paper, from its claims report."""
    rows = report.get("claims") or []
    paper = [r for r in rows if tally.kind(r) == "paper"]
    counted = tally.tally(rows)
    mine = counted["paper"]
    held = [r for r in paper if r["status"] == "pass"]
    against = [r for r in paper if tally.state(r) in tally.AGAINST_STATES]
    other = [
        r
        for r in paper
        if r["status"] == tally.KNOWN and tally.state(r) not in tally.AGAINST_STATES
    ]
    open_ = [r for r in paper if r["status"] == "inconclusive"]
    nil = [r for r in paper if r["status"] == "no practical effect"]
    problems = [r for r in rows if r["status"] in tally.PROBLEMS]
    profile = report.get("profile", "")
    bps = [r for r in paper if r["status"] == "below practical size"]
    told = {
        "pass": ("reproduces", "reproduce"),
        "against": (
            "does not (a failure here or an erratum in the paper's algebra)",
            "do not (failures here or errata in the paper's algebra)",
        ),
        "other": ("", ""),  # told by their own states below
        "no practical effect": (
            "shows no effect of practical size",
            "show no effect of practical size",
        ),
        "below practical size": (
            "finds a real effect below practical size",
            "find a real effect below practical size",
        ),
        "inconclusive": ("stays open", "stay open"),
    }
    groups = {
        "pass": held,
        "against": against,
        "other": other,
        "no practical effect": nil,
        "below practical size": bps,
        "inconclusive": open_,
    }
    phrases = [_n(len(g), *told[k]) for k, g in groups.items() if g and k != "other"]
    if other:  # by their own states: a transcription error, a limit not reached, ...
        each: dict[str, int] = {}
        for r in other:
            each[tally.state(r)] = each.get(tally.state(r), 0) + 1
        phrases.insert(
            bool(held) + bool(against),
            f"{tally.states_text(each)} (not "
            + ("a finding" if len(other) == 1 else "findings")
            + " against the paper)",
        )
    said = sum(len(g) for g in groups.values())
    if said != len(paper):  # a state no group tells: named, never dropped
        phrases.append(_n(len(paper) - said, "is in another state", "are in other states"))
    summary = ", ".join(phrases[:-1]) + (" and " if len(phrases) > 1 else "") + phrases[-1]
    lines = [
        f"# Findings: {title}",
        "",
        "What this book found of the paper's claims, as its "
        f"[chapter](../chapters/{chapter}.ipynb) decides them ({profile} profile). "
        f"Of {sum(mine.values())} claims of the paper, {summary}. "
        f"In full: {tally.tally_text(rows)}. "
        "Each sentence below can be quoted as it stands; each links to its claim's row, with "
        "the per-seed evidence ([how claims are decided](../decision-rule.md)).",
        "",
    ]
    if problems:
        lines += ["## Problems of this run", ""]
        lines += [_item(r, chapter) for r in problems] + [""]
    lines += ["## What does not reproduce", ""]
    if against:
        lines += [_item(r, chapter, _evidence(r)) for r in against] + [""]
    else:
        lines += ["No claim of the paper fails here, and no erratum was found.", ""]
    if other:
        lines += [
            "## Known deviations that are not findings against the paper",
            "",
            "A transcription error of the source this book had, a limit the runs approach but "
            "do not reach within the book's finite tolerance, or a setting that cannot test "
            "the claim (a floor or a ceiling, runs that are not the paper's algorithm or "
            "budget, a bound over all time): each is reported with its whole evidence, none "
            "counts against the paper.",
            "",
        ]
        lines += [_item(r, chapter, _evidence(r, None)) for r in other] + [""]
    if nil:
        lines += ["## No effect of practical size", "", SECTION_LEADS["no practical effect"], ""]
        lines += [_item(r, chapter, " " + _negligible(r)) for r in nil] + [""]
    if bps:
        lines += ["## Below practical size", "", SECTION_LEADS["below practical size"], ""]
        lines += [_item(r, chapter, " " + _below_practical(r)) for r in bps] + [""]
    if open_:
        lines += ["## What stays open", ""]
        lines += [_item(r, chapter, " " + verdict.why_inconclusive(r)) for r in open_] + [""]
    if held:
        lines += ["## What reproduces", ""]
        lines += [_item(r, chapter) for r in held] + [""]
    apart = "; ".join(t for t in (tally.kind_text(k, counted[k]) for k in ("book", "audit")) if t)
    if apart:
        lines += [
            "## Counted apart",
            "",
            f"Not claims of the paper, and never counted as its claims: {apart}. They are shown "
            f"with the claims in the <a href='../chapters/{chapter}.html#claims'>chapter's "
            "claims table</a>.",
            "",
        ]
    return "\n".join(lines)


def errata_page(reports: dict[str, dict], titles: dict[str, str]) -> str:
    """The whole book's page of what does not reproduce: per paper, its failures here and its
    errata, then the known deviations that are not findings against a paper."""
    rows = [(c, r) for c, rep in reports.items() for r in rep.get("claims") or []]
    paper = [(c, r) for c, r in rows if tally.kind(r) == "paper"]
    against = [(c, r) for c, r in paper if tally.state(r) in tally.AGAINST_STATES]
    other = [
        (c, r)
        for c, r in paper
        if r["status"] == tally.KNOWN and tally.state(r) not in tally.AGAINST_STATES
    ]
    lines = [
        "# What does not reproduce",
        "",
        "Every claim of the papers that this book finds failing, or finds an error in (an "
        "erratum of the paper's algebra, shown numerically), across the chapters, as their "
        "pages show them; then the known deviations that are not findings against a paper. Each "
        "paper's own report: " + ", ".join(f"[{titles[c]}]({c}.md)" for c in reports) + ".",
        "",
        "## Failures here and errata",
        "",
    ]
    for chapter in reports:
        mine = [r for c, r in against if c == chapter]
        if mine:
            lines += [f"**{titles[chapter]}**", ""]
            lines += [_item(r, chapter, _evidence(r, 1)) for r in mine] + [""]
    if not against:
        lines += ["None.", ""]
    lines += ["## Known deviations that are not findings against a paper", ""]
    for chapter in reports:
        mine = [r for c, r in other if c == chapter]
        if mine:
            lines += [f"**{titles[chapter]}**", ""]
            lines += [_item(r, chapter, _evidence(r, None)) for r in mine] + [""]
    if not other:
        lines += ["None.", ""]
    return "\n".join(lines)


def write_findings_pages(
    root: Path, chapters: list[str], report_of: Callable[[str], dict | None]
) -> list[Path]:
    """Write `book/findings/<id>.md` for each chapter with a report, and `index.md`; a page
    that would not change is left as it is."""
    from ..engine.paths import write_atomic
    from .status_page import chapter_title

    folder = root / FINDINGS
    folder.mkdir(parents=True, exist_ok=True)
    reports = {c: r for c in chapters if (r := report_of(c)) and r.get("claims")}
    titles = {c: chapter_title(c) for c in chapters}
    pages = {f"{c}.md": paper_findings(c, titles[c], r) for c, r in reports.items()}
    pages["index.md"] = errata_page(reports, titles)
    for c in chapters:  # a chapter not executed yet: a page that says so (the toc lists it)
        pages.setdefault(f"{c}.md", f"# Findings: {titles[c]}\n\nNot executed yet.\n")
    written = []
    for name, text in pages.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            write_atomic(path, text)
        written.append(path)
    return written
