"""Benchmark the fast exact GLN solvers (`implicit_bias.models.gln_solvers`) against cvxpy.

Side by side in one run, on the paper's problems (binary MNIST 0-4 vs 5-9, pixels in [-1, 1]
plus a constant feature, median-init hyperplane contexts, built by the chapter's
`implicit_bias.chapters.gln_norm.tasks.gln_problem`):

* SVM-GLN (Eq. 20/52): cvxpy + ECOS (the paper's solver, at most 200 iterations) vs cvxpy +
  Clarabel vs ours, at several (N, H, C), each reference solve capped at `--cap` seconds (a
  reference that hit the cap is not run on larger problems);
* SVM-L2 (Sec. 4.1, Appendix A): cvxpy + OSQP (the paper's solver, at most 10,000 iterations)
  vs ours;
* ours alone on the paper's whole (N, H, C) grid, up to (2000, 100, 4);
* 3 seeds solved as one batch vs one by one;
* GD training: a loop over replicas vs one batched tensor program (`gln.train_batched`).

Every solve runs single-threaded (OMP/MKL/torch threads = 1) so that CPU-seconds are
comparable; references run in a child process (killed at the cap, memory-limited). Writes
`benchmarks/results/gln_solvers.json` and `.md`.

    python benchmarks/bench_gln_solvers.py [--quick] [--cap SECONDS]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy/torch load: single-threaded, comparable CPU-seconds

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from implicit_bias.chapters.gln_norm.tasks import gln_problem  # noqa: E402
from implicit_bias.models import gln, gln_svm  # noqa: E402
from implicit_bias.models import gln_solvers as gs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
N_VAL = 2000  # validation images on which predictions are compared
MEMORY_LIMIT = 10 * 2**30  # bytes of address space for a reference solve (shared machine)
REF_ITERS = {"ECOS": 200, "OSQP": 10_000, "CLARABEL": None}  # the paper's caps (Appendix A)

FULL = {
    "gln_side_by_side": [(200, 10, 2), (500, 10, 2), (1000, 10, 2), (1000, 50, 2)],
    "l2_side_by_side": [(500, 10, 2), (1000, 50, 2)],
    "ours_grid": [(n, h, c) for n in (500, 1000, 2000) for h in (10, 20, 50, 100) for c in (2, 4)],
    "batch": (1000, 50, 2),
    "gd": {"N": 1000, "H": 50, "C": 2, "steps": 200},
    "cap": 100.0,
}
QUICK = {
    "gln_side_by_side": [(100, 5, 2), (200, 10, 2)],
    "l2_side_by_side": [(200, 10, 2)],
    "ours_grid": [(500, 10, 2), (1000, 20, 4)],
    "batch": (500, 10, 2),
    "gd": {"N": 500, "H": 10, "C": 2, "steps": 50},
    "cap": 30.0,
}


def problem(N: int, H: int, C: int, seed: int = 0) -> dict:
    return gln_problem(N, seed, N_VAL, H, C, True)


# ---------------------------------------------------------------------------------------------
# reference solves in a child process


def child(spec: dict) -> None:
    """Run one cvxpy solve (the chapter's reference path) on the problem saved by the parent;
    save its result to spec["out"]."""
    p = np.load(spec["problem"])
    solver, method = spec["solver"], spec["method"]
    c0, t0 = time.process_time(), time.perf_counter()
    if method == "SVM-GLN":
        res = gln_svm.svm_gln(
            p["X"], p["y"], p["ctx"], spec["C"], solver, max_iters=REF_ITERS[solver]
        )
    else:
        res = gln_svm.svm_l2(
            p["X"], p["y"], p["ctx"], spec["C"], solver, "exact", max_iters=REF_ITERS[solver]
        )
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    np.savez(
        spec["out"],
        primal=res.primal if res.primal is not None else np.zeros(0),
        objective=res.objective,
        status=res.status,
        cpu=cpu,
        wall=wall,
        maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )


def reference(method: str, solver: str, p: dict, C: int, cap: float) -> dict:
    """Time a cvxpy solve in a child process, killed by the kernel after `cap` CPU-seconds
    (RLIMIT_CPU: on a shared machine wall time says little) or at the memory limit."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_CPU, (int(cap) + 15, int(cap) + 15))  # + imports

    with tempfile.TemporaryDirectory() as tmp:
        out, prob = Path(tmp) / "res.npz", Path(tmp) / "problem.npz"
        np.savez(prob, X=p["X"], y=p["y"], ctx=p["ctx"])
        spec = {"method": method, "solver": solver, "C": C, "problem": str(prob), "out": str(out)}
        cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
        t0 = time.perf_counter()
        try:  # a generous wall-clock backstop; the CPU limit is the cap
            proc = subprocess.run(
                cmd, timeout=10 * cap + 120, capture_output=True, text=True, preexec_fn=limits
            )
        except subprocess.TimeoutExpired:
            return {"status": "wall-clock backstop hit", "cpu_s": None, "wall_s": None}
        if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and not out.exists():
            return {
                "status": f"timeout (> {cap:.0f} CPU-s)",
                "cpu_s": None,
                "wall_s": time.perf_counter() - t0,
            }
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["?"]
            return {
                "status": f"failed (rc {proc.returncode}): {tail[0][:160]}",
                "cpu_s": None,
                "wall_s": time.perf_counter() - t0,
            }
        r = np.load(out, allow_pickle=False)
        row = {
            "status": str(r["status"]),
            "cpu_s": float(r["cpu"]),
            "wall_s": float(r["wall"]),
            "objective": float(r["objective"]),
            "max_rss_mb": float(r["maxrss"]) / 1024,
        }
        if row["cpu_s"] > cap:
            row["status"] = f"timeout (> {cap:.0f} CPU-s)"
        row["primal"] = r["primal"] if r["primal"].size else None
        return row


# ---------------------------------------------------------------------------------------------
# our solves, in process


def ours(method: str, p: dict, C: int) -> tuple[dict, gs.SVMSolution]:
    c0, t0 = time.process_time(), time.perf_counter()
    if method == "SVM-GLN":
        sol = gs.svm_gln(p["X"], p["y"], p["ctx"], C)
    else:
        sol = gs.svm_l2(p["X"], p["y"], p["ctx"], C, variant="exact")
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {
        "status": sol.status,
        "cpu_s": cpu,
        "wall_s": wall,
        "objective": sol.objective,
        "gap_relative": sol.gap_relative,
        "iterations": sol.iterations,
        "primal_infeasibility": sol.primal_infeasibility,
    }, sol


def agreement(sol: gs.SVMSolution, ref_primal: np.ndarray | None, p: dict) -> dict:
    if ref_primal is None or sol.weights is None:
        return {}
    ours_primal = sol.primal
    f1 = gln.predict_gln(ours_primal, p["X_val"], p["ctx_val"])
    f2 = gln.predict_gln(ref_primal, p["X_val"], p["ctx_val"])
    scale = np.abs(ours_primal).max()
    return {
        "prediction_disagreement": float((np.sign(f1) != np.sign(f2)).mean()),
        "zeta_max_rel_diff": float(np.abs(ours_primal - ref_primal).max() / scale),
    }


def side_by_side(method: str, sizes, solvers, cap: float, log) -> list[dict]:
    rows, timed_out = [], {s: [] for s in solvers}
    for N, H, C in sizes:
        p = problem(N, H, C)
        mine, sol = ours(method, p, C)
        row = {"method": method, "N": N, "H": H, "C": C, "ours": mine}
        log(
            f"{method} ({N},{H},{C}) ours: {mine['cpu_s']:.2f} CPU-s, {mine['status']}, "
            f"gap {mine['gap_relative']:.1e}"
        )
        for solver in solvers:
            if any(N >= n and H >= h and C >= c for n, h, c in timed_out[solver]):
                row[solver] = {"status": "skipped: hit the cap on a smaller problem"}
                continue
            ref = reference(method, solver, p, C, cap)
            primal = ref.pop("primal", None)
            if ref.get("objective") is not None and ref["status"].startswith("optimal"):
                ref["objective_rel_diff"] = abs(ref["objective"] - mine["objective"]) / abs(
                    ref["objective"]
                )
                ref.update(agreement(sol, primal, p))
                ref["speedup_cpu"] = ref["cpu_s"] / mine["cpu_s"]
            elif ref["status"].startswith("timeout"):
                timed_out[solver].append((N, H, C))
                ref["speedup_cpu_lower_bound"] = cap / mine["cpu_s"]
            row[solver] = ref
            log(
                f"  {solver}: {ref['status']}, {ref.get('cpu_s') or float('nan'):.1f} CPU-s, "
                f"speedup {ref.get('speedup_cpu', ref.get('speedup_cpu_lower_bound', 0)):.0f}x"
                f"{'' if 'speedup_cpu' in ref else ' (lower bound)'}"
            )
        rows.append(row)
    return rows


def ours_grid(sizes, log) -> dict:
    rows = []
    for N, H, C in sizes:
        p = problem(N, H, C)
        for method in ("SVM-GLN", "SVM-L2"):
            mine, _ = ours(method, p, C)
            rows.append({"method": method, "N": N, "H": H, "C": C, **mine})
            log(
                f"grid {method} ({N},{H},{C}): {mine['cpu_s']:.2f} CPU-s, {mine['iterations']} "
                f"it, gap {mine['gap_relative']:.1e}, {mine['status']}"
            )
    total = {m: sum(r["cpu_s"] for r in rows if r["method"] == m) for m in ("SVM-GLN", "SVM-L2")}
    return {
        "rows": rows,
        "total_cpu_s": total,
        "all_optimal": all(r["status"] == "optimal" for r in rows),
        "max_gap_relative": max(r["gap_relative"] for r in rows),
    }


def batch_vs_loop(size, log) -> dict:
    N, H, C = size
    probs = [problem(N, H, C, seed) for seed in (0, 1, 2)]
    c0 = time.process_time()
    singles = [gs.svm_gln(p["X"], p["y"], p["ctx"], C) for p in probs]
    loop = time.process_time() - c0
    c0 = time.process_time()
    batch = gs.svm_gln_batch(
        [p["X"] for p in probs], [p["y"] for p in probs], [p["ctx"] for p in probs], C
    )
    batched = time.process_time() - c0
    same = max(abs(a.objective - b.objective) / a.objective for a, b in zip(singles, batch))
    log(f"3 seeds at {size}: loop {loop:.2f} CPU-s, batch {batched:.2f} CPU-s")
    return {
        "N": N,
        "H": H,
        "C": C,
        "seeds": 3,
        "loop_cpu_s": loop,
        "batch_cpu_s": batched,
        "max_objective_rel_diff": same,
        "statuses": [s.status for s in batch],
        "note": "CPU, 1 thread: batching mainly pays on a GPU (fewer kernel launches)",
    }


def gd_loop_vs_batched(spec: dict, log) -> dict:
    """Per-replica loop vs one batched program for the deep GLN's SGD (`gln.train_batched`)."""
    N, H, C, steps = spec["N"], spec["H"], spec["C"], spec["steps"]
    seeds = [0, 1, 2]
    probs = [problem(N, H, C, s) for s in seeds]
    X = torch.as_tensor(np.stack([p["X"] for p in probs]), dtype=torch.float32)
    y = torch.as_tensor(np.stack([p["y"] for p in probs]), dtype=torch.float32)
    ctx = torch.as_tensor(np.stack([p["ctx"] for p in probs]))
    schedule = gln.Schedule(n_steps=steps, lr_drop_step=steps // 2)
    params = gln.init_deep_gln(seeds, H, C, X.shape[-1])
    c0, t0 = time.process_time(), time.perf_counter()
    loop_out = [
        gln.train_batched(
            "deep",
            {k: v[i : i + 1] for k, v in params.items()},
            X[i : i + 1],
            y[i : i + 1],
            ctx[i : i + 1],
            schedule,
            [s],
        )
        for i, s in enumerate(seeds)
    ]
    loop_cpu, loop_wall = time.process_time() - c0, time.perf_counter() - t0
    c0, t0 = time.process_time(), time.perf_counter()
    batch_out = gln.train_batched("deep", params, X, y, ctx, schedule, seeds)
    batch_cpu, batch_wall = time.process_time() - c0, time.perf_counter() - t0
    diff = max(
        float((batch_out["w1"][i] - loop_out[i]["w1"][0]).abs().max()) for i in range(len(seeds))
    )
    log(
        f"GD ({N},{H},{C}) x3 seeds, {steps} steps: loop {loop_cpu:.2f} CPU-s, batched "
        f"{batch_cpu:.2f} CPU-s"
    )
    return {
        "N": N,
        "H": H,
        "C": C,
        "replicas": len(seeds),
        "steps": steps,
        "loop_cpu_s": loop_cpu,
        "batch_cpu_s": batch_cpu,
        "loop_wall_s": loop_wall,
        "batch_wall_s": batch_wall,
        "speedup_cpu": loop_cpu / batch_cpu,
        "max_abs_weight_diff_batched_vs_loop": diff,
    }


# ---------------------------------------------------------------------------------------------
# report


def markdown(res: dict) -> str:
    flag = " --quick" if res["quick"] else ""
    lines = [
        "# Fast exact GLN solvers vs cvxpy",
        "",
        f"Generated by `python benchmarks/bench_gln_solvers.py{flag}`"
        f" on {res['machine']} ({res['date']}), single-threaded; reference solves capped at "
        f"{res['cap_s']:.0f} CPU-s and {MEMORY_LIMIT // 2**30} GB. Real binary MNIST "
        "(0-4 vs 5-9, pixels in [-1, 1] + constant), median-init contexts, seed 0. "
        "CPU-seconds include cvxpy's problem compilation (what a user pays). References use "
        "the chapter's cvxpy path (`implicit_bias.models.gln_svm`, solved in the row space of "
        "X).",
        "",
    ]
    for key, title in (("svm_gln", "SVM-GLN (Eq. 20/52)"), ("svm_l2", "SVM-L2 (Appendix A)")):
        solvers = [s for s in ("ECOS", "CLARABEL", "OSQP") if any(s in r for r in res[key])]
        lines += [
            f"## {title}",
            "",
            "| (N, H, C) | ours CPU-s | "
            + " | ".join(f"{s} CPU-s | speedup vs {s}" for s in solvers)
            + " | max obj. rel. diff "
            "| max pred. disagreement |",
            "|---" * (3 + 2 * len(solvers) + 1) + "|",
        ]
        for r in res[key]:
            cells = [f"({r['N']}, {r['H']}, {r['C']})", f"{r['ours']['cpu_s']:.2f}"]
            diffs, dis = [], []
            for s in solvers:
                ref = r[s]
                if "speedup_cpu" in ref:
                    cells += [f"{ref['cpu_s']:.1f}", f"{ref['speedup_cpu']:.0f}x"]
                    diffs.append(ref["objective_rel_diff"])
                    dis.append(ref.get("prediction_disagreement", float("nan")))
                elif "speedup_cpu_lower_bound" in ref:
                    cells += [
                        f"> {res['cap_s']:.0f} (cap)",
                        f"> {ref['speedup_cpu_lower_bound']:.0f}x",
                    ]
                else:
                    cells += [ref["status"], "-"]
            cells += [f"{max(diffs):.1e}" if diffs else "-", f"{max(dis):.4f}" if dis else "-"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    g = res["ours_grid"]
    lines += [
        "## Ours alone on the paper's grid",
        "",
        f"All {len(g['rows']) // 2} (N, H, C) of the grid (seed 0): SVM-GLN "
        f"{g['total_cpu_s']['SVM-GLN']:.1f} CPU-s in total, SVM-L2 "
        f"{g['total_cpu_s']['SVM-L2']:.1f} CPU-s; every solve optimal: "
        f"{g['all_optimal']}; largest certified relative duality gap "
        f"{g['max_gap_relative']:.1e}.",
        "",
        "| (N, H, C) | SVM-GLN CPU-s | iterations | gap | SVM-L2 CPU-s |",
        "|---|---|---|---|---|",
    ]
    rows = {(r["method"], r["N"], r["H"], r["C"]): r for r in g["rows"]}
    for N, H, C in sorted({(r["N"], r["H"], r["C"]) for r in g["rows"]}):
        a, b = rows[("SVM-GLN", N, H, C)], rows[("SVM-L2", N, H, C)]
        lines.append(
            f"| ({N}, {H}, {C}) | {a['cpu_s']:.2f} | {a['iterations']} | "
            f"{a['gap_relative']:.0e} | {b['cpu_s']:.2f} |"
        )
    t = res["targets"]
    lines += ["", "## Targets", ""]
    for name, value in t.items():
        lines.append(f"- {name}: {value}")
    b, gd = res["batch"], res.get("gd")
    lines += [
        "",
        f"Batched solve of 3 seeds at ({b['N']}, {b['H']}, {b['C']}): "
        f"{b['batch_cpu_s']:.2f} CPU-s vs {b['loop_cpu_s']:.2f} CPU-s one by one "
        f"({b['note']}).",
    ]
    if gd:
        lines.append(
            f"GD training, deep GLN ({gd['N']}, {gd['H']}, {gd['C']}), "
            f"{gd['replicas']} replicas x {gd['steps']} steps: loop "
            f"{gd['loop_cpu_s']:.2f} CPU-s, batched {gd['batch_cpu_s']:.2f} CPU-s "
            f"({gd['speedup_cpu']:.1f}x)."
        )
    return "\n".join(lines) + "\n"


def targets(res: dict) -> dict:
    out = {}
    big = [
        r
        for r in res["ours_grid"]["rows"]
        if (r["method"], r["N"], r["H"], r["C"]) == ("SVM-GLN", 2000, 100, 4)
    ]
    if big:
        r = big[0]
        out["SVM-GLN (2000, 100, 4) < 10 CPU-s to gap 1e-8"] = (
            f"{r['cpu_s']:.2f} CPU-s, gap {r['gap_relative']:.1e}, {r['status']} -> "
            f"{'met' if r['cpu_s'] < 10 and r['gap_relative'] <= 1e-8 else 'NOT met'}"
        )
    for key, solver, label in (
        ("svm_gln", "CLARABEL", "SVM-GLN vs cvxpy+Clarabel"),
        ("svm_l2", "OSQP", "SVM-L2 vs cvxpy+OSQP"),
    ):
        for r in res[key]:
            if (r["N"], r["H"], r["C"]) == (1000, 50, 2) and solver in r:
                ref = r[solver]
                if "speedup_cpu" in ref:
                    s, bound = ref["speedup_cpu"], ""
                else:
                    s, bound = ref.get("speedup_cpu_lower_bound", float("nan")), " (lower bound)"
                out[f"{label} at (1000, 50, 2) >= 100x"] = (
                    f"{s:.0f}x{bound} ({ref['status']}) -> {'met' if s >= 100 else 'NOT met'}"
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a minute)")
    parser.add_argument("--cap", type=float, default=None, help="seconds per reference solve")
    parser.add_argument("--no-gd", action="store_true", help="skip the GD timing")
    parser.add_argument("--out", type=Path, default=RESULTS / "gln_solvers.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    torch.set_num_threads(1)
    cfg = QUICK if args.quick else FULL
    cap = args.cap or cfg["cap"]
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    warm = problem(100, 5, 2)  # warm-up (first-call overheads) outside the timings
    gs.svm_gln(warm["X"], warm["y"], warm["ctx"], 2)
    res = {
        "quick": args.quick,
        "cap_s": cap,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "n_val": N_VAL,
    }
    res["svm_gln"] = side_by_side(
        "SVM-GLN", cfg["gln_side_by_side"], ("ECOS", "CLARABEL"), cap, log
    )
    res["svm_l2"] = side_by_side("SVM-L2", cfg["l2_side_by_side"], ("OSQP",), cap, log)
    res["ours_grid"] = ours_grid(cfg["ours_grid"], log)
    res["batch"] = batch_vs_loop(cfg["batch"], log)
    res["gd"] = None if args.no_gd else gd_loop_vs_batched(cfg["gd"], log)
    res["targets"] = targets(res)
    res["total_wall_s"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    md = markdown(res)
    args.out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
