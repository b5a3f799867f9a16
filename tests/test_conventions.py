"""The book's conventions, checked: short notebook cells, every claim's metric findable by its
literal name in its chapter's `analysis.py`, and no issue numbers in code or text."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import jupytext
import pytest
import yaml

from implicit_bias.core.chapter import known_chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = known_chapters()
MEDIAN_CELL_LINES, MAX_CELL_LINES = 8, 20


def code_cell_lengths(notebook_text: str) -> list[int]:
    """Non-blank lines of each code cell of a jupytext MyST notebook."""
    notebook = jupytext.reads(notebook_text, fmt="md:myst")
    return [
        sum(1 for line in cell.source.splitlines() if line.strip())
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def cell_problems(lengths: list[int]) -> list[str]:
    problems = []
    if lengths and statistics.median(lengths) > MEDIAN_CELL_LINES:
        problems.append(
            f"median code cell has {statistics.median(lengths)} lines (at most {MEDIAN_CELL_LINES})"
        )
    problems += [
        f"code cell {i + 1} has {n} lines (at most {MAX_CELL_LINES})"
        for i, n in enumerate(lengths)
        if n > MAX_CELL_LINES
    ]
    return problems


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_notebook_cells_are_short(chapter):
    text = (ROOT / "notebooks" / f"{chapter}.md").read_text()
    assert not cell_problems(code_cell_lengths(text)), cell_problems(code_cell_lengths(text))


def test_the_cell_check_fails_on_a_long_cell():
    long_cell = "```{code-cell} ipython3\n" + "x = 1\n" * 21 + "```\n"
    short = "```{code-cell} ipython3\nx = 1\n```\n"
    assert code_cell_lengths(long_cell + short) == [21, 1]
    assert any("at most 20" in p for p in cell_problems(code_cell_lengths(long_cell + short)))
    assert any("median" in p for p in cell_problems([9, 9, 9]))
    assert cell_problems([8, 20, 1]) == []


def missing_metrics(claims: list[dict], analysis_source: str) -> list[str]:
    """The claims whose metric is not written as a string literal in the analysis source."""
    return [
        f"{c['id']}: metric {c['metric']!r}"
        for c in claims
        if f'"{c["metric"]}"' not in analysis_source and f"'{c['metric']}'" not in analysis_source
    ]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_claim_metric_is_defined_by_name_in_the_chapter_analysis(chapter):
    claims = yaml.safe_load((ROOT / "data" / "claims" / f"{chapter}.yaml").read_text())
    analysis = ROOT / "lib" / "implicit_bias" / "chapters" / chapter / "analysis.py"
    assert analysis.exists(), f"no {analysis.relative_to(ROOT)}"
    missing = missing_metrics(claims, analysis.read_text())
    assert not missing, f"metrics not defined by name in {analysis.name}: {missing}"


def test_the_metric_check_fails_on_a_built_name():
    claims = [{"id": "a", "metric": "gap_at_4"}, {"id": "b", "metric": "slope"}]
    source = 'metrics = {"slope": s}\nfor k in (4,):\n    metrics[f"gap_at_{k}"] = g\n'
    assert missing_metrics(claims, source) == ["a: metric 'gap_at_4'"]


ISSUE_REFERENCE = re.compile(r"\bissues?\s*#?\d+\b|\(#\d+\)|\bsee #\d+", re.IGNORECASE)


def issue_references(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE_REFERENCE.finditer(text)]


def test_no_issue_numbers_in_code_or_text():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    found = []
    for name in tracked.stdout.split():
        if (
            name.startswith(("results/", "tests/baselines/"))
            or name == "CHANGELOG.md"
            or not name.endswith((".py", ".md", ".yaml", ".yml", ".toml", ".cfg"))
        ):
            continue
        path = ROOT / name
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if (
                name == "tests/test_conventions.py"
                and "issue" in line.lower()
                and ("ISSUE_REFERENCE" in line or "assert" in line)
            ):
                continue  # this test's own pattern and examples
            found += [f"{name}:{number}: {ref}" for ref in issue_references(line)]
    assert not found, "\n".join(found)


def test_the_issue_check_finds_references():
    assert issue_references("(issue 4, not the paper)") == ["issue 4"]
    assert issue_references("fixed (#12)") == ["(#12)"]
    assert issue_references("claim #4 and color #070") == []


def test_every_yaml_file_parses():
    tracked = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    problems = []
    for name in tracked.stdout.split():
        try:
            yaml.safe_load((ROOT / name).read_text())
        except yaml.YAMLError as err:
            problems.append(f"{name}: {err}")
    assert tracked.stdout.split() and not problems, "\n".join(problems)


# ---- one decision rule for comparisons -------------------------------------------------------
# Words by which a quote compares two things or states a spread-bearing bound; such a claim is
# decided by core.verdicts.decision on per-seed evidence, or says why one deterministic value
# decides it.
COMPARATIVE = re.compile(
    r"\b(better|outperform\w*|worse|beats?|similar\w*|match(es|ed)?|comparabl\w*|than|"
    r"consistent|superior|inferior)\b",
    re.IGNORECASE,
)


def comparison_problems(claims: list[dict], report: dict | None) -> list[str]:
    """Claims that decide a comparison another way than the book's rule: a z-score metric,
    or comparative words whose committed row carries no per-seed evidence and whose entry
    does not say why one value decides it."""
    rows = {r["id"]: r for r in (report or {}).get("claims", [])}
    problems = []
    for claim in claims:
        if claim["metric"].endswith("_z") or "_z_" in claim["metric"]:
            problems.append(f"{claim['id']}: metric {claim['metric']} is a z-score")
        row = rows.get(claim["id"])
        if COMPARATIVE.search(claim["quote"]) and "single_run" not in claim:
            if row is not None and not row.get("seeds"):
                problems.append(
                    f"{claim['id']}: compares ({COMPARATIVE.search(claim['quote']).group(0)!r}) "
                    "on one value: give per-seed evidence or say why in `single_run`"
                )
    return problems


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_comparisons_go_through_the_decision_rule(chapter):
    claims = yaml.safe_load((ROOT / "data" / "claims" / f"{chapter}.yaml").read_text())
    for profile in ("paper", "smoke"):
        path = ROOT / "results" / profile / "claims" / f"{chapter}.json"
        report = json.loads(path.read_text()) if path.exists() else None
        active = [c for c in claims if profile in c["profiles"]]
        assert comparison_problems(active, report) == [], (
            profile,
            comparison_problems(active, report),
        )


def test_the_comparison_check_finds_other_rules():
    claim = {"id": "a", "quote": "A is better than B", "metric": "a_minus_b_z", "expect": "< -1"}
    report = {"claims": [{"id": "a", "seeds": None}]}
    assert len(comparison_problems([claim], report)) == 2
    fixed = {**claim, "metric": "a_minus_b"}
    assert comparison_problems([fixed], {"claims": [{"id": "a", "seeds": {"n": 3}}]}) == []
    assert comparison_problems([{**fixed, "single_run": "one fixed problem"}], report) == []


def test_no_z_score_helpers_in_chapter_analyses():
    """Chapters compare through core.verdicts.decision, not a z-score of their own."""
    hits = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "lib" / "implicit_bias" / "chapters").rglob("*.py")
        if re.search(r"def (z_score|contrast_z|_z)\(", p.read_text())
    ]
    assert hits == []
