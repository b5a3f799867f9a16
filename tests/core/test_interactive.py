"""A chapter source run outside the runner, as in JupyterLab (nbclient on the jupytext
notebook, the kernel started in the project root), gives the runner's claims."""

from __future__ import annotations

import json

import jupytext
import nbformat
from nbclient import NotebookClient


def claims_of(project) -> dict:
    report = json.loads((project / "results/smoke/claims/demo.json").read_text())
    return {row["id"]: (row["value"], row["status"]) for row in report["claims"]}


def test_a_chapter_executed_outside_the_runner_gives_the_runners_claims(ran_demo):
    demo_project = ran_demo("smoke")
    by_runner = claims_of(demo_project)
    (demo_project / "results/smoke/claims/demo.json").unlink()

    notebook = jupytext.read(demo_project / "notebooks" / "demo.md")
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(demo_project)}},
    ).execute()
    assert claims_of(demo_project) == by_runner
    outputs = [o for c in notebook.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    nbformat.validate(notebook)
