"""What a chapter found, for its reader, from its decided claims (the claims report JSON that
`claims.check` writes): the verdict box a chapter page opens with (counts by state and the
findings that matter, one sentence each, linked to their rows of the claims table), the counts
the introduction's chapter table shows, and the "why" an inconclusive row folds out (where its
interval sits against the region its claim decides on).

The chapter decides its claims at its end, so the website places the box at its top when the
site is built (`core.site.website`), from the report of the run the page shows."""

from __future__ import annotations

import html
import re

# States in the order a reader meets them: what held, what did not, what is undecided.
ORDER = (
    "pass",
    "known deviation",
    "no practical effect",
    "inconclusive",
    "fail",
    "unexpected pass",
    "missing metric",
    "missing tasks",
)
PROBLEMS = ("fail", "unexpected pass", "missing metric", "missing tasks")
MAX_FINDINGS, QUOTE_WORDS = 5, 16


def counts(rows: list[dict]) -> dict[str, int]:
    """Claims per state, in ORDER (unknown states last)."""
    found: dict[str, int] = {}
    for row in rows:
        found[row["status"]] = found.get(row["status"], 0) + 1
    return dict(sorted(found.items(), key=lambda kv: (_rank(kv[0]), kv[0])))


def _rank(state: str) -> int:
    return ORDER.index(state) if state in ORDER else len(ORDER)


def counts_text(rows: list[dict]) -> str:
    """ "41 pass, 8 known deviation, 21 inconclusive" (the states a chapter has)."""
    return ", ".join(f"{n} {state}" for state, n in counts(rows).items())


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3g}".replace("-", "−")
    return str(value)


def _quote(text: str) -> str:
    words = " ".join(str(text).split()).split(" ")
    short = " ".join(words[:QUOTE_WORDS])
    return short.rstrip(".,;:") + ("…" if len(words) > QUOTE_WORDS else "")


def _interval(row: dict) -> tuple[float, float] | None:
    seeds = row.get("seeds") or {}
    low, high = (seeds.get("interval") or [None, None])[:2]
    return None if low is None or high is None else (low, high)


def seeds_needed(row: dict) -> str | None:
    """The new seeds a decision of an inconclusive claim would need, as the decision rule's
    power analysis put it in its row (`needs_seeds`: a number, or None for more than
    `decision.SEARCH_SEEDS`); None where the row has no such figure."""
    from ..verdicts.decision import SEARCH_SEEDS

    if "needs_seeds" not in row:
        return None
    needed = row["needs_seeds"]
    return f"about {needed}" if needed is not None else f"more than {SEARCH_SEEDS}"


def why_inconclusive(row: dict) -> str:
    """Where an inconclusive claim's 95% interval sits against the region it is decided on,
    and, where computed, the seeds a decision would need (plain text, one or two sentences)."""
    interval, region = _interval(row), row.get("region")
    seeds = row.get("seeds") or {}
    if seeds.get("n") == 1:  # no spread: neither an interval nor a count of seeds to plan
        dropped = row.get("dropped_runs") or 0
        left_out = (
            f" ({dropped} run{'s' if dropped != 1 else ''} left out as unconverged)"
            if dropped
            else ""
        )
        return (
            f"Only one seed's runs are usable{left_out}, and one seed has no spread: there is "
            "no interval to set against its region, and no count of the seeds a decision would "
            "need until a second seed's runs converge."
        )
    if interval is None or not region:
        return "These runs cannot decide it: there is no interval to set against its region."
    low, high = (_number(x) for x in interval)
    n = seeds.get("n")
    text = (
        f"The 95% interval [{low}, {high}] of {n} seeds ({seeds.get('test', 'test')}) "
        f"lies partly inside and partly outside the region it is decided on ({region}), "
        "so these seeds can neither confirm nor reject it."
    )
    from ..verdicts.claims import resolution_bound

    if resolution_bound(seeds):
        text += (
            f" Its width is the resolution of the grid it is read on"
            f" (±{_number(seeds['resolution'])}),"
            " not the seeds' spread: more seeds cannot narrow it, a finer grid would."
        )
        return text
    needed = seeds_needed(row)
    if needed is not None:
        text += f" A decision would need {needed} new seeds."
    return text


def finding(row: dict) -> str:
    """One sentence for a claim: what the paper said (where, its words, shortened) and what
    this run found (its value against the expectation), by its state."""
    where, quote = row.get("where") or "", _quote(row.get("quote") or "")
    ours, expect = _number(row.get("value")), str(row.get("expect") or "")
    paper = row.get("paper_value")
    said = f"{where}: “{quote}”"
    state = row["status"]
    if state == "pass":
        versus = f" (paper {_number(paper)})" if paper is not None else f" (expected {expect})"
        return f"Reproduced. {said}: ours {ours}{versus}."
    if state == "known deviation":  # why: in its row's fold
        return f"Not reproduced. {said}: ours {ours}, expected {expect}."
    if state == "no practical effect":
        return f"No effect of practical size. {said}: ours {ours}, within its negligible size."
    if state == "inconclusive":
        interval = _interval(row)
        span = (
            f", 95% interval [{_number(interval[0])}, {_number(interval[1])}]" if interval else ""
        )
        region = row.get("region") or expect
        return f"Undecided. {said}: ours {ours}{span}, against the region {region}."
    return f"{state.capitalize()}. {said}: ours {ours}, expected {expect}."


def _weight(row: dict) -> tuple:
    """The findings that matter first: problems, then deviations, then the paper's headline
    results (figures and theorems, with a number of the paper's), then the undecided."""
    where = str(row.get("where") or "")
    headline = bool(re.search(r"\b(Fig|Figure|Theorem|Table)\b", where))
    return (-headline, row.get("paper_value") is None, row.get("origin") == "book")


def findings(rows: list[dict], limit: int = MAX_FINDINGS) -> list[dict]:
    """Up to `limit` claims a reader should hear of first: every problem, then up to two known
    deviations, one inconclusive claim and the rest reproduced results, each group ordered by
    `_weight` (one claim per quote); problems first, then by state, in table order."""
    seen: set[str | None] = set()
    unique = []  # one finding per quote: variants of a claim say the same words
    for row in rows:
        if row.get("quote") not in seen:
            seen.add(row.get("quote"))
            unique.append(row)
    by_state = {s: sorted((r for r in unique if r["status"] == s), key=_weight) for s in ORDER}
    chosen = [r for s in PROBLEMS for r in by_state[s]][:limit]
    quota = {"known deviation": 2, "inconclusive": 1}
    for state, n in quota.items():
        chosen += by_state[state][: max(0, min(n, limit - len(chosen)))]
    chosen += by_state["pass"][: max(0, limit - len(chosen))]
    for state in quota:  # room left: more of the others
        chosen += [r for r in by_state[state] if r not in chosen][: max(0, limit - len(chosen))]
    first = ("fail", "unexpected pass", "missing metric", "missing tasks", "pass")
    rank = {s: i for i, s in enumerate(first + ("known deviation", "inconclusive"))}
    order = {id(r): i for i, r in enumerate(rows)}
    return sorted(chosen, key=lambda r: (rank.get(r["status"], len(rank)), order[id(r)]))


def badge(state: str) -> str:
    css = "status-" + state.replace(" ", "-")
    return f"<span class='claim-status {css}'>{html.escape(state)}</span>"


def verdict_html(report: dict) -> str:
    """The verdict box of a chapter from its claims report (`ClaimsReport.to_json()`)."""
    rows = report.get("claims") or []
    if not rows:
        return ""
    total = len(rows)
    tally = " ".join(f"{badge(s)} {n}" for s, n in counts(rows).items())
    items = "".join(
        f"<li>{html.escape(finding(r))} <a href='#claim-{html.escape(r['id'])}'>(claim)</a></li>"
        for r in findings(rows)
    )
    profile = html.escape(str(report.get("profile", "")))
    return (
        "<aside class='verdict-box' id='verdict' aria-label='What this chapter found'>"
        f"<p class='verdict-title'><strong>What this run found</strong> "
        f"({total} claims checked, {profile} profile): {tally}</p>"
        f"<ul class='verdict-findings'>{items}</ul>"
        "<p class='verdict-more'><a href='#claims'>Every claim, with its evidence</a></p>"
        "</aside>"
    )


RUN_QUOTE_WORDS = 10


def _short_quote(row: dict) -> str:
    words = " ".join(str(row.get("quote") or "").replace("_", " ").split()).split(" ")
    short = " ".join(words[:RUN_QUOTE_WORDS]).rstrip(".,;:")
    return f"“{short}{'…' if len(words) > RUN_QUOTE_WORDS else ''}”"


def figure_run(rows: list[dict]) -> str:
    """What this run found of the claims a figure checks, in one sentence (plain text): how
    many reproduce, and the first that does not, with its value against its expectation."""
    if not rows:
        return ""
    held = [r for r in rows if r["status"] == "pass"]
    n = len(rows)
    if len(held) == n:
        if n == 1:
            paper = rows[0].get("paper_value")
            versus = f" (paper {_number(paper)})" if paper is not None else ""
            return f"the claim it checks reproduces: ours {_number(rows[0].get('value'))}{versus}."
        return f"all {n} claims it checks reproduce."
    other = next(r for r in rows if r["status"] != "pass")
    head = f"{len(held)} of the {n} claims it checks reproduce; " if n > 1 else ""
    ours = _number(other.get("value"))
    if other["status"] == "inconclusive":
        interval = _interval(other)
        span = (
            f"{ours}, interval [{_number(interval[0])}, {_number(interval[1])}]"
            if interval
            else ours
        )
        said = f"undecided: {_short_quote(other)} (ours {span}, against {other.get('region')})"
    else:
        word = "not reproduced" if other["status"] == "known deviation" else other["status"]
        said = f"{word}: {_short_quote(other)} (ours {ours}, expected {other.get('expect')})"
    return head + said + "."
