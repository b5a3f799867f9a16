"""Where the project's files live (the repository root, results, figures, claims)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The repository root: `$IMPLICIT_BIAS_ROOT`, else found from this file or the cwd."""
    env = os.environ.get("IMPLICIT_BIAS_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for folder in (start, *start.parents):
            if (folder / "_toc.yml").exists() and (folder / "data").is_dir():
                return folder
    return Path.cwd().resolve()


def results_root() -> Path:
    env = os.environ.get("IMPLICIT_BIAS_RESULTS")
    return Path(env) if env else project_root() / "results"


def chapter_results(profile: str, chapter: str) -> Path:
    return results_root() / profile / chapter


def figures_dir(profile: str, chapter: str) -> Path:
    return results_root() / profile / "figures" / chapter


def claims_results(profile: str) -> Path:
    return results_root() / profile / "claims"


def run_log_path(profile: str, chapter: str) -> Path:
    """What the chapter's sweeps did in the current run (written by `Chapter`, read by the
    runner): `results/<profile>/<chapter>/.run/sweeps.json`."""
    return chapter_results(profile, chapter) / ".run" / "sweeps.json"
