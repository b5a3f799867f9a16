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

from implicit_bias.core.engine.paths import CLAIMS_ONLY_ENV, RESULTS_ENV, RUN_ID_ENV, run_log_path
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


def test_a_run_does_not_prune_while_another_run_holds_the_chapter(ran_demo):
    demo_project = ran_demo("smoke")
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


def test_a_malformed_claims_file_touches_no_result(ran_demo):
    demo_project = ran_demo("paper")
    report = demo_project / "results/paper/claims/demo.json"
    record = demo_project / "results/paper/demo/run.json"
    before = report.read_text(), record.read_text()
    claims = demo_project / "data/claims/demo.yaml"
    claims.write_text(claims.read_text().replace('expect: "< 0.5"', 'expect: "< lots"'))
    result = cli("run", "demo", "--profile", "paper", "--device", "cpu")
    assert result.returncode == 2 and "cannot read '< lots'" in result.stderr
    assert (report.read_text(), record.read_text()) == before


def test_a_failed_paper_run_keeps_the_committed_results(ran_demo):
    demo_project = ran_demo("paper")
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


# ---- nothing lost, whatever happens to a run ---------------------------------------------


def committed(root: Path) -> dict[str, bytes]:
    """Every file of `root/results/paper` that a commit would hold (not the run folders, task
    locks or temporary files, which the repository ignores), with its bytes."""
    base = root / "results" / "paper"
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
        and not {".run", ".locks"} & set(p.relative_to(base).parts)
        and not (p.name.startswith(".") and p.name.endswith(".tmp"))
    }


def paper_run(*extra, env=None, **kwargs):
    return cli("run", "demo", "--profile", "paper", "--device", "cpu", *extra, env=env, **kwargs)


def _pausing_notebook(root: Path, chapter: str = "demo") -> str:
    """Make the chapter pause for a minute after its sweep; returns the original source."""
    nb = root / "notebooks" / f"{chapter}.md"
    source = nb.read_text()
    end = '                   name="moments")\n'
    assert end in source
    nb.write_text(source.replace(end, end + '__import__("time").sleep(60)\n'))
    return source


def _start(args, env=None) -> subprocess.Popen:
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # see _demo_run_inside_a_task
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "implicit_bias", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or dict(os.environ),
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for(pattern_root: Path, pattern: str, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not list(pattern_root.glob(pattern)):
        time.sleep(0.2)
    assert list(pattern_root.glob(pattern)), f"nothing matched {pattern} in {pattern_root}"


def _run_sockets(run_folder: Path) -> list[Path]:
    """The kernel socket files of the runs whose folders were under `run_folder`."""
    import tempfile

    ids = [p.name for p in run_folder.iterdir() if p.is_dir()] if run_folder.is_dir() else []
    return [s for i in ids for s in Path(tempfile.gettempdir()).glob(f"ib-kernel-{i}-*")]


def _add_second_chapter(root: Path) -> None:
    """A copy of the demo chapter as `demo2` (for `run --jobs 2`)."""
    nb = (root / "notebooks" / "demo.md").read_text()
    (root / "notebooks" / "demo2.md").write_text(nb.replace('Chapter("demo"', 'Chapter("demo2"'))
    for kind in ("claims", "profiles"):
        text = (root / "data" / kind / "demo.yaml").read_text()
        (root / "data" / kind / "demo2.yaml").write_text(text)
    toc = root / "_toc.yml"
    toc.write_text(toc.read_text() + "  - file: book/chapters/demo2\n")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "ctrl-c-jobs-2"])
def test_committed_results_stay_put_during_a_run_and_after_it_is_stopped(
    demo_project, ran_demo, how
):
    """A paper run never moves, deletes or rewrites committed results while it goes (the
    claims report was moved into the run folder for the whole run) and, stopped any way,
    leaves them as they were: SIGTERM like Ctrl-C (its own exit code, one line, a record, no
    partial notebook, no kernel socket); SIGKILL leaves a run folder that the next run of the
    chapter removes; Ctrl-C with `--jobs 2` stops both chapters the same way."""
    chapters = ["demo"]
    if how == "ctrl-c-jobs-2":
        _add_second_chapter(demo_project)
        chapters.append("demo2")
        first = cli("run", *chapters, "--profile", "paper", "--device", "cpu", "--jobs", "2")
        assert first.returncode == 0, first.stderr
    else:  # demo alone, as its first paper run left it (`--jobs 2` runs one chapter as 1)
        ran_demo("paper")
    before = committed(demo_project)
    assert "claims/demo.json" in before and "demo/run.json" in before
    assert "figures/demo/moments.png" in before
    sources = {c: _pausing_notebook(demo_project, c) for c in chapters}
    proc = _start(["run", *chapters, "--profile", "paper", "--device", "cpu", "--jobs", "2"])
    runs = demo_project / "results/paper/demo/.run"
    _wait_for(runs, "*/progress.json")
    time.sleep(2.0)  # in the pause, after the sweep
    assert committed(demo_project) == before  # nothing moved aside while the run goes
    sockets = _run_sockets(runs)
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    elif how == "SIGKILL":
        proc.kill()
    else:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    assert committed(demo_project) == before
    if how == "SIGKILL":
        assert [p for p in runs.iterdir() if p.is_dir()]  # the dead run's folder is left
        for chapter, source in sources.items():
            (demo_project / "notebooks" / f"{chapter}.md").write_text(source)
        again = paper_run()
        assert again.returncode == 0, again.stderr
        assert not [p for p in runs.iterdir() if p.is_dir()]
        assert not [p for p in runs.iterdir() if p.suffix == ".lock" and p.name != ".run.lock"]
        assert committed(demo_project) == before  # rendered again: nothing changed
        return
    expected = 143 if how == "SIGTERM" else 130
    assert proc.returncode == expected, err
    assert "Traceback" not in err and len([x for x in err.splitlines() if x.strip()]) == 1, err
    for chapter in chapters:
        run_folder = demo_project / f"results/paper/{chapter}/.run"
        record = json.loads((run_folder / "last-failed-run.json").read_text())
        assert record["error"].startswith("interrupted") and not record["ok"]
        assert not list(run_folder.rglob("partial.ipynb"))
        assert not [p for p in run_folder.iterdir() if p.is_dir()]
    assert sockets and not [s for s in sockets if s.exists()]


def test_a_claim_whose_metric_is_missing_rewrites_no_committed_record(ran_demo):
    """A typo in a claims file (an unknown metric) fails the run and changes nothing; once it
    is fixed, rendering again from the cache leaves the records as committed."""
    demo_project = ran_demo("paper")
    before = committed(demo_project)
    claims = demo_project / "data/claims/demo.yaml"
    good = claims.read_text()
    claims.write_text(good.replace("metric: abs_mean", "metric: abs_meen"))
    result = paper_run()
    assert result.returncode == 1 and "mean_is_small: missing metric" in result.stderr
    assert "left as they were" in result.stderr
    assert committed(demo_project) == before
    claims.write_text(good)
    assert paper_run().returncode == 0
    assert committed(demo_project) == before


def test_save_figure_never_leaves_a_partial_file(demo_project):
    """A figure written again over a committed one, stopped half-way (a full disk): the old
    file stays whole (the PNG was written straight to its final path, and a committed figure
    was once left without its IEND chunk)."""
    import errno

    import pandas as pd
    from matplotlib.figure import Figure

    from implicit_bias.core.site.plotting import figure, save_figure

    frame = pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    fig, ax = figure()
    ax.plot(frame["x"], frame["y"])
    png = save_figure(fig, "demo", "fig", frame, "paper")
    files = {p: p.read_bytes() for p in png.parent.iterdir()}
    real = Figure.savefig

    def half_then_full(self, fname, *args, **kwargs):
        real(self, fname, *args, **kwargs)
        data = Path(fname).read_bytes()
        Path(fname).write_bytes(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    Figure.savefig = half_then_full
    try:
        with pytest.raises(OSError):
            save_figure(fig, "demo", "fig", frame * 2, "paper")
    finally:
        Figure.savefig = real
    assert {p: p.read_bytes() for p in png.parent.iterdir()} == {
        **files,
        png.with_suffix(".csv"): (frame * 2).to_csv(index=False, float_format="%.10g").encode(),
    }


def _can_mount_tmpfs() -> bool:
    import shutil

    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_full_disk_is_one_line_and_truncates_nothing(demo_project, tmp_path):
    """The results on a small tmpfs, filled up by the chapter itself before it saves its
    figure: one line naming the folder and the space a run needs, no traceback, and no file
    under a final name cut short (the figure's CSV was)."""
    if not _can_mount_tmpfs():
        pytest.skip("no tmpfs mount in a user namespace here (unshare -rm)")
    nb = demo_project / "notebooks" / "demo.md"
    nb.write_text(
        nb.read_text().replace(
            'ch.save_figure(fig, "moments", frame)',
            "ballast = open(ch.results_dir / 'ballast', 'wb')\n"
            "try:\n"
            "    while True:\n"
            "        ballast.write(bytes(1 << 16)); ballast.flush()\n"
            "except OSError:\n"
            "    pass\n"
            'ch.save_figure(fig, "moments", frame)',
        )
    )
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**os.environ, "IMPLICIT_BIAS_RESULTS": str(disk)}
    # the run, then (in the same mount namespace, before the tmpfs goes) a look at its files
    script = 'mount -t tmpfs -o size=2m tmpfs "$0" && "$@"; rc=$?; "$1" -c "$CHECK" "$0"; exit $rc'
    run = [sys.executable, "-m", "implicit_bias", "run", "demo", "--device", "cpu"]
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, str(disk), *run],
        capture_output=True,
        text=True,
        env={**env, "CHECK": CHECK_FILES},
    )
    assert result.returncode == 1, result.stderr
    err = result.stderr
    assert "Traceback" not in err and "NotJSONError" not in err, err
    full = [line for line in err.splitlines() if "no space left on device" in line]
    assert len(full) == 1 and "MB" in full[0] and str(disk) in full[0], err
    checked = json.loads(result.stdout.strip().splitlines()[-1])
    assert checked["files"] and not checked["problems"], checked


# Lists what is cut short among the files under a results folder (argv[1]): a PNG without its
# IEND chunk, JSON that does not parse, an empty or unreadable CSV (temporary files and the
# test's ballast aside); prints {"files": n, "problems": [...]} as JSON.
CHECK_FILES = """
import json, pathlib, sys
import pandas as pd
files, problems = 0, []
for p in pathlib.Path(sys.argv[1]).rglob('*'):
    if not p.is_file() or p.name == 'ballast' or p.name.endswith('.tmp') or p.suffix == '.lock':
        continue
    files += 1
    try:
        if p.suffix == '.png' and not p.read_bytes().endswith(b'IEND\\xaeB`\\x82'):
            problems.append(f'{p}: no IEND')
        elif p.suffix in ('.json', '.ipynb'):
            json.loads(p.read_text())
        elif p.suffix == '.csv' and pd.read_csv(p).empty:
            problems.append(f'{p}: no rows')
    except Exception as err:
        problems.append(f'{p}: {type(err).__name__}')
print(json.dumps({'files': files, 'problems': problems}))
"""


# ---- inputs checked before work starts -----------------------------------------------------


@pytest.mark.parametrize("setting", ["gf_eta=.nan", "gf_eta=.inf", "regime_alphas=[.nan]"])
def test_non_finite_numbers_are_not_positive_numbers(setting):
    """NaN passes every comparison's negation, so `exclusiveMinimum: 0` let it through (a run
    of 47 s then failed elsewhere)."""
    from implicit_bias.core.engine.overrides import custom_profile
    from implicit_bias.core.engine.profiles import ProfileError

    with pytest.raises(ProfileError, match="must be a positive number"):
        custom_profile("warped_imd", "smoke", [setting])


@pytest.fixture
def demo_chapter(demo_project, monkeypatch):
    """The demo chapter set up in this process, with a task module that fails on seed 1."""
    (demo_project / "fault_tasks.py").write_text(
        "def moments_or_error(task):\n"
        "    if task['seed'] == 1:\n"
        "        raise ValueError('n is too large')\n"
        "    return {'mean': 0.1 * task['seed'], 'cases': [task['seed']]}\n"
    )
    from implicit_bias.core.chapter import Chapter

    return Chapter("demo", profile="smoke", device="cpu")


def test_a_failed_task_is_reported_as_failed_not_as_a_bad_cache_entry(demo_chapter):
    from fault_tasks import moments_or_error

    from implicit_bias.core.engine.sweep import TaskFailed

    results = demo_chapter.sweep(moments_or_error, [{"seed": s} for s in range(3)], name="m")
    assert results[0]["cases"] == [0]
    with pytest.raises(TaskFailed) as err:
        results[1]["cases"]
    message = str(err.value)
    assert "{'seed': 1}" in message and "ValueError: n is too large" in message
    assert "cache entry" not in message and "refresh" not in message


def _tamper(path: Path, **result) -> None:
    """Change an entry's result and recompute its checksum (a valid entry of another shape)."""
    from implicit_bias.core.engine.sweep import _checksum

    entry = json.loads(path.read_text())
    entry["result"].update(result)
    entry["checksum"] = _checksum(entry)
    path.write_text(json.dumps(entry))


def test_a_wrong_typed_cache_entry_is_named_with_its_narrow_command(demo_chapter):
    from fault_tasks import moments_or_error

    from implicit_bias.core.engine.sweep import CacheEntryError, task_hash

    tasks = [{"seed": s} for s in (0, 2, 3)]
    demo_chapter.sweep(moments_or_error, tasks, name="m")
    entry = demo_chapter.results_dir / "m" / f"{task_hash({**tasks[1], 'device': 'cpu'})}.json"
    _tamper(entry, cases=42)
    with pytest.raises(CacheEntryError) as err:
        demo_chapter.sweep(moments_or_error, tasks, name="m")
    message = str(err.value)
    assert entry.name in message and "'cases'" in message and "a number" in message
    # delete the named entries and run again: not --refresh, which computes every entry again
    assert "rm " in message and entry.name in message.split("rm ", 1)[1]
    assert "python -m implicit_bias run demo --profile smoke" in message
    assert "refresh" not in message


def test_a_cache_entry_that_is_a_folder_is_named(demo_chapter):
    from fault_tasks import moments_or_error

    from implicit_bias.core.engine.sweep import CacheEntryError, task_hash
    from implicit_bias.core.tools.runner import cached_task_seconds

    task = {"seed": 0}
    folder = demo_chapter.results_dir / "m" / f"{task_hash({**task, 'device': 'cpu'})}.json"
    folder.mkdir(parents=True)
    assert cached_task_seconds(demo_chapter.results_dir) == 0.0  # was IsADirectoryError
    with pytest.raises(CacheEntryError, match="is a folder, not a result: remove it"):
        demo_chapter.sweep(moments_or_error, [task], name="m")


def test_a_relative_results_folder_means_the_callers(demo_project, tmp_path):
    """Set relative, from another directory: the kernel (which runs in the project root) got
    the relative path and failed with FileNotFoundError."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "IMPLICIT_BIAS_RESULTS": "mine"}
    result = cli("run", "demo", "--device", "cpu", env=env, cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert (elsewhere / "mine/smoke/claims/demo.json").is_file()
    assert not (demo_project / "mine").exists()


def test_a_results_path_that_is_a_file_is_an_error(demo_project, tmp_path, monkeypatch, capsys):
    from implicit_bias import __main__ as cli_main

    (tmp_path / "file").write_text("")
    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "file"))
    assert cli_main.main(["run", "demo", "--device", "cpu"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: [1\n", "not valid YAML"),
        ("- 1\n", "expected a mapping"),
        ("demo:\n  m:\n    rtol: abc\n", "got 'abc'"),
    ],
)
def test_a_malformed_tolerances_file_is_one_line(demo_project, tmp_path, capsys, text, said):
    from implicit_bias import __main__ as cli_main

    (tmp_path / "tol.yaml").write_text(text)
    (tmp_path / "results/paper").mkdir(parents=True)
    args = ["compare", "--candidate", str(tmp_path / "results"), "--tolerances"]
    assert cli_main.main([*args, str(tmp_path / "tol.yaml")]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


def test_status_page_of_another_results_folder_goes_beside_it(demo_project, tmp_path, monkeypatch):
    from implicit_bias import __main__ as cli_main

    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "other"))
    assert cli_main.main(["status-page"]) == 0
    assert (tmp_path / "other/status.md").is_file()
    assert not (demo_project / "book/status.md").exists()


def test_stale_with_nothing_to_check_says_so(demo_project, tmp_path, monkeypatch, capsys):
    from implicit_bias import __main__ as cli_main

    monkeypatch.setenv("IMPLICIT_BIAS_RESULTS", str(tmp_path / "empty"))
    assert cli_main.main(["stale"]) == 2
    assert "nothing to check" in capsys.readouterr().err


def test_recompute_names_an_unknown_task_function(capsys):
    from implicit_bias import __main__ as cli_main

    assert cli_main.main(["recompute", "--functions", "no_such_fn"]) == 2
    err = capsys.readouterr().err
    assert "no task function no_such_fn" in err and "gd_task" in err


def test_a_broken_profiles_file_stops_before_a_kernel_starts(demo_project, capsys):
    from implicit_bias import __main__ as cli_main

    (demo_project / "data/profiles/demo.yaml").write_text("smoke: [1\n")
    assert cli_main.main(["run", "demo", "--device", "cpu"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert not (demo_project / "results").exists()


def test_a_chapter_id_cannot_be_a_python_keyword(tmp_path):
    from implicit_bias.core.tools.scaffold import ScaffoldError, new_chapter

    with pytest.raises(ScaffoldError, match="Python keyword"):
        new_chapter("lambda", root=tmp_path)


def test_a_long_value_is_not_echoed_whole(capsys):
    from implicit_bias import __main__ as cli_main

    seeds = "[" + ",".join(map(str, range(20000))) + "]"
    for setting in (f"seedz={seeds}", f"seeds={seeds[:-1]}"):
        assert cli_main.main(["run", "warped_imd", "--set", setting, "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert "error:" in err and len(err) < 1000


def test_a_claims_only_run_draws_no_figure_and_never_into_the_books_results(demo_project, tmp_path):
    """IMPLICIT_BIAS_CLAIMS_ONLY=1 (for checks that read claims alone, as
    tests/test_converged_evidence.py, which also finds its claims the committed ones): no figure
    drawn, and only into another results folder; into the book's own it fails, one line, and
    publishes nothing (it would have replaced the committed figures by none)."""
    env = {**os.environ, CLAIMS_ONLY_ENV: "1"}
    refused = cli("run", "demo", "--device", "cpu", env=env)
    assert refused.returncode == 1, refused.stderr
    assert "IMPLICIT_BIAS_CLAIMS_ONLY=1 draws no figure" in refused.stderr
    assert not list((demo_project / "results").rglob("*.png"))
    assert not (demo_project / "results/smoke/claims/demo.json").exists()
    elsewhere = tmp_path / "elsewhere"
    done = cli("run", "demo", "--device", "cpu", env={**env, RESULTS_ENV: str(elsewhere)})
    assert done.returncode == 0, done.stderr
    assert json.loads((elsewhere / "smoke/claims/demo.json").read_text())["claims"]
    assert not list(elsewhere.rglob("*.png")) and not list(demo_project.rglob("*.png"))
