"""Shared fixtures: a copy of the demo project, and the chapters executed at the smoke profile."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DEMO = TESTS / "fixtures" / "demo_project"


@pytest.fixture
def demo_project(tmp_path, monkeypatch):
    """A throwaway project root holding the demo chapter (its results land in tmp_path)."""
    root = tmp_path / "project"
    shutil.copytree(DEMO, root)
    monkeypatch.setenv("IMPLICIT_BIAS_ROOT", str(root))
    monkeypatch.delenv("IMPLICIT_BIAS_RESULTS", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(ROOT / "lib")]))
    monkeypatch.syspath_prepend(str(root))
    return root


@pytest.fixture(scope="session")
def _smoke_runs():
    return {}


@pytest.fixture
def smoke_chapter(_smoke_runs, chapter):
    """The run summary of `chapter` executed at the smoke profile on the CPU, once per test
    session and only for the chapters a selection asks for (`pytest -k gln_norm` runs one)."""
    from implicit_bias.core.runner import run_chapter

    if chapter not in _smoke_runs:
        print(f"\n[smoke book] executing {chapter} ...", file=sys.stderr, flush=True)
        _smoke_runs[chapter] = run_chapter(chapter, "smoke", "cpu")
        print(
            f"[smoke book] {chapter}: ok={_smoke_runs[chapter]['ok']} "
            f"{_smoke_runs[chapter]['seconds']} s",
            file=sys.stderr,
            flush=True,
        )
    return _smoke_runs[chapter]


@pytest.fixture(scope="session")
def smoke_book(_smoke_runs):
    """Every chapter of the book executed at the smoke profile (for the website test)."""
    from implicit_bias.core.chapter import chapters
    from implicit_bias.core.runner import run_chapter

    for chapter in chapters():
        if chapter not in _smoke_runs:
            _smoke_runs[chapter] = run_chapter(chapter, "smoke", "cpu")
    return _smoke_runs
