"""`python -m implicit_bias new-chapter <id>`: a new chapter from `chapters/_template`.

It creates the notebook, the claims and profiles files (and the profiles' schema), the chapter
package (tasks, analysis, figures), a models module, their tests and the table-of-contents
entry. The template is a complete small chapter, so the new one runs green at once and is then
edited into the paper's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..engine.paths import project_root

CHAPTER_ID = re.compile(r"[a-z][a-z0-9_]{2,39}")
TEMPLATE = Path(__file__).resolve().parents[2] / "chapters" / "_template"
EXAMPLE_PAPER = "zhang2017understanding"  # the template's own example result


class ScaffoldError(ValueError):
    """The chapter cannot be created as asked (bad id, existing files, unknown paper)."""


def planned_files(chapter: str, root: Path) -> dict[str, Path]:
    """Template file -> where the new chapter's copy goes."""
    lib = root / "lib" / "implicit_bias"
    package = lib / "chapters" / chapter
    return {
        "__init__.py": package / "__init__.py",
        "tasks.py": package / "tasks.py",
        "analysis.py": package / "analysis.py",
        "figures.py": package / "figures.py",
        "model.py": lib / "models" / f"{chapter}.py",
        "notebook.md": root / "notebooks" / f"{chapter}.md",
        "claims.yaml": root / "data" / "claims" / f"{chapter}.yaml",
        "profiles.yaml": root / "data" / "profiles" / f"{chapter}.yaml",
        "profile_schema.yaml": root / "data" / "schemas" / "profiles" / f"{chapter}.yaml",
        "test_model.py": root / "tests" / "models" / f"test_{chapter}.py",
        "test_chapter.py": root / "tests" / "chapters" / chapter / f"test_{chapter}_chapter.py",
    }


def bib_keys(root: Path) -> set[str]:
    bib = root / "book" / "references.bib"
    return set(re.findall(r"^@\w+\{([^,\s]+),", bib.read_text(), re.M)) if bib.exists() else set()


def new_chapter(
    chapter: str, title: str | None = None, paper: str = EXAMPLE_PAPER, root: Path | None = None
) -> list[Path]:
    """Create chapter `chapter`; returns the files written. Nothing is written if any check
    fails."""
    root = root or project_root()
    if not CHAPTER_ID.fullmatch(chapter):
        raise ScaffoldError(
            f"chapter id {chapter!r}: use 3-40 lowercase letters, digits and "
            "underscores, starting with a letter (it names files and a package)"
        )
    import keyword

    if keyword.iskeyword(chapter):
        raise ScaffoldError(
            f"chapter id {chapter!r} is a Python keyword: it names a package "
            f"(implicit_bias.chapters.{chapter}) that cannot be imported; choose another"
        )
    files = planned_files(chapter, root)
    existing = [
        str(p.relative_to(root)) if p.is_relative_to(root) else str(p)
        for p in files.values()
        if p.exists()
    ]
    if existing:
        raise ScaffoldError(f"chapter {chapter!r} exists already: {', '.join(existing)}")
    keys = bib_keys(root)
    if paper not in keys:
        raise ScaffoldError(
            f"paper {paper!r} is not in book/references.bib: add its entry "
            f"first (keys there: {', '.join(sorted(keys)) or 'none'})"
        )
    toc = root / "_toc.yml"
    toc_text = toc.read_text()
    entries = list(re.finditer(r"^(\s*- file: book/chapters/)(\S+)\s*$", toc_text, re.M))
    if not entries:
        raise ScaffoldError("_toc.yml lists no chapter (book/chapters/<id>) to add this one after")
    title = title or chapter.replace("_", " ").capitalize()
    contents = {
        target: (TEMPLATE / name)
        .read_text()
        .replace("__chapter__", chapter)
        .replace("__title__", title)
        .replace("__paper__", paper)
        for name, target in files.items()
    }
    last = entries[-1]
    contents[toc] = toc_text[: last.end()] + f"\n{last.group(1)}{chapter}" + toc_text[last.end() :]
    undo = write_all(contents)
    written = list(contents)
    if (root / "_config.yml").exists():  # the book's project: its Colab copy (core.site.colab)
        from ..site.colab import write

        try:
            written += write([chapter], root)
        except BaseException:
            undo()
            toc.write_text(toc_text)
            raise
    return written


def write_all(contents: dict[Path, str]) -> Callable[[], None]:
    """Write every file or none (a full disk, Ctrl-C): each is written under a temporary name
    beside its place, a new folder (the chapter's package) whole under a temporary name, and
    only then renamed in, existing files (the table of contents) last. Returns what removes the
    new files and folders again."""
    import os
    import shutil

    suffix = f".new-{os.getpid()}"
    new_dirs: dict[Path, Path] = {}  # a folder that does not exist yet -> its temporary name
    new_files: list[tuple[Path, Path]] = []  # temporary file -> its place, in an existing folder
    existed = {path for path in contents if path.exists()}

    def undo() -> None:
        for top, tmp in new_dirs.items():
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(top, ignore_errors=True)
        for tmp, target in new_files:
            tmp.unlink(missing_ok=True)
            if target not in existed:  # an existing file (the table of contents): the caller's
                target.unlink(missing_ok=True)

    try:
        for target, text in contents.items():
            top = next((p for p in reversed(target.parents) if not p.exists()), None)
            if top is None:
                tmp = target.with_name(f".{target.name}{suffix}")
                new_files.append((tmp, target))
            else:
                tmp_top = new_dirs.setdefault(top, top.with_name(f".{top.name}{suffix}"))
                tmp = tmp_top / target.relative_to(top)
                tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text)
        for top, tmp_top in new_dirs.items():
            tmp_top.rename(top)
        for tmp, target in sorted(new_files, key=lambda move: move[1] in existed):
            tmp.replace(target)
    except BaseException:
        undo()
        raise
    return undo
