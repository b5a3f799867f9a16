"""Book tests: every chapter executes at the smoke profile, its claims hold, its figures match
the baselines; the committed paper-profile results satisfy their claims and recompute."""

from __future__ import annotations

import json

import pytest

from implicit_bias.core.chapter import chapters
from implicit_bias.core.engine.paths import figures_dir, project_root
from implicit_bias.core.site.regression import (
    baseline_figures,
    compare_figure_report,
    report_folder,
    write_report,
)
from implicit_bias.core.tools.verify import recompute_command, stale_entries
from implicit_bias.core.verdicts.claims import (
    OK_STATUSES,
    load_claims,
    load_report,
    reevaluate,
    stale_code,
)

pytestmark = pytest.mark.book
CHAPTERS = chapters()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_executes(smoke_chapter, chapter):
    summary = smoke_chapter
    assert summary["ok"], (
        f"{chapter} failed: {summary['error']} (see results/smoke/{chapter}/.run/failed.ipynb)"
    )
    assert summary["tasks"]["failed"] == 0, summary["tasks"]["errors"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_smoke_claims(smoke_chapter, chapter):
    report = load_report(chapter, "smoke")
    assert report is not None, f"{chapter} wrote no claims report"
    expected = {c["id"] for c in load_claims(chapter) if "smoke" in c["profiles"]}
    assert {row["id"] for row in report["claims"]} == expected
    bad = [
        f"{row['id']}: {row['status']} (ours {row['value']}, expected {row['expect']})"
        for row in report["claims"]
        if row["status"] not in OK_STATUSES
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_figures_match_baselines(smoke_chapter, chapter):
    produced = sorted(p.stem for p in figures_dir("smoke", chapter).glob("*.json"))
    baselines = baseline_figures(chapter)
    missing = sorted(set(produced) - set(baselines))
    assert not missing, f"figures without a baseline: {missing}; run `make baselines`"
    report = report_folder("figures-smoke") / chapter
    results = [compare_figure_report(chapter, fig, report_dir=report) for fig in baselines]
    page = write_report(results, report, f"{chapter}: smoke figures against tests/baselines")
    problems = [f"{r.figure}: {p}" for r in results for p in r.problems]
    assert not problems, f"figure report: {page}\n" + "\n".join(problems)


def test_committed_smoke_cache_is_fresh(stale_smoke_entries):
    """The smoke cache is committed so that `make test` renders the smoke book from it and
    recomputes nothing: an entry the current code would not produce (listed when the session
    started, before the smoke book ran) is recomputed by every test run until its chapter's
    fresh cache is committed."""
    stale = stale_smoke_entries
    chapters_ = sorted({s["chapter"] for s in stale})
    assert not stale, (
        f"{len(stale)} stale entries of the committed smoke cache "
        f"({sorted({s['reason'] for s in stale})[:3]}): run "
        + "; ".join(recompute_command(c, "smoke") for c in chapters_)
        + ", then commit results/smoke/"
    )


def committed_paper_report(chapter):
    path = project_root() / "results" / "paper" / "claims" / f"{chapter}.json"
    if not path.exists():
        pytest.skip(f"no committed paper-profile results for {chapter}")
    return json.loads(path.read_text())


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_paper_claims_hold_under_the_current_claims_file(chapter):
    """Every claim decided again from the committed metric value and today's claims file."""
    problems = reevaluate(committed_paper_report(chapter), load_claims(chapter))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_paper_results_are_not_stale(chapter):
    """Committed results were computed by the code as it is now (code fingerprints)."""
    report = committed_paper_report(chapter)
    stale = stale_entries("paper", [chapter], root=project_root() / "results")
    assert not stale, (
        f"{len(stale)} stale committed results of {chapter} "
        f"({sorted({s['reason'] for s in stale})}); recompute: "
        f"{recompute_command(chapter)}"
    )
    changed = stale_code(report)
    assert not changed, (
        f"the committed claims of {chapter} rest on code that has changed: "
        f"{changed}; recompute: {recompute_command(chapter)}"
    )
