"""Book tests: every chapter executes at the smoke profile, its claims hold, its figures match
the baselines; the committed paper-profile results satisfy their claims and recompute."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from implicit_bias.chapter import chapters
from implicit_bias.claims import OK_STATUSES, load_claims, load_report
from implicit_bias.paths import figures_dir, project_root
from implicit_bias.regression import baseline_figures, compare_figure
from implicit_bias.sweep import load_function

pytestmark = pytest.mark.book
CHAPTERS = chapters()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_executes(smoke_book, chapter):
    summary = smoke_book[chapter]
    assert summary["ok"], f"{chapter} failed: {summary['error']} (see book/chapters/)"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_smoke_claims(smoke_book, chapter):
    report = load_report(chapter, "smoke")
    assert report is not None, f"{chapter} wrote no claims report"
    expected = {c["id"] for c in load_claims(chapter) if "smoke" in c["profiles"]}
    assert {row["id"] for row in report["claims"]} == expected
    bad = [f"{row['id']}: {row['status']} (ours {row['value']}, expected {row['expect']})"
           for row in report["claims"] if row["status"] not in OK_STATUSES]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_figures_match_baselines(smoke_book, chapter):
    produced = sorted(p.stem for p in figures_dir("smoke", chapter).glob("*.json"))
    baselines = baseline_figures(chapter)
    missing = sorted(set(produced) - set(baselines))
    assert not missing, f"figures without a baseline: {missing}; run `make baselines`"
    problems = [p for fig in baselines for p in compare_figure(chapter, fig)]
    assert not problems, "\n".join(problems)


def committed_paper_report(chapter):
    path = project_root() / "results" / "paper" / "claims" / f"{chapter}.json"
    if not path.exists():
        pytest.skip(f"no committed paper-profile results for {chapter}")
    return json.loads(path.read_text())


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_paper_results_satisfy_claims(chapter):
    report = committed_paper_report(chapter)
    current = {c["id"]: c for c in load_claims(chapter) if "paper" in c["profiles"]}
    assert {row["id"] for row in report["claims"]} == set(current), \
        "claims file and committed paper results disagree: rerun the paper profile"
    bad = []
    for row in report["claims"]:
        claim = current[row["id"]]
        deviation = claim.get("known_deviation") or {}
        status = row["status"]
        if status == "known deviation" and "paper" not in deviation.get("profiles", []):
            status = "known deviation no longer declared"
        if status not in OK_STATUSES:
            bad.append(f"{row['id']}: {status} (ours {row['value']}, expected {row['expect']})")
    assert not bad, "\n".join(bad)


def numeric_mismatches(a, b, path=""):
    """Differences between two JSON results (timings ignored, floats within tolerance)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k in set(a) | set(b) if "seconds" not in k and "time" not in k}
        return [m for k in sorted(keys) for m in numeric_mismatches(a.get(k), b.get(k),
                                                                     f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)}"]
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in
                numeric_mismatches(x, y, f"{path}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not (
            isinstance(a, bool) or isinstance(b, bool)):
        if math.isnan(a) and math.isnan(b):
            return []
        return [] if math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-6) else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_paper_tasks_recompute_on_cpu(chapter):
    """The two cheapest cached paper-profile tasks, recomputed here, give the same numbers."""
    committed_paper_report(chapter)
    folder = project_root() / "results" / "paper" / chapter
    entries = []
    for path in folder.glob("*/*.json"):
        entry = json.loads(path.read_text())
        if entry.get("fn") and entry["result"].get("status") == "ok":
            entries.append((entry["result"].get("seconds", math.inf), path, entry))
    if not entries:
        pytest.skip(f"{chapter}: no recomputable cached tasks committed")
    for seconds, path, entry in sorted(entries, key=lambda e: e[0])[:2]:
        if seconds > 20:
            pytest.skip(f"{chapter}: cheapest cached task takes {seconds:.0f} s")
        task = dict(entry["task"])
        if "device" in task:
            task["device"] = "cpu"
        result = load_function(entry["fn"])(task)
        result = json.loads(json.dumps(result, default=float))
        stored = {k: v for k, v in entry["result"].items() if k != "status"}
        result.pop("status", None)
        mismatches = numeric_mismatches(result, stored)
        assert not mismatches, f"{Path(path).name}:\n" + "\n".join(mismatches[:10])
