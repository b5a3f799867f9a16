"""Declaring task functions: `@task` marks a chapter's unit of work (one training run, one
convex solve) and says how it is scheduled.

A task function takes a task (a small dict of JSON values) and returns a dict of JSON values;
sweeps (`implicit_bias.core.engine.sweep`) cache its results under the fingerprint of its code. The
declaration returns the function itself and records a `TaskSpec` on it; it is transparent to
the fingerprint, because it says how the task runs (threads), not what it computes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskSpec:
    """How a task function runs: `threads` torch threads while it runs (None: leave the
    process's setting), and whether its tasks carry the run's device (`task["device"]`);
    `code_path` names the code a task takes where one function has several (the recompute
    check takes the cheapest committed task of each)."""

    name: str
    threads: int | None = 1
    uses_device: bool = False
    code_path: Callable[[dict], str] | None = None


def task(
    fn: Callable | None = None,
    *,
    threads: int | None = 1,
    uses_device: bool = False,
    code_path: Callable[[dict], str] | None = None,
):
    """Declare a task function: `@task` or `@task(threads=None, uses_device=True)`.

    One torch thread is the default: the book's runs are small float64 programs for which
    extra threads only add contention on a shared CPU (and sweeps run tasks in parallel
    processes instead)."""
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or None, got {threads!r}")

    def declare(function: Callable) -> Callable:
        function.task_spec = TaskSpec(  # type: ignore[attr-defined]
            function.__name__, threads, uses_device, code_path
        )
        return function

    return declare(fn) if fn is not None else declare


task.__fingerprint_transparent__ = True  # type: ignore[attr-defined]


def spec_of(fn: Callable) -> TaskSpec | None:
    return getattr(fn, "task_spec", None)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with `threads` torch threads, restoring the setting afterwards."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
