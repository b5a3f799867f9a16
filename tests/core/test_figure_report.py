"""The figure report: what a reviewer sees when a figure regresses, and when it does not."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread, imsave

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.site.regression import baseline_dir, compare_figure_report, write_report

CHAPTER, FIGURE = "warped_imd", "fig7_2"


@pytest.fixture
def perturbed_run(tmp_path, monkeypatch):
    """A copy of the warped_imd smoke baselines as the 'current' run, with fig7_2's data moved
    beyond its tolerance and a black band across its image (as a real regression redraws it)."""
    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "results"))
    current = tmp_path / "results" / "smoke" / "figures" / CHAPTER
    shutil.copytree(baseline_dir(CHAPTER), current)
    meta = json.loads((current / f"{FIGURE}.json").read_text())
    table = current / meta["tables"][0]
    frame = pd.read_csv(table)
    column = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])][-1]
    frame.loc[3:8, column] = frame.loc[3:8, column] * 1.05  # six values up 5 %
    frame.to_csv(table, index=False, float_format="%.10g")
    image = imread(str(current / f"{FIGURE}.png")).copy()
    band = image.shape[0] // 3, image.shape[0] // 3 + image.shape[0] // 16  # 1/16 of it
    image[band[0] : band[1], :, :3] = 0.0
    imsave(str(current / f"{FIGURE}.png"), image)
    return current, column


def test_report_shows_the_regression_and_the_figures_that_pass(perturbed_run, tmp_path):
    _, column = perturbed_run
    report = tmp_path / "report"
    figures = sorted(p.stem for p in baseline_dir(CHAPTER).glob("*.json"))
    results = [compare_figure_report(CHAPTER, f, report_dir=report) for f in figures]
    failing = [r for r in results if not r.ok]
    assert [r.figure for r in failing] == [FIGURE]
    failed = failing[0]
    assert set(failed.images) == {"baseline", "new", "difference"}
    assert failed.rms is not None and failed.rms > failed.rms_tolerance
    moved = [m for m in failed.moved if m["column"] == column]
    assert len(moved) == 6 and all(abs(m["relative_change"] - 0.05) < 1e-6 for m in moved)
    assert any("np.float64" in p for p in failed.problems) is False  # plain numbers
    page = write_report(results, report, "test")
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 3  # self-contained: images inlined
    import re

    outside_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
    assert "<script" not in outside_images and "http" not in outside_images
    assert text.index(FIGURE) < text.index("Passing")  # failing figures first
    for passing in set(figures) - {FIGURE}:
        assert f"{CHAPTER} / {passing}</td>" in text
    summary = json.loads((report / "summary.json").read_text())
    assert summary["failing"] == 1 and summary["figures"] == len(figures)
    assert summary["results"][0]["moved"][0]["old"] != summary["results"][0]["moved"][0]["new"]


def _git_status():
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        cwd=project_root(),
    ).stdout


def test_comparing_writes_nothing_next_to_the_compared_files(perturbed_run, tmp_path):
    current, _ = perturbed_run
    before, status_before = sorted(p.name for p in current.iterdir()), _git_status()
    compare_figure_report(CHAPTER, FIGURE, report_dir=tmp_path / "report")
    compare_figure_report(CHAPTER, FIGURE, baseline=current, report_dir=tmp_path / "r2")
    assert sorted(p.name for p in current.iterdir()) == before
    assert "failed-diff" not in _git_status() and _git_status() == status_before


def test_an_unchanged_run_passes_with_zero_change(tmp_path, monkeypatch):
    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "results"))
    shutil.copytree(baseline_dir(CHAPTER), tmp_path / "results" / "smoke" / "figures" / CHAPTER)
    result = compare_figure_report(CHAPTER, FIGURE, report_dir=tmp_path / "r")
    assert result.ok and result.largest_relative_change == 0.0 and result.rms == 0.0
    assert np.isfinite(result.largest_relative_change)


def test_ci_uploads_the_figure_report_when_tests_fail():
    import yaml

    workflow = yaml.safe_load((project_root() / ".github/workflows/ci.yml").read_text())
    steps = workflow["jobs"]["test"]["steps"]
    assert any(".ci/run" in step.get("run", "") for step in steps)
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "failure()"
    assert upload[0]["with"]["path"].rstrip("/") == "results/reports"
    gpu = yaml.safe_load((project_root() / ".github/workflows/gpu.yml").read_text())
    paths = [
        s["with"]["path"]
        for s in gpu["jobs"]["paper-profile"]["steps"]
        if s.get("uses", "").startswith("actions/upload-artifact")
    ]
    assert paths and "results-gpu/figure-report/" in paths[0]
