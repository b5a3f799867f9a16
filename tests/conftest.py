"""Shared fixtures: a copy of the demo project, and the executed smoke book."""

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
def smoke_book():
    """Execute every chapter of the book at the smoke profile on the CPU, once per session.

    Returns {chapter: run summary}. The results cache makes a second session cheap.
    """
    from implicit_bias.chapter import chapters
    from implicit_bias.runner import run_chapter

    summaries = {}
    for chapter in chapters():
        print(f"\n[smoke book] executing {chapter} ...", file=sys.stderr, flush=True)
        summaries[chapter] = run_chapter(chapter, "smoke", "cpu")
        print(f"[smoke book] {chapter}: ok={summaries[chapter]['ok']} "
              f"{summaries[chapter]['seconds']} s", file=sys.stderr, flush=True)
    return summaries
