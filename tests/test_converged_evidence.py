"""No claim of any chapter rests on an unconverged run, checked on the committed paper results.

Every cached run stopped by a step or iteration cap says so (`status: unconverged`, or a
solver's `optimal_inaccurate`: any status outside `core.verdicts.evidence.CONVERGED`). The test
copies each chapter that has such runs, changes every number those runs hold (re-signed, so the
cache still takes them), executes the chapter's paper profile from that copy (nothing is
recomputed) and compares its claims with the committed ones: a claim whose value moved read an
unconverged run. A chapter that filters its runs through `implicit_bias.core.verdicts.evidence.
converged_runs` gives the same claims bit for bit. A batched task that reports each run's
convergence in a list (`adam_converged`, `relu_converged`, ...) has only its unconverged runs
poisoned: the entries of the lists named like the flag (`adam_l1_sq`, `relu`, ...) at the runs
whose flag is false; its other numbers (closed-form fits, converged runs) are evidence.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from implicit_bias.core.chapter import chapters
from implicit_bias.core.engine import sweep as sweep_module
from implicit_bias.core.engine.paths import CLAIMS_ONLY_ENV
from implicit_bias.core.engine.sweep import CACHED_ONLY_ENV
from implicit_bias.core.verdicts.evidence import CONVERGED

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "results" / "paper"
UNCONVERGED = "unconverged"


def poisoned(value):
    """Every float moved far from itself (NaN would hide in pandas' skipna means)."""
    if isinstance(value, float):
        return value * 3.0 + 1.0 if math.isfinite(value) else value
    if isinstance(value, list):
        return [poisoned(v) for v in value]
    if isinstance(value, dict):
        return {k: v if k == "status" else poisoned(v) for k, v in value.items()}
    return value


def unconverged_entries(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.glob("*/*.json")):
        try:
            entry = json.loads(path.read_text())
        except ValueError:
            continue
        result = entry.get("result") if isinstance(entry, dict) else None
        if isinstance(result, dict) and result.get("status") not in CONVERGED:
            found.append(path)  # stopped by a cap: "unconverged", or a solver's "*_inaccurate"
    return found


def run_flags(result: dict) -> dict[str, list]:
    """Per-run convergence lists of a batched task, by the prefix of the lists they flag
    (`adam_converged` flags `adam_*`; a bare `converged` list flags every list)."""
    return {
        key[: -len("converged")].rstrip("_"): flags
        for key, flags in result.items()
        if key.endswith("converged") and isinstance(flags, list)
    }


def poisoned_runs(result: dict) -> dict:
    """`result` with every number of its unconverged runs poisoned: where it flags runs one by
    one, only the flagged lists' entries at the runs whose flag is false; else every number."""
    flags = run_flags(result)
    if not flags:
        return poisoned(result)
    out = dict(result)
    for prefix, ok in flags.items():
        for key, values in result.items():
            named = not prefix or key == prefix or key.startswith(prefix + "_")
            if named and not key.endswith("converged") and isinstance(values, list):
                if len(values) == len(ok):
                    out[key] = [v if good else poisoned(v) for v, good in zip(values, ok)]
    return out


def poison_entry(path: Path) -> None:
    entry = json.loads(path.read_text())
    entry["result"] = poisoned_runs(entry["result"])
    entry["checksum"] = sweep_module._checksum(entry)
    path.write_text(json.dumps(entry))


def claim_values(report: dict) -> dict:
    """What a claim was decided on: its value and, for per-seed evidence, the seeds."""
    keep = ("value", "seeds", "status", "dropped_runs")
    return {row["id"]: {k: row.get(k) for k in keep} for row in report["claims"]}


def test_poisoning_changes_every_float_but_the_status():
    result = {"status": UNCONVERGED, "loss": 0.5, "steps": 10, "rows": [{"gap": -2.0}]}
    out = poisoned(result)
    assert out["status"] == UNCONVERGED and out["steps"] == 10
    assert out["loss"] != 0.5 and out["rows"][0]["gap"] != -2.0


def test_a_batched_task_has_only_its_unconverged_runs_poisoned():
    result = {
        "status": UNCONVERGED,
        "adam_converged": [True, False],
        "adam_loss": [0.5, 0.25],
        "exact_loss": [0.125, 0.0625],
    }
    out = poisoned_runs(result)
    assert out["adam_loss"][0] == 0.5 and out["adam_loss"][1] != 0.25
    assert out["exact_loss"] == [0.125, 0.0625] and out["adam_converged"] == [True, False]
    # a bare `converged` list flags every list of the task
    bare = poisoned_runs({"converged": [False, True], "loss": [1.0, 2.0]})
    assert bare["loss"][0] != 1.0 and bare["loss"][1] == 2.0


CHAPTERS_WITH_UNCONVERGED = [
    c for c in chapters() if (PAPER / c).is_dir() and unconverged_entries(PAPER / c)
]


def moved_claims(
    chapter: str, entries, tmp_path: Path, results: Path = PAPER.parent, profile: str = "paper"
) -> tuple[list[str], int]:
    """Claims of `chapter` whose values move when the entries `entries(folder)` picks from a
    copy of its committed `profile` cache (under `results`) are poisoned, and how many entries
    that was."""
    copy = tmp_path / "results"
    shutil.copytree(results / profile / chapter, copy / profile / chapter)
    paths = entries(copy / profile / chapter)
    for path in paths:
        poison_entry(path)
    # nothing is computed: a task the committed cache lacks fails the run at once (between a
    # profile's commit and its results' commit it would otherwise compute the whole plan)
    # and no figure is drawn: the claims are all this reads (half of a chapter's time)
    env = {
        **os.environ,
        "IMPLICIT_BIAS_RESULTS": str(copy),
        CACHED_ONLY_ENV: "1",
        CLAIMS_ONLY_ENV: "1",
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "implicit_bias",
            "run",
            chapter,
            "--profile",
            profile,
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=900,
    )
    assert "0 computed" in run.stdout + run.stderr, run.stdout + run.stderr
    committed = claim_values(
        json.loads((results / profile / "claims" / f"{chapter}.json").read_text())
    )
    now = claim_values(json.loads((copy / profile / "claims" / f"{chapter}.json").read_text()))
    return sorted(c for c in committed if committed[c] != now.get(c)), len(paths)


@pytest.mark.parametrize("chapter", CHAPTERS_WITH_UNCONVERGED)
def test_no_claim_reads_an_unconverged_run(chapter, tmp_path):
    moved, n = moved_claims(chapter, unconverged_entries, tmp_path)
    assert not moved, (
        f"{chapter}: these claims read one of the {n} unconverged runs (their values moved "
        f"when those runs' numbers did): {moved}"
    )


def test_a_claim_that_reads_an_unconverged_run_is_found(ran_demo, tmp_path):
    """The check can fail: the demo chapter reads every run it computed; once one of them is
    marked unconverged (re-signed, so the cache takes it), poisoning it moves a claim."""
    demo_project = ran_demo("smoke")
    results = demo_project / "results"
    first = sorted((results / "smoke" / "demo" / "moments").glob("*.json"))[0]
    entry = json.loads(first.read_text())
    entry["result"]["status"] = UNCONVERGED
    entry["checksum"] = sweep_module._checksum(entry)
    first.write_text(json.dumps(entry))
    moved, n = moved_claims("demo", unconverged_entries, tmp_path, results, "smoke")
    assert n == 1
    assert moved == ["mean_is_small", "variance_is_two"]
