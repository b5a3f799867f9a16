"""Which committed paper numbers changed when the results were recomputed, and by how much.

Compares the paper results committed at an earlier revision (default: the last commit before the
code-aware cache, 96eb815) with the ones in the working tree: cache entries matched by their
task parameters (the `device` key, added to every task by the new cache, is ignored), and the
claims reports' metric values and statuses. For each task function and output it gives the
number of tasks compared and the largest change, relative for values of the output's own scale
and absolute for its round-off-level values (the rule of
`implicit_bias.core.tools.verify.compare_results`).

Where the task code did not change, a change is the CPU: the earlier results were computed on
other machines (AVX-512 kernels and others) than the recomputation.

Usage: python benchmarks/recompute_changes.py [--before REV] [--out FILE] [CHAPTER ...]
(writes benchmarks/results/recompute_changes.md, or FILE)
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from implicit_bias.core.engine.paths import write_atomic
from implicit_bias.core.tools.verify import committed_entries, compare_results

ROOT = Path(__file__).resolve().parents[1]
NO_TOLERANCE = {"default": {"rtol": 0.0, "atol": 0.0}, "functions": {}}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def _task_key(task: dict) -> str:
    return json.dumps({k: v for k, v in task.items() if k != "device"}, sort_keys=True)


def old_entries(rev: str, chapter: str) -> dict[tuple[str, str], dict]:
    """{(sweep, task key): entry} of `chapter`'s paper results at `rev` (old or new format)."""
    out = {}
    listing = _git("ls-tree", "-r", "--name-only", rev, f"results/paper/{chapter}")
    for name in listing.split():
        parts = Path(name).parts
        if len(parts) != 5 or len(Path(name).stem) != 64:
            continue
        entry = json.loads(_git("show", f"{rev}:{name}"))
        out[(parts[3], _task_key(entry["task"]))] = entry
    return out


def old_claims(rev: str, chapter: str) -> dict | None:
    try:
        return json.loads(_git("show", f"{rev}:results/paper/claims/{chapter}.json"))
    except subprocess.CalledProcessError:
        return None


def compare_chapter(rev: str, chapter: str) -> tuple[list[dict], list[dict], dict]:
    before = old_entries(rev, chapter)
    outputs: dict[tuple[str, str], dict] = {}
    matched = set()
    for _, path, entry in committed_entries("paper", [chapter]):
        if entry is None:
            continue
        key = (path.parent.name, _task_key(entry["task"]))
        old = before.get(key)
        if old is None:
            continue
        matched.add(key)
        _, spread = compare_results(old["result"], entry["result"], entry["fn"], NO_TOLERANCE)
        for output, worst in spread.items():
            if output in ("device", "status"):
                continue
            row = outputs.setdefault(
                (entry["fn"].split(":")[1], output),
                {"tasks": 0, "rel": 0.0, "abs_small": 0.0, "text": False},
            )
            row["tasks"] += 1
            if worst.get("text"):
                row["text"] = True
            else:
                row["rel"] = max(row["rel"], worst["rel_of_large"])
                row["abs_small"] = max(row["abs_small"], worst["abs_of_small"])
    rows = [{"fn": fn, "output": output, **row} for (fn, output), row in sorted(outputs.items())]

    claims = []
    old_report = old_claims(rev, chapter)
    new_path = ROOT / "results/paper/claims" / f"{chapter}.json"
    if old_report and new_path.exists():
        new = {c["id"]: c for c in json.loads(new_path.read_text())["claims"]}
        for claim in old_report["claims"]:
            now = new.get(claim["id"])
            if now is None:
                continue
            a, b = claim.get("value"), now.get("value")
            rel = (
                abs(a - b) / abs(a)
                if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a
                else (0.0 if a == b else None)
            )
            claims.append(
                {
                    "id": claim["id"],
                    "before": a,
                    "after": b,
                    "rel": rel,
                    "status_before": claim["status"],
                    "status_after": now["status"],
                }
            )
    counts = {"before": len(before), "matched": len(matched)}
    return rows, claims, counts


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*")
    parser.add_argument("--before", default="96eb815")
    parser.add_argument("--out", type=Path, default=None, help="the report's file")
    args = parser.parse_args()
    chapters = args.chapters or sorted({c for c, _, _ in committed_entries("paper")})
    lines = [
        f"# Paper results before ({args.before}) and after their recomputation",
        "",
        "Largest change per task function and output over the tasks present in both "
        "(relative for values of the output's own scale, absolute for round-off-level "
        "values); outputs that did not change at all are left out. Then every claim whose "
        "metric value changed.",
        "",
    ]
    for chapter in chapters:
        rows, claims, counts = compare_chapter(args.before, chapter)
        lines += [
            f"## {chapter}",
            "",
            f"{counts['matched']} of {counts['before']} earlier tasks recomputed with "
            "the same parameters.",
            "",
        ]
        changed = [r for r in rows if r["text"] or r["rel"] > 0 or r["abs_small"] > 0]
        same = sorted({r["fn"] for r in rows} - {r["fn"] for r in changed})
        if changed:
            lines += [
                "| task function | output | tasks | max rel. change | max abs. change "
                "of small values |",
                "|---|---|---|---|---|",
            ]
            lines += [
                f"| {r['fn']} | {r['output']} | {r['tasks']} | "
                f"{'text differs' if r['text'] else _fmt(r['rel'])} | "
                f"{_fmt(r['abs_small'])} |"
                for r in changed
            ]
            lines.append("")
        if same:
            lines += ["Bit-identical: " + ", ".join(same) + ".", ""]
        moved = [c for c in claims if c["rel"] != 0.0 or c["status_before"] != c["status_after"]]
        if moved:
            lines += ["| claim | before | after | rel. change | status |", "|---|---|---|---|---|"]
            lines += [
                f"| {c['id']} | {_fmt(c['before'])} | {_fmt(c['after'])} | "
                f"{_fmt(c['rel'])} | {c['status_before']}"
                + (
                    ""
                    if c["status_before"] == c["status_after"]
                    else f" -> **{c['status_after']}**"
                )
                + " |"
                for c in moved
            ]
            lines.append("")
        lines += [f"{len(claims) - len(moved)} claims with identical values and statuses.", ""]
    out = args.out or ROOT / "benchmarks/results/recompute_changes.md"
    write_atomic(out, "\n".join(lines))
    print(out.read_text())


if __name__ == "__main__":
    main()
