"""Claims: every quantitative statement of a paper as data, checked against computed metrics.

`data/claims/<chapter>.yaml` lists the claims (see CONTRIBUTING.md for the schema). `check`
compares a chapter's metrics with them and returns a `ClaimsReport` (a table in notebooks, JSON
on disk). A claim marked `known_deviation` is expected to fail: if it passes, its status is
`unexpected pass`, which counts as a failure (strict), so a fix never goes unnoticed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from .paths import claims_results, project_root

PROFILES = ("smoke", "paper")
REQUIRED_KEYS = ("id", "where", "quote", "metric", "expect", "profiles")
OPTIONAL_KEYS = ("paper_value", "known_deviation", "note")
PASS, FAIL, KNOWN, UNEXPECTED, MISSING = (
    "pass", "fail", "known deviation", "unexpected pass", "missing metric")
OK_STATUSES = (PASS, KNOWN)

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARISON = re.compile(rf"^\s*(<=|>=|<|>|==)\s*({_NUMBER})\s*$")
_INTERVAL = re.compile(rf"^\s*in\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\s*$")


class ClaimsError(ValueError):
    """A claims file does not follow the schema."""


def parse_expect(expect: str):
    """Turn an expectation string into a predicate on a value; raise `ClaimsError` if invalid."""
    text = str(expect).strip().lower()
    if text in ("true", "false"):
        wanted = text == "true"
        return lambda v: bool(v) is wanted
    match = _COMPARISON.match(text)
    if match:
        op, bound = match.group(1), float(match.group(2))
        ops = {"<": lambda v: v < bound, "<=": lambda v: v <= bound, ">": lambda v: v > bound,
               ">=": lambda v: v >= bound, "==": lambda v: v == bound}
        return ops[op]
    match = _INTERVAL.match(text)
    if match:
        low, high = float(match.group(1)), float(match.group(2))
        return lambda v: low <= v <= high
    raise ClaimsError(f"cannot read expectation {expect!r}; use '< x', '<= x', '> x', '>= x', "
                      "'== x', 'in [a, b]', 'true' or 'false'")


def claims_file(chapter: str) -> Path:
    return project_root() / "data" / "claims" / f"{chapter}.yaml"


def load_claims(chapter: str, path: Path | None = None) -> list[dict]:
    """Read and validate a chapter's claims file."""
    path = path or claims_file(chapter)
    if not path.exists():
        raise ClaimsError(f"no claims file for chapter {chapter!r} at {path}")
    claims = yaml.safe_load(path.read_text()) or []
    if not isinstance(claims, list):
        raise ClaimsError(f"{path}: expected a list of claims")
    seen = set()
    for claim in claims:
        where = f"{path.name}: claim {claim.get('id', '?')!r}"
        missing = [k for k in REQUIRED_KEYS if k not in claim]
        if missing:
            raise ClaimsError(f"{where}: missing keys {missing}")
        unknown = set(claim) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS)
        if unknown:
            raise ClaimsError(f"{where}: unknown keys {sorted(unknown)}")
        if claim["id"] in seen:
            raise ClaimsError(f"{where}: duplicate id")
        seen.add(claim["id"])
        bad = set(claim["profiles"]) - set(PROFILES)
        if bad:
            raise ClaimsError(f"{where}: unknown profiles {sorted(bad)}; valid: {PROFILES}")
        parse_expect(claim["expect"])
        deviation = claim.get("known_deviation")
        if deviation is not None:
            if isinstance(deviation, str):
                claim["known_deviation"] = {"profiles": list(claim["profiles"]),
                                            "evidence": deviation}
            elif not isinstance(deviation, dict) or "evidence" not in deviation:
                raise ClaimsError(f"{where}: known_deviation needs 'evidence' (and 'profiles')")
            else:
                deviation.setdefault("profiles", list(claim["profiles"]))
    return claims


def _as_value(value):
    if hasattr(value, "item"):  # numpy / torch scalars
        value = value.item()
    return value


def evaluate(claim: dict, metrics: dict, profile: str) -> dict:
    """The row of the claims table for one claim."""
    value = _as_value(metrics.get(claim["metric"]))
    deviation = claim.get("known_deviation") or {}
    expected_to_fail = profile in deviation.get("profiles", [])
    if value is None or (isinstance(value, float) and math.isnan(value)):
        status = MISSING
        holds = False
    else:
        holds = bool(parse_expect(claim["expect"])(value))
        if expected_to_fail:
            status = UNEXPECTED if holds else KNOWN
        else:
            status = PASS if holds else FAIL
    return {
        "id": claim["id"], "where": claim["where"], "quote": claim["quote"],
        "metric": claim["metric"], "expect": str(claim["expect"]),
        "paper_value": claim.get("paper_value"), "value": value, "status": status,
        "evidence": deviation.get("evidence") if expected_to_fail else None,
    }


@dataclass
class ClaimsReport:
    chapter: str
    profile: str
    rows: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(row["status"] in OK_STATUSES for row in self.rows)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        return counts

    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=[
            "id", "where", "quote", "paper_value", "value", "expect", "status", "evidence"])
        return frame.rename(columns={"paper_value": "paper", "value": "ours"})

    def to_json(self) -> dict:
        return {"chapter": self.chapter, "profile": self.profile, "ok": self.ok,
                "counts": self.counts(), "claims": self.rows}

    def _repr_html_(self) -> str:
        colors = {PASS: "#1a7f37", FAIL: "#cf222e", KNOWN: "#9a6700", UNEXPECTED: "#cf222e",
                  MISSING: "#cf222e"}
        lines = ["<table class='claims-table'><thead><tr><th>claim</th><th>where</th>"
                 "<th>paper</th><th>ours</th><th>expected</th><th>status</th></tr></thead><tbody>"]
        for row in self.rows:
            color = colors.get(row["status"], "black")
            note = f"<br><small>{_escape(row['evidence'])}</small>" if row["evidence"] else ""
            lines.append(
                f"<tr><td><b>{row['id']}</b><br><small>“{_escape(row['quote'])}”</small></td>"
                f"<td>{_escape(row['where'])}</td><td>{_fmt(row['paper_value'])}</td>"
                f"<td>{_fmt(row['value'])}</td><td>{_escape(row['expect'])}</td>"
                f"<td style='color:{color}'><b>{row['status']}</b>{note}</td></tr>")
        summary = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        lines.append(f"</tbody></table><p>{self.chapter} ({self.profile} profile): {summary}</p>")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_frame()[["id", "paper", "ours", "expect", "status"]].to_string()


def _escape(text) -> str:
    import html
    return html.escape(str(text)) if text is not None else ""


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return _escape(value)


def check(chapter: str, metrics: dict, profile: str, write: bool = True) -> ClaimsReport:
    """Check every claim of `chapter` active at `profile`; write the JSON report."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(PROFILES)}")
    claims = [c for c in load_claims(chapter) if profile in c["profiles"]]
    report = ClaimsReport(chapter, profile, [evaluate(c, metrics, profile) for c in claims])
    if write:
        out = claims_results(profile)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{chapter}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(report.to_json(), indent=2, default=_json_default))
        tmp.replace(path)
    return report


def _json_default(value):
    value = _as_value(value)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def load_report(chapter: str, profile: str) -> dict | None:
    path = claims_results(profile) / f"{chapter}.json"
    return json.loads(path.read_text()) if path.exists() else None
