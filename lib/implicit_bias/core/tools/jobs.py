"""`run --jobs`: chapters executed at the same time, each in a process of its own."""

from __future__ import annotations

from typing import Any


def run_jobs(jobs: int, selected, start, report, execute=None) -> None:
    """`run --jobs`: each chapter in a fresh interpreter of its own (a pool of one worker), at
    most `jobs` at a time; a worker killed (the out-of-memory killer's SIGKILL) fails its own
    chapter, named with the signal, and the others go on. `execute`: what runs a chapter in
    a worker, given `start(chapter)` (`runner.run_chapter`; a test's stand-in)."""
    import multiprocessing
    import os
    import time
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from .run_safety import job_process_setup

    if execute is None:
        from .runner import run_chapter as execute

    context = multiprocessing.get_context("spawn")
    waiting = list(selected)
    running: dict[Any, tuple] = {}  # future -> (chapter, pool, its process, start time)
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                chapter = waiting.pop(0)
                pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=context,
                    initializer=job_process_setup,
                    initargs=(os.getpid(),),
                )
                future = pool.submit(execute, *start(chapter))
                process = next(iter((getattr(pool, "_processes", None) or {}).values()), None)
                running[future] = (chapter, pool, process, time.monotonic())
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                chapter, pool, process, began = running.pop(future)
                try:
                    summary = future.result()
                except BrokenProcessPool:
                    # the pool's own thread reaps the dead worker: read its exit code only once
                    # that thread is done (two threads waiting on one pid race, and the loser
                    # reads no exit code)
                    pool.shutdown(wait=True)
                    summary = _killed_worker(chapter, process, time.monotonic() - began)
                pool.shutdown(wait=True)
                report(chapter, summary)
    except KeyboardInterrupt:
        _stop_jobs([pool for _, pool, _, _ in running.values()])
        raise
    finally:
        for _, pool, _, _ in running.values():
            pool.shutdown(wait=True, cancel_futures=True)


def _killed_worker(chapter: str, process, seconds: float) -> dict:
    """The summary of a chapter whose worker process died (its results stay as they were: the
    swap happens whole or not at all)."""
    import signal

    if process is not None:
        process.join(timeout=10)  # its exit code is known once it is reaped
    code = getattr(process, "exitcode", None)
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        cause = f"killed by {name}" + (" (the out-of-memory killer?)" if name == "SIGKILL" else "")
    else:
        cause = "ended" + (f" with exit code {code}" if code is not None else "")
    return {
        "ok": False,
        "worker_killed": True,
        "seconds": seconds,
        "claims": None,
        "tasks": {"computed": 0, "cached": 0, "failed": 0, "errors": []},
        "error": f"the worker process running {chapter} was {cause}; its results were left "
        "as they were",
    }


def _stop_jobs(pools) -> None:
    """Ctrl-C or SIGTERM reached the runner: stop every chapter still executing as it would
    stop alone (its own clean-up: record, kernel, sockets; a terminal's Ctrl-C reached them
    already, a SIGTERM to the runner did not) and wait for them, with signals held."""
    import os
    import signal
    import time

    from .run_safety import signals_held

    processes = [p for pool in pools for p in (getattr(pool, "_processes", None) or {}).values()]
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)  # no further chapter starts
    with signals_held():
        for process in processes:
            if process.is_alive():
                try:
                    os.kill(process.pid, signal.SIGTERM)
                except OSError:
                    pass
        deadline = time.monotonic() + 120
        for process in processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
