"""Faults a user meets, each once found to fail: two runs of one chapter, a malformed claims
file, a read-only results folder, a typo in a chapter name, Ctrl-C, a missing tolerances file,
a run into another results folder, and results written only for their owner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from implicit_bias.core.engine.paths import RUN_ID_ENV, run_log_path
from implicit_bias.core.tools.runner import ChapterLock


def cli(*args, env=None, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", *args],
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        **kwargs,
    )


def test_each_run_counts_in_its_own_folder(demo_project, monkeypatch):
    monkeypatch.setenv(RUN_ID_ENV, "aaa")
    first = run_log_path("smoke", "demo")
    monkeypatch.setenv(RUN_ID_ENV, "bbb")
    assert run_log_path("smoke", "demo") != first and first.parent.name == "aaa"


def test_a_run_does_not_prune_while_another_run_holds_the_chapter(demo_project):
    assert cli("run", "demo", "--device", "cpu").returncode == 0
    folder = demo_project / "results/smoke/demo/moments"
    orphan = folder / ("0" * 64 + ".json")
    orphan.write_text("{}")
    with ChapterLock(demo_project / "results/smoke/demo/.run"):  # another run in progress
        result = cli("run", "demo", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert orphan.exists()  # kept: the other run may be using it
    run = json.loads((demo_project / "results/smoke/demo/.run/last-run.json").read_text())
    assert run["pruned_entries"] == 0 and "another run" in run["not_pruned"]
    assert not list((demo_project / "results/smoke/demo/.run").glob("*/sweeps.json"))
    assert cli("run", "demo", "--device", "cpu").returncode == 0  # alone again: pruned
    assert not orphan.exists()


def test_a_malformed_claims_file_touches_no_result(demo_project):
    assert cli("run", "demo", "--profile", "paper", "--device", "cpu").returncode == 0
    report = demo_project / "results/paper/claims/demo.json"
    record = demo_project / "results/paper/demo/run.json"
    before = report.read_text(), record.read_text()
    claims = demo_project / "data/claims/demo.yaml"
    claims.write_text(claims.read_text().replace('expect: "< 0.5"', 'expect: "< lots"'))
    result = cli("run", "demo", "--profile", "paper", "--device", "cpu")
    assert result.returncode == 2 and "cannot read '< lots'" in result.stderr
    assert (report.read_text(), record.read_text()) == before


def test_a_failed_paper_run_keeps_the_committed_results(demo_project):
    assert cli("run", "demo", "--profile", "paper", "--device", "cpu").returncode == 0
    report = demo_project / "results/paper/claims/demo.json"
    record = demo_project / "results/paper/demo/run.json"
    before = report.read_text(), record.read_text()
    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(
        nb.read_text().replace("ch.check_claims(metrics)", "ch.check_claims(metrics); 1 / 0")
    )
    result = cli("run", "demo", "--profile", "paper", "--device", "cpu")
    assert result.returncode == 1 and "ZeroDivisionError" in result.stderr
    assert (report.read_text(), record.read_text()) == before
    failed = json.loads((demo_project / "results/paper/demo/.run/last-failed-run.json").read_text())
    assert not failed["ok"] and "ZeroDivisionError" in failed["error"]


def test_a_read_only_results_folder_gives_a_message(demo_project, monkeypatch, capsys):
    from implicit_bias import __main__ as cli_main
    from implicit_bias.core.tools import runner

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(demo_project / "results/smoke"))

    monkeypatch.setattr(runner, "run_chapter", read_only)
    assert cli_main.main(["run", "demo", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "permission denied" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["stale", "untied_diag"],
        ["recompute", "untied_diag"],
        ["compare", "untied_diag", "--candidate", "results"],
        ["compare", "--candidate", "results", "--tolerances", "no/such/file.yaml"],
        ["recompute", "--tolerances", "no/such/file.yaml"],
    ],
)
def test_bad_names_and_files_are_errors_not_tracebacks(args):
    result = cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "error:" in result.stderr and "Traceback" not in result.stderr


# A kernel that dies of the signal (as one sometimes does when Ctrl-C reaches it between two
# cells) made nbclient's logger and asyncio print "Kernel died" and a traceback (CI, 2026-11-26).
KERNEL_DIES_ON_SIGINT = (
    "    import os, signal, time\n"
    "    signal.signal(signal.SIGINT, lambda *_: os._exit(1))\n"
    "    time.sleep(60)\n"
)


def _demo_run_inside_a_task(demo_project, wait: str):
    """Start `run demo` in a session of its own whose first task runs `wait` (source lines)
    before computing; return the process and the chapter's run folder once a task runs."""
    tasks = demo_project / "tests_demo_tasks.py"
    tasks.write_text(tasks.read_text().replace("    x = np", wait + "    x = np"))
    # The run takes Ctrl-C as a terminal's foreground command does, also where the test session
    # itself ignores SIGINT (started in the background by a shell without job control, such as
    # `(make test &)`, whose children all inherit the ignored signal).
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "implicit_bias", "run", "demo", "--device", "cpu"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    run_folder = demo_project / "results/smoke/demo/.run"
    deadline = time.time() + 60
    while time.time() < deadline and not list(run_folder.glob("*/progress.json")):
        time.sleep(0.2)
    time.sleep(1.0)
    return proc, run_folder


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc: pgrep is not on every machine)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize(
    ("group", "kernel_dies"),
    [(False, False), (True, False), (True, True)],
    ids=["parent", "process-group", "process-group-kernel-dies"],
)
def test_ctrl_c_is_one_line_and_leaves_no_partial_notebook(demo_project, group, kernel_dies):
    """Ctrl-C in a terminal reaches the whole process group (the kernel and sweep workers
    too); a signal to the runner alone is what `kill -INT` sends."""
    wait = KERNEL_DIES_ON_SIGINT if kernel_dies else "    import time\n    time.sleep(60)\n"
    proc, run_folder = _demo_run_inside_a_task(demo_project, wait)
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted in demo" in err and "Traceback" not in err, err
    assert not list(run_folder.rglob("partial.ipynb"))
    record = json.loads((run_folder / "last-failed-run.json").read_text())
    assert record["error"] == "interrupted (Ctrl-C)"


def test_a_kernel_that_dies_is_one_clear_error(demo_project):
    """The kernel killed under a running cell: the run fails with the error and where the
    failed notebook is, without the kernel-driving libraries' own log lines."""
    proc, run_folder = _demo_run_inside_a_task(demo_project, KERNEL_DIES_ON_SIGINT)
    kernels = _children(proc.pid)
    assert kernels, "no kernel process found under the runner"
    for pid in kernels:
        os.kill(pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "DeadKernelError" in err and "failed.ipynb" in err, err
    assert "Kernel died while waiting" not in err and "Traceback" not in err, err
    assert "Kernel died" in (run_folder / "kernel.log").read_text()


def test_runs_into_another_results_folder_do_not_publish_into_the_book(demo_project, tmp_path):
    env = {**os.environ, "IMPLICIT_BIAS_RESULTS": str(tmp_path / "elsewhere")}
    result = cli("run", "demo", "--device", "cpu", env=env)
    assert result.returncode == 0, result.stderr
    assert not (demo_project / "book" / "chapters" / "demo.ipynb").exists()
    assert (tmp_path / "elsewhere" / "book" / "demo.ipynb").exists()


def test_results_are_written_with_the_users_umask(demo_project):
    result = subprocess.run(
        ["sh", "-c", f"umask 022 && {sys.executable} -m implicit_bias run demo --device cpu"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    written = [
        demo_project / "results/smoke/claims/demo.json",
        demo_project / "results/smoke/demo/run.json",
        *sorted((demo_project / "results/smoke/demo/moments").glob("*.json")),
    ]
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {"0o644"}
