"""`colab/<id>.ipynb`, the chapters as Colab opens them (implicit_bias.core.site.colab): one per
chapter, each its source's cells after a setup cell, and none out of date."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import jupytext
import pytest
import yaml

from implicit_bias.core.chapter import chapters
from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.site import colab

ROOT = project_root()


def test_every_chapter_has_its_colab_notebook_and_none_is_out_of_date():
    assert sorted(p.stem for p in (ROOT / colab.FOLDER).glob("*.ipynb")) == sorted(chapters())
    assert colab.outdated(chapters()) == [], "run `make colab` and commit colab/"


def test_a_colab_notebook_is_its_source_after_a_setup_cell():
    chapter = chapters()[0]
    notebook = json.loads(colab.colab_path(chapter).read_text())
    source = jupytext.read(ROOT / "notebooks" / f"{chapter}.md")
    setup, *cells = notebook["cells"]
    assert setup["metadata"]["tags"] == [colab.SETUP_TAG]
    assert [("".join(c["source"]), c["cell_type"]) for c in cells] == [
        (c.source, c.cell_type) for c in source.cells
    ]
    assert [c["metadata"].get("tags") for c in cells] == [
        c.metadata.get("tags") for c in source.cells
    ]  # the papermill parameters cell stays tagged
    assert all(not c.get("outputs") for c in notebook["cells"])
    code = "".join(setup["source"])
    ast.parse(code)  # plain Python: no shell magics that only IPython reads
    # the address of _config.yml, or None while it is empty (core.site.repository)
    assert f"REPOSITORY = {colab.python_literal(colab.repository_url())}  #" in code


def test_editing_a_chapter_source_makes_its_colab_notebook_out_of_date(tmp_path):
    chapter = chapters()[0]
    for name in ("_config.yml", f"notebooks/{chapter}.md", f"colab/{chapter}.ipynb"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    assert colab.outdated([chapter], tmp_path) == []
    source = tmp_path / "notebooks" / f"{chapter}.md"
    source.write_text(source.read_text() + "\nOne more sentence.\n")
    assert colab.outdated([chapter], tmp_path) == [chapter]
    assert colab.write([chapter], tmp_path) == [colab.colab_path(chapter, tmp_path)]
    assert colab.outdated([chapter], tmp_path) == [] and colab.write([chapter], tmp_path) == []
    config = tmp_path / "_config.yml"  # a new repository address is a new setup cell
    settings = yaml.safe_load(config.read_text())
    settings["repository"]["url"] = "https://github.com/someone-else/implicit-bias-book"
    config.write_text(yaml.safe_dump(settings))
    assert colab.outdated([chapter], tmp_path) == [chapter]
    colab.colab_path(chapter, tmp_path).unlink()
    assert colab.outdated([chapter], tmp_path) == [chapter]


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["--check"], 0, ""),
        (["no_such_chapter", "--check"], 2, "unknown chapter 'no_such_chapter'"),
    ],
)
def test_the_colab_command(args, code, says):
    done = subprocess.run(
        [sys.executable, "-m", "implicit_bias", "colab", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stderr
