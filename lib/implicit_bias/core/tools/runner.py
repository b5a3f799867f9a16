"""Execute chapters with papermill, and gather the claims dashboard.

Chapters are jupytext MyST notebooks (`notebooks/<chapter>.md`); papermill runs them with the
parameters `profile`, `device` and `refresh` into `book/chapters/<chapter>.ipynb`, which the
book then renders without executing anything again.
"""

from __future__ import annotations

import json
import platform
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import jupytext
import nbformat

from ..chapter import (
    PROFILES,
    check_chapter,
    check_profile,
    device_name,
    load_profile,
)
from ..engine.kernels import kernel_variables, kernels_state
from ..engine.overrides import CustomProfile
from ..engine.paths import (
    RUN_ID_ENV,
    STAGE_ENV,
    chapter_results,
    chapters,
    claims_results,
    disk_full,
    export_results_root,
    known_chapters,
    project_root,
    publish_root,
    results_root,
    run_log_path,
    shown_path,
    write_atomic,
)
from ..site.status_page import dashboard_rows
from ..verdicts import claims as claims_module
from ..verdicts import tally
from .failures import error_line
from .run_safety import (
    _RUNNING,
    _STOPPED,
    KERNEL_LOG_ENV,
    STAGE,
    STOPS,
    RunFolder,
    _job_signal,
    check_space,
    disk_full_in,
    disk_full_message,
    ipc_kernel_manager,
    native_results_root,
    promote,
    prune_unused,
    results_into,
    signals_held,
    staged_entries,
    stop_signal,
    take_sigterm_as_interrupt,
)
from .terminal_progress import TerminalProgress

PARAMETERS = ("profile", "device", "refresh")


def notebook_source(chapter: str) -> Path:
    return project_root() / "notebooks" / f"{chapter}.md"


def executed_notebook(chapter: str) -> Path:
    return publish_root() / f"{chapter}.ipynb"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: `signal`) during a chapter: what was computed is cached, the run
    record says so, and the results are as they were before the run."""

    def __init__(self, chapter: str, summary: dict, signal: int | None = None):
        import signal as signals

        super().__init__(chapter)
        self.chapter, self.summary = chapter, summary
        self.signal = signal if signal is not None else signals.SIGINT

    def __reduce__(self):  # from a `--jobs` worker to the runner
        return (Interrupted, (self.chapter, self.summary, int(self.signal)))


def validate_device(device: str) -> str:
    """The device's name, or a ValueError listing the valid devices. `cuda`, and `auto` where a
    GPU driver is present, import torch to ask whether CUDA is there: checked after every other
    argument, so that a mistake elsewhere is reported without that 2 s import."""
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
    export_results_root()  # absolute (the kernel runs in the project root), and a folder
    selected = list(requested) or chapters()
    for chapter in selected:
        check_chapter(chapter)
    for chapter in selected:
        if not notebook_source(chapter).exists():
            raise ValueError(f"chapter {chapter!r} has no notebook at {notebook_source(chapter)}")
    for chapter in selected:  # a malformed claims file stops the run before anything is written
        claims_module.load_claims(chapter)
    for chapter in selected:  # and so does a broken profiles file, before a kernel starts
        load_profile(chapter, profile)
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

    The run's figures, claims report and record are staged and swapped into place, with the
    executed notebook (`book/chapters/<chapter>.ipynb`), only after a complete and valid run
    (`core.tools.run_safety`); a failed execution is kept as
    `results/<profile>/<chapter>/.run/failed.ipynb` (its record as `last-failed-run.json`) and
    the results stay those of the last valid run, whatever ended this one (an error, Ctrl-C,
    SIGTERM, SIGKILL, a full disk). After a complete and valid run, cache entries the run no
    longer uses are pruned.

    With `custom` (a profile changed by `--set` or read from a file, validated:
    `implicit_bias.core.engine.overrides.custom_profile`) the chapter runs its base profile with
    those
    parameters, and everything it writes, the executed notebook included, goes under
    `results/custom/<name>/` (`profile` is then ignored); the run record says what changed.
    """
    if _STOPPED:  # a `--jobs` worker
        if _STOPPED[-1]:  # already stopped: start nothing new
            raise Interrupted(chapter, {}, _STOPPED[-1])
        import signal

        _RUNNING.append(chapter)
        try:
            return _run_chapter(chapter, profile, device, refresh, log_output, custom)
        finally:
            _RUNNING.clear()
            for signum in STOPS:
                signal.signal(signum, _job_signal)
    return _run_chapter(chapter, profile, device, refresh, log_output, custom)


def _run_chapter(chapter, profile, device, refresh, log_output, custom) -> dict:
    native = native_results_root() if custom is None else None
    if native is not None:  # not the pin: never into the book's results
        with results_into(native):
            out = _execute(
                chapter, profile, device, refresh, log_output, executed_notebook(chapter)
            )
        return {**out, "native_results": shown_path(native)}
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
    """One run in its own run folder (`.run/<run id>/`, see `core.tools.run_safety`), holding the
    chapter's lock shared."""
    import os
    import uuid

    validate([chapter], profile, device)
    folder = chapter_results(profile, chapter)
    previous_id = os.environ.get(RUN_ID_ENV)
    run_id = uuid.uuid4().hex[:12]
    os.environ[RUN_ID_ENV] = run_id
    try:
        with ChapterLock(folder / ".run") as lock, RunFolder(folder / ".run", run_id):
            return _execute_locked(chapter, profile, device, refresh, log_output, out, record, lock)
    finally:
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
    """Execute the notebook with the run's outputs staged (`engine.paths.output_path`); then, if the
    run is complete and valid (`_invalid`), swap them into place, else leave every result as
    it was and keep the run's record (and failed notebook) in the chapter's run folder."""
    import os

    import papermill as pm

    nb = jupytext.read(notebook_source(chapter))
    nb.metadata.setdefault(
        "kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"}
    )
    run_dir = run_log_path(profile, chapter).parent
    chapter_run = chapter_results(profile, chapter) / ".run"
    partial = run_dir / "partial.ipynb"
    stage = run_dir / STAGE
    needed = check_space(chapter, profile, out, executed_notebook(chapter))
    os.environ[STAGE_ENV] = str(stage)
    os.environ[KERNEL_LOG_ENV] = str(run_dir / "kernel.log")
    start = time.perf_counter()
    error, interrupted, full = None, None, None
    progress = TerminalProgress(chapter, run_dir / "progress.json")
    quiet = _LibraryLog(run_dir / "kernel.log")
    try:
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
                kernel_manager_class=ipc_kernel_manager(),
                # Every cell has finished (or failed) when the kernel is shut down, and each
                # file a cell writes is in place before the cell ends: a graceful exit only
                # adds the kernel's own tear-down, about 0.5 s of every run.
                shutdown_kernel="immediate",
            )
        finally:
            take_sigterm_as_interrupt()  # nbclient's own handlers, removed, leave SIGTERM bare
    except KeyboardInterrupt as err:
        interrupted = stop_signal(err)
        error = f"interrupted ({STOPS[interrupted][0]})"
        executed = None
    except Exception as err:  # noqa: BLE001 - papermill saved the failing notebook already
        error = error_line(err)
        full = disk_full_in(err)
        executed = _read_notebook(partial)
    with signals_held() as came:  # a second Ctrl-C (or SIGTERM) waits for the clean-up
        try:
            summary = _finish(
                chapter, profile, device, out, record, lock, start, executed, error, interrupted
            )
        except OSError as err:
            if not disk_full(err):
                raise
            full = err
            summary = _record_failure(
                chapter, profile, device, start, f"{type(err).__name__}: {err}", record
            )
        finally:
            progress.close()
            quiet.close()
            os.environ.pop(KERNEL_LOG_ENV, None)
            os.environ.pop(STAGE_ENV, None)
        if full is not None:
            summary["error"] = disk_full_message(full, needed)
            summary["disk_full"] = True
            shutil.rmtree(stage, ignore_errors=True)  # frees what this run wrote, for its record
            _write_record(chapter_run / "last-failed-run.json", summary)
    if interrupted is None and came:
        interrupted = came[0]
    if interrupted is not None:
        if _STOPPED:
            _STOPPED.append(interrupted)
        raise Interrupted(chapter, summary, interrupted)
    return summary


def _read_notebook(path: Path):
    """The notebook papermill was writing, or None where it is missing or cut short."""
    try:
        return nbformat.read(path, as_version=4) if path.exists() else None
    except (OSError, ValueError):
        return None


def _write_record(path: Path, summary: dict) -> None:
    """A run record, where it fits: on a full disk a record is not worth a second error."""
    try:
        claims_module.write_json_atomic(path, summary)
    except OSError as err:
        if not disk_full(err):
            raise


def _record_failure(chapter, profile, device, start, error, record) -> dict:
    return {
        "chapter": chapter,
        "profile": profile,
        "device": device_name(device),
        "seconds": round(time.perf_counter() - start, 1),
        "ok": False,
        "error": error,
        "claims": None,
        "claims_ok": False,
        "bad_claims": [],
        "tasks": _task_summary(None),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "promoted": False,
        **(record or {}),
    }


def _invalid(error: str | None, tasks: dict, report: dict | None, chapter: str, profile: str):
    """Why a run's outputs cannot replace the results in place (None: they can): it did not
    complete, a task failed, or its claims report is missing or names a metric the chapter
    did not compute (a typo in the claims file must not rewrite committed records). A claim
    that fails is a result, and is recorded."""
    if error is not None:
        return "the execution did not complete"
    if tasks["failed"]:
        return f"{tasks['failed']} task(s) failed"
    active = [c for c in claims_module.load_claims(chapter) if profile in c["profiles"]]
    if report is None:
        return "no claims report written" if active else None
    missing = [r["id"] for r in report.get("claims", []) if r["status"] == claims_module.MISSING]
    if missing:
        return f"claims whose metric the chapter did not compute: {', '.join(missing)}"
    return None


def _finish(chapter, profile, device, out, record, lock, start, executed, error, interrupted):
    """After the execution: the run's record and, for a complete and valid run, its outputs
    swapped into place; every other ending leaves the results as they were."""
    run_dir = run_log_path(profile, chapter).parent
    stage = run_dir / STAGE
    folder = chapter_results(profile, chapter)
    chapter_run = folder / ".run"
    failed_copy = chapter_run / "failed.ipynb"
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
    staged_report = stage / claims_results(profile).relative_to(results_root()) / f"{chapter}.json"
    try:
        report = json.loads(staged_report.read_text()) if error is None else None
    except (OSError, ValueError):
        report = None
    why_not = _invalid(error, tasks, report, chapter, profile)
    if executed is not None:
        _tag_injected_cell(executed)
        # papermill records where it wrote the notebook: a path of this machine
        executed.metadata.get("papermill", {}).update(input_path=None, output_path=None)
        if why_not is None:
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
    summary = {
        "chapter": chapter,
        "profile": profile,
        "device": device_name(device),
        "kernels": kernels_state(),
        "kernel_variables": kernel_variables(),
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
        "failed_notebook": None,
        **(record or {}),
    }
    if why_not is not None:
        summary["promoted"] = False
        summary["not_promoted"] = why_not
        if executed is not None and interrupted is None:
            write_atomic(failed_copy, nbformat.writes(executed))
            summary["failed_notebook"] = shown_path(failed_copy)
        if staged_report.exists():  # this run's report, for whoever debugs it
            staged_report.replace(chapter_run / "failed-claims.json")
        shutil.rmtree(stage, ignore_errors=True)  # frees what this run wrote, for its record
        _write_record(chapter_run / "last-failed-run.json", summary)
        return summary
    if log is not None:
        if lock.try_exclusive():
            summary["pruned_entries"] = prune_unused(folder, log)
        else:
            summary["pruned_entries"] = 0
            summary["not_pruned"] = "another run of this chapter was in progress"
    # A rerun that reuses the cache is quick; the cached tasks' own times say what the
    # results cost to compute.
    cost = cached_task_cost(folder)
    summary["cached_task_seconds"] = round(cost["seconds"], 1)
    # CPU seconds where the entries record them ("n of m" entries: older ones record wall only)
    summary["cached_task_cpu_seconds"] = round(cost["cpu_seconds"], 1)
    summary["cached_tasks_with_cpu"] = f"{cost['entries_with_cpu']} of {cost['entries']}"
    summary["replaced_entries"] = staged_entries(stage / folder.relative_to(results_root()))
    summary["promoted"] = True
    # Every complete run's record is `.run/last-run.json`; `run.json`, committed with the paper
    # results, is the record of the run that produced them: a run that rendered them again from
    # the cache with the same claims (`make book` on a fresh clone) leaves it alone.
    if not _same_results_as_recorded(folder / "run.json", summary):
        staged_record = stage / folder.relative_to(results_root()) / "run.json"
        claims_module.write_json_atomic(staged_record, summary)
    # everything is written: now swap it into place, all or nothing (`run_safety.swap_in`)
    staged_notebook = write_atomic(run_dir / "publish" / out.name, nbformat.writes(executed))
    promote(stage, results_root(), extra=[(staged_notebook, out)], run=run_dir)
    failed_copy.unlink(missing_ok=True)
    claims_module.write_json_atomic(chapter_run / LAST_RUN, summary)
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

    lines = [  # the table folded: a reader opens it to see how the page was computed
        "## Run record",
        "",
        ":::{dropdown} How this page was computed",
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
        f"| code | commit `{source_commit()}`, which executed this page"
        + (
            "; the results it read from the cache were computed by earlier runs (a figure's "
            "provenance names the commit of the run behind its data)"
            if tasks["cached"]
            else ""
        )
        + " |",
        f"| date | {finished.strftime('%Y-%m-%d %H:%M')} UTC |",
        ":::",
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


def cached_task_seconds(folder: Path) -> float:
    """Total compute time recorded by the cached tasks under a chapter's results folder."""
    return cached_task_cost(folder)["seconds"]


def cached_task_cost(folder: Path) -> dict:
    """What the cached tasks under a chapter's results folder recorded: their wall seconds
    (every entry), and the CPU seconds of the entries that record them (`sweep.TIMING_KEY`;
    older entries have wall seconds only, which count the load that ran beside them)."""
    seconds, cpu, timed, entries = 0.0, 0.0, 0, 0
    for path in folder.glob("*/*.json"):
        try:
            entry = json.loads(path.read_text())
            seconds += float(entry["result"].get("seconds", 0.0))
            entries += 1
            if isinstance(entry.get("timing"), dict):
                cpu, timed = cpu + float(entry["timing"]["cpu_s"]), timed + 1
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not a readable entry (a folder, say): the sweep names it
    return {"seconds": seconds, "cpu_seconds": cpu, "entries_with_cpu": timed, "entries": entries}


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
                state = tally.state(r)  # a known deviation by its cause
                status = f"{state} (stale)" if r["stale"] else state
                lines.append(
                    f"    {status:<19} {r['id']:<44} ours={shown:<12} expect {r['expect']}"
                )
        lines.append(f"  total: {tally.tally_text(prof_rows)}")  # the book's one count
    return "\n".join(lines)


def compare_with_reference(
    selected,
    reference: str,
    candidate: str,
    profile: str,
    tolerances_file: str | dict | None = None,
    summary_path: str | None = None,
    report_dir: str | None = None,
) -> int:
    """Per chapter: claims of the candidate run, and its figures against the reference.

    Prints a table, writes a JSON summary and the figure report (default
    `<candidate>/reports/figures-<profile>/index.html`); returns 0 only if every claim is ok
    and every figure agrees within tolerance.
    """
    from ..site.regression import compare_runs, load_figure_tolerances, write_report

    report = (
        Path(report_dir) if report_dir else Path(candidate) / "reports" / (f"figures-{profile}")
    )
    comparisons = []

    if isinstance(tolerances_file, dict):  # read and checked already
        tolerances = tolerances_file
    else:
        tolerances = load_figure_tolerances(Path(tolerances_file)) if tolerances_file else {}
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
