"""Every failure a user meets is one line with its documented exit code, never a traceback
(`implicit_bias.core.tools.failures`): each test here is a probe of a fault review that once
got a traceback, a wrong code or a misleading line. Cheap by design: the command line is
called in-process on the demo project, with the fault injected where a real one would strike
(a chapter run replaced by what it raised), so no chapter executes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from implicit_bias import __main__ as cli

ROOT = Path(__file__).resolve().parents[2]


def one_line(capsys, code: int, args: list[str]) -> str:
    """The command's stderr, checked to be one line (a traceback is not) for exit code `code`."""
    try:
        got = cli.main(args)
    except KeyboardInterrupt as escaped:  # else it would end the whole test session
        pytest.fail(f"{type(escaped).__name__} escaped the command line")
    err = capsys.readouterr().err.strip()
    assert got == code, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def fail_with(monkeypatch, module, name: str, error: BaseException) -> None:
    def raising(*args, **kwargs):
        raise error

    monkeypatch.setattr(module, name, raising)


# ---- stops: Ctrl-C and SIGTERM --------------------------------------------------------------


def test_sigterm_in_the_first_second_of_run_is_143_and_one_line(demo_project, monkeypatch, capsys):
    """SIGTERM while `run` imports and validates (before any chapter starts): it was `Stopped:
    15`, a traceback and exit 1."""
    from implicit_bias.core.tools.run_safety import Stopped

    fail_with(monkeypatch, cli, "custom_profiles", Stopped(signal.SIGTERM))
    err = one_line(capsys, 143, ["run", "demo", "--device", "cpu"])
    assert "SIGTERM" in err


@pytest.mark.parametrize("command", ["imports", "stale", "recompute"])
def test_ctrl_c_is_130_and_one_line(demo_project, monkeypatch, capsys, command):
    from implicit_bias.core.engine import paths, sweep
    from implicit_bias.core.tools import verify

    if command == "imports":  # the first thing `main` does after parsing: its imports
        fail_with(monkeypatch, paths, "export_results_root", KeyboardInterrupt())
        args = ["status"]
    elif command == "stale":
        fail_with(monkeypatch, sweep, "committed_entries", KeyboardInterrupt())
        args = ["stale"]
    else:
        monkeypatch.setattr(
            verify, "tolerances_file", lambda: ROOT / "data/tolerances/recompute.yaml"
        )
        fail_with(monkeypatch, verify, "cheapest_entries", KeyboardInterrupt())
        args = ["recompute"]
    assert "interrupted" in one_line(capsys, 130, args)


def test_ctrl_c_as_a_run_completes_says_its_results_were_kept(demo_project, monkeypatch, capsys):
    """Ctrl-C in the last moments of a run (its swap done, signals held): the line says the
    chapter completed and what was kept, not that nothing changed."""
    from implicit_bias.core.tools import runner

    summary = {"ok": True, "promoted": True, "claims": {}, "seconds": 3.0}
    fail_with(
        monkeypatch, runner, "run_chapter", runner.Interrupted("demo", summary, signal.SIGINT)
    )
    assert cli.main(["run", "demo", "--device", "cpu"]) == 130
    err = capsys.readouterr().err
    assert "demo completed and its results were kept" in err and "Traceback" not in err


# ---- the disk, the file system ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "said"),
    [(errno.EROFS, "read-only file system"), (errno.ENOENT, "no such file or folder")],
)
def test_an_unwritable_results_path_is_one_line(demo_project, monkeypatch, capsys, code, said):
    """Errno 30 (a read-only file system) and a results path that cannot be created."""
    from implicit_bias.core.tools import runner

    where = str(demo_project / "results/smoke")
    fail_with(monkeypatch, runner, "run_chapter", OSError(code, os.strerror(code), where))
    err = one_line(capsys, 2, ["run", "demo", "--device", "cpu"])
    assert said in err and "results/smoke" in err


def test_status_page_into_a_read_only_folder_is_one_line(demo_project, monkeypatch, capsys):
    from implicit_bias.core.site import status_page

    book = str(demo_project / "book/status.md")
    fail_with(
        monkeypatch, status_page, "write_status_page", OSError(errno.EROFS, "Read-only", book)
    )
    assert "read-only" in one_line(capsys, 2, ["status-page"])


def test_a_run_folder_that_is_a_file_is_one_line(demo_project, capsys):
    run = demo_project / "results/smoke/demo/.run"
    run.parent.mkdir(parents=True)
    run.write_text("")
    assert "a file of that name is in its place" in one_line(
        capsys, 2, ["run", "demo", "--device", "cpu"]
    )


def test_a_claims_file_that_is_a_folder_is_one_line(demo_project, capsys):
    claims = demo_project / "data/claims/demo.yaml"
    claims.unlink()
    claims.mkdir()
    err = one_line(capsys, 2, ["run", "demo", "--device", "cpu"])
    assert "data/claims/demo.yaml" in err and "folder" in err


def test_a_full_disk_names_the_folder_that_is_full_and_inodes_as_inodes(demo_project, monkeypatch):
    """The executed notebook goes to book/chapters, perhaps another disk than the results': the
    line named the results folder (76 GB free) for a full book/chapters; and an exhausted inode
    table read as a full disk with 52 MB free."""
    from implicit_bias.core.tools.run_safety import disk_full_message

    book = demo_project / "book/chapters"
    book.mkdir(parents=True)
    err = OSError(errno.ENOSPC, "No space left on device", str(book / "demo.ipynb"))
    message = disk_full_message(err, 10**6)
    assert "book/chapters" in message and "results" not in message.split(":")[0]

    class NoInodes:
        f_bavail, f_frsize, f_files, f_favail = 52_000, 1000, 10_000, 0

    monkeypatch.setattr(os, "statvfs", lambda path: NoInodes())
    assert "no inodes left" in disk_full_message(err, 10**6)


def test_new_chapter_on_a_full_disk_leaves_nothing_half_made(tmp_path, monkeypatch, capsys):
    """The files are written under temporary names (the package as one folder) and renamed in
    only when all are written: the 6th write failing left a package without its figures."""
    root = tmp_path / "project"
    for folder in ("lib/implicit_bias/chapters", "lib/implicit_bias/models", "notebooks", "tests"):
        (root / folder).mkdir(parents=True)
    for folder in ("data/claims", "data/profiles", "data/schemas/profiles"):
        (root / folder).mkdir(parents=True)
    (root / "book").mkdir()
    (root / "book/references.bib").write_text("@article{zhang2017understanding,\n}\n")
    (root / "_toc.yml").write_text("chapters:\n  - file: book/chapters/demo\n")
    before = {p: p.read_bytes() if p.is_file() else None for p in root.rglob("*")}
    monkeypatch.setenv("IMPLICIT_BIAS_ROOT", str(root))
    writes = []
    original = Path.write_text

    def filling(self, *args, **kwargs):
        writes.append(self)
        if len(writes) == 6:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", filling)
    err = one_line(capsys, 1, ["new-chapter", "toy_paper"])
    assert "is full" in err
    after = {p: p.read_bytes() if p.is_file() else None for p in root.rglob("*")}
    assert after == before


# ---- damaged or bad input files ---------------------------------------------------------------


@pytest.mark.parametrize("command", [["status"], ["status-page"]])
def test_a_damaged_claims_report_is_one_line(demo_project, capsys, command):
    """`make html` runs `status-page` first: it stops there, with this line."""
    report = demo_project / "results/smoke/claims/demo.json"
    report.parent.mkdir(parents=True)
    report.write_text('{"chapter": "demo", "claims": [')
    assert "results/smoke/claims/demo.json" in one_line(capsys, 2, command)


def test_a_damaged_run_record_under_compare_is_one_line(demo_project, tmp_path, capsys):
    record = tmp_path / "results/paper/demo/.run/last-run.json"
    record.parent.mkdir(parents=True)
    record.write_text("{x")
    results = str(tmp_path / "results")
    args = ["compare", "demo", "--reference", results, "--candidate", results]
    assert "last-run.json" in one_line(capsys, 2, args)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"default: {rtol: 1e-10, atol: -1}\n", "default: expected"),
        (b"functions:\n  f:\n    x: {rtol: lots, atol: 0}\n", "f: x: expected"),
        (b"functions: [1, 2]\n", "functions: expected"),
        (b"default: [1\n", "not YAML"),
        (b"default: \xff\xfe\n", "not UTF-8"),
    ],
)
def test_bad_recompute_tolerances_stop_before_the_recompute(
    demo_project, tmp_path, monkeypatch, capsys, text, said
):
    """Checked whole before anything is recomputed: a bad value was found only when the
    recompute (hours, at the paper profile) reached its task function."""
    from implicit_bias.core.tools import verify

    fail_with(monkeypatch, verify, "recompute", AssertionError("the recompute ran"))
    (tmp_path / "tol.yaml").write_bytes(text)
    err = one_line(capsys, 2, ["recompute", "--tolerances", str(tmp_path / "tol.yaml")])
    assert "tol.yaml" in err and said in err


def test_a_missing_default_tolerances_file_is_named(demo_project, capsys):
    err = one_line(capsys, 2, ["recompute"])
    assert "data/tolerances/recompute.yaml" in err


def test_recompute_json_into_a_missing_folder_stops_before_the_recompute(
    demo_project, tmp_path, monkeypatch, capsys
):
    from implicit_bias.core.tools import verify

    fail_with(monkeypatch, verify, "recompute", AssertionError("the recompute ran"))
    tolerances = str(ROOT / "data/tolerances/recompute.yaml")
    args = ["recompute", "--tolerances", tolerances, "--json", str(tmp_path / "no/report.json")]
    assert "--json" in one_line(capsys, 2, args)


@pytest.mark.parametrize("text", ["chapters: [\n", "chapters:\n  - file: [\n"])
def test_a_malformed_table_of_contents_is_one_line(demo_project, capsys, text):
    (demo_project / "_toc.yml").write_text(text)
    assert "_toc.yml" in one_line(capsys, 2, ["run"])


def test_run_with_no_chapter_found_says_so(demo_project, capsys):
    (demo_project / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    assert "no chapter to run" in one_line(capsys, 2, ["run"])


@pytest.mark.parametrize(
    "args", [["data", "mnits"], ["new-chapter", "Bad-Name"], ["new-chapter", "class"]]
)
def test_bad_names_for_data_and_new_chapter_exit_2(demo_project, capsys, args):
    one_line(capsys, 2, args)


# ---- what a run reports ---------------------------------------------------------------------


def test_bad_cache_entries_exit_2_naming_them_not_a_refresh(demo_project, monkeypatch, capsys):
    from implicit_bias.core.tools import runner

    entry = "results/smoke/demo/m/0a.json"
    summary = {
        "ok": False,
        "seconds": 1.0,
        "claims": None,
        "claims_ok": False,
        "tasks": {"computed": 0, "cached": 2, "failed": 0, "errors": []},
        "error": f"CacheEntryError: 1 cache entry not written by this code: delete them (rm "
        f"{entry}) and run the chapter again",
    }
    monkeypatch.setattr(runner, "run_chapter", lambda *args, **kwargs: summary)
    assert cli.main(["run", "demo", "--device", "cpu"]) == 2
    assert entry in capsys.readouterr().err


def test_a_killed_sweep_workers_cause_stays_in_the_error_line():
    """papermill's error text ends with the last line of the cell's traceback; a loky worker
    killed by the out-of-memory killer says `SIGKILL` in the lines before it."""
    from implicit_bias.core.tools.failures import error_line

    class CellError(Exception):
        ename = "TerminatedWorkerError"
        evalue = (
            "A worker process managed by the executor was unexpectedly terminated.\n\n"
            "The exit codes of the workers are {SIGKILL(-9)}"
        )

    line = error_line(CellError("...\nThe exit codes of the workers are {SIGKILL(-9)}"))
    assert line.startswith("TerminatedWorkerError: A worker process") and "SIGKILL" in line
    assert "\n" not in line


def _chapter_in_a_worker(chapter: str) -> dict:
    """Stands in for `run_chapter` in a `--jobs` worker: `killed` dies as the out-of-memory
    killer kills, `other` finishes after it."""
    if chapter == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    return {"ok": True, "chapter": chapter}


def test_a_killed_jobs_worker_names_its_chapter_and_the_others_finish():
    from implicit_bias.core.tools.jobs import run_jobs

    reported = {}
    run_jobs(
        2,
        ["killed", "other"],
        lambda chapter: (chapter,),
        reported.__setitem__,
        execute=_chapter_in_a_worker,
    )
    assert reported["other"] == {"ok": True, "chapter": "other"}
    killed = reported["killed"]
    assert not killed["ok"] and killed["worker_killed"]
    assert "running killed" in killed["error"] and "SIGKILL" in killed["error"]


# ---- the documentation of the codes, and the website build ------------------------------------


def test_the_exit_codes_are_documented_in_help_and_the_readme():
    from implicit_bias.core.tools.failures import EXIT_CODES

    help_text = cli.build_parser().format_help()
    readme = (ROOT / "README.md").read_text()
    for code, _ in EXIT_CODES:
        assert f"  {code} " in help_text.replace(f"  {code}   ", f"  {code} ")
        assert f"| {code} |" in readme, code


def test_a_killed_website_build_is_rebuilt_from_scratch(tmp_path):
    """A build killed midway left Sphinx's state half-written: the next build failed, the one
    after indexed only the pages it rebuilt. The wrapper of `make html` clears such a state."""
    from implicit_bias.core.tools.site_build import build_site

    killed = "mkdir -p _build/.doctrees && echo half > _build/.doctrees/environment.pickle"
    assert build_site(tmp_path, ["sh", "-c", killed + " && kill -9 $$"]) != 0
    fresh = "test ! -e _build/.doctrees/environment.pickle && " + killed
    assert build_site(tmp_path, ["sh", "-c", fresh]) == 0
    # a finished build is kept for the next, incremental one
    assert build_site(tmp_path, ["sh", "-c", "test -e _build/.doctrees/environment.pickle"]) == 0
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nhtml:", 1)[1].split("\n\n", 1)[0]
    assert "implicit_bias.core.tools.site_build" in recipe


def test_a_stop_while_the_kernel_starts_waits_until_it_is_tracked(monkeypatch):
    """SIGTERM while the kernel process started left it untracked: no shutdown, and its sockets
    made in /tmp after the run had removed its own. The stop now waits for the launch."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from implicit_bias.core.tools.run_safety import (
        KERNEL_LOG_ENV,
        Stopped,
        ipc_kernel_manager,
        take_sigterm_as_interrupt,
    )

    launched = []

    async def launch(self, command, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the process starts
        await asyncio.sleep(0.05)
        launched.append(command)
        return "the process"

    monkeypatch.setattr(AsyncKernelManager, "_async_launch_kernel", launch)
    monkeypatch.delenv(KERNEL_LOG_ENV, raising=False)
    previous = signal.getsignal(signal.SIGTERM)
    take_sigterm_as_interrupt()
    try:
        manager = ipc_kernel_manager()()
        with pytest.raises(Stopped):
            asyncio.run(manager._async_launch_kernel(["kernel"]))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert launched == [["kernel"]]


def test_the_command_line_answers_in_a_subprocess_too(demo_project):
    """`python -m implicit_bias` goes through the same guard (its `__main__` block)."""
    (demo_project / "_toc.yml").write_text("chapters: [\n")
    result = subprocess.run(
        [sys.executable, "-m", "implicit_bias", "run"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
