"""The book's one count of its claims, and the causes a known deviation can have.

Every page and report that counts claims counts them here (the chapter's verdict box and claims
footer, the introduction's table, the status page, the decision page, the claims report JSON
and the README), so the numbers cannot disagree.

**Three kinds**, counted apart and never added together:
- *the paper's claims*: a statement of the paper (`origin: paper`), each statement once;
- *the book's own checks*: targets, controls and checks the book adds (`origin: book`);
- *audits*: the same statement on another program or construction, or a variant of a claim
  (`audit_of`), shown with the claim they audit and never counted as claims.

**A known deviation names its cause**, one of seven (`known_deviation.cause` in the claims file;
the schema refuses a known deviation without one). Only the first two are findings against the
paper, and only a claim of the paper (or an audit of one) can have them:
- `paper_fails`: the paper's claim fails in this reproduction;
- `erratum`: an error in the paper's algebra, shown numerically;
- `transcription`: an error of the source text the book had, not shown to be the paper's (the
  tensor_networks source is a third party's slide deck);
- `limit_not_reached`: a limit the runs approach but do not reach within the book's finite
  tolerance, every run short of it shown still approaching (in time or in the step); a run that
  shows no approach leaves the claim not reproduced;
- `not_testable`: the setting cannot test the claim (a floor or a ceiling leaves no room, the
  runs are not the paper's algorithm or budget, or the claim is a bound over all time, which no
  finite run can test);
- `target_missed`: a target the book set itself (a match with the authors' published numbers,
  a check, a control) is missed; only the book's own checks can have it;
- `false_alarm`: a formula checked by Monte Carlo (effect `exact`) that its registered stage
  failed while the margin passed, cleared by the screen-then-confirm rule
  (`identities.confirm`): independent draws of each resolved case, at least three times the
  stage's precision, resolve no deviation. The rule fails a true formula in at most 5% of
  stages, and this is one; only an `exact` claim can have it, the row's cause is the rule's
  (written `false_alarm`, it reads `paper_fails` where the confirmation does not clear the
  fail), and its verdict stays a known deviation: the confirmation decides only that the row
  does not count against the paper. The book added this cause, and the rule, after the one row
  that has it had failed.

Each cause is its own state, with its own badge word (`CAUSE_STATES`), in every count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

KNOWN = "known deviation"

# cause -> the state a reader sees (the badge's word and the count's), in the order they are
# listed; the first two count against the paper
CAUSE_STATES: dict[str, str] = {
    "paper_fails": "does not reproduce",
    "erratum": "erratum",
    "transcription": "transcription error",
    "limit_not_reached": "limit not reached",
    "not_testable": "not testable here",
    "target_missed": "target missed",
    "false_alarm": "false alarm",
}
CAUSES = tuple(CAUSE_STATES)
AGAINST_PAPER = ("paper_fails", "erratum")
CAUSE_MEANINGS: dict[str, str] = {
    "paper_fails": "the paper's claim fails in this reproduction",
    "erratum": "an error in the paper's algebra, shown numerically",
    "transcription": "an error of the source text this book had, not shown to be the paper's",
    "limit_not_reached": "a limit the runs approach but do not reach within the book's finite "
    "tolerance (every run short of it shown still approaching, in time or in the step)",
    # what the claims files' not-testable rows use, and nothing more (the decision page's
    # table says the same: tests/core/test_tally.py)
    "not_testable": "the setting cannot test the claim (a floor or a ceiling leaves no room, "
    "the runs are not the paper's algorithm or budget, or the claim is a bound over all time, "
    "which no finite run can test)",
    "target_missed": "a target the book set itself (a match with the authors' published numbers, "
    "a check, a control) is missed; not a finding against the paper",
    "false_alarm": "a formula its registered Monte Carlo stage failed, cleared by the "
    "screen-then-confirm rule (independent draws of each resolved case, three times as precise, "
    "resolve no deviation): one of the at most 5% of true formulas the stage fails",
}
BOOK_ONLY = ("target_missed",)  # causes only the book's own checks can have
EXACT_ONLY = ("false_alarm",)  # causes only a formula checked by Monte Carlo can have

# every state in the order a reader meets them: what held, what did not (against the paper
# first), what the runs cannot say, and the problems of a run
STATES = (
    "pass",
    *CAUSE_STATES.values(),
    KNOWN,  # a known deviation of a report written before causes were recorded
    "no practical effect",
    "below practical size",  # a significant difference too small to be the claimed one
    "inconclusive",
    "fail",
    "unexpected pass",
    "missing metric",
    "missing tasks",
)
AGAINST_STATES = tuple(CAUSE_STATES[c] for c in AGAINST_PAPER)
PROBLEMS = ("fail", "unexpected pass", "missing metric", "missing tasks")

KINDS = ("paper", "book", "audit")
KIND_NAMES = {
    "paper": ("claim of the paper", "claims of the paper"),
    "book": ("check of the book's own", "checks of the book's own"),
    "audit": ("audit", "audits"),
}


def state(row: Mapping) -> str:
    """The state a reader sees for a decided row: its status, or for a known deviation the
    state of its cause."""
    status = str(row["status"])
    if status == KNOWN and row.get("cause") in CAUSE_STATES:
        return CAUSE_STATES[row["cause"]]
    return status


def kind(row: Mapping) -> str:
    """paper, book or audit (an audit of any origin is an audit)."""
    if row.get("audit_of"):
        return "audit"
    return "book" if row.get("origin") == "book" else "paper"


def rank(name: str) -> int:
    return STATES.index(name) if name in STATES else len(STATES)


def ordered(counts: Mapping[str, int]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (rank(kv[0]), kv[0])))


def tally(rows: Iterable[Mapping]) -> dict[str, dict[str, int]]:
    """{kind: {state: n}} for every kind (empty where a kind has no row), states in `STATES`
    order."""
    out: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    for row in rows:
        counts = out[kind(row)]
        name = state(row)
        counts[name] = counts.get(name, 0) + 1
    return {k: ordered(v) for k, v in out.items()}


def against_paper(counts: Mapping[str, int]) -> int:
    """How many of these (a kind's counts) are findings against the paper."""
    return sum(counts.get(s, 0) for s in AGAINST_STATES)


# a state's words after a number above 1 in a count ("2 errata"); its badge keeps its word
PLURAL = {
    "does not reproduce": "do not reproduce",
    "erratum": "errata",
    "transcription error": "transcription errors",
    "limit not reached": "limits not reached",
    "target missed": "targets missed",
    KNOWN: "known deviations",
    "unexpected pass": "unexpected passes",
    "missing metric": "missing metrics",
}


def states_text(counts: Mapping[str, int]) -> str:
    """'32 pass, 3 do not reproduce, 2 errata, 10 inconclusive' (the states present, in
    order)."""
    return ", ".join(f"{n} {PLURAL.get(s, s) if n != 1 else s}" for s, n in ordered(counts).items())


SECOND_STAGE = "second stage"  # a row's `stage` decided at its second registered stage


def second_stage(rows: Iterable[Mapping]) -> dict[str, dict[str, int]]:
    """{kind: {state: n}} of the verdicts decided at a second registered stage: counted apart,
    since their procedure had two chances (a false-pass bound of 5%, not 2.5%)."""
    return tally(r for r in rows if r.get("stage") == SECOND_STAGE)


def exploratory_passes(rows: Iterable[Mapping]) -> dict[str, int]:
    """{kind: n} of the passes decided over seeds with no registered stage behind them (no
    plan, a void one, or a plan whose new seeds have not all run): shown apart, since their
    seeds were seen before the claim's definition was last settled."""
    out = dict.fromkeys(KINDS, 0)
    for row in rows:
        if (
            state(row) == "pass"
            and row.get("seeds")
            and row.get("stage") not in ("confirmatory", SECOND_STAGE)
        ):
            out[kind(row)] += 1
    return out


def shared_causes(rows: Iterable[Mapping]) -> dict[str, int]:
    """{kind: n} of the known deviations that follow from another's cause (`same_cause_as`):
    said apart, so that one cause is not read as several findings."""
    out = dict.fromkeys(KINDS, 0)
    for row in rows:
        if row.get("same_cause_as") and state(row) in CAUSE_STATES.values():
            out[kind(row)] += 1
    return out


def estimate_below_practical(row: Mapping) -> bool:
    """A pass of a claimed difference whose estimate lies below its practical size: green
    because its interval reaches past that size, so the size of the effect is not established
    (its row, its finding sentence and the counts say so)."""
    estimate, practical = (row.get("seeds") or {}).get("estimate"), row.get("practical")
    return bool(
        state(row) == "pass" and practical and estimate is not None and abs(estimate) < practical
    )


def small_estimate_passes(rows: Iterable[Mapping]) -> dict[str, int]:
    """{kind: n} of the passes whose estimate lies below its practical size, said apart."""
    out = dict.fromkeys(KINDS, 0)
    for row in rows:
        out[kind(row)] += estimate_below_practical(row)
    return out


def _small_clause(n: int, again: bool) -> str:
    likewise = " likewise" if again else ""
    verb = "has" if n == 1 else "have"
    what = "an estimate" if n == 1 else "estimates"
    return (
        f"{n} of the passes{likewise} {verb} {what} below the practical size of the difference "
        "claimed, the size of the effect not established"
    )


def _shared_clause(n: int, again: bool) -> str:
    likewise = " likewise" if again else ""
    verb = "follows" if n == 1 else "follow"
    own = "not a finding of its own" if n == 1 else "not findings of their own"
    return f"{n} of the deviations{likewise} {verb} from the cause of another, {own}"


def _exploratory_clause(n: int, passes: int, again: bool) -> str:
    """The passes of a kind that rest on exploratory seeds alone; `again`: said in full for an
    earlier kind of the same count, so said briefly."""
    who = "that pass" if passes == 1 else f"{n} of the passes"
    if again:
        return f"{who} likewise on exploratory seeds alone"
    verb = "rests" if passes == 1 or n == 1 else "rest"
    return f"{who} {verb} on exploratory seeds alone, with no registered plan in force behind " + (
        "it" if n == 1 else "them"
    )


def _second_clause(second: Mapping[str, int], total: int, again: bool) -> str:
    """The verdicts of a kind decided at a second registered stage, with their bound (`again`:
    said for an earlier kind, so briefly)."""
    who = "this verdict" if total == 1 else f"{sum(second.values())} of these verdicts"
    how = "likewise at" if again else "decided at"
    bound = "" if again else ", false-pass bound 5%"
    return f"{who} {how} a second registered stage{bound}: {states_text(second)}"


def qualifiers(rows: Iterable[Mapping], kinds: Iterable[str] = KINDS) -> dict[str, str]:
    """{kind: " (...)" or ""}: what a kind's count says apart, in one parenthesis after its
    states: its passes that rest on exploratory seeds alone, and its verdicts decided at a
    second registered stage (with their 5% bound). Each is said in full for the first kind of
    `kinds` that has it and briefly for the others, so a count sentence says it once. The
    verdict box's headline and every count sentence (`tally_text`) take them from here."""
    rows, kinds = list(rows), tuple(kinds)
    counted, second, explored = tally(rows), second_stage(rows), exploratory_passes(rows)
    shared, small = shared_causes(rows), small_estimate_passes(rows)
    out: dict[str, str] = {}
    said: set[str] = set()
    for k in kinds:
        apart = []  # clauses of their own, in one parenthesis: these rows are among the states
        # an audit reads its claim's seeds; where those are exploratory (the claim has no plan
        # in force), its pass rests on seen seeds too, and is said like any other
        n = explored[k]
        if n:
            apart.append(_exploratory_clause(n, counted[k].get("pass", 0), "explored" in said))
            said.add("explored")
        if second[k]:
            apart.append(_second_clause(second[k], sum(counted[k].values()), "second" in said))
            said.add("second")
        if small[k]:
            apart.append(_small_clause(small[k], "small" in said))
            said.add("small")
        if shared[k]:
            apart.append(_shared_clause(shared[k], "shared" in said))
            said.add("shared")
        out[k] = f" ({'; '.join(apart)})" if apart else ""
    return out


def kind_text(name: str, counts: Mapping[str, int], qualifier: str = "") -> str:
    """'54 claims of the paper: 32 pass, ...' ('' where there are none), with the kind's
    `qualifier` (`qualifiers`) after its states."""
    total = sum(counts.values())
    if not total:
        return ""
    one, many = KIND_NAMES[name]
    return f"{total} {one if total == 1 else many}: {states_text(counts)}{qualifier}"


def tally_text(rows: Iterable[Mapping], kinds: Iterable[str] = KINDS) -> str:
    """The count of `rows` in one sentence, each kind apart: '54 claims of the paper: 32 pass,
    ...; 7 checks of the book's own: 7 pass; 16 audits: 12 pass, ...', with each kind's
    qualifiers (`qualifiers`)."""
    rows, kinds = list(rows), tuple(kinds)
    counted, said = tally(rows), qualifiers(rows, kinds)
    return "; ".join(t for t in (kind_text(k, counted[k], said[k]) for k in kinds) if t)


def paper_total(rows: Iterable[Mapping]) -> int:
    return sum(tally(rows)["paper"].values())


FALSE_PASS = 0.025  # the rule's false-pass rate of one confirmatory decision (decision.LEVEL)
# a claim decided at a second registered stage had two chances: 2.5% at each
FALSE_PASS_TWO_STAGES = 2 * FALSE_PASS


def multiplicity_text(rows: Iterable[Mapping]) -> str:
    """How many false passes the book's registered decisions would give if no effect of any
    claim were real: a confirmatory decision is a one-sided test at 2.5%, a claim decided at a
    second registered stage had two such chances (5%); the expected number is the sum (the
    paper's claims only; each stands for itself, and the count is of the book as a whole)."""
    paper = [r for r in rows if kind(r) == "paper"]
    one = [r for r in paper if r.get("stage") == "confirmatory"]
    two = [r for r in paper if r.get("stage") == SECOND_STAGE]
    if not one and not two:
        return "No claim is decided on confirmatory seeds yet."
    expected = FALSE_PASS * len(one) + FALSE_PASS_TWO_STAGES * len(two)
    passed = sum(r["status"] == "pass" for r in one + two)
    return (
        f"{len(one)} claims of the paper are decided on confirmatory seeds, each at a 2.5% "
        f"chance of a false pass, and {len(two)} at a second registered stage after an "
        "inconclusive confirmatory one, each at a 5% chance (two chances of 2.5%): if no "
        f"effect of any of them were real, about {expected:.1f} of them would pass by chance; "
        f"{passed} pass."
    )
