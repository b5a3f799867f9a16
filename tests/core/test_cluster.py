"""A chapter's sweeps on a Dask cluster: a scheduler and two worker processes started as
separate commands (as on a cluster), the chapter run against them gives exactly the results
of a single-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DASK = str(Path(sys.executable).with_name("dask"))


def results_of(project: Path) -> dict:
    report = json.loads((project / "results/smoke/claims/demo.json").read_text())
    entries = sorted((project / "results/smoke/demo/moments").glob("*.json"))
    return {
        "claims": {row["id"]: (row["value"], row["status"]) for row in report["claims"]},
        "tasks": {
            p.name: {k: v for k, v in json.loads(p.read_text())["result"].items() if k != "seconds"}
            for p in entries
        },
    }


def run_demo(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "implicit_bias", "run", "demo", "--device", "cpu", "--refresh"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.skipif(not Path(DASK).exists(), reason="dask's command line is not installed")
def test_a_chapter_on_a_scheduler_with_two_worker_processes(demo_project, tmp_path):
    env = dict(os.environ)
    single = run_demo(env)
    assert single.returncode == 0, single.stderr
    alone = results_of(demo_project)

    scheduler_file = tmp_path / "scheduler.json"
    worker_env = {**env, "PYTHONPATH": os.pathsep.join([str(demo_project), env["PYTHONPATH"]])}
    procs = [
        subprocess.Popen(
            [
                DASK,
                "scheduler",
                "--scheduler-file",
                str(scheduler_file),
                "--port",
                "0",
                "--no-dashboard",
            ],
            env=worker_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(120):
            if scheduler_file.exists():
                break
            time.sleep(0.5)
        address = json.loads(scheduler_file.read_text())["address"]
        procs += [
            subprocess.Popen(
                [
                    DASK,
                    "worker",
                    "--scheduler-file",
                    str(scheduler_file),
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                ],
                env=worker_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(2)
        ]
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            workers = client.scheduler_info()["workers"]
        pids = {w["pid"] if "pid" in w else w.get("id") for w in workers.values()}
        assert len(workers) == 2 and len(pids) == 2
        clustered = run_demo({**env, "IMPLICIT_BIAS_DASK_SCHEDULER": address})
        assert clustered.returncode == 0, clustered.stderr
        with Client(address, timeout=60) as client:  # the tasks went through the scheduler
            prefixes = client.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.task_prefixes)
            )
        assert "compute_cached" in prefixes, prefixes
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    assert results_of(demo_project) == alone
    run = json.loads((demo_project / "results/smoke/demo/run.json").read_text())
    assert run["tasks"]["computed"] == 3  # computed anew (--refresh)
