"""Do any claims depend on the CPU? Recompute the task functions whose outputs amplify round-off
(`benchmarks/results/recompute_spread.md`) under other CPUs' kernels and compare the claims.

For each configuration of `implicit_bias.core.tools.verify.KERNEL_CONFIGS` and each chapter of
SENSITIVE, in
a copy of the repository (`<work>/repo`, made once; data/raw is a symlink) and a results folder of
its own (`<work>/results/<config>`, a copy of results/paper): delete the cache entries of the
chapter's sensitive task functions, run the chapter's paper profile under the configuration's
environment (`kernel_env`), so only those tasks are recomputed and everything else is read from
the cache. `report` compares each configuration's claims report and recomputed task outputs with
the committed ones. Nothing is written into the repository except the report (`--out`).

    .venv/bin/python benchmarks/claim_sensitivity.py run Prescott-1thread tensor_networks gln_norm
    .venv/bin/python benchmarks/claim_sensitivity.py report \
        --out benchmarks/results/claim_sensitivity.md

Options: `--work DIR` (default /tmp/claim_sensitivity). Every run is niced (nice -n 15) and runs
one process at a time; on the 2-core machine one configuration took 2-3 min (tensor_networks)
and 5-11 min (gln_norm). `report` writes the tables only; the conclusion in
benchmarks/results/claim_sensitivity.md is written from them by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
from implicit_bias.core.tools.verify import KERNEL_CONFIGS, compare_results, kernel_env  # noqa: E402

SENSITIVE = {
    "tensor_networks": ["implicit_bias.chapters.tensor_networks.tasks:classification_task"],
    "gln_norm": ["implicit_bias.chapters.gln_norm.tasks:relu_task"],
}
SKIP = {".venv", "_build", ".git", ".pytest_cache", ".ruff_cache"}


def _copy_repo(work: Path) -> Path:
    repo = work / "repo"
    if not repo.exists():

        def ignore(folder, names):
            rel = Path(folder).relative_to(REPO)
            return [
                n
                for n in names
                if n in SKIP
                or (str(rel), n) in {("data", "raw"), (".", "results"), ("book", "chapters")}
            ]

        shutil.copytree(REPO, repo, ignore=ignore)
        (repo / "data" / "raw").symlink_to(REPO / "data" / "raw")
    return repo


def _entries(results: Path, chapter: str):
    for path in sorted((results / "paper" / chapter).glob("*/*.json")):
        if len(path.stem) == 64:
            entry = json.loads(path.read_text())
            if entry.get("fn") in SENSITIVE[chapter]:
                yield path, entry


def run(config: str, chapters: list[str], work: Path) -> None:
    repo, results = _copy_repo(work), work / "results" / config
    if not (results / "paper").exists():
        shutil.copytree(REPO / "results" / "paper", results / "paper")
    for chapter in chapters:
        deleted = [p.unlink() or p for p, _ in _entries(results, chapter)]
        env = kernel_env(config)
        env.update(
            PYTHONPATH=str(repo / "lib"),
            IMPLICIT_BIAS_ROOT=str(repo),
            IMPLICIT_BIAS_RESULTS=str(results),
        )
        start = time.time()
        rc = subprocess.call(
            [
                "nice",
                "-n",
                "15",
                sys.executable,
                "-m",
                "implicit_bias",
                "run",
                chapter,
                "--profile",
                "paper",
                "--device",
                "cpu",
            ],
            cwd=repo,
            env=env,
        )
        log = {
            "config": config,
            "chapter": chapter,
            "rc": rc,
            "deleted": len(deleted),
            "seconds": round(time.time() - start, 1),
        }
        (results / f"{chapter}.log.json").write_text(json.dumps(log))
        print(log, flush=True)


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else json.dumps(v) if v is not None else "-"


def _rel(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return 0.0 if a == b else abs(b - a) / abs(a) if a else float("inf")
    return None if a == b else float("nan")


def report(work: Path) -> str:
    configs = [c for c in KERNEL_CONFIGS if (work / "results" / c / "paper").exists()]
    lines = [
        "# Do claims depend on the CPU?",
        "",
        "Written by `benchmarks/claim_sensitivity.py` (see its docstring).",
    ]
    for chapter, fns in SENSITIVE.items():
        done = [c for c in configs if (work / "results" / c / f"{chapter}.log.json").exists()]
        if not done:
            continue
        logs = {
            c: json.loads((work / "results" / c / f"{chapter}.log.json").read_text()) for c in done
        }
        lines += [
            "",
            f"## {chapter}",
            "",
            "Recomputed: "
            + ", ".join(fns)
            + ". "
            + "; ".join(
                f"{c}: {logs[c]['deleted']} tasks, {logs[c]['seconds']:.0f} s, exit {logs[c]['rc']}"
                for c in done
            )
            + ".",
            "",
        ]
        committed = json.loads((REPO / "results/paper/claims" / f"{chapter}.json").read_text())
        new = {
            c: {
                k["id"]: k
                for k in json.loads(
                    (work / "results" / c / "paper/claims" / f"{chapter}.json").read_text()
                )["claims"]
            }
            for c in done
        }
        lines += [
            "| claim | expect | committed | "
            + " | ".join(f"{c} (rel. change)" for c in done)
            + " | status |",
            "|---|---|---|" + "---|" * len(done) + "---|",
        ]
        flips = []
        for claim in committed["claims"]:
            cells, statuses = [], [claim["status"]]
            for c in done:
                k = new[c].get(claim["id"], {})
                r = _rel(claim["value"], k.get("value"))
                cells.append(f"{_fmt(k.get('value'))} ({'-' if r is None else f'{r:.2g}'})")
                statuses.append(k.get("status"))
                if k.get("status") != claim["status"]:
                    flips.append(
                        f"`{claim['id']}` ({claim['metric']} {claim['expect']}): "
                        f"committed {_fmt(claim['value'])} {claim['status']}, "
                        f"{c} {_fmt(k.get('value'))} {k.get('status')}"
                    )
            status = statuses[0] if len(set(statuses)) == 1 else " / ".join(map(str, statuses))
            lines.append(
                f"| `{claim['id']}` | {claim['expect']} | {_fmt(claim['value'])} | "
                + " | ".join(cells)
                + f" | {status} |"
            )
        lines += ["", "Status changes: " + ("; ".join(flips) if flips else "none") + ".", ""]
        lines += [
            "Recomputed task outputs against the committed ones (max relative change of "
            "values at the output's own scale, max absolute change of values below 1e-3 "
            "of its largest |value|; tasks that changed / tasks compared):",
            "",
            "| config | output | changed | max rel. change | max abs. change of small |",
            "|---|---|---|---|---|",
        ]
        for c in done:
            spread, changed, total = {}, {}, 0
            for path, entry in _entries(work / "results" / c, chapter):
                rel = path.relative_to(work / "results" / c / "paper")
                stored = json.loads((REPO / "results" / "paper" / rel).read_text())
                total += 1
                _, s = compare_results(stored["result"], entry["result"], entry["fn"], {})
                for key, w in s.items():
                    acc = spread.setdefault(key, {"rel_of_large": 0.0, "abs_of_small": 0.0})
                    acc["rel_of_large"] = max(acc["rel_of_large"], w["rel_of_large"])
                    acc["abs_of_small"] = max(acc["abs_of_small"], w["abs_of_small"])
                    changed[key] = changed.get(key, 0) + (w["abs"] > 0)
            for key in sorted(spread):
                lines.append(
                    f"| {c} | {key} | {changed[key]}/{total} | "
                    f"{spread[key]['rel_of_large']:.2g} | "
                    f"{spread[key]['abs_of_small']:.2g} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "report"])
    parser.add_argument("args", nargs="*", help="run: CONFIG CHAPTER...")
    parser.add_argument("--work", type=Path, default=Path("/tmp/claim_sensitivity"))
    parser.add_argument("--out", type=Path)
    a = parser.parse_args()
    if a.command == "run":
        run(a.args[0], a.args[1:] or list(SENSITIVE), a.work)
    else:
        text = report(a.work)
        a.out.write_text(text) if a.out else print(text)


if __name__ == "__main__":
    main()
