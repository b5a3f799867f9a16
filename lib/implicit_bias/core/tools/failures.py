"""Every failure of the command line as one line and an exit code (the table below, which the
README's reliability section and `python -m implicit_bias --help` show): the commands raise,
`guarded` turns what they raise into `error: <what, where, what to do>` on stderr.

A user's fault (a bad name, a damaged or missing file, a folder that cannot be written) exits 2
and names the file or folder; a run or check that did not come out as it should exits 1; a stop
by Ctrl-C or SIGTERM exits 130 or 143 (the shell's 128 + signal). Anything else is a bug of the
book and keeps its traceback."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import sys
from pathlib import Path

from ..engine.paths import InputError

__all__ = ["InputError", "Stopped", "guarded", "exit_code_table", "read_json", "disk_full_line"]

OK, FAILED, BAD_INPUT, INTERRUPTED, TERMINATED = 0, 1, 2, 130, 143

EXIT_CODES = (
    (OK, "done, and every claim checked came out as its claims file expects"),
    (
        FAILED,
        "done, but something failed: a chapter did not execute (a task or cell failed, a "
        "`--jobs` worker was killed, the disk filled up), a claim is not as expected, `stale` "
        "found stale results, `recompute` a mismatch, `colab --check` an outdated copy",
    ),
    (
        BAD_INPUT,
        "nothing was run or written: a bad command line, an unknown chapter, dataset or name, "
        "no chapter found, a missing, damaged or non-UTF-8 input file (profile, claims, "
        "tolerances, claims report, run record, _toc.yml, cache entry), a folder that cannot "
        "be written (read-only, no permission, a file in its place)",
    ),
    (INTERRUPTED, "stopped by Ctrl-C (SIGINT); the line says what was kept"),
    (TERMINATED, "stopped by SIGTERM (`kill`, `timeout`, a batch system); as for Ctrl-C"),
)


def exit_code_table() -> str:
    """The exit codes, for `--help`."""
    import textwrap

    return "exit codes:\n" + "\n".join(
        textwrap.fill(text, 88, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        for code, text in EXIT_CODES
    )


def damaged(path: Path | str, err: BaseException) -> InputError:
    """The error for a file that cannot be read as what it should be (JSON, YAML, UTF-8)."""
    why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return InputError(f"cannot read {shown(path)}: {why} (damaged? restore it, e.g. git checkout)")


def read_json(path: Path | str):
    """The JSON in `path`; an `InputError` naming the file where it is not JSON or not UTF-8."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise damaged(path, err) from None


def check_json_files(paths) -> None:
    """Raise `InputError` for the first of `paths` (existing files) that is not JSON."""
    for path in paths:
        if Path(path).is_file():
            read_json(path)


def check_claims_reports(profiles, root: Path | None = None) -> None:
    """A damaged claims report (or run record) stops `status`, `status-page`, `compare` with one
    line naming it, before anything is written."""
    from ..engine.paths import results_root

    root = root or results_root()
    for profile in profiles:
        check_json_files(sorted((root / profile / "claims").glob("*.json")))
        check_json_files(sorted((root / profile).glob("*/.run/last-run.json")))
        check_json_files(sorted((root / profile).glob("*/run.json")))


def shown(path: Path | str | None) -> str:
    if path is None:
        return "a file"
    from ..engine.paths import shown_path

    try:
        return shown_path(Path(os.fsdecode(path)))
    except (ValueError, OSError):
        return str(path)


# ---- the disk: which folder, bytes or inodes ---------------------------------------------------


_ERRNO_PATH = re.compile(r"\[Errno (?:28|122)\][^:]*: '([^']+)'")


def full_path(err: BaseException) -> str | None:
    """The file whose write found the disk full: the error's own, or the one an error's text
    quotes (a kernel's `OSError: [Errno 28] No space left on device: '...'`)."""
    name = getattr(err, "filename", None)
    if name:
        return os.fsdecode(name)
    found = _ERRNO_PATH.search(f"{getattr(err, 'evalue', '')} {err}")
    return found.group(1) if found else None


def existing_folder(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return Path("/")


def disk_state(folder: Path) -> str:
    """'12.3 MB free' or 'no inodes left (12.3 MB free)': what ran out on `folder`'s disk."""
    try:
        stat = os.statvfs(existing_folder(folder))
    except OSError:
        return "free space unknown"
    free = f"{stat.f_bavail * stat.f_frsize / 1e6:.1f} MB free"
    if stat.f_files and stat.f_favail == 0:
        return f"no inodes left, no file can be created ({free})"
    return free


def disk_full_line(err: BaseException, default: Path) -> str:
    """The full disk, named by the folder that could not be written (not the results folder
    where it was another: the executed notebooks go to book/chapters), and whether bytes or
    inodes ran out."""
    path = full_path(err)
    folder = existing_folder(Path(path).parent) if path else default
    quota = getattr(err, "errno", None) == errno.EDQUOT or "[Errno 122]" in str(err)
    what = "quota exceeded" if quota else "no space left on device"
    return f"the disk of {shown(folder)} is full ({what}; {disk_state(folder)})"


def error_line(err: BaseException) -> str:
    """A failed execution's error in one line, with its cause: a cell's exception by its own
    name and whole message (a killed sweep worker's `TerminatedWorkerError` says which signal
    in its last lines, which the last line of papermill's text alone dropped)."""
    name = getattr(err, "ename", None)
    value = getattr(err, "evalue", None)
    if name:
        return f"{name}: {' '.join(str(value or '').split())}"
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[-1] if text else ''}"


# ---- one line for what a command raised ------------------------------------------------------


def os_error_line(err: OSError) -> tuple[str, int]:
    path = shown(err.filename) if err.filename else "a file"
    code = err.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"{disk_full_line(err, Path.cwd())}: free some space and run again", FAILED
    if code == errno.EROFS:
        return (
            f"cannot write {path}: read-only file system (set IMPLICIT_BIAS_RESULTS to a "
            "writable folder for results)",
            BAD_INPUT,
        )
    if code in (errno.EACCES, errno.EPERM):
        return f"cannot write {path}: permission denied", BAD_INPUT
    if code == errno.ENOTDIR:
        return f"cannot use {path}: a part of this path is a file, not a folder", BAD_INPUT
    if code == errno.EISDIR:
        return f"cannot read {path}: it is a folder, not a file", BAD_INPUT
    if code == errno.EEXIST:
        return (
            f"cannot make the folder {path}: a file of that name is in its place (move it away)",
            BAD_INPUT,
        )
    if code == errno.ENOENT:
        return f"cannot find or create {path}: no such file or folder", BAD_INPUT
    return f"{path}: {err.strerror or err}", BAD_INPUT


class Stopped(KeyboardInterrupt):
    """A run (or any command) stopped by SIGTERM, taken like Ctrl-C."""


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def take_sigterm() -> None:
    """SIGTERM raises `Stopped` in the main thread, from the start of a command: its imports
    and checks included (a SIGTERM in the first second of `run` was a traceback, exit 1)."""
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_stopped)


def stop_line(err: KeyboardInterrupt) -> tuple[str, int]:
    term = isinstance(err, Stopped) or getattr(err, "signal", None) == signal.SIGTERM
    return (
        f"{'stopped by SIGTERM' if term else 'interrupted (Ctrl-C)'}: nothing was changed",
        TERMINATED if term else INTERRUPTED,
    )


def one_line(err: BaseException) -> tuple[str, int] | None:
    """(message, exit code) for a failure a user can meet; None for a bug (its traceback)."""
    if isinstance(err, KeyboardInterrupt):
        return stop_line(err)
    if isinstance(err, InputError):
        return str(err), BAD_INPUT
    if isinstance(err, OSError):
        return os_error_line(err)
    if isinstance(err, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({err.reason} at byte {err.start})", BAD_INPUT
    return None


def guarded(main, argv=None) -> int:
    """`main(argv)`, its failures as one line on stderr and their exit code."""
    try:
        return main(argv)
    except (KeyboardInterrupt, InputError, OSError, UnicodeDecodeError) as err:
        line = one_line(err)
        assert line is not None
        message, code = line
        prefix = "" if code in (INTERRUPTED, TERMINATED) else "error: "
        print(f"{prefix}{message}", file=sys.stderr)
        return code
