"""What keeps a run of a chapter from losing anything, however it ends.

- Each run works in its own folder, `results/<profile>/<chapter>/.run/<run id>/`, held by an
  exclusive lock on `.run/<run id>.lock` for as long as the run lives; the next run of the
  chapter removes the folders (and the kernels' socket files) of runs whose lock is free: runs
  that died (SIGKILL, a power cut) without cleaning up.
- What a run produces (figures, their data, the claims report, the run record) is written to
  its staging folder (`<run folder>/stage/`, the same paths as under the results root; see
  `engine.paths.output_path`) and swapped into place file by file, by atomic rename, only once the
  run is complete and valid (`promote`). Committed results are never moved, deleted or opened
  for writing during a run: a run that ends any other way leaves them as they were.
- SIGTERM is taken like Ctrl-C (`take_sigterm_as_interrupt`), and both wait while the files
  are swapped into place (`signals_held`).
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from ..engine.paths import disk_full, figures_dir, project_root, results_root, shown_path

RUN_ID = re.compile(r"[0-9a-f]{12}")
KERNEL_IPC_PREFIX = "ib-kernel-"  # /tmp/ib-kernel-<run id>-<kernel>-ipc-<port>: kernel sockets
STAGE = "stage"


class Stopped(KeyboardInterrupt):
    """A run stopped by SIGTERM, taken like Ctrl-C."""


STOPS: dict[int, tuple[str, int]] = {
    signal.SIGINT: ("Ctrl-C", 130),
    signal.SIGTERM: ("SIGTERM", 143),
}


def stop_signal(err: BaseException) -> int:
    """The signal that stopped a run: SIGTERM for `Stopped`, else SIGINT (Ctrl-C)."""
    return signal.SIGTERM if isinstance(err, Stopped) or _stopped_by(err) else signal.SIGINT


def _stopped_by(err: BaseException) -> bool:
    return getattr(err, "signal", None) == signal.SIGTERM


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def take_sigterm_as_interrupt() -> None:
    """SIGTERM raises `Stopped` (a KeyboardInterrupt) in the main thread, as Ctrl-C does: the
    run stops the same way, keeps its record and removes its kernel (a `timeout`, a batch
    system or `kill` stops it with SIGTERM)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_stopped)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM wait while the block runs (a run swapping its files into place, or
    cleaning up after a first stop); the list yielded collects the signals that came."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    came: list[int] = []
    saved = {s: signal.getsignal(s) for s in STOPS}
    for s in saved:
        signal.signal(s, lambda signum, frame: came.append(signum))
    try:
        yield came
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def kernel_ipc_prefix(run_id: str | None, kernel: str) -> str:
    """Where a kernel of run `run_id` makes its IPC sockets (jupyter_client adds `-<port>`)."""
    return os.path.join(tempfile.gettempdir(), f"{KERNEL_IPC_PREFIX}{run_id or 'x'}-{kernel}-ipc")


def remove_kernel_sockets(run_id: str) -> None:
    """The socket files of run `run_id`'s kernels (a kernel stopped uncleanly leaves them)."""
    for path in Path(tempfile.gettempdir()).glob(f"{KERNEL_IPC_PREFIX}{run_id}-*"):
        with contextlib.suppress(OSError):
            path.unlink()


class RunFolder:
    """The folder of one run, `<chapter run folder>/<run id>/`, locked while the run lives."""

    def __init__(self, chapter_run: Path, run_id: str):
        self.chapter_run, self.run_id = chapter_run, run_id
        self.path = chapter_run / run_id
        self.lock_path = chapter_run / f"{run_id}.lock"
        self.handle: TextIO | None = None

    def __enter__(self) -> RunFolder:
        import fcntl

        self.chapter_run.mkdir(parents=True, exist_ok=True)
        # the lock first, then the folder: a folder whose lock is free belongs to a dead run
        handle = open(self.lock_path, "a")  # noqa: SIM115 - held for the run
        fcntl.flock(handle, fcntl.LOCK_EX)
        self.handle = handle
        self.path.mkdir(exist_ok=True)
        clean_dead_runs(self.chapter_run)
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        remove_kernel_sockets(self.run_id)
        self.lock_path.unlink(missing_ok=True)
        if self.handle is not None:
            self.handle.close()


def clean_dead_runs(chapter_run: Path) -> list[str]:
    """Remove the folders, locks and kernel sockets of the chapter's runs that died without
    cleaning up (their lock is free); returns their run ids."""
    import fcntl

    removed = []
    for folder in sorted(chapter_run.glob("*")):
        run_id = folder.name.removesuffix(".lock")
        if not RUN_ID.fullmatch(run_id):
            continue
        lock = chapter_run / f"{run_id}.lock"
        try:
            with open(lock, "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(chapter_run / run_id, ignore_errors=True)
                remove_kernel_sockets(run_id)
                lock.unlink(missing_ok=True)
        except BlockingIOError:
            continue  # a live run
        except OSError:
            continue
        if run_id not in removed:
            removed.append(run_id)
    return removed


def staged_files(stage: Path) -> list[Path]:
    return sorted(p for p in stage.rglob("*") if p.is_file()) if stage.is_dir() else []


def promote(stage: Path, root: Path) -> list[Path]:
    """Swap every file of `stage` into place under `root` (same relative path) by atomic
    rename, skipping files identical to the one in place (its bytes, and so `git status`,
    stay as they were); returns the paths that changed."""
    changed, folders = [], set()
    for source in staged_files(stage):
        target = root / source.relative_to(stage)
        if target.is_file() and filecmp.cmp(source, target, shallow=False):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        changed.append(target)
        folders.add(target.parent)
    for folder in folders:  # the renames themselves reach the disk
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return changed


def size_of(paths) -> int:
    """Bytes of the files at or under `paths` (missing ones count nothing)."""
    total = 0
    for path in map(Path, paths):
        files = [path] if path.is_file() else (path.rglob("*") if path.is_dir() else [])
        for file in files:
            with contextlib.suppress(OSError):
                if file.is_file():
                    total += file.stat().st_size
    return total


def free_bytes(folder: Path) -> int | None:
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


def megabytes(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


# ---- a full disk ---------------------------------------------------------------------------


def disk_full_in(err: BaseException) -> BaseException | None:
    """The full disk behind a failed execution (papermill's own write, or a cell's)."""
    if disk_full(err):
        return err
    text = f"{getattr(err, 'ename', '')} {getattr(err, 'evalue', '')} {err}"
    return err if "[Errno 28]" in text or "No space left on device" in text else None


def check_space(chapter: str, profile: str, out: Path, own_notebook: Path) -> int:
    """The bytes a run of `chapter` writes, about (its last figures and executed notebook, or
    those of the project's own results when these results have none); a `DiskSpaceError`
    before anything starts where the results' disk has less free."""
    sources = [figures_dir(profile, chapter), out]
    needed = size_of(sources)
    if not needed:
        own = project_root() / "results"
        needed = size_of([own / profile / "figures" / chapter, own_notebook])
    # staged figures and the new notebook (twice: as the run writes it, and beside the old
    # one before the swap) sit beside the old files until the run completes
    needed = int(2 * needed + 1e6)
    free = free_bytes(results_root())
    if free is not None and free < needed:
        raise DiskSpaceError(
            f"not enough space for a run of {chapter}: {shown_path(results_root())} has "
            f"{megabytes(free)} free, a run writes about {megabytes(needed)}; free some "
            "space or set IMPLICIT_BIAS_RESULTS to a folder on another disk"
        )
    return needed


class DiskSpaceError(OSError):
    """Not enough free space for a run, found before it starts."""


def disk_full_message(err: BaseException, needed: int) -> str:
    root = results_root()
    free = free_bytes(root)
    return (
        f"the disk of {shown_path(root)} is full (no space left on device"
        + (f"; {megabytes(free)} free" if free is not None else "")
        + f"): a run of this chapter writes about {megabytes(needed)}; nothing was changed, "
        "free some space and run again"
    )


# ---- `run --jobs` worker processes ----------------------------------------------------------

_STOPPED: list[int] = []  # in a `--jobs` worker: the signal that stopped one of its chapters
_RUNNING: list[str] = []  # in a `--jobs` worker: the chapter it executes


def job_process_setup(runner: int | None = None) -> None:
    """A `run --jobs` worker process: one line per chapter in the terminal; Ctrl-C and SIGTERM
    stop the chapter it executes as they stop a run alone, and, waiting for one, it starts no
    further chapter (a signal then raises nothing: no traceback of the pool's loop)."""
    import os
    import signal
    import threading

    from .terminal_progress import without_progress_bars

    without_progress_bars()
    # started after the runner died (SIGKILL while this process started): start nothing
    _STOPPED.append(0 if runner is None or os.getppid() == runner else signal.SIGTERM)
    for signum in STOPS:
        signal.signal(signum, _job_signal)
    # `runner`: the runner's pid, given by it (a worker may start after the runner has died)
    threading.Thread(target=_watch_runner, args=(runner or os.getppid(),), daemon=True).start()


def _watch_runner(runner: int) -> None:
    """In a `--jobs` worker: once the runner is gone (SIGKILL), stop the chapter as SIGTERM
    would (its record, its kernel) and exit; a pool's worker would otherwise wait for work
    forever, holding the terminal's output open."""
    import os
    import signal

    while os.getppid() == runner:
        time.sleep(0.5)
    if _RUNNING:
        os.kill(os.getpid(), signal.SIGTERM)
        while _RUNNING:
            time.sleep(0.2)
    os._exit(143)


def _job_signal(signum, frame) -> None:
    import signal

    if not _RUNNING:
        _STOPPED.append(signum)
        return
    if signum == signal.SIGTERM:
        raise Stopped(signum)
    raise KeyboardInterrupt
