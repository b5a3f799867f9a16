"""The chapter's tables and the metrics its claims name (data/claims/untied_diagonal.yaml):
frames of the sweeps' results, the metrics dicts, and the tables the notebook displays."""

from __future__ import annotations

import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.decision import Evidence
from implicit_bias.core.verdicts.evidence import Value, converged_runs
from implicit_bias.models.diagonal import normalized_q_shape

from .tasks import regimes_points

# ----------------------------------------------------------------------------------------------
# Theorem 1
# ----------------------------------------------------------------------------------------------


def step_slope(errors: np.ndarray, rel_steps) -> np.ndarray:
    """Least-squares slope of log(error) against log(step), per column of errors (steps, runs)."""
    x = np.log(np.asarray(rel_steps, dtype=float))
    ly = np.log(np.asarray(errors, dtype=float))
    x = x - x.mean()
    return (x @ (ly - ly.mean(axis=0))) / (x @ x)


def theorem1_frame(results: list[dict], seeds) -> pd.DataFrame:
    """One row per (seed, initialization) of `theorem1_task` results."""
    rows = []
    for seed, res in zip(seeds, results):
        gd = np.array(res["gd_error"])
        slopes = step_slope(gd, res["rel_steps"])
        for b, name in enumerate(res["inits"]):
            row = {"seed": seed, "init": name}
            row.update({f"gd_error_step_{s:g}": gd[i, b] for i, s in enumerate(res["rel_steps"])})
            row.update(
                {
                    "step_slope": slopes[b],
                    "gf_error": res.get("gf_error", [np.nan] * 9)[b],
                    "gf_converged": res.get("gf_converged", [False] * 9)[b],
                    "wrong_half": res["wrong_half"][b],
                    "wrong_double": res["wrong_double"][b],
                    "qmin_kkt": res["qmin_kkt"][b],
                    "dist_weighted_l2": res["dist_weighted_l2"][b],
                    "dist_plain_l2": res["dist_plain_l2"][b],
                    "gd_steps_smallest": res["gd_steps"][-1][b],
                    "gd_converged": all(c[b] for c in res["gd_converged"]),
                }
            )
            rows.append(row)
    return pd.DataFrame(rows)


def theorem1_metrics(frame: pd.DataFrame, results: list[dict]) -> dict:
    """The Theorem 1 claims' metrics from `theorem1_frame`, over converged runs only (a gradient
    flow that did not meet the optimality conditions, a GD run stopped by its step cap and an
    unconverged tied run are left out; `theorem1_unconverged` counts them). A metric with no
    converged run left is NaN, so its claim fails."""
    flow = frame[frame["gf_converged"].astype(bool)]
    flow_lost = len(frame) - len(flow)
    gd_lost = int((~frame["gd_converged"].astype(bool)).sum())
    frame = frame[frame["gd_converged"].astype(bool)]
    smallest = [c for c in frame.columns if c.startswith("gd_error_step_")][-1]
    wrong = np.minimum(frame["wrong_half"], frame["wrong_double"])
    # kernel-regime rows (every m_i >> |beta_i|): large and unbalanced initializations
    ntk = frame[frame["init"].isin(["large", "unbalanced"])]
    ntk = ntk.assign(ratio=ntk["dist_weighted_l2"] / ntk["dist_plain_l2"])
    tied = [r["tied_error"] for r in results if r.get("tied_converged", False)]

    def gd(x: float) -> Value:
        return Value(float(x), dropped=gd_lost)

    return {
        "thm1_gf_max_rel_error": Value(
            float(flow["gf_error"].max()) if len(flow) else np.nan, dropped=flow_lost
        ),
        "thm1_gd_max_rel_error": gd(frame[smallest].max()),
        "thm1_step_slope_min": gd(frame["step_slope"].min()),
        "thm1_step_slope_max": gd(frame["step_slope"].max()),
        "thm1_wrong_scale_min_ratio": gd((wrong / frame[smallest]).min()),
        "thm1_qmin_max_kkt": float(frame["qmin_kkt"].max()),
        "tied_rel_error": Value(
            float(max(tied)) if tied else np.nan, dropped=len(results) - len(tied)
        ),
        "thm1_ntk_weighted_over_plain_l2": gd(ntk["ratio"].max()),
    }


def theorem1_unconverged(frame: pd.DataFrame, results: list[dict]) -> str:
    """One line: how many gradient-flow, GD (all step sizes) and tied runs did not converge."""
    return (
        f"unconverged runs (left out of the claims): gradient flow "
        f"{int((~frame['gf_converged'].astype(bool)).sum())} of {len(frame)}, GD "
        f"{int((~frame['gd_converged'].astype(bool)).sum())} of {len(frame)}, tied "
        f"{sum(not r.get('tied_converged', False) for r in results)} of {len(results)}"
    )


def metrics_table(metrics: dict) -> pd.DataFrame:
    """The metrics computed so far, one row each (column `value`)."""
    plain = {k: v.value if isinstance(v, Value) else v for k, v in metrics.items()}
    return pd.Series(plain, name="value").to_frame()


# ----------------------------------------------------------------------------------------------
# The shape of Q (App. E)
# ----------------------------------------------------------------------------------------------


def q_shape_frame(m_values, num: int = 201) -> pd.DataFrame:
    """Normalized Q_m(b) / Q_m(1) on [-1.5, 1.5] for each m (columns `m=<m>`), with |b| and
    b^2 (the two limits)."""
    b = np.linspace(-1.5, 1.5, num)
    data = {"beta": b, "abs": np.abs(b), "square": b**2}
    data.update({f"m={m:g}": normalized_q_shape(b, m) for m in m_values})
    return pd.DataFrame(data)


def q_shape_metrics() -> dict:
    """Max deviation of the normalized Q_m from b^2 (m = 1e3) and |b| (m = 1e-12) on [-1, 1]."""
    b = np.linspace(-1.0, 1.0, 2001)
    return {
        "qm_max_dev_from_square_m1e3": float(np.max(np.abs(normalized_q_shape(b, 1e3) - b**2))),
        "qm_max_dev_from_abs_m1e-12": float(
            np.max(np.abs(normalized_q_shape(b, 1e-12) - np.abs(b)))
        ),
    }


# ----------------------------------------------------------------------------------------------
# Scale and shape (Sec. 7.1, Sec. 9): the regimes and Fig. 7.1
# ----------------------------------------------------------------------------------------------


def scale_shape_frame(results: list[dict], seeds) -> pd.DataFrame:
    """Long table (seed, alpha, shape, ...) of `scale_shape_task` results."""
    keys = (
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
    frames = []
    for seed, res in zip(seeds, results):
        frame = pd.DataFrame({k: res[k] for k in keys})
        frame.insert(0, "seed", seed)
        frame["pop_error_l1"] = res["pop_error_l1"]
        frame["pop_error_l2"] = res["pop_error_l2"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def regimes_metrics(balanced: pd.DataFrame, unbalanced: pd.DataFrame, results: list[dict]) -> dict:
    """Sec. 7.1 limits: along s = 1 (alpha grid) and at a tiny alpha (shape grid), per seed, on
    the converged GD runs only (the smallest scales hit the step cap: no claim rests on them)."""
    lost_balanced = int((~balanced["converged"].astype(bool)).sum())
    lost_unbalanced = int((~unbalanced["converged"].astype(bool)).sum())
    balanced = balanced[balanced["converged"].astype(bool)]
    unbalanced = unbalanced[unbalanced["converged"].astype(bool)]
    mono = all(
        np.all(np.diff(g.sort_values("alpha")["dist_l1"].to_numpy()) > 0)
        for _, g in balanced.groupby("seed")
    )
    top = balanced[balanced["alpha"] == balanced["alpha"].max()]
    far = unbalanced[unbalanced["shape"] == unbalanced["shape"].max()]
    return {
        "regimes_dist_l1_monotone": Value(bool(mono), dropped=lost_balanced),
        "regimes_large_alpha_dist_l2": Value(float(top["dist_l2"].max()), dropped=lost_balanced),
        "regimes_unbalanced_dist_l2": Value(float(far["dist_l2"].max()), dropped=lost_unbalanced),
        "regimes_qmin_tiny_m_dist_l1": float(max(max(r["extra_m_dist_l1"]) for r in results)),
    }


def split_regimes(frame: pd.DataFrame, cfg: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of `scale_shape_frame(regimes results)` on the balanced line s = 1 and those at
    the tiny scale (each task runs the points of `tasks.regimes_points`, balanced first)."""
    balanced, unbalanced = regimes_points(cfg)
    on_balanced_line = np.arange(len(frame)) % (len(balanced) + len(unbalanced)) < len(balanced)
    return frame[on_balanced_line], frame[~on_balanced_line]


def regimes_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean over data seeds of m, the distances to min-L1 and min-L2, and the steps taken, per
    (alpha, s) point."""
    return frame.groupby(["alpha", "shape"])[["m", "dist_l1", "dist_l2", "steps"]].mean()


def rich_limit_frame(results: list[dict], seeds) -> pd.DataFrame:
    """One row per (m, seed) of `rich_limit_task` results."""
    return pd.concat(
        [pd.DataFrame(r["rows"]).assign(seed=s) for s, r in zip(seeds, results)], ignore_index=True
    )


def rich_limit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The distance to min-L1 and that distance times log(1/m), m by seed."""
    return frame.pivot(index="m", columns="seed", values=["dist_l1", "dist_times_log_1_over_m"])


SUPPORT_SLACK = 1e-6  # dual slacks below this: the L1 solution's support (HiGHS accuracy ~1e-9)


def slack_exponents(result: dict) -> pd.DataFrame:
    """Per off-support coordinate j of one `rich_limit_task` result: the LP dual's slack
    s_j = 1 - |X^T nu|_j and the measured exponent e_j of |beta_j| ~ C_j (m/2)^{e_j} between
    the two smallest m, e_j = log(|beta_j(m1)| / |beta_j(m2)|) / log(m1 / m2)."""
    slack = np.asarray(result["slack"])
    logb = np.asarray(result["log10_abs_beta"])
    m = np.array([r["m"] for r in result["rows"]])
    exponent = (logb[-2] - logb[-1]) / (np.log10(m[-2]) - np.log10(m[-1]))
    off = slack > SUPPORT_SLACK
    return pd.DataFrame(
        {"slack": slack[off], "exponent": exponent[off], "log10_abs_beta_smallest_m": logb[-1][off]}
    )


def rich_limit_metrics(results: list[dict], seeds) -> dict:
    """The rate of the rich limit against the LP dual's slacks (claim
    rich_limit_rate_is_dual_slack): the largest |e_j - s_j| over off-support coordinates and
    seeds (`slack_exponents`)."""
    dev = [np.abs(f["exponent"] - f["slack"]).max() for f in map(slack_exponents, results)]
    return {"rich_limit_max_exponent_minus_slack": float(max(dev))}


def rich_limit_slack_table(results: list[dict], seeds) -> pd.DataFrame:
    """Per seed: the smallest dual slacks, the median and largest |e_j - s_j|, and the share of
    the off-support L1 mass at the smallest m carried by coordinates of slack below 0.05."""
    rows = []
    for seed, res in zip(seeds, results):
        f = slack_exponents(res)
        mass = 10.0 ** f["log10_abs_beta_smallest_m"]
        small = np.sort(f["slack"].to_numpy())[:3]
        rows.append(
            {
                "seed": seed,
                "smallest slacks": ", ".join(f"{v:.1e}" for v in small),
                "n slack < 0.05": int((f["slack"] < 0.05).sum()),
                "share of off-support mass (slack < 0.05)": float(
                    mass[f["slack"] < 0.05].sum() / mass.sum()
                ),
                "median |e - s|": float(np.median(np.abs(f["exponent"] - f["slack"]))),
                "max |e - s|": float(np.abs(f["exponent"] - f["slack"]).max()),
                "strong duality gap": abs(res["dual_objective"] - res["l1_norm"]),
            }
        )
    return pd.DataFrame(rows).set_index("seed")


def mirror_shapes(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the rows of shape 1/s from those of shape s > 1.

    Exact, not an approximation: swapping u and v leaves the model (beta = u v) and every
    gradient-descent update unchanged, so the run from (alpha, 1/s) is the run from (alpha, s)
    with the roles of u and v exchanged and yields the same predictor, bit for bit
    (`tests/models/test_diagonal.py` checks this).
    """
    mirrored = frame[frame["shape"] > 1].copy()
    mirrored["shape"] = 1.0 / mirrored["shape"]
    return pd.concat([frame, mirrored], ignore_index=True).sort_values(
        ["seed", "alpha", "shape"], ignore_index=True
    )


def fig71_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Population error (mean over data seeds) on the (alpha, s) grid, GD and Theorem 1."""
    return (
        frame.groupby(["alpha", "shape"])[
            ["m", "pop_error_gd", "pop_error_q", "pop_error_l1", "pop_error_l2"]
        ]
        .mean()
        .reset_index()
    )


def fig71_per_seed(frame: pd.DataFrame, small_alpha_max: float) -> pd.DataFrame:
    """Fig. 7.1's comparisons per data seed, over its small scales (alpha <= small_alpha_max)
    whose runs all converged (a (seed, alpha) row with a run stopped by the step cap is left
    out; `rows` counts what is left, `runs_dropped` the runs of the rows left out). Each value
    is the seed's least favourable small scale ("for every small scale"):

    - `balanced_margin`: min over s != 1 of err(s) / err(1) - 1 (> 0: s = 1 is best);
    - `min_growth_away_from_s1`: the smallest relative growth err[k+1] / err[k] - 1 of the
      population error per grid step away from s = 1, on both sides (> 0: it grows);
    - `extreme_over_balanced_min`: the smaller of err(s_min) / err(1) and err(s_max) / err(1).
    """
    rows = []
    for seed, grp in frame.groupby("seed"):
        used, dropped, margin, growth, ratio = 0, 0, [], [], []
        for alpha, row in grp.groupby("alpha"):
            if alpha > small_alpha_max * (1 + 1e-9):
                continue
            if not row["converged"].astype(bool).all():
                dropped += len(row)
                continue
            row = row.sort_values("shape")
            err = row["pop_error_gd"].to_numpy()
            center = int(np.argmin(np.abs(np.log10(row["shape"].to_numpy()))))
            used += 1
            margin.append(float(np.delete(err, center).min() / err[center] - 1))
            for side in (err[center:], err[center::-1]):  # moving away from s = 1
                growth.append(float(np.min(side[1:] / side[:-1] - 1)))
                ratio.append(float(side[-1] / side[0]))
        rows.append(
            {
                "seed": seed,
                "rows": used,
                "runs_dropped": dropped,
                "balanced_margin": min(margin) if used else np.nan,
                "min_growth_away_from_s1": min(growth) if used else np.nan,
                "extreme_over_balanced_min": min(ratio) if used else np.nan,
            }
        )
    return pd.DataFrame(rows).set_index("seed")


def fig71_metrics(frame: pd.DataFrame, small_alpha_max: float) -> dict:
    """Fig. 7.1's claims on converged GD runs only: GD against Theorem 1 over every converged
    run (a plain value: Theorem 1 on each fixed problem); the comparisons between shapes as
    per-seed evidence (`fig71_per_seed`: the data, and so the population error, vary with the
    seed), decided by the book's rule (core.verdicts.decision). `fig71_rows_used` counts the (seed,
    alpha) rows left after dropping those with an unconverged run."""
    status = np.where(frame["converged"].astype(bool), "ok", "unconverged")
    ok, dropped = converged_runs(frame.assign(status=status))
    rel = (ok["pop_error_gd"] - ok["pop_error_q"]).abs() / ok["pop_error_q"]
    per_seed = fig71_per_seed(frame, small_alpha_max)
    # the seed of each run left out, so that a verdict on some seeds counts only theirs
    lost = [seed for seed, n in per_seed["runs_dropped"].items() for _ in range(int(n))]

    def evidence(column: str) -> Evidence:
        return decision.per_seed(per_seed[column]).with_dropped_runs(lost)

    return {
        "fig71_gd_vs_q_max_rel_pop_error": Value(float(rel.max()), dropped=dropped),
        "fig71_balanced_margin": evidence("balanced_margin"),
        "fig71_min_relative_growth_away_from_s1": evidence("min_growth_away_from_s1"),
        "fig71_extreme_over_balanced_min_ratio": evidence("extreme_over_balanced_min"),
        "fig71_rows_used": int(per_seed["rows"].sum()),
    }


def fig71_frame(results: list[dict], cfg: dict) -> pd.DataFrame:
    """`scale_shape_frame` of the Fig. 7.1 sweep, with the rows at s < 1 mirrored from 1/s
    when the profile ran s >= 1 only (`fig71_mirror`)."""
    frame = scale_shape_frame(results, cfg["data"]["seeds"])
    return mirror_shapes(frame) if cfg["fig71_mirror"] else frame


def fig71_summary(frame: pd.DataFrame, tol: float) -> str:
    """One line: how many GD runs reached the relative residual `tol`, and the most steps."""
    bad = frame[~frame["converged"].astype(bool)]
    where = (
        f" (unconverged at alpha <= {bad['alpha'].max():.2g}; left out of the claims)"
        if len(bad)
        else ""
    )
    return (
        f"{len(frame)} GD runs, {int(frame['converged'].sum())} reached relative residual "
        f"{tol:g}{where}; max steps {int(frame['steps'].max())}"
    )


def fig71_heatmap_table(table: pd.DataFrame) -> pd.DataFrame:
    """The population error of gradient descent, alpha by s (the heatmap's numbers)."""
    return table.pivot(index="alpha", columns="shape", values="pop_error_gd").round(4)
