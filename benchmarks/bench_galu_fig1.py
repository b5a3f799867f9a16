"""The GaLU chapter's Fig. 1 runs: the four two-hidden-layer models of one (dataset, k, seed)
trained as one batched program (`galu_classifiers.train_classifiers`, what `fig1_task` runs)
against one at a time (`galu.train_classifier`, what it ran before), side by side in one
process on the same tasks.

The tasks are the paper profile's Fig. 1 tasks of the first `--seeds` seeds (both datasets,
every width k, the full 60,000 / 10,000 images, the paper's `--epochs` 10 epochs unless told
fewer). Each task's two trainings run back to back, in alternating order, on one torch thread
under the runner's kernel pin (AVX2); CPU seconds by `time.process_time`, training and the
final accuracies (the data's loading and PCA, shared by every task of a dataset, left out).
The paper profile's CPU-s are extrapolated per (dataset, k): the measured CPU-s x the
profile's seeds / the seeds measured x its epochs / the epochs run.

Agreement: the batched products round differently from one model's (float32), and 46,900
Adam steps carry that round-off to the end of training, so the accuracies differ by more than
round-off. The control measures how much any round-off moves them: the old code on training
inputs rounded to the next float32 (one ulp up on every coordinate) against the old code.
Where the two differences are of the same size, batching changes the runs no more than any
round-off does.

    python benchmarks/bench_galu_fig1.py [--seeds 1] [--epochs 10] [--no-control]
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
from implicit_bias.core.engine.kernels import pin_kernels  # noqa: E402

KERNELS = pin_kernels()  # before torch is imported, as the runner does

import torch  # noqa: E402

from implicit_bias.chapters.galu_expressivity.tasks import _pca_data, fig1_tasks  # noqa: E402
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.core.engine.paths import write_atomic  # noqa: E402
from implicit_bias.models import galu  # noqa: E402
from implicit_bias.models.galu_classifiers import train_classifiers  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def paper_profile() -> dict:
    return load_profile("galu_expressivity", "paper")


def data(task: dict, nudge: bool = False) -> list[torch.Tensor]:
    arrays = _pca_data(task["dataset"], task["n_train"], task["n_test"], 0, task["pca_dim"])
    tens = [torch.as_tensor(a) for a in arrays]
    if nudge:  # the control: every training input one float32 ulp up
        tens[0] = torch.nextafter(tens[0], torch.tensor(float("inf")))
    return tens


def old(task: dict, epochs: int, nudge: bool = False) -> tuple[dict, float]:
    tens = data(task, nudge)
    c0 = time.process_time()
    out = {
        m: galu.train_classifier(
            *tens, task["k"], m, task["seed"], epochs, task["lr"], task["batch_size"]
        )
        for m in task["models"]
    }
    return out, time.process_time() - c0


def new(task: dict, epochs: int) -> tuple[dict, float]:
    tens = data(task)
    c0 = time.process_time()
    out = train_classifiers(
        *tens, task["k"], task["models"], task["seed"], epochs, task["lr"], task["batch_size"]
    )
    return out, time.process_time() - c0


def compare(task: dict, epochs: int, new_first: bool, control: bool, log) -> dict:
    runs = {}
    for name in ("new", "old")[:: 1 if new_first else -1]:
        runs[name] = (new if name == "new" else old)(task, epochs)
    (res_new, new_cpu), (res_old, old_cpu) = runs["new"], runs["old"]
    res_ctl = old(task, epochs, nudge=True)[0] if control else None

    def diff(a: dict, b: dict, key: str) -> float:
        return max(abs(a[m][key] - b[m][key]) for m in task["models"])

    row = {
        "dataset": task["dataset"],
        "k": task["k"],
        "seed": task["seed"],
        "epochs": epochs,
        "old_cpu_s": old_cpu,
        "new_cpu_s": new_cpu,
        "speedup": old_cpu / new_cpu,
        "old": res_old,
        "new": res_new,
        "test_new_vs_old": diff(res_new, res_old, "test_acc"),
        "train_new_vs_old": diff(res_new, res_old, "train_acc"),
        "test_nudged_vs_old": None if res_ctl is None else diff(res_ctl, res_old, "test_acc"),
        "train_nudged_vs_old": None if res_ctl is None else diff(res_ctl, res_old, "train_acc"),
    }
    ctl = "" if res_ctl is None else f", nudged old vs old {row['test_nudged_vs_old']:.4f}"
    log(
        f"{task['dataset']} k={task['k']} seed {task['seed']}: old {old_cpu:.1f} CPU-s, new "
        f"{new_cpu:.1f} ({row['speedup']:.2f}x); test acc new vs old "
        f"{row['test_new_vs_old']:.4f}{ctl}"
    )
    return row


def summarize(rows: list[dict], cfg: dict) -> dict:
    """Per (dataset, k) and per k: CPU-s measured, their ratio, and the paper profile's."""
    per_cell = []
    for ds in cfg["fig1_datasets"]:
        for k in cfg["fig1_k"]:
            mine = [r for r in rows if r["dataset"] == ds and r["k"] == k]
            if not mine:
                continue
            old_cpu = sum(r["old_cpu_s"] for r in mine)
            new_cpu = sum(r["new_cpu_s"] for r in mine)
            # per task: the profile's epochs / those run; tasks: its seeds / those measured
            scale = sum(cfg["fig1_epochs"] / r["epochs"] for r in mine) / len(mine)
            scale *= len(cfg["fig1_seeds"])
            per_cell.append(
                {
                    "dataset": ds,
                    "k": k,
                    "runs": len(mine),
                    "old_cpu_s": old_cpu,
                    "new_cpu_s": new_cpu,
                    "speedup": old_cpu / new_cpu,
                    "paper_tasks": len(cfg["fig1_seeds"]),
                    "paper_old_cpu_s": old_cpu / len(mine) * scale,
                    "paper_new_cpu_s": new_cpu / len(mine) * scale,
                }
            )
    per_k = []
    for k in cfg["fig1_k"]:
        mine = [c for c in per_cell if c["k"] == k]
        if mine:
            per_k.append(
                {
                    "k": k,
                    **{
                        key: sum(c[key] for c in mine)
                        for key in ("old_cpu_s", "new_cpu_s", "paper_old_cpu_s", "paper_new_cpu_s")
                    },
                }
            )
            per_k[-1]["speedup"] = per_k[-1]["old_cpu_s"] / per_k[-1]["new_cpu_s"]
    return {"per_cell": per_cell, "per_k": per_k}


def markdown(res: dict) -> str:
    s = res["summary"]
    tot = {
        key: sum(r[key] for r in s["per_k"])
        for key in ("old_cpu_s", "new_cpu_s", "paper_old_cpu_s", "paper_new_cpu_s")
    }
    lines = [
        "# galu_expressivity Fig. 1: the four models batched against one at a time",
        "",
        f"Generated by `python benchmarks/bench_galu_fig1.py --seeds {res['seeds']} --epochs "
        f"{res['epochs']}` on {res['machine']} ({res['date']}; kernels {res['kernels']}). The "
        f"paper profile's Fig. 1 tasks of seeds {res['seed_list']} (both datasets, every k, "
        f"60,000 training and 10,000 test images, {res['epochs']} of the paper's "
        f"{res['paper_epochs']} epochs); both codes in one process, back to back per task in "
        "alternating order; CPU seconds of training and final accuracies "
        f"(`time.process_time`). The machine was shared with other jobs (load average "
        f"{res['load']}).",
        "",
        "## Per width k (both datasets)",
        "",
        "| k | one at a time CPU-s | batched CPU-s | ratio | paper profile, one at a time "
        "CPU-s (extrapolated) | paper profile, batched CPU-s |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["per_k"]:
        lines.append(
            f"| {r['k']} | {r['old_cpu_s']:.1f} | {r['new_cpu_s']:.1f} | {r['speedup']:.2f}x | "
            f"{r['paper_old_cpu_s']:.0f} | {r['paper_new_cpu_s']:.0f} |"
        )
    lines += [
        f"| all | {tot['old_cpu_s']:.1f} | {tot['new_cpu_s']:.1f} | "
        f"{tot['old_cpu_s'] / tot['new_cpu_s']:.2f}x | {tot['paper_old_cpu_s']:.0f} | "
        f"{tot['paper_new_cpu_s']:.0f} |",
        "",
        "The paper columns: measured CPU-s per task x the profile's epochs / the epochs run x "
        f"its {res['paper_seeds']} seeds per (dataset, k)"
        + (
            "; the final accuracies (one forward pass over the 70,000 images, done once per "
            "task) are scaled with the epochs too, so both paper columns overstate them a little."
            if res["epochs"] < res["paper_epochs"]
            else "."
        ),
        "",
        "## Per dataset and width",
        "",
        "| dataset | k | runs | one at a time CPU-s | batched CPU-s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["per_cell"]:
        lines.append(
            f"| {r['dataset']} | {r['k']} | {r['runs']} | {r['old_cpu_s']:.1f} | "
            f"{r['new_cpu_s']:.1f} | {r['speedup']:.2f}x |"
        )
    lines += [
        "",
        "## Agreement of the accuracies",
        "",
        "Largest difference over the four models of the final test and train accuracy: "
        "batched against one at a time, and (the control) one at a time on training inputs "
        "one float32 ulp up against one at a time. The unit tests hold the logits equal to "
        "1e-10 in float64 and 1e-3 in float32 over 45 steps; over the paper's steps the "
        "float32 round-off grows to the size of the control.",
        "",
        "| dataset | k | seed | test, new vs old | test, nudged vs old | train, new vs old | "
        "train, nudged vs old |",
        "|---|---|---|---|---|---|---|",
    ]

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    for r in res["runs"]:
        lines.append(
            f"| {r['dataset']} | {r['k']} | {r['seed']} | {f(r['test_new_vs_old'])} | "
            f"{f(r['test_nudged_vs_old'])} | {f(r['train_new_vs_old'])} | "
            f"{f(r['train_nudged_vs_old'])} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1, help="the profile's first seeds")
    parser.add_argument("--epochs", type=int, default=None, help="default: the profile's")
    parser.add_argument("--no-control", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "galu_fig1.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    cfg = paper_profile()
    epochs = args.epochs or cfg["fig1_epochs"]
    seeds = cfg["fig1_seeds"][: args.seeds]
    chosen = [t for t in fig1_tasks(cfg, "cpu") if t["seed"] in seeds]
    # warm-up, untimed: first-call costs of torch's kernels, each dataset's loading and PCA
    for t in chosen:
        Xtr, ytr, Xte, yte = data(t)
        few = (Xtr[:1280], ytr[:1280], Xte[:100], yte[:100])
        train_classifiers(*few, t["k"], t["models"], 0, 1, t["lr"], t["batch_size"])
        for m in t["models"]:
            galu.train_classifier(*few, t["k"], m, 0, 1, t["lr"], t["batch_size"])
    log("warm")
    rows = [compare(t, epochs, i % 2 == 0, not args.no_control, log) for i, t in enumerate(chosen)]
    res = {
        "seeds": args.seeds,
        "seed_list": seeds,
        "epochs": epochs,
        "paper_epochs": cfg["fig1_epochs"],
        "paper_seeds": len(cfg["fig1_seeds"]),
        "kernels": KERNELS,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "runs": rows,
        "summary": summarize(rows, cfg),
        "load": f"{os.getloadavg()[0]:.1f} at the end",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    write_atomic(args.out.with_suffix(".md"), md)
    print(md)


if __name__ == "__main__":
    main()
