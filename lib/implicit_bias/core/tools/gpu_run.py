"""The device side of the offline GPU run kit (`bash gpu-kit/run.sh`, built by
`implicit_bias.core.tools.gpu_kit`): run the paper profile of the chapters that the kit parts
present
make runnable, each within its share of one time budget, and write what happened to `$OUT`.

How little recomputes: every chapter runs from a copy of its committed `results/paper/` (in the
kit's scratch folder, published there through `IMPLICIT_BIAS_RESULTS`, so the working tree's
results never change). A task that runs on the device carries it in its cache key
(`task["device"]`), so on CUDA those tasks, and only those, are missing from the copy and
recompute; CPU-only tasks (convex solves, closed forms) are read from it, as long as their code
fingerprint and the CPU kernel configuration are the committed ones. With `--device cpu` (the dry
run) nothing is missing, and the run shows that the cache is read on this Python and these
library versions.

Time: the budget (default `DEFAULT_BUDGET` for the whole book, shared by the parts in proportion
to the weight of their chapters, `chapter_weight`) counts from the moment run.sh started; a
reserve (`reserve_for`) is kept for the comparison and the report. Chapters run cheapest first
(by `chapter_weight`); each gets an equal share of what is left, so
time a quick chapter leaves goes to the later ones. A
chapter that runs out of its share is interrupted (SIGINT: its finished tasks stay cached in the
scratch copy) and reported as timed out; a chapter whose share would be under `MIN_SHARE` is
skipped and reported as such.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

DEFAULT_BUDGET = 540  # seconds for the whole book, all parts: one device command is 10 minutes
# Seconds kept for the comparison with the committed results and the report: a fixed part and
# one per chapter (the comparison of a chapter's figures and the report take a few seconds).
RESERVE_FIXED, RESERVE_PER_CHAPTER = 5.0, 5.0
# A chapter's weight in the split of the budget between parts: a cached run, plus the CPU time
# of the committed tasks that will recompute, capped (a GPU is faster than the CPU, and a
# chapter over its share is cut short anyway). A chapter with no committed results (nothing to
# check a GPU run against) weighs a cached run and runs last in its part.
CACHED_RUN_S, WEIGHT_CAP_S = 30.0, 600.0
MIN_SHARE = 15  # a chapter with less than this is skipped (a cached chapter takes ~15-20 s)
GRACE = 15  # seconds of a chapter's share kept for it to stop when interrupted (then killed)
OUTCOMES = ("ok", "claims changed", "figures differ", "failed", "timed out", "skipped")
CSV_COLUMNS = (
    "date",
    "commit",
    "part",
    "chapter",
    "device",
    "gpu",
    "python",
    "torch",
    "outcome",
    "share_s",
    "wall_s",
    "tasks_computed",
    "tasks_cached",
    "tasks_failed",
    "device_tasks_committed",
    "claims",
    "claims_changed",
    "largest_rel_dev",
)


# -- pure logic (tested without a kit) -----------------------------------------------------------
def chapter_weight(recompute_cpu_s: float, cached_run_s: float | None = None) -> float:
    """A chapter's weight in the split of the budget between parts and in the order of its
    chapters: the seconds of a run from the cache (the committed record's, where that run read
    everything from the cache, at least CACHED_RUN_S: a 6 s record gave part 3 a 12 s budget
    and its chapter was skipped; else CACHED_RUN_S) plus the capped CPU seconds of what
    recomputes."""
    cached = CACHED_RUN_S if cached_run_s is None else max(cached_run_s, CACHED_RUN_S)
    return cached + min(recompute_cpu_s, WEIGHT_CAP_S)


def part_budget(total: float, part_weights: list[float], all_weights: list[float]) -> float:
    """A part's share of the whole book's budget, in proportion to its chapters' weights."""
    whole = sum(all_weights)
    return total * sum(part_weights) / whole if whole > 0 else 0.0


def reserve_for(chapters: int) -> float:
    return RESERVE_FIXED + RESERVE_PER_CHAPTER * chapters


def chapter_share(remaining: float, chapters_left: int, reserve: float) -> float:
    """The seconds the next chapter gets: an equal share of what is left after the reserve."""
    if chapters_left <= 0:
        return 0.0
    return max(0.0, (remaining - reserve) / chapters_left)


def run_order(estimates: dict[str, float]) -> list[str]:
    """Chapters cheapest first (by weight: `chapter_weight`), so the
    time a quick one leaves over goes to the expensive ones; ties keep book order."""
    order = list(estimates)
    return sorted(order, key=lambda c: (estimates[c], order.index(c)))


def claim_changes(committed: dict | None, candidate: dict | None) -> list[str]:
    """`id: before -> after` for every claim whose status differs between two claims reports
    (a claim present in only one of them shows `missing` on the other side)."""
    if committed is None or candidate is None:
        return []
    before = {row["id"]: row["status"] for row in committed.get("claims", [])}
    after = {row["id"]: row["status"] for row in candidate.get("claims", [])}
    return [
        f"{claim}: {before.get(claim, 'missing')} -> {after.get(claim, 'missing')}"
        for claim in sorted(set(before) | set(after))
        if before.get(claim) != after.get(claim)
    ]


def outcome(run: dict | None, timed_out: bool, changes: list[str]) -> str:
    if timed_out:
        return "timed out"
    if not run or not run.get("ok"):
        return "failed"
    return "claims changed" if changes else "ok"


def counts_text(counts: dict | None) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted((counts or {}).items())) or "-"


def summary_markdown(meta: dict, rows: list[dict]) -> str:
    """The run's summary: one row per chapter of the part, then what was skipped or cut short."""
    lines = [
        f"# GPU kit run, part {meta['part']} (device: {meta['device']}; {meta['gpu']})",
        "",
        f"Python {meta['python']}, torch {meta['torch']}, commit {meta['commit']}; budget "
        f"{meta['budget_s']:.0f} s, wall time {meta['wall_s']:.0f} s (install and checks "
        f"{meta['setup_s']:.0f} s).",
        "",
        "| chapter | outcome | wall (s) | share (s) | tasks computed / cached / failed "
        "| device tasks in committed results | claims | claim status changes "
        "| largest rel. deviation of figure data |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        dev = row.get("largest_rel_dev")
        lines.append(
            f"| {row['chapter']} | {row['outcome']} | {row['wall_s']:.0f} | {row['share_s']:.0f} "
            f"| {row['tasks_computed']} / {row['tasks_cached']} / {row['tasks_failed']} "
            f"| {row['device_tasks_committed']} | {row['claims']} "
            f"| {'; '.join(row['changes']) or 'none'} "
            f"| {'-' if dev is None else f'{dev:.2e}'} |"
        )
    skipped = [r for r in rows if r["outcome"] in ("skipped", "timed out")]
    if skipped:
        lines += ["", "Not completed within the budget (no comparison; rerun with more time):"]
        lines += [f"- {r['chapter']}: {r['outcome']} ({r.get('note', '')})" for r in skipped]
    differ = [r for r in rows if r.get("figure_problems")]
    if differ:
        lines += ["", "Figures outside their tolerances (figure-report.tar.gz shows them):"]
        lines += [f"- {p}" for r in differ for p in r["figure_problems"][:10]]
    if meta.get("not_in_part"):
        lines += ["", f"Chapters of other parts: {', '.join(meta['not_in_part'])}."]
    return "\n".join(lines) + "\n"


def csv_text(meta: dict, rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        dev = row.get("largest_rel_dev")
        writer.writerow(
            {
                **{k: meta[k] for k in ("date", "commit", "part", "device", "gpu")},
                "python": meta["python"],
                "torch": meta["torch"],
                **{k: row[k] for k in ("chapter", "outcome", "tasks_computed", "tasks_cached")},
                "share_s": round(row["share_s"]),
                "wall_s": round(row["wall_s"], 1),
                "tasks_failed": row["tasks_failed"],
                "device_tasks_committed": row["device_tasks_committed"],
                "claims": row["claims"],
                "claims_changed": len(row["changes"]),
                "largest_rel_dev": "" if dev is None else f"{dev:.3g}",
            }
        )
    return out.getvalue()


# -- the run -------------------------------------------------------------------------------------
def add_run_arguments(parser) -> None:
    parser.add_argument("--part", type=int, default=1, help="the kit part to run (default 1)")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help=f"seconds for this command, from run.sh's start (default: the part's share of "
        f"{DEFAULT_BUDGET})",
    )
    parser.add_argument("--chapters", default=None, help="only these chapters of the part")
    parser.add_argument(
        "--out", default=None, help="output folder (default $OUT, else results-gpu)"
    )
    parser.add_argument("--started", type=float, default=None, help=argparse_hidden())
    parser.add_argument("--work", default=None, help=argparse_hidden())


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def committed_device_tasks(folder: Path) -> tuple[int, float]:
    """Committed cache entries of a chapter whose task carries a device (they recompute on
    another device), and the seconds they took."""
    count, seconds = 0, 0.0
    for path in folder.rglob("*.json"):
        if path.name == "run.json" or ".run" in path.parts:
            continue
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and "device" in (entry.get("task") or {}):
            count += 1
            seconds += float((entry.get("result") or {}).get("seconds") or 0.0)
    return count, seconds


def _unpack_datasets(parts: list[Path], data_root: Path) -> list[str]:
    """Unpack the idx files the carried parts hold into `data_root` (once: an unpacked file is
    kept on a warm machine), and return the datasets whose files are all there, verified. A
    dataset spread over several parts is returned once its last part has been carried."""
    from ..engine.data import CHECKSUMS, verify

    seen = set()
    for part in parts:
        for folder in sorted((part / "data").glob("*")):
            dataset = folder.name
            (data_root / dataset).mkdir(parents=True, exist_ok=True)
            for packed in sorted(folder.glob("*.xz")):
                target = data_root / dataset / packed.stem
                if target.exists():
                    continue
                partial = target.with_name(target.name + ".unpacking")
                with lzma.open(packed) as fin, open(partial, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                partial.replace(target)
            seen.add(dataset)
    for folder in sorted(data_root.glob("*")):  # unpacked by an earlier command here
        if folder.is_dir() and folder.name in CHECKSUMS:
            seen.add(folder.name)
    found = []
    for dataset in sorted(seen):
        if all((data_root / dataset / name).is_file() for name in CHECKSUMS[dataset]):
            verify(dataset, data_root)  # the loader's SHA-256 of every idx file
            found.append(dataset)
    return found


def _copy_committed(root: Path, results: Path, chapter: str) -> None:
    """The chapter's committed paper results, as the starting cache of its run."""
    src, dst = root / "results" / "paper", results / "paper"
    for sub in (Path(chapter), Path("figures") / chapter):
        shutil.rmtree(dst / sub, ignore_errors=True)
        if (src / sub).is_dir():
            shutil.copytree(src / sub, dst / sub)
    # the run records are this run's to write: the committed one must not pass for it
    (dst / chapter / "run.json").unlink(missing_ok=True)
    shutil.rmtree(dst / chapter / ".run", ignore_errors=True)
    (dst / "claims").mkdir(parents=True, exist_ok=True)
    claims = src / "claims" / f"{chapter}.json"
    (dst / "claims" / f"{chapter}.json").unlink(missing_ok=True)
    if claims.is_file():
        shutil.copy2(claims, dst / "claims" / f"{chapter}.json")


def _run_chapter(chapter: str, device: str, share: float, env: dict, log) -> tuple[float, bool]:
    """Run one chapter's paper profile within `share` seconds; (wall seconds, timed out)."""
    command = [sys.executable, "-m", "implicit_bias", "run", chapter, "--profile", "paper"]
    command += ["--device", device]
    log.write(f"\n=== {chapter} (share {share:.0f} s): {' '.join(command[1:])}\n")
    log.flush()
    start = time.monotonic()
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    timed_out = False
    try:
        process.wait(timeout=max(1.0, share - GRACE))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGINT)  # the runner keeps every finished task
        try:
            process.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return time.monotonic() - start, timed_out


def _kernelspec(work: Path) -> Path:
    """A `python3` kernel spec that runs this interpreter (with this PYTHONPATH), in a folder
    that JUPYTER_PATH puts before any other: papermill starts the chapters' kernel by name, and
    a `python3` spec elsewhere on the machine may name another Python."""
    folder = work / "jupyter"
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return folder


def _run_record(folder: Path) -> dict | None:
    """The record of the chapter's complete run just made (`run.json`, which the copy of the
    committed results no longer holds, or the runner's `.run/last-run.json`), None if none."""
    for path in (folder / "run.json", folder / ".run" / "last-run.json"):
        record = _read_json(path)
        if record is not None:
            return record
    return None


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _missing_modules(root: Path) -> list[str]:
    import importlib.util

    from .kit_contents import third_party_imports

    return sorted(m for m in third_party_imports(root) if importlib.util.find_spec(m) is None)


def run_kit(args, root: Path) -> int:
    from ..engine.paths import chapters
    from .kit_contents import KIT, WORK, chapter_needs, chapter_sources

    started = args.started or time.time()
    kit = root / KIT
    manifest = _read_json(kit / "kit.json")
    if manifest is None:
        print(f"error: no kit in {kit} (kit.json missing): run `make gpu-kit`", file=sys.stderr)
        return 2
    out = Path(args.out or os.environ.get("OUT") or root / "results-gpu").resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or root / WORK).resolve()
    present = {
        p["number"]: root / p["folder"]
        for p in manifest["parts"]
        if (root / p["folder"] / "part.json").is_file()
    }
    installed = {int(s.name.split("-")[1]) for s in work.glob("site-[0-9]*")}
    base = manifest.get("base_parts", 1)  # parts holding wheels every chapter needs
    if args.part < base:  # run.sh installed its wheels; no chapter can run before the last
        if args.part not in present and args.part not in installed:
            print(
                f"error: kit part {args.part} is neither carried here nor installed",
                file=sys.stderr,
            )
            return 2
        print(
            f"part {args.part} holds wheels every chapter needs: installed; on this machine, "
            f"carry {KIT}-{args.part + 1} next and run `bash {KIT}/run.sh --part {args.part + 1}`"
        )
        return 0
    holds = {
        key: p["number"] for p in manifest["parts"] for key in [*p["data"], *_extra_wheels(p, base)]
    }
    part_of = {}
    for chapter in chapters():  # the book's chapters now, whether or not the kit knew them
        needs = chapter_needs(chapter_sources(chapter, root))
        part_of[chapter] = max([base, *(holds.get(n, 10**6) for n in needs)])
    selected = [c for c, p in part_of.items() if p == args.part]
    if args.chapters:
        wanted = args.chapters.split()
        unknown = [c for c in wanted if c not in selected]
        if unknown:
            print(f"error: not chapters of part {args.part}: {unknown}", file=sys.stderr)
            return 2
        selected = wanted
    needed_parts = {*range(1, base + 1), args.part}
    absent = sorted(n for n in needed_parts if n not in present and n not in installed)
    if absent:
        print(
            f"error: part {args.part} needs kit part(s) {absent}, neither carried here nor "
            f"installed by an earlier command on this machine (run part 1 first, on the same "
            f"warm machine)",
            file=sys.stderr,
        )
        return 2
    missing = _missing_modules(root)
    optional = {
        m for p in manifest["parts"] for w in _extra_wheels(p, base, modules=True) for m in w
    }
    fatal = [m for m in missing if m not in optional]
    if fatal:
        print(
            f"error: modules the book imports are missing: {', '.join(fatal)} (neither in the "
            f"image nor in the kit's installed parts; see .ci/gpu-image-packages.txt)",
            file=sys.stderr,
        )
        return 2
    import torch

    from ..engine.device import describe_device, resolve_device

    try:  # only the device module asks torch about CUDA (tests/core/test_device.py)
        device = resolve_device(args.device)
    except ValueError:
        print(
            f"error: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device "
            f"(is the driver visible? nvidia-smi); --device cpu runs the dry run",
            file=sys.stderr,
        )
        return 3
    gpu = describe_device(device) if device.type == "cuda" else "no GPU"
    data_root = work / "data"
    os.environ["IMPLICIT_BIAS_DATA"] = str(data_root)
    datasets = _unpack_datasets([present[n] for n in sorted(present)], data_root)
    results = work / "results"
    env = {
        **os.environ,
        "IMPLICIT_BIAS_RESULTS": str(results),
        "IMPLICIT_BIAS_DATA": str(data_root),
        "JUPYTER_PATH": str(_kernelspec(work)),
    }
    weights, device_tasks, last = {}, {}, set()
    for chapter in part_of:
        committed = root / "results" / "paper" / chapter
        device_tasks[chapter], seconds = committed_device_tasks(committed)
        record = _read_json(committed / "run.json")
        if record is None:  # nothing committed to check: it runs last, with what is left
            seconds, cached_run = 0.0, None
            last.add(chapter)
        else:  # on the CPU, committed device tasks are read from the cache
            seconds = seconds if args.device != "cpu" else 0.0
            computed = (record.get("tasks") or {}).get("computed")
            cached_run = record.get("seconds") if computed == 0 else None
        weights[chapter] = chapter_weight(seconds, cached_run)
    budget = args.budget
    if budget is None:
        budget = part_budget(DEFAULT_BUDGET, [weights[c] for c in selected], list(weights.values()))
    deadline = started + budget
    reserve = reserve_for(len(selected))
    setup_s = time.time() - started
    print(
        f"part {args.part}: {len(selected)} chapters ({', '.join(selected) or 'none'}), "
        f"device {args.device} ({gpu}), datasets {', '.join(datasets) or 'none'}, budget "
        f"{budget:.0f} s ({setup_s:.0f} s spent installing and checking)",
        flush=True,
    )
    rows = []
    with open(out / "run.log", "a") as log:
        order = run_order({c: float("inf") if c in last else weights[c] for c in selected})
        for i, chapter in enumerate(order):
            share = chapter_share(deadline - time.time(), len(order) - i, reserve)
            row = {
                "chapter": chapter,
                "share_s": share,
                "wall_s": 0.0,
                "tasks_computed": 0,
                "tasks_cached": 0,
                "tasks_failed": 0,
                "device_tasks_committed": device_tasks[chapter],
                "claims": "-",
                "changes": [],
                "largest_rel_dev": None,
            }
            if share < MIN_SHARE:
                row.update(outcome="skipped", note=f"{share:.0f} s left for it")
                rows.append(row)
                print(f"  {chapter}: skipped ({share:.0f} s left for it)", flush=True)
                continue
            _copy_committed(root, results, chapter)
            wall, timed_out = _run_chapter(chapter, args.device, share, env, log)
            folder = results / "paper" / chapter
            run = None if timed_out else _run_record(folder)
            record = run or _read_json(folder / ".run" / "last-failed-run.json") or {}
            tasks = record.get("tasks") or {}
            changes = claim_changes(
                _read_json(root / "results" / "paper" / "claims" / f"{chapter}.json"),
                _read_json(results / "paper" / "claims" / f"{chapter}.json") if run else None,
            )
            row.update(
                wall_s=wall,
                tasks_computed=tasks.get("computed", 0),
                tasks_cached=tasks.get("cached", 0),
                tasks_failed=tasks.get("failed", 0),
                claims=counts_text(run.get("claims")) if run else "-",
                changes=changes,
                outcome=outcome(run, timed_out, changes),
            )
            if timed_out:
                row["note"] = f"interrupted after {wall:.0f} s; its finished tasks stay cached"
            elif not run:
                row["note"] = str(record.get("error") or "see run.log")
            rows.append(row)
            print(
                f"  {chapter}: {row['outcome']} in {wall:.0f} s (share {share:.0f} s); tasks "
                f"{row['tasks_computed']} computed, {row['tasks_cached']} cached",
                flush=True,
            )
    completed = [r["chapter"] for r in rows if r["outcome"] in ("ok", "claims changed", "failed")]
    _compare(root, results, out, completed, rows, work)
    meta = {
        "date": datetime.now(UTC).date().isoformat(),
        "commit": _commit(root, manifest),
        "part": args.part,
        "device": args.device,
        "gpu": gpu,
        "python": ".".join(map(str, sys.version_info[:3])),
        "torch": torch.__version__,
        "budget_s": budget,
        "setup_s": setup_s,
        "wall_s": time.time() - started,
        "not_in_part": sorted(c for c in part_of if c not in selected),
    }
    (out / "summary.md").write_text(summary_markdown(meta, rows))
    (out / "summary.json").write_text(json.dumps({"meta": meta, "chapters": rows}, indent=1))
    (out / "gpu.csv").write_text(csv_text(meta, rows))
    print((out / "summary.md").read_text())
    bad = [r for r in rows if r["outcome"] != "ok"]
    return 1 if bad else 0


def _extra_wheels(part: dict, base: int = 1, modules: bool = False) -> list:
    """A part's wheels that not every chapter needs (by name, or their module lists): those
    the kit marks optional, or, in a kit that marks none, every wheel of a part after the
    `base` parts."""
    from .kit_contents import wheel_name

    wheels = [w for w in part["wheels"] if w.get("optional", part["number"] > base)]
    if modules:
        return [w.get("modules", []) for w in wheels]
    return [wheel_name(Path(w["file"]).name) for w in wheels]


def _compare(root: Path, results: Path, out: Path, completed, rows, work: Path) -> None:
    """The comparison of the completed chapters with the committed results (the `compare`
    command's machinery), packed with its figure report into `out`."""
    from .runner import compare_with_reference

    report = work / "figure-report"
    shutil.rmtree(report, ignore_errors=True)
    summary_path = work / "compare.json"
    summary_path.unlink(missing_ok=True)
    if completed:
        tolerances = root / ".ci" / "gpu-tolerances.yaml"
        compare_with_reference(
            completed,
            str(root / "results"),
            str(results),
            "paper",
            str(tolerances) if tolerances.is_file() else None,
            str(summary_path),
            str(report),
        )
    compared = _read_json(summary_path) or {}
    for row in rows:
        entry = compared.get(row["chapter"])
        if entry:
            row["largest_rel_dev"] = entry.get("largest_relative_deviation")
            row["figure_problems"] = entry.get("problems", [])
            if row["figure_problems"] and row["outcome"] == "ok":
                row["outcome"] = "figures differ"
                row["note"] = "; ".join(row["figure_problems"][:3])
    if report.is_dir():
        with tarfile.open(out / "figure-report.tar.gz", "w:gz") as tar:
            tar.add(report, arcname="figure-report")


def _commit(root: Path, manifest: dict) -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        )
        if head.returncode == 0 and head.stdout.strip():
            return head.stdout.strip()
    except OSError:
        pass
    return str(manifest.get("commit", "unknown"))
