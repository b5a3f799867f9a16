"""The second registered stage: one more look, by a stated design, at a claim still open after
its confirmatory stage.

A claim whose confirmatory verdict is inconclusive may get one more stage (the maintainer's
decision), registered in its seed plan as `second_stage`:

- **sized by the planner** (`planning.plan`: the 80% upper limit of the spread, the yield of
  seeds, the power floor) from the confirmatory seeds of the stage it follows, which play the
  part the exploratory seeds played for the first plan;
- **on new seeds** after every seed the chapter has run, disjoint from every earlier stage's
  (exploratory, the plan's, a void plan's and its replacement's);
- **committed before it runs**, and **decided on its own new seeds alone**, and only where the
  confirmatory verdict on the plan's seeds is inconclusive (a confirmatory pass, fail or "no
  practical effect" stands).

The procedure then had two chances to pass a claim with no true effect: at most 2.5% at the
confirmatory stage, plus at most 2.5% at the second, so its false-pass bound is 5%, not 2.5%
(tests/core/test_second_stage.py simulates the whole procedure, the void-and-replace path
included). The row states it, and the counts show second-stage verdicts apart
(`tally.second_stage`). A stage registered but not run (`deferred`, with why: its cost) leaves
the claim at its confirmatory verdict, and the row says what the stage would cost.
"""

from __future__ import annotations

import math

from . import planning, tally
from .schema import ClaimsError, active_plan

STAGE = tally.SECOND_STAGE  # a row's `stage` when its verdict rests on a second stage
FALSE_PASS = {"confirmatory": 0.025, STAGE: 0.05}  # the false-pass bound of each procedure


def check(cid: str, plan: dict, where: str) -> None:
    """Refuse a second stage that does not follow its claim's active plan (the replacement of a
    void plan, else the plan, never a void plan without one) or whose seeds repeat a seed of an
    earlier stage."""
    second = plan.get("second_stage")
    if second is None:
        return
    first = active_plan(plan)
    if first.get("void"):
        raise ClaimsError(
            f"{where}: {cid}: a second stage follows a plan that decides, not a void one"
        )
    if list(second["exploratory_seeds"]) != list(first["seeds"]):
        raise ClaimsError(
            f"{where}: {cid}: a second stage is sized from the confirmatory seeds of the plan it "
            f"follows ({first['seeds']}), not {second['exploratory_seeds']}"
        )
    earlier = set(plan["seeds"]) | set(plan["exploratory_seeds"])
    replacement = plan.get("replacement") or {}
    earlier |= set(replacement.get("seeds") or ()) | set(replacement.get("exploratory_seeds") or ())
    if set(second["seeds"]) & earlier:
        raise ClaimsError(
            f"{where}: {cid}: the second stage's seeds repeat seeds of an earlier stage"
        )


def runs(plan: dict | None, ran: set) -> dict | None:
    """The claim's second stage where it can decide now: registered, not void, not deferred,
    and every one of its seeds has run (None otherwise)."""
    second = (plan or {}).get("second_stage")
    if not isinstance(second, dict) or second.get("void") or second.get("deferred"):
        return None
    return second if set(second["seeds"]) <= ran else None


def cost_text(second: dict) -> str:
    """What a second stage costs: seeds times CPU-seconds a seed."""
    total = second["new_seeds"] * float(second["cpu_s_per_seed"])
    return (
        f"{second['new_seeds']} new seeds at about {float(second['cpu_s_per_seed']):.3g} "
        f"CPU-s each, {_duration(total)} in all"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} CPU-s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} CPU-minutes"
    return f"{seconds / 3600:.1f} CPU-hours"


def summary(row: dict) -> str:
    """The second stage's part of a row: the verdict's two chances, or a stage registered and
    waiting or deferred, with its cost ("" where the claim has none)."""
    plan = row.get("seed_plan") or {}
    second = plan.get("second_stage") if isinstance(plan, dict) else None
    if row.get("stage") == STAGE and second:
        return (
            f"decided at a second registered stage on {second['new_seeds']} new seeds alone "
            f"(seeds {_span(second['seeds'])}), after an inconclusive confirmatory stage: the "
            "procedure had two chances, so its false-pass bound is 5%, not 2.5%"
        )
    if not second or row.get("stage") != "confirmatory":
        return ""
    if second.get("void"):
        return f"second stage void: {second['void']}"
    if second.get("deferred"):
        return (
            f"a second stage is registered but not run ({second['deferred']}): {cost_text(second)}"
        )
    return f"a second stage is registered, not yet run: {cost_text(second)}"


def _span(seeds) -> str:
    seeds = sorted(seeds)
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def propose(
    evidence, where, negligible, sized_on: list, first_new: int, fingerprints: dict, cpu_s: float
) -> dict | None:
    """The second stage of a claim open after its confirmatory stage, sized by the planner
    from `evidence` (the values of the confirmatory seeds `sized_on`) on seeds from
    `first_new`; None where the planner refuses it (below the power floor, or no number of
    seeds decides)."""
    got = planning.plan(evidence, where, negligible)
    if got.undecidable or not math.isfinite(got.power) or got.power < planning.POWER_FLOOR:
        return None
    return {
        "exploratory_seeds": [int(s) for s in sized_on],
        "seeds": list(range(first_new, first_new + got.new_seeds)),
        **{k: v for k, v in got.to_json().items() if k != "target"},
        **fingerprints,
        "cpu_s_per_seed": round(float(cpu_s), 1),
    }


# ---- the seeds an audit is decided on -----------------------------------------------------------


def audits_on_their_claims_seeds(claims: list[dict]) -> list[dict]:
    """`claims` with every audit decided on the seeds of the claim it audits: an audit is the
    same statement on another program, setting or reading, never a decision of its own.
    Where the claim has a live plan, the audit is given it (marked `borrowed_from`), second
    stage included: the same seeds by the same design (the plan's new seeds once they have
    all run, else its exploratory ones; a second stage's seeds where the first stage left it
    open). Read on every seed it would pool seeds seen before the plan with seeds never seen
    (4.7% false passes by the decision rule's simulation, not 2.5%); read on the first seeds
    only it would ignore runs made since. Where the claim's plan is void, the audit is read on
    that plan's exploratory seeds, as the claim is; where the claim has none, a plan of the
    audit's own is void (in memory: the file keeps what was registered), so both are read on
    their exploratory seeds. Either way the audit is never counted as a decision
    (`tally.multiplicity_text` counts the paper's claims only)."""
    by_id = {c["id"]: c for c in claims}
    out = []
    for claim in claims:
        target = by_id.get(claim.get("audit_of") or "")
        if target is None:
            out.append(claim)
            continue
        own = claim.get("seed_plan")
        theirs = active_plan(target.get("seed_plan"))
        if isinstance(theirs, dict) and not theirs.get("void"):
            borrowed = {k: v for k, v in theirs.items() if k != "replacement"}
            claim = {**claim, "seed_plan": {**borrowed, "borrowed_from": target["id"]}}
        elif isinstance(theirs, dict):  # the claim's plan is void: it reads its exploratory seeds
            reason = (
                f"an audit of {target['id']}, whose plan is void: read on that claim's "
                "exploratory seeds, as the claim is"
            )
            seeds = {k: theirs[k] for k in ("exploratory_seeds", "seeds")}
            claim = {**claim, "seed_plan": {**seeds, "void": reason, "borrowed_from": target["id"]}}
        elif isinstance(own, dict) and not active_plan(own).get("void"):
            reason = (
                f"an audit of {target['id']}, which has no live plan: an audit is never a "
                "decision of its own, so this plan decides nothing and the audit is read on "
                "its exploratory seeds, as its claim is"
            )
            kept = {k: v for k, v in own.items() if k not in ("replacement", "second_stage")}
            claim = {**claim, "seed_plan": {**kept, "void": reason}}
        out.append(claim)
    return out
