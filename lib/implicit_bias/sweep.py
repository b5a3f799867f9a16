"""Sweeps: map tasks (small dicts) to results through a content-addressed, resumable cache.

Each task's result lives in `<cache_dir>/<sha256 of the task's canonical JSON>.json`, written
atomically (temporary file, then rename), so an interrupted sweep loses nothing and a rerun
computes only what is missing. An entry that does not parse, or whose stored task differs from
the task (a hash collision or a hand-edited file), is recomputed. An exception inside the task
function is recorded as a result with status "error" (as the papers' missing points), not raised.

Backends: "serial", "joblib" (local processes) or "dask" (a `dask.distributed` cluster whose
address comes from the `scheduler` argument or `$IMPLICIT_BIAS_DASK_SCHEDULER`; "local" starts a
`LocalCluster`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm import tqdm

BACKENDS = ("serial", "joblib", "dask")
DASK_ENV = "IMPLICIT_BIAS_DASK_SCHEDULER"


def canonical_json(task: dict) -> str:
    """The task as canonical JSON (sorted keys); raises TypeError for non-JSON values."""
    return json.dumps(task, sort_keys=True, separators=(",", ":"), allow_nan=True)


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


def function_name(fn: Callable) -> str:
    """`module:qualname`, so a cached result can be recomputed later (see tests)."""
    return f"{fn.__module__}:{fn.__qualname__}"


def load_function(name: str) -> Callable:
    import importlib

    module, _, qualname = name.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def run_task(fn: Callable[[dict], dict], task: dict) -> dict:
    """Run one task, turning an exception into an error result; times it."""
    start = time.perf_counter()
    try:
        result = fn(dict(task))
        if not isinstance(result, dict):
            raise TypeError(f"task function must return a dict, got {type(result).__name__}")
        result = _jsonable(result)
        result.setdefault("status", "ok")
    except Exception as err:  # noqa: BLE001 - recorded, as the papers' missing points
        result = {"status": "error", "error": f"{type(err).__name__}: {err}",
                  "traceback": traceback.format_exc(limit=5)}
    result["seconds"] = time.perf_counter() - start
    return result


class ResultCache:
    """A folder of `<hash>.json` files, one per task, each holding the task and its result."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, task: dict) -> Path:
        return self.folder / f"{task_hash(task)}.json"

    def get(self, task: dict) -> dict | None:
        path = self.path(task)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text())
            if entry["task"] != json.loads(canonical_json(task)):
                return None
            return entry["result"]
        except (ValueError, KeyError, TypeError):
            return None  # corrupted: recompute

    def put(self, task: dict, result: dict, fn: Callable | None = None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        entry = {"task": json.loads(canonical_json(task)), "result": result,
                 "fn": function_name(fn) if fn is not None else None}
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            json.dump(entry, handle)
        os.replace(tmp, self.path(task))


def sweep(fn: Callable[[dict], dict], tasks: Sequence[dict], cache_dir: Path | str,
          *, refresh: bool = False, backend: str = "serial", n_jobs: int = 1,
          scheduler: str | None = None, desc: str = "tasks", progress: bool = True
          ) -> list[dict]:
    """Results of `fn` on every task, in order, computing only what the cache lacks.

    Results are written to the cache as soon as each finishes, so killing the process
    half-way keeps every finished task.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    tasks = [dict(t) for t in tasks]
    for task in tasks:
        canonical_json(task)  # fail early on non-JSON task values
    cache = ResultCache(Path(cache_dir))
    results: list[dict | None] = [None if refresh else cache.get(t) for t in tasks]
    todo = [i for i, r in enumerate(results) if r is None]
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc=desc,
               disable=not progress, mininterval=1.0)
    for i, result in _execute(fn, tasks, todo, backend, n_jobs, scheduler):
        cache.put(tasks[i], result, fn)
        results[i] = result
        bar.update(1)
    bar.close()
    return results  # type: ignore[return-value]


def _execute(fn, tasks, todo, backend, n_jobs, scheduler):
    """Yield (index, result) pairs as tasks finish."""
    if not todo:
        return
    if backend == "serial" or (backend == "joblib" and n_jobs == 1):
        for i in todo:
            yield i, run_task(fn, tasks[i])
    elif backend == "joblib":
        import warnings

        from joblib import Parallel, delayed

        # loky replaces workers that sat idle or grew (e.g. after a large task) and warns on the
        # next submission; the tasks themselves are unaffected, so keep the message out of
        # the chapters' output
        warnings.filterwarnings("ignore", message="A worker stopped while some jobs were given",
                                category=UserWarning)
        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
        yield from zip(todo, parallel(delayed(run_task)(fn, tasks[i]) for i in todo))
    else:
        yield from _execute_dask(fn, tasks, todo, scheduler)


def _execute_dask(fn, tasks, todo, scheduler):
    from dask.distributed import Client, LocalCluster, as_completed

    address = scheduler or os.environ.get(DASK_ENV)
    if not address:
        raise ValueError(f"backend 'dask' needs a scheduler address (argument or ${DASK_ENV}), "
                         "or 'local' for a LocalCluster")
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        address = cluster
    client = Client(address)
    try:
        futures = {client.submit(run_task, fn, tasks[i], pure=False): i for i in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
