"""Execute chapters with papermill, and gather the claims dashboard.

Chapters are jupytext MyST notebooks (`notebooks/<chapter>.md`); papermill runs them with the
parameters `profile`, `device` and `refresh` into `book/chapters/<chapter>.ipynb`, which the
book then renders without executing anything again.
"""

from __future__ import annotations

import json
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import jupytext
import nbformat

from ..chapter import (
    PROFILES,
    PROGRESS_ENV,
    check_chapter,
    check_profile,
    device_name,
)
from ..engine.kernels import kernels_state
from ..engine.overrides import CustomProfile
from ..engine.paths import (
    RUN_ID_ENV,
    chapter_results,
    chapters,
    claims_results,
    known_chapters,
    project_root,
    publish_root,
    run_log_path,
    shown_path,
)
from ..site.status_page import dashboard_rows
from ..verdicts import claims as claims_module

PARAMETERS = ("profile", "device", "refresh")


def notebook_source(chapter: str) -> Path:
    return project_root() / "notebooks" / f"{chapter}.md"


def executed_notebook(chapter: str) -> Path:
    return publish_root() / f"{chapter}.ipynb"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a chapter: what was computed is cached, the run record says so."""

    def __init__(self, chapter: str, summary: dict):
        super().__init__(chapter)
        self.chapter, self.summary = chapter, summary


def validate_device(device: str) -> str:
    """The device's name, or a ValueError listing the valid devices. `auto` and `cuda` import
    torch, to ask whether CUDA is there: checked after every other argument, so that a mistake
    elsewhere is reported without that 2 s import."""
    try:
        return device_name(device)
    except ValueError as err:
        from ..engine.device import VALID_DEVICES

        message = str(err)  # an unknown device's message lists them already
        if "valid values" not in message:
            message += f" (valid devices: {', '.join(VALID_DEVICES)})"
        raise ValueError(message) from None


def validate(requested, profile: str, device: str | None = None) -> list[str]:
    """Check every argument before running anything (`device` last, unless left to the
    caller's `validate_device`); raise ValueError listing valid values."""
    check_profile(profile)
    selected = list(requested) or chapters()
    for chapter in selected:
        check_chapter(chapter)
    for chapter in selected:
        if not notebook_source(chapter).exists():
            raise ValueError(f"chapter {chapter!r} has no notebook at {notebook_source(chapter)}")
    for chapter in selected:  # a malformed claims file stops the run before anything is written
        claims_module.load_claims(chapter)
    if device is not None:
        validate_device(device)
    return selected


class ChapterLock:
    """Every run of a chapter holds its lock shared while it runs; pruning the cache needs it
    exclusively, so a run never prunes entries that another run of the chapter is using."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.handle = open(folder / ".run.lock", "a")  # noqa: SIM115 - held for the run

    def __enter__(self) -> ChapterLock:
        import fcntl

        fcntl.flock(self.handle, fcntl.LOCK_SH)
        return self

    def try_exclusive(self) -> bool:
        """Exclusive if no other run holds the chapter (the shared hold is given up first)."""
        import fcntl

        fcntl.flock(self.handle, fcntl.LOCK_UN)
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            fcntl.flock(self.handle, fcntl.LOCK_SH)
            return False

    def __exit__(self, *exc) -> None:
        self.handle.close()  # releases the lock


def _tag_injected_cell(nb: nbformat.NotebookNode) -> None:
    """Hide both parameter cells on the website: the defaults would mislead a reader of a
    paper-profile page, and the chapter displays the profile it actually ran."""
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if ("injected-parameters" in tags or "parameters" in tags) and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]


def _ipc_kernel_manager():
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
            import os
            import tempfile
            import uuid

            return os.path.join(tempfile.gettempdir(), f"ib-kernel-{uuid.uuid4().hex[:12]}-ipc")

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            # The kernel process's own log (not the cells' output, which travels over its
            # sockets) goes to the run folder: on Ctrl-C it prints tracebacks of its shutdown.
            import os

            log = os.environ.get(KERNEL_LOG_ENV)
            if log and "stderr" not in kw:
                kw["stderr"] = open(log, "a")  # noqa: SIM115 - the kernel process owns it
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return IPCKernelManager


KERNEL_LOG_ENV = "IMPLICIT_BIAS_KERNEL_LOG"

# Loggers of the libraries that drive the kernel: with no logging configured, Python prints
# their warnings to the terminal (on Ctrl-C: "Kernel died while waiting for execute reply.",
# asyncio's "Task exception was never retrieved" with nbclient's traceback). What they say is
# in the run's error summary and the failed notebook; their words go to the run folder.
LIBRARY_LOGGERS = ("papermill", "nbclient", "traitlets", "asyncio")


class _LibraryLog:
    """Sends LIBRARY_LOGGERS to a file while a chapter executes."""

    def __init__(self, path: Path):
        import logging

        self.handler = logging.FileHandler(path, delay=True)
        self.handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        self.saved = []
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            self.saved.append((logger, logger.propagate))
            logger.addHandler(self.handler)
            logger.propagate = False

    def close(self) -> None:
        import gc

        gc.collect()  # a task that died with the kernel reports itself here, not at exit
        for logger, propagate in self.saved:
            logger.removeHandler(self.handler)
            logger.propagate = propagate
        self.handler.close()


def run_chapter(
    chapter: str,
    profile: str = "smoke",
    device: str = "auto",
    refresh: bool = False,
    log_output: bool = False,
    custom: CustomProfile | None = None,
) -> dict:
    """Execute one chapter; returns a summary (seconds, ok, error, claims counts, tasks).

    The executed notebook is published (`book/chapters/<chapter>.ipynb`) only after a complete
    execution, atomically; a failed or interrupted execution is kept as
    `results/<profile>/<chapter>/.run/failed.ipynb` and never rendered. The chapter's claims
    report is removed before the run, so a failed run never shows the previous run's claims.
    After a complete run without failed tasks, cache entries the run no longer uses are pruned.

    With `custom` (a profile changed by `--set` or read from a file, validated:
    `implicit_bias.core.engine.overrides.custom_profile`) the chapter runs its base profile with
    those
    parameters, and everything it writes, the executed notebook included, goes under
    `results/custom/<name>/` (`profile` is then ignored); the run record says what changed.
    """
    if custom is not None:
        with custom.active():
            return _execute(
                chapter,
                custom.base,
                device,
                refresh,
                log_output,
                custom.notebook,
                {"custom": custom.record()},
            )
    return _execute(chapter, profile, device, refresh, log_output, executed_notebook(chapter))


def _execute(
    chapter: str,
    profile: str,
    device: str,
    refresh: bool,
    log_output: bool,
    out: Path,
    record: dict | None = None,
) -> dict:
    """One run in its own run folder (`.run/<run id>/`), holding the chapter's lock shared."""
    import os
    import shutil
    import uuid

    validate([chapter], profile, device)
    folder = chapter_results(profile, chapter)
    previous_id = os.environ.get(RUN_ID_ENV)
    os.environ[RUN_ID_ENV] = uuid.uuid4().hex[:12]
    try:
        with ChapterLock(folder / ".run") as lock:
            return _execute_locked(chapter, profile, device, refresh, log_output, out, record, lock)
    finally:
        shutil.rmtree(run_log_path(profile, chapter).parent, ignore_errors=True)
        if previous_id is None:
            os.environ.pop(RUN_ID_ENV, None)
        else:
            os.environ[RUN_ID_ENV] = previous_id


def _execute_locked(
    chapter: str,
    profile: str,
    device: str,
    refresh: bool,
    log_output: bool,
    out: Path,
    record: dict | None,
    lock: ChapterLock,
) -> dict:
    import papermill as pm

    nb = jupytext.read(notebook_source(chapter))
    nb.metadata.setdefault(
        "kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"}
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    run_dir = run_log_path(profile, chapter).parent
    run_dir.mkdir(parents=True, exist_ok=True)
    chapter_run = chapter_results(profile, chapter) / ".run"
    partial = run_dir / "partial.ipynb"
    failed_copy = chapter_run / "failed.ipynb"
    # The previous claims report is set aside, so a failed run never shows it as its own, and
    # put back if this run does not complete: committed paper results change only by a
    # complete run.
    report_path = claims_results(profile) / f"{chapter}.json"
    set_aside = run_dir / "previous-claims.json"
    if report_path.exists():
        report_path.replace(set_aside)
    import os

    os.environ[KERNEL_LOG_ENV] = str(run_dir / "kernel.log")
    start = time.perf_counter()
    error = None
    interrupted = False
    progress = TerminalProgress(chapter, run_dir / "progress.json")
    quiet = _LibraryLog(run_dir / "kernel.log")
    try:
        executed = pm.execute_notebook(
            nb,
            str(partial),
            parameters={"profile": profile, "device": device, "refresh": bool(refresh)},
            kernel_name="python3",
            cwd=str(project_root()),
            progress_bar=False,
            log_output=log_output,
            coalesce_streams=True,
            kernel_manager_class=_ipc_kernel_manager(),
        )
    except KeyboardInterrupt:
        interrupted = True
        error = "interrupted (Ctrl-C)"
        executed = None
    except Exception as err:  # noqa: BLE001 - papermill saved the failing notebook already
        error = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err) else ''}"
        executed = nbformat.read(partial, as_version=4) if partial.exists() else None
    finally:
        progress.close()
        quiet.close()
        os.environ.pop(KERNEL_LOG_ENV, None)
    if (run_dir / "kernel.log").exists() and (run_dir / "kernel.log").stat().st_size:
        (run_dir / "kernel.log").replace(chapter_run / "kernel.log")  # kept for whoever debugs
    if (run_dir / "progress.json").exists():  # the last run's progress, for whoever looks
        (run_dir / "progress.json").replace(chapter_run / "progress.json")
    warnings_log = run_dir / "warnings.log"
    if warnings_log.exists():
        warnings_log.replace(chapter_run / "warnings.log")
    else:  # no warnings in this run: the last run's must not be shown as this one's
        (chapter_run / "warnings.log").unlink(missing_ok=True)
    _print_warnings(chapter, chapter_run / "warnings.log")
    seconds = time.perf_counter() - start
    log = _read_run_log(profile, chapter)
    tasks = _task_summary(log)
    finished = datetime.now(UTC)
    folder = chapter_results(profile, chapter)
    if executed is not None:
        _tag_injected_cell(executed)
        # papermill records where it wrote the notebook: a path of this machine
        executed.metadata.get("papermill", {}).update(input_path=None, output_path=None)
        if error is None:
            executed.cells.append(
                nbformat.v4.new_markdown_cell(
                    run_record_markdown(
                        profile,
                        device_name(device),
                        seconds,
                        tasks,
                        cached_task_seconds(folder),
                        finished,
                        (record or {}).get("custom"),
                    )
                )
            )
        nbformat.write(executed, partial)
    if error is None:
        partial.replace(out)
        failed_copy.unlink(missing_ok=True)
        set_aside.unlink(missing_ok=True)
    else:
        if partial.exists() and not interrupted:
            partial.replace(failed_copy)
        partial.unlink(missing_ok=True)  # an interrupted run leaves no partial notebook
        if set_aside.exists():
            set_aside.replace(report_path)
        else:
            report_path.unlink(missing_ok=True)
    report = claims_module.load_report(chapter, profile) if error is None else None
    summary = {
        "chapter": chapter,
        "profile": profile,
        "device": device_name(device),
        "kernels": kernels_state(),
        "seconds": round(seconds, 1),
        "ok": error is None,
        "error": error,
        "claims": report["counts"] if report else None,
        "claims_ok": bool(report and report["ok"]),
        "bad_claims": [
            f"{row['id']}: {row['status']}"
            for row in (report or {}).get("claims", [])
            if row["status"] not in claims_module.OK_STATUSES
        ],
        "tasks": tasks,
        "finished": finished.isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "failed_notebook": shown_path(failed_copy) if error and not interrupted else None,
        **(record or {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    if error is None and log is not None and not tasks["failed"]:
        if lock.try_exclusive():
            summary["pruned_entries"] = prune_unused(folder, log)
        else:
            summary["pruned_entries"] = 0
            summary["not_pruned"] = "another run of this chapter was in progress"
    # A rerun that reuses the cache is quick; the cached tasks' own times say what the
    # results cost to compute.
    summary["cached_task_seconds"] = round(cached_task_seconds(folder), 1)
    # The committed run record of the paper profile changes only with a complete run; a
    # failed or interrupted run keeps its record in the run folder.
    # Every complete run's record is `.run/last-run.json`; `run.json`, committed with the paper
    # results, is the record of the run that produced them: a run that rendered them again from
    # the cache with the same claims (`make book` on a fresh clone) leaves it alone.
    if error is None:
        claims_module.write_json_atomic(chapter_run / LAST_RUN, summary)
        if not _same_results_as_recorded(folder / "run.json", summary):
            claims_module.write_json_atomic(folder / "run.json", summary)
    else:
        claims_module.write_json_atomic(chapter_run / "last-failed-run.json", summary)
    if interrupted:
        raise Interrupted(chapter, summary)
    return summary


LAST_RUN = "last-run.json"


def latest_run_record(folder: Path) -> Path:
    """The record of the latest complete run of the chapter whose results are in `folder`
    (`run.json` is the one of the run that produced them, see `_execute_locked`)."""
    last = folder / ".run" / LAST_RUN
    return last if last.exists() else folder / "run.json"


def _same_results_as_recorded(path: Path, summary: dict) -> bool:
    """Whether a complete run computed nothing and found the claims its recorded run found."""
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    keys = ("chapter", "profile", "ok", "claims", "claims_ok", "bad_claims", "custom")
    return (
        summary["tasks"]["computed"] == 0
        and recorded.get("ok") is True
        and recorded.get("tasks", {}).get("code") == summary["tasks"].get("code")
        and all(recorded.get(k) == json.loads(json.dumps(summary.get(k))) for k in keys)
    )


def _print_warnings(chapter: str, path: Path) -> None:
    """The warnings the chapter's code raised (kept out of its page), in the terminal."""
    import sys

    if not path.exists() or not path.read_text().strip():
        return
    lines = [line for line in path.read_text().splitlines() if "Warning:" in line]
    unique = list(dict.fromkeys(line.split("Warning:", 1)[1].strip() for line in lines))
    print(
        f"  {chapter}: {len(lines)} warning(s) while executing (full text: "
        f"{path.relative_to(project_root()) if path.is_relative_to(project_root()) else path})",
        file=sys.stderr,
    )
    for text in unique[:5]:
        print(f"    {text[:160]}", file=sys.stderr)


BARS_ENV = "IMPLICIT_BIAS_PROGRESS_BARS"


def without_progress_bars() -> None:
    """For a process that executes chapters beside others (`run --jobs`): one line per chapter
    in the terminal, not several bars drawn over each other."""
    import os

    os.environ[BARS_ENV] = "0"


class TerminalProgress:
    """While a chapter executes, a progress bar in the runner's terminal: the running sweep,
    its tasks done (read from the cache, computed, failed) and the time left. The kernel's
    sweeps report to a file (`$IMPLICIT_BIAS_PROGRESS`); a thread here draws it. Nothing is
    drawn when stderr is not a terminal (CI logs, tests)."""

    def __init__(self, chapter: str, path: Path, interval: float = 0.5):
        import os
        import sys
        import threading

        self.chapter, self.path, self.interval = chapter, path, interval
        path.unlink(missing_ok=True)
        self._previous = os.environ.get(PROGRESS_ENV)
        os.environ[PROGRESS_ENV] = str(path)  # the kernel inherits it
        self._stop = threading.Event()
        self._thread = None
        if sys.stderr.isatty() and os.environ.get(BARS_ENV, "1") != "0":
            self._thread = threading.Thread(target=self._draw, daemon=True)
            self._thread.start()

    def _draw(self) -> None:
        from tqdm import tqdm

        bar, sweep_name = None, None
        while not self._stop.wait(self.interval):
            try:
                state = json.loads(self.path.read_text())
            except (OSError, ValueError):
                continue
            if state["sweep"] != sweep_name:
                if bar is not None:
                    bar.close()
                sweep_name = state["sweep"]
                bar = tqdm(total=state["total"], desc=f"{self.chapter}: {sweep_name}", unit="task")
            if bar is None:
                continue  # this sweep is drawn and done
            bar.n = state["done"]
            bar.set_postfix(cached=state["cached"], failed=state["failed"], refresh=False)
            bar.refresh()
            if state["done"] >= state["total"]:
                bar.close()  # one line per finished sweep stays in the terminal
                bar = None
        if bar is not None:
            bar.close()

    def close(self) -> None:
        import os

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = self._previous


def run_record_markdown(
    profile: str,
    device: str,
    seconds: float,
    tasks: dict,
    compute_seconds: float,
    finished: datetime,
    custom: dict | None = None,
) -> str:
    """The short record that ends every executed chapter: how this page was computed."""
    from ..chapter import source_commit

    lines = [
        "## Run record",
        "",
        "| | |",
        "|---|---|",
        f"| profile | `{profile}`"
        + (" (custom: see the profile table above)" if custom else "")
        + " |",
        f"| device | {device}"
        + (f", CPU kernels {kernels_state()}" if device == "cpu" else "")
        + " |",
        f"| wall time | {seconds:.0f} s |",
        f"| tasks | {tasks['computed']} computed in this run, {tasks['cached']} read from the "
        f"cache, {tasks['failed']} failed |",
        f"| compute time of the results shown | {compute_seconds:.0f} s (the tasks' own "
        "times, whenever they were computed) |",
        f"| code | commit `{source_commit()}` |",
        f"| date | {finished.strftime('%Y-%m-%d %H:%M')} UTC |",
    ]
    return "\n".join(lines)


def _read_run_log(profile: str, chapter: str) -> dict | None:
    path = run_log_path(profile, chapter)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _task_summary(log: dict | None) -> dict:
    """Tasks of the run: total, read from the cache, computed, failed; devices they ran on."""
    sweeps = (log or {}).get("sweeps", [])
    return {
        "total": sum(s["total"] for s in sweeps),
        "cached": sum(s["cached"] for s in sweeps),
        "computed": sum(s["computed"] for s in sweeps),
        "failed": sum(len(s["errors"]) for s in sweeps),
        "devices": sorted({(log or {}).get("device", "?")} if sweeps else []),
        "errors": [{"sweep": s["name"], **e} for s in sweeps for e in s["errors"]][:20],
        "code": {s["fn"]: s["fingerprint"] for s in sweeps if s.get("fn")},
    }


def prune_unused(folder: Path, log: dict) -> int:
    """Remove the cache entries of `folder` that the logged run did not use (results of tasks
    the chapter no longer asks for, or of code that has changed). Returns how many."""
    used = {(s["name"], entry) for s in log.get("sweeps", []) for entry in s["entries"]}
    removed = 0
    for path in folder.glob("*/*.json"):
        if len(path.stem) == 64 and (path.parent.name, path.name) not in used:
            path.unlink()
            removed += 1
    return removed


def cached_task_seconds(folder: Path) -> float:
    """Total compute time recorded by the cached tasks under a chapter's results folder."""
    total = 0.0
    for path in folder.glob("*/*.json"):
        try:
            total += float(json.loads(path.read_text())["result"].get("seconds", 0.0))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return total


def format_status(profiles=PROFILES) -> str:
    """The claims dashboard as terminal text."""
    rows = dashboard_rows(profiles)
    if not rows:
        return "no claims results yet: run `python -m implicit_bias run` first"
    lines = []
    for profile in profiles:
        prof_rows = [r for r in rows if r["profile"] == profile]
        if not prof_rows:
            lines.append(f"== {profile}: no results")
            continue
        lines.append(f"== {profile} profile")
        for chapter in known_chapters():
            ch_rows = [r for r in prof_rows if r["chapter"] == chapter]
            if not ch_rows:
                continue
            lines.append(f"  {chapter}")
            for r in ch_rows:
                value = r["value"]
                shown = f"{value:.4g}" if isinstance(value, float) else str(value)
                status = f"{r['status']} (stale)" if r["stale"] else r["status"]
                lines.append(
                    f"    {status:<16} {r['id']:<44} ours={shown:<12} expect {r['expect']}"
                )
        counts: dict[str, int] = {}
        for r in prof_rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        lines.append("  total: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return "\n".join(lines)


def compare_with_reference(
    selected,
    reference: str,
    candidate: str,
    profile: str,
    tolerances_file: str | None = None,
    summary_path: str | None = None,
    report_dir: str | None = None,
) -> int:
    """Per chapter: claims of the candidate run, and its figures against the reference.

    Prints a table, writes a JSON summary and the figure report (default
    `<candidate>/reports/figures-<profile>/index.html`); returns 0 only if every claim is ok
    and every figure agrees within tolerance.
    """
    import yaml

    from ..site.regression import compare_runs, write_report

    report = (
        Path(report_dir) if report_dir else Path(candidate) / "reports" / (f"figures-{profile}")
    )
    comparisons = []

    tolerances = yaml.safe_load(Path(tolerances_file).read_text()) if tolerances_file else {}
    tolerances = tolerances or {}
    summary, failed = {}, False
    for chapter in selected:
        cand_root, ref_root = Path(candidate), Path(reference)
        run_path = latest_run_record(cand_root / profile / chapter)
        run = json.loads(run_path.read_text()) if run_path.exists() else {}
        claims_path = cand_root / profile / "claims" / f"{chapter}.json"
        claims_report = json.loads(claims_path.read_text()) if claims_path.exists() else None
        figures = compare_runs(
            chapter,
            ref_root / profile / "figures" / chapter,
            cand_root / profile / "figures" / chapter,
            tolerances.get(chapter),
            report,  # the report folder
        )
        comparisons += figures["comparisons"]
        if figures["figures"] == 0:
            figures["problems"].insert(
                0, f"{chapter}: no reference figures in {ref_root / profile / 'figures' / chapter}"
            )
        claims_ok = bool(claims_report and claims_report["ok"])
        ok = bool(run.get("ok")) and claims_ok and not figures["problems"]
        failed |= not ok
        summary[chapter] = {
            "ok": ok,
            "seconds": run.get("seconds"),
            "device": run.get("device"),
            "claims": claims_report["counts"] if claims_report else None,
            "figures_compared": figures["figures"],
            "largest_relative_deviation": figures["largest_deviation"],
            "problems": figures["problems"][:20],
        }
        print(
            f"{chapter:<22} {'ok ' if ok else 'FAIL'} {run.get('seconds', '?')!s:>8} s  "
            f"claims {claims_report['counts'] if claims_report else 'missing'}  figures "
            f"{figures['figures']} largest rel. deviation {figures['largest_deviation']:.2e}"
        )
        for problem in figures["problems"][:5]:
            print(f"    {problem}")
    if summary_path:
        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_path).write_text(json.dumps(summary, indent=2))
    page = write_report(
        comparisons, report, f"Figures of the {profile} profile: {candidate} against {reference}"
    )
    print(f"figure report: {page}")
    return 1 if failed else 0
