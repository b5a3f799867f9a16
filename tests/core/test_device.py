"""One device rule: every task receives its device; `cpu` is honoured on a GPU host; `auto`
means CUDA when available, in every chapter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from implicit_bias.core.engine.device import resolve_device

LIB = Path(__file__).resolve().parents[2] / "lib" / "implicit_bias"


@pytest.fixture
def gpu_host(monkeypatch):
    """Pretend CUDA is present: any code that then moves data to CUDA fails here (this torch
    is a CPU build), so a test passes only if `cpu` is honoured."""
    import implicit_bias.core.chapter as chapter

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(chapter, "gpu_driver_present", lambda: True)


def test_auto_means_cuda_when_available(gpu_host):
    assert resolve_device("auto").type == "cuda"
    assert resolve_device("cpu").type == "cpu"


def test_only_the_device_module_asks_whether_cuda_is_available():
    callers = []
    for path in sorted(LIB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "is_available":
                callers.append(f"{path.name}:{node.lineno}")
    assert callers and all(c.startswith("device.py:") for c in callers), callers


def test_chapter_gives_every_task_its_device(gpu_host, demo_project, tmp_path):
    from implicit_bias.core.chapter import Chapter
    from sweep_tasks import square

    ch = Chapter("demo", device="cpu")
    assert ch.device.type == "cpu"
    results = ch.sweep(square, [{"x": 2}, {"x": 3, "device": "cuda"}], name="t")
    assert [r["device"] for r in results] == ["cpu", "cpu"]
    assert ch.outcomes[0].computed == 2


def test_gln_fast_solvers_honour_cpu_on_a_gpu_host(gpu_host):
    from implicit_bias.models import gln_svm

    rng = torch.Generator().manual_seed(0)
    X = torch.randn(12, 5, generator=rng, dtype=torch.float64).numpy()
    y = torch.sign(torch.randn(12, generator=rng, dtype=torch.float64)).numpy()
    contexts = (X[:, :2] > 0).astype(int)
    result = gln_svm.solve_program("SVM-GLN", X, y, contexts, 2, solver="fast", device="cpu")
    assert result.status == "optimal"


def test_gln_tasks_run_on_the_device_they_are_given(gpu_host):
    from implicit_bias.chapters.gln_norm import tasks as gln_tasks

    task = {
        "method": "SVM-GLN",
        "H": 2,
        "C": 2,
        "N": 60,
        "median_init": False,
        "seeds": [0],
        "n_val": 50,
        "solver": "fast",
        "device": "cpu",
    }
    result = gln_tasks.svm_task(task)
    assert result["solver_status"] == ["optimal"]


def test_device_names_match_resolve_device_and_reject_what_it_rejects(gpu_host):
    from implicit_bias.core.chapter import device_name

    for request in ("cpu", " CPU ", "auto", "cuda", "cuda:1", torch.device("cpu")):
        assert device_name(request) == str(resolve_device(request))
    with pytest.raises(ValueError, match="unknown device"):
        device_name("tpu")


CPU_CHAPTER = """
import sys
from implicit_bias.core.chapter import Chapter
ch = Chapter("demo", device="cpu")
assert "torch" not in sys.modules, "a CPU chapter that needs no torch imported it"
assert ch.device_name == "cpu" and ch.describe_device() == "CPU"
import torch
drawn = torch.rand(4)
torch.manual_seed(0)
assert torch.equal(drawn, torch.rand(4)), "torch was not seeded when it was imported"
assert ch.device == torch.device("cpu") and ch.describe_device().startswith("CPU (")
print("ok")
"""


def test_a_cpu_chapter_imports_torch_only_when_used_and_seeds_it_then(demo_project):
    """Torch's import is 2 CPU-s of every run of a chapter that computes with numpy alone (the
    suite's demo chapter runs about 45 times); its promise, torch seeded, holds on import."""
    import subprocess
    import sys

    def run(script):
        return subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, cwd=demo_project
        )

    result = run(CPU_CHAPTER)
    assert result.stdout.strip() == "ok", result.stderr[-2000:]
    # the check can fail: without the Chapter's hook torch is imported unseeded
    no_hook = CPU_CHAPTER.replace(
        "ch = Chapter(",
        "import implicit_bias.core.chapter as c\n"
        "c.seed_torch_when_imported = lambda seed: None\nch = c.Chapter(",
    )
    assert "torch was not seeded" in run(no_hook).stderr


AUTO_CHAPTER = """
import sys
import implicit_bias.core.chapter as c
{patch}
ch = c.Chapter("demo", device="auto")
print(ch.device_name, "torch" in sys.modules)
"""


def test_auto_on_a_machine_without_a_gpu_driver_is_the_cpu_without_torch(demo_project):
    """`auto` where no GPU driver node exists: the CPU, named without the 2-3 s torch import
    (every runner and kernel of a CPU machine); where a driver is present torch is asked."""
    import subprocess
    import sys

    def run(patch):
        return subprocess.run(
            [sys.executable, "-c", AUTO_CHAPTER.format(patch=patch)],
            capture_output=True,
            text=True,
            cwd=demo_project,
        )

    from implicit_bias.core.chapter import gpu_driver_present

    if gpu_driver_present():
        pytest.skip("this machine has a GPU driver")
    assert run("").stdout.split() == ["cpu", "False"]
    asked = run("c.gpu_driver_present = lambda: True").stdout.split()
    assert asked == [str(resolve_device("auto")), "True"]  # can fail: torch answers here
