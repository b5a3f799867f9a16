"""Checks of committed results against the current code: stale entries and recomputation.

- `stale_entries`: committed cache entries that the current code would not produce (their
  code fingerprint differs from the task function's current one), or that are not valid
  entries at all. `python -m implicit_bias stale` lists them with the command that recomputes
  them; the book tests fail on them.
- `recompute`: recompute committed tasks here and compare every output with the stored one,
  within the per-output tolerances of `data/tolerances/recompute.yaml`, each derived from the
  spread measured across OpenBLAS kernel types and thread counts and written next to it.
  `python -m implicit_bias recompute` does this for the cheapest task of every task function.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ..engine.fingerprint import fingerprint
from ..engine.kernels import OPT_OUT, PINNED, STATE
from ..engine.paths import project_root
from ..engine.sweep import committed_entries, entry_problem, load_function, run_task
from ..engine.tasks import spec_of

# What other x86-64 CPUs compute, reproduced on this one: the BLAS kernels that CPUs without
# AVX (Prescott), with AVX only (Sandybridge) and with AVX2 (Haswell, Zen) select for numpy and
# scipy (OpenBLAS), other code paths of torch's MKL (`MKL_CBWR`) and ATen's portable kernels
# (`ATEN_CPU_CAPABILITY=default`), with 1 and 2 threads. Measured on the AMD machine: each of
# these changes the bits of torch's float32 matmul or float64 SVD (MKL_ENABLE_INSTRUCTIONS does
# not). "native" is the running machine's own choice (on AVX-512 CPUs OpenBLAS SkylakeX kernels,
# on AVX2 ones Haswell), so what it means depends on where the spread is measured.
_TORCH_KERNELS = {  # what torch computes on a CPU of that generation (MKL code path, ATen ISA)
    "Prescott": {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default"},
    "Sandybridge": {"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": "default"},
    "Haswell": {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
}
# numpy's own loops on those CPUs (numpy 2.4 needs X86_V2 at least, so Prescott keeps it)
_NUMPY_FEATURES_OFF = {
    "Prescott": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "Sandybridge": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "Haswell": "X86_V4 AVX512_ICL AVX512_SPR",
}
# The machine's own kernels (AVX-512 where it has them) and the three generations other x86-64
# CPUs select, each with 1 and 2 threads.
KERNEL_CONFIGS = {
    "native-1thread": {"threads": "1"},
    "native-2threads": {"threads": "2"},
    **{
        f"{kind}-{n}thread{'s' if n > 1 else ''}": {
            "OPENBLAS_CORETYPE": kind,
            **torch,
            "NPY_DISABLE_CPU_FEATURES": _NUMPY_FEATURES_OFF[kind],
            "threads": str(n),
        }
        for kind, torch in _TORCH_KERNELS.items()
        for n in (1, 2)
    },
}


def kernel_env(config: str, base: dict | None = None) -> dict:
    """The environment of a process that computes what `KERNEL_CONFIGS[config]` describes."""
    import os

    settings = KERNEL_CONFIGS[config]
    env = {
        k: v
        for k, v in (base if base is not None else os.environ).items()
        if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    }
    threads = settings["threads"]
    env = {k: v for k, v in env.items() if k not in PINNED}
    env.update(
        {k: v for k, v in settings.items() if k != "threads"},
        OPENBLAS_NUM_THREADS=threads,
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
    )
    # exactly this configuration: not the book's pinned AVX2 kernels (`core.engine.kernels`)
    env.update({OPT_OUT: "1", STATE: f"{config} (emulated)"})
    return env


IGNORED_OUTPUTS = ("*seconds*", "*time*")  # wall-clock measurements, not results
# Below max(SMALL, SMALL_FRACTION x the output's largest |value|) a value's deviations are
# judged in absolute terms: a vector's tiny components, and values at the level where float64
# residuals and solver stopping tolerances live (1e-16 .. 1e-10): their digits are round-off, and
# their relative change is measured at 96% for a gradient-flow error of 1e-11.
SMALL, SMALL_FRACTION = 1e-9, 1e-3
_INDEX = re.compile(r"\[\d+\]")


def _current_fingerprint(name: str, memo: dict) -> str | None:
    if name not in memo:
        try:
            memo[name] = fingerprint(load_function(name))
        except (ImportError, AttributeError, ValueError):
            memo[name] = None
    return memo[name]


def stale_entries(
    profile: str = "paper", chapters: list[str] | None = None, root: Path | None = None
) -> list[dict]:
    """Committed entries the current code would not produce, each with the reason."""
    from ..engine.sweep import current_kernels, kernels_problem

    memo: dict = {}
    kernels = current_kernels()
    stale = []
    for chapter, path, entry in committed_entries(profile, chapters, root):
        problem = "unreadable" if entry is None else entry_problem(entry)
        if problem is None:
            assert entry is not None  # entry_problem reports an unreadable entry
            current = _current_fingerprint(entry["fn"], memo)
            if current is None:
                problem = f"task function {entry['fn']} no longer exists"
            elif current != entry["fingerprint"]:
                problem = f"code of {entry['fn']} has changed"
            else:
                problem = kernels_problem(entry, kernels)
        if problem:
            stale.append(
                {
                    "chapter": chapter,
                    "sweep": path.parent.name,
                    "file": path.name,
                    "reason": problem,
                }
            )
    return stale


def recompute_command(chapter: str, profile: str = "paper") -> str:
    return f"python -m implicit_bias run {chapter} --profile {profile} --device cpu"


# ------------------------------------------------------------------------------------------
# Recomputation within measured tolerances


def tolerances_file() -> Path:
    return project_root() / "data" / "tolerances" / "recompute.yaml"


def load_tolerances(path: Path | None = None) -> dict:
    return yaml.safe_load((path or tolerances_file()).read_text()) or {}


def checked_tolerances(path: Path | None = None) -> dict:
    """The tolerances file read and checked whole (an `InputError` naming the file and the
    entry), before a recompute that may take hours reaches the entry that is wrong."""
    from ..engine.paths import InputError, shown_path

    path = path or tolerances_file()
    where = shown_path(path)
    if not path.is_file():
        raise InputError(
            f"no tolerances file {where}"
            + (" (the default: restore it, e.g. git checkout)" if path == tolerances_file() else "")
        )
    try:
        tolerances = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read {where}: not UTF-8 text ({err.reason})") from None
    except yaml.YAMLError as err:
        raise InputError(f"cannot read {where}: {str(err).splitlines()[0]} (not YAML)") from None

    def bad(entry: str, why: str) -> InputError:
        return InputError(f"{where}: {entry}: {why}")

    def number(value) -> bool:  # YAML reads 1e-10 (no dot) as a string: `tolerance` floats it
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return False
        try:
            return math.isfinite(float(value)) and float(value) >= 0
        except ValueError:
            return False

    if not isinstance(tolerances, dict):
        raise bad("the file", "expected a mapping with `default` and `functions`")
    default = tolerances.get("default", {"rtol": 0.0, "atol": 0.0})
    if not (isinstance(default, dict) and all(number(default.get(k)) for k in ("rtol", "atol"))):
        raise bad("default", "expected {rtol: number >= 0, atol: number >= 0}")
    functions = tolerances.get("functions") or {}
    if not isinstance(functions, dict):
        raise bad("functions", "expected a mapping of task function -> output -> tolerances")
    for fn, section in functions.items():
        if not isinstance(section, dict):
            raise bad(str(fn), "expected a mapping of output -> tolerances")
        for key, tol in section.items():
            ok = isinstance(tol, dict) and (
                (set(tol) >= {"rtol", "atol"} and number(tol["rtol"]) and number(tol["atol"]))
                or (set(tol) == {"signs"} and number(tol["signs"]) and float(tol["signs"]) <= 1)
            )
            if not ok:
                raise bad(
                    f"{fn}: {key}",
                    "expected {rtol: number >= 0, atol: number >= 0} or {signs: share 0..1}",
                )
    return tolerances


def output_key(path: str) -> str:
    """`GD-ReLU.val_error[2]` -> `GD-ReLU.val_error`: tolerances are per output, not per
    element."""
    return _INDEX.sub("", path).lstrip(".")


def tolerance(tolerances: dict, fn: str, key: str) -> tuple[float, float]:
    """(rtol, atol) for output `key` of task function `fn`: the most specific pattern of the
    function's section that matches, else its "*" entry, else the file's default."""
    default = tolerances.get("default", {"rtol": 0.0, "atol": 0.0})
    section = (tolerances.get("functions") or {}).get(fn) or {}
    best = None
    for pattern, tol in section.items():
        if "rtol" not in tol:  # a packed-sign entry (`sign_tolerance`)
            continue
        if fnmatch.fnmatchcase(key, pattern) and (best is None or len(pattern) > len(best[0])):
            best = (pattern, tol)
    tol = best[1] if best else default
    return float(tol["rtol"]), float(tol["atol"])


def sign_tolerance(tolerances: dict, fn: str, key: str) -> float | None:
    """The largest share of differing signs allowed for packed-sign output `key` of `fn` (an
    entry `{signs: share}`, most specific pattern first), or None (they must be identical)."""
    section = (tolerances.get("functions") or {}).get(fn) or {}
    best = None
    for pattern, tol in section.items():
        if "signs" in tol and fnmatch.fnmatchcase(key, pattern):
            if best is None or len(pattern) > len(best[0]):
                best = (pattern, tol)
    return None if best is None else float(best[1]["signs"])


def packed_sign_share(a: str, b: str) -> float | None:
    """Share of differing bits of two packed-sign strings (`gln.pack_signs`: base64 of packed
    bits; the padding bits agree), or None when they are not two packings of one length."""
    import base64
    import binascii

    try:
        x, y = base64.b64decode(a, validate=True), base64.b64decode(b, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(x) != len(y) or not x:
        return None
    differing = int.from_bytes(x, "big") ^ int.from_bytes(y, "big")
    return differing.bit_count() / (8 * len(x))


def deviations(stored, new, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, stored, new) for every leaf of two JSON results, timings skipped."""
    if isinstance(stored, dict) and isinstance(new, dict):
        for key in sorted(set(stored) | set(new)):
            if any(fnmatch.fnmatchcase(key, p) for p in IGNORED_OUTPUTS):
                continue
            yield from deviations(stored.get(key), new.get(key), f"{path}.{key}")
    elif isinstance(stored, list) and isinstance(new, list) and len(stored) == len(new):
        for i, (a, b) in enumerate(zip(stored, new)):
            yield from deviations(a, b, f"{path}[{i}]")
    else:
        yield path.lstrip("."), stored, new


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare_results(stored: dict, new: dict, fn: str, tolerances: dict) -> tuple[list[str], dict]:
    """Mismatches (readable lines) and, per output, the largest deviations seen (for deriving
    tolerances): relative for values of the output's own scale, absolute for values below
    SMALL_FRACTION of its largest |value| (a vector's tiny components, a curve's tail near
    zero), whose relative change says nothing."""
    leaves = list(deviations(stored, new))
    scale: dict[str, float] = {}
    for path, a, _ in leaves:
        if _is_number(a) and math.isfinite(a):
            key = output_key(path)
            scale[key] = max(scale.get(key, 0.0), abs(a))
    problems: list[str] = []
    spread: dict[str, dict] = {}
    for path, a, b in leaves:
        key = output_key(path)
        if _is_number(a) and _is_number(b):
            if math.isnan(a) and math.isnan(b):
                continue
            diff = (
                abs(a - b)
                if math.isfinite(a) and math.isfinite(b)
                else (0.0 if a == b else math.inf)
            )
            rel = diff / abs(a) if a else (0.0 if diff == 0 else math.inf)
            worst = spread.setdefault(
                key,
                {
                    "abs": 0.0,
                    "rel": 0.0,
                    "magnitude": scale.get(key, 0.0),
                    "rel_of_large": 0.0,
                    "abs_of_small": 0.0,
                },
            )
            worst["abs"], worst["rel"] = max(worst["abs"], diff), max(worst["rel"], rel)
            if abs(a) >= max(SMALL, SMALL_FRACTION * scale.get(key, 0.0)):
                worst["rel_of_large"] = max(worst["rel_of_large"], rel)
            else:
                worst["abs_of_small"] = max(worst["abs_of_small"], diff)
            rtol, atol = tolerance(tolerances, fn, key)
            if not diff <= atol + rtol * abs(a):
                problems.append(
                    f"{path}: committed {a:.10g}, now {b:.10g} (|diff| {diff:.3g}, "
                    f"rel {rel:.3g}; rtol {rtol:g}, atol {atol:g})"
                )
        elif a != b:
            share = packed_sign_share(a, b) if isinstance(a, str) and isinstance(b, str) else None
            if share is not None:  # predicted signs: the share that flipped
                worst = spread.setdefault(key, {"signs": 0.0})
                worst["signs"] = max(worst.get("signs", 0.0), share)
                allowed = sign_tolerance(tolerances, fn, key)
                if allowed is None or share > allowed:
                    problems.append(
                        f"{path}: {share:.3g} of the packed signs differ "
                        f"(allowed {0.0 if allowed is None else allowed:g})"
                    )
                continue
            spread.setdefault(
                key, {"abs": math.inf, "rel": math.inf, "magnitude": 0.0, "text": True}
            )
            shown_a, shown_b = str(a)[:40], str(b)[:40]
            problems.append(f"{path}: committed {shown_a!r}, now {shown_b!r}")
    return problems, spread


def cheapest_entries(
    chapters: list[str] | None = None,
    profile: str | tuple[str, ...] = "paper",
    root: Path | None = None,
) -> list[tuple[str, Path, dict]]:
    """The cheapest committed entry (by its recorded compute time) of every task function, and
    of every code path of a function that declares them (`TaskSpec.code_path`), among the
    entries of `profile` (one profile, or several: the cheapest of them all)."""
    best: dict[tuple[str, str], tuple[float, str, Path, dict]] = {}
    paths: dict[str, Callable[[dict], str] | None] = {}
    profiles = (profile,) if isinstance(profile, str) else profile
    found = (item for name in profiles for item in committed_entries(name, chapters, root))
    for chapter, path, entry in found:
        if entry is None or entry_problem(entry) is not None:
            continue
        fn = entry["fn"]
        if fn not in paths:
            spec = spec_of(load_function(fn))
            paths[fn] = None if spec is None else spec.code_path
        code_path = paths[fn]
        key = (fn, "" if code_path is None else code_path(entry["task"]))
        seconds = float(entry["result"].get("seconds", math.inf))
        if key not in best or seconds < best[key][0]:
            best[key] = (seconds, chapter, path, entry)
    return [(c, p, e) for _, c, p, e in sorted(best.values(), key=lambda v: v[0])]


def claim_in(folder: Path) -> Callable[[Path], bool]:
    """A work queue shared by processes given the same entries: `claim(path)` is true for the
    first process that asks for an entry (an exclusively created marker file in `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)

    def claim(path: Path) -> bool:
        marker = folder / hashlib.sha256(str(path.resolve()).encode()).hexdigest()
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    return claim


def recompute(
    entries,
    tolerances: dict | None = None,
    progress: bool = True,
    claim: Callable[[Path], bool] | None = None,
) -> dict:
    """Recompute each entry's task and compare with its stored result. Returns
    {"ok": bool, "tasks": [{chapter, fn, file, seconds, problems, spread, result}]} (the
    recomputed result too, so that spreads can be derived again under another rule).

    With `claim` (`claim_in`), only the entries this process claims first: processes sharing
    a queue take the entries in turn as each finishes one, which balances them by the time
    the tasks take now (recorded times are another machine's, and another load's)."""
    import time

    tolerances = load_tolerances() if tolerances is None else tolerances
    rows = []
    for chapter, path, entry in entries:
        if claim is not None and not claim(path):
            continue
        start = time.perf_counter()
        fn = entry["fn"]
        if progress:
            print(
                f"recomputing {chapter} {fn.split(':')[1]} ({path.parent.name}/{path.name[:12]})",
                flush=True,
            )
        result = run_task(load_function(fn), entry["task"])  # as the sweep computes it
        if result["status"] == "error":
            problems, spread = [f"raised {result['error']}"], dict[str, dict]()
        else:
            problems, spread = compare_results(entry["result"], result, fn, tolerances)
        rows.append(
            {
                "chapter": chapter,
                "fn": fn,
                "file": f"{path.parent.name}/{path.name}",
                "seconds": round(time.perf_counter() - start, 2),
                "problems": problems,
                "spread": spread,
                "result": result,
            }
        )
    return {"ok": all(not r["problems"] for r in rows), "tasks": rows}
