"""The claims schema: what a claims file may say, checked before a run computes anything.

`data/schemas/claims.yaml` (JSON Schema) says which keys a claim has; this module reads an
expectation (`parse_expect`), the size an effect word gives it (`claim_effect`), and checks in
code what the schema cannot express: claim ids are unique, `in [a, b]` has a <= b, an effect
word has a size in the claim's unit, a known deviation's profiles are among its claim's
profiles, `kind: single_run` has its reason, `audit_of` names another claim of the file. It
also reads a chapter's registered seed plan (`load_seed_plan_file`). A file that does not
validate raises `ClaimsError` listing every problem at once, one line each
(`claim 'svm_gln_matches_gd_gln': expect`), with the engine's validation machinery
(`implicit_bias.core.engine.profiles`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..engine.profiles import (
    _allowed,
    _dotted,
    _load_validated,
    _raise,
    _schema_problems,
    _stamp,
    _validator_for,
    schemas_dir,
)
from . import decision
from .tally import AGAINST_PAPER, BOOK_ONLY, CAUSE_MEANINGS, CAUSES, EXACT_ONLY

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARISON = re.compile(rf"^\s*(<=|>=|<|>|==)\s*({_NUMBER})\s*$")
_INTERVAL = re.compile(rf"^\s*in\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\s*$")


class ClaimsError(ValueError):
    """A claims file does not follow the schema."""


def parse_expect(expect: str, effect: float = 0.0):
    """Turn an expectation string into a predicate on a value; raise `ClaimsError` if invalid.
    `effect` moves a comparison's bound in the claim's direction ("much" lower); 'similar'
    reads as within `effect` of zero."""
    text = str(expect).strip().lower()
    if text == "similar":
        return lambda v: abs(v) <= effect
    if text in ("true", "false"):
        wanted = text == "true"
        return lambda v: bool(v) is wanted
    match = _COMPARISON.match(text)
    if match:
        op, bound = match.group(1), float(match.group(2))
        bound = (
            bound - effect if op in ("<", "<=") else bound + effect if op in (">", ">=") else bound
        )
        ops = {
            "<": lambda v: v < bound,
            "<=": lambda v: v <= bound,
            ">": lambda v: v > bound,
            ">=": lambda v: v >= bound,
            "==": lambda v: v == bound,
        }
        return ops[op]
    match = _INTERVAL.match(text)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        if low > high:
            raise ClaimsError(
                f"cannot read expectation {expect!r}: an interval [a, b] needs "
                f"a <= b, got a = {match.group(1)} > b = {match.group(2)}"
            )
        return lambda v: low <= v <= high
    raise ClaimsError(
        f"cannot read expectation {expect!r}; use '< x', '<= x', '> x', '>= x', "
        "'== x', 'in [a, b]', 'similar', 'true' or 'false'"
    )


def claim_effect(claim: dict) -> float:
    """The size the claim's `effect` word implies in its metric's `unit` (0 without a word);
    'similar' without a word takes the unit's 'similar' margin."""
    word = claim.get("effect")
    if word == "negligible":
        raise ClaimsError(
            f"{claim['id']}: 'negligible' is not a word of the paper: it is the size below "
            "which a claimed difference has no practical effect (core.verdicts.decision)"
        )
    if word is None and str(claim["expect"]).strip().lower() == "similar":
        word = "similar"
    if word is None:
        return 0.0
    if "unit" not in claim:
        raise ClaimsError(
            f"{claim['id']}: effect {word!r} needs a unit (one of {sorted(decision.EFFECT_SIZES)})"
        )
    try:
        return decision.effect_size(word, claim["unit"])
    except decision.DecisionError as err:
        raise ClaimsError(f"{claim['id']}: {err}") from None


def load_claims_file(path: Path) -> list[dict]:
    """A claims file's data, validated (`validate_claims`); raises `ClaimsError`."""
    return _load_validated(
        path, ClaimsError, validate_claims, _stamp(schemas_dir() / "claims.yaml")
    )


def active_plan(plan):
    """The plan that decides a claim: the replacement registered in place of a void plan, else
    the registered plan itself (a void one without a replacement, which decides nothing)."""
    if isinstance(plan, dict) and plan.get("void") and isinstance(plan.get("replacement"), dict):
        return plan["replacement"]
    return plan


def load_seed_plan_file(path: Path) -> dict:
    """A seed plan's data, validated against `data/schemas/seed_plans.yaml`; raises
    `ClaimsError`."""
    schema = schemas_dir() / "seed_plans.yaml"

    def validate(data: Any, where: Path) -> None:
        problems = _schema_problems(_validator_for(schema), data)
        _raise(ClaimsError, where, problems, lambda at: _dotted(at) or "top level")

    return _load_validated(path, ClaimsError, validate, _stamp(schema))


def validate_claims(data: Any, path: Path) -> None:
    """Check a claims file's data against `data/schemas/claims.yaml`, then what the schema
    cannot say (unique ids, intervals with a <= b, known-deviation profiles among the claim's
    profiles); raise `ClaimsError` listing every problem."""
    validator = _validator_for(schemas_dir() / "claims.yaml")
    root = validator.schema
    problems = _schema_problems(validator, data)
    flagged = {where for where, _ in problems}
    first: dict[str, int] = {}
    for i, claim in enumerate(data if isinstance(data, list) else []):
        if not isinstance(claim, dict):
            continue
        cid = claim.get("id")
        if isinstance(cid, str) and (i, "id") not in flagged:
            if cid in first:
                problems.append(
                    (
                        (i, "id"),
                        f"duplicate id {cid!r} (claim #{first[cid] + 1} has "
                        f"it too); {_allowed((i, 'id'), root)}",
                    )
                )
            first.setdefault(cid, i)
        expect = claim.get("expect")
        if isinstance(expect, str) and (i, "expect") not in flagged:
            try:
                parse_expect(expect)
            except ClaimsError as err:
                problems.append(((i, "expect"), f"{err}; {_allowed((i, 'expect'), root)}"))
        if ("effect" in claim or expect == "similar") and isinstance(cid, str):
            # the word must have a size in the claim's unit (core.verdicts.decision.EFFECT_SIZES)
            try:
                claim_effect({"expect": expect, **claim})
            except ClaimsError as err:
                problems.append(((i, "effect"), str(err)))
        problems += _unit_problems(i, claim, expect)
        if claim.get("kind") == "single_run" and "single_run" not in claim:
            problems.append(
                (
                    (i, "kind"),
                    "kind 'single_run' needs its reason in `single_run`: why one "
                    "deterministic value decides the claim",
                )
            )
        if "single_run" in claim and claim.get("kind", "single_run") != "single_run":
            problems.append(((i, "single_run"), "a `single_run` reason needs kind 'single_run'"))
        deviation, own = claim.get("known_deviation"), claim.get("profiles")
        if isinstance(deviation, dict):
            problems += _cause_problems(i, deviation, problems)
            problems += _cause_origin_problems(i, claim, deviation)
        own_ok = not any(where[:2] == (i, "profiles") for where in flagged)
        if (
            isinstance(deviation, dict)
            and isinstance(deviation.get("profiles"), list)
            and isinstance(own, list)
            and own_ok
        ):
            for j, name in enumerate(deviation["profiles"]):
                where = (i, "known_deviation", "profiles", j)
                if name not in own and where not in flagged:
                    problems.append(
                        (
                            where,
                            f"profile {name!r} is not one of the claim's "
                            f"profiles; each entry of profiles must be one of "
                            f"{', '.join(map(repr, own))} (the claim's profiles)",
                        )
                    )
    ids = {c.get("id") for c in data if isinstance(c, dict)} if isinstance(data, list) else set()
    for i, claim in enumerate(data if isinstance(data, list) else []):
        target = claim.get("audit_of") if isinstance(claim, dict) else None
        if isinstance(target, str) and (target not in ids or target == claim.get("id")):
            problems.append(
                (
                    (i, "audit_of"),
                    f"{target!r} is not another claim of this file; audit_of must "
                    "name the claim this entry audits",
                )
            )
        problems += _same_cause_problems(i, claim, data)
    _raise(ClaimsError, path, problems, lambda where: _claim_where(where, data))


def _same_cause_problems(i: int, claim: Any, data: list) -> list[tuple[tuple, str]]:
    """A deviation that shares another's cause names a claim of the file whose known deviation
    has the same cause (and does not itself share another's: one root per cause)."""
    deviation = claim.get("known_deviation") if isinstance(claim, dict) else None
    if not isinstance(deviation, dict) or not isinstance(deviation.get("same_cause_as"), str):
        return []
    other = deviation["same_cause_as"]
    by_id = {c.get("id"): c for c in data if isinstance(c, dict)}
    root = (by_id.get(other) or {}).get("known_deviation")
    if (
        other == claim.get("id")
        or not isinstance(root, dict)
        or root.get("cause") != deviation.get("cause")
        or root.get("same_cause_as")
    ):
        return [
            (
                (i, "known_deviation", "same_cause_as"),
                f"{other!r} is not another claim of this file with a known deviation of the "
                "same cause that shares no other's: same_cause_as must name the deviation that "
                "explains this one",
            )
        ]
    return []


def _cause_problems(i: int, deviation: dict, problems: list) -> list[tuple[tuple, str]]:
    """A known deviation's cause must be one of `tally.CAUSES`: one line that names them with
    their meanings. A missing cause is said here, in place of the schema's line, when it is
    the only key the deviation misses; a cause of the wrong type is left to the schema."""
    cause = deviation.get("cause")
    if cause in CAUSES or not isinstance(cause, (str, type(None))) or cause == "":
        return []
    if cause is None:
        where, only = (i, "known_deviation"), "missing keys ['cause'];"
        said = [p for p in problems if p[0] == where and p[1].startswith(only)]
        if not said:  # the schema's line names the other missing keys too
            return []
        problems[:] = [p for p in problems if p not in said]
        head = "a known deviation needs its cause"
    else:
        head = f"unknown cause {cause!r}"
    listed = "; ".join(f"{c}: {CAUSE_MEANINGS[c]}" for c in CAUSES)
    return [((i, "known_deviation", "cause"), f"{head}; cause must be one of: {listed}")]


def _cause_origin_problems(i: int, claim: dict, deviation: dict) -> list[tuple[tuple, str]]:
    """A cause against the paper belongs to a claim of the paper (or an audit of one); a missed
    target of the book's own belongs to the book's own checks: a book target that fails is not
    a finding against the paper, nor a paper's claim a missed target."""
    cause, book = deviation.get("cause"), claim.get("origin") == "book"
    where = (i, "known_deviation", "cause")
    if book and cause in AGAINST_PAPER:
        return [
            (
                where,
                f"cause {cause!r} is a finding against the paper, and this is a check of the "
                "book's own (origin book): a missed target of the book's is 'target_missed'",
            )
        ]
    if cause in EXACT_ONLY and claim.get("effect") != "exact":
        return [
            (
                where,
                f"cause {cause!r} is for a formula checked by Monte Carlo (effect 'exact'), "
                "whose false-fail rate the rule states; elsewhere a fail is a finding",
            )
        ]
    if (cause in EXACT_ONLY) != ("confirmation" in deviation):
        return [
            (
                where,
                "a false alarm, and only a false alarm, names its `confirmation`: the file of "
                "independent draws from which the screen-then-confirm rule decides the cause",
            )
        ]
    if not book and cause in BOOK_ONLY:
        return [
            (
                where,
                f"cause {cause!r} is for the book's own checks (origin book); a claim of the "
                "paper that fails here is 'paper_fails'",
            )
        ]
    return []


def _unit_problems(i: int, claim: dict, expect: Any) -> list[tuple[tuple, str]]:
    """A unit must be one the rule knows; a claimed difference decided over seeds (a
    comparison with 0 on the seeds' mean) must name one, so that it has a practical size."""
    unit = claim.get("unit")
    if isinstance(unit, str) and unit not in decision.EFFECT_SIZES:
        return [((i, "unit"), f"unknown unit {unit!r}; known: {sorted(decision.EFFECT_SIZES)}")]
    match = _COMPARISON.match(expect.strip().lower()) if isinstance(expect, str) else None
    if (
        unit is None
        and match
        and match.group(1) != "=="
        and float(match.group(2)) == 0
        and claim.get("kind") == "comparison"
        and claim.get("scope") != "every_run"
    ):
        return [
            (
                (i, "unit"),
                "a claimed difference needs a `unit` (one of "
                f"{sorted(decision.EFFECT_SIZES)}): its negligible size is the difference's "
                "practical size",
            )
        ]
    return []


def _claim_where(where: tuple, data: Any) -> str:
    if not where:
        return "top level"
    i, rest = where[0], where[1:]
    claim = data[i] if isinstance(data, list) and isinstance(i, int) and i < len(data) else None
    cid = claim.get("id") if isinstance(claim, dict) else None
    name = f"claim {cid!r}" if isinstance(cid, str) and cid else f"claim #{i + 1}"
    return f"{name}: {_dotted(rest)}" if rest else name
