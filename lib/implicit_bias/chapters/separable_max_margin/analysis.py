"""Frames and metrics of the separable_max_margin chapter (Soudry et al. 2018). Every metric a
claim names is written here by its literal name, so `grep <metric>` finds where it is computed.

Each metric compares a run's checkpoint at the last step T with the one two decades earlier,
T / 100 (a window in log t, the paper's clock), and is handed to its claim as per-seed
evidence: every seed is its own data set, so the seeds are independent repetitions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.evidence import Value, converged_runs

WINDOW = np.log(100.0)  # the two decades between the checkpoints T / 100 and T, in log t


def experiment_name(task: dict) -> str:
    scaled = "_x2_scaled" if task["x2_scale"] != 1.0 else ""
    return f"{task['kind']}{scaled}_{task['loss']}"


def trajectory_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per (experiment, seed, optimizer, checkpoint), with the quantities of the
    paper's Figure 1 and the book's predicted limits:
    norm ||w||, dist = ||w/||w|| - w_hat/||w_hat|| ||, angle_gap = 1 - cos, margin_gap =
    1/||w_hat|| - min_n z_n^T w/||w||, the residual rho = w - w_hat log t and its distance to
    w_tilde (relative), and three rate constants divided by their predictions (1 at the limit):
    dist ||w|| against ||P_perp w_tilde|| (the 1/log t of the direction), margin_gap ||w||
    against w_hat^T w_tilde/||w_hat||^2 - min_S z_n^T w_tilde (the 1/log t of the margin), and
    L(w) eta_eff t against ||w_hat||^2 (the 1/t of the loss)."""
    rows = []
    for tk, res in zip(tasks, results):
        for s in res["seeds"]:
            if s["w_hat"] is None:
                continue
            w_hat = np.asarray(s["w_hat"])
            unit = w_hat / np.linalg.norm(w_hat)
            for run in s["runs"]:
                t = np.asarray(run["t"], dtype=float)
                w = np.asarray(run["w"])
                norm = np.linalg.norm(w, axis=1)
                cos = (w @ unit) / norm
                dist = np.linalg.norm(w / norm[:, None] - unit, axis=1)
                rho = w - np.log(t)[:, None] * w_hat
                frame = {
                    "experiment": experiment_name(tk),
                    "seed": s["seed"],
                    "optimizer": run["optimizer"],
                    "status": run["status"],
                    "t": t,
                    "w_0": w[:, 0],
                    "w_1": w[:, 1],
                    "norm": norm,
                    "norm_over_svm_norm": norm / np.linalg.norm(w_hat),
                    "dist": dist,
                    "angle_gap": 1.0 - cos,
                    "margin_gap": 1.0 / np.linalg.norm(w_hat) - np.asarray(run["min_margin"]),
                    "train_loss": run["train_loss"],
                    "val_loss": run["val_loss"],
                    "val_error": run["val_error"],
                    "rho_0": rho[:, 0],
                    "rho_1": rho[:, 1],
                    "decay_exponent": s["decay_exponent"],
                }
                if run.get("w_tilde") is not None:
                    w_tilde = np.asarray(run["w_tilde"])
                    eta_eff = s["eta"] / (1 - run["gamma"])
                    perp = np.linalg.norm(w_tilde - (w_tilde @ unit) * unit)
                    margin_const = (w_hat @ w_tilde) / (w_hat @ w_hat) - run[
                        "support_min_z_w_tilde"
                    ]
                    frame["residual_error"] = np.linalg.norm(rho - w_tilde, axis=1) / (
                        np.linalg.norm(w_tilde)
                    )
                    frame["direction_constant_ratio"] = dist * norm / perp
                    frame["margin_constant_ratio"] = frame["margin_gap"] * norm / margin_const
                    frame["loss_constant_ratio"] = (
                        np.asarray(run["train_loss"]) * eta_eff * t / (w_hat @ w_hat)
                    )
                rows.append(pd.DataFrame(frame))
    return pd.concat(rows, ignore_index=True)


def endpoints(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: each quantity at the last checkpoint T (suffix _T) and at T / 100
    (suffix _early)."""
    rows = []
    keys = ["experiment", "seed", "optimizer"]
    for key, run in frame.groupby(keys, sort=False):
        T = run["t"].max()
        last = run[run["t"] == T].iloc[0]
        early = run[run["t"] == max(1.0, float(int(T) // 100))].iloc[0]
        row = dict(zip(keys, key))
        row["status"] = last["status"]
        row["decay_exponent"] = last["decay_exponent"]
        for column in frame.columns.difference(keys + ["status", "decay_exponent"]):
            row[f"{column}_T"] = last[column]
            row[f"{column}_early"] = early[column]
        rows.append(row)
    return pd.DataFrame(rows)


def _runs(ends: pd.DataFrame, experiment: str, optimizer: str) -> tuple[pd.DataFrame, int]:
    """The converged runs of one experiment and optimizer, indexed by seed, and how many were
    left out (core.verdicts.evidence.converged_runs)."""
    runs = ends[(ends["experiment"] == experiment) & (ends["optimizer"] == optimizer)]
    kept, dropped = converged_runs(runs)
    return kept.set_index("seed"), dropped


def _per_seed(values: pd.Series, dropped: int) -> decision.Evidence:
    e = decision.per_seed(values)
    return decision.Evidence(e.values, e.test, seeds=e.seeds, dropped=dropped)


def _paired(a: pd.Series, b: pd.Series, dropped: int) -> decision.Evidence:
    e = decision.paired(a, b)
    return decision.Evidence(e.values, e.test, seeds=e.seeds, dropped=dropped)


def norm_slope(runs: pd.DataFrame) -> pd.Series:
    """d||w|| / d log t over the last two decades, in units of ||w_hat|| (Theorem 3: 1)."""
    return (runs["norm_over_svm_norm_T"] - runs["norm_over_svm_norm_early"]) / WINDOW


def residual_drift(runs: pd.DataFrame) -> pd.Series:
    """||rho(T) - rho(T/100)|| over ||w_hat|| log 100, what w itself moves in the window."""
    drift = np.hypot(runs["rho_0_T"] - runs["rho_0_early"], runs["rho_1_T"] - runs["rho_1_early"])
    return drift / ((runs["norm_T"] / runs["norm_over_svm_norm_T"]) * WINDOW)


def decay_over_predicted(runs: pd.DataFrame, column: str) -> pd.Series:
    """The measured decay exponent of `column` over the window, -d log(x) / d log t, divided by
    the predicted exponent of the residual (models.separable_max_margin.residual_decay_exponent)."""
    measured = -np.log(runs[f"{column}_T"] / runs[f"{column}_early"]) / WINDOW
    return measured / runs["decay_exponent"]


def figure1_metrics(ends: pd.DataFrame) -> dict:
    """Figure 1 of the paper, on its own data (logistic loss, GD)."""
    runs, dropped = _runs(ends, "figure1_logistic", "GD")
    direction_times_norm = runs["dist_T"] * runs["norm_T"], runs["dist_early"] * runs["norm_early"]
    measured = -np.log(direction_times_norm[0] / direction_times_norm[1]) / WINDOW
    return {
        "fig1_norm_slope_over_svm_norm": _per_seed(norm_slope(runs), dropped),
        "fig1_loss_log_log_slope": _per_seed(
            np.log(runs["train_loss_T"] / runs["train_loss_early"]) / WINDOW, dropped
        ),
        "fig1_direction_gap_decay_over_predicted": _per_seed(
            measured / runs["decay_exponent"], dropped
        ),
    }


def theorem3_metrics(ends: pd.DataFrame) -> dict:
    """Theorem 3 and its rates on the generic data: logistic and exponential loss, GD and
    momentum."""
    gd, d_gd = _runs(ends, "generic_logistic", "GD")
    exp, d_exp = _runs(ends, "generic_exp", "GD")
    mo, d_mo = _runs(ends, "generic_logistic", "GDMO")
    return {
        "gd_norm_slope_over_svm_norm": _per_seed(norm_slope(gd), d_gd),
        "gd_residual_drift_over_norm_drift": _per_seed(residual_drift(gd), d_gd),
        "gd_residual_decay_over_predicted": _per_seed(
            decay_over_predicted(gd, "residual_error"), d_gd
        ),
        "gd_direction_rate_constant_ratio": _per_seed(gd["direction_constant_ratio_T"], d_gd),
        "gd_margin_rate_constant_ratio": _per_seed(gd["margin_constant_ratio_T"], d_gd),
        "gd_loss_rate_constant_ratio": _per_seed(gd["loss_constant_ratio_T"], d_gd),
        "exp_residual_decay_over_predicted": _per_seed(
            decay_over_predicted(exp, "residual_error"), d_exp
        ),
        "exp_loss_rate_constant_ratio": _per_seed(exp["loss_constant_ratio_T"], d_exp),
        "gdmo_residual_decay_over_predicted": _per_seed(
            decay_over_predicted(mo, "residual_error"), d_mo
        ),
        "gdmo_loss_rate_constant_ratio": _per_seed(mo["loss_constant_ratio_T"], d_mo),
        "val_loss_slope_per_log_t": _per_seed(
            (gd["val_loss_T"] - gd["val_loss_early"]) / WINDOW, d_gd
        ),
    }


def optimizer_metrics(ends: pd.DataFrame) -> dict:
    """The paper's Adam experiment (Figure 1's data with x2 multiplied by 20): Adam's direction
    gap at T minus GD's and GDMO's, paired by seed (the same data set)."""
    name = "figure1_x2_scaled_logistic"
    gd, d_gd = _runs(ends, name, "GD")
    mo, d_mo = _runs(ends, name, "GDMO")
    ad, d_ad = _runs(ends, name, "Adam")
    return {
        "adam_minus_gd_direction_gap": _paired(ad["dist_T"], gd["dist_T"], d_ad + d_gd),
        "adam_minus_gdmo_direction_gap": _paired(ad["dist_T"], mo["dist_T"], d_ad + d_mo),
    }


def svm_metrics(results: list[dict]) -> dict:
    """The QP's w_hat against the vector the data were built around (a solver check): the
    largest distance over every seed and experiment where the construction is known."""
    errors = [
        s["construction_error"]
        for res in results
        for s in res["seeds"]
        if s.get("construction_error") is not None
    ]
    failed = sum(s["svm_status"] != "optimal" for res in results for s in res["seeds"])
    return {"svm_construction_error": Value(float(np.max(errors)), dropped=failed)}


def endpoint_table(ends: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and optimizer: mean over seeds of the quantities the claims read."""
    columns = [
        "dist_T",
        "angle_gap_T",
        "margin_gap_T",
        "residual_error_T",
        "direction_constant_ratio_T",
        "loss_constant_ratio_T",
        "val_loss_T",
        "val_error_T",
    ]
    present = [c for c in columns if c in ends.columns]
    table = ends.groupby(["experiment", "optimizer"], sort=False)[present].mean()
    table["runs"] = ends.groupby(["experiment", "optimizer"], sort=False).size()
    table["converged"] = (
        ends.assign(ok=ends["status"] == "ok")
        .groupby(["experiment", "optimizer"], sort=False)["ok"]
        .sum()
    )
    return table
