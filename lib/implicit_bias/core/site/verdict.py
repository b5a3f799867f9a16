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

from ..verdicts import tally
from .numbers import powers_of_ten

# States in the order a reader meets them: what held, what did not (a known deviation by its
# cause), what is undecided; one order and one count for the whole site (`verdicts.tally`).
ORDER = tally.STATES
PROBLEMS = tally.PROBLEMS
MAX_FINDINGS, QUOTE_WORDS = 5, 40


def counts(rows: list[dict]) -> dict[str, int]:
    """The paper's claims per state, in ORDER (the book's checks and audits are counted apart:
    `counts_text`)."""
    return tally.tally(rows)["paper"]


def counts_text(rows: list[dict]) -> str:
    """The book's one count, each kind apart: "54 claims of the paper: 32 pass, 3 does not
    reproduce, ...; 7 checks of the book's own: ...; 16 audits: ..." (`verdicts.tally`)."""
    return tally.tally_text(rows)


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return powers_of_ten(f"{value:.3g}").replace("-", "−")
    return str(value)


# abbreviations whose full stop ends no sentence ("Eq. (14)", "Fig. 2a", "a.e. time")
ABBREVIATIONS = re.compile(
    r"(?:\b(?:Eqs?|Figs?|Sec|Secs|Thm|Lem|Def|Prop|Cor|App|cf|vs|resp|approx|al|i\.e|e\.g|a\.e)"
    r"|\.\.)\.$",
    re.I,
)


def first_sentence(words: str) -> str:
    """The first sentence of `words`: up to a full stop, ! or ? before a capital, a bracket
    or the end, never at an abbreviation's full stop or inside an ellipsis."""
    for found in re.finditer(r"[.!?](?=\s+[A-Z(\[\"']|$)", words):
        head = words[: found.end()]
        if not ABBREVIATIONS.search(head):
            return head
    return words


def _quote(text: str) -> str:
    """The paper's words as a reader can quote them: whole sentences, never cut inside one (the
    first sentence, and "[…]" where more follows); a sentence past `QUOTE_WORDS` words is cut
    at a word, marked "…" (never inside `$...$` maths)."""
    words = " ".join(str(text).split())
    sentence = first_sentence(words)
    rest = words[len(sentence) :].strip()
    parts = sentence.split(" ")
    if len(parts) > QUOTE_WORDS:
        cut = " ".join(parts[:QUOTE_WORDS])
        if cut.count("$") % 2:  # a formula cut open: cut before it
            cut = cut[: cut.rindex("$")].rstrip()
        return cut.rstrip(".,;:") + "…"
    return _cut_marked(sentence) + (" […]" if rest else "")


def _cut_marked(sentence: str) -> str:
    """A quote that is part of a sentence, marked so: "…" before one that starts inside its
    sentence (a lower-case first word) and after one that stops before its end."""
    if sentence[:1].islower():
        sentence = "…" + sentence
    if sentence and not re.search(r"[.!?…]\)?[\"”’']?$|\$$", sentence):
        sentence = sentence.rstrip(",;: ") + "…"
    return sentence


def _interval(row: dict) -> tuple[float, float] | None:
    seeds = row.get("seeds") or {}
    low, high = (seeds.get("interval") or [None, None])[:2]
    return None if low is None or high is None else (low, high)


def seeds_needed(row: dict) -> str | None:
    """The new seeds a decision of an inconclusive claim would need, as the decision rule's
    power analysis put it in its row (`needs_seeds`: a number, or None for more than
    `planning.SEARCH_SEEDS`); None where the row has no such figure."""
    from ..verdicts.planning import SEARCH_SEEDS

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
    from ..verdicts.claims import undecidable_text

    undecidable = undecidable_text(row)  # a plan that cannot decide: registered or refused
    if undecidable:
        text += f" {undecidable[0].upper()}{undecidable[1:]}."
    return text


MATH = re.compile(r"\$([^$]+)\$")
MATH_SPAN = '<span class="math notranslate nohighlight">'


def has_maths(row: dict) -> bool:
    """Whether a claim's sentence carries `$...$` maths: from its `display`, its `where` or
    its `measure`."""
    return bool(row.get("display")) or any(
        "$" in str(row.get(k) or "") for k in ("where", "measure")
    )


def math_html(text: str) -> str:
    """Plain text with `$...$` maths (a claim's `display`) as HTML: the words escaped, the maths
    in the spans MathJax typesets on the page (the class Sphinx's MathJax processes)."""
    parts = MATH.split(text)
    return "".join(
        html.escape(part, quote=False)
        if i % 2 == 0
        else f"{MATH_SPAN}\\({html.escape(part, quote=False)}\\)</span>"
        for i, part in enumerate(parts)
    )


def _maths_words(region: str) -> str:
    """A region as a reader writes it: '≤ 0.001', not '<= 0.001'."""
    region = region.replace("<=", "≤").replace(">=", "≥").replace("==", "=")
    return powers_of_ten(region).replace("-", "−")


def _exploratory(row: dict) -> bool:
    return row.get("stage") == "exploratory" and bool(row.get("seed_plan"))


def measured(row: dict, brief: bool = False) -> str:
    """This run's value as a reader can quote it: the estimate, with its 95% interval and the
    seeds it rests on where it rests on seeds ("−0.177 (95% interval −0.2 to −0.154, 3
    seeds)")."""
    ours = _number(row.get("value"))
    seeds = row.get("seeds") or {}
    if seeds.get("scope") == "every_run":  # a statement about each run: its worst run
        runs, outside = seeds.get("runs"), seeds.get("outside")
        # one value a seed (its worst run, or the smallest over its runs where the measure says
        # so): the count is of seeds; a figure's line stays one line
        best = "smallest" in (row.get("measure") or "")
        each = "" if brief else f", each seed at its {'smallest value' if best else 'worst run'}"
        return (
            f"{_number(seeds.get('worst'))} at the worst of {runs} seeds ({outside} outside){each}"
        )
    interval = _interval(row)
    # a claim with a registered plan decided on its exploratory seeds says so: the verdict is
    # not the confirmatory one (its plan void, or its seeds not all run)
    stage = "; exploratory seeds, no confirmatory verdict" if _exploratory(row) else ""
    if interval:
        low, high = (_number(x) for x in interval)
        return f"{ours} (95% interval {low} to {high}, {seeds.get('n')} seeds{stage})"
    if seeds.get("n"):
        return f"{ours} ({seeds['n']} seed{'s' if seeds['n'] != 1 else ''}, no interval)"
    return ours


# the reason a known deviation not against the paper gives: a clause a reader can take in
MAX_REASON_WORDS, MIN_REASON_WORDS = 25, 4
# a row's own statement of its cause in its evidence: "Cause (not testable here): ..."
CAUSE_SENTENCE = re.compile(r"\bCause \([^)]*\):\s*")
# a claim's id ("svm_l2_much_worse"): the claims table's key, no word a reader can follow
CLAIM_ID = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", re.A)
# a pointer to a file ("see the file's header", a path): nothing a reader of the page has
FILE_REFERENCE = re.compile(
    r"\bthe file\b|\bheader\b|\b(?:data|lib|book|results|tests)/\S+"
    r"|\b[\w-]+\.(?:py|ya?ml|json|md|ipynb)\b",
    re.I,
)
# the paper's named parts, which keep their capital inside a sentence
NAMED = re.compile(r"(?:Theorem|Thm|Corollary|Cor|Lemma|Proposition|Fig|Figure|Eq|Table|Sec)\b")
# where a sentence's first clause ends: at a colon or semicolon, or, finer, at ", and" too
CLAUSE_ENDS = re.compile(r"[;:] ")
FINER_CLAUSE_ENDS = re.compile(r"[;:] |, (?:and|so|but) ")


def _top_level(text: str) -> list[int]:
    """The depth of brackets at each character of `text` (0: outside every bracket)."""
    depth, out = 0, []
    for char in text:
        depth -= char in ")]"
        out.append(max(depth, 0))
        depth += char in "(["
    return out


def _without_claim_ids(text: str) -> str:
    """`text` without its brackets that name a claim by its id ("(check thm1_residual_decreases:
    ...)"): an aside that points to another row of the table."""
    depth, start, cut = _top_level(text), None, []
    for i, char in enumerate(text):
        if char == "(" and depth[i] == 0:
            start = i
        elif char == ")" and depth[i] == 0 and start is not None:
            if CLAIM_ID.search(text[start : i + 1]):
                cut.append((start, i + 1))
            start = None
    for start, end in reversed(cut):
        text = text[:start].rstrip() + text[end:]
    return text


def _first_clause(sentence: str, ends: re.Pattern) -> str:
    """`sentence` up to the first match of `ends` outside brackets and outside a formula."""
    depth = _top_level(sentence)
    for found in ends.finditer(sentence):
        if depth[found.start()] == 0 and not sentence[: found.start()].count("$") % 2:
            return sentence[: found.start()]
    return sentence


def reason(row: dict, words: int = MAX_REASON_WORDS) -> str:
    """Why a known deviation that is not a finding against the paper (a transcription error,
    a limit not reached, a setting that cannot test it, a target of the book's missed) is not
    one, in a clause: the row's statement of its cause in its evidence ("Cause (...): ..."), or
    else its evidence's first sentence, whole or its first clause where that is long; the
    cause's meaning (`tally.CAUSE_MEANINGS`, without its brackets where `words` is below the
    usual) where the evidence gives none of at most `words` words or points to a file. '' for
    every other row."""
    cause = row.get("cause")
    if row.get("status") != tally.KNOWN or cause not in tally.CAUSE_MEANINGS:
        return ""
    if cause in tally.AGAINST_PAPER:  # a finding against the paper: its state says it all
        return ""
    evidence = " ".join(str(row.get("evidence") or "").split())
    stated = CAUSE_SENTENCE.search(evidence)
    sentence = first_sentence(evidence[stated.end() :] if stated else evidence)
    sentence = _without_claim_ids(sentence).rstrip(".")
    meaning = tally.CAUSE_MEANINGS[cause]
    if words < MAX_REASON_WORDS:  # a figure's line: the meaning without its examples
        meaning = re.sub(r" \([^()]*\)", "", meaning)
    if not sentence or FILE_REFERENCE.search(sentence):  # "see the file's header"
        return meaning
    candidates = (sentence, *(_first_clause(sentence, e) for e in (CLAUSE_ENDS, FINER_CLAUSE_ENDS)))
    for said in candidates:
        said = said.strip().rstrip(",;:")
        if MIN_REASON_WORDS <= len(said.split()) <= words and not CLAIM_ID.search(said):
            first = said.split(" ", 1)[0]
            if first[1:] == first[1:].lower() and not NAMED.match(said):  # "GaLU", "Theorem 3"
                said = said[:1].lower() + said[1:]
            return said
    return meaning


def finding(row: dict, stated: bool = True) -> str:
    """One sentence for a claim, led by its badge's own word (without it where `stated` is
    false: a paragraph that names the state says it once): where the paper says it and its
    words (whole sentences), this run's value with its interval, what the claim needs and the
    paper's own value where it gives one, and for a known deviation not against the paper the
    reason (`reason`)."""
    name = tally.state(row)
    where, quote = row.get("where") or "", _quote(row.get("display") or row.get("quote") or "")
    target = _maths_words(row.get("region") or str(row.get("expect") or ""))
    if target == "similar":  # a single value against the margin of its unit's "similar"
        target = "a value within the margin its unit gives “similar”"
    if target in ("true", "false"):  # a yes-or-no statement
        target = f"it to be {target}"
    if target.startswith("in ["):  # an interval: "needs a value in [a, b]"
        target = f"a value {target}"
    paper = row.get("paper_value")
    value = f"{row['measure']} is {measured(row)}" if row.get("measure") else measured(row)
    end = "" if re.search(r"[.!?…\]]$", quote) else "."  # the quote closes a sentence
    lead = f"{name[:1].upper()}{name[1:]}. " if stated else ""
    text = f"{lead}{where}: “{quote}”{end} This run: {value}"
    text += f"; the claim needs {target}" if target else ""
    text += f"; the paper reports {_number(paper)}" if paper is not None else ""
    if tally.estimate_below_practical(row):  # green by its interval only
        text += (
            f"; its estimate lies below the practical size {_number(row['practical'])}, so "
            "the size of the effect is not established"
        )
    if row.get("origin") == "book" and not row.get("audit_of"):
        text += " (a check of the book's own, not a claim of the paper)"
    why = reason(row)
    text += f"; why: {why}" if why else ""
    return text + "."  # the state's meaning: the gloss under the box, the findings' sections


def _weight(row: dict) -> tuple:
    """The findings that matter first: a deviation against the paper before one that is not,
    an erratum first of all (the paper's algebra corrected, the most citable); a claim decided
    against the paper's own terms before one read against the book's finite-run allowance
    (a residual of 1e-15 under a bound of 1e-8 says little to a reader); the paper's empirical
    findings (comparisons) before its fixed-problem bounds; figures, theorems and tables, and
    a number of the paper's, before the rest."""
    where = str(row.get("where") or "")
    headline = bool(re.search(r"\b(Fig|Figure|Theorem|Table)\b", where))
    kind_rank = {"comparison": 0, "single_run": 1}.get(str(row.get("kind")), 2)
    not_against = row["status"] == tally.KNOWN and row.get("cause") not in tally.AGAINST_PAPER
    erratum = row.get("cause") == "erratum"
    allowance = (row.get("bound") or {}).get("origin") == "book"
    return (
        not_against,
        not erratum,
        allowance,
        kind_rank,
        -headline,
        row.get("paper_value") is None,
    )


def findings(rows: list[dict], limit: int = MAX_FINDINGS) -> list[dict]:
    """Up to `limit` claims of the paper a reader should hear of first: every problem (of any
    kind), then up to two known deviations, one inconclusive claim and the rest reproduced
    results, each group ordered by `_weight` (one claim per quote and measure); problems
    first, then by state, in table order. The book's own checks and the audits are not the
    paper's claims and stay out of the box unless they are a problem."""
    seen: set[tuple] = set()
    # one finding per statement: a quote read by one measure (a sentence that makes two
    # statements, each a claim of its own, gives two findings)
    unique = []
    for row in rows:
        if row["status"] not in PROBLEMS and tally.kind(row) != "paper":
            continue
        key = (row.get("quote"), row.get("measure"))
        if key not in seen:
            seen.add(key)
            unique.append(row)
    statuses = tally.PROBLEMS + (
        "pass",
        tally.KNOWN,
        "inconclusive",
        "no practical effect",
        "below practical size",
    )
    by_state = {s: sorted((r for r in unique if r["status"] == s), key=_weight) for s in statuses}
    # the known deviations' few places go to distinct causes first (an erratum and a failure
    # here, not two errata), each cause's weightiest row
    known, causes = by_state[tally.KNOWN], set()
    first_of_each = []
    for r in known:
        if r.get("cause") not in causes:
            causes.add(r.get("cause"))
            first_of_each.append(r)
    by_state[tally.KNOWN] = first_of_each + [r for r in known if r not in first_of_each]
    chosen = [r for s in PROBLEMS for r in by_state[s]][:limit]
    quota = {tally.KNOWN: 2, "inconclusive": 1}
    for name, n in quota.items():
        chosen += by_state[name][: max(0, min(n, limit - len(chosen)))]
    chosen += by_state["pass"][: max(0, limit - len(chosen))]
    for name in quota:  # room left: more of the others
        chosen += [r for r in by_state[name] if r not in chosen][: max(0, limit - len(chosen))]
    first = ("fail", "unexpected pass", "missing metric", "missing tasks", "pass")
    rank = {s: i for i, s in enumerate(first + (tally.KNOWN, "inconclusive"))}
    order = {id(r): i for i, r in enumerate(rows)}
    return sorted(chosen, key=lambda r: (rank.get(r["status"], len(rank)), order[id(r)]))


# What each state a reader meets means, in a sentence: the gloss under the verdict box
GLOSS = {
    "pass": "the claim holds: its value, or the 95% interval over seeds, lies in the region "
    "the claim's words set",
    "inconclusive": "these seeds cannot decide: the 95% interval straddles the region's edge",
    "no practical effect": "a claimed difference whose interval lies within the negligible "
    "size of its unit",
    "below practical size": "a claimed difference that is significant but whose interval lies "
    "wholly below its practical size (its unit's negligible size, or a tenth of the paper's "
    "value): too small to be the paper's effect",
    **{name: tally.CAUSE_MEANINGS[cause] for cause, name in tally.CAUSE_STATES.items()},
    tally.KNOWN: "a claim that did not reproduce here (the row gives the evidence)",
}


def badge(state: str) -> str:
    css = "status-" + state.replace(" ", "-")
    gloss = GLOSS.get(state)
    title = f" title='{html.escape(gloss, quote=True)}'" if gloss else ""
    return f"<span class='claim-status {css}'{title}>{html.escape(state)}</span>"


# The label of a written figure caption's closing sentence: what the paper expects the figure to
# show, in the paper's name (core.chapter.figure_html); the website sets this run's finding
# (`figure_run`) before it
EXPECTED = "Expected:"
DECISION_PAGE = "../decision-rule.html"  # from a chapter page (book/chapters/<id>.html)


def verdict_html(report: dict) -> str:
    """The verdict box of a chapter from its claims report (`ClaimsReport.to_json()`): the
    paper's claims by state, the book's own checks and the audits counted apart (one count:
    `verdicts.tally`), the findings that matter, and what each state present means."""
    rows = report.get("claims") or []
    if not rows:
        return ""
    counted, qualified = tally.tally(rows), tally.qualifiers(rows)
    paper = sum(counted["paper"].values())
    states = " ".join(f"{badge(s)} {n}" for s, n in counted["paper"].items())
    # the qualifiers every count sentence gives (`tally.qualifiers`): the box says no less
    states += html.escape(qualified["paper"], quote=False)
    apart = "; ".join(
        t for t in (tally.kind_text(k, counted[k], qualified[k]) for k in ("book", "audit")) if t
    )
    items = "".join(
        f"<li>{math_html(finding(r)) if has_maths(r) else html.escape(finding(r), False)} "
        f"<a href='#claim-{html.escape(r['id'])}'>(claim)</a></li>"
        for r in findings(rows)
    )
    present = [s for s in dict.fromkeys(tally.state(r) for r in rows) if s in GLOSS]
    glosses = "; ".join(
        f"<em>{html.escape(s)}</em>: {html.escape(GLOSS[s])}"
        for s in sorted(present, key=tally.rank)
    )
    profile = html.escape(str(report.get("profile", "")))
    chapter = str(report.get("chapter") or "")
    findings_link = (  # the paper's findings page, a report a reader can cite
        f"<a href='../findings/{html.escape(chapter, quote=True)}.html'>The findings, as a "
        "referee's report</a> · "
        if chapter
        else ""
    )
    also = (
        f"<p class='verdict-apart'>Counted apart, not as the paper's claims: "
        f"{html.escape(apart, quote=False)}.</p>"
        if apart
        else ""
    )
    return (
        "<aside class='verdict-box' id='verdict' aria-label='What this chapter found'>"
        f"<p class='verdict-title'><strong>What this run found</strong> ({profile} profile): "
        f"{paper} claim{'s' if paper != 1 else ''} of the paper: {states}</p>"
        f"{also}<ul class='verdict-findings'>{items}</ul>"
        f"<p class='verdict-gloss'>{glosses}. "
        f"<a href='{DECISION_PAGE}'>How claims are decided</a> · "
        f"{findings_link}<a href='#claims'>Every claim, with its evidence</a></p>"
        "</aside>"
    )


RUN_QUOTE_WORDS = 10


# words a cut never ends on ("the measured decay exponent of the…")
DANGLING = {"a", "an", "the", "of", "to", "its", "at", "in", "on", "for", "by", "and", "or"}


def _first_words(text: str, n: int = RUN_QUOTE_WORDS) -> str:
    """The first `n` words of `text`, "…" where more follow, never cut inside a formula nor
    after a word that needs the next."""
    words = " ".join(text.split()).split(" ")
    while n < len(words) and " ".join(words[:n]).count("$") % 2:  # a formula cut open
        n += 1
    if n >= len(words):
        return " ".join(words).rstrip(".,;:")
    kept = words[:n]
    while len(kept) > 1 and kept[-1].lower() in DANGLING:
        kept.pop()
    return " ".join(kept).rstrip(".,;:") + "…"


def _short_quote(row: dict, words: int = RUN_QUOTE_WORDS) -> str:
    """The claim's first words, quoted: from its display form where it has one (its maths as
    `$...$`, which the page typesets: `math_html`), never cut inside a formula."""
    text = str(row.get("display") or "") or str(row.get("quote") or "").replace("_", " ")
    return f"“{_first_words(text, words)}”"


# what a figure's line calls the rows it counts, by kind (a check of the book's own and an
# audit pass; only a claim of the paper reproduces): one, many, held (one, many)
RUN_KINDS = {
    "paper": ("claim it checks", "claims of the paper it checks", "reproduces", "reproduce"),
    "book": (
        "check of the book's own on this figure",
        "checks of the book's own on this figure",
        "passes",
        "pass",
    ),
    "audit": ("audit on this figure", "audits on this figure", "passes", "pass"),
    "apart": (
        "check on this figure",
        "checks on this figure (the book's own and audits)",
        "passes",
        "pass",
    ),
}


# a figure's line is one line of the caption: a check's measure and a reason in few words
RUN_MEASURE_WORDS, RUN_REASON_WORDS = 16, 10
MEASURE_CLAUSE_ENDS = re.compile(r",\s|;\s|\s\(")  # where a measure's first clause ends
# the longest line a figure's finding may take (the page adds a link of about 25 characters
# to an inconclusive one): the measure gives up words, from its end, until the line fits
RUN_LINE_CHARS = 220


def _subject(
    row: dict, named: bool, words: int = RUN_QUOTE_WORDS, measure_words: int = RUN_MEASURE_WORDS
) -> str:
    """What a figure's line names a row by: a claim of the paper by its words; a check of the
    book's own or an audit by what it measures (the paper's words it stands beside are not
    what it checks), as such unless the line's count names its kind already (`named`)."""
    kind = tally.kind(row)
    measure = re.sub(r"\s*\([^()]*\)$", "", str(row.get("measure") or ""))  # its aside
    # its first clause, as much of it as the line has room for (`measure_words`; a measure cut
    # mid-phrase names less than a reader can check); where the line names seeds it has fewer
    # words for the rest (`words` says how many)
    budget = measure_words - (RUN_QUOTE_WORDS - words) // 2
    short = _first_words(_first_clause(measure, MEASURE_CLAUSE_ENDS), budget) if measure else ""
    if kind == "paper":
        quoted = _short_quote(row, words)
        # a quote is given whole or not at all: one cut short misquotes; by what it measures
        return quoted if not quoted.endswith("…”") or not short else short
    if named and short:
        return short
    what = "the book's own check" if kind == "book" else "the audit"
    return f"{what} of {short}" if short else what


def seed_list(seeds) -> str:
    """Seeds as a reader reads them: sorted, runs of consecutive ones as ranges ("3–9, 20")."""
    runs: list[list[int]] = []
    for seed in sorted({int(s) for s in seeds}):
        if runs and seed == runs[-1][1] + 1:
            runs[-1][1] = seed
        else:
            runs.append([seed, seed])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)


def seed_scope(row: dict) -> str:
    """Which seeds a row's value rests on, where a seed plan chose them (" on registered seeds
    10–12"), else "": a figure draws the runs its caption says (often the mean over every
    seed the profile ran), and the value a figure's line quotes next to it must not read as the
    figure's own aggregate (0.816 on seeds 10–12 beside a mean of 0.73 over 30 seeds)."""
    decided = (row.get("seeds") or {}).get("seeds")
    if not decided or not row.get("seed_plan"):
        return ""
    which = "exploratory" if row.get("stage") == "exploratory" else "registered"
    plural = "s" if len(decided) != 1 else ""
    return f" on {which} seed{plural} {seed_list(decided)}"


def figure_run(rows: list[dict]) -> str:
    """What this run found of the claims a figure checks, in one sentence (plain text): how
    many of the paper's claims reproduce (the book's own checks and audits, which pass, only
    where the figure checks no claim of the paper), the others by state, and the first of them
    with its value against the region it is decided on, and the reason of a known deviation
    not against the paper (`reason`)."""
    if not rows:
        return ""
    paper = [r for r in rows if tally.kind(r) == "paper"]
    apart = [r for r in rows if tally.kind(r) != "paper" and r["status"] != "pass"]
    if paper:
        rows, kind = paper, "paper"
    else:
        kinds = {tally.kind(r) for r in rows}
        kind = kinds.pop() if len(kinds) == 1 else "apart"
    one, many, holds, hold = RUN_KINDS[kind]
    held = [r for r in rows if r["status"] == "pass"]
    n = len(rows)
    if len(held) == n:
        # the book's own checks and audits that did not pass are said after the paper's claims
        also = ""
        if paper and apart:
            beside: dict[str, int] = {}
            for r in apart:
                beside[tally.state(r)] = beside.get(tally.state(r), 0) + 1
            also = f"; of the book's own checks and audits beside them, {tally.states_text(beside)}"
        if n == 1:
            value = rows[0].get("paper_value")
            versus = f" (the paper {_number(value)})" if value is not None else ""
            ours = _number(rows[0].get("value")) + seed_scope(rows[0])
            return f"the {one} {holds}: ours {ours}{versus}{also}."
        every = "both" if n == 2 else f"all {n}"
        return f"{every} {many} {hold}{also}."
    others = [r for r in rows if r["status"] != "pass"]
    other = others[0]
    scope = seed_scope(other)
    ours = _number(other.get("value")) + scope
    target = _maths_words(other.get("region") or str(other.get("expect") or ""))
    interval = _interval(other)
    if (other.get("seeds") or {}).get("scope") == "every_run":
        ours = measured(other, brief=True)
    elif interval:
        ours = f"{ours}, interval [{_number(interval[0])}, {_number(interval[1])}]"
    # the seeds take the room of four words of the quote: the line stays one line
    words = RUN_QUOTE_WORDS - 4 if scope else RUN_QUOTE_WORDS
    why = reason(other, RUN_REASON_WORDS)
    if n == 1:
        head = f"{tally.state(other)}: "
    else:
        states: dict[str, int] = {}
        for r in others:
            states[tally.state(r)] = states.get(tally.state(r), 0) + 1
        # the row shown is named by its state, so that a failure does not read as an example
        first = tally.state(other) if len(others) == 1 else f"first {tally.state(other)}"
        head = f"{len(held)} of the {n} {many} {hold} ({tally.states_text(states)}); {first}: "
    for measure_words in range(RUN_MEASURE_WORDS, 0, -1):
        said = f"{_subject(other, n > 1, words, measure_words)} (ours {ours}, needs {target})"
        line = head + said + (f"; why: {why}" if why else "") + "."
        if len(line) <= RUN_LINE_CHARS:
            break
    return line
