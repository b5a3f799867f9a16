"""Claims: every quantitative statement of a paper as data, checked against computed metrics.

`data/claims/<chapter>.yaml` lists the claims (CONTRIBUTING.md: the schema); `check` compares a
chapter's metrics with them and returns a `ClaimsReport` (a table in notebooks, JSON on disk).
Per-seed `Evidence` is decided by the book's one rule (`core.verdicts.decision`, on its 95%
interval), a single deterministic value on the value. A `known_deviation` is expected to fail
(one whose cause is `not_testable` also to show no practical effect, the floor or ceiling it
computes): if it passes, its status is `unexpected pass`, a failure, so a fix is never missed.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.paths import atomic_path, claims_results, output_path, project_root, write_atomic
from ..engine.profiles import PROFILES
from . import decision, identities, planning, stages, tally
from .decision import Evidence
from .evidence import Value
from .planning import undecidable_text as undecidable_text  # the site reads it here
from .protocol import void_changed
from .rows import (  # re-exported: the site and the tests read a row's texts here
    _bound_html,
    _columns_html,
    _dropped_html,
    _escape,
    _fmt,
    _maths,
    _paper_html,
    _seeds_html,
    _small,
    expect_text,
    plan_summary,
    seeds_summary,
)
from .rows import resolution_bound as resolution_bound
from .schema import (
    _COMPARISON,
    _INTERVAL,
    ClaimsError,
    active_plan,
    claim_effect,
    load_claims_file,
    parse_expect,
)

if TYPE_CHECKING:  # the runner reads reports through this module and needs no pandas
    import pandas as pd

PASS, FAIL, KNOWN, UNEXPECTED, MISSING, MISSING_TASKS, INCONCLUSIVE = (
    "pass",
    "fail",
    "known deviation",
    "unexpected pass",
    "missing metric",
    "missing tasks",
    "inconclusive",
)
NEGLIGIBLE = decision.NEGLIGIBLE  # "no practical effect": never green, never a failure
SMALL = decision.SMALL  # "below practical size": significant, too small; never green
# inconclusive does not fail a run: the seeds could not decide, and the page and dashboard say so
OK_STATUSES = (PASS, KNOWN, INCONCLUSIVE, NEGLIGIBLE, SMALL)
# what a claim's verdict rests on (`kind` in the claims file; tests/test_conventions.py checks
# it against the committed reports): per-seed evidence under the one rule, one deterministic
# value with the reason it decides (`single_run`), or a bound of the theory checked on every
# run or problem
KINDS = ("comparison", "single_run", "threshold")


def claim_region(claim: dict) -> decision.Region:
    """The region the claim says its metric lies in, for deciding per-seed `Evidence`."""
    text = str(claim["expect"]).strip().lower()
    effect = claim_effect(claim)
    if text == "similar":
        return decision.equivalence_region(effect)
    match = _COMPARISON.match(text)
    if match and match.group(1) != "==":
        return decision.region(match.group(1), float(match.group(2)), effect)
    match = _INTERVAL.match(text)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return decision.Region(low, high, True, f"in [{low:g}, {high:g}]")
    raise ClaimsError(
        f"{claim['id']}: expectation {claim['expect']!r} cannot be decided on evidence over "
        "seeds; use a comparison, an interval or 'similar'"
    )


def claim_negligible(claim: dict) -> float | None:
    """The negligible size of a claimed difference (a one-sided comparison with 0, in a unit):
    an interval within +/- it is "no practical effect". None for other claims."""
    match = _COMPARISON.match(str(claim["expect"]).strip().lower())
    if not match or match.group(1) == "==" or float(match.group(2)) != 0 or "unit" not in claim:
        return None
    return decision.EFFECT_SIZES.get(claim["unit"], {}).get("negligible")


def claim_practical(claim: dict) -> float | None:
    """The practical size of a claimed difference (`decision.practical_size`): a pass whose
    interval lies wholly below it is "below practical size". None for other claims."""
    match = _COMPARISON.match(str(claim["expect"]).strip().lower())
    if not match or match.group(1) == "==" or float(match.group(2)) != 0:
        return None
    value = claim.get("paper_value")
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    paper = float(value) if numeric and value is not None else None
    sign = 1 if match.group(1) in (">", ">=") else -1
    return decision.practical_size(claim_negligible(claim), paper, sign) or None


def claims_file(chapter: str) -> Path:
    return project_root() / "data" / "claims" / f"{chapter}.yaml"


def load_claims(chapter: str, path: Path | None = None) -> list[dict]:
    """Read and validate a chapter's claims file (against `data/schemas/claims.yaml`, then ids
    unique, intervals with a <= b, a known deviation's profiles among the claim's and its
    cause one of `tally.CAUSES`); a `ClaimsError` lists every problem of the file. A known
    deviation without `profiles` gets the claim's."""
    path = path or claims_file(chapter)
    if not path.exists():
        raise ClaimsError(
            f"no claims file {path.name} for chapter {chapter!r}: create data/claims/{chapter}.yaml"
        )
    claims = load_claims_file(path)  # a fresh copy: the caller may change it
    plans = load_seed_plans(chapter, claims) if path == claims_file(chapter) else {}
    for claim in claims:
        if claim["id"] in plans:
            claim["seed_plan"] = plans[claim["id"]]
        deviation = claim.get("known_deviation")
        if deviation is not None:
            deviation.setdefault("profiles", list(claim["profiles"]))
    return claims


def seed_plan_file(chapter: str) -> Path:
    return project_root() / "data" / "seed_plans" / f"{chapter}.yaml"


def load_seed_plans(chapter: str, claims: list[dict]) -> dict[str, dict]:
    """The registered confirmatory plan of each claim (`data/seed_plans/<chapter>.yaml`,
    validated against `data/schemas/seed_plans.yaml`); {} where the chapter has none."""
    from .schema import load_seed_plan_file

    path = seed_plan_file(chapter)
    if not path.exists():
        return {}
    data = load_seed_plan_file(path)
    paper = {c["id"] for c in claims if "paper" in c["profiles"]}
    # the plan of a withdrawn claim stays on record (`withdrawn`: why), deciding nothing
    withdrawn = {cid for cid, plan in data["claims"].items() if plan.get("withdrawn")}
    unknown = sorted(set(data["claims"]) - paper - withdrawn)
    if unknown:
        raise ClaimsError(f"{path.name}: plans for claims that are not paper claims: {unknown}")
    kept = sorted(withdrawn & {c["id"] for c in claims})
    if kept:
        raise ClaimsError(f"{path.name}: withdrawn plans for claims still in the file: {kept}")
    for cid, plan in data["claims"].items():
        if set(plan["seeds"]) & set(plan["exploratory_seeds"]):
            raise ClaimsError(f"{path.name}: {cid}: the new seeds repeat exploratory seeds")
        replacement = plan.get("replacement")
        if replacement is not None:
            if not plan.get("void"):
                raise ClaimsError(f"{path.name}: {cid}: a replacement replaces a void plan only")
            if set(replacement["seeds"]) & (
                set(plan["seeds"])
                | set(plan["exploratory_seeds"])
                | set(replacement["exploratory_seeds"])
            ):
                raise ClaimsError(
                    f"{path.name}: {cid}: the replacement's new seeds repeat seeds already seen"
                )
    for cid, plan in data["claims"].items():
        stages.check(cid, plan, path.name)
    plans = {cid: plan for cid, plan in data["claims"].items() if cid not in withdrawn}
    void_changed(chapter, plans)
    return plans


def plan_seeds(chapter: str, report: dict | None = None) -> dict:
    """The confirmatory plan of every paper claim of `chapter` declared a comparison and decided
    on per-seed evidence in its committed paper report (audits of a claim need no seeds of their
    own): written to
    `data/seed_plans/<chapter>.yaml` by `python -m implicit_bias claims plan`, and committed
    before the run that adds the seeds. Sized by `planning.plan` (an upper limit of the
    spread, the yield of seeds; none below the power floor: its row reads "undecidable"); each
    plan records the protocol and code fingerprints it was sized under (`protocol`), and a
    report computed under others than the current ones is refused."""
    from . import protocol

    report = report or load_report(chapter, "paper")
    if report is None:
        raise ClaimsError(f"{chapter}: no paper claims report to plan from")
    now = protocol.current(chapter)
    sized_under = report.get("protocol") or now
    changed = protocol.changed_since_registration(sized_under, now, chapter)
    if changed:
        raise ClaimsError(
            f"{chapter}: the paper report was computed under another experiment than the "
            f"current one ({changed}); render it again before planning"
        )
    fingerprints = {k: v for k, v in now.items() if v is not None}
    claims = {c["id"]: c for c in load_claims(chapter) if "paper" in c["profiles"]}
    # new seeds start after every seed the report's evidence holds, not after the claim's own:
    # a seed a claim dropped (an infeasible or unconverged run) was still run and seen
    seen = [
        int(s)
        for r in report["claims"]
        for key in ("seeds", "dropped_seeds")
        for s in ((r.get("seeds") or {}).get(key) or [])
    ]
    first_new = max(seen) + 1 if seen else 0
    plans = {}
    for row in report["claims"]:
        claim = claims.get(row["id"])
        seeds = row.get("seeds")
        if (
            claim is None
            or claim.get("kind") != "comparison"  # a declared comparison, not an audit
            or claim.get("audit_of")
            or claim.get("scope") == "every_run"  # decided on every run: no interval to plan
            or not seeds
            or seeds["test"] == "Welch t"
        ):
            continue
        evidence = Evidence.from_json(seeds)
        got = planning.plan(evidence, claim_region(claim), claim_negligible(claim))
        if got.needed is None and got.power < 1e-3:
            # no number of seeds decides it: a grid metric whose resolution is as wide as its
            # region (a finer grid would, which its inconclusive row says), so no plan
            continue
        if got.undecidable:
            # even the cap decides with probability below one half: no plan is run; the
            # claim's row reads "undecidable at this margin within N seeds" (`evaluate`)
            continue
        plans[row["id"]] = {
            "exploratory_seeds": [int(s) for s in evidence.seeds],
            "seeds": list(range(first_new, first_new + got.new_seeds)),
            **{k: v for k, v in got.to_json().items() if k != "target"},
            **fingerprints,
        }
    return {
        "chapter": chapter,
        "power": planning.CONFIRM_POWER,
        "cap": planning.MAX_NEW_SEEDS,
        "claims": plans,
    }


def write_seed_plans(chapter: str) -> Path | None:
    """Write the chapter's seed plan (None, and nothing written, when no claim needs one).
    A plan already registered is kept as it is, whatever the exploratory values say now: only
    claims without one get a plan (a plan is never rewritten, so that no plan can follow the
    data it is meant to be independent of), and a void plan without a replacement gets one,
    once: on seeds after every seed the report holds, so none of them has been seen. A plan
    void because its protocol or code changed since registration (`protocol`) gets its reason
    written as its `void` (a void only takes a verdict away) with its replacement, sized on the
    report's exploratory values, which `plan_seeds` checks were computed under the current
    protocol and code."""
    import yaml

    from .schema import load_seed_plan_file

    data = plan_seeds(chapter)
    path = seed_plan_file(chapter)
    if path.exists():
        registered = load_seed_plan_file(path)["claims"] or {}
        changed = copy.deepcopy(registered)
        void_changed(chapter, changed)
        for cid, plan in registered.items():
            reason = changed[cid].get("void")
            if reason and not plan.get("void") and cid in data["claims"]:
                plan["void"] = reason  # void since its protocol or code changed
            # a void plan without a replacement gets one: new seeds after every seed seen
            if plan.get("void") and "replacement" not in plan and cid in data["claims"]:
                plan["replacement"] = data["claims"][cid]
        data["claims"] = {
            **registered,
            **{cid: p for cid, p in data["claims"].items() if cid not in registered},
        }
    if not data["claims"]:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# The confirmatory seed plan of {chapter}: for each paper claim decided over seeds,\n"
        "# the new seeds its verdict is decided on alone, from a power analysis of its\n"
        "# exploratory seeds (core.verdicts.planning.plan). Written by\n"
        "# `python -m implicit_bias claims plan`; committed before the run that adds the\n"
        "# seeds, never rewritten after it (a plan found unsound later is marked `void`,\n"
        "# with why: it then never decides its claim).\n"
    )
    text = header + yaml.safe_dump(data, sort_keys=False, width=100, default_flow_style=None)
    write_atomic(path, text)
    return path


def write_second_stages(
    chapter: str, costs: dict[str, float], deferred: dict[str, str]
) -> dict[str, dict]:
    """Register a second stage for every paper claim of `chapter` whose committed paper report
    shows it inconclusive at its confirmatory stage and that has none yet, where the planner
    allows one: `costs` gives each such claim's CPU-seconds a seed (from the run records),
    `deferred` the claims registered but not to be run, with why. New seeds start after every
    seed of the chapter's report and of its plan file, the same for every claim (as
    `plan_seeds`: claims that read the same runs share them). Returns the stages written (a stage
    already registered is never rewritten); those the planner refuses are left out, their rows
    saying why."""
    import yaml

    from . import protocol
    from .schema import load_seed_plan_file

    report = load_report(chapter, "paper")
    path = seed_plan_file(chapter)
    if report is None or not path.exists():
        raise ClaimsError(f"{chapter}: no paper report or seed plan to follow")
    changed = protocol.changed_since_registration(
        report.get("protocol") or {}, protocol.current(chapter), chapter
    )
    if changed:
        raise ClaimsError(f"{chapter}: the paper report is stale ({changed}); render it first")
    data = load_seed_plan_file(path)
    claims = {c["id"]: c for c in load_claims(chapter)}
    seen = {
        int(s)
        for r in report["claims"]
        for key in ("seeds", "dropped_seeds", "ran_seeds")
        for s in ((r.get("seeds") or {}).get(key) or [])
    }
    for plan in data["claims"].values():
        for part in (plan, plan.get("replacement") or {}, plan.get("second_stage") or {}):
            seen |= set(part.get("seeds") or ()) | set(part.get("exploratory_seeds") or ())
    first_new = max(seen) + 1
    fingerprints = {k: v for k, v in protocol.current(chapter).items() if v is not None}
    written = {}
    for row in report["claims"]:
        cid = row["id"]
        plan = data["claims"].get(cid)
        claim = claims.get(cid)
        if (
            claim is None
            or plan is None
            or "second_stage" in plan
            or claim.get("audit_of")
            or claim.get("origin", "paper") != "paper"
            or row.get("stage") != "confirmatory"
            or row.get("status") != "inconclusive"
            or cid not in costs
        ):
            continue
        evidence = Evidence.from_json(row["seeds"])
        first = active_plan(plan)
        stage = stages.propose(
            evidence,
            claim_region(claim),
            claim_negligible(claim),
            first["seeds"],
            first_new,
            fingerprints,
            costs[cid],
        )
        if stage is None:
            continue
        if cid in deferred:
            stage["deferred"] = deferred[cid]
        plan["second_stage"] = written[cid] = stage
        stages.check(cid, plan, path.name)
    if written:
        text = path.read_text()
        header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        body = yaml.safe_dump(data, sort_keys=False, width=100, default_flow_style=None)
        write_atomic(path, header + body)
    return written


def _as_value(value):
    if hasattr(value, "item"):  # numpy / torch scalars
        value = value.item()
    return value


def evaluate(claim: dict, metrics: dict, profile: str) -> dict:
    """The row of the claims table for one claim. A metric given as per-seed `Evidence` (or
    its stored JSON form) is decided by the book's rule on its interval; a plain value on the
    value."""
    value: Any = metrics.get(claim["metric"])
    if isinstance(value, dict) and "test" in value and "values" in value:
        value = Evidence.from_json(value)
    seeds, dropped = None, 0
    if isinstance(value, Value):
        value, dropped = value.value, value.dropped
    deviation = claim.get("known_deviation") or {}
    expected_to_fail = profile in deviation.get("profiles", [])
    shared = deviation.get("same_cause_as")
    registered = claim.get("seed_plan") if profile == "paper" else None
    plan = active_plan(registered)  # a void plan without a replacement is never confirmed
    stage = needs = undecidable = practical = None
    registered_power = plan.get("power") if plan else None
    if (
        plan
        and not plan.get("void")
        and registered_power is not None
        and not (registered_power >= planning.POWER_FLOOR)  # NaN: no power to show either
    ):
        # a plan registered before the power floor, that could not decide: said in its row,
        # its verdict unchanged
        undecidable = {
            "registered": True,
            "power": plan["power"],
            "seeds": plan.get("new_seeds") or len(plan["seeds"]),
        }
    every_committed_run = value
    if isinstance(value, Evidence) and plan and value.test != "Welch t":
        # confirmatory: decided on the registered new seeds alone, once they have all run;
        # until then on the exploratory seeds (never on both together); a void plan never,
        # its replacement (registered after it was voided, on seeds never seen) as any plan.
        # A seed whose runs were all left out as unconverged has run (known where the chapter
        # names its dropped runs' seeds): the verdict rests on the plan's converged runs
        ran = set(value.seeds) | set(value.dropped_seeds)
        confirmed = not plan.get("void") and set(plan["seeds"]) <= ran
        stage = "confirmatory" if confirmed else "exploratory"
        full, value = (
            value,
            value.restricted(plan["seeds"] if confirmed else plan["exploratory_seeds"]),
        )
        second = stages.runs(registered, ran) if confirmed else None
        if second and _first_stage_open(claim, value):
            # the confirmatory stage left it open: the registered second stage decides, on
            # its own new seeds alone (its procedure had two chances: a 5% false-pass bound)
            stage, value = stages.STAGE, full.restricted(second["seeds"])
    if isinstance(value, Evidence) and claim.get("scope") == "every_run":
        # a statement about every run: decided on every committed run of its setting (any run
        # refutes it, whichever plan it ran for), no interval; shows the worst run and count
        value, where = every_committed_run, claim_region(claim)
        dropped = value.dropped
        runs = decision.every_run(value, where) if value.values else None
        seeds = {**value.to_json(), "interval": [None, None], "detectable": None}
        if runs is not None:
            seeds |= runs.to_json()
        outcome = runs.outcome if runs else None
        value = runs.worst if runs else None
    elif isinstance(value, Evidence):
        value = value.with_range(claim.get("range", "unbounded"))
        seeds = value.to_json()
        dropped = value.dropped
        where, negligible = claim_region(claim), claim_negligible(claim)
        practical = claim_practical(claim)
        outcome = value.decide(where, negligible, practical) if value.values else None
        outcome, identity = identities.decided(claim, value, outcome)  # "exact": also its MC
        seeds |= {"identity": identity} if identity else {}
        if outcome == decision.INCONCLUSIVE:  # the seeds a decision would need, as planned
            planned = planning.plan(value, where, negligible)
            needs = planned.needed
            # no plan to run: none registered, or a confirmatory stage left open with no
            # second stage registered (the planner would refuse one below the power floor)
            unplanned = not (plan and not plan.get("void")) or (
                stage == "confirmatory" and not (registered or {}).get("second_stage")
            )
            if planned.undecidable and unplanned and profile == "paper":
                undecidable = planning.undecidable(planned, undecidable)
                undecidable["second_stage"] = stage == "confirmatory"  # what it would be
        value = seeds["estimate"]
    else:
        value = _as_value(value)
        outcome = None
        if not (value is None or (isinstance(value, float) and math.isnan(value))):
            holds = bool(parse_expect(claim["expect"], claim_effect(claim))(value))
            outcome = decision.PASS if holds else decision.FAIL
    if outcome is None or value is None:
        status = MISSING
    elif outcome == decision.INCONCLUSIVE:
        status = INCONCLUSIVE
    elif outcome == NEGLIGIBLE and expected_to_fail and deviation["cause"] == "not_testable":
        status = KNOWN  # no room for the effect: the floor or ceiling its evidence computes
    elif outcome in (decision.NEGLIGIBLE, decision.SMALL):
        status = outcome
    elif expected_to_fail:
        status = UNEXPECTED if outcome == decision.PASS else KNOWN
    else:
        status = PASS if outcome == decision.PASS else FAIL
    return {
        "id": claim["id"],
        "where": claim["where"],
        "quote": claim["quote"],
        "display": claim.get("display"),
        "measure": claim.get("measure"),
        "metric": claim["metric"],
        "expect": str(claim["expect"]),
        "effect": claim.get("effect"),
        "unit": claim.get("unit"),
        "range": claim.get("range"),
        "scope": claim.get("scope"),
        "region": claim_region(claim).text if seeds else None,
        # the practical size of a claimed difference (`claim_practical`), where it has one
        "practical": practical,
        "origin": claim.get("origin", "paper"),
        "kind": claim.get("kind"),
        "audit_of": claim.get("audit_of"),
        "bound": claim.get("bound"),
        "paper_value": claim.get("paper_value"),
        "value": value,
        "seeds": seeds,
        "stage": stage,
        "seed_plan": registered,  # with a void plan's replacement inside it
        "needs_seeds": needs if status == INCONCLUSIVE else None,
        # a plan that cannot decide: registered with power below one half, or refused (the
        # power at the cap of a plan sized now is below one half); None otherwise
        "undecidable": undecidable,
        "dropped_runs": dropped,
        "status": status,
        "evidence": deviation.get("evidence") if expected_to_fail else None,
        "cause": identities.confirmed_cause(deviation, seeds) if status == KNOWN else None,
        "note": _profile_note(claim, profile),
        **({"same_cause_as": shared} if status == KNOWN and shared else {}),
    }


def _first_stage_open(claim: dict, evidence: Evidence) -> bool:
    """Whether the confirmatory verdict on `evidence` (the plan's seeds) is inconclusive, the
    only verdict a second stage may follow (a statement about every run is never open)."""
    if claim.get("scope") == "every_run" or not evidence.values:
        return claim.get("scope") != "every_run"
    ranged = evidence.with_range(claim.get("range", "unbounded"))
    where, negligible = claim_region(claim), claim_negligible(claim)
    outcome = ranged.decide(where, negligible, claim_practical(claim))
    return identities.decided(claim, ranged, outcome)[0] == decision.INCONCLUSIVE


def _profile_note(claim: dict, profile: str) -> str | None:
    """The claim's note at this profile: `note` (every profile) or `notes: {profile: text}`."""
    notes = claim.get("notes") or {}
    return notes.get(profile) or claim.get("note")


@dataclass
class ClaimsReport:
    chapter: str
    profile: str
    rows: list[dict] = field(default_factory=list)
    code: dict = field(default_factory=dict)
    # extra columns of the table, in order: a chapter's own column beside the book's verdict
    # (gln_norm: the verdict on the authors' own data); each row holds its text in
    # row["columns"][name] ("–" where a claim has none)
    columns: list[str] = field(default_factory=list)
    # the fingerprints of the protocol and the metric code the paper report was computed under
    # (`protocol.current`): a seed plan sized from this report records them
    protocol: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(row["status"] in OK_STATUSES for row in self.rows)

    def counts(self) -> dict[str, int]:
        """The paper's claims by state (`tally`: a known deviation by its cause); the book's
        own checks and the audits are counted apart (`book_counts`, `audit_counts`)."""
        return tally.tally(self.rows)["paper"]

    def book_counts(self) -> dict[str, int]:
        return tally.tally(self.rows)["book"]

    def audit_counts(self) -> dict[str, int]:
        return tally.tally(self.rows)["audit"]

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        frame = pd.DataFrame(
            self.rows,
            columns=[
                "id",
                "where",
                "quote",
                "paper_value",
                "value",
                "expect",
                "status",
                "evidence",
            ],
        )
        frame["interval"] = [seeds_summary(r.get("seeds")) for r in self.rows]
        for name in self.columns:
            frame[name] = [(r.get("columns") or {}).get(name) for r in self.rows]
        return frame.rename(columns={"paper_value": "paper", "value": "ours"})

    def to_json(self) -> dict:
        return {
            "chapter": self.chapter,
            "profile": self.profile,
            "ok": self.ok,
            "counts": self.counts(),
            "book_counts": self.book_counts(),
            "audit_counts": self.audit_counts(),
            "claims": self.rows,
            "code": self.code,
            "columns": self.columns,
        } | ({"protocol": self.protocol} if self.protocol else {})

    def _repr_html_(self) -> str:
        extra = "".join(f"<th>{_escape(name)}</th>" for name in self.columns)
        css = " with-columns" if self.columns else ""
        lines = [
            f"<table class='claims-table{css}'><thead><tr><th>claim</th><th>ours</th>"
            f"<th>expected</th><th>status</th>{extra}</tr></thead><tbody>"
        ]
        for row in self.rows:
            status = tally.state(row)  # a known deviation by its cause
            css = "status-" + status.replace(" ", "-")
            origin = " <small>(the book's own check)</small>" if row.get("origin") == "book" else ""
            if row.get("audit_of"):
                origin += f" <small>(an audit of {_escape(row['audit_of'])})</small>"
            # the explanation folds into a row of its own under the claim, the table's width
            width = 4 + len(self.columns)
            note = (
                f"<tr class='claim-why'><td colspan='{width}'><details>"
                f"<summary>why: {_escape(status)}"
                f"</summary><small>{_escape(row['evidence'])}</small></details></td></tr>"
                if row["evidence"]
                else ""
            )
            lines.append(
                f"<tr id='claim-{_escape(row['id'])}'><td><b>{_escape(row['id'])}</b>{origin}"
                f"<br><small>{_maths(row['where'])}: "
                f"“{_maths(row.get('display') or row['quote'])}”</small><br>"
                f"<small>metric: <code>{_escape(row['metric'])}</code></small></td>"
                f"<td>{_fmt(row['value'])}{_seeds_html(row.get('seeds'))}"
                f"{_small(plan_summary(row))}"
                f"{_dropped_html(row.get('dropped_runs'))}</td>"
                f"<td>{_escape(expect_text(row))}{_bound_html(row.get('bound'))}"
                f"{_paper_html(row['paper_value'])}</td>"
                f"<td><span class='claim-status {css}'>{_escape(status)}</span></td>"
                f"{_columns_html(row, self.columns)}</tr>{note}"
            )
        summary = _escape(tally.tally_text(self.rows))
        lines.append(f"</tbody></table><p>{self.profile.capitalize()} profile: {summary}.</p>")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_frame()[["id", "paper", "ours", "expect", "status"]].to_string()


def check(
    chapter: str,
    metrics: dict,
    profile: str,
    write: bool = True,
    failed_tasks: list[dict] | None = None,
    code: dict | None = None,
    columns: dict[str, dict[str, str]] | None = None,
) -> ClaimsReport:
    """Check every claim of `chapter` active at `profile`; write the JSON report.

    `columns` adds columns to the table, in order: {column name: {claim id: text}}, a
    chapter's own reading of its claims beside the book's verdict (a claim without an entry
    shows "–"); a claim id that is not a claim of the table is an error.

    `failed_tasks` (from `Chapter.failed_tasks`): when any task of the run failed, the
    metrics rest on part of the data, so no claim is decided: each row says `missing tasks`
    and names them. `code` maps each task function the metrics rest on to the fingerprint
    of the code that computed its results (kept in the report: `stale_code` compares it with
    the current code).
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}")
    claims = [c for c in load_claims(chapter) if profile in c["profiles"]]
    claims = stages.audits_on_their_claims_seeds(claims)  # an audit on its claim's seeds
    rows = [evaluate(c, metrics, profile) for c in claims]
    if failed_tasks:
        sweeps = sorted({t.get("sweep", "?") for t in failed_tasks})
        reason = (
            f"{len(failed_tasks)} task(s) failed in sweep(s) {', '.join(sweeps)}; "
            f"first: {failed_tasks[0]['error'].strip().splitlines()[-1]}"
        )
        for row in rows:
            row.update(status=MISSING_TASKS, evidence=reason)
    columns = dict(columns or {})
    ids = {row["id"] for row in rows}
    for name, values in columns.items():
        unknown = sorted(set(values) - ids)
        if unknown:
            raise ClaimsError(f"column {name!r} names no claim of this table: {', '.join(unknown)}")
    for row in rows:
        row["columns"] = {
            name: values[row["id"]] for name, values in columns.items() if row["id"] in values
        }
    fingerprints = {}
    if profile == "paper":  # the experiment a plan sized from this report is sized for
        from . import protocol

        fingerprints = {k: v for k, v in protocol.current(chapter).items() if v is not None}
    report = ClaimsReport(
        chapter, profile, rows, dict(code or {}), list(columns), protocol=fingerprints
    )
    if write:
        # under the runner, staged: the runner swaps it into place once the run is complete
        path = output_path(claims_results(profile) / f"{chapter}.json")
        write_json_atomic(path, report.to_json())
    return report


def write_json_atomic(path: Path, value) -> None:
    """Write JSON whole: a temporary file beside `path`, flushed to disk, then renamed."""
    with atomic_path(path) as tmp, open(tmp, "w") as handle:
        json.dump(value, handle, indent=2, default=_json_default)


def _json_default(value):
    value = _as_value(value)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def load_report(chapter: str, profile: str) -> dict | None:
    path = claims_results(profile) / f"{chapter}.json"
    return json.loads(path.read_text()) if path.exists() else None


def stale_code(report: dict) -> list[str]:
    """The task functions whose code has changed since `report`'s results were computed
    (names as `module:function`); a report without a code record counts as stale."""
    from ..engine.fingerprint import fingerprint
    from ..engine.sweep import load_function

    code = report.get("code")
    if not code:
        return ["(no code record: computed before fingerprints)"]
    stale = []
    for name, recorded in sorted(code.items()):
        try:
            current = fingerprint(load_function(name))
        except (ImportError, AttributeError):
            current = None
        if current != recorded:
            stale.append(name)
    return stale


def _every_run_note(seeds: dict | None) -> str:
    """For a claim decided on every run: how many runs lie outside, and the worst."""
    if not seeds or seeds.get("scope") != "every_run":
        return ""
    count = f"{seeds['outside']} of {seeds['runs']} seeds outside"
    return f"; decided on every run: {count}, worst {seeds['worst']:.3g}"


def reevaluate(report: dict, claims: list[dict]) -> list[str]:
    """Problems of a stored claims report under the current claims file: each claim is
    decided again from the stored metric value (so an edited expectation or a withdrawn known
    deviation shows at once), and the report must cover exactly the claims of its profile."""
    profile = report["profile"]
    # an audit on its claim's seeds, as `check` decides it
    mine = stages.audits_on_their_claims_seeds([c for c in claims if profile in c["profiles"]])
    current = {c["id"]: c for c in mine}
    stored = {row["id"]: row for row in report["claims"]}
    problems = [
        f"{cid}: in the claims file but not in the stored report (rerun)"
        for cid in sorted(set(current) - set(stored))
    ]
    problems += [
        f"{cid}: in the stored report but no longer a {profile} claim (rerun)"
        for cid in sorted(set(stored) - set(current))
    ]
    for cid in sorted(set(current) & set(stored)):
        claim, row = current[cid], stored[cid]
        if row["metric"] != claim["metric"]:
            problems.append(
                f"{cid}: stored metric {row['metric']!r}, the claim now reads "
                f"{claim['metric']!r} (rerun)"
            )
            continue
        stored_value = row.get("seeds") or row["value"]
        plan = active_plan(claim.get("seed_plan"))
        if row.get("stage") == "confirmatory" and isinstance(plan, dict) and plan.get("void"):
            # a plan void since (its protocol or code changed): its verdict is no longer one
            problems.append(
                f"{cid}: stored a confirmatory verdict, but its plan is now void: "
                f"{plan['void']} (rerun)"
            )
            continue
        if row.get("stage"):
            # the stored evidence is already the seeds its stage decides on: restricting it
            # again by the plan would lose a plan seed that has no value in the chosen cell
            # (a least favourable H where its runs were infeasible) and fall back a stage
            claim = {k: v for k, v in claim.items() if k != "seed_plan"}
        decided = evaluate(claim, {claim["metric"]: stored_value}, profile)
        if decided["status"] not in OK_STATUSES:
            problems.append(
                f"{cid}: {decided['status']} (stored value {row['value']}, "
                f"expected {claim['expect']}{_every_run_note(decided.get('seeds'))})"
            )
        elif decided["status"] != row["status"]:
            problems.append(
                f"{cid}: stored status {row['status']!r}, now {decided['status']!r} (rerun)"
            )
    return problems
