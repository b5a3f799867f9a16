"""A paper run rendered again from the committed cache, stopped at random moments by Ctrl-C,
SIGTERM or SIGKILL, one chapter alone or two with `--jobs 2`: after each stop `git status` is
clean and no file under `results/` is cut short, and a last run finds the committed claims.

The moments come from a fixed seed; the signals take turns, each with one chapter and with two,
so the default 6 moments stop every pair once. `IMPLICIT_BIAS_KILL_MOMENTS` sets how many (a
few seconds each on two cores; 20 for a longer look)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
from test_fault_probes import _add_second_chapter, _start, cli

MOMENTS = int(os.environ.get("IMPLICIT_BIAS_KILL_MOMENTS", "6"))
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
IGNORED = ".run/\n.locks/\n.*.tmp\nbook/chapters/\n__pycache__/\n"


def git(root: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(["git", *identity, *args], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def group_alive(pgid: int) -> bool:
    """Whether a process of the process group `pgid` is still there (the runner, its
    `--jobs` workers; kernels run in sessions of their own and stop with their runner)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def cut_short(results: Path, committed_rows: dict[str, int]) -> list[str]:
    """Files under `results` that are not whole: a PNG without its IEND chunk, JSON that does
    not parse, a CSV whose rows differ from the committed one's (a killed run's staged CSV in
    its `.run` folder, which the next run removes, must parse)."""
    problems = []
    for path in results.rglob("*"):
        if not path.is_file() or path.name.endswith((".tmp", ".lock")):
            continue
        name = str(path.relative_to(results))
        try:
            if path.suffix == ".png" and not path.read_bytes().endswith(b"IEND\xaeB`\x82"):
                problems.append(f"{name}: no IEND chunk")
            elif path.suffix == ".json":
                json.loads(path.read_text())
            elif path.suffix == ".csv" and ".run" in path.parts and name not in committed_rows:
                pd.read_csv(path)  # a killed run's staged output (never the results): it parses
            elif path.suffix == ".csv" and len(pd.read_csv(path)) != committed_rows.get(name):
                problems.append(f"{name}: {len(pd.read_csv(path))} rows")
        except Exception as err:  # noqa: BLE001 - each problem is named
            problems.append(f"{name}: {type(err).__name__}")
    return problems


def test_runs_stopped_at_random_moments_change_nothing(demo_project):
    _add_second_chapter(demo_project)
    (demo_project / ".gitignore").write_text(IGNORED)
    paper = ["--profile", "paper", "--device", "cpu"]
    git(demo_project, "init", "-q")  # a checkout: the results name the commit of their code
    git(demo_project, "add", "-A")
    git(demo_project, "commit", "-q", "-m", "code")
    start = time.perf_counter()
    first = cli("run", "demo", "demo2", *paper, "--jobs", "2")
    # about how long a run takes here (two chapters on two workers, computing their tasks)
    span = time.perf_counter() - start
    assert first.returncode == 0, first.stderr
    git(demo_project, "add", "-A")
    git(demo_project, "commit", "-q", "-m", "committed results")
    results = demo_project / "results"
    rows = {str(p.relative_to(results)): len(pd.read_csv(p)) for p in results.rglob("*.csv")}
    claims = {c: (results / f"paper/claims/{c}.json").read_bytes() for c in ("demo", "demo2")}
    rng = random.Random(46)
    stops = []
    for i in range(MOMENTS):
        # every signal with one chapter and with two (six moments cover all six pairs)
        chapters = ["demo"] if i % 2 == 0 else ["demo", "demo2", "--jobs", "2"]
        how = SIGNALS[(i // 2) % len(SIGNALS)]
        moment = rng.uniform(0.05, 0.9) * span
        proc = _start(["run", *chapters, *paper])
        time.sleep(moment)
        if how == signal.SIGINT:
            os.killpg(proc.pid, how)  # a terminal's Ctrl-C reaches the whole group
        else:
            proc.send_signal(how)
        proc.communicate(timeout=120)
        deadline = time.time() + 120
        while group_alive(proc.pid) and time.time() < deadline:
            time.sleep(0.2)  # after SIGKILL, `--jobs` workers finish on their own
        stops.append(f"{signal.Signals(how).name} at {moment:.1f} s ({len(chapters)} args)")
        status = git(demo_project, "status", "--porcelain")
        assert status == "", f"after {stops[-1]}:\n{status}"
        assert cut_short(results, rows) == [], f"after {stops[-1]}"
    last = cli("run", "demo", "demo2", *paper, "--jobs", "2")
    assert last.returncode == 0, last.stderr
    assert git(demo_project, "status", "--porcelain") == ""
    assert {c: (results / f"paper/claims/{c}.json").read_bytes() for c in claims} == claims
    # no run folder is left behind once a run of the chapter has gone through
    for chapter in ("demo", "demo2"):
        left = [p for p in (results / f"paper/{chapter}/.run").iterdir() if p.is_dir()]
        assert left == [], f"{chapter}: {left} after {stops}"
