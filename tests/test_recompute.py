"""Committed paper results reproduce on other x86-64 CPUs.

The cheapest committed task of every task function is recomputed under the BLAS kernels that
other CPUs select (`OPENBLAS_CORETYPE` for numpy and scipy; `MKL_CBWR` and
`ATEN_CPU_CAPABILITY` for torch; see `implicit_bias.verify.KERNEL_CONFIGS`) and with 1 and 2
threads, each in its own process, and every
output is compared with the committed one within the tolerance of
`data/tolerances/recompute.yaml`, which was derived from the spread measured across exactly
these configurations.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from implicit_bias.paths import project_root
from implicit_bias.verify import committed_entries, kernel_env

pytestmark = pytest.mark.book

FOREIGN = ("Prescott-1thread", "Sandybridge-2threads", "Haswell-1thread")


def test_committed_results_recompute_under_other_cpu_kernels(tmp_path):
    if not (project_root() / "results" / "paper").exists():
        pytest.skip("no committed paper results")
    from test_verify import PENDING_MEASUREMENT

    chapters = sorted({c for c, _, _ in committed_entries()} - PENDING_MEASUREMENT)
    procs = {}
    for name in FOREIGN:  # the three run side by side
        out = tmp_path / f"{name}.json"
        procs[name] = (out, subprocess.Popen(
            [sys.executable, "-m", "implicit_bias", "recompute", *chapters, "--json", str(out)],
            env=kernel_env(name), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    failures = []
    for name, (out, proc) in procs.items():
        log = proc.communicate(timeout=900)[0]
        if proc.returncode != 0:
            failures.append(f"== {name} (exit {proc.returncode})\n{log[-3000:]}")
            continue
        report = json.loads(out.read_text())
        functions = {row["fn"] for row in report["tasks"]}
        committed = {e["fn"] for c, _, e in committed_entries() if e and "fn" in e
                     and c in chapters}
        assert functions == committed, sorted(committed - functions)
    assert not failures, "\n".join(failures)
