"""What keeps a run of a chapter from losing anything, however it ends.

- Each run works in its own folder, `results/<profile>/<chapter>/.run/<run id>/`, held by an
  exclusive lock on `.run/<run id>.lock` for as long as the run lives; the next run of the
  chapter removes the folders (and the kernels' socket files) of runs whose lock is free: runs
  that died (SIGKILL, a power cut) without cleaning up.
- What a run produces (figures, their data, the claims report, the run record, the cache
  entries that replace entries in place) is written to its staging folder (`<run folder>/stage/`,
  the same paths as under the results root; see `engine.paths.output_path`) and swapped into
  place, with the executed notebook, only once the run is complete and valid (`promote`).
  Committed results are never moved, deleted or opened for writing during a run: a run that
  ends any other way leaves them as they were.
- The swap is all or nothing (`swap_in`): each file it replaces is first linked into the run
  folder, a journal of the moves is written, then the files are renamed into place one by one,
  and the journal is removed once the last is in place. An error half-way puts the old files
  back at once; a run killed half-way leaves its journal, and the next run of the chapter puts
  them back before it starts (`clean_dead_runs`).
- SIGTERM is taken like Ctrl-C (`take_sigterm_as_interrupt`), and both wait while the files
  are swapped into place (`signals_held`).
"""

from __future__ import annotations

import contextlib
import filecmp
import json
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

from ..engine.kernels import PINNED_STATE, child_kernels_state, pinnable
from ..engine.paths import (
    RESULTS_ENV,
    RUN_ID_ENV,
    disk_full,
    figures_dir,
    project_root,
    results_root,
    shown_path,
)
from .failures import Stopped

RUN_ID = re.compile(r"[0-9a-f]{12}")
KERNEL_IPC_PREFIX = "ib-kernel-"  # /tmp/ib-kernel-<run id>-<kernel>-ipc-<port>: kernel sockets
STAGE = "stage"


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


KERNEL_LOG_ENV = "IMPLICIT_BIAS_KERNEL_LOG"


def ipc_kernel_manager():
    """A kernel manager that talks to the kernel over local IPC sockets instead of TCP: the
    kernel is local anyway, and over TCP without keys it warns at every start."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self):
            return "ipc"

        @default("ip")
        def _ip_default(self):
            # jupyter_client's default, "kernel-ipc" in the working directory, numbers its
            # sockets by the files it finds there: two chapters started together (`--jobs`)
            # took the same sockets and one kernel never answered. One prefix per kernel.
            # Named by the run (`core.tools.run_safety`): whoever cleans up after a run that died
            # finds its sockets.
            import os
            import uuid

            return kernel_ipc_prefix(os.environ.get(RUN_ID_ENV), uuid.uuid4().hex[:6])

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            # The kernel process's own log (not the cells' output, which travels over its
            # sockets) goes to the run folder: on Ctrl-C it prints tracebacks of its shutdown.
            import os

            log = os.environ.get(KERNEL_LOG_ENV)
            if log and "stderr" not in kw:
                kw["stderr"] = open(log, "a")  # noqa: SIM115 - the kernel process owns it
            # Ctrl-C or SIGTERM while the process starts would leave it running untracked (no
            # shutdown), to make its sockets after the run removed them: held until it is
            # tracked, then delivered
            with signals_held() as came:
                launched = await super()._async_launch_kernel(kernel_cmd, **kw)
            if came:
                os.kill(os.getpid(), came[0])
            return launched

    return IPCKernelManager


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
        # a swap that could not be put back (its roll-back failed too) keeps its journal and
        # backups for the next run of the chapter, which tries again (`clean_dead_runs`)
        if not (self.path / JOURNAL).exists():
            shutil.rmtree(self.path, ignore_errors=True)
        remove_kernel_sockets(self.run_id)
        self.lock_path.unlink(missing_ok=True)
        if self.handle is not None:
            self.handle.close()


class SwapError(RuntimeError):
    """The files of a swap stopped half-way cannot be put back."""


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
                journal = chapter_run / run_id / JOURNAL
                if journal.exists():  # killed while swapping its files in: put the old back
                    try:
                        roll_back(journal)
                    except OSError as err:  # no run may start on a half-swapped tree
                        raise SwapError(
                            f"a run of this chapter was stopped while it swapped its files "
                            f"into place, and they cannot be put back ({err}); its journal "
                            f"is {shown_path(journal)}"
                        ) from err
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


def promote(
    stage: Path, root: Path, extra: list[tuple[Path, Path]] | None = None, run: Path | None = None
) -> list[Path]:
    """Swap every file of `stage` into place under `root` (same relative path), and each
    `(source, target)` of `extra` (the executed notebook), all or nothing (`swap_in`, with its
    journal in the run folder `run`, default `stage`'s parent), skipping files identical to the
    one in place (its bytes, and so `git status`, stay as they were); returns the paths that
    changed."""
    moves = [(source, root / source.relative_to(stage)) for source in staged_files(stage)]
    moves += list(extra or [])
    moves = [
        (source, target)
        for source, target in moves
        if not (target.is_file() and filecmp.cmp(source, target, shallow=False))
    ]
    swap_in(moves, run if run is not None else stage.parent)
    return [target for _, target in moves]


JOURNAL = "swap.json"  # in a run folder: the moves of a swap under way
BACKUP = "swap-backup"  # in a run folder: the files a swap replaces, linked before it starts
FAULT_ENV = "IMPLICIT_BIAS_FAULT_SWAP"  # tests only: "<step>" kills, "<step>:error" raises


def _fault(step: int) -> None:
    """The fault a test injects at `step` of a swap (`FAULT_ENV`): step k is just before the
    k-th rename (k = the number of moves: after the last, before the journal is removed)."""
    wanted = os.environ.get(FAULT_ENV, "")
    at, _, kind = wanted.partition(":")
    if not at or at != str(step):
        return
    if kind == "error":
        raise OSError(5, f"fault injected at step {step} of the swap")
    os.kill(os.getpid(), signal.SIGKILL)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def swap_in(moves: list[tuple[Path, Path]], run: Path) -> None:
    """Rename each `source` onto its `target`, all or nothing. The files replaced are linked
    into `run/swap-backup/` first, then the journal `run/swap.json` records every move; the
    renames follow, and removing the journal completes the swap. An error half-way puts the
    old files back (`roll_back`) and is raised; a process killed half-way leaves the journal,
    which the next run of the chapter rolls back (`clean_dead_runs`)."""
    if not moves:
        return
    from ..engine.paths import write_atomic

    backups = run / BACKUP
    backups.mkdir(parents=True, exist_ok=True)
    moves = [(_same_disk(source, target), target) for source, target in moves]
    records = []
    for i, (source, target) in enumerate(moves):
        backup = None
        if target.exists() or target.is_symlink():
            backup = backups / str(i)
            backup.unlink(missing_ok=True)
            try:
                os.link(target, backup, follow_symlinks=False)
            except OSError:  # another disk, or links not allowed: a copy does the same
                shutil.copy2(target, backup, follow_symlinks=False)
        records.append({"source": str(source), "target": str(target), "backup": str(backup or "")})
    _sync_folder(backups)
    journal = run / JOURNAL
    write_atomic(journal, json.dumps({"moves": records}, indent=1))
    _sync_folder(run)
    folders = set()
    try:
        for step, (source, target) in enumerate(moves):
            _fault(step)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
            folders.add(target.parent)
        _fault(len(moves))
        for folder in folders:  # the renames themselves reach the disk
            _sync_folder(folder)
    except BaseException:
        roll_back(journal)
        raise
    journal.unlink()  # the swap is complete
    _sync_folder(run)
    shutil.rmtree(backups, ignore_errors=True)


def _same_disk(source: Path, target: Path) -> Path:
    """`source`, or a copy of it beside `target` where the two are on different disks (a
    rename cannot cross them)."""
    folder = next((f for f in target.parents if f.exists()), target.parent)
    if os.stat(source).st_dev == os.stat(folder).st_dev:
        return source
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    shutil.copy2(source, tmp)
    source.unlink()
    return Path(tmp)


def roll_back(journal: Path) -> list[Path]:
    """Undo the swap that `journal` records, as far as it went: every target gets its old file
    back (or is removed, where there was none), and each new file goes back to its staged path;
    returns the targets restored. Safe to repeat (a roll-back that was itself stopped)."""
    try:
        moves = json.loads(journal.read_text())["moves"]
    except (OSError, ValueError, KeyError, TypeError):
        moves = []  # cut short while written: no rename had started
    restored = []
    for move in reversed(moves):
        source, target = Path(move["source"]), Path(move["target"])
        backup = Path(move["backup"]) if move["backup"] else None
        if backup is not None:
            if backup.exists() or backup.is_symlink():  # not restored yet
                if not source.exists() and target.exists():
                    with contextlib.suppress(OSError):
                        os.link(target, source)  # the new file, staged again
                os.replace(backup, target)
                restored.append(target)
        elif not source.exists() and target.exists():  # moved in where nothing was
            os.replace(target, source)
            restored.append(target)
        if not source.is_relative_to(journal.parent):  # a copy made beside its target
            source.unlink(missing_ok=True)
        _sync_folder(target.parent)
    journal.unlink(missing_ok=True)
    _sync_folder(journal.parent)
    return restored


def prune_unused(folder: Path, log: dict) -> int:
    """Remove the cache entries of `folder` that the logged run did not use (results of tasks
    the chapter no longer asks for, or of code that has changed). Returns how many."""
    used = {(s["name"], entry) for s in log.get("sweeps", []) for entry in s["entries"]}
    removed = 0
    for path in folder.glob("*/*.json"):
        if len(path.stem) == 64 and (path.parent.name, path.name) not in used and path.is_file():
            path.unlink()
            removed += 1
    return removed


def staged_entries(staged_cache: Path) -> int:
    """Cache entries a run computed again in place of others (`--refresh`, stale or damaged
    ones), staged under `staged_cache` (the chapter's cache folder in the run's stage): they
    replace the entries in place with the rest of its outputs."""
    return sum(1 for p in staged_cache.glob("*/*.json") if len(p.stem) == 64 and p.is_file())


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


# ---- runs under other kernels than the pin --------------------------------------------------


NATIVE_RESULTS = "native"  # results/native/: runs whose kernels are not the book's pin


def native_results_root() -> Path | None:
    """Where a run that would compute with other kernels than the pin writes everything
    (`results/native/`, the same layout, its own cache and book folder), where this CPU could
    run the pin but the run will not (`IMPLICIT_BIAS_NATIVE_KERNELS=1`, a kernel variable
    inherited with another value): its results must not pass for the pinned ones. None when
    the run computes under the pin, when the CPU has no pin to offer, or when the results go
    to another folder than the book's own already (`$IMPLICIT_BIAS_RESULTS`)."""
    if results_root().resolve() != (project_root() / "results").resolve():
        return None
    if not pinnable() or child_kernels_state() == PINNED_STATE:
        return None
    return project_root() / "results" / NATIVE_RESULTS


@contextlib.contextmanager
def results_into(root: Path | None):
    """`$IMPLICIT_BIAS_RESULTS` set to `root` (if any) while the block runs."""
    if root is None:
        yield
        return
    saved = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(root)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = saved


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
    """The full disk named by the folder whose write failed (the executed notebook goes to
    book/chapters, perhaps another disk than the results'), bytes or inodes."""
    from .failures import disk_full_line

    return (
        f"{disk_full_line(err, results_root())}: a run of this chapter writes about "
        f"{megabytes(needed)}; nothing was changed, free some space and run again"
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
