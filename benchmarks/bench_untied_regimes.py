"""The untied_diagonal chapter's `regimes` sweep against its `fig71` sweep: what computing each
shared gradient-descent run once would save, and what it would change, measured side by side in
one process on the paper profile's tasks. No library code changes: the sharing designs live here.

Per data seed, the `regimes` task runs 42 (alpha, s) points; 24 of them (s = 1 at alpha in
[1e-6, 10], and alpha = 1e-6 at s in [1, 1e4]; (1e-6, 1) is on both lines, so it is run twice)
are points the `fig71` task of the same seed also runs, with the same data and GD settings.
Measured, in one process on one torch thread, CPU seconds by `time.process_time`:

- today: `scale_shape_task` on the fig71 task and on the regimes task, as the sweeps run them;
- A, "regimes reads fig71": `scale_shape_task` on the regimes task's 18 other points only
  (with its `extra_m`), the shared points' values taken from the fig71 result;
- B, "one task": one `scale_shape_task` over the fig71 grid plus those 18 points, split into
  the two results.

The per-seed order alternates (today first on even positions, the designs first on odd ones).

Agreement: `gradient_descent` runs its points as one batch, and a point's result depends on
the batch it ran in at round-off level (the BLAS products' blocking depends on the number of
rows, which shrinks as runs converge). So A changes the regimes outputs at the shared points,
and B changes the fig71 outputs as well; the tables give, per output, how many values differ
bit for bit and by how much, and the chapter's metrics recomputed from each design's results
(`analysis.regimes_metrics`, `analysis.fig71_metrics`, read-only) against today's.

    python benchmarks/bench_untied_regimes.py [--seeds 0 1 2 3 4 5 6]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from implicit_bias.chapters.untied_diagonal import analysis  # noqa: E402
from implicit_bias.chapters.untied_diagonal.tasks import (  # noqa: E402
    fig71_tasks,
    regimes_tasks,
    scale_shape_task,
)
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.core.engine.paths import write_atomic  # noqa: E402
from implicit_bias.core.verdicts.decision import Evidence  # noqa: E402
from implicit_bias.core.verdicts.evidence import Value  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# `scale_shape_task`'s outputs with one value per (alpha, s) point
PER_POINT = (
    "alpha",
    "shape",
    "m",
    "pop_error_gd",
    "pop_error_q",
    "gd_vs_q",
    "dist_l1",
    "dist_l2",
    "steps",
    "converged",
)
# its outputs that do not depend on the points (the data's min-L1/L2 and the extra m)
PER_TASK = ("pop_error_l1", "l1_status", "pop_error_l2", "extra_m", "extra_m_dist_l1")
PER_TASK += ("extra_m_dist_l2",)


def shared_mask(points: list, others: list) -> np.ndarray:
    """Which of `points` are among `others`, compared exactly (both grids are 10 ** linspace
    with a step of 0.5, so a point both run is the same float pair)."""
    known = {tuple(p) for p in others}
    return np.array([tuple(p) in known for p in points])


def timed(fn, *args):
    c0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - c0


def assemble(points: list, sources: list[tuple[dict, list]], per_task: dict) -> dict:
    """A `scale_shape_task` result over `points`, each point's values read from the first of
    `sources` ((result, its points)) that ran it; the per-task values from `per_task`."""
    out = {k: [] for k in PER_POINT}
    index = [{tuple(p): i for i, p in enumerate(pts)} for _, pts in sources]
    for p in points:
        result, i = next((r, ix[tuple(p)]) for (r, _), ix in zip(sources, index) if tuple(p) in ix)
        for k in PER_POINT:
            out[k].append(result[k][i])
    out.update({k: per_task[k] for k in PER_TASK})
    return out


def design_a(reg_task: dict, fig71_task: dict, fig71_result: dict) -> dict:
    """The regimes result with its shared points read from the fig71 result: only the other
    points run (one batch)."""
    mask = shared_mask(reg_task["points"], fig71_task["points"])
    rest = [p for p, s in zip(reg_task["points"], mask) if not s]
    own = scale_shape_task({**reg_task, "points": rest})
    return assemble(reg_task["points"], [(fig71_result, fig71_task["points"]), (own, rest)], own)


def design_b(reg_task: dict, fig71_task: dict) -> tuple[dict, dict]:
    """One batch over the fig71 grid and the regimes points it lacks, split into the two
    results (the fig71 one without extra_m, as its task has none)."""
    mask = shared_mask(reg_task["points"], fig71_task["points"])
    rest = [p for p, s in zip(reg_task["points"], mask) if not s]
    points = fig71_task["points"] + rest
    union = scale_shape_task({**reg_task, "points": points})
    fig71_per_task = {**union, "extra_m": [], "extra_m_dist_l1": [], "extra_m_dist_l2": []}
    return (
        assemble(fig71_task["points"], [(union, points)], fig71_per_task),
        assemble(reg_task["points"], [(union, points)], union),
    )


def differences(new: dict, old: dict, keys=PER_POINT + PER_TASK) -> dict:
    """Per output: values that differ bit for bit (of how many), max abs and max rel difference."""
    out = {}
    for k in keys:
        a = np.atleast_1d(np.asarray(new[k]))
        b = np.atleast_1d(np.asarray(old[k]))
        if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
            a, b = a.astype(float), b.astype(float)
            diff = np.abs(a - b)
            rel = diff / np.maximum(np.abs(b), 1e-300)
            out[k] = {
                "differ": int((a != b).sum()),
                "of": int(a.size),
                "max_abs": float(diff.max()) if diff.size else 0.0,
                "max_rel": float(rel.max()) if rel.size else 0.0,
            }
        else:
            out[k] = {"differ": int((a != b).sum()), "of": int(a.size)}
    return out


def merge(per_seed: list[dict]) -> dict:
    total: dict = {}
    for d in per_seed:
        for k, v in d.items():
            t = total.setdefault(k, {"differ": 0, "of": 0, "max_abs": 0.0, "max_rel": 0.0})
            t["differ"] += v["differ"]
            t["of"] += v["of"]
            t["max_abs"] = max(t["max_abs"], v.get("max_abs", 0.0))
            t["max_rel"] = max(t["max_rel"], v.get("max_rel", 0.0))
    return total


def plain(metric) -> list[float] | float | bool:
    if isinstance(metric, Value):
        metric = metric.value
    if isinstance(metric, Evidence):
        return [float(v) for v in metric.values]
    return metric.item() if hasattr(metric, "item") else metric


def metric_changes(new: dict, old: dict) -> list[dict]:
    rows = []
    for name in old:
        a, b = plain(new[name]), plain(old[name])
        x, y = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
        rows.append(
            {
                "metric": name,
                "today": b,
                "design": a,
                "identical": bool(np.array_equal(x, y)),
                "max_rel": float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1e-300))),
            }
        )
    return rows


def regimes_metrics(results: list[dict], cfg: dict) -> dict:
    frame = analysis.scale_shape_frame(results, cfg["data"]["seeds"])
    balanced, unbalanced = analysis.split_regimes(frame, cfg)
    return analysis.regimes_metrics(balanced, unbalanced, results)


def fig71_metrics(results: list[dict], cfg: dict) -> dict:
    frame = analysis.fig71_frame(results, cfg)
    return analysis.fig71_metrics(frame, cfg["small_alpha_max"])


def run_seed(fig71_task: dict, reg_task: dict, today_first: bool, log) -> dict:
    """Today's two tasks and the two designs on one seed, in the order asked."""
    out: dict = {}

    def today() -> None:
        out["fig71"], out["fig71_cpu"] = timed(scale_shape_task, fig71_task)
        out["regimes"], out["regimes_cpu"] = timed(scale_shape_task, reg_task)

    def designs() -> None:
        # A needs today's fig71 result; its fig71 run is today's, so only its own run is timed
        if "fig71" not in out:
            out["fig71"], out["fig71_cpu"] = timed(scale_shape_task, fig71_task)
        out["a"], out["a_cpu"] = timed(design_a, reg_task, fig71_task, out["fig71"])
        (out["b_fig71"], out["b_regimes"]), out["b_cpu"] = timed(design_b, reg_task, fig71_task)

    if today_first:
        today()
        designs()
    else:
        designs()
        out["regimes"], out["regimes_cpu"] = timed(scale_shape_task, reg_task)
    mask = shared_mask(reg_task["points"], fig71_task["points"])
    row = {
        "seed": reg_task["seed"],
        "order": "today first" if today_first else "designs first",
        "regimes_points": len(mask),
        "shared_points": int(mask.sum()),
        "fig71_points": len(fig71_task["points"]),
        "fig71_cpu_s": out["fig71_cpu"],
        "regimes_cpu_s": out["regimes_cpu"],
        "a_cpu_s": out["a_cpu"],
        # A's own points that ran to the step cap (in a batch of their own)
        "a_capped": sum(
            st == reg_task["max_steps"] and not s for st, s in zip(out["a"]["steps"], mask)
        ),
        "b_cpu_s": out["b_cpu"],
        "a_regimes_vs_today": differences(out["a"], out["regimes"]),
        "b_regimes_vs_today": differences(out["b_regimes"], out["regimes"]),
        "b_fig71_vs_today": differences(out["b_fig71"], out["fig71"]),
        # where both sweeps run a point today, do they agree? (the round-off of batching)
        "today_shared_fig71_vs_regimes": differences(
            assemble(
                [p for p, s in zip(reg_task["points"], mask) if s],
                [(out["fig71"], fig71_task["points"])],
                out["regimes"],
            ),
            assemble(
                [p for p, s in zip(reg_task["points"], mask) if s],
                [(out["regimes"], reg_task["points"])],
                out["regimes"],
            ),
            PER_POINT,
        ),
    }
    log(
        f"seed {row['seed']} ({row['order']}): fig71 {row['fig71_cpu_s']:.1f} CPU-s, regimes "
        f"{row['regimes_cpu_s']:.1f}; A (regimes' other points) {row['a_cpu_s']:.1f}; "
        f"B (one task) {row['b_cpu_s']:.1f}"
    )
    row["results"] = {k: out[k] for k in ("fig71", "regimes", "a", "b_fig71", "b_regimes")}
    return row


def summarize(rows: list[dict], n_paper_seeds: int) -> dict:
    def total(key: str) -> float:
        return sum(r[key] for r in rows)

    today = total("fig71_cpu_s") + total("regimes_cpu_s")
    scale = n_paper_seeds / len(rows)
    return {
        "seeds": len(rows),
        "fig71_cpu_s": total("fig71_cpu_s"),
        "regimes_cpu_s": total("regimes_cpu_s"),
        "a_cpu_s": total("a_cpu_s"),
        "b_cpu_s": total("b_cpu_s"),
        "regimes_ratio_a": total("regimes_cpu_s") / total("a_cpu_s"),
        "today_cpu_s": today,
        "a_total_cpu_s": total("fig71_cpu_s") + total("a_cpu_s"),
        "ratio_a": today / (total("fig71_cpu_s") + total("a_cpu_s")),
        "ratio_b": today / total("b_cpu_s"),
        "paper_today_cpu_s": today * scale,
        "paper_a_cpu_s": (total("fig71_cpu_s") + total("a_cpu_s")) * scale,
        "paper_b_cpu_s": total("b_cpu_s") * scale,
        # per-seed ratios, whose median a load spike on one seed does not move
        "median_ratio_a": float(
            np.median(
                [
                    (r["fig71_cpu_s"] + r["regimes_cpu_s"]) / (r["fig71_cpu_s"] + r["a_cpu_s"])
                    for r in rows
                ]
            )
        ),
        "median_ratio_b": float(
            np.median([(r["fig71_cpu_s"] + r["regimes_cpu_s"]) / r["b_cpu_s"] for r in rows])
        ),
    }


def fmt(x) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(f"{v:.6g}" for v in x) + "]"
    if isinstance(x, float):
        return f"{x:.10g}"
    return str(x)


def diff_table(title: str, diffs: dict) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| output | values differing bit for bit | max abs difference | max rel difference |",
        "|---|---|---|---|",
    ]
    for k, d in diffs.items():
        lines.append(
            f"| {k} | {d['differ']} of {d['of']} | {d['max_abs']:.1e} | {d['max_rel']:.1e} |"
        )
    return lines + [""]


def metrics_table(title: str, rows: list[dict]) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| metric | today | design | bit for bit | max rel difference |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['metric']} | {fmt(r['today'])} | {fmt(r['design'])} | "
            f"{'yes' if r['identical'] else 'no'} | {r['max_rel']:.1e} |"
        )
    return lines + [""]


def markdown(res: dict) -> str:
    s = res["summary"]
    lo, hi = (f(r["a_capped"] for r in res["runs"]) for f in (min, max))
    capped = str(lo) if lo == hi else f"{lo} to {hi}"
    lines = [
        "# untied_diagonal: the regimes sweep's runs that the fig71 sweep also runs",
        "",
        f"Generated by `python benchmarks/bench_untied_regimes.py --profile {res['profile']} "
        "--seeds "
        f"{' '.join(map(str, res['seed_list']))}` on {res['machine']} ({res['date']}). The "
        f"{res['profile']} profile's fig71 and regimes tasks (d = {res['d']}, n = {res['n']}; "
        f"{res['fig71_points']} and "
        f"{res['regimes_points']} (alpha, s) points per seed, {res['shared_points']} of the "
        "regimes points also in the fig71 grid) of the data seeds listed, whole "
        "`scale_shape_task` calls (GD, the Q-minimizers, min-L1/L2); everything in one process, "
        "the order per seed alternating; CPU seconds by `time.process_time`.",
        "",
        "**Verdict: no library change.** The engine caches each sweep's tasks on their own (an "
        "entry is keyed by its task's JSON and the fingerprint of its code), with no way for "
        "one sweep's task to use another sweep's entries: a regimes task reading fig71 entries "
        "would depend on files its key and fingerprint do not cover (`stale`/`recompute` would "
        "not see the dependence). And neither design returns today's outputs bit for bit: "
        "batched GD's results depend on the batch at round-off level (tables below), so the "
        "shared points' values differ between the two sweeps already today.",
        "",
        "## CPU seconds",
        "",
        "| part | today CPU-s | A: regimes reads fig71 | B: one task per seed |",
        "|---|---|---|---|",
        f"| fig71 task | {s['fig71_cpu_s']:.1f} | {s['fig71_cpu_s']:.1f} (unchanged) | "
        "in the one task |",
        f"| regimes task | {s['regimes_cpu_s']:.1f} | {s['a_cpu_s']:.1f} (its other points; "
        f"{s['regimes_ratio_a']:.2f}x) | in the one task |",
        f"| both | {s['today_cpu_s']:.1f} | {s['a_total_cpu_s']:.1f} ({s['ratio_a']:.2f}x) | "
        f"{s['b_cpu_s']:.1f} ({s['ratio_b']:.2f}x) |",
        f"| {res['profile']} profile, {res['paper_seeds']} seeds (extrapolated) | "
        f"{s['paper_today_cpu_s']:.0f} | {s['paper_a_cpu_s']:.0f} | {s['paper_b_cpu_s']:.0f} |",
        f"| median of the per-seed ratios (both tasks) | | {s['median_ratio_a']:.2f}x | "
        f"{s['median_ratio_b']:.2f}x |",
        "",
        "Design A's fig71 task is today's (the same call, timed once per seed). B costs less "
        f"than A although it runs the same points: of the points A still runs, {capped} per "
        "seed go to the step cap in a batch of their own, where a step's fixed cost "
        "weighs most; in B they join the fig71 runs that go to the cap.",
        "",
        "## Per seed",
        "",
        "| seed | order | fig71 CPU-s | regimes CPU-s | A: regimes' other points CPU-s | "
        "B: one task CPU-s |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        lines.append(
            f"| {r['seed']} | {r['order']} | {r['fig71_cpu_s']:.1f} | {r['regimes_cpu_s']:.1f} "
            f"| {r['a_cpu_s']:.1f} | {r['b_cpu_s']:.1f} |"
        )
    same = [
        k
        for k in PER_POINT + PER_TASK
        if all(k not in d or d[k]["differ"] == 0 for d in res["agreement"].values())
    ]
    lines += [
        "",
        "## Agreement of the outputs (over the seeds measured)",
        "",
        "A large relative difference goes with a value at round-off level itself (gd_vs_q, "
        "dist_l2 near 1e-12 where gradient descent meets its prediction). Bit for bit in "
        f"every table: {', '.join(same) or 'none'}.",
        "",
    ]
    lines += diff_table(
        "Today: the shared points as the fig71 task returns them against the regimes task",
        res["agreement"]["today_shared_fig71_vs_regimes"],
    )
    lines += diff_table("A: regimes result against today's", res["agreement"]["a_regimes"])
    lines += diff_table("B: regimes result against today's", res["agreement"]["b_regimes"])
    lines += diff_table("B: fig71 result against today's", res["agreement"]["b_fig71"])
    lines += [
        "## The chapter's metrics from each design's results (seeds measured)",
        "",
        "Computed with the chapter's analysis functions, unchanged; per-seed evidence is "
        "listed as its per-seed values.",
        "",
    ]
    lines += metrics_table("A: regimes metrics", res["metrics"]["a_regimes"])
    lines += metrics_table("B: regimes metrics", res["metrics"]["b_regimes"])
    lines += metrics_table("B: fig71 metrics", res["metrics"]["b_fig71"])
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: all")
    parser.add_argument("--profile", default="paper", help="smoke: a quick check of the script")
    parser.add_argument("--out", type=Path, default=RESULTS / "untied_regimes.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    cfg = load_profile("untied_diagonal", args.profile)
    seeds = args.seeds if args.seeds is not None else list(cfg["data"]["seeds"])
    fig71 = {t["seed"]: {**t, "device": "cpu"} for t in fig71_tasks(cfg)}
    reg = {t["seed"]: {**t, "device": "cpu"} for t in regimes_tasks(cfg)}
    rows = [run_seed(fig71[s], reg[s], i % 2 == 0, log) for i, s in enumerate(seeds)]
    sub = {**cfg, "data": {**cfg["data"], "seeds": seeds}}
    kept = [r.pop("results") for r in rows]  # the outputs themselves stay out of the JSON
    results = {k: [r[k] for r in kept] for k in ("fig71", "regimes", "a", "b_fig71", "b_regimes")}
    mask = shared_mask(reg[seeds[0]]["points"], fig71[seeds[0]]["points"])
    res = {
        "profile": args.profile,
        "d": cfg["data"]["d"],
        "n": cfg["data"]["n"],
        "seed_list": seeds,
        "paper_seeds": len(cfg["data"]["seeds"]),
        "fig71_points": len(fig71[seeds[0]]["points"]),
        "regimes_points": len(mask),
        "shared_points": int(mask.sum()),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "summary": summarize(rows, len(cfg["data"]["seeds"])),
        "agreement": {
            "today_shared_fig71_vs_regimes": merge(
                [r["today_shared_fig71_vs_regimes"] for r in rows]
            ),
            "a_regimes": merge([r["a_regimes_vs_today"] for r in rows]),
            "b_regimes": merge([r["b_regimes_vs_today"] for r in rows]),
            "b_fig71": merge([r["b_fig71_vs_today"] for r in rows]),
        },
        "metrics": {
            "a_regimes": metric_changes(
                regimes_metrics(results["a"], sub), regimes_metrics(results["regimes"], sub)
            ),
            "b_regimes": metric_changes(
                regimes_metrics(results["b_regimes"], sub),
                regimes_metrics(results["regimes"], sub),
            ),
            "b_fig71": metric_changes(
                fig71_metrics(results["b_fig71"], sub), fig71_metrics(results["fig71"], sub)
            ),
        },
        "runs": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out, json.dumps(res, indent=1, default=float) + "\n")
    md = markdown(res)
    write_atomic(args.out.with_suffix(".md"), md)
    print(md)


if __name__ == "__main__":
    main()
