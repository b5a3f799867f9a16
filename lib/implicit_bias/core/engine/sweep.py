"""Sweeps: map tasks (small dicts) to results through a code-aware, resumable cache.

Each task's result lives in `<cache_dir>/<sha256 of the task's canonical JSON>.json`, an entry
that holds the task, the function's name, the fingerprint of the code that computed it
(`implicit_bias.core.engine.fingerprint`), the result and a checksum of all four. An entry is used
only if
it is well formed, its checksum matches, it holds this very task and its fingerprint is the
current code's; anything else is recomputed (and overwritten). So:

- a change to what executes (the task function or any project code it reaches) recomputes;
  a comment, a docstring, formatting or moving a function between modules does not;
- an interrupted sweep loses nothing: each result is written (unique temporary file, then
  rename) as soon as its task finishes;
- errors are never cached: a task that raised is returned as `{"status": "error", ...}` for
  the caller to report, and is computed again on the next run. A solver's outcome
  (infeasible, iteration limit) is a result, and is cached;
- a per-task file lock stops two processes from computing the same task: the second waits
  and reads the first one's result;
- under the runner, an entry already in place (a `refresh`, a stale or damaged entry) is never
  rewritten during the run: its replacement goes to the run's staging folder
  (`paths.output_path`), is read from there for the rest of the run, and is swapped into place
  with the run's other outputs only once the run is complete and valid. New entries are written
  in place at once (nothing is replaced, and an interrupted run keeps them).

Backends: "serial", "joblib" (local processes) or "dask" (a `dask.distributed` cluster whose
address comes from the `scheduler` argument or `$IMPLICIT_BIAS_DASK_SCHEDULER`; "local" starts a
`LocalCluster`). Workers write the cache themselves, so the cache folder must be shared.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .fingerprint import fingerprint
from .paths import output_path, results_root, shown_path, write_atomic

BACKENDS = ("serial", "joblib", "dask")
DASK_ENV = "IMPLICIT_BIAS_DASK_SCHEDULER"
ENTRY_SCHEMA = 2
ENTRY_KEYS = {"schema", "fn", "fingerprint", "task", "result", "checksum"}
# The kernel configuration an entry was computed under (`core.engine.kernels.kernels_state`,
# with the
# CPU vendor for information); entries written before it was recorded have none.
KERNELS_KEY = "kernels"
# What computing the entry cost, measured in the worker around the task: wall and CPU seconds
# (the process's CPU time, every thread of it: wall time alone reads the load that ran beside
# the task, not its cost) and the 1-minute load average as it ended; entries written before it
# was recorded have none. Never part of the result: a timing is not a result.
TIMING_KEY = "timing"
OPTIONAL_KEYS = {KERNELS_KEY, TIMING_KEY}


def current_kernels() -> dict:
    from .kernels import cpu_vendor, kernels_state

    return {"state": kernels_state(), "cpu": cpu_vendor()}


def kernels_problem(entry: dict, current: dict | None = None) -> str | None:
    """Why an entry's kernels make it unusable here (None: same kernel configuration, or no
    record). Only the configuration counts, not the vendor: under the pin, AVX2 machines of
    both vendors select the same kernels."""
    recorded = entry.get(KERNELS_KEY)
    if not recorded:
        return None
    current = current or current_kernels()
    if recorded.get("state") != current["state"]:
        return f"computed under other kernels ({recorded.get('state')}; here: {current['state']})"
    return None


LOCKS = ".locks"


def canonical_json(value) -> str:
    """`value` as canonical JSON (sorted keys); raises TypeError for non-JSON values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


def task_hash(task: dict) -> str:
    return hashlib.sha256(canonical_json(task).encode()).hexdigest()


def _jsonable(value):
    """Convert numpy/torch scalars and arrays to plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return value  # json writes NaN/Infinity; Python reads them back
    return value


class MissingResultKey(KeyError):
    """A key the chapter asked of a cached result that does not hold it."""

    def __str__(self) -> str:
        return str(self.args[0])


class TaskResult(dict):
    """One task's result as a chapter receives it: a plain dict that, asked for a key it does
    not hold, names its cache entry and the keys it has (an entry of the right checksum but
    another shape, e.g. written by code the fingerprint does not cover, would otherwise reach
    the chapter as a bare KeyError)."""

    def __init__(self, result: dict, entry: str):
        super().__init__(result)
        self.entry = entry

    def __missing__(self, key):
        raise MissingResultKey(
            f"the result in {self.entry} has no {key!r} (it has: {', '.join(sorted(self))}); "
            f"if the task function returns {key!r} now, delete that entry and run again (only it "
            "is computed again)"
        )

    def __reduce__(self):  # pickles (joblib, dask) as the dict plus where it came from
        return (TaskResult, (dict(self), self.entry))


class TaskFailed(RuntimeError):
    """A key asked of a task that failed in this run: its error, not a cache problem."""


class FailedTask(dict):
    """A failed task's `{"status": "error", ...}` as a chapter receives it: asked for a result
    key, it says that the task failed and why (errors are never cached), rather than that a
    cache entry lacks the key."""

    def __init__(self, result: dict, label: str):
        super().__init__(result)
        self.label = label

    def __missing__(self, key):
        error = str(self.get("error", "")).strip().splitlines() or ["unknown error"]
        raise TaskFailed(
            f"{self.label} failed ({error[-1][:300]}), so it has no {key!r}; nothing of it was "
            "cached: it is computed again on the next run"
        )

    def __reduce__(self):
        return (FailedTask, (dict(self), self.label))


# Set to 1, a sweep computes nothing: a task the cache lacks is an error (checks that re-read
# committed results, where a missing entry means the results and the profile disagree)
CACHED_ONLY_ENV = "IMPLICIT_BIAS_CACHED_ONLY"


class NotCachedError(RuntimeError):
    """Under CACHED_ONLY_ENV, a sweep with tasks the cache lacks."""


class CacheEntryError(ValueError):
    """A cache entry that cannot be read as a result and cannot be replaced by recomputing
    it (not a file), or that holds a value of another kind than the sweep's other results."""


def _kind(value) -> str | None:
    if value is None:
        return None  # an optional value (a solver's x when infeasible): any kind
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def odd_results(results: Sequence[dict | None]) -> list[tuple[int, str, str, str]]:
    """(index, key, its kind, the kind the others hold) for each result value whose kind
    (number, text, list, mapping, boolean; None fits any) differs from the one most results of
    the sweep hold under that key, where at least two agree and one kind is the most common:
    one task function returns the same shape for every task, so the odd one is a damaged or
    foreign cache entry (its checksum only says it was not corrupted on disk)."""
    from collections import Counter

    by_key: dict[str, dict[int, str]] = {}
    for i, result in enumerate(results):
        if not isinstance(result, dict) or result.get("status") == "error":
            continue
        for key, value in result.items():
            kind = _kind(value)
            if kind is not None:
                by_key.setdefault(key, {})[i] = kind
    odd = []
    for key, kinds in by_key.items():
        ranked = Counter(kinds.values()).most_common()
        if len(ranked) < 2 or ranked[0][1] < 2 or ranked[0][1] == ranked[1][1]:
            continue
        common = ranked[0][0]
        odd += [(i, key, kind, common) for i, kind in kinds.items() if kind != common]
    return odd


def function_name(fn: Callable) -> str:
    """`module:qualname`, so a cached result can be recomputed later (see tests)."""
    return f"{fn.__module__}:{fn.__qualname__}"


def load_function(name: str) -> Callable:
    import importlib

    module, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def run_task(fn: Callable[[dict], dict], task: dict) -> dict:
    """Run one task, turning an exception into an error result; times it. The result must be
    a dict of JSON values (numpy and torch values are converted)."""
    from .tasks import spec_of, torch_threads

    spec = spec_of(fn)
    start = time.perf_counter()
    try:
        with torch_threads(spec.threads if spec is not None else None):
            result = fn(dict(task))
        if not isinstance(result, dict):
            raise TypeError(f"task function must return a dict, got {type(result).__name__}")
        result = _jsonable(result)
        canonical_json(result)  # a value JSON cannot hold is the task's error, found here
        result.setdefault("status", "ok")
    except Exception as err:  # noqa: BLE001 - reported and retried, never cached
        result = {
            "status": "error",
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(limit=5),
        }
    result["seconds"] = time.perf_counter() - start
    if "device" in task:
        result.setdefault("device", task["device"])
    return result


def _checksum(entry: dict) -> str:
    keys = ("schema", "fn", "fingerprint", "task", "result", KERNELS_KEY, TIMING_KEY)
    body = {k: entry[k] for k in keys if k in entry}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def entry_problem(entry, task: dict | None = None) -> str | None:
    """Why a stored entry cannot be used as a result (None: it can)."""
    if isinstance(entry, dict) and "task" in entry and "schema" not in entry:
        return "old format: computed before code fingerprints"
    if not isinstance(entry, dict) or set(entry) - OPTIONAL_KEYS != ENTRY_KEYS:
        return "not a cache entry of this format"
    if entry["schema"] != ENTRY_SCHEMA:
        return f"schema {entry['schema']!r}, expected {ENTRY_SCHEMA}"
    result = entry["result"]
    if not isinstance(result, dict) or not isinstance(result.get("status"), str):
        return "result is not a dict with a status"
    try:
        if entry["checksum"] != _checksum(entry):
            return "checksum mismatch"
    except (TypeError, ValueError):
        return "checksum mismatch"
    if task is not None and entry["task"] != json.loads(canonical_json(task)):
        return "holds another task"
    if result["status"] == "error":
        return "an error (never reused)"
    return None


def staged_folder(folder: Path | str) -> Path | None:
    """Where the runner's current run stages replacements of the entries of the cache folder
    `folder` (`paths.output_path`); None outside a run."""
    staged = output_path(folder)
    return None if staged == Path(folder) else staged


class ResultCache:
    """A folder of `<hash>.json` entries, one per task, valid for one code fingerprint. With
    `stage` (a run's staging folder for this cache folder), an entry that would replace one in
    place is written there instead, and read from there first."""

    def __init__(
        self, folder: Path, fn_fingerprint: str | None = None, stage: Path | str | None = None
    ):
        self.folder = Path(folder)
        self.fingerprint = fn_fingerprint
        self.stage = Path(stage) if stage is not None else None
        self.last_fn: str | None = None
        self.last_timing: dict | None = None

    def path(self, task: dict) -> Path:
        return self.folder / f"{task_hash(task)}.json"

    def staged_path(self, task: dict) -> Path | None:
        return self.stage / f"{task_hash(task)}.json" if self.stage is not None else None

    def _readable_path(self, task: dict) -> Path:
        """The entry this run sees: its own staged replacement, else the one in place."""
        staged = self.staged_path(task)
        return staged if staged is not None and staged.is_file() else self.path(task)

    def lock(self, task: dict):
        from filelock import FileLock

        folder = self.folder / LOCKS
        folder.mkdir(parents=True, exist_ok=True)
        return FileLock(str(folder / f"{task_hash(task)}.lock"))

    def read(self, task: dict) -> tuple[dict | None, str]:
        """(result, "hit") or (None, why not)."""
        path = self._readable_path(task)
        if not path.exists():
            return None, "missing"
        if not path.is_file():  # recomputing cannot replace it: say so, rather than fail later
            raise CacheEntryError(
                f"the cache entry {shown_path(path)} is "
                f"{'a folder' if path.is_dir() else 'not a file'}, not a result: remove it "
                f"(rm -r '{shown_path(path)}'), then run again"
            )
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None, "unreadable"
        problem = entry_problem(entry, task)
        if problem:
            return None, problem
        if self.fingerprint is not None and entry["fingerprint"] != self.fingerprint:
            return None, "stale (computed by other code)"
        kernels = kernels_problem(entry)
        if kernels:
            return None, f"stale ({kernels})"
        self.last_fn, self.last_timing = entry["fn"], entry.get(TIMING_KEY)
        return entry["result"], "hit"

    def get(self, task: dict, fn: Callable | None = None) -> dict | None:
        """The cached result, or None. With `fn`: an entry of the same code stored under
        another function name (the function moved or was renamed) is relabelled, so that
        `stale` and `recompute` find the function again."""
        result, _ = self.read(task)
        if result is not None and fn is not None and self.last_fn != function_name(fn):
            self.put(task, result, fn, timing=self.last_timing)
        return result

    def put(
        self, task: dict, result: dict, fn: Callable | None = None, timing: dict | None = None
    ) -> Path:
        """Write the entry whole (unique temporary file, flushed, then renamed). An entry of
        the same code computed under the pinned kernels is never replaced by one computed
        without them (a process that loaded numpy before implicit_bias, say): the new result
        is returned to its caller but not stored, so committed results stay reproducible."""
        if result.get("status") == "error":
            raise ValueError("errors are never cached")
        if self._keeps_pinned_entry(task):
            return self.path(task)
        entry = {
            "schema": ENTRY_SCHEMA,
            "fn": function_name(fn) if fn is not None else None,
            "fingerprint": self.fingerprint,
            "task": json.loads(canonical_json(task)),
            "result": json.loads(canonical_json(result)),
            KERNELS_KEY: current_kernels(),
        }
        if timing is not None:
            entry[TIMING_KEY] = json.loads(canonical_json(timing))
        entry["checksum"] = _checksum(entry)
        target = self.path(task)
        staged = self.staged_path(task)
        if staged is not None and (target.exists() or target.is_symlink()):
            target = staged  # replaces an entry in place: only once the run is complete
        return write_atomic(target, json.dumps(entry))

    def _keeps_pinned_entry(self, task: dict) -> bool:
        """Whether the stored entry of `task` is a valid result of this code computed under the
        pinned kernels while this process runs without them (it then keeps its place)."""
        from .kernels import PINNED_STATE

        if current_kernels()["state"] == PINNED_STATE:
            return False
        try:
            entry = json.loads(self.path(task).read_text())
        except (OSError, ValueError):
            return False
        return (
            entry_problem(entry, task) is None
            and (entry.get(KERNELS_KEY) or {}).get("state") == PINNED_STATE
            and (self.fingerprint is None or entry["fingerprint"] == self.fingerprint)
        )


def task_timing(wall: float, cpu_start: float) -> dict:
    """The cost of a task just run in this process since `cpu_start` (`time.process_time`)."""
    try:
        load: float | None = round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        load = None
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(time.process_time() - cpu_start, 3),
        "load": load,
    }


def compute_cached(
    fn: Callable[[dict], dict],
    task: dict,
    folder: str,
    fn_fingerprint: str,
    refresh: bool = False,
    stage: str | None = None,
) -> tuple[dict, str]:
    """Compute one task under its lock and store the result; if another process stored it
    meanwhile, read that instead. Returns (result, "computed" | "cached" | "error"). Runs in
    the worker (process or cluster node), so only finished results ever reach the cache.
    `stage`: the run's staging folder of this cache folder (see `ResultCache`)."""
    cache = ResultCache(Path(folder), fn_fingerprint, stage)
    with cache.lock(task):
        if not refresh:
            result = cache.get(task, fn)
            if result is not None:
                return result, "cached"
        cpu = time.process_time()
        result = run_task(fn, task)
        if result["status"] == "error":
            return result, "error"
        cache.put(task, result, fn, timing=task_timing(result["seconds"], cpu))
        # exactly what a later cache hit returns (JSON values, keys in canonical order), so
        # frames and figures built from a sweep do not depend on whether it was cached
        return json.loads(canonical_json(result)), "computed"


@dataclass
class SweepOutcome:
    """What a sweep did: how many tasks it read from the cache, computed, or saw fail."""

    name: str
    fn: str = ""
    fingerprint: str = ""
    total: int = 0
    cached: int = 0
    computed: int = 0
    errors: list[dict] = field(default_factory=list)  # {"task", "error"} per failed task
    entries: list[str] = field(default_factory=list)  # cache files this sweep used

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "fn": self.fn,
            "fingerprint": self.fingerprint,
            "total": self.total,
            "cached": self.cached,
            "computed": self.computed,
            "errors": self.errors,
            "entries": self.entries,
        }


WARNINGS_ENV = "IMPLICIT_BIAS_WARNINGS_LOG"  # set by a chapter under the runner: its warnings log


def route_warnings(path: Path) -> None:
    """Send this process's Python warnings to the file `path` (appended) instead of stderr."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        with open(path, "a") as handle:
            handle.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show


def _compute_in_worker(fn, task, folder, code, refresh, warnings_log, stage=None):
    """`compute_cached` in a sweep worker process, whose warnings go to the chapter's warnings
    log (`warnings_log`, the parent's `WARNINGS_ENV`; passed along because workers outlive the
    environment they started with) like the chapter's own: a worker's stderr reaches the
    executing page (a cvxpy "may be inaccurate" printed a machine path into a paper page)."""
    if warnings_log:
        route_warnings(Path(warnings_log))
    return compute_cached(fn, task, folder, code, refresh, stage)


def sweep(
    fn: Callable[[dict], dict],
    tasks: Sequence[dict],
    cache_dir: Path | str,
    *,
    refresh: bool = False,
    backend: str = "serial",
    n_jobs: int = 1,
    scheduler: str | None = None,
    desc: str = "tasks",
    progress: bool = True,
    outcome: SweepOutcome | None = None,
    on_progress: Callable[[SweepOutcome], None] | None = None,
    cost: Callable[[dict], float] | None = None,
) -> list[dict]:
    """Results of `fn` on every task, in order, computing only what the cache lacks.

    `cost(task)`, an estimate of a task's compute time (any unit), sets the order in which the
    missing tasks are computed: largest first, so that with several workers the long ones do
    not run last on one core while the others idle (ties keep the tasks' order). The results
    come back in the tasks' order whatever it is.

    `on_progress(outcome)` is called as the sweep starts and after each task (the runner's
    terminal progress bar); `progress` shows a tqdm bar where the sweep runs.

    Results are written to the cache as soon as each finishes, so killing the process
    half-way keeps every finished task. Failed tasks come back as `{"status": "error",
    "error": ...}` (and in `outcome.errors`); they are not cached.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    tasks = [dict(t) for t in tasks]
    for task in tasks:
        canonical_json(task)  # fail early on non-JSON task values
    outcome = outcome if outcome is not None else SweepOutcome(desc)
    code = fingerprint(fn)
    outcome.fn, outcome.fingerprint = function_name(fn), code
    cache = ResultCache(Path(cache_dir), code, staged_folder(cache_dir))
    stage = str(cache.stage) if cache.stage is not None else None
    results: list[dict | None] = [None if refresh else cache.get(t, fn) for t in tasks]
    todo = [i for i, r in enumerate(results) if r is None]
    if todo and os.environ.get(CACHED_ONLY_ENV) == "1":
        raise NotCachedError(
            f"{len(todo)} of the {len(tasks)} {desc} are not in the cache "
            f"({shown_path(cache.folder)}); {CACHED_ONLY_ENV}=1 computes nothing"
        )
    if cost is not None:
        todo.sort(key=lambda i: -float(cost(tasks[i])))
    outcome.total = len(tasks)
    outcome.cached = len(tasks) - len(todo)
    bar = tqdm(
        total=len(tasks),
        initial=len(tasks) - len(todo),
        desc=desc,
        disable=not progress,
        mininterval=1.0,
    )
    if on_progress is not None:
        on_progress(outcome)
    for i, (result, how) in _execute(
        fn, tasks, todo, backend, n_jobs, scheduler, str(cache.folder), code, refresh, stage
    ):
        results[i] = result
        if how == "error":
            outcome.errors.append({"task": tasks[i], "error": result["error"]})
        elif how == "cached":
            outcome.cached += 1
        else:
            outcome.computed += 1
        bar.update(1)
        if on_progress is not None:
            on_progress(outcome)
    bar.close()
    cached = set(range(len(tasks))) - set(todo)
    odd = [o for o in odd_results(results) if o[0] in cached]
    if odd:
        i, key, kind, common = odd[0]
        paths = sorted({shown_path(cache.path(tasks[o[0]])) for o in odd})
        # the entries named, and the narrow mend: a --refresh would compute every entry again
        raise CacheEntryError(
            f"{len(paths)} cache entr{'y' if len(paths) == 1 else 'ies'} not written by this code "
            f"({paths[0]} holds {kind} as {key!r} where the sweep's other results hold "
            f"{common}): delete them (rm {' '.join(paths)}) and run the chapter again, which "
            "computes only those"
        )
    outcome.entries = [
        cache.path(t).name
        for t, r in zip(tasks, results)
        if r is not None and r.get("status") != "error"
    ]
    return results  # type: ignore[return-value]


def _execute(fn, tasks, todo, backend, n_jobs, scheduler, folder, code, refresh, stage=None):
    """Yield (index, (result, how)) pairs as tasks finish."""
    if not todo:
        return
    if backend == "serial" or (backend == "joblib" and n_jobs == 1):
        for i in todo:
            yield i, compute_cached(fn, tasks[i], folder, code, refresh, stage)
    elif backend == "joblib":
        import warnings

        from joblib import Parallel, delayed

        # loky replaces workers that sat idle or grew (e.g. after a large task) and warns on the
        # next submission; the tasks themselves are unaffected, so keep the message out of
        # the chapters' output
        warnings.filterwarnings(
            "ignore", message="A worker stopped while some jobs were given", category=UserWarning
        )
        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
        log = os.environ.get(WARNINGS_ENV)
        yield from zip(
            todo,
            parallel(
                delayed(_compute_in_worker)(fn, tasks[i], folder, code, refresh, log, stage)
                for i in todo
            ),
        )
    else:
        yield from _execute_dask(fn, tasks, todo, scheduler, folder, code, refresh, stage)


def _execute_dask(fn, tasks, todo, scheduler, folder, code, refresh, stage=None):
    from dask.distributed import Client, LocalCluster, as_completed

    address = scheduler or os.environ.get(DASK_ENV)
    if not address:
        raise ValueError(
            f"backend 'dask' needs a scheduler address (argument or ${DASK_ENV}), "
            "or 'local' for a LocalCluster"
        )
    cluster = None
    if address == "local":
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        address = cluster
    client = Client(address)
    try:
        futures = {
            client.submit(compute_cached, fn, tasks[i], folder, code, refresh, stage, pure=False): i
            for i in todo
        }
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def committed_entries(
    profile: str = "paper", chapters: list[str] | None = None, root: Path | None = None
) -> Iterator[tuple[str, Path, dict | None]]:
    """(chapter, path, entry or None if unreadable) for every cache entry of `profile`."""
    base = (root or results_root()) / profile
    for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.exists() else []:
        if folder.name in ("claims", "figures") or (chapters and folder.name not in chapters):
            continue
        for path in sorted(folder.glob("*/*.json")):
            if len(path.stem) != 64:
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                entry = None
            yield folder.name, path, entry
