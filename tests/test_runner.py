import json
import subprocess
import sys

import pytest

from implicit_bias.chapter import Chapter, ProfileError, load_profile
from implicit_bias.device import resolve_device
from implicit_bias.runner import format_status, write_status_page


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "implicit_bias", *args], capture_output=True,
                          text=True, env=env)


@pytest.mark.parametrize("args,message", [
    (["run", "gln_norm", "--profile", "nonsense"], "valid: smoke, paper"),
    (["run", "no_such_chapter"], "unknown chapter 'no_such_chapter'; valid:"),
    (["run", "gln_norm", "--device", "tpu"], "valid devices"),
])
def test_cli_rejects_bad_arguments(args, message):
    result = cli(*args)
    assert result.returncode != 0
    assert message in result.stderr


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="valid values"):
        resolve_device("gpu")


def test_profiles_are_validated(demo_project):
    assert load_profile("demo", "smoke") == {"n": 50, "seed": 0}
    with pytest.raises(ProfileError, match="valid: smoke, paper"):
        load_profile("demo", "fast")
    path = demo_project / "data" / "profiles" / "demo.yaml"
    path.write_text("smoke: {n: 1}\npaper: {n: 2, extra: 3}\n")
    with pytest.raises(ProfileError, match="same keys"):
        load_profile("demo", "smoke")
    with pytest.raises(ValueError, match="unknown chapter"):
        Chapter("nope")


def test_sweep_workers_come_from_the_profile(demo_project):
    import os

    assert Chapter("demo", device="cpu").workers == 1  # no `workers` key: serial
    path = demo_project / "data" / "profiles" / "demo.yaml"
    path.write_text("smoke: {n: 1, workers: auto}\npaper: {n: 2, workers: 3}\n")
    assert Chapter("demo", device="cpu").workers == (os.cpu_count() or 1)
    assert Chapter("demo", "paper", device="cpu").workers == 3
    path.write_text("smoke: {n: 1, workers: 0}\npaper: {n: 2, workers: many}\n")
    for profile in ("smoke", "paper"):
        with pytest.raises(ProfileError, match="workers must be a positive integer"):
            _ = Chapter("demo", profile, device="cpu").workers


def test_demo_chapter_executes_end_to_end(demo_project):
    import os

    result = cli("run", "demo", "--profile", "smoke", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    executed = json.loads((demo_project / "book" / "chapters" / "demo.ipynb").read_text())
    tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
    assert any("injected-parameters" in t and "remove-cell" in t for t in tags)
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["ok"] and run["claims"] == {"known deviation": 1, "pass": 1}
    assert (demo_project / "results/smoke/figures/demo/moments.png").exists()
    assert "mean_is_small" in format_status()
    page = write_status_page().read_text()
    assert "known deviation" in page and "| demo | mean_is_small |" in page


def test_failing_chapter_exits_nonzero(demo_project):
    import os

    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(nb.read_text().replace("ch.check_claims(metrics)", "1 / 0"))
    result = cli("run", "demo", "--device", "cpu", env=dict(os.environ))
    assert result.returncode == 1
    assert "ZeroDivisionError" in result.stderr
