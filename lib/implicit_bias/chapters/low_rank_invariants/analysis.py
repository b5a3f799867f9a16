"""The chapter's tables and metrics: pandas frames built from the sweeps' results, the data
each figure plots, and the metrics dicts the claims (data/claims/low_rank_invariants.yaml)
are checked against. Every claim's metric is written out below under its own name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def require_ok(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stop on a failed task instead of silently plotting half the data."""
    bad = [r for r in results if r.get("status") != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} task(s) failed; first: {bad[0].get('error')}")
    return results


def require_done(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Like :func:`require_ok`, but a run stopped by its step limit (status ``"unconverged"``)
    is a result: it is shown, and no claim rests on it (the metrics below turn NaN)."""
    bad = [r for r in results if r.get("status") not in ("ok", "unconverged")]
    if bad:
        raise RuntimeError(f"{len(bad)} task(s) failed; first: {bad[0].get('error')}")
    return results


# --------------------------------------------------------------------------------------------
# Lemma 1
# --------------------------------------------------------------------------------------------
def lemma1_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per Lemma 1 network (the per-input outputs left out)."""
    return pd.DataFrame(results).drop(columns=["f", "tree", "status"])


LEMMA1_TOL = 1e-12  # "f = T(h)" to float64 precision (data/claims: lemma1_tree_equals_network)


def lemma1_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """Per architecture: paths, tree size, worst relative error of f = T(h) (as drawn, and for
    the rescaled network computed by the *original* tree), whether one sign flip changes T, and
    the dead networks."""
    return (
        lemma1_frame(results)
        .groupby("arch", sort=False)
        .agg(
            paths=("n_paths", "max"),
            tree_nodes=("n_tree_nodes", "max"),
            rel_error=("max_rel_err_tree", "max"),
            rel_error_same_tree_rescaled=("max_rel_err_same_tree_rescaled", "max"),
            changed_by_sign_flip=("tree_changed_by_sign_flip", "all"),
            dead_networks=("network_is_zero", "sum"),
        )
    )


def lemma1_tree_data(results: list[dict[str, Any]]) -> pd.DataFrame:
    """What the Lemma 1 figure plots: f(x) and T(h(x)) for every network and input."""
    return pd.DataFrame(
        [
            {"arch": r["arch"], "seed": s, "network": f, "tree_of_paths": t}
            for s, r in enumerate(results)
            for f, t in zip(r["f"], r["tree"])
        ]
    )


def lemma1_metrics(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The worst relative error of f = T(h) over all networks and inputs, and whether every T
    has weights in {-1, +1}, still computes the network after its weight magnitudes are
    redrawn (same signs; T built from the old weights, h from the new) and is changed by one
    sign flip."""
    table = lemma1_frame(results)
    sign_determined = (
        bool((table["max_rel_err_same_tree_rescaled"] <= LEMMA1_TOL).all())
        and table["tree_changed_by_sign_flip"].all()
        and all(set(w) <= {-1.0, 1.0} for w in table["tree_weights"])
    )
    return {
        "lemma1_max_rel_error": float(
            table[["max_rel_err_tree", "max_rel_err_same_tree_rescaled"]].to_numpy().max()
        ),
        "lemma1_sign_determined": bool(sign_determined),
    }


# --------------------------------------------------------------------------------------------
# Lemma 2, Theorem 1, Lemma 3, Lemma 4: drift of the invariants
# --------------------------------------------------------------------------------------------
DRIFT_GROUPS = {
    "lemma2": "Lemma 2, Eq. (4): vertex (diagonal) invariants, ReLU and linear",
    "theorem1_linear": "Theorem 1: whole matrices, linear neurons",
    "theorem1_active": "Theorem 1: submatrices of stably active ReLU neurons",
    "lemma3": "Lemma 3: layer norms",
    "lemma4": "Lemma 4: whole Gram matrices, ReLU neurons",
    "not_covered": "ResNetDiagonal off-diagonal entries (outside Theorem 1)",
}


def invariance_rows(tasks: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[dict]:
    """The rows of every `invariance_sweep` result, each with its task's seed."""
    return [dict(r, seed=t["seed"]) for t, res in zip(tasks, results) for r in res["rows"]]


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.polyfit(lx, ly, 1)[0])


def drift_summary(rows: list[dict[str, Any]]):
    """One row per (architecture, seed, invariant, group): the drift at the largest and the
    smallest step size and the log-log slope of drift against eta (1 for an invariant of
    gradient flow, 0 for a quantity whose gradient-flow drift is not zero)."""
    df = pd.DataFrame(rows)
    items = []
    for (arch, seed, name), grp in df.groupby(["arch", "seed", "name"], sort=False):
        first = grp.iloc[0]
        picks: list[tuple[str, str]] = []
        if first["kind"] == "layer":
            picks.append(("lemma3", "drift"))
        else:
            if first["vertex_ok"]:
                picks.append(("lemma2", "vertex"))
            if first["act"] == "linear":
                picks.append(("theorem1_linear" if first["matrix_ok"] else "not_covered", "full"))
            elif first["matrix_ok"]:
                if first["n_stable"] >= 2:
                    picks.append(("theorem1_active", "active"))
                picks.append(("lemma4", "full"))
        grp = grp.sort_values("eta")
        for group, col in picks:
            vals = grp[col].to_numpy(float)
            items.append(
                {
                    "arch": arch,
                    "seed": seed,
                    "invariant": name,
                    "case": first["case"],
                    "act": first["act"],
                    "group": group,
                    "quantity": col,
                    "n_stable": first.get("n_stable"),
                    "drift_small_eta": vals[0],
                    "drift_large_eta": vals[-1],
                    "ratio_small_to_large": vals[0] / vals[-1],
                    "slope": loglog_slope(grp["eta"], vals) if np.all(vals > 0) else float("nan"),
                }
            )
    return pd.DataFrame(items)


def final_losses(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Final loss of every run, per network and seed (rows) and step size (columns): equal
    losses across step sizes mean the runs follow one gradient-flow path."""
    return pd.DataFrame(rows).pivot_table(
        index=["arch", "seed"], columns="eta", values="final_loss", aggfunc="first"
    )


def drift_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per group of invariants: how many, the range of their slopes, and the smallest ratio of
    the drift at the smallest step size to that at the largest."""
    return (
        summary.groupby("group", sort=False)
        .agg(
            invariants=("slope", "size"),
            slope_min=("slope", "min"),
            slope_max=("slope", "max"),
            small_to_large_eta_drift_min=("ratio_small_to_large", "min"),
        )
        .rename(index=DRIFT_GROUPS)
    )


def _slopes(summary: pd.DataFrame, group: str) -> pd.Series:
    return summary[summary["group"] == group]["slope"]


def invariance_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """The range of the drift-against-eta slopes of each group of invariants, and for Lemma 4
    the smallest ratio of the drift at the smallest step size to that at the largest."""
    lemma4 = summary[summary["group"] == "lemma4"]
    return {
        "lemma2_vertex_slope_min": float(_slopes(summary, "lemma2").min()),
        "lemma2_vertex_slope_max": float(_slopes(summary, "lemma2").max()),
        "thm1_linear_slope_min": float(_slopes(summary, "theorem1_linear").min()),
        "thm1_linear_slope_max": float(_slopes(summary, "theorem1_linear").max()),
        "thm1_active_relu_slope_min": float(_slopes(summary, "theorem1_active").min()),
        "thm1_active_relu_slope_max": float(_slopes(summary, "theorem1_active").max()),
        "lemma3_slope_min": float(_slopes(summary, "lemma3").min()),
        "lemma3_slope_max": float(_slopes(summary, "lemma3").max()),
        "lemma4_full_drift_ratio_min": float(lemma4["ratio_small_to_large"].min()),
    }


def drift_data(rows: list[dict[str, Any]], summary: pd.DataFrame) -> pd.DataFrame:
    """What the drift figure plots: drift against eta for every invariant of the summary."""
    df = pd.DataFrame(rows)
    series = []
    for _, s in summary.iterrows():
        sel = df[
            (df["arch"] == s["arch"]) & (df["seed"] == s["seed"]) & (df["name"] == s["invariant"])
        ].sort_values("eta")
        series.append(
            pd.DataFrame(
                {
                    "group": s["group"],
                    "arch": s["arch"],
                    "seed": s["seed"],
                    "invariant": s["invariant"],
                    "eta": sel["eta"],
                    "drift": sel[s["quantity"]],
                }
            )
        )
    return pd.concat(series, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Theorem 2: rank one, alignment, ResNetFree blocks and reduced alignment
# --------------------------------------------------------------------------------------------
def reached_floor(task: dict[str, Any], result: dict[str, Any]) -> bool:
    """Whether a `low_rank_run` stopped at the loss floor (its end point) rather than at the
    step limit (then it is unconverged, and no claim rests on it): its status is ``"ok"`` and
    its final loss is below the task's floor."""
    return bool(
        result.get("status") == "ok" and result["final_loss"] < task.get("loss_floor", 1e-250)
    )


def _converged(part: pd.DataFrame) -> bool:
    """Whether ``part`` (rows of one or more runs) is not empty and every run in it reached
    the loss floor: the metrics of a group of runs are NaN otherwise."""
    return bool(not part.empty and part["reached_floor"].all())


NAN = float("nan")


def trajectories(tasks: list[dict[str, Any]], results: list[dict[str, Any]]) -> pd.DataFrame:
    """The snapshots of every `low_rank_run` result, each with its task's run, seed and step
    size, and whether the run reached the loss floor."""
    return pd.DataFrame(
        [
            dict(
                r,
                run=t["run"],
                seed=t["seed"],
                eta=t.get("eta"),
                reached_floor=reached_floor(t, res),
            )
            for t, res in zip(tasks, results)
            for r in res["rows"]
        ]
    )


def run_table(tasks: list[dict[str, Any]], results: list[dict[str, Any]]) -> pd.DataFrame:
    """Steps taken, final loss and stopping reason of every Theorem 2 run (a run stopped by
    its step limit is unconverged: no claim rests on it)."""
    return pd.DataFrame(
        [
            {
                "run": t["run"],
                "seed": t["seed"],
                "steps": r["final_step"],
                "final loss": r["final_loss"],
                "stopped by": "loss floor" if reached_floor(t, r) else "step limit (unconverged)",
            }
            for t, r in zip(tasks, results)
        ]
    )


def low_rank_final(rows: list[dict[str, Any]]):
    """The last snapshot of each run of :func:`low_rank_run` (rows carrying ``run``/``seed``),
    with the gap over its bound, the whole-trajectory maximum of that quantity and the
    Theorem 2 lower bound 1 / 8^{N_j}."""
    df = pd.DataFrame(rows)
    df["gap_over_bound"] = df["gap"] / df["gap_bound"]
    worst = (
        df.groupby(["run", "seed", "layer"])["gap_over_bound"].max().rename("gap_over_bound_max")
    )
    last = df[df["step"] == df.groupby(["run", "seed"])["step"].transform("max")]
    last = last.join(worst, on=["run", "seed", "layer"])
    last["theorem2_lower_bound"] = 8.0 ** (-last["n_resfree_after"].astype(float))
    return last.reset_index(drop=True)


# The figures show the trajectories at fixed losses, not at fixed GD steps: where a run is at
# step k depends on its backtracking decisions, which a last-bit difference between CPU kernels
# can flip (the final step moved by 0.8 %, late snapshots by 0.2 %), while the path itself (a
# quantity as a function of the loss) does not move. The initial snapshot comes first.
LOSS_LEVELS = (0.6, 0.4, 0.2, 0.1, 1e-2, 1e-3) + tuple(
    10.0**-k for k in (5, 7, 10, 15, 20, 30, 40, 60, 80, 100, 125, 150, 175, 200, 225, 250)
)


def at_loss_levels(
    part: pd.DataFrame,
    columns: list[str],
    log_columns: tuple[str, ...] = (),
    levels: tuple[float, ...] = LOSS_LEVELS,
    initial: bool = True,
) -> pd.DataFrame:
    """Per run, seed and layer: ``columns`` at each loss of ``levels`` that the run passed,
    interpolated between the two snapshots around it, linearly in log log(1/loss) (the
    logarithm of ``log_columns`` is interpolated: positive quantities on log axes); with
    ``initial``, the initial snapshot first. Column ``loss``: the level (the initial loss for
    the initial snapshot)."""
    items = []
    for (run, seed, layer), g in part.groupby(["run", "seed", "layer"], sort=False):
        g = g.sort_values("step")
        u = np.log(np.log(1.0 / g["loss"].to_numpy(float)))
        keep = np.r_[np.diff(u) > 0, True]  # strictly increasing abscissae (the loss never rises)
        rows = {"loss": [float(g["loss"].iloc[0])] if initial else []}
        wanted = [lv for lv in levels if u[keep][0] <= np.log(np.log(1.0 / lv)) <= u[keep][-1]]
        rows["loss"] += wanted
        at = np.log(np.log(1.0 / np.array(wanted, float)))
        for col in columns:
            y = g[col].to_numpy(float)
            y = np.log(y) if col in log_columns else y
            vals = np.interp(at, u[keep], y[keep])
            vals = np.exp(vals) if col in log_columns else vals
            rows[col] = ([float(g[col].iloc[0])] if initial else []) + vals.tolist()
        frame = pd.DataFrame(rows)
        frame.insert(0, "layer", layer)
        frame.insert(0, "seed", seed)
        frame.insert(0, "run", run)
        items.append(frame)
    if not items:
        return pd.DataFrame(columns=["run", "seed", "layer", "loss", *columns])
    return pd.concat(items, ignore_index=True)


def rank_one_data(
    traj: pd.DataFrame, runs: tuple[str, ...] = ("synthetic", "mnist")
) -> dict[str, pd.DataFrame]:
    """What the rank-one figure plots, at the losses of :func:`at_loss_levels`: ``rank_one``,
    1 - ||W||_2^2/||W||_F^2 of the linear layers with a bound Delta_j > 0 and the bound
    Delta_j / ||W||_F^2 (Eq. (13)); ``alignment``, the alignment of adjacent linear layers
    (Eq. (15))."""
    part = traj[traj["run"].isin(runs) & (traj["act"] == "linear") & traj["gap_bound"].gt(0)].copy()
    part["one_minus_ratio"] = 1.0 - part["ratio"]
    rank_one = at_loss_levels(part, ["frob_sq", "one_minus_ratio"], ("frob_sq", "one_minus_ratio"))
    bounds = part.groupby(["run", "seed", "layer"])["gap_bound"].first()
    gap_bound = [bounds[key] for key in zip(rank_one["run"], rank_one["seed"], rank_one["layer"])]
    rank_one["bound"] = np.array(gap_bound, float) / rank_one["frob_sq"].to_numpy(float)
    al = traj[traj["run"].isin(runs) & (traj["act"] == "linear") & traj["alignment"].notna()]
    # 1 - alignment falls over orders of magnitude between snapshots: interpolate its logarithm
    al = al.assign(misalignment=(1.0 - al["alignment"]).clip(lower=1e-16))
    cols = ["frob_sq", "misalignment"]
    alignment = at_loss_levels(al, cols, tuple(cols))
    alignment["alignment"] = 1.0 - alignment.pop("misalignment")
    return {"rank_one": rank_one, "alignment": alignment}


def rank_one_table(final: pd.DataFrame) -> pd.DataFrame:
    """The last snapshot of the synthetic and MNIST runs, per layer."""
    columns = [
        "run",
        "seed",
        "layer",
        "act",
        "frob_sq",
        "ratio",
        "gap",
        "gap_bound",
        "gap_over_bound_max",
        "alignment",
        "reached_floor",
    ]
    return final[final["run"].isin(["synthetic", "mnist"])][columns].round(5)


def theorem2_metrics(final: pd.DataFrame) -> dict[str, float]:
    """Rank one, alignment and gap over its bound, over the hidden linear layers (those with a
    bound Delta_j > 0) of the synthetic and the MNIST runs (rank one also of the synthetic_deep
    runs); a data set's metrics are NaN unless every one of its runs reached the loss floor."""
    hidden = final[(final["act"] == "linear") & (final["gap_bound"] > 0)]
    synthetic = hidden[hidden["run"] == "synthetic"]
    mnist = hidden[hidden["run"] == "mnist"]
    deep = hidden[hidden["run"] == "synthetic_deep"]
    syn_ok = _converged(final[final["run"] == "synthetic"]) and not synthetic.empty
    mnist_ok = _converged(final[final["run"] == "mnist"]) and not mnist.empty
    deep_ok = _converged(final[final["run"] == "synthetic_deep"]) and not deep.empty
    return {
        "thm2_fc_ratio_min_synthetic": float(synthetic["ratio"].min()) if syn_ok else NAN,
        # the first paper run's set-up (three hidden linear layers at 0.1), which missed 0.99
        "thm2_fc_ratio_min_deep": float(deep["ratio"].min()) if deep_ok else NAN,
        "thm2_fc_alignment_min_synthetic": (float(synthetic["alignment"].min()) if syn_ok else NAN),
        "thm2_gap_over_bound_max_synthetic": (
            float(synthetic["gap_over_bound_max"].max()) if syn_ok else NAN
        ),
        "thm2_fc_ratio_min_mnist": float(mnist["ratio"].min()) if mnist_ok else NAN,
        "thm2_fc_alignment_min_mnist": float(mnist["alignment"].min()) if mnist_ok else NAN,
        "thm2_gap_over_bound_max_mnist": (
            float(mnist["gap_over_bound_max"].max()) if mnist_ok else NAN
        ),
    }


def sign_settling(traj: pd.DataFrame) -> pd.DataFrame:
    """Per Theorem 2 run, the largest share (over layers) of weights whose sign still differs
    from its final sign, at the snapshot nearest half the run and at the last snapshot before
    the end, for ReLU and linear layers apart (Assumption 1 asks for it to reach 0)."""
    items = []
    for (run, seed), g in traj.groupby(["run", "seed"], sort=False):
        steps = np.sort(g["step"].unique())
        last = int(steps[-1])
        half = int(steps[np.argmin(np.abs(steps - last / 2))])
        before = int(steps[-2])
        item = {
            "run": run,
            "seed": seed,
            "last_step": last,
            "half_step": half,
            "penultimate_step": before,
        }
        for act in ("relu", "linear"):
            part = g[g["act"] == act]
            share = part.groupby("step")["sign_mismatch_final"].max()
            item[f"{act}_share_at_half"] = float(share.get(half, np.nan))
            item[f"{act}_share_at_penultimate"] = float(share.get(before, np.nan))
        items.append(item)
    return pd.DataFrame(items)


def _resfree_layers(final: pd.DataFrame) -> pd.DataFrame:
    """Linear layers of the ResNetFree runs, less those that are exactly rank one (the output)."""
    return final[(final["run"] == "resfree") & (final["act"] == "linear") & (final["ratio"] < 1)]


def _conv_layers(final: pd.DataFrame) -> pd.DataFrame:
    """Linear conv layers with a predicted limit ratio."""
    return final[
        (final["run"] == "conv") & final["predicted_ratio"].notna() & (final["act"] == "linear")
    ]


def reduced_alignment_data(traj: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What the reduced-alignment figure plots, at the losses of :func:`at_loss_levels`: the
    ratios of the ResNetFree run's linear layers (``resfree``) and of the conv run's layers
    with the predicted limit (``conv``)."""
    res = traj[(traj["run"] == "resfree") & (traj["act"] == "linear")]
    conv = traj[traj["run"] == "conv"]
    return {
        "resfree": at_loss_levels(res, ["ratio", "n_resfree_after"]).drop(columns="run"),
        "conv": at_loss_levels(conv, ["ratio", "predicted_ratio"]).drop(columns="run"),
    }


def reduced_alignment_table(final: pd.DataFrame) -> pd.DataFrame:
    """The last snapshot of the ResNetFree and conv runs' linear layers, with the Theorem 2
    lower bound 1/8^{N_j} and the predicted ratio of the conv layer."""
    columns = [
        "run",
        "seed",
        "layer",
        "frob_sq",
        "ratio",
        "n_resfree_after",
        "theorem2_lower_bound",
        "predicted_ratio",
        "reached_floor",
    ]
    return pd.concat([_resfree_layers(final), _conv_layers(final)])[columns].round(5)


def reduced_alignment_metrics(final: pd.DataFrame) -> dict[str, float]:
    """ResNetFree: the ratio over its 1/8^{N_j} bound for the layers before the block, and the
    ratio of the block's [V R]; conv: the final ratio's distance from the prediction (the
    limits of the conv run's ratios are :func:`conv_limit_metrics`). NaN unless every run of
    the kind reached the loss floor."""
    res, conv = _resfree_layers(final), _conv_layers(final)
    res_ok = _converged(final[final["run"] == "resfree"]) and not res.empty
    conv_ok = _converged(final[final["run"] == "conv"]) and not conv.empty
    behind = res[res["n_resfree_after"] >= 1]  # layers the 1/8^{N_j} bound is about
    block = res[res["layer"].str.endswith(".VR")]
    return {
        "thm2_resfree_ratio_times_bound_min": (
            float((behind["ratio"] / behind["theorem2_lower_bound"]).min()) if res_ok else NAN
        ),
        "thm2_resfree_block_ratio_min": float(block["ratio"].min()) if res_ok else NAN,
        "conv_ratio_prediction_error": (
            float((conv["ratio"] - conv["predicted_ratio"]).abs().max()) if conv_ok else NAN
        ),
    }


# --------------------------------------------------------------------------------------------
# Theorem 2: rates and limits along the late trajectory, and the step-size dependence
# --------------------------------------------------------------------------------------------
LATE_LOSS = 1e-10  # the late phase, where the norms grow: snapshots with loss <= LATE_LOSS
MIN_LATE_POINTS = 3


def _late(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["loss"] <= LATE_LOSS].sort_values("step")


def rank_one_rates(traj: pd.DataFrame) -> pd.DataFrame:
    """Per run, seed and layer of the fully connected runs (hidden linear layers with a bound
    Delta_j > 0, and the ReLU layer as a control): the log-log slope of 1 - ||W||_2^2/||W||_F^2
    against ||W||_F^2 over the late snapshots (Eq. (13) predicts -1: the gap is bounded, so
    1 - ratio = gap / ||W||_F^2). NaN with fewer than MIN_LATE_POINTS late snapshots."""
    fc = traj[traj["gap_bound"].gt(0) | ((traj["act"] == "relu") & traj["gap_bound"].isna())]
    fc = fc[fc["run"].isin(traj.loc[traj["gap_bound"].gt(0), "run"].unique())]
    items = []
    for (run, seed, layer), g in fc.groupby(["run", "seed", "layer"], sort=False):
        late = _late(g)
        ok = len(late) >= MIN_LATE_POINTS and bool((late["ratio"] < 1).all())
        slope = (
            float(np.polyfit(np.log(late["frob_sq"]), np.log(1.0 - late["ratio"]), 1)[0])
            if ok
            else float("nan")
        )
        items.append(
            {
                "run": run,
                "seed": seed,
                "layer": layer,
                "act": g["act"].iloc[0],
                "reached_floor": bool(g["reached_floor"].iloc[0]),
                "late_points": len(late),
                "frob_sq_first": float(late["frob_sq"].iloc[0]) if len(late) else float("nan"),
                "frob_sq_last": float(late["frob_sq"].iloc[-1]) if len(late) else float("nan"),
                "ratio_last": float(g.sort_values("step")["ratio"].iloc[-1]),
                "slope": slope,
            }
        )
    return pd.DataFrame(items)


def _slope_range(rates: pd.DataFrame, run: str) -> tuple[float, float]:
    """Min and max slope of the hidden linear layers of ``run``; NaN unless every one of its
    runs reached the loss floor (a step-capped run carries no claim)."""
    part = rates[(rates["run"] == run) & (rates["act"] == "linear")]
    if part.empty or not part["reached_floor"].all():
        return float("nan"), float("nan")
    return float(part["slope"].min()), float(part["slope"].max())


def rank_one_rate_metrics(rates: pd.DataFrame) -> dict[str, float]:
    """The range of the rank-one slopes of the synthetic runs (the profile's set-up) and of the
    synthetic_deep runs (three hidden linear layers at 0.1, the first run's set-up)."""
    syn_min, syn_max = _slope_range(rates, "synthetic")
    deep_min, deep_max = _slope_range(rates, "synthetic_deep")
    return {
        "thm2_rank_one_slope_min_synthetic": syn_min,
        "thm2_rank_one_slope_max_synthetic": syn_max,
        "thm2_rank_one_slope_min_deep": deep_min,
        "thm2_rank_one_slope_max_deep": deep_max,
    }


def rate_data(traj: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """What the left panel of the rates figure plots: 1 - ratio against ||W||_F^2 of the
    hidden linear layers of the synthetic and synthetic_deep runs, at the late losses
    (<= LATE_LOSS) of :func:`at_loss_levels` (the slopes are fitted to the snapshots)."""
    keep = rates[rates["run"].isin(["synthetic", "synthetic_deep"]) & (rates["act"] == "linear")]
    keys = set(zip(keep["run"], keep["seed"], keep["layer"]))
    part = traj[[k in keys for k in zip(traj["run"], traj["seed"], traj["layer"])]].copy()
    part["one_minus_ratio"] = 1.0 - part["ratio"]
    late = tuple(lv for lv in LOSS_LEVELS if lv <= LATE_LOSS)
    cols = ["frob_sq", "one_minus_ratio"]
    return at_loss_levels(part, cols, tuple(cols), levels=late, initial=False)


def step_size_table(final: pd.DataFrame) -> pd.DataFrame:
    """max_t gap / Delta_j of the synthetic runs' hidden linear layers at every step size (the
    run ``synthetic`` and its repeats ``synthetic eta=...``), one row per seed, layer and eta."""
    runs = final[final["run"].str.match(r"^synthetic( eta=|$)")]
    hidden = runs[(runs["act"] == "linear") & (runs["gap_bound"] > 0)]
    cols = ["seed", "layer", "eta", "run", "reached_floor", "gap_over_bound_max"]
    return hidden[cols].sort_values(["seed", "layer", "eta"]).reset_index(drop=True)


def step_size_trend(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer: max_t gap / Delta_j at each step size (mean over seeds), the change from the
    largest to the smallest step size (mean and seed-to-seed standard error), and the
    straight-line extrapolation to eta -> 0 (worst seed)."""
    items = []
    for layer, g in table.groupby("layer", sort=True):
        piv = g.pivot_table(index="seed", columns="eta", values="gap_over_bound_max")
        etas = np.array(piv.columns, dtype=float)
        change = piv[etas.min()] - piv[etas.max()]
        intercepts = [
            float(np.polyfit(etas, row.to_numpy(float), 1)[1]) for _, row in piv.iterrows()
        ]
        item: dict[str, Any] = {"layer": layer, "seeds": len(piv)}
        for eta in sorted(etas, reverse=True):
            item[f"eta={eta:g}"] = float(piv[eta].mean())
        item["change_smallest_minus_largest_eta"] = float(change.mean())
        item["change_se"] = (
            float(change.std(ddof=1) / np.sqrt(len(change))) if len(change) > 1 else float("nan")
        )
        item["eta_to_0_max"] = max(intercepts)
        items.append(item)
    return pd.DataFrame(items)


def step_size_metrics(table: pd.DataFrame) -> dict[str, float]:
    """max_t gap / Delta_j over every synthetic run at every step size, and the largest
    straight-line extrapolation of it to eta -> 0; NaN unless every run reached the loss floor
    and at least two step sizes were run."""
    if table.empty or not table["reached_floor"].all() or table["eta"].nunique() < 2:
        return {
            "thm2_gap_over_bound_max_synthetic_all_etas": float("nan"),
            "thm2_gap_over_bound_max_synthetic_eta_to_0": float("nan"),
        }
    trend = step_size_trend(table)
    return {
        "thm2_gap_over_bound_max_synthetic_all_etas": float(table["gap_over_bound_max"].max()),
        "thm2_gap_over_bound_max_synthetic_eta_to_0": float(trend["eta_to_0_max"].max()),
    }


def _ratio_limit(g: pd.DataFrame) -> float:
    """Limit of ||W||_2^2/||W||_F^2 as ||W||_F^2 -> infinity: the intercept of a straight-line
    fit of the ratio against 1/||W||_F^2 over the late snapshots (NaN with too few)."""
    late = _late(g)
    if len(late) < MIN_LATE_POINTS:
        return float("nan")
    return float(np.polyfit(1.0 / late["frob_sq"], late["ratio"], 1)[1])


def conv_limits(traj: pd.DataFrame) -> pd.DataFrame:
    """Per seed and linear layer of the conv runs (the output layer, exactly rank one, left
    out): the final ratio, its extrapolated limit and the predicted limit of the conv layer."""
    conv = traj[(traj["run"] == "conv") & (traj["act"] == "linear")]
    last_layer = max(conv["layer"], key=lambda name: int(name.split(".")[0]), default=None)
    items = []
    for (seed, layer), g in conv[conv["layer"] != last_layer].groupby(["seed", "layer"]):
        g = g.sort_values("step")
        items.append(
            {
                "seed": seed,
                "layer": layer,
                "kind": "conv kernel" if layer.endswith(".K") else "dense",
                "reached_floor": bool(g["reached_floor"].iloc[0]),
                "late_points": len(_late(g)),
                "ratio_init": float(g["ratio"].iloc[0]),
                "ratio_final": float(g["ratio"].iloc[-1]),
                "ratio_limit": _ratio_limit(g),
                "predicted_ratio": float(g["predicted_ratio"].iloc[-1]),
            }
        )
    return pd.DataFrame(items)


def conv_limit_metrics(limits: pd.DataFrame) -> dict[str, float]:
    """The largest extrapolated limit of the conv kernels' ratio (reduced alignment: below 1)
    and the smallest of the hidden dense layers after them (rank one: 1); NaN unless every
    conv run reached the loss floor."""
    kernels = limits[limits["kind"] == "conv kernel"]
    dense = limits[limits["kind"] == "dense"]
    ok = _converged(limits)
    return {
        "conv_ratio_limit": float(kernels["ratio_limit"].max()) if ok else NAN,
        "conv_run_dense_ratio_limit_min": float(dense["ratio_limit"].min()) if ok else NAN,
    }


def sign_settling_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Counts behind the text on Assumption 1: per layer kind, in how many runs some weights
    still change sign after half the run, after the penultimate snapshot, and in how many the
    share did not fall from the half-way to the penultimate snapshot."""
    items = []
    for act in ("relu", "linear"):
        half, pen = table[f"{act}_share_at_half"], table[f"{act}_share_at_penultimate"]
        items.append(
            {
                "layers": act,
                "runs": len(table),
                "changing_after_half": int((half > 0).sum()),
                "changing_after_penultimate": int((pen > 0).sum()),
                "share_not_falling": int(((pen >= half) & (half > 0)).sum()),
                "largest_share_at_penultimate": float(pen.max()),
            }
        )
    return pd.DataFrame(items)
