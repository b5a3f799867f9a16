"""Fig. 2 of the GaLU chapter: its ReLU networks trained each at its own width
(`galu_widths.train_widths_converged`) against the masked batch at the grid's largest width
(`galu.train_one_hidden_converged`, what `fig2_task` ran before), side by side in one process
on the paper profile's Fig. 2 tasks.

Each seed's ReLU part runs old and new back to back, in alternating order, on one torch thread,
to the stopping rule as in the task; CPU seconds by `time.process_time`. The rest of the task
(the closed-form GaLU fits and Algorithm 1) is unchanged and timed once. The paper profile's
CPU-s are extrapolated per part: mean CPU-s per task times its 23 tasks.

Agreement: the two compute the same networks up to round-off (the unit tests of
`models.galu_widths`), but the stopping rule compares losses every window, so a round-off
difference can move a run's stop by a window. The control: the old code on inputs scaled by
1 + 1e-15 against the old code.

    python benchmarks/bench_galu_fig2.py [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
# isort: off
import implicit_bias  # noqa: E402, F401  # pins the AVX2 kernels before torch loads
import torch  # noqa: E402

# isort: on
from implicit_bias.chapters.galu_expressivity.tasks import fig2_task, fig2_tasks  # noqa: E402
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.core.engine.paths import write_atomic  # noqa: E402
from implicit_bias.models import galu  # noqa: E402
from implicit_bias.models.galu import random_regression  # noqa: E402
from implicit_bias.models.galu_widths import train_widths_converged  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def relu_old(task: dict, X: torch.Tensor, Y: torch.Tensor) -> dict:
    ks = [int(k) for k in task["k_grid"]]
    return galu.train_one_hidden_converged(
        X.expand(len(ks), -1, -1),
        Y.expand(len(ks), -1, -1),
        max(ks),
        "relu",
        [task["seed"] + 3] * len(ks),
        *(task[k] for k in ("adam_lr", "adam_window", "adam_tol", "adam_halvings")),
        task["adam_max_steps"],
        widths=ks,
    )


def relu_new(task: dict, X: torch.Tensor, Y: torch.Tensor) -> dict:
    ks = [int(k) for k in task["k_grid"]]
    return train_widths_converged(
        X,
        Y,
        ks,
        "relu",
        [task["seed"] + 3] * len(ks),
        *(task[k] for k in ("adam_lr", "adam_window", "adam_tol", "adam_halvings")),
        task["adam_max_steps"],
    )


def timed(fn, *args) -> tuple[dict, float]:
    start = time.process_time()
    out = fn(*args)
    return out, time.process_time() - start


def max_rel(a: list, b: list) -> float:
    return max(abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = load_profile("galu_expressivity", "paper")
    tasks = [t for t in fig2_tasks(cfg, "cpu") if t["seed"] in args.seeds]
    rows = []
    for i, task in enumerate(tasks):
        X, Y = random_regression(task["m"], task["d"], 1, task["seed"], torch.device("cpu"))
        order = [("old", relu_old), ("new", relu_new)]
        got = dict((name, timed(fn, task, X, Y)) for name, fn in order[:: 1 if i % 2 else -1])
        control = relu_old(task, X * (1 + 1e-15), Y)
        _, whole = timed(fig2_task, task)  # today's task, whole (new ReLU part inside)
        old, new = got["old"][0], got["new"][0]
        rows.append(
            {
                "seed": task["seed"],
                "relu_old_cpu_s": got["old"][1],
                "relu_new_cpu_s": got["new"][1],
                "rest_cpu_s": whole - got["new"][1],
                "new_vs_old_max_rel": max_rel(new["train_mse"], old["train_mse"]),
                "control_vs_old_max_rel": max_rel(control["train_mse"], old["train_mse"]),
                "stops_moved": sum(a != b for a, b in zip(new["steps"], old["steps"])),
                "control_stops_moved": sum(a != b for a, b in zip(control["steps"], old["steps"])),
                "widths": len(task["k_grid"]),
            }
        )
        print(rows[-1], flush=True)
    n_paper = len(cfg["fig2_seeds"])
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0] if k.endswith("cpu_s")}
    old_total = (mean["relu_old_cpu_s"] + mean["rest_cpu_s"]) * n_paper
    new_total = (mean["relu_new_cpu_s"] + mean["rest_cpu_s"]) * n_paper
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch {torch.__version__},"
        " 1 thread",
        "load": f"{os.getloadavg()[0]:.1f} at the end",
        "rows": rows,
        "paper_tasks": n_paper,
        "paper_cpu_s_old": old_total,
        "paper_cpu_s_new": new_total,
    }
    lines = [
        "# galu_expressivity Fig. 2: ReLU at its own width against the masked batch",
        "",
        f"Generated by `python benchmarks/bench_galu_fig2.py --seeds "
        f"{' '.join(map(str, args.seeds))}` on {res['machine']} ({res['date']}; load "
        f"{res['load']}). The paper profile's Fig. 2 tasks of those seeds (m = 1024, d = 32, "
        "widths 1-28); the ReLU part old and new back to back in alternating order, CPU seconds "
        "of the part alone; `rest`: the task's closed-form GaLU fits and Algorithm 1, unchanged.",
        "",
        "| seed | ReLU old CPU-s | ReLU new CPU-s | ratio | rest CPU-s | new vs old "
        "(max rel. MSE) | stops moved | control vs old | control stops moved |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['relu_old_cpu_s']:.1f} | {r['relu_new_cpu_s']:.1f} | "
            f"{r['relu_old_cpu_s'] / r['relu_new_cpu_s']:.2f}x | {r['rest_cpu_s']:.1f} | "
            f"{r['new_vs_old_max_rel']:.1e} | {r['stops_moved']}/{r['widths']} | "
            f"{r['control_vs_old_max_rel']:.1e} | {r['control_stops_moved']}/{r['widths']} |"
        )
    lines += [
        "",
        f"Paper profile, extrapolated ({n_paper} tasks, whole task): {old_total:,.0f} CPU-s "
        f"old, {new_total:,.0f} new ({old_total / new_total:.2f}x).",
    ]
    write_atomic(RESULTS / "galu_fig2.json", json.dumps(res, indent=1) + "\n")
    write_atomic(RESULTS / "galu_fig2.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
