"""What a seed plan's registration covers besides its claim's definition: the protocol that
produces the claim's per-seed values, and the code that computes its metric.

A plan is sized on the exploratory values of one protocol (step counts, grids, tolerances) and
decides its claim on the new seeds of whatever protocol runs them. If the protocol or the code
changed in between, the plan was sized for another experiment: it is void (it decides nothing,
as any void plan), and the claim's row says why.

- **The protocol** is the chapter's `paper` profile (`data/profiles/<chapter>.yaml`) as data,
  less the keys that only say which seeds run and how: a key named `seeds`, ending in `_seeds`
  or naming the confirmatory stage (`confirmatory` in its name), at any depth, and
  `description` and `workers` (text, and the number of processes, which no result depends on).
  Adding a plan's seeds to the profile is how the plan is run, so it must not void the plan;
  every other key counts. This is the whole profile section, not the part of it a claim's
  tasks read (a key that another sweep of the chapter reads voids every plan of the chapter):
  which keys a claim's tasks read is not recorded anywhere the check could read it honestly.
- **The code** is the chapter's analysis module (`chapters/<chapter>/analysis.py`), parsed and
  printed back with its docstrings dropped, so comments and layout do not count. It is an
  approximation of "the code computing the metric": the metrics of a chapter are computed by
  its analysis module and by the notebook that calls it, and the notebook is not covered; any
  change to the module voids every plan of the chapter, whether or not the claim's metric
  reaches the changed function.

Both fingerprints are short SHA-256 hashes, recorded in the plan when it is written
(`claims.plan_seeds`); for plans registered before they were recorded, the profile's is derived
from git (`registration.registered_protocols`), the code's is not recorded.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from ..engine.paths import project_root

PROFILE = "paper"  # the profile whose runs decide claims
_NOT_PROTOCOL = ("description", "workers")


def _seed_key(key: str) -> bool:
    """A key that says which seeds run (or which runs the confirmatory stage adds)."""
    return key == "seeds" or key.endswith("_seeds") or "confirmatory" in key


def protocol_section(section: Any) -> Any:
    """A profile section less its seed lists, its description and its worker count."""
    if isinstance(section, dict):
        return {
            k: protocol_section(v)
            for k, v in section.items()
            if not (k in _NOT_PROTOCOL or _seed_key(str(k)))
        }
    if isinstance(section, list):
        return [protocol_section(v) for v in section]
    return section


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def protocol_fingerprint_of(profile_text: str | None) -> str | None:
    """The fingerprint of the `paper` section of a profiles file's text (None: no section)."""
    if not profile_text:
        return None
    try:
        data = yaml.safe_load(profile_text) or {}
    except yaml.YAMLError:
        return None
    section = data.get(PROFILE) if isinstance(data, dict) else None
    if section is None:
        return None
    canonical = json.dumps(protocol_section(section), sort_keys=True, separators=(",", ":"))
    return _hash(canonical)


def profile_file(chapter: str, root: Path | None = None) -> Path:
    return (root or project_root()) / "data" / "profiles" / f"{chapter}.yaml"


def analysis_module(chapter: str, root: Path | None = None) -> Path:
    return (root or project_root()) / "lib" / "implicit_bias" / "chapters" / chapter / "analysis.py"


def _stamp(path: Path) -> tuple | None:
    """What identifies a file's content cheaply (read again only when it changes)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _protocol_of_file(stamp: tuple) -> str | None:
    return protocol_fingerprint_of(Path(stamp[0]).read_text())


@functools.lru_cache(maxsize=64)
def _code_of_file(stamp: tuple) -> str | None:
    return code_fingerprint_of(Path(stamp[0]).read_text())


def protocol_fingerprint(chapter: str, root: Path | None = None) -> str | None:
    stamp = _stamp(profile_file(chapter, root))
    return _protocol_of_file(stamp) if stamp else None


def code_fingerprint_of(source: str | None) -> str | None:
    """The fingerprint of a module's source: parsed, docstrings dropped, printed back."""
    if not source:
        return None
    from ..engine.fingerprint import _strip_docstrings, unparse

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _hash(source)
    _strip_docstrings(tree)
    return _hash(unparse(tree))


def code_fingerprint(chapter: str, root: Path | None = None) -> str | None:
    stamp = _stamp(analysis_module(chapter, root))
    return _code_of_file(stamp) if stamp else None


def current(chapter: str, root: Path | None = None) -> dict[str, str | None]:
    """The chapter's fingerprints now: {"protocol": ..., "code": ...}."""
    return {
        "protocol": protocol_fingerprint(chapter, root),
        "code": code_fingerprint(chapter, root),
    }


def changed_since_registration(plan: dict, now: dict, chapter: str) -> str | None:
    """Why `plan` is void because its protocol or code changed since it was registered (None
    where it records neither, or both still hold). A plan records what it was registered
    under; a fingerprint it does not record is not checked."""
    reasons = []
    if plan.get("protocol") is not None and plan["protocol"] != now.get("protocol"):
        reasons.append(
            f"its protocol changed since it was registered (the paper profile of "
            f"data/profiles/{chapter}.yaml, seed lists aside)"
        )
    if plan.get("code") is not None and plan["code"] != now.get("code"):
        reasons.append(
            f"the code computing its metric changed since it was registered (the chapter's "
            f"analysis module, chapters/{chapter}/analysis.py, docstrings and layout aside)"
        )
    if not reasons:
        return None
    return (
        "; ".join(reasons)
        + ": it was sized for another experiment than the one that runs its seeds"
    )


def void_changed(chapter: str, plans: dict[str, dict]) -> None:
    """Mark void (in memory: the file keeps what was registered) every plan, or replacement,
    whose recorded protocol or code fingerprint no longer holds: it was sized for
    another experiment than the one that runs its seeds, so it decides nothing, and its row
    says why. A plan already void keeps its own reason."""
    now = None
    for plan in plans.values():
        replacement = plan.get("replacement")
        target = replacement if plan.get("void") and isinstance(replacement, dict) else plan
        if target.get("void") or not ("protocol" in target or "code" in target):
            continue
        now = now or current(chapter)
        reason = changed_since_registration(target, now, chapter)
        if reason:
            target["void"] = reason
    for plan in plans.values():  # a second stage registers its experiment as a plan does
        second = plan.get("second_stage")
        if not isinstance(second, dict) or second.get("void"):
            continue
        if "protocol" in second or "code" in second:
            now = now or current(chapter)
            reason = changed_since_registration(second, now, chapter)
            if reason:
                second["void"] = reason
