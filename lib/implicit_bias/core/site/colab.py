"""The chapters as Colab opens them: `colab/<id>.ipynb`, generated from `notebooks/<id>.md`.

Colab opens only `.ipynb` files of a GitHub repository. A chapter's source is MyST markdown
(jupytext) and its executed notebook is built, not committed; so each chapter has a committed,
unexecuted copy of its source as a notebook, whose first cell, on Colab only, clones the
repository (its address: `repository: url` of `_config.yml`, core.site.repository), installs
the package and fetches the data.
`python -m implicit_bias colab` writes them; `--check` lists those that no longer match their
source (tests/core/test_colab.py runs it), so a chapter edited without them fails the tests.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..engine.paths import project_root
from .repository import repository_url

FOLDER = "colab"
CLONE = "/content/implicit-bias-book"
SETUP_TAG = "colab-setup"

SETUP = """\
# Written by `make colab` from notebooks/{chapter}.md: edit that file, not this one.
# On Colab: the book's repository, its package and the datasets (once per session, a few
# minutes). Anywhere else (a clone set up with `make setup`) this cell does nothing.
import os
import subprocess
import sys

if "google.colab" in sys.modules:
    REPOSITORY = {repository}  # `repository: url` of _config.yml (None: not published yet)
    CLONE = {clone}
    if not os.path.isdir(CLONE):
        if REPOSITORY is None:  # the book names no public repository yet: none to clone
            raise RuntimeError(f"no repository to clone: upload a copy of the book to {{CLONE}}")
        subprocess.run(["git", "clone", "-q", "--depth", "1", REPOSITORY, CLONE], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", CLONE], check=True)
    os.chdir(CLONE)
    sys.path.insert(0, os.path.join(CLONE, "lib"))  # importable now, without a restart
    subprocess.run([sys.executable, "-m", "implicit_bias", "data"], check=True)"""


def python_literal(url: str | None) -> str:
    """`url` as the setup cell's Python spells it: a string, or None."""
    return json.dumps(url) if url else "None"


def colab_path(chapter: str, root: Path | None = None) -> Path:
    return (root or project_root()) / FOLDER / f"{chapter}.ipynb"


def colab_notebook(chapter: str, root: Path | None = None) -> str:
    """The text of `colab/<chapter>.ipynb`: the chapter's source as a notebook, its outputs
    empty, after a first cell that sets the book up on Colab."""
    import jupytext
    import nbformat

    root = root or project_root()
    notebook = jupytext.read(root / "notebooks" / f"{chapter}.md")
    setup = nbformat.v4.new_code_cell(
        SETUP.format(
            chapter=chapter,
            repository=python_literal(repository_url(root)),
            clone=json.dumps(CLONE),
        ),
        metadata={"tags": [SETUP_TAG]},
    )
    notebook.cells.insert(0, setup)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"  # stable ids: the file changes only when its source does
    notebook.metadata.pop("jupytext", None)
    return nbformat.writes(notebook) + "\n"  # validates it


def outdated(chapters: list[str], root: Path | None = None) -> list[str]:
    """The chapters whose `colab/<id>.ipynb` is missing or differs from its source's."""
    return [
        chapter
        for chapter in chapters
        if not colab_path(chapter, root).is_file()
        or colab_path(chapter, root).read_text() != colab_notebook(chapter, root)
    ]


def write(chapters: list[str], root: Path | None = None) -> list[Path]:
    """Write the Colab notebooks of `chapters` that are missing or out of date; returns them."""
    written = []
    for chapter in outdated(chapters, root):
        path = colab_path(chapter, root)
        path.parent.mkdir(exist_ok=True)
        path.write_text(colab_notebook(chapter, root))
        written.append(path)
    return written
