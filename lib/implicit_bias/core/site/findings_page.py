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
from . import claims_table, verdict

FINDINGS = "book/findings"


def _escape(text: str) -> str:
    """Text as MyST reads it literally: no emphasis, math or roles from a quote's characters."""
    marks = {"*": "\\*", "_": "\\_", "$": "\\$", "`": "\\`", "[": "\\[", "]": "\\]", "<": "&lt;"}
    return "".join(marks.get(c, c) for c in text)


def _myst(text: str, maths: bool = True) -> str:
    """Text as MyST reads it: its `$...$` maths as MyST's dollar maths (with `maths`), the
    words literal."""
    if not maths:
        return _escape(text)
    parts = verdict.MATH.split(text)
    return "".join(_escape(p) if i % 2 == 0 else f"${p}$" for i, p in enumerate(parts))


def titles_of(chapter: str, report: dict) -> dict[str, str]:
    """The row titles of a chapter's claims by id, as MyST reads them: what a sentence that
    names another claim by its id says instead (`claims_table.link_claims`)."""
    return {r["id"]: _myst(claims_table.title(r)) for r in report.get("claims") or []}


def _words(text: str, chapter: str, titles: dict[str, str], maths: bool = False) -> str:
    """`text` as MyST reads it, each id of a claim of the chapter in it a link to that claim's
    row named by its title."""

    def href(cid: str) -> str:  # raw HTML: an anchor inside a page is no document MyST resolves
        return f"../chapters/{chapter}.html#claim-{cid}"

    return claims_table.link_claims(text, titles, href, lambda t: _myst(t, maths))


def _sentence(
    row: dict, chapter: str, extra: str = "", stated: bool = False, titles: dict | None = None
) -> str:
    """A claim as sentences a reader can quote, linked to its row: without its state's word
    where the paragraph around it names the state (`stated` false); a claim of the chapter
    that its evidence names by id (`titles`), by its title."""
    link = f"<a href='../chapters/{chapter}.html#claim-{row['id']}'>(claim)</a>"
    said = verdict.finding(row, stated=stated)
    titles = titles or {}
    # its maths as MyST's dollar maths, the words literal
    said = _words(said, chapter, titles, maths=verdict.has_maths(row))
    return f"{said}{_words(extra, chapter, titles)} {link}"


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


# each state's paragraph opens with its count: "Of the paper's claims, 2 {verb}." (one, many)
STATE_VERBS = {
    "pass": ("reproduces", "reproduce"),
    "does not reproduce": ("fails in this reproduction", "fail in this reproduction"),
    "erratum": (
        "rests on an error in the paper's algebra, shown numerically here",
        "rest on errors in the paper's algebra, shown numerically here",
    ),
    "transcription error": (
        "is an error of the source text this book had, not shown to be the paper's",
        "are errors of the source text this book had, not shown to be the paper's",
    ),
    "limit not reached": (
        "states a limit the runs approach but do not reach within the book's finite tolerance",
        "state limits the runs approach but do not reach within the book's finite tolerance",
    ),
    "not testable here": (
        "cannot be tested in this setting",
        "cannot be tested in this setting",
    ),
    "false alarm": (
        "is a formula its registered Monte Carlo stage failed and a confirmation on independent "
        "draws cleared",
        "are formulas their registered Monte Carlo stages failed and confirmations on "
        "independent draws cleared",
    ),
    tally.KNOWN: (
        "is a known deviation whose cause this report does not record",
        "are known deviations whose cause this report does not record",
    ),
    "no practical effect": (
        "claims a difference these seeds find only within the negligible size of its unit, "
        "in either direction",
        "claim a difference these seeds find only within the negligible size of its unit, "
        "in either direction",
    ),
    "below practical size": (
        "claims a difference these seeds find in its direction, but too small to be the "
        "paper's effect",
        "claim a difference these seeds find in their direction, but too small to be the "
        "paper's effect",
    ),
    "inconclusive": (
        "stays open: these seeds cannot decide it, and its sentence says what deciding it "
        "would take",
        "stay open: these seeds cannot decide them, and each sentence says what deciding it "
        "would take",
    ),
}
PROSE_MAX = 3  # a group of more claims than this is a compact list under its paragraph


def _lead(state: str, n: int, whose: str = "the paper's claims") -> str:
    one, many = STATE_VERBS.get(state, (f"is in the state {state}", f"are in the state {state}"))
    return f"Of {whose}, {n} {one if n == 1 else many}."


def _paragraphs(
    lead: str, rows: list[dict], chapter: str, extra, titles: dict | None = None
) -> list[str]:
    """A group of claims as prose: its lead, then each claim as sentences in the same
    paragraph; where there are more than `PROSE_MAX`, a compact list under the lead."""
    told = [_sentence(r, chapter, extra(r), titles=titles) for r in rows]
    if len(rows) <= PROSE_MAX:
        return [" ".join([lead, *told]), ""]
    return [lead, "", *(f"- {t}" for t in told), ""]


def _by_state(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: tally.rank(tally.state(r))):
        out.setdefault(tally.state(r), []).append(r)
    return out


def _headline(against: list[dict], held: list[dict], chapter: str, titles: dict) -> str:
    """The result to cite first, in sentences: the weightiest finding against the paper (an
    erratum first) and the weightiest claim that reproduces (a figure, theorem or table, a
    comparison, a number of the paper's first: `verdict._weight`)."""
    said = []
    if against:
        top = min(against, key=verdict._weight)
        said.append(f"The weightiest finding against the paper ({tally.state(top)}): ")
        said[-1] += _sentence(top, chapter, titles=titles)
    if held:
        top = min(held, key=verdict._weight)
        said.append(
            "The weightiest result that reproduces: " + _sentence(top, chapter, titles=titles)
        )
    return " ".join(said)


def paper_findings(chapter: str, title: str, report: dict) -> str:
    """The findings page of one chapter's paper, from its claims report: a lead paragraph with
    the book's one count (`verdicts.tally`) and the headline results, then a paragraph per
    state under what it says of the paper."""
    rows = report.get("claims") or []
    paper = [r for r in rows if tally.kind(r) == "paper"]
    counted = tally.tally(rows)
    mine = counted["paper"]
    by_state = _by_state(paper)
    held = by_state.get("pass", [])
    against = [r for s in tally.AGAINST_STATES for r in by_state.get(s, [])]
    other_states = [s for s in by_state if s in (*tally.CAUSE_STATES.values(), tally.KNOWN)]
    other_states = [s for s in other_states if s not in tally.AGAINST_STATES]
    problems = [r for r in rows if r["status"] in tally.PROBLEMS]
    profile = report.get("profile", "")
    told = {
        "pass": ("reproduces", "reproduce"),
        "against": (
            "does not (a failure here or an erratum in the paper's algebra)",
            "do not (failures here or errata in the paper's algebra)",
        ),
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
        "no practical effect": by_state.get("no practical effect", []),
        "below practical size": by_state.get("below practical size", []),
        "inconclusive": by_state.get("inconclusive", []),
    }
    phrases = [_n(len(g), *told[k]) for k, g in groups.items() if g]
    other = [r for s in other_states for r in by_state[s]]
    if other:  # by their own states: a transcription error, a limit not reached, ...
        each = {s: len(by_state[s]) for s in other_states}
        phrases.insert(
            bool(held) + bool(against),
            f"{tally.states_text(each)} (not "
            + ("a finding" if len(other) == 1 else "findings")
            + " against the paper)",
        )
    said = sum(len(g) for g in groups.values()) + len(other)
    if said != len(paper):  # a state no group tells: named, never dropped
        phrases.append(_n(len(paper) - said, "is in another state", "are in other states"))
    summary = ", ".join(phrases[:-1]) + (" and " if len(phrases) > 1 else "") + phrases[-1]
    titles = titles_of(chapter, report)
    headline = _headline(against, held, chapter, titles)
    lines = [
        f"# Findings: {title}",
        "",
        "This is what this book found of the paper's claims, as its "
        f"[chapter](../chapters/{chapter}.ipynb) decides them ({profile} profile). "
        f"Of {sum(mine.values())} claims of the paper, {summary}. "
        f"In full: {tally.tally_text(rows)}. " + (f"{headline} " if headline else "") + ""
        "Each sentence below can be quoted as it stands; each links to its claim's row, with "
        "the per-seed evidence ([how claims are decided](../decision-rule.md)).",
        "",
    ]
    if problems:
        lines += ["## Problems of this run", ""]
        lead = (
            f"This run has {_n(len(problems), 'problem', 'problems')} of its own (a claim "
            "that fails without a known cause, passes against its declared deviation, or "
            "misses its metric or tasks): its verdicts are not final until it is fixed."
        )
        lines += _paragraphs(lead, problems, chapter, lambda r: "", titles)
    lines += ["## What does not reproduce", ""]
    for state in tally.AGAINST_STATES:
        if by_state.get(state):
            lead = _lead(state, len(by_state[state]))
            lines += _paragraphs(lead, by_state[state], chapter, _evidence, titles)
    if not against:
        lines += ["No claim of the paper fails here, and no erratum was found.", ""]
    if other:
        lines += [
            "## Known deviations that are not findings against the paper",
            "",
            f"{_n(len(other), 'claim', 'claims')} of the paper "
            + ("deviates" if len(other) == 1 else "deviate")
            + " for a cause that is not the paper's: a transcription error of the source "
            "this book had, a limit the runs approach but do not reach within the book's "
            "finite tolerance, or a setting that cannot test the claim. Each is told with its "
            "whole evidence; none counts against the paper.",
            "",
        ]
        for state in other_states:
            lead = _lead(state, len(by_state[state]))
            lines += _paragraphs(
                lead, by_state[state], chapter, lambda r: _evidence(r, None), titles
            )
    if groups["no practical effect"]:
        lines += ["## No effect of practical size", ""]
        rows_ = groups["no practical effect"]
        lead = _lead("no practical effect", len(rows_))
        lines += _paragraphs(lead, rows_, chapter, lambda r: " " + _negligible(r), titles)
    if groups["below practical size"]:
        lines += ["## Below practical size", ""]
        rows_ = groups["below practical size"]
        lead = _lead("below practical size", len(rows_))
        lines += _paragraphs(lead, rows_, chapter, lambda r: " " + _below_practical(r), titles)
    if groups["inconclusive"]:
        lines += ["## What stays open", ""]
        rows_ = groups["inconclusive"]
        lead = _lead("inconclusive", len(rows_))
        lines += _paragraphs(
            lead, rows_, chapter, lambda r: " " + verdict.why_inconclusive(r), titles
        )
    if held:
        lines += ["## What reproduces", ""]
        lines += _paragraphs(_lead("pass", len(held)), held, chapter, lambda r: "", titles)
    apart = tally.tally_text(rows, ("book", "audit"))  # with their qualifiers
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


def _book_lead(reports: dict[str, dict]) -> str:
    """The book's count of what its papers' claims say against them, from the one count."""
    rows = [r for rep in reports.values() for r in rep.get("claims") or []]
    mine = tally.tally(rows)["paper"]
    against = {s: n for s, n in mine.items() if s in tally.AGAINST_STATES}
    others = {
        s: n
        for s, n in mine.items()
        if s in (*tally.CAUSE_STATES.values(), tally.KNOWN) and s not in tally.AGAINST_STATES
    }
    total = sum(mine.values())
    n_against, n_other = sum(against.values()), sum(others.values())
    text = (
        f"Across its {_n(len(reports), 'chapter', 'chapters')}, this book decides "
        f"{_n(total, 'claim', 'claims')} of the papers. "
    )
    against_rows = (r for r in rows if tally.state(r) in tally.AGAINST_STATES)
    shared = tally.shared_causes(against_rows)["paper"]  # one cause, one finding
    causes = f"; {shared} of them from the cause of another" if shared else ""
    text += (
        f"Of them, {n_against} {'is a finding' if n_against == 1 else 'are findings'} against "
        f"a paper ({tally.states_text(against)}{causes}), "
        if n_against
        else "None of them is a finding against a paper, "
    )
    text += (
        f"and {n_other} {'deviates' if n_other == 1 else 'deviate'} for a cause that is not "
        f"the paper's ({tally.states_text(others)})."
        if n_other
        else "and no claim deviates for another cause."
    )
    return text


def errata_page(reports: dict[str, dict], titles: dict[str, str]) -> str:
    """The whole book's page of what does not reproduce: a lead with the book's count, then per
    paper a paragraph of its failures here and its errata, then of the known deviations that
    are not findings against a paper."""
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
        _book_lead(reports) + " Every claim of the papers that this book finds failing, or "
        "finds an error in (an erratum of the paper's algebra, shown numerically), is told "
        "below as the chapters' pages show it; then the known deviations that are not findings "
        "against a paper. Each paper's own report: "
        + ", ".join(f"[{titles[c]}]({c}.md)" for c in reports)
        + ".",
        "",
        "## Failures here and errata",
        "",
    ]
    for chapter in reports:
        mine = [r for c, r in against if c == chapter]
        if mine:
            lead = _lead_of_paper(titles[chapter], chapter, mine, "against")
            lines += _paragraphs(
                lead, mine, chapter, lambda r: _evidence(r, 1), titles_of(chapter, reports[chapter])
            )
    if not against:
        lines += ["No claim of any paper fails here, and no erratum was found.", ""]
    lines += ["## Known deviations that are not findings against a paper", ""]
    for chapter in reports:
        mine = [r for c, r in other if c == chapter]
        if mine:
            lead = _lead_of_paper(titles[chapter], chapter, mine, "other")
            lines += _paragraphs(
                lead,
                mine,
                chapter,
                lambda r: _evidence(r, None),
                titles_of(chapter, reports[chapter]),
            )
    if not other:
        lines += ["None: every deviation found is a finding against its paper.", ""]
    return "\n".join(lines)


def _lead_of_paper(title: str, chapter: str, rows: list[dict], which: str) -> str:
    counts = tally.ordered({s: len(g) for s, g in _by_state(rows).items()})
    one, many = {
        "against": ("is a finding against the paper", "are findings against the paper"),
        "other": (
            "deviates for a cause that is not the paper's",
            "deviate for a cause that is not the paper's",
        ),
    }[which]
    return (
        f"In **{_escape(title)}** ([its report]({chapter}.md)), {len(rows)} of the paper's "
        f"claims {one if len(rows) == 1 else many}: {tally.states_text(counts)}."
    )


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
