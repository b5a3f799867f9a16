"""Pre-registration of claims, read from the repository's history.

A claim is *pre-registered* when its definition (metric, expectation, effect word, unit,
range and scope) was committed before the first commit that stored a value for that
definition in the committed paper results (`results/paper/claims/<chapter>.json`). Nothing
here is written by hand: both dates come from git, so the order cannot be asserted, only
shown.

A seed plan's registration covers more than its claim's definition: the protocol (the paper
profile) and the metric's code it was sized under (`core.verdicts.protocol`). Plans record
both fingerprints when written; for plans registered before they did, `registered_protocols`
reads the profile at the commit that registered each plan, and `record_registered_protocols`
adds it to the plan file (a record of what was registered, every other line kept).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..engine.paths import project_root
from .schema import active_plan

# what decides a claim: its metric, the region its words put it in, and how the interval is
# formed (`range`) and over what (`scope`: the average, or every run)
DEFINITION = ("metric", "expect", "effect", "unit", "range", "scope")


class HistoryError(RuntimeError):
    """The repository's history cannot be read (no git, not a repository, a shallow clone)."""


@dataclass(frozen=True)
class Registration:
    claim: str
    defined: str | None  # first commit since which the definition is unchanged
    stored: str | None  # first commit that stored a value for that definition
    pre_registered: bool | None  # None: no stored value yet
    # a value stored under this same definition before it was changed and changed back
    earlier_value: str | None = None
    # the first commit that stored any value of this claim (under any definition): its data
    # were seen from then on, so a definition committed later decides on data seen before
    data_seen: str | None = None
    after_data: bool = False

    @property
    def short(self) -> str:
        return (self.defined or "uncommitted")[:7]


def _git(args: list[str], root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise HistoryError(f"cannot read the history: git {' '.join(args)}: {err}") from None
    return out


def history_available(root: Path | None = None) -> bool:
    """Whether the full history is there (not a shallow clone, not an export)."""
    root = root or project_root()
    try:
        return _git(["rev-parse", "--is-shallow-repository"], root).strip() == "false"
    except HistoryError:
        return False


def _versions(path: str, root: Path) -> list[tuple[str, str]]:
    """(commit, text) of every committed version of `path`, oldest first (one `git cat-file`
    for all of them)."""
    commits = _git(["log", "--format=%H", "--reverse", "--", path], root).split()
    if not commits:
        return []
    query = "".join(f"{c}:{path}\n" for c in commits).encode()
    try:
        raw = subprocess.run(
            ["git", "cat-file", "--batch"], cwd=root, input=query, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise HistoryError(f"cannot read the history of {path}: {err}") from None
    versions, pos = [], 0
    for commit in commits:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].split()
        if header[-1] == b"missing":  # the commit removed the file
            versions.append((commit, ""))
            pos = end + 1
            continue
        size = int(header[2])
        versions.append((commit, raw[end + 1 : end + 1 + size].decode()))
        pos = end + 1 + size + 1
    return versions


def _definition(claim: dict) -> tuple:
    return tuple(str(claim.get(k)) if claim.get(k) is not None else None for k in DEFINITION)


def _claims_at(text: str) -> dict[str, tuple]:
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []
    except yaml.YAMLError:
        return {}
    return {c["id"]: _definition(c) for c in data if isinstance(c, dict) and "id" in c}


def _stored_at(text: str) -> dict[str, tuple]:
    try:
        rows = json.loads(text).get("claims", []) if text else []
    except (ValueError, AttributeError):
        return {}
    return {r["id"]: _definition(r) for r in rows if isinstance(r, dict) and "id" in r}


def registrations(chapter: str, root: Path | None = None) -> dict[str, Registration]:
    """Per claim of the chapter's committed claims file: when its current definition was
    committed and when a value for it was first stored in the paper results."""
    root = root or project_root()
    if not history_available(root):
        raise HistoryError(
            "the repository's full history is needed (a shallow clone has none: "
            "git fetch --unshallow)"
        )
    claims = _versions(f"data/claims/{chapter}.yaml", root)
    results = _versions(f"results/paper/claims/{chapter}.json", root)
    order = {c: i for i, c in enumerate(_git(["rev-list", "--reverse", "HEAD"], root).split())}
    if not claims:
        return {}
    claim_versions = [(c, _claims_at(text)) for c, text in claims]
    stored_versions = [(c, _stored_at(text)) for c, text in results]
    current = claim_versions[-1][1]
    out = {}
    for cid, definition in current.items():
        defined = None
        for commit, version in reversed(claim_versions):  # back while the definition holds
            if version.get(cid) != definition:
                break
            defined = commit
        # the first value stored for this definition since it was (last) registered; a value
        # stored under the same definition before an intervening change is reported apart
        start = order.get(defined, -1) if defined else len(order)
        stored = next(
            (
                c
                for c, version in stored_versions
                if version.get(cid) == definition and order.get(c, -1) >= start
            ),
            None,
        )
        earlier = next(
            (
                c
                for c, version in stored_versions
                if version.get(cid) == definition and order.get(c, -1) < start
            ),
            None,
        )
        pre = None
        if stored is not None:
            pre = defined is not None and order.get(defined, -1) < order.get(stored, -1)
        seen = next((c for c, version in stored_versions if cid in version), None)
        after = (
            seen is not None and defined is not None and order.get(seen, -1) < order[defined]
            if defined in order
            else False
        )
        out[cid] = Registration(cid, defined, stored, pre, earlier, seen, after)
    return out


def deciding_values_first_stored(chapter: str, root: Path | None = None) -> dict[str, str]:
    """Per row of the chapter's committed paper report decided at a registered stage (its
    confirmatory seeds, or a second stage's; an audit, on the seeds of the claim it audits):
    the first commit that stored a verdict of that row at that stage on the same seeds. The
    values that decide it were first seen then, whatever was stored of the claim before."""
    root = root or project_root()
    results = _versions(f"results/paper/claims/{chapter}.json", root)
    if not results:
        return {}
    current: dict[str, tuple] = {}
    for stage in ("confirmatory", SECOND):
        current.update(
            {cid: (stage, key) for cid, key in _confirmed_at(results[-1][1], stage).items()}
        )
    first: dict[str, str] = {}
    for commit, text in results:
        for stage in ("confirmatory", SECOND):
            for cid, key in _confirmed_at(text, stage).items():
                if cid not in first and current.get(cid) == (stage, key):
                    first[cid] = commit
    return first


def decided_on_new_seeds(
    chapter: str, regs: dict[str, Registration], root: Path | None = None
) -> set[str]:
    """The claims defined after their first data were stored (`after_data`) whose verdict
    still rests on values first stored after that definition: a registered stage's seeds, run
    once the definition was committed. The rest of them are decided on data seen before."""
    root = root or project_root()
    order = {c: i for i, c in enumerate(_git(["rev-list", "--reverse", "HEAD"], root).split())}
    first = deciding_values_first_stored(chapter, root)
    return {
        cid
        for cid, r in regs.items()
        if r.after_data
        and cid in first
        and r.defined in order
        and order[r.defined] < order.get(first[cid], -1)
    }


def registration_words(reg: Registration, fresh: set[str]) -> str:
    """When a claim was defined, in words (the CLI and the status page say the same):
    before its result, with or after it, or redefined after a value of it was stored and
    decided on seeds run after (`fresh`: `decided_on_new_seeds`) or on values seen before."""
    if reg.after_data:  # what decides it now is new data or not
        seeds = "seeds run after" if reg.claim in fresh else "values seen before"
        return f"redefined after a value of it was stored; decided on {seeds}"
    if reg.pre_registered is None:
        return "no result yet"
    return "defined before its result" if reg.pre_registered else "defined with or after its result"


def format_registrations(chapters: list[str], root: Path | None = None) -> str:
    lines = []
    for chapter in chapters:
        regs = registrations(chapter, root)
        fresh = decided_on_new_seeds(chapter, regs, root)
        seen_before = {c for c, r in regs.items() if r.after_data and c not in fresh}
        counts = {
            "defined before their first stored value": sum(
                r.pre_registered is True and not r.after_data for r in regs.values()
            ),
            "redefined after a value was stored, decided on seeds run after": len(fresh),
            "redefined after a value was stored, decided on values seen before": len(seen_before),
            "stored with or before the definition": sum(
                r.pre_registered is False and not r.after_data for r in regs.values()
            ),
            "no stored paper value": sum(r.pre_registered is None for r in regs.values()),
        }
        lines.append(f"{chapter}: " + ", ".join(f"{n} {k}" for k, n in counts.items() if n))
        for r in regs.values():
            state = registration_words(r, fresh)
            again = (
                f" (a value of this definition was stored before, at {(r.earlier_value or '')[:7]})"
            )
            seen = f" (first value stored at {(r.data_seen or '')[:7]})"
            lines.append(
                f"  {r.claim:<56} defined {r.short}  stored {(r.stored or '-')[:7]:<7}  {state}"
                + (again if r.earlier_value else "")
                + (seen if r.after_data else "")
            )
    return "\n".join(lines)


# ---- seed plans: committed before the run that adds their seeds ------------------------------


@dataclass(frozen=True)
class PlanRegistration:
    claim: str
    planned: str | None  # first commit since which the claim's plan is unchanged
    confirmed: str | None  # first commit that stored a confirmatory verdict under that plan
    pre_registered: bool | None  # None: no confirmatory verdict stored yet


SECOND = "second stage"  # a row's stage, and the registration `plan_registrations` can follow


def _deciding(plan, stage: str):
    """The registration a verdict of `stage` rests on: the active plan, or its second stage."""
    if stage == SECOND:
        return plan.get("second_stage") if isinstance(plan, dict) else None
    return active_plan(plan)


def _plans_at(text: str, stage: str = "confirmatory") -> dict[str, tuple]:
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return {}
    plans = data.get("claims") if isinstance(data, dict) else None
    deciding = {cid: _deciding(p, stage) for cid, p in (plans or {}).items()}
    return {
        cid: (tuple(p.get("exploratory_seeds") or ()), tuple(p.get("seeds") or ()))
        for cid, p in deciding.items()
        if isinstance(p, dict)
    }


def _confirmed_at(text: str, stage: str = "confirmatory") -> dict[str, tuple]:
    """Per claim of a stored report decided at `stage` (its confirmatory seeds, or a second
    stage's): the registration it used."""
    try:
        rows = json.loads(text).get("claims", []) if text else []
    except (ValueError, AttributeError):
        return {}
    out = {}
    for r in rows:
        plan = _deciding(r.get("seed_plan"), stage) if isinstance(r, dict) else None
        if r.get("stage") == stage and isinstance(plan, dict):
            out[r["id"]] = (tuple(plan.get("exploratory_seeds") or ()), tuple(plan["seeds"]))
    return out


def plan_registrations(
    chapter: str, root: Path | None = None, stage: str = "confirmatory"
) -> dict[str, PlanRegistration]:
    """Per claim with a seed plan in `data/seed_plans/<chapter>.yaml`: the commit that
    registered its current plan, and the first commit that stored a confirmatory verdict
    under it; pre-registered when the plan came first. With `stage` "second stage", the same
    for each claim's second stage and the first verdict stored at it."""
    root = root or project_root()
    plans = _versions(f"data/seed_plans/{chapter}.yaml", root)
    if not plans:
        return {}
    results = _versions(f"results/paper/claims/{chapter}.json", root)
    order = {c: i for i, c in enumerate(_git(["rev-list", "--reverse", "HEAD"], root).split())}
    plan_versions = [(c, _plans_at(text, stage)) for c, text in plans]
    stored = [(c, _confirmed_at(text, stage)) for c, text in results]
    out = {}
    for cid, plan in plan_versions[-1][1].items():
        planned = None
        for commit, version in reversed(plan_versions):
            if version.get(cid) != plan:
                break
            planned = commit
        # the first confirmatory verdict under this plan, whenever it was stored
        confirmed = next((c for c, v in stored if v.get(cid) == plan), None)
        pre = None
        if confirmed is not None:
            pre = planned is not None and order.get(planned, -1) < order.get(confirmed, -1)
        out[cid] = PlanRegistration(cid, planned, confirmed, pre)
    return out


# ---- the protocol a plan was registered under, read from the history -------------------------


def _plan_keys_at(text: str) -> dict[str, dict[str, tuple]]:
    """Per claim of a seed-plan file's version: the seeds of its plan and of its replacement
    (what identifies each registration)."""
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return {}
    plans = data.get("claims") if isinstance(data, dict) else None
    out = {}
    for cid, plan in (plans or {}).items():
        if not isinstance(plan, dict):
            continue
        keys = {
            "plan": (tuple(plan.get("exploratory_seeds") or ()), tuple(plan.get("seeds") or ()))
        }
        replacement = plan.get("replacement")
        if isinstance(replacement, dict):
            keys["replacement"] = (
                tuple(replacement.get("exploratory_seeds") or ()),
                tuple(replacement.get("seeds") or ()),
            )
        out[cid] = keys
    return out


@dataclass(frozen=True)
class ProtocolRegistration:
    claim: str
    part: str  # "plan", or "replacement" (the plan registered in place of a void one)
    registered: str  # the first commit since which this plan's seeds are unchanged
    protocol: str | None  # the fingerprint of the paper profile at that commit


def registered_protocols(chapter: str, root: Path | None = None) -> list[ProtocolRegistration]:
    """For each plan (and replacement) of the committed seed-plan file of `chapter`: the commit
    that registered it (the first since which its seeds are unchanged) and the fingerprint of
    the chapter's paper profile at that commit (`protocol.protocol_fingerprint_of`), for the
    plans registered before plans recorded it. A withdrawn plan decides nothing: left out."""
    from .protocol import protocol_fingerprint_of

    root = root or project_root()
    plans = _versions(f"data/seed_plans/{chapter}.yaml", root)
    if not plans:
        return []
    versions = [(c, _plan_keys_at(text)) for c, text in plans]
    latest = yaml.safe_load(plans[-1][1]) or {}
    withdrawn = {
        cid
        for cid, p in (latest.get("claims") or {}).items()
        if isinstance(p, dict) and p.get("withdrawn")
    }
    profile = f"data/profiles/{chapter}.yaml"
    out = []
    for cid, parts in versions[-1][1].items():
        if cid in withdrawn:
            continue
        for part, key in parts.items():
            registered = None
            for commit, version in reversed(versions):
                if version.get(cid, {}).get(part) != key:
                    break
                registered = commit
            assert registered is not None
            try:
                text = _git(["show", f"{registered}:{profile}"], root)
            except HistoryError:
                text = ""
            out.append(ProtocolRegistration(cid, part, registered, protocol_fingerprint_of(text)))
    return out


def record_registered_protocols(chapter: str, root: Path | None = None) -> list[str]:
    """Write into `data/seed_plans/<chapter>.yaml` the `protocol` fingerprint of every plan
    (and replacement) that records none, derived from git (`registered_protocols`): a line
    added after the plan's `sd`, every other line kept byte for byte. This is a record of what
    was registered, not a change of the plan: the plan's seeds and numbers are untouched. The
    working file must hold the committed plans (their seeds are matched). Returns the lines
    it added, as "claim (part): fingerprint at commit"."""
    root = root or project_root()
    path = root / "data" / "seed_plans" / f"{chapter}.yaml"
    if not path.exists():
        return []
    found = {(r.claim, r.part): r for r in registered_protocols(chapter, root)}
    lines = path.read_text().splitlines(keepends=True)
    data = yaml.safe_load("".join(lines)) or {}
    plans = data.get("claims") or {}
    out: list[str] = []
    added: list[str] = []
    cid: str | None = None
    part = "plan"
    for line in lines:
        out.append(line)
        stripped = line.rstrip("\n")
        if stripped.startswith("  ") and not stripped.startswith("   ") and stripped.endswith(":"):
            cid, part = stripped.strip()[:-1], "plan"
        elif stripped == "    replacement:":
            part = "replacement"
        indent = "    " if part == "plan" else "      "
        if cid is None or not stripped.startswith(indent + "sd:"):
            continue
        if stripped.startswith(indent + " "):
            continue
        plan = plans.get(cid) or {}
        target = plan.get("replacement") if part == "replacement" else plan
        reg = found.get((cid, part))
        if not isinstance(target, dict) or "protocol" in target or reg is None or not reg.protocol:
            continue
        out.append(f"{indent}protocol: {reg.protocol}\n")
        added.append(f"{cid} ({part}): {reg.protocol} at {reg.registered[:8]}")
    if added:
        text = "".join(out)
        check = yaml.safe_load(text)
        for c, p in found:  # nothing but the added field changed
            before = plans.get(c) if p == "plan" else (plans.get(c) or {}).get("replacement")
            after = check["claims"].get(c) if p == "plan" else check["claims"][c].get("replacement")
            kept = ("protocol", "replacement")
            if not (isinstance(before, dict) and isinstance(after, dict)) or {
                k: v for k, v in after.items() if k not in kept
            } != {k: v for k, v in before.items() if k not in kept}:
                raise HistoryError(f"{path.name}: {c} ({p}) would change: nothing written")
        path.write_text(text)
    return added
