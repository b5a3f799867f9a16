"""Exponential-loss training of the tensor-networks chapter's classification runs: the
closed-form loop (`train_exponential`) against the autograd loop it replaced
(`_train_exponential_autograd`), side by side in one process on the same tasks.

The tasks are the paper profile's classification tasks (n = 40, d = 80, the paper's step rule)
for the first `--seeds` seeds, every architecture and depth, trained for `--steps` steps (the
paper runs 12,000; the per-step cost barely depends on the phase of the run, so the ratio
carries over). Each task's two loops run back to back, in alternating order, on one torch
thread; CPU seconds by `time.process_time`. The table also extrapolates the paper profile's
training CPU-s: per (architecture, depth) the measured CPU-s per step times 12,000 steps times
the profile's number of such tasks.

Agreement: the loops compute the same gradients to round-off (unit tests, 1e-12), but past the
onset of the hard-margin regime the training is chaotic, so their endpoints differ far more
than round-off. The control measures how much: the autograd loop against itself from an
initialization perturbed by 1e-15 relative. Where the two differences are of the same size, the
closed form changes the runs no more than any round-off does.

    python benchmarks/bench_tensor_classification.py [--steps 3000] [--seeds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from implicit_bias.chapters.tensor_networks.tasks import classification_tasks  # noqa: E402
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.core.engine.paths import write_atomic  # noqa: E402
from implicit_bias.models import tensor_networks as tn  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ARCHS, DEPTHS = ("diag", "conv", "fc"), (2, 3, 4)


def paper_profile() -> dict:
    return load_profile("tensor_networks", "paper")


def train(loop, task: dict, steps: int, perturb: float = 0.0) -> tuple[dict, float]:
    X, y = tn.separable_data(task["n"], task["d"], task["sparsity"], task["data_seed"])
    params = tn.init_params(task["arch"], task["d"], task["L"], task["alpha"], task["init_seed"])
    params = [p * (1 + perturb) for p in params]
    record = [s for s in task["record"] if s <= steps]
    c0 = time.process_time()
    out = loop(
        task["arch"], X, y, params, steps, task["rel_step"], record=record, decay=task["decay"]
    )
    return out, time.process_time() - c0


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def compare(task: dict, steps: int, new_first: bool, log) -> dict:
    loops = [("new", tn.train_exponential), ("old", tn._train_exponential_autograd)]
    runs = {name: train(loop, task, steps) for name, loop in loops[:: 1 if new_first else -1]}
    (new, new_cpu), (old, old_cpu) = runs["new"], runs["old"]
    control, _ = train(tn._train_exponential_autograd, task, steps, perturb=1e-15)
    row = {
        "arch": task["arch"],
        "L": task["L"],
        "seed": task["data_seed"],
        "steps": steps,
        "old_cpu_s": old_cpu,
        "new_cpu_s": new_cpu,
        "speedup": old_cpu / new_cpu,
        "beta_new_vs_old": relative(new["beta"], old["beta"]),
        "beta_perturbed_vs_old": relative(control["beta"], old["beta"]),
        "log_inv_loss": old["log_inv_loss"],
    }
    log(
        f"{task['arch']} L={task['L']} seed {task['data_seed']}: old {old_cpu:.2f} CPU-s, "
        f"new {new_cpu:.2f} ({row['speedup']:.1f}x); beta new vs old "
        f"{row['beta_new_vs_old']:.1e}, perturbed old vs old {row['beta_perturbed_vs_old']:.1e}"
    )
    return row


def summarize(rows: list[dict], counts: Counter, paper_steps: int) -> dict:
    """Per architecture and per (architecture, depth): CPU-s of the measured runs, their ratio,
    and the paper profile's training CPU-s extrapolated from the measured CPU-s per step."""
    per_config, per_arch = [], []
    for arch in ARCHS:
        arch_old = arch_new = 0.0
        for L in DEPTHS:
            mine = [r for r in rows if r["arch"] == arch and r["L"] == L]
            if not mine:
                continue
            old = sum(r["old_cpu_s"] for r in mine)
            new = sum(r["new_cpu_s"] for r in mine)
            steps = sum(r["steps"] for r in mine)
            scale = paper_steps * counts[(arch, L)] / steps
            per_config.append(
                {
                    "arch": arch,
                    "L": L,
                    "runs": len(mine),
                    "old_ms_per_step": 1e3 * old / steps,
                    "new_ms_per_step": 1e3 * new / steps,
                    "speedup": old / new,
                    "paper_tasks": counts[(arch, L)],
                    "paper_old_cpu_s": old * scale,
                    "paper_new_cpu_s": new * scale,
                }
            )
            arch_old += old * scale
            arch_new += new * scale
        mine = [r for r in rows if r["arch"] == arch]
        per_arch.append(
            {
                "arch": arch,
                "old_cpu_s": sum(r["old_cpu_s"] for r in mine),
                "new_cpu_s": sum(r["new_cpu_s"] for r in mine),
                "speedup": sum(r["old_cpu_s"] for r in mine) / sum(r["new_cpu_s"] for r in mine),
                "paper_old_cpu_s": arch_old,
                "paper_new_cpu_s": arch_new,
            }
        )
    return {"per_arch": per_arch, "per_config": per_config}


def markdown(res: dict) -> str:
    s = res["summary"]
    old_total = sum(r["paper_old_cpu_s"] for r in s["per_arch"])
    new_total = sum(r["paper_new_cpu_s"] for r in s["per_arch"])
    old_cpu = sum(r["old_cpu_s"] for r in s["per_arch"])
    new_cpu = sum(r["new_cpu_s"] for r in s["per_arch"])
    lines = [
        "# tensor_networks classification: closed-form against autograd exponential-loss GD",
        "",
        f"Generated by `python benchmarks/bench_tensor_classification.py --steps {res['steps']} "
        f"--seeds {res['seeds']}` on {res['machine']} ({res['date']}). The paper profile's "
        f"classification tasks of seeds {res['seed_list']} (n = 40, d = 80, every "
        f"architecture and depth), {res['steps']:,} of the paper's {res['paper_steps']:,} steps "
        "each; both loops in one process, back to back per task in alternating order; CPU "
        "seconds of the training loop alone (`time.process_time`).",
        "",
        "## Per architecture",
        "",
        "| architecture | autograd CPU-s | closed form CPU-s | ratio | paper profile, "
        "autograd CPU-s (extrapolated) | paper profile, closed form CPU-s |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["per_arch"]:
        lines.append(
            f"| {r['arch']} | {r['old_cpu_s']:.2f} | {r['new_cpu_s']:.2f} | "
            f"{r['speedup']:.1f}x | {r['paper_old_cpu_s']:.0f} | {r['paper_new_cpu_s']:.0f} |"
        )
    lines += [
        f"| all | {old_cpu:.2f} | {new_cpu:.2f} | {old_cpu / new_cpu:.1f}x | {old_total:.0f} | "
        f"{new_total:.0f} |",
        "",
        "The paper columns: measured CPU-s per step x 12,000 steps x the paper profile's tasks of "
        "that architecture and depth (training only; the task also solves the reference "
        "problem and measures residuals).",
        "",
        "## Per architecture and depth",
        "",
        "| architecture | L | runs | autograd ms/step | closed form ms/step | ratio | "
        "paper tasks |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in s["per_config"]:
        lines.append(
            f"| {r['arch']} | {r['L']} | {r['runs']} | {r['old_ms_per_step']:.3f} | "
            f"{r['new_ms_per_step']:.3f} | {r['speedup']:.1f}x | {r['paper_tasks']} |"
        )
    lines += [
        "",
        "## Agreement of the endpoints",
        "",
        "Relative difference of beta after the run: closed form against autograd, and (the "
        "control) autograd from an initialization perturbed by 1e-15 relative against "
        "autograd. The gradients agree to 1e-12 (unit test); past the onset of the "
        "hard-margin regime the runs are chaotic, so any round-off difference grows to the "
        "size of the control.",
        "",
        "| architecture | L | seed | new vs old | perturbed old vs old | log(1/L) at the end |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        lines.append(
            f"| {r['arch']} | {r['L']} | {r['seed']} | {r['beta_new_vs_old']:.1e} | "
            f"{r['beta_perturbed_vs_old']:.1e} | {r['log_inv_loss']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=2, help="the profile's first seeds")
    parser.add_argument("--out", type=Path, default=RESULTS / "tensor_classification.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    cfg = paper_profile()
    tasks = classification_tasks(cfg)
    counts = Counter((t["arch"], t["L"]) for t in tasks)
    seeds = cfg["cls_seeds"][: args.seeds]
    chosen = [
        t
        for t in tasks
        if t["data_seed"] in seeds and t["rel_step"] == cfg["cls_rel_step"]  # no step variants
    ]
    rows = [compare(t, args.steps, i % 2 == 0, log) for i, t in enumerate(chosen)]
    res = {
        "steps": args.steps,
        "seeds": args.seeds,
        "seed_list": seeds,
        "paper_steps": cfg["cls_steps"],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "runs": rows,
        "summary": summarize(rows, counts, cfg["cls_steps"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    write_atomic(args.out.with_suffix(".md"), md)
    print(md)


if __name__ == "__main__":
    main()
