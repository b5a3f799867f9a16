"""Fig. 5 of the GaLU chapter: each width trained at its own size (`train_widths_converged`)
against the masked batch at the grid's largest width that `fig5_task` ran before
(`galu.train_one_hidden_converged`), and ACS with its normal matrix built in one pass
(`acs_widths`) against `galu.acs`, side by side in one process on the same paper-profile tasks.

The masked batch is what `fig5_task` ran before `models.galu_widths`; it stays in `models.galu`
(Fig. 2 and 4 use it) and is the oracle of the unit tests.

The tasks are the paper profile's Fig. 5 tasks of the seeds given (default: seed 0 of every
d', 4 of its 92 tasks); each part of a task (ACS where d' <= acs_dout_max, GaLU by Adam, ReLU by
Adam) runs old and new back to back, in alternating order, on one torch thread; CPU seconds by
`time.process_time`, to the stopping rule as in the task. The paper profile's CPU-s are
extrapolated per (d', part): measured CPU-s per task times its 23 tasks (the seeds' costs vary
with their stopping steps).

Agreement: the own-width runs compute the masked runs' arithmetic up to round-off
(`--check`: on small problems the same stops, MSEs to 1e-10, ACS bit for bit), but the
stopping rule compares losses every window, so a round-off difference can move a run's stop
by a window, after which the endpoints differ by what that window gains. The control
measures how much any round-off does: the old code on inputs X scaled by 1 + 1e-15 against
the old code.

    python benchmarks/bench_galu_fig5.py [--seeds 0]
    python benchmarks/bench_galu_fig5.py --check   # new against old on small problems (~10 s)
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
# isort: off
import implicit_bias  # noqa: E402, F401  # pins the AVX2 kernels before torch loads
import torch  # noqa: E402
# isort: on

from implicit_bias.chapters.galu_expressivity.tasks import fig5_tasks  # noqa: E402
from implicit_bias.core.chapter import load_profile  # noqa: E402
from implicit_bias.models import galu  # noqa: E402
from implicit_bias.models.galu_widths import acs_widths, train_widths_converged  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("acs", "galu_adam", "relu")


def paper_profile() -> dict:
    return load_profile("galu_expressivity", "paper")


def inputs(task: dict, perturb: float = 0.0):
    """The task's data and gates, as `fig5_task` draws them."""
    d, ks = task["d"], [int(k) for k in task["k_grid"]]
    X, Y = galu.random_regression(task["m"], d, task["d_out"], task["seed"], "cpu")
    g = torch.Generator().manual_seed(task["seed"] + 1)
    gates = [torch.randn(d, k, generator=g, dtype=torch.float64) for k in ks]
    return X * (1 + perturb), Y, ks, gates


def old_part(task: dict, part: str, perturb: float = 0.0) -> dict:
    """Today's code before the change: `fig5_task` as it was."""
    X, Y, ks, gates = inputs(task, perturb)
    if part == "acs":
        runs = [
            galu.acs(X, Y, U, task["acs_iters"], "step", task["seed"] + 2, tol=task["acs_tol"])
            for U in gates
        ]
        return {"mse": [r["losses"][-1] for r in runs], "steps": [r["rounds"] for r in runs]}
    B, d, k_max = len(ks), task["d"], max(ks)
    U = torch.zeros(B, d, k_max, dtype=torch.float64)
    for i, Ui in enumerate(gates):
        U[i, :, : ks[i]] = Ui
    arch = "galu" if part == "galu_adam" else "relu"
    res = galu.train_one_hidden_converged(
        X.expand(B, -1, -1),
        Y.expand(B, -1, -1),
        k_max,
        arch,
        [task["seed"] + 3] * B,
        task["adam_lr"],
        task["adam_window"],
        task["adam_tol"],
        task["adam_halvings"],
        task["adam_max_steps"],
        widths=ks,
        U=U if arch == "galu" else None,
    )
    return {"mse": res["train_mse"], "steps": res["steps"], "converged": res["converged"]}


def new_part(task: dict, part: str) -> dict:
    """The new code, as `fig5_task` now calls it."""
    X, Y, ks, gates = inputs(task)
    if part == "acs":
        runs = [
            acs_widths(X, Y, U, task["acs_iters"], "step", task["seed"] + 2, tol=task["acs_tol"])
            for U in gates
        ]
        return {"mse": [r["losses"][-1] for r in runs], "steps": [r["rounds"] for r in runs]}
    arch = "galu" if part == "galu_adam" else "relu"
    res = train_widths_converged(
        X,
        Y,
        ks,
        arch,
        [task["seed"] + 3] * len(ks),
        task["adam_lr"],
        task["adam_window"],
        task["adam_tol"],
        task["adam_halvings"],
        task["adam_max_steps"],
        U=gates if arch == "galu" else None,
    )
    return {"mse": res["train_mse"], "steps": res["steps"], "converged": res["converged"]}


def check() -> None:
    """The new implementation against the reference on small problems: the same stops, the
    final MSEs to 1e-10 and the active units' weights to 1e-8 (Adam); ACS bit for bit."""
    X, Y = galu.random_regression(60, 3, 3, seed=31)
    widths, seeds = [2, 4, 5], [0, 1, 2]
    g = torch.Generator().manual_seed(40)
    gates = [torch.randn(3, w, generator=g, dtype=torch.float64) for w in widths]
    U = torch.zeros(3, 3, 5, dtype=torch.float64)
    for i, w in enumerate(widths):
        U[i, :, :w] = gates[i]
    args = (0.01, 100, 1e-3, 1, 3000)
    for arch in ("relu", "galu"):
        Ub, gb = (U, gates) if arch == "galu" else (None, None)
        ref = galu.train_one_hidden_converged(
            X.expand(3, -1, -1), Y.expand(3, -1, -1), 5, arch, seeds, *args, widths=widths, U=Ub
        )
        new = train_widths_converged(X, Y, widths, arch, seeds, *args, U=gb)
        assert new["steps"] == ref["steps"] and len(set(ref["steps"])) > 1, arch
        assert new["converged"] == ref["converged"], arch
        for a, b in zip(new["train_mse"], ref["train_mse"]):
            assert abs(a - b) <= 1e-10 * abs(b), (arch, a, b)
        for i, w in enumerate(widths):
            torch.testing.assert_close(new["W"][i], ref["W"][i, :, :w], rtol=1e-8, atol=1e-12)
            torch.testing.assert_close(new["V"][i], ref["V"][i, :w], rtol=1e-8, atol=1e-12)
    for dout in (1, 2):
        X, Y = galu.random_regression(80, 4, dout, seed=12)
        Ug = torch.randn(4, 6, generator=torch.Generator().manual_seed(13), dtype=torch.float64)
        ref = galu.acs(X, Y, Ug, 40, "step", seed=3, tol=1e-9)
        new = acs_widths(X, Y, Ug, 40, "step", seed=3, tol=1e-9)
        assert new["losses"] == ref["losses"] and new["rounds"] == ref["rounds"], dout
        assert torch.equal(new["W"], ref["W"]) and torch.equal(new["V"], ref["V"]), dout
    print("check: new equals old (Adam: same stops, MSE to 1e-10; ACS: bit for bit)")


# ---- The comparison -------------------------------------------------------------------------


def timed(fn, *args) -> tuple[dict, float]:
    c0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - c0


def differences(a: dict, b: dict) -> dict:
    abs_d = [abs(x - y) for x, y in zip(a["mse"], b["mse"])]
    return {
        "max_abs": max(abs_d),
        "max_rel": max(d / abs(y) for d, y in zip(abs_d, b["mse"])),
        "steps_differ": sum(x != y for x, y in zip(a["steps"], b["steps"])),
    }


def compare(task: dict, new_first: bool, log) -> list[dict]:
    rows = []
    for part in PARTS:
        if part == "acs" and task["d_out"] > task["acs_dout_max"]:
            continue
        order = [("new", new_part), ("old", old_part)][:: 1 if new_first else -1]
        runs = {name: timed(fn, task, part) for name, fn in order}
        (new, new_cpu), (old, old_cpu) = runs["new"], runs["old"]
        row = {
            "d_out": task["d_out"],
            "seed": task["seed"],
            "part": part,
            "widths": list(task["k_grid"]),
            "old_cpu_s": old_cpu,
            "new_cpu_s": new_cpu,
            "speedup": old_cpu / new_cpu,
            "old": old,
            "new": new,
            "new_vs_old": differences(new, old),
        }
        if part != "acs":  # ACS: the same products, bit for bit (unit test); no control needed
            control = old_part(task, part, perturb=1e-15)
            row["control_vs_old"] = differences(control, old)
        rows.append(row)
        log(
            f"d'={task['d_out']} seed {task['seed']} {part}: old {old_cpu:.1f} s, new "
            f"{new_cpu:.1f} s ({old_cpu / new_cpu:.2f}x), max rel diff "
            f"{row['new_vs_old']['max_rel']:.1e}"
        )
    return rows


def summarize(rows: list[dict], counts: Counter) -> list[dict]:
    out = []
    for dout in sorted(counts):
        for part in PARTS:
            mine = [r for r in rows if r["d_out"] == dout and r["part"] == part]
            if not mine:
                continue
            old = sum(r["old_cpu_s"] for r in mine)
            new = sum(r["new_cpu_s"] for r in mine)
            scale = counts[dout] / len(mine)
            out.append(
                {
                    "d_out": dout,
                    "part": part,
                    "tasks": len(mine),
                    "old_cpu_s": old,
                    "new_cpu_s": new,
                    "speedup": old / new,
                    "paper_tasks": counts[dout],
                    "paper_old_cpu_s": old * scale,
                    "paper_new_cpu_s": new * scale,
                }
            )
    return out


def markdown(res: dict) -> str:
    s = res["summary"]
    old_total = sum(r["paper_old_cpu_s"] for r in s)
    new_total = sum(r["paper_new_cpu_s"] for r in s)
    old_cpu = sum(r["old_cpu_s"] for r in s)
    new_cpu = sum(r["new_cpu_s"] for r in s)
    lines = [
        "# galu_expressivity Fig. 5: own-width Adam and one-pass ACS against the masked batch",
        "",
        f"Generated by `python benchmarks/bench_galu_fig5.py --seeds "
        f"{' '.join(map(str, res['seeds']))}` on {res['machine']} ({res['date']}). The paper "
        f"profile's Fig. 5 tasks of seed(s) {res['seeds']} (m = 1024, d = 32, every d' and its "
        "width grid), each part to its stopping rule as in the task; old and new in one process, "
        "back to back per part in alternating order; CPU seconds of the part alone "
        "(`time.process_time`). The machine was shared with other jobs (load about 8 on 2 "
        "cores): CPU seconds, not wall seconds, are the measure.",
        "",
        "## Per d' and part",
        "",
        "| d' | part | tasks | old CPU-s | new CPU-s | ratio | paper tasks | paper profile, old "
        "CPU-s (extrapolated) | paper profile, new CPU-s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s:
        lines.append(
            f"| {r['d_out']} | {r['part']} | {r['tasks']} | {r['old_cpu_s']:.1f} | "
            f"{r['new_cpu_s']:.1f} | {r['speedup']:.2f}x | {r['paper_tasks']} | "
            f"{r['paper_old_cpu_s']:.0f} | {r['paper_new_cpu_s']:.0f} |"
        )
    lines += [
        f"| all | | | {old_cpu:.1f} | {new_cpu:.1f} | {old_cpu / new_cpu:.2f}x | 92 | "
        f"{old_total:.0f} | {new_total:.0f} |",
        "",
        "The paper columns: measured CPU-s of the part times the paper profile's tasks of that "
        "d' over the tasks measured (a task's cost varies with where its runs stop).",
        "",
        "## Agreement of the outputs",
        "",
        "The final training MSE of each width (ACS: after its last round): new against old, and "
        "(the control) old on inputs scaled by 1 + 1e-15 against old. `stops moved`: widths "
        "whose stopping step (ACS: rounds) differs. ACS is the same arithmetic bit for bit.",
        "",
        "| d' | seed | part | new vs old: max abs | max rel | stops moved | control vs old: "
        "max abs | max rel | stops moved |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["runs"]:
        a, c = r["new_vs_old"], r.get("control_vs_old")
        ctrl = (
            f"{c['max_abs']:.1e} | {c['max_rel']:.1e} | {c['steps_differ']}/{len(r['widths'])}"
            if c
            else "- | - | -"
        )
        lines.append(
            f"| {r['d_out']} | {r['seed']} | {r['part']} | {a['max_abs']:.1e} | "
            f"{a['max_rel']:.1e} | {a['steps_differ']}/{len(r['widths'])} | {ctrl} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "galu_fig5.json")
    parser.add_argument("--check", action="store_true", help="only compare on small problems")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.check:
        check()
        return
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f}s] {msg}", flush=True)

    tasks = fig5_tasks(paper_profile(), "cpu")
    counts = Counter(t["d_out"] for t in tasks)
    chosen = [t for t in tasks if t["seed"] in args.seeds]
    rows = [r for i, t in enumerate(chosen) for r in compare(t, i % 2 == 0, log)]
    res = {
        "seeds": args.seeds,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()}-core CPU, torch "
        f"{torch.__version__}, 1 thread",
        "runs": rows,
        "summary": summarize(rows, counts),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    tmp.replace(args.out)
    md = markdown(res)
    md_tmp = args.out.with_suffix(".md.tmp")
    md_tmp.write_text(md)
    md_tmp.replace(args.out.with_suffix(".md"))
    print(md)


if __name__ == "__main__":
    main()
