"""Where the project's files live (the repository root, the chapters, results, figures,
claims)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml


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


RUN_ID_ENV = "IMPLICIT_BIAS_RUN_ID"


def run_dir(profile: str, chapter: str) -> Path:
    """The chapter's run folder, `results/<profile>/<chapter>/.run/`; under the runner, each
    run writes its own subfolder (`$IMPLICIT_BIAS_RUN_ID`), so two runs of one chapter never
    read each other's counts."""
    base = chapter_results(profile, chapter) / ".run"
    run_id = os.environ.get(RUN_ID_ENV)
    return base / run_id if run_id else base


def run_log_path(profile: str, chapter: str) -> Path:
    """What the chapter's sweeps did in the current run (written by `Chapter`, read by the
    runner): `<run_dir>/sweeps.json`."""
    return run_dir(profile, chapter) / "sweeps.json"


def publish_root() -> Path:
    """Where executed chapters are published: `book/chapters/`, or, for runs into another
    results folder (`$IMPLICIT_BIAS_RESULTS`), `<that folder>/book/`, never the book's."""
    env = os.environ.get("IMPLICIT_BIAS_RESULTS")
    return Path(env) / "book" if env else project_root() / "book" / "chapters"


def shown_path(path: Path) -> str:
    """A path as messages show it: relative to the repository when inside it."""
    path = Path(path)
    root = project_root()
    return (
        str(path.relative_to(root))
        if path.is_absolute() and path.is_relative_to(root)
        else str(path)
    )


def current_umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def chapters() -> list[str]:
    """Chapter ids in book order: the `book/chapters/<id>` entries of `_toc.yml`."""
    toc = project_root() / "_toc.yml"
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            entry = node.get("file")
            if isinstance(entry, str) and entry.startswith("book/chapters/"):
                found.append(Path(entry).stem)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if toc.exists():
        walk(yaml.safe_load(toc.read_text()))
    return found


def known_chapters() -> list[str]:
    """Chapters in the book, then any other notebook in `notebooks/` (being written)."""
    in_book = chapters()
    drafts = sorted(p.stem for p in (project_root() / "notebooks").glob("*.md"))
    return in_book + [c for c in drafts if c not in in_book]
