"""Task functions for the sweep tests (importable by subprocesses and dask workers)."""

import os
import time
from pathlib import Path


def square(task):
    if task.get("fail"):
        raise RuntimeError("solver died")
    if task.get("log"):
        with open(Path(task["log"]) / f"{task['x']}.{os.getpid()}.{time.time_ns()}", "w"):
            pass
    if task.get("sleep"):
        time.sleep(task["sleep"])
    return {"y": task["x"] ** 2, "half": task["x"] / 2}


def flaky(task):
    """Fails while the file `task["gate"]` exists (a missing data file, say)."""
    if Path(task["gate"]).exists():
        raise FileNotFoundError(f"missing input {task['gate']}")
    return {"y": task["x"] + 1}


def not_json(task):
    return {"value": object()}


def cube(task):
    return {"y": task["x"] ** 3}


def warns(task):
    """Raises a Python warning, as a solver reporting an inaccurate solution does."""
    import warnings

    warnings.warn(f"solution {task['x']} may be inaccurate", UserWarning, stacklevel=1)
    return {"y": task["x"]}
