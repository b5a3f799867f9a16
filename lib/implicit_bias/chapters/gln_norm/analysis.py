"""The gln_norm chapter's tables and the metrics its claims name (data/claims/gln_norm.yaml): the
theory sections (each returns a table and its metrics), the frames of the sweeps' results, the
metrics dicts, and the numbers each figure plots. The authors' published numbers, and ours beside
them, are in `reference.py`."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pandas as pd

from implicit_bias.models.gln import (
    inconsistency,
    predict_gln,
    uncorrelated_inconsistency,
    unpack_signs,
)
from implicit_bias.models.gln_svm import SVMResult, solve_program, svm_gln, svm_l2
from implicit_bias.models.gln_theory import (
    a_squared_minus_m,
    a_zeta_norm_sq,
    all_predictors,
    beta_norm_sq_eq24,
    equivariance_residual,
    gln_norm,
    gln_norm_eq21,
    predictor_map_rank,
    svm_gln_kkt,
    theorem_trajectory,
    toy_problem,
    train_full_batch_gln,
    zeta_from_weights,
)

from .tasks import gln_problem

GLN_SVMS = ("SVM-GLN", "SVM-L2", "SVM-L2-eq23")  # the deep GLN's SVMs (Fig. 2a, b; Fig. 4a, b)
GLN_METHODS = ["GD-GLN", "SVM-GLN", "SVM-L2", "SVM-L2-eq23"]  # Fig. 2d and 4c
RELU_SVMS = ("SVM-RC", "SVM-LC", "SVM-HL")  # the ReLU network's SVMs (Fig. 3a, b; Fig. 5)
RELU_METHODS = ["GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL"]  # Fig. 3d
# Fig. 2c: the best model of each kind, labelled
BEST_LABELS = {
    "GD-shallow-GLN": "shallow GLN, GD",
    "SVM-shallow": "shallow GLN, SVM",
    "GD-GLN": "deep GLN, GD",
    "SVM-L2": "deep GLN, SVM-L2",
    "SVM-GLN": "deep GLN, SVM-GLN",
}
# Fig. 3c: the ReLU models beside deep GLNs of similar size (C = 2, H <= 50)
RELU_BEST_LABELS = {
    "GD-ReLU": "GD-ReLU",
    "SVM-HL": "SVM-HL",
    "SVM-LC": "SVM-LC",
    "SVM-RC": "SVM-RC",
    "GD-GLN": "deep GLN, GD (C = 2, H <= 50)",
}
RELU_BEST_QUERIES = {"GD-GLN": "C == 2 and H <= 50"}


# -------------------------------------------------------------------------------------------
# Theory sections of the chapter, each returning (table, metrics)
# -------------------------------------------------------------------------------------------


def architecture_checks(sizes: list[list[int]], seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Lemma B.6 (Eq. 16) on GLN weights after a short training run, and Lemma B.7's count
    of free predictors (rank of zeta -> beta) for every (H, C) in `sizes`."""
    p = toy_problem(40, seed)
    snap = train_full_batch_gln(p["X"], p["y"], p["ctx"], 2, 2000, 0.5, seed=seed)[-1]
    beta = all_predictors(zeta_from_weights(snap["w1"], snap["w2"]))
    rng = np.random.default_rng(seed)
    rows = [
        {
            "H": H,
            "C": C,
            "rank of zeta -> beta": predictor_map_rank(H, C),
            "(C-1)H+1 (Lemma B.7)": (C - 1) * H + 1,
            "C^H predictors": C**H,
            "equivariance residual, random GLN": equivariance_residual(
                all_predictors(zeta_from_weights(rng.normal(size=(H, C, 3)), rng.normal(size=H)))
            ),
        }
        for H, C in sizes
    ]
    table = pd.DataFrame(rows)
    metrics = {
        "equivariance_residual_trained": max(
            equivariance_residual(beta), float(table.iloc[:, -1].max())
        ),
        "equivariance_residual_unconstrained": equivariance_residual(rng.normal(size=beta.shape)),
        "lemma_b7_rank_matches": bool((table.iloc[:, 2] == table.iloc[:, 3]).all()),
    }
    return table, metrics


def norm_checks(seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Eq. 21 against Eq. 20 (H = C = 2), Eq. 25's A^2 = M, the constant of Eq. 24, and the
    closed-form SVM-L2 against enumerating the C^H predictors (small problems)."""
    rng = np.random.default_rng(seed)
    rows = []
    for D in (1, 3, 10):
        beta = all_predictors(rng.normal(size=(2, 2, D)))
        eq20, eq21 = gln_norm(beta), gln_norm_eq21(beta)
        rows.append(
            {
                "check": f"Eq. 21 vs Eq. 20, D = {D}",
                "paper": eq21**2,
                "independent": eq20**2,
                "ratio": eq21**2 / eq20**2,
            }
        )
    ratios = [r["ratio"] for r in rows]
    ident = []
    for H, C in ((2, 2), (3, 2), (3, 3), (4, 2)):
        zeta = rng.normal(size=(H, C, 3))
        brute = float((all_predictors(zeta) ** 2).sum())
        ident.append(abs(beta_norm_sq_eq24(zeta) - brute) / brute)
        rows.append(
            {
                "check": f"||beta||^2: C^(H-2) zeta'M zeta vs enumeration, H={H} C={C}",
                "paper": beta_norm_sq_eq24(zeta),
                "independent": brute,
                "ratio": beta_norm_sq_eq24(zeta) / brute,
            }
        )
        eq23 = C ** (H - 2) * a_zeta_norm_sq(zeta)
        rows.append(
            {
                "check": f"||beta||^2: C^(H-2) ||A zeta||^2 (Eq. 23/25), H={H} C={C}",
                "paper": eq23,
                "independent": brute,
                "ratio": eq23 / brute,
            }
        )
    a2 = [a_squared_minus_m(H, C) for H, C in ((2, 2), (3, 2), (4, 4))]
    a2c = [a_squared_minus_m(H, C, corrected=True) for H, C in ((2, 2), (3, 2), (4, 4))]
    rows.append(
        {
            "check": "max |A^2 - M|, Eq. 25 coefficients",
            "paper": max(a2),
            "independent": 0.0,
            "ratio": float("nan"),
        }
    )
    rows.append(
        {
            "check": "max |A^2 - M|, corrected coefficients",
            "paper": max(a2c),
            "independent": 0.0,
            "ratio": float("nan"),
        }
    )
    # SVM-L2 closed form vs brute-force enumeration of the C^H predictors
    X = np.hstack([rng.normal(size=(16, 3)), np.ones((16, 1))])
    ctx = rng.integers(0, 2, size=(16, 3))
    y = np.where(predict_gln(rng.normal(size=(3, 2, 4)), X, ctx) > 0, 1.0, -1.0)
    closed = svm_l2(X, y, ctx, 2).objective * 2 ** (3 - 1)
    zs = [cp.Variable((2, 4)) for _ in range(3)]
    betas = {g: sum(zs[h][g[h]] for h in range(3)) for g in itertools.product(range(2), repeat=3)}
    prob = cp.Problem(
        cp.Minimize(sum(cp.sum_squares(b) for b in betas.values())),
        [y[n] * (betas[tuple(ctx[n])] @ X[n]) >= 1 for n in range(16)],
    )
    brute = prob.solve(solver="CLARABEL")
    rows.append(
        {
            "check": "SVM-L2: closed form vs enumerating 8 predictors (H=3, C=2)",
            "paper": closed,
            "independent": brute,
            "ratio": closed / brute,
        }
    )
    metrics = {
        "eq21_over_eq20_squared": float(np.mean(ratios)),
        "eq21_ratio_spread": float(np.ptp(ratios)),
        "a2_minus_m_max_abs": float(max(a2)),
        "a2_minus_m_corrected_max_abs": float(max(a2c)),
        "beta_norm_identity_rel_error": float(max(ident)),
        "svm_l2_closed_vs_enumeration_rel": float(abs(closed - brute) / brute),
    }
    return pd.DataFrame(rows), metrics


def theorem_experiment(
    n_points: int, n_steps: int, lr: float, seed: int = 0, loss: str = "logistic"
) -> tuple[dict, list[dict], SVMResult, pd.DataFrame, dict]:
    """Theorem 3.1 on Fig. 1's toy problem: full-batch GD (log-spaced checkpoints) against the
    SVM-GLN solved by cvxpy (Clarabel); returns problem, snapshots, SVM, trajectory, metrics."""
    p = toy_problem(n_points, seed)
    svm = svm_gln(p["X"], p["y"], p["ctx"], 2, solver="CLARABEL")
    record = sorted({0, *np.unique(np.geomspace(10, n_steps, 12).astype(int)).tolist()})
    snaps = train_full_batch_gln(
        p["X"], p["y"], p["ctx"], 2, n_steps, lr, seed=seed, loss=loss, record=record
    )
    traj = pd.DataFrame(theorem_trajectory(p, snaps, svm))
    sep = traj[traj["margin_ratio"] > 0]  # after the data are separated
    metrics = {
        "theorem_distance_decreasing": bool(
            np.all(np.diff(1 - sep["cos_beta"]) < 0) and np.all(np.diff(sep["margin_ratio"]) > 0)
        ),
        "theorem_kkt_decreasing": bool(np.all(np.diff(sep["stationarity"]) < 0)),
        "theorem_final_cos_beta": float(traj["cos_beta"].iloc[-1]),
        "theorem_final_margin_ratio": float(traj["margin_ratio"].iloc[-1]),
        "theorem_final_stationarity": float(traj["stationarity"].iloc[-1]),
    }
    return p, snaps, svm, traj, metrics


def kkt_experiment(
    N: int, n_val: int, reference_solver: str = "ECOS", H: int = 10, C: int = 2, seed: int = 0
) -> tuple[pd.DataFrame, dict]:
    """SVM-GLN on one MNIST problem by the fast solver and by cvxpy (`reference_solver`): the KKT
    residuals of Eq. 52/56 for both, and their agreement (objective, held-out predictions)."""
    p = gln_problem(N, seed, n_val, H, C, True)
    rows, sols = [], {}
    for solver in ("fast", reference_solver):
        res = solve_program("SVM-GLN", p["X"], p["y"], p["ctx"], C, solver)
        sols[solver] = res
        rows.append(
            {
                "solver": solver,
                "status": res.status,
                "objective": res.objective,
                "seconds": res.seconds,
                **svm_gln_kkt(res, p["X"], p["y"], p["ctx"], C),
            }
        )
    f = {s: predict_gln(r.primal, p["X_val"], p["ctx_val"]) for s, r in sols.items()}
    fast, ref = sols["fast"], sols[reference_solver]
    table = pd.DataFrame(rows)
    metrics = {
        "svm_gln_kkt_max": float(table[table["solver"] == "fast"].iloc[0, 4:].max()),
        "svm_gln_kkt_max_reference": float(table[table["solver"] != "fast"].iloc[0, 4:].max()),
        "svm_gln_fast_vs_ecos_objective_rel": abs(fast.objective - ref.objective) / ref.objective,
        "svm_gln_fast_vs_ecos_val_disagreement": inconsistency(f["fast"], f[reference_solver]),
    }
    return table, metrics


def toy_zetas(snap: dict, svm: SVMResult) -> dict[str, np.ndarray]:
    """Fig. 1's two solutions of the toy problem: the trained GD-GLN's zeta (Eq. 17) and the
    SVM-GLN's."""
    return {
        "GD-GLN (trained)": zeta_from_weights(snap["w1"], snap["w2"]),
        "SVM-GLN (Eq. 52)": svm.primal,
    }


def toy_predictors(snap: dict, svm: SVMResult) -> pd.DataFrame:
    """Fig. 1's numbers: the four per-region predictors beta of each solution (zeta scaled to a
    largest entry of 1)."""
    rows = []
    for name, z in toy_zetas(snap, svm).items():
        beta = all_predictors(z / np.abs(z).max())
        for c1, c2 in itertools.product(range(2), repeat=2):
            rows.append(
                {
                    "model": name,
                    "context_unit1": c1,
                    "context_unit2": c2,
                    **{f"beta_{i}": float(beta[c1, c2, i]) for i in range(3)},
                }
            )
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------------------
# Result frames of the sweeps
# -------------------------------------------------------------------------------------------


def gln_frame(
    gd_tasks_: list[dict], gd_results: list[dict], svm_tasks_: list[dict], svm_results: list[dict]
) -> pd.DataFrame:
    """One row per (method, depth, H, C, N, MI, momentum, seed): validation error and, for the
    SVMs, the inconsistency with the GD network of the same configuration, seed and momentum,
    2p(1-p) of that GD network, and the paired SVM-minus-GD gap."""
    rows, gd_signs = [], {}
    for t, r in zip(gd_tasks_, gd_results):
        method = "GD-GLN" if t["depth"] == "deep" else "GD-shallow-GLN"
        if r.get("status") == "error":  # a failed task: its rows are there, as missing
            rows += [
                {
                    "method": method,
                    "depth": t["depth"],
                    "H": t["H"],
                    "C": t["C"],
                    "N": t["N"],
                    "median_init": t["median_init"],
                    "momentum": t["momentum"],
                    "seed": seed,
                    "val_error": None,
                    "train_error": None,
                    "status": "error",
                }
                for seed in t["seeds"]
            ]
            continue
        for i, seed in enumerate(t["seeds"]):
            key = (t["depth"], t["H"], t["C"], t["N"], t["median_init"], seed)
            gd_signs.setdefault(key, {})[t["momentum"]] = (
                unpack_signs(r["pred_val"][i], t["n_val"]),
                r["val_error"][i],
            )
            rows.append(
                {
                    "method": method,
                    "depth": t["depth"],
                    "H": t["H"],
                    "C": t["C"],
                    "N": t["N"],
                    "median_init": t["median_init"],
                    "momentum": t["momentum"],
                    "seed": seed,
                    "val_error": r["val_error"][i],
                    "train_error": r["train_error"][i],
                    "status": "ok",
                }
            )
    for t, r in zip(svm_tasks_, svm_results):
        depth = "shallow" if t["method"] == "SVM-shallow" else "deep"
        for i, seed in enumerate(t["seeds"]):
            status = r.get("solver_status", [r.get("error", "error")] * len(t["seeds"]))[i]
            err = r["val_error"][i] if "val_error" in r else None
            key = (depth, t["H"], t["C"], t["N"], t["median_init"], seed)
            for momentum, (signs, gd_err) in sorted(
                gd_signs.get(key, {None: (None, None)}).items(), key=lambda kv: str(kv[0])
            ):
                row = {
                    "method": t["method"],
                    "depth": depth,
                    "H": t["H"],
                    "C": t["C"],
                    "N": t["N"],
                    "median_init": t["median_init"],
                    "momentum": momentum,
                    "seed": seed,
                    "val_error": err,
                    "status": status,
                }
                if err is not None and signs is not None:
                    svm_signs = unpack_signs(r["pred_val"][i], t["n_val"])
                    row.update(
                        inconsistency=inconsistency(svm_signs, signs),
                        incons_uncorrelated=uncorrelated_inconsistency(gd_err),
                        svm_minus_gd=err - gd_err,
                        gd_val_error=gd_err,
                    )
                rows.append(row)
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame, value: str = "val_error") -> pd.DataFrame:
    """Mean, standard error (the paper's error bars) and count over seeds per configuration."""
    keys = ["method", "depth", "H", "C", "N", "median_init", "momentum"]
    g = frame.dropna(subset=[value]).groupby(keys, dropna=False)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"] / np.sqrt(out["count"])
    return out.rename(
        columns={
            "mean": f"{value}_mean",
            "se": f"{value}_se",
            "std": f"{value}_std",
            "count": "n_seeds",
        }
    )


def relu_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per (method, H, N, momentum, seed) of the ReLU experiments (Sec. 5.2): validation
    error and, for the SVMs, inconsistency with the GD-ReLU and its 2p(1-p)."""
    rows = []
    for t, r in zip(tasks, results):
        if r.get("status") == "error":  # a failed task: its rows are there, as missing
            rows += [
                {
                    "method": m,
                    "H": t["H"],
                    "N": t["N"],
                    "momentum": t["momentum"],
                    "seed": seed,
                    "val_error": None,
                    "status": "error",
                }
                for seed in t["seeds"]
                for m in ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")
            ]
            continue
        gd = r["GD-ReLU"]["val_error"]
        for i, seed in enumerate(t["seeds"]):
            base = {"H": t["H"], "N": t["N"], "momentum": t["momentum"], "seed": seed}
            rows.append({"method": "GD-ReLU", **base, "val_error": gd[i], "status": "ok"})
            for m in ("SVM-RC", "SVM-LC", "SVM-HL"):
                rows.append(
                    {
                        "method": m,
                        **base,
                        "val_error": r[m]["val_error"][i],
                        "inconsistency": r[m]["inconsistency"][i],
                        "incons_uncorrelated": uncorrelated_inconsistency(gd[i]),
                        "gd_val_error": gd[i],
                        "status": r[m]["solver_status"][i],
                    }
                )
    return pd.DataFrame(rows)


def run_counts(frame: pd.DataFrame) -> pd.Series:
    """Runs per method and status (a failed solve or task shows here)."""
    return frame.groupby(["method", "status"]).size().rename("runs")


def deep_runs(frame: pd.DataFrame, median_init: bool = True) -> pd.DataFrame:
    """Fig. 2a, b (median init) and Fig. 4a, b (without): the deep GLN's rows at momentum 0."""
    mi = frame["median_init"] if median_init else ~frame["median_init"]
    return frame[mi & (frame["momentum"] == 0.0) & (frame["depth"] == "deep")]


def deep_reference(ref: pd.DataFrame, median_init: bool = True) -> pd.DataFrame:
    """The authors' deep-GLN cells of Fig. 2a, b (median init) or Fig. 4a, b (without), H <= 100."""
    mi = ref["median_init"] if median_init else ~ref["median_init"]
    return ref[(ref["depth"] == "deep") & mi & (ref["H"] <= 100)]


def mi_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2d and 4c: configuration means with median init, momentum 0."""
    return summary[summary["median_init"] & (summary["momentum"] == 0.0)]


def relu_summary(relu: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3d: configuration means of the ReLU experiments at momentum 0 (labelled like the
    deep GLN's, C = 2 and median init, so `error_vs_h` applies)."""
    rs = summarize(relu.assign(depth="relu", C=2, median_init=True))
    return rs[rs["momentum"] == 0.0]


# -------------------------------------------------------------------------------------------
# The numbers each figure plots
# -------------------------------------------------------------------------------------------


def pair_table(
    frame: pd.DataFrame, x_method: str = "GD-GLN", methods=GLN_SVMS, keys=("H", "C", "N")
) -> pd.DataFrame:
    """Fig. 2a, b / 3a, b: configuration means (± se over seeds) of each of `methods` beside
    the reference method's (its error and inconsistency with it)."""
    keys = list(keys)
    s = frame.dropna(subset=["val_error"]).groupby(["method"] + keys)
    agg = s.agg(
        val_error=("val_error", "mean"),
        val_error_se=("val_error", "sem"),
        inconsistency=("inconsistency", "mean"),
        inconsistency_se=("inconsistency", "sem"),
    ).reset_index()
    ref = agg[agg["method"] == x_method][keys + ["val_error", "val_error_se"]].rename(
        columns={"val_error": "gd_error", "val_error_se": "gd_error_se"}
    )
    return agg[agg["method"].isin(list(methods))].merge(ref, on=keys)


def relu_pair_table(relu: pd.DataFrame, momentum: float = 0.0) -> pd.DataFrame:
    """Fig. 3a, b (momentum 0) and Fig. 5 (momentum 0.9): the ReLU network's SVMs against it."""
    return pair_table(relu[relu["momentum"] == momentum], "GD-ReLU", RELU_SVMS, ("H", "N"))


def error_vs_h(summary: pd.DataFrame, methods, C: int = 2) -> pd.DataFrame:
    """Fig. 2d / 3d / 4c: the configuration means of `methods` with C contexts, by N, then method,
    then H (what the panels draw)."""
    rows = []
    for N in sorted(summary["N"].unique()):
        for m in methods:
            s = summary[
                (summary["method"] == m) & (summary["N"] == N) & (summary["C"] == C)
            ].sort_values("H")
            if len(s):
                rows.append(s.assign(source="ours"))
    return pd.concat(rows) if rows else pd.DataFrame()


# -------------------------------------------------------------------------------------------
# Inconsistency and seed pairing (Fig. 2b)
# -------------------------------------------------------------------------------------------


def seed_pairing_inconsistency(
    gd_tasks_: list[dict],
    gd_results: list[dict],
    svm_tasks_: list[dict],
    svm_results: list[dict],
    method: str = "SVM-GLN",
) -> pd.DataFrame:
    """Inconsistency between `method` and the GD-GLN (momentum 0) per configuration, pairing
    each SVM with the GD network of the same seed (same hyperplanes and training subset: the
    definition) and, for comparison, with GD networks of the other seeds; plus GD vs GD across
    seeds. Shows what the inconsistency of unrelated draws of the same configuration is."""
    gd = {
        (t["H"], t["C"], t["N"], t["median_init"]): (t, r)
        for t, r in zip(gd_tasks_, gd_results)
        if t["depth"] == "deep" and t["momentum"] == 0.0 and "pred_val" in r
    }
    rows = []
    for t, r in zip(svm_tasks_, svm_results):
        key = (t["H"], t["C"], t["N"], t["median_init"])
        if t["method"] != method or key not in gd or None in r.get("pred_val", [None]):
            continue
        gt, gr = gd[key]
        S = [unpack_signs(p, t["n_val"]) for p in r["pred_val"]]
        G = [unpack_signs(p, gt["n_val"]) for p in gr["pred_val"]]
        k = len(S)
        rows.append(
            {
                "H": t["H"],
                "C": t["C"],
                "N": t["N"],
                "median_init": t["median_init"],
                "same seed (definition)": np.mean([inconsistency(S[i], G[i]) for i in range(k)]),
                "SVM vs GD of another seed": np.mean(
                    [inconsistency(S[i], G[j]) for i in range(k) for j in range(k) if i != j]
                ),
                "GD vs GD of another seed": np.mean(
                    [inconsistency(G[i], G[j]) for i in range(k) for j in range(i + 1, k)]
                ),
            }
        )
    return pd.DataFrame(rows)


def pairing_table(
    gd_tasks_: list[dict],
    gd_results: list[dict],
    svm_tasks_: list[dict],
    svm_results: list[dict],
    ref: pd.DataFrame,
) -> pd.DataFrame:
    """`seed_pairing_inconsistency` of the SVM-GLN, with the authors' published inconsistency
    beside it where their grid has the cell."""
    pairing = seed_pairing_inconsistency(gd_tasks_, gd_results, svm_tasks_, svm_results)
    r_inc = ref[ref["method"] == "SVM-GLN"][["H", "C", "N", "median_init", "inconsistency_mean"]]
    return pairing.merge(
        r_inc.rename(columns={"inconsistency_mean": "authors' (published)"}),
        on=["H", "C", "N", "median_init"],
        how="left",
    )


def pairing_means(pairing: pd.DataFrame) -> pd.DataFrame:
    """The columns of `pairing_table` averaged over its cells."""
    return pairing.drop(columns=["H", "C", "N", "median_init"]).mean().round(4).to_frame("mean")


# -------------------------------------------------------------------------------------------
# Agreement with the authors' published numbers (the comparison itself: reference.py)
# -------------------------------------------------------------------------------------------


def agreement_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per method: the share of cells within 1.5 points of the authors', and the cell count."""
    agreement = comparison.groupby("method")["within_tolerance"].agg(["mean", "size"])
    return agreement.rename(columns={"mean": "share within 1.5 points", "size": "cells"})


def agreement_metrics(agreement: pd.DataFrame) -> dict[str, float]:
    """The claims' shares of cells within 1.5 points of the authors' (NaN for a method without
    cells), from `agreement_table`."""
    share = agreement["share within 1.5 points"]

    def frac(method: str) -> float:
        return float(share.get(method, float("nan")))

    return {
        "frac_cells_within_1p5_gd_gln": frac("GD-GLN"),
        "frac_cells_within_1p5_svm_gln": frac("SVM-GLN"),
        "frac_cells_within_1p5_svm_l2": frac("SVM-L2"),
        "frac_cells_within_1p5_gd_shallow": frac("GD-shallow-GLN"),
        "frac_cells_within_1p5_svm_shallow": frac("SVM-shallow"),
    }


# -------------------------------------------------------------------------------------------
# Best models (Fig. 2c, 3c)
# -------------------------------------------------------------------------------------------


def best_per_n(frame: pd.DataFrame, method: str, query: str | None = None) -> pd.DataFrame:
    """Fig. 2c's statistic: per training size N and seed, the minimum validation error over all
    other hyperparameters, then mean and standard error over seeds."""
    f = frame[frame["method"] == method].dropna(subset=["val_error"])
    if query:
        f = f.query(query)
    per_seed = f.groupby(["N", "seed"])["val_error"].min().reset_index()
    out = per_seed.groupby("N")["val_error"].agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"] / np.sqrt(out["count"])
    out.insert(0, "method", method)
    return out


def best_table(
    frames: pd.DataFrame, labels: dict[str, str], queries: dict[str, str] | None = None
) -> pd.DataFrame:
    """`best_per_n` for several methods, labelled, in one table."""
    queries = queries or {}
    out = [best_per_n(frames, m, queries.get(m)).assign(label=lab) for m, lab in labels.items()]
    return pd.concat(out, ignore_index=True)


def best_gln(frame: pd.DataFrame, shallow: pd.DataFrame) -> pd.DataFrame:
    """Fig. 2c: the best shallow and deep GLNs and SVMs per training size."""
    return best_table(pd.concat([frame, shallow]), BEST_LABELS)


def best_relu(relu: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3c: the best ReLU models and deep GLNs of similar size per training size."""
    return best_table(pd.concat([relu, frame]), RELU_BEST_LABELS, RELU_BEST_QUERIES)


# -------------------------------------------------------------------------------------------
# Metrics behind the claims
# -------------------------------------------------------------------------------------------


def _mean(series) -> float:
    s = pd.Series(series).dropna()
    return float(s.mean()) if len(s) else float("nan")


def _svm_vs_gd(main: pd.DataFrame, method: str) -> dict[str, float]:
    """`method`'s per-seed points against the paired GD-GLN: mean gap, share better than GD,
    correlation of the errors, mean inconsistency and share below 2p(1-p)."""
    s = main[main["method"] == method].dropna(subset=["svm_minus_gd"])
    return {
        "gap": _mean(s["svm_minus_gd"]),
        "better": _mean(s["svm_minus_gd"] < 0),
        "corr": (
            float(np.corrcoef(s["val_error"], s["gd_val_error"])[0, 1])
            if len(s) > 2
            else float("nan")
        ),
        "incons": _mean(s["inconsistency"]),
        "below": _mean(s["inconsistency"] < s["incons_uncorrelated"]),
    }


def gln_metrics(frame: pd.DataFrame) -> dict[str, float]:
    """The quantities behind the claims of Sec. 4.1 and C.1, from `gln_frame` rows (deep GLN).
    'main' is the paper's Fig. 2a set: median init, momentum 0, C in {2, 4}, per-seed points."""
    deep = frame[(frame["depth"] == "deep") & (frame["momentum"] == 0.0)]
    main = deep[deep["median_init"]]
    gln, l2, eq23 = (_svm_vs_gd(main, m) for m in ("SVM-GLN", "SVM-L2", "SVM-L2-eq23"))
    out: dict[str, float] = {
        "gap_gln_minus_gd": gln["gap"],
        "frac_gln_better_than_gd": gln["better"],
        "corr_gln_gd": gln["corr"],
        "incons_gln": gln["incons"],
        "frac_incons_gln_below_uncorrelated": gln["below"],
        "gap_l2_minus_gd": l2["gap"],
        "frac_l2_better_than_gd": l2["better"],
        "corr_l2_gd": l2["corr"],
        "incons_l2": l2["incons"],
        "frac_incons_l2_below_uncorrelated": l2["below"],
        "gap_l2eq23_minus_gd": eq23["gap"],
        "frac_l2eq23_better_than_gd": eq23["better"],
        "corr_l2eq23_gd": eq23["corr"],
        "incons_l2eq23": eq23["incons"],
        "frac_incons_l2eq23_below_uncorrelated": eq23["below"],
    }
    out["incons_l2_minus_gln"] = out["incons_l2"] - out["incons_gln"]
    # Fig. 2d: SVM-L2 minus SVM-GLN per H (C = 2, MI), averaged over N and seeds
    c2 = summarize(main[main["C"] == 2])
    piv = c2.pivot_table(index="H", columns="method", values="val_error_mean")
    if {"SVM-L2", "SVM-GLN"} <= set(piv.columns):
        gap = (piv["SVM-L2"] - piv["SVM-GLN"]).dropna()
        out["gap_l2_minus_gln_smallest_H"] = float(gap.iloc[0])
        out["gap_l2_minus_gln_largest_H"] = float(gap.iloc[-1])
        out["gap_l2_shrinks_with_H"] = bool(gap.iloc[0] > gap.iloc[-1])
    # Sec. C.1: without median init
    nomi = deep[~deep["median_init"]]
    if len(nomi):
        paired = (
            summarize(deep[deep["method"] == "GD-GLN"])
            .pivot_table(index=["H", "C", "N"], columns="median_init", values="val_error_mean")
            .dropna()
        )
        out["gd_error_nomi_minus_mi"] = float((paired[False] - paired[True]).mean())
        s = nomi.dropna(subset=["inconsistency"])
        out["incons_l2_minus_gln_nomi"] = _mean(
            s[s["method"] == "SVM-L2"]["inconsistency"]
        ) - _mean(s[s["method"] == "SVM-GLN"]["inconsistency"])
        out["gap_gln_minus_gd_nomi"] = _mean(s[s["method"] == "SVM-GLN"]["svm_minus_gd"])
    # Sec. C.1 / Fig. 4c: C = 4 at the largest H, SVM-L2 minus SVM-GLN, smallest over N
    # SVM-only: rows without a paired GD run carry momentum NaN
    svm_rows = frame[
        (frame["depth"] == "deep")
        & frame["median_init"]
        & (frame["momentum"].isna() | (frame["momentum"] == 0.0))
    ]
    c4 = summarize(svm_rows[svm_rows["C"] == 4])
    if len(c4) and c4["H"].max() >= 100:
        last = c4[c4["H"] == c4["H"].max()].pivot_table(
            index="N", columns="method", values="val_error_mean"
        )
        if {"SVM-L2", "SVM-GLN"} <= set(last.columns):
            out["gap_l2_minus_gln_c4_h100_min_over_n"] = float(
                (last["SVM-L2"] - last["SVM-GLN"]).min()
            )
    return out


def best_metrics(frame: pd.DataFrame, shallow: pd.DataFrame) -> dict[str, float]:
    """Fig. 2c: best shallow GLN (GD) vs the best deep SVM-L2 / SVM-GLN, per N (H <= 100)."""
    both = pd.concat([frame, shallow])
    b = {
        m: best_per_n(both, m).set_index("N")["mean"]
        for m in ("GD-shallow-GLN", "SVM-L2", "SVM-GLN", "GD-GLN")
    }
    return {
        "best_shallow_minus_best_l2": float((b["GD-shallow-GLN"] - b["SVM-L2"]).mean()),
        "best_l2_minus_best_gln": float((b["SVM-L2"] - b["SVM-GLN"]).mean()),
    }


def relu_metrics(frame: pd.DataFrame, gln: pd.DataFrame | None = None) -> dict[str, float]:
    """The quantities behind the claims of Sec. 5.2 and C.2 (momentum 0 unless stated)."""
    f = frame[frame["momentum"] == 0.0]
    mean = {
        m: _mean(f[f["method"] == m]["val_error"])
        for m in ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")
    }
    inc = {m: _mean(f[f["method"] == m]["inconsistency"]) for m in ("SVM-RC", "SVM-LC", "SVM-HL")}
    rc = f[f["method"] == "SVM-RC"].dropna(subset=["val_error"])
    out = {
        "corr_rc_gd_relu": (
            float(np.corrcoef(rc["val_error"], rc["gd_val_error"])[0, 1])
            if len(rc) > 2
            else float("nan")
        ),
        "incons_rc": inc["SVM-RC"],
        "frac_incons_rc_below_uncorrelated": _mean(rc["inconsistency"] < rc["incons_uncorrelated"]),
        "error_lc_minus_rc": mean["SVM-LC"] - mean["SVM-RC"],
        "incons_lc_minus_rc": inc["SVM-LC"] - inc["SVM-RC"],
        "error_hl_minus_lc": mean["SVM-HL"] - mean["SVM-LC"],
        "incons_hl_minus_lc": inc["SVM-HL"] - inc["SVM-LC"],
    }
    best = {
        m: best_per_n(frame, m).set_index("N")["mean"]
        for m in ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")
    }
    out["best_hl_minus_best_gd_relu"] = float((best["SVM-HL"] - best["GD-ReLU"]).mean())
    s = summarize(f.assign(depth="relu", C=2, median_init=True))
    piv = s.pivot_table(index="H", columns="method", values="val_error_mean")
    out["frac_h_lc_better_than_rc"] = float((piv["SVM-LC"] < piv["SVM-RC"]).mean())
    disparity = (piv["SVM-LC"] - piv["GD-ReLU"]).dropna()
    out["lc_disparity_grows_with_H"] = bool(disparity.iloc[-1] > disparity.iloc[0])
    if gln is not None:  # Fig. 3c: deep GLNs with C = 2 and H <= 50 (no more parameters)
        g = best_per_n(gln, "GD-GLN", "C == 2 and H <= 50").set_index("N")["mean"]
        out["best_lc_minus_best_gln"] = float((best["SVM-LC"] - g).mean())
        out["best_rc_minus_best_gln"] = float((best["SVM-RC"] - g).mean())
    return out


def metrics_beside_authors(ours: dict, theirs: dict) -> pd.DataFrame:
    """`gln_metrics` of our runs beside the same statistic of the authors' per-seed data."""
    return pd.DataFrame({"ours": ours, "authors' data, same statistic": theirs}).round(4)
