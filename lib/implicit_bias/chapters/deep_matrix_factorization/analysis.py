"""Frames and metrics of the deep matrix factorization chapter (Arora et al., 2019). Every metric
a claim names is written here by its literal name, so `grep <metric>` finds where it is
computed. Comparisons go through `core.verdicts.decision` (per-seed evidence); claims rest on
converged
runs only (`core.verdicts.evidence.converged_runs`), and the runs left out are counted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.evidence import Value, converged_runs

NUCLEAR_OK = ("optimal",)  # the cvxpy statuses a minimum nuclear-norm solution is used at


def completion_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per gradient-descent run: depth, init scale, seed, observation count, outcome."""
    rows = [
        {"depth": t["depth"], "scale": t["scale"], "seed": t["seed"], **run}
        for t, r in zip(tasks, results)
        for run in r["runs"]
    ]
    return pd.DataFrame(rows)


def nuclear_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per minimum nuclear-norm solve."""
    return pd.DataFrame(
        [{"seed": t["seed"], "count": t["count"], **r} for t, r in zip(tasks, results)]
    )


def _with_dropped(ev: decision.Evidence, dropped: int) -> decision.Evidence:
    return dataclasses.replace(ev, dropped=int(dropped))


def _paired_cells(a: pd.DataFrame, b: pd.DataFrame, value: str) -> decision.Evidence:
    """a - b paired by seed: the per-seed mean over observation counts of the difference, on
    the (seed, count) cells where both runs converged (a seed's counts share its ground truth,
    so they are averaged first; the seeds are independent). Cells left out are counted."""
    a_ok, a_drop = converged_runs(a, converged=("ok",) + NUCLEAR_OK)
    b_ok, b_drop = converged_runs(b, converged=("ok",) + NUCLEAR_OK)
    both = a_ok.merge(b_ok, on=["seed", "count"], suffixes=("_a", "_b"))
    diff = both[f"{value}_a"] - both[f"{value}_b"]
    per_seed = diff.groupby(both["seed"]).mean()
    return _with_dropped(decision.paired_differences(per_seed), a_drop + b_drop)


def recovery_metrics(frame: pd.DataFrame, nuclear: pd.DataFrame, scale: float) -> dict:
    """Fig. 1 (Sec. 2.2): reconstruction error and distance from low rank of depths 3 and 4
    against depth 2 and against the minimum nuclear-norm solution, at the profile's counts."""
    at = frame[frame["scale"] == scale]
    nuclear = nuclear[nuclear["count"].isin(at["count"])]

    def depth(n: int) -> pd.DataFrame:
        return at[at["depth"] == n]

    return {
        "fig1_error_depth3_minus_depth2": _paired_cells(depth(3), depth(2), "rel_error"),
        "fig1_error_depth4_minus_depth2": _paired_cells(depth(4), depth(2), "rel_error"),
        "fig1_error_depth3_minus_nuclear": _paired_cells(depth(3), nuclear, "rel_error"),
        "tail_share_depth3_minus_depth2": _paired_cells(depth(3), depth(2), "tail_share"),
        "tail_share_depth4_minus_depth3": _paired_cells(depth(4), depth(3), "tail_share"),
    }


def ratio_frame(frame: pd.DataFrame, nuclear: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2: each run's nuclear norm over the minimum nuclear norm of its observations."""
    ok, _ = converged_runs(nuclear, converged=NUCLEAR_OK)
    out = frame.merge(
        ok[["seed", "count", "nuclear_norm"]].rename(columns={"nuclear_norm": "min_nuclear"}),
        on=["seed", "count"],
        how="left",
    )
    out["nuclear_ratio"] = out["nuclear_norm"] / out["min_nuclear"]
    return out


def ratio_data(ratios: pd.DataFrame) -> pd.DataFrame:
    """The numbers Fig. 2 plots, per run (the training error at the stop, which only says the
    stopping rule was met, is left out)."""
    cols = ["depth", "scale", "seed", "count", "status", "steps", "rel_error", "nuclear_ratio"]
    return ratios[cols]


def init_metrics(ratios: pd.DataFrame, few: int, many: int, depth: int) -> dict:
    """Fig. 2 (Sec. 2.2), depth `depth`: with few observations, how the nuclear-norm ratio and
    the error move from the largest to the smallest initialization (paired by seed); with many,
    how far the smallest initialization's nuclear norm is above the minimum."""
    d = ratios[(ratios["depth"] == depth)].dropna(subset=["nuclear_ratio"])
    small, large = d["scale"].min(), d["scale"].max()

    def cells(count: int, scale: float) -> pd.DataFrame:
        return d[(d["count"] == count) & (d["scale"] == scale)]

    many_ok, many_drop = converged_runs(cells(many, small))
    return {
        "fig2_few_ratio_small_minus_large_init": _paired_cells(
            cells(few, small), cells(few, large), "nuclear_ratio"
        ),
        "fig2_few_error_small_minus_large_init": _paired_cells(
            cells(few, small), cells(few, large), "rel_error"
        ),
        "fig2_many_ratio_minus_one": _with_dropped(
            decision.per_seed(many_ok.set_index("seed")["nuclear_ratio"] - 1.0), many_drop
        ),
    }


def dynamics_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per singular-value dynamics run (depth, step factor): deviation and exponent."""
    return pd.DataFrame(
        [
            {
                "depth": t["depth"],
                "lr_factor": t["lr_factor"],
                "lr": r["lr"],
                "steps": r["steps"],
                "deviation": r["deviation"],
                "exponent": r["exponent"],
                "exponent_points": r["exponent_points"],
                "exponent_theory": 1 - 1 / t["depth"],
            }
            for t, r in zip(tasks, results)
        ]
    )


def trajectories_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """The recorded trajectories (every depth, every step factor): t, r, measured and
    ODE-integrated sigma_r."""
    rows = []
    for t, r in zip(tasks, results):
        for time, s, s_ode in zip(r["times"], r["sigma"], r["sigma_ode"]):
            for k, (a, b) in enumerate(zip(s, s_ode)):
                rows.append(
                    {
                        "depth": t["depth"],
                        "lr_factor": t["lr_factor"],
                        "t": time,
                        "r": k + 1,
                        "sigma": a,
                        "sigma_ode": b,
                    }
                )
    return pd.DataFrame(rows)


def deviation_slope(rows: pd.DataFrame) -> float:
    """Log-log slope of the ODE deviation against the step size (1 when it is O(step))."""
    return float(np.polyfit(np.log(rows["lr"]), np.log(rows["deviation"]), 1)[0])


def dynamics_metrics(dyn: pd.DataFrame) -> dict:
    """Theorem 3 (Sec. 3): the deviation of the measured singular values from the equation
    integrated along the run, at the smallest step of every depth (the largest of these
    deviations: the claim is that each is small); its order in the step (slopes per depth, the
    smallest and the largest); the fitted exponent of the rate's dependence on sigma_r^2 per
    depth (the equation's 1 - 1/N)."""
    finest = dyn[dyn["lr_factor"] == dyn["lr_factor"].min()].set_index("depth")
    slopes = pd.Series({n: deviation_slope(rows) for n, rows in dyn.groupby("depth")})
    out = {
        "thm3_deviation_at_smallest_step_max": Value(float(finest["deviation"].max())),
        "thm3_deviation_slope_min": Value(float(slopes.min())),
        "thm3_deviation_slope_max": Value(float(slopes.max())),
    }
    exps = finest["exponent"]
    out["thm3_rate_exponent_depth2"] = Value(float(exps.get(2, np.nan)))
    out["thm3_rate_exponent_depth3"] = Value(float(exps.get(3, np.nan)))
    out["thm3_rate_exponent_depth4"] = Value(float(exps.get(4, np.nan)))
    return out


def recovery_table(frame: pd.DataFrame, nuclear: pd.DataFrame, scale: float) -> pd.DataFrame:
    """Fig. 1's numbers: mean and standard deviation over seeds of the reconstruction error per
    method and observation count (converged runs only; the runs left out are counted)."""
    ok, _ = converged_runs(frame[frame["scale"] == scale])
    gd = ok.assign(method=ok["depth"].map(lambda n: f"depth {n}"))
    nuc, _ = converged_runs(nuclear, converged=NUCLEAR_OK)
    both = pd.concat([gd, nuc.assign(method="min nuclear norm")])
    table = both.groupby(["method", "count"])["rel_error"].agg(["mean", "std", "count"])
    table = table.rename(columns={"count": "runs"}).reset_index()
    total = (
        pd.concat(
            [
                frame[frame["scale"] == scale].assign(
                    method=lambda f: f["depth"].map(lambda n: f"depth {n}")
                ),
                nuclear.assign(method="min nuclear norm"),
            ]
        )
        .groupby(["method", "count"])
        .size()
    )
    table["unconverged"] = [
        int(total[(m, c)] - r) for m, c, r in zip(table["method"], table["count"], table["runs"])
    ]
    return table
