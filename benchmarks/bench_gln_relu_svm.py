"""SVM-HL of the gln_norm chapter's ReLU sweeps: the library's feature-space solve
(`gln_solvers.svm_linear_features`, D x D Newton systems of `gln_ipm._primal_svm_ipm`), which
the relu tasks use, against the kernel form kept as the reference (`gln_solvers.svm_linear`,
N x N systems, what the tasks used before), side by side in one process on the same problems.

The problems are those of the paper profile's ReLU tasks (`relu_tasks`: every H and N, both
momenta) for the first `--seeds` seeds: each seed's ReLU network is trained as `relu_task`
trains it (not timed), then both forms solve SVM-HL (hidden activations plus a constant) and
SVM-HL without the constant, back to back in alternating order, on one torch thread; CPU
seconds by `time.process_time`. The paper profile's SVM-HL CPU-s are extrapolated per (H, N):
the measured CPU-s per solve times the number of such solves in the relu, relu_replacement
(two per seed) and relu_no_bias (one per seed, on a network trained without output bias, a
problem of the same shape) sweeps.

Agreement: per problem the objectives, the weights, the validation outputs, and what the task
records (status, validation error, inconsistency with the GD-ReLU).

    python benchmarks/bench_gln_relu_svm.py [--seeds 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from implicit_bias.chapters.gln_norm import tasks as gt  # noqa: E402
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.core.engine.paths import write_atomic  # noqa: E402
from implicit_bias.models import gln_solvers as gs  # noqa: E402
from implicit_bias.models.gln import error_rate, inconsistency, predict_batched  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("SVM-HL", "SVM-HL (no constant)")


def paper_profile() -> dict:
    return load_profile("gln_norm", "paper")


def solve(form: str, F: np.ndarray, y: np.ndarray) -> tuple[gs.SVMSolution, float]:
    c0 = time.process_time()
    sol = gs.svm_linear_features(F, y) if form == "new" else gs.svm_linear(F, y, device="cpu")
    return sol, time.process_time() - c0


def compare(task: dict, new_first: bool, log) -> list[dict]:
    _, datas, params, X_val = gt._trained_relu(task, output_bias=True)
    f_gd = predict_batched("relu", params, X_val, None).double().cpu().numpy()
    w1 = params["w1"].double().cpu().numpy()
    rows = []
    for r, (seed, d) in enumerate(zip(task["seeds"], datas)):
        feats = np.hstack([np.maximum(d["X"] @ w1[r].T, 0), np.ones((len(d["X"]), 1))])
        val = np.hstack([np.maximum(d["X_val"] @ w1[r].T, 0), np.ones((len(d["X_val"]), 1))])
        for part, cols in zip(PARTS, (slice(None), slice(0, -1))):
            F, F_val = feats[:, cols], val[:, cols]
            order = ("new", "old") if new_first else ("old", "new")
            runs = {form: solve(form, F, d["y"]) for form in order}
            new_first = not new_first
            (new, new_cpu), (old, old_cpu) = runs["new"], runs["old"]
            row = {
                "part": part,
                "H": task["H"],
                "N": task["N"],
                "momentum": task["momentum"],
                "seed": seed,
                "old_cpu_s": old_cpu,
                "new_cpu_s": new_cpu,
                "speedup": old_cpu / new_cpu,
                "old_iterations": old.iterations,
                "new_iterations": new.iterations,
                "old_status": old.status,
                "new_status": new.status,
            }
            if new.weights is not None and old.weights is not None:
                f_new, f_old = F_val @ new.primal, F_val @ old.primal
                diff = float(np.abs(f_new - f_old).max())
                row |= {
                    "objective_rel_diff": abs(new.objective - old.objective) / abs(old.objective),
                    "weights_rel_diff": float(
                        (new.weights - old.weights).norm() / old.weights.norm()
                    ),
                    "val_output_max_abs_diff": diff,
                    "val_output_max_rel_diff": diff / float(np.abs(f_old).max()),
                    "val_error_old": error_rate(f_old, d["y_val"]),
                    "val_error_new": error_rate(f_new, d["y_val"]),
                    "inconsistency_old": inconsistency(f_old, f_gd[r]),
                    "inconsistency_new": inconsistency(f_new, f_gd[r]),
                }
            log(
                f"{part} H={task['H']} N={task['N']} m={task['momentum']} seed {seed}: old "
                f"{old_cpu:.3f} CPU-s, new {new_cpu:.3f} ({row['speedup']:.1f}x); status "
                f"{old.status}/{new.status}, weights {row.get('weights_rel_diff', math.nan):.1e}"
            )
            rows.append(row)
    return rows


def paper_solves(cfg: dict) -> Counter:
    """The paper profile's SVM-HL solves per (H, N): two per seed of every relu and
    relu_replacement task, one per seed of every relu_no_bias task."""
    counts: Counter = Counter()
    for t in gt.relu_tasks(cfg) + gt.relu_replacement_tasks(cfg):
        counts[(t["H"], t["N"])] += 2 * len(t["seeds"])
    for t in gt.relu_no_bias_tasks(cfg):
        counts[(t["H"], t["N"])] += len(t["seeds"])
    return counts


def summarize(rows: list[dict], counts: Counter) -> dict:
    per_config = []
    for H, N in sorted(counts):
        mine = [r for r in rows if r["H"] == H and r["N"] == N]
        old = sum(r["old_cpu_s"] for r in mine)
        new = sum(r["new_cpu_s"] for r in mine)
        per_config.append(
            {
                "H": H,
                "N": N,
                "solves": len(mine),
                "old_ms_per_solve": 1e3 * old / len(mine),
                "new_ms_per_solve": 1e3 * new / len(mine),
                "speedup": old / new,
                "paper_solves": counts[(H, N)],
                "paper_old_cpu_s": old / len(mine) * counts[(H, N)],
                "paper_new_cpu_s": new / len(mine) * counts[(H, N)],
            }
        )
    per_part = []
    for part in PARTS:
        mine = [r for r in rows if r["part"] == part]
        old, new = sum(r["old_cpu_s"] for r in mine), sum(r["new_cpu_s"] for r in mine)
        per_part.append({"part": part, "old_cpu_s": old, "new_cpu_s": new, "speedup": old / new})
    keys = ("objective_rel_diff", "weights_rel_diff", "val_output_max_abs_diff")
    solved = [r for r in rows if "weights_rel_diff" in r]
    agreement = {k: max(r[k] for r in solved) for k in (*keys, "val_output_max_rel_diff")}
    agreement["solved"] = len(solved)
    agreement["statuses"] = dict(Counter(f"{r['old_status']} -> {r['new_status']}" for r in rows))
    agreement["status_changes"] = sum(r["old_status"] != r["new_status"] for r in rows)
    agreement["val_error_changes"] = sum(r["val_error_old"] != r["val_error_new"] for r in solved)
    agreement["inconsistency_changes"] = sum(
        r["inconsistency_old"] != r["inconsistency_new"] for r in solved
    )
    return {"per_part": per_part, "per_config": per_config, "agreement": agreement}


def markdown(res: dict) -> str:
    s = res["summary"]
    old_total = sum(r["paper_old_cpu_s"] for r in s["per_config"])
    new_total = sum(r["paper_new_cpu_s"] for r in s["per_config"])
    a = s["agreement"]
    lines = [
        "# gln_norm ReLU sweeps: SVM-HL in feature space against the kernel form",
        "",
        f"Generated by `python benchmarks/bench_gln_relu_svm.py --seeds {res['seeds']}` on "
        f"{res['machine']} ({res['date']}). The paper profile's ReLU tasks (every H and N, "
        f"momentum 0 and 0.9) at seeds {res['seed_list']}: the networks trained as `relu_task` "
        "trains them (not timed), then both forms solve each SVM-HL problem back to back in "
        "alternating order in one process; CPU seconds of the solve (`time.process_time`).",
        "",
        "The feature-space form (`gln_solvers.svm_linear_features`) is the one the relu, "
        "relu_replacement and relu_no_bias tasks use; the kernel form (`gln_solvers.svm_linear`) "
        "is kept as the reference the unit tests and this benchmark compare it with.",
        "",
        "## Per part",
        "",
        "| part | solves | kernel form CPU-s | feature space CPU-s | ratio |",
        "|---|---|---|---|---|",
    ]
    n = len(res["runs"]) // len(PARTS)
    for r in s["per_part"]:
        lines.append(
            f"| {r['part']} | {n} | {r['old_cpu_s']:.2f} | {r['new_cpu_s']:.2f} | "
            f"{r['speedup']:.1f}x |"
        )
    lines += [
        "",
        "## Per (H, N), extrapolated to the paper profile",
        "",
        "| H | N | measured solves | kernel ms/solve | feature ms/solve | ratio | paper solves "
        "| paper kernel CPU-s | paper feature CPU-s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["per_config"]:
        lines.append(
            f"| {r['H']} | {r['N']} | {r['solves']} | {r['old_ms_per_solve']:.0f} | "
            f"{r['new_ms_per_solve']:.1f} | {r['speedup']:.0f}x | {r['paper_solves']} | "
            f"{r['paper_old_cpu_s']:.0f} | {r['paper_new_cpu_s']:.0f} |"
        )
    lines += [
        f"| all | | {len(res['runs'])} | | | {old_total / new_total:.0f}x | "
        f"{sum(r['paper_solves'] for r in s['per_config'])} | {old_total:.0f} | "
        f"{new_total:.0f} |",
        "",
        "Paper solves: two per seed of every relu and relu_replacement task (with and without "
        "the constant), one per seed of every relu_no_bias task (its network has no output "
        "bias; the problem has the same shape).",
        "",
        "## Agreement",
        "",
        f"Statuses (kernel form -> feature space) over all {len(res['runs'])} problems: "
        + ", ".join(f"{k}: {v}" for k, v in a["statuses"].items())
        + f". Over the {a['solved']} solved by both, feature space against kernel form: objective "
        f"max rel. difference {a['objective_rel_diff']:.1e}, weights (relative L2) "
        f"{a['weights_rel_diff']:.1e}, validation outputs max abs. difference "
        f"{a['val_output_max_abs_diff']:.1e} ({a['val_output_max_rel_diff']:.1e} of the "
        f"largest output); solver status changed in {a['status_changes']}, validation error in "
        f"{a['val_error_changes']}, inconsistency with the GD-ReLU in "
        f"{a['inconsistency_changes']}.",
        "",
        "| part | H | N | momentum | seed | status old / new | iterations old/new | objective rel. "
        "| weights rel. | val outputs rel. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        lines.append(
            f"| {r['part']} | {r['H']} | {r['N']} | {r['momentum']} | {r['seed']} | "
            f"{r['old_status']} / {r['new_status']} | "
            f"{r['old_iterations']}/{r['new_iterations']} | "
            + " | ".join(
                f"{r[k]:.1e}" if k in r else "-"
                for k in ("objective_rel_diff", "weights_rel_diff", "val_output_max_rel_diff")
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1, help="the profile's first seeds")
    parser.add_argument("--out", type=Path, default=RESULTS / "gln_relu_svm.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    cfg = paper_profile()
    seeds = gt.seed_groups(cfg, "relu_seeds")[0][: args.seeds]
    chosen = [{**t, "seeds": seeds} for t in gt.relu_tasks(cfg, "cpu")]
    chosen = list({json.dumps(t, sort_keys=True): t for t in chosen}.values())
    rows = [r for i, t in enumerate(chosen) for r in compare(t, i % 2 == 0, log)]
    res = {
        "seeds": args.seeds,
        "seed_list": seeds,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "runs": rows,
        "summary": summarize(rows, paper_solves(cfg)),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    write_atomic(args.out.with_suffix(".md"), md)
    print(md)


if __name__ == "__main__":
    main()
