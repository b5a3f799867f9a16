"""Time every chapter of the book from an empty cache, as a reader who changed shared code would.

Each chapter runs in its own process (`python -m implicit_bias run <chapter>`) against a fresh,
temporary results folder, so nothing is read from the cache. One row per chapter goes to
`benchmarks/results/book.csv` (rows of the same chapter, profile and device are replaced):

    chapter, profile, device, kernels, wall_s, task_s, cpu_s, cpu_tasks, tasks, peak_rss_mb, cpu,
    cores, commit, date

`wall_s` is the chapter's wall time, `task_s` the summed compute time of its tasks (what a
machine with more cores could spread; each task's own wall seconds, so it grows with whatever
load ran beside it), `cpu_s` the CPU seconds of the `cpu_tasks` tasks whose cache entry records
them (`timing.cpu_s`: the task process's, every thread; entries older than that record have
none, so `cpu_tasks` says what `cpu_s` covers), `peak_rss_mb` the largest resident memory of
any of its processes (the notebook kernel included). A `total` row per profile and device sums the
chapters the file holds (measured at different commits when their `commit` differs).

`--from-entries` times nothing: it sums the task seconds recorded in the committed cache
entries of every chapter (`results/<profile>/<chapter>/`, each entry's own `seconds`) into one
row, `whole book from committed entries`, whose `wall_s` is that sum over the cores: the floor
of a run from an empty cache with every core busy. Use it where a full run does not fit (the
paper book at its confirmatory seed counts: hours on 2 cores); the entries were computed at
different commits and loads, so it is an estimate, and its row says so.

`--together` times the whole book as `make run` executes it instead: one
`python -m implicit_bias run --jobs JOBS` of every chapter (two at a time by default, each with
its sweep processes) against one empty results folder; its row is `whole book (run --jobs N)`,
which the `total` row does not count. Its `task_s` sums each task's wall time while two
chapters share the cores, so it exceeds the CPU time the tasks took.

    python benchmarks/bench_book.py [--profile smoke|paper] [--device cpu] [CHAPTER ...]
    python benchmarks/bench_book.py --together [--jobs 2] [--profile paper]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from implicit_bias.core.chapter import chapters as all_chapters  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "book.csv"
# rows that time more than one chapter, kept beside the chapters' rows but not summed with them:
# the whole book as `make run` executes it, and `make test` on a clean clone (recorded by hand)
NOT_CHAPTERS = ("whole book", "make test")
COLUMNS = [
    "chapter",
    "profile",
    "device",
    "kernels",
    "wall_s",
    "task_s",
    "cpu_s",
    "cpu_tasks",
    "tasks",
    "peak_rss_mb",
    "cpu",
    "cores",
    "commit",
    "date",
]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (out.stdout.strip() or "unknown") + ("+changes" if dirty else "")


TOGETHER = "whole book (run --jobs {jobs})"


def measure(
    chapter: str, profile: str, device: str, keep: Path | None = None, jobs: int = 1
) -> dict:
    """Run one chapter (or, as TOGETHER, every chapter `jobs` at a time) from an empty cache in
    a fresh child of this script (`--one`), so that its peak memory is its own; its wall time,
    task time and peak memory."""
    cmd = [sys.executable, __file__, "--one", chapter, "--profile", profile, "--device", device]
    cmd += [] if keep is None else ["--keep", str(keep)]
    cmd += ["--jobs", str(jobs)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
        raise SystemExit(f"{chapter} failed:\n" + "\n".join(tail))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_here(
    chapter: str, profile: str, device: str, keep: Path | None = None, jobs: int = 1
) -> dict:
    """What `measure` reports, measured in this process: the chapter runs in a child (the
    runner, which starts the notebook kernel); `RUSAGE_CHILDREN` then holds the largest resident
    memory of every process below this one. With `keep`, the results folder is `keep` (which
    must not exist yet) and stays, so that what was computed can be used."""
    together = chapter.startswith("whole book")
    names = all_chapters() if together else [chapter]
    if keep is not None and keep.exists():
        raise SystemExit(f"--keep {keep}: exists; give a new folder (the cache must start empty)")
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{chapter}-")
        if keep is None
        else contextlib.nullcontext(str(keep))
    ) as tmp:
        env = dict(os.environ, IMPLICIT_BIAS_RESULTS=tmp)
        cmd = [sys.executable, "-m", "implicit_bias", "run", *names]
        cmd += ["--profile", profile, "--device", device, "--jobs", str(jobs)]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        runs = [Path(tmp) / profile / name / "run.json" for name in names]
        if proc.returncode != 0 or not all(run.exists() for run in runs):
            sys.stdout.write(proc.stdout + proc.stderr)
            raise SystemExit(1)
        records = [json.loads(run.read_text()) for run in runs]
        by_function: dict[str, list] = {}
        cpu_s, cpu_tasks = 0.0, 0
        for name in names:
            for fn, slot in task_seconds_by_function(Path(tmp) / profile / name).items():
                by_function[f"{name}.{fn}" if together else fn] = slot
            seconds, count = task_cpu_seconds(Path(tmp) / profile / name)
            cpu_s, cpu_tasks = cpu_s + seconds, cpu_tasks + count
    return {
        "chapter": chapter,
        "profile": profile,
        "device": records[0].get("device", device),
        "kernels": records[0].get("kernels", ""),
        "wall_s": round(wall, 1),
        "task_s": round(sum(float(r.get("cached_task_seconds", 0.0)) for r in records), 1),
        "cpu_s": round(cpu_s, 1),
        "cpu_tasks": cpu_tasks,
        "tasks": sum(r["tasks"]["computed"] for r in records),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "by_function": by_function,
    }


def task_seconds_by_function(folder: Path) -> dict[str, list]:
    """Where a chapter's task time went: {task function: [tasks, summed seconds]}, read from the
    cache entries the run wrote (each result's own `seconds`, where the task records one)."""
    out: dict[str, list] = {}
    for entry in sorted(folder.glob("*/*.json")):
        try:
            record = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "fn" not in record:
            continue
        name = record["fn"].rsplit(":", 1)[-1]
        seconds = (record.get("result") or {}).get("seconds") or 0.0
        slot = out.setdefault(name, [0, 0.0])
        slot[0] += 1
        slot[1] = round(slot[1] + float(seconds), 1)
    return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))


def task_cpu_seconds(folder: Path) -> tuple[float, int]:
    """The CPU seconds the cache entries under `folder` record (`timing.cpu_s`), summed, and
    how many entries record them."""
    total, count = 0.0, 0
    for entry in sorted(folder.glob("*/*.json")):
        try:
            record = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        timing = record.get("timing") if isinstance(record, dict) else None
        if isinstance(timing, dict) and isinstance(timing.get("cpu_s"), (int, float)):
            total, count = total + float(timing["cpu_s"]), count + 1
    return total, count


def from_entries(profile: str, chapters: list[str]) -> dict:
    """The row of `--from-entries`: the task seconds of the committed cache entries of
    `chapters` at `profile`, summed, and over this machine's cores as the wall floor."""
    task_s, tasks, cpu_s, cpu_tasks = 0.0, 0, 0.0, 0
    for chapter in chapters:
        by_function = task_seconds_by_function(ROOT / "results" / profile / chapter)
        seconds = sum(s for _, s in by_function.values())
        count = sum(n for n, _ in by_function.values())
        cpu, with_cpu = task_cpu_seconds(ROOT / "results" / profile / chapter)
        print(
            f"  {chapter}: {count} tasks, {seconds:.0f} task-s; CPU recorded for {with_cpu}"
            f" of them: {cpu:.0f} CPU-s",
            flush=True,
        )
        task_s, tasks = task_s + seconds, tasks + count
        cpu_s, cpu_tasks = cpu_s + cpu, cpu_tasks + with_cpu
    cores = os.cpu_count() or 1
    return {
        "chapter": f"whole book from committed entries (task-s / {cores} cores, an estimate)",
        "profile": profile,
        "device": "cpu",
        "kernels": "AVX2 (pinned)",
        "wall_s": round(task_s / cores, 1),
        "task_s": round(task_s, 1),
        "cpu_s": round(cpu_s, 1),
        "cpu_tasks": cpu_tasks,
        "tasks": tasks,
        "peak_rss_mb": "",
    }


def write(rows: list[dict], path: Path) -> list[dict]:
    """Merge `rows` into the CSV at `path`: a row replaces the one of the same chapter, profile
    and device; each profile and device with chapter rows gets a `total` row summing them (wall
    and task time, tasks; the largest peak memory); the rows come back sorted."""
    kept = []
    if path.exists():
        with path.open() as f:
            kept = list(csv.DictReader(f))
    keys = {(r["chapter"], r["profile"], r["device"]) for r in rows}
    merged = [r for r in kept if (r["chapter"], r["profile"], r["device"]) not in keys] + rows
    merged = [r for r in merged if r["chapter"] != "total"]
    for profile, device in sorted({(r["profile"], r["device"]) for r in merged}):
        part = [
            r
            for r in merged
            if (r["profile"], r["device"]) == (profile, device)
            and not r["chapter"].startswith(NOT_CHAPTERS)
        ]
        if not part:  # a file that holds only a whole-book row has no chapters to sum
            continue
        merged.append(
            {
                "chapter": "total",
                "profile": profile,
                "device": device,
                "wall_s": round(sum(float(r["wall_s"]) for r in part), 1),
                "task_s": round(sum(float(r["task_s"]) for r in part), 1),
                "cpu_s": round(sum(float(r.get("cpu_s") or 0) for r in part), 1),
                "cpu_tasks": sum(int(r.get("cpu_tasks") or 0) for r in part),
                "tasks": sum(int(r["tasks"]) for r in part),
                "peak_rss_mb": round(max(float(r.get("peak_rss_mb") or 0) for r in part)),
                "kernels": ", ".join(sorted({str(r.get("kernels", "")) for r in part})),
                "commit": ", ".join(sorted({str(r.get("commit", "")) for r in part})),
            }
        )
    merged.sort(
        key=lambda r: (
            r["profile"],
            r["device"],
            r["chapter"].startswith("whole book") * 2 + (r["chapter"] == "total"),
            r["chapter"],
        )
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in COLUMNS} for r in merged)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", help="default: every chapter")
    parser.add_argument("--profile", default="smoke", choices=["smoke", "paper"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--keep", type=Path, help="a new folder for the results (one chapter), kept afterwards"
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="time every chapter in one `run --jobs JOBS`, as `make run` executes the book",
    )
    parser.add_argument("--jobs", type=int, default=2, help="with --together (default 2)")
    parser.add_argument(
        "--from-entries",
        action="store_true",
        help="sum the committed cache entries' task seconds instead of running (an estimate)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        out = measure_here(args.one, args.profile, args.device, args.keep, args.jobs)
        print(json.dumps(out))
        return
    if args.together and args.chapters:
        parser.error("--together times every chapter; name none")
    if args.keep is not None and len(args.chapters) != 1 and not args.together:
        parser.error("--keep takes one chapter (or --together)")
    unknown = sorted(set(args.chapters) - set(all_chapters()))
    if unknown:
        parser.error(f"unknown chapter(s) {', '.join(unknown)}; valid: {', '.join(all_chapters())}")
    context = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "commit": commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    if args.from_entries:
        write(
            [{**from_entries(args.profile, args.chapters or all_chapters()), **context}], args.out
        )
        print(f"wrote {args.out}")
        return
    rows = []
    names = [TOGETHER.format(jobs=args.jobs)] if args.together else args.chapters or all_chapters()
    for chapter in names:
        print(f"{chapter} ({args.profile}, empty cache) ...", flush=True)
        jobs = args.jobs if args.together else 1
        row = {**measure(chapter, args.profile, args.device, args.keep, jobs), **context}
        print(
            f"  {row['wall_s']} s wall, {row['task_s']} task-s, {row['tasks']} tasks, "
            f"peak {row['peak_rss_mb']} MB",
            flush=True,
        )
        for name, (count, seconds) in row.pop("by_function", {}).items():
            print(f"    {name}: {count} tasks, {seconds} s", flush=True)
        rows.append(row)
    write(rows, args.out)
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
