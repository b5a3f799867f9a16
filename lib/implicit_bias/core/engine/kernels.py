"""Which CPU kernels the book computes with: the same ones on every x86-64 machine with AVX2.

Numerical libraries pick their kernels by CPU at run time: OpenBLAS (numpy, scipy) by core type,
torch by the instruction set ATen dispatches to and by the code path of its MKL, numpy's own
ufunc loops by the SIMD features found. An AVX-512 machine and an AVX2 one therefore round
differently, and a few results amplify round-off (long gradient-descent trajectories at huge
margins, least squares near rank deficiency): a figure computed on one CI machine did not match
its baseline drawn on another. So every process that computes for the book selects the AVX2
generation's kernels (what Haswell and Zen CPUs select themselves), when the CPU supports them:
AVX2 and FMA CPUs, Intel or AMD, compute the same bits, whatever they would choose natively.

The environment variables are read when the libraries load, so `pin_kernels` must run before
numpy and torch are imported: `implicit_bias/__init__.py` calls it, and the processes it starts
(papermill kernels, sweep workers) inherit the settings. A variable already set to another
value is left as it is, and the process is then not pinned: its library runs what the variable
says, so the decision is "native (... inherited)" and nothing else is set (a run labelled
pinned while an inherited `OPENBLAS_CORETYPE=Prescott` chose its kernels had rewritten pinned
results). `IMPLICIT_BIAS_NATIVE_KERNELS=1` keeps every library's own choice
(`implicit_bias.core.tools.verify.kernel_env` sets it, with the variables of the CPU it
emulates). The runner sends a run that is not pinned on a CPU that could be to a results
folder of its own (`core.tools.run_safety.native_results_root`).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

# The AVX2 generation's kernels, library by library.
PINNED = {
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS
    "MKL_CBWR": "AVX2",  # torch's MKL (matmul, SVD, least squares on CPU)
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorized kernels
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's ufunc loops
}
PINNED_STATE = "AVX2 (pinned)"  # kernels_state() under the pin
OPT_OUT = "IMPLICIT_BIAS_NATIVE_KERNELS"
STATE = "IMPLICIT_BIAS_KERNELS"  # what pin_kernels decided, for the run record
REQUIRED_FLAGS = ("avx2", "fma")
_LIBRARIES = ("numpy", "torch", "scipy")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The instruction-set flags of the first CPU in `/proc/cpuinfo` (empty where unreadable)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def pin_kernels(
    environ: MutableMapping[str, str] | None = None,
    flags: set[str] | None = None,
    machine: str | None = None,
    loaded: set[str] | None = None,
) -> str:
    """Select the AVX2 generation's kernels in `environ` (default `os.environ`) and return the
    decision, also stored in `environ[STATE]`: "AVX2 (pinned)", or "native (...)" with why."""
    environ = os.environ if environ is None else environ
    machine = platform.machine() if machine is None else machine
    loaded = {m for m in _LIBRARIES if m in sys.modules} if loaded is None else loaded
    if environ.get(OPT_OUT, "") not in ("", "0"):
        # kept as set: `verify.kernel_env` names the CPU generation it emulates; never the
        # pin's own label, inherited from a pinned process that started this one
        named = environ.get(STATE)
        state = named if named and named != PINNED_STATE else f"native ({OPT_OUT} is set)"
    elif machine.lower() not in ("x86_64", "amd64"):
        state = f"native (a {machine} CPU)"
    elif not set(REQUIRED_FLAGS) <= (cpu_flags() if flags is None else flags):
        state = "native (the CPU lacks AVX2 or FMA)"
    elif overrides := inherited_overrides(environ):
        # a kernel variable set to another value by whoever started this process: the
        # libraries run what it says, so the run is not the pin, whatever else is set
        state = f"native ({', '.join(f'{k}={v}' for k, v in overrides.items())} inherited)"
    elif loaded and any(environ.get(k) != v for k, v in PINNED.items()):
        state = f"native ({', '.join(sorted(loaded))} loaded before implicit_bias)"
    else:
        for key, value in PINNED.items():
            environ.setdefault(key, value)
        state = PINNED_STATE
    environ[STATE] = state
    return state


def inherited_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel variables of `environ` (default `os.environ`) set to something other than the
    pin: each makes its library compute with other kernels than the pinned ones."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k, v in PINNED.items() if environ.get(k) not in (None, v)}


def kernel_variables(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The kernel variables this process runs with (None: not set), for run records."""
    environ = os.environ if environ is None else environ
    return {k: environ.get(k) for k in (*PINNED, OPT_OUT)}


def child_kernels_state(environ: Mapping[str, str] | None = None) -> str:
    """The kernels a process started from here with `environ` (default `os.environ`) computes
    with: what its own `pin_kernels` will decide (numpy not loaded yet there)."""
    env = dict(os.environ if environ is None else environ)
    if env.get(OPT_OUT, "") in ("", "0"):
        env.pop(STATE, None)
    return pin_kernels(env, loaded=set())


def pinnable(flags: set[str] | None = None, machine: str | None = None) -> bool:
    """Whether this CPU can compute with the pinned kernels (x86-64 with AVX2 and FMA)."""
    machine = platform.machine() if machine is None else machine
    flags = cpu_flags() if flags is None else flags
    return machine.lower() in ("x86_64", "amd64") and set(REQUIRED_FLAGS) <= flags


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's vendor and model name (information for records; empty where unreadable)."""
    vendor = model = ""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
            elif line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            if vendor and model:
                break
    except OSError:
        pass
    return f"{vendor} {model}".strip() or platform.processor()


def kernels_state() -> str:
    """What this process computes with, for run records: the decision of `pin_kernels` in this
    process or the one that started it."""
    return os.environ.get(STATE, "native (not pinned)")


def shell_exports() -> str:
    """`export` lines that give processes started outside this package (a `dask worker`) the
    pinned kernels, or an empty string where `pin_kernels` left the native ones."""
    env = {k: v for k, v in os.environ.items() if k == OPT_OUT}
    if pin_kernels(env, loaded=set()) != "AVX2 (pinned)":
        return ""
    return "\n".join(f"export {k}='{env[k]}'" for k in (*PINNED, STATE))
