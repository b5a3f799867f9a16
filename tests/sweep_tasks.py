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
