"""Committed paper results reproduce on other x86-64 CPUs.

The cheapest committed task of every task function is recomputed under the BLAS kernels that
other CPUs select (`OPENBLAS_CORETYPE` for numpy and scipy; `MKL_CBWR` and
`ATEN_CPU_CAPABILITY` for torch; see `implicit_bias.core.tools.verify.KERNEL_CONFIGS`), each
configuration
in its own process, and every output is compared with the committed one within the tolerance of
`data/tolerances/recompute.yaml`, which was derived from the spread measured across all of
`KERNEL_CONFIGS` (the three kernel generations with 1 and 2 threads, and the measuring
machine's own kernels: `benchmarks/recompute_spread.py`).

Every process of the book computes with the pinned AVX2 kernels (`core.engine.kernels`), so the main
check is one recompute of the cheapest task of every code path under the pin
(`Haswell-1thread`, what the pin selects), by two processes that take the tasks from one
queue, the longest first (`recompute --share`), so that both finish together. The smoke
profile's cache is committed as well, and a code path's cheapest task is taken from the smoke
or the paper entries, whichever is cheaper (about 60 s of tasks instead of 280). The
foreign kernel generations cannot occur under the pin; they are checked on request:
`IMPLICIT_BIAS_RECOMPUTE_FOREIGN=1` runs the earlier plan (Prescott with 1 thread, Sandybridge
with 2 and Haswell with 1: every task function whose cheapest task takes under `HEAVY_SECONDS`
in all three, each heavier one in one of them, balanced by cost times the configuration's
`SLOWDOWN`), and `IMPLICIT_BIAS_RECOMPUTE_ALL=1` every task function under all six foreign
configurations (about half an hour on 2 cores).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.tools.verify import (
    KERNEL_CONFIGS,
    cheapest_entries,
    committed_entries,
    kernel_env,
)

pytestmark = pytest.mark.book

FOREIGN = ("Prescott-1thread", "Sandybridge-2threads", "Haswell-1thread")
# the kernels core.engine.kernels pins: what every run of the book computes with
PINNED = "Haswell-1thread"
ALL_FOREIGN = tuple(name for name in KERNEL_CONFIGS if not name.startswith("native"))
HEAVY_SECONDS = 5.0  # recorded compute time of the cheapest task
# Time of a recompute under each configuration relative to Haswell with 1 thread, measured on the
# 2-core AMD machine with the suite's three processes sharing it (fig2, fig4 and scale_shape
# tasks: 131.8 s under Prescott, 73.6 s under Sandybridge with 2 threads, 60.4 s under Haswell).
SLOWDOWN = {"Prescott-1thread": 2.2, "Sandybridge-2threads": 1.2, "Haswell-1thread": 1.0}


def assign(
    costs: dict[str, float],
    configs: tuple[str, ...],
    heavy: float,
    slowdown: dict[str, float] | None = None,
) -> dict[str, list]:
    """Task functions per configuration: the light ones in every configuration, each heavy one
    (largest first) in the configuration where it would finish first, its cost scaled by that
    configuration's slowdown (default 1 for every configuration)."""
    factor = {c: (slowdown or {}).get(c, 1.0) for c in configs}
    plan = {c: sorted(fn for fn, s in costs.items() if s < heavy) for c in configs}
    load = {c: factor[c] * sum(costs[fn] for fn in plan[c]) for c in configs}
    for fn, seconds in sorted(
        ((f, s) for f, s in costs.items() if s >= heavy), key=lambda item: -item[1]
    ):
        config = min(configs, key=lambda c: (load[c] + factor[c] * seconds, configs.index(c)))
        plan[config].append(fn)
        load[config] += factor[config] * seconds
    return plan


def test_assignment_covers_every_function_and_balances_the_heavy_ones():
    costs = {"a": 1.0, "b": 2.0, "h1": 100.0, "h2": 90.0, "h3": 30.0, "h4": 25.0}
    plan = assign(costs, FOREIGN, heavy=20.0)
    assert set().union(*map(set, plan.values())) == set(costs)
    assert all({"a", "b"} <= set(fns) for fns in plan.values())
    heavy_runs = [fn for fns in plan.values() for fn in fns if fn.startswith("h")]
    assert sorted(heavy_runs) == ["h1", "h2", "h3", "h4"]  # each heavy one exactly once
    assert plan[FOREIGN[0]][-1] == "h1" and plan[FOREIGN[1]][-1] == "h2"
    assert assign(costs, FOREIGN, heavy=math.inf) == {
        c: ["a", "b", "h1", "h2", "h3", "h4"] for c in FOREIGN
    }


def test_assignment_sends_heavy_work_away_from_slow_kernels():
    costs = {"a": 1.0, "h1": 100.0, "h2": 90.0, "h3": 30.0}
    slow = {FOREIGN[0]: 3.0, FOREIGN[1]: 1.0, FOREIGN[2]: 1.0}
    plan = assign(costs, FOREIGN, heavy=20.0, slowdown=slow)
    assert plan[FOREIGN[0]] == ["a", "h3"]  # h3: 3 + 3 x 30 = 93 beats 91 + 30 and 101 + 30
    assert {"h1", "h2"} == set(plan[FOREIGN[1]] + plan[FOREIGN[2]]) - {"a"}
    assert assign(costs, FOREIGN, heavy=20.0, slowdown=dict.fromkeys(FOREIGN, 1.0)) == assign(
        costs, FOREIGN, heavy=20.0
    )


def _run(
    configs_and_functions: dict[str, list[str]],
    chapters: list[str],
    tmp_path,
    parallel: int,
    env_of: dict[str, str] | None = None,
    profiles: tuple[str, ...] = ("paper",),
    share: bool = False,
) -> list[str]:
    """Run each plan entry in its own process, under the kernel configuration it is named
    after (or `env_of[name]`), on the cheapest committed tasks of `profiles`; with `share`,
    the processes (given the same functions) take the tasks from one queue."""
    failures, pending = [], list(configs_and_functions.items())
    running, done = [], set()
    queue = ["--share", str(tmp_path / "queue")] if share else []
    while pending or running:
        while pending and len(running) < parallel:
            name, functions = pending.pop(0)
            out = tmp_path / f"{name}.json"
            running.append(
                (
                    name,
                    out,
                    functions,
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "implicit_bias",
                            "recompute",
                            *chapters,
                            "--profile",
                            *profiles,
                            "--json",
                            str(out),
                            "--functions",
                            *functions,
                            *queue,
                        ],
                        env=kernel_env((env_of or {}).get(name, name)),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                    ),
                )
            )
        name, out, functions, proc = running.pop(0)
        log = proc.communicate(timeout=1800)[0]
        if proc.returncode != 0:
            failures.append(f"== {name} (exit {proc.returncode})\n{log[-3000:]}")
            continue
        recomputed = {row["fn"] for row in json.loads(out.read_text())["tasks"]}
        if not share:
            assert recomputed == set(functions), (name, sorted(set(functions) - recomputed))
        done |= recomputed
    wanted = set().union(*map(set, configs_and_functions.values()))
    assert failures or done == wanted, sorted(wanted - done)
    return failures


def test_committed_results_recompute_under_other_cpu_kernels(tmp_path):
    if not (project_root() / "results" / "paper").exists():
        pytest.skip("no committed paper results")
    chapters = sorted({c for c, _, _ in committed_entries()})
    foreign = any(os.environ.get(f"IMPLICIT_BIAS_RECOMPUTE_{k}") == "1" for k in ("ALL", "FOREIGN"))
    # under the pin, the cheapest task of each code path among the committed smoke and paper
    # entries (the smoke cache is committed: most code paths have a task of a few seconds there)
    profiles = ("paper",) if foreign else ("smoke", "paper")
    costs: dict[str, float] = {}
    for _, _, entry in cheapest_entries(chapters, profiles):
        costs[entry["fn"]] = costs.get(entry["fn"], 0.0) + float(entry["result"].get("seconds", 0))
    committed = {e["fn"] for _, _, e in committed_entries() if e and "fn" in e}
    assert committed <= set(costs), "a committed task function has no readable entry"
    env_of = None
    if os.environ.get("IMPLICIT_BIAS_RECOMPUTE_ALL") == "1":
        plan, parallel = assign(costs, ALL_FOREIGN, heavy=math.inf), 2
    elif os.environ.get("IMPLICIT_BIAS_RECOMPUTE_FOREIGN") == "1":
        plan, parallel = assign(costs, FOREIGN, HEAVY_SECONDS, SLOWDOWN), len(FOREIGN)
    else:  # the pinned kernels, every function once, two processes sharing one queue
        pair = ("pinned-a", "pinned-b")
        plan, parallel, env_of = dict.fromkeys(pair, sorted(costs)), 2, dict.fromkeys(pair, PINNED)
    share = env_of is not None
    failures = _run(plan, chapters, tmp_path, parallel, env_of, profiles, share)
    assert not failures, "\n".join(failures)
