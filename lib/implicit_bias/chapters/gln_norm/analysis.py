"""The gln_norm chapter's tables and the metrics its claims name (data/claims/gln_norm.yaml): the
theory sections (each returns a table and its metrics), the frames of the sweeps' results, the
metrics dicts, and the numbers each figure plots. The authors' published numbers, and ours beside
them, are in `reference.py`."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.evidence import seeds_in  # noqa: F401 (the notebook's)
from implicit_bias.models.gln import inconsistency, predict_gln
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

# re-exported: the notebook, figures and reference use them as analysis.*
from .evidence import (  # noqa: F401 - the chapter reads them as analysis.*
    contrast_evidence,
    correlation_evidence,
    estimate,
    evidence_table,
    level_evidence,
    paired_evidence,
    share_evidence,
    with_dropped,
)
from .frames import (  # noqa: F401
    BEST_LABELS,
    GLN_METHODS,
    GLN_SVMS,
    REDRAWN,
    REDRAWN_BREAKS,
    RELU_BEST_LABELS,
    RELU_BEST_QUERIES,
    RELU_METHODS,
    RELU_SVMS,
    deep_reference,
    deep_runs,
    deep_svm_runs,
    error_vs_h,
    finite_time_frame,
    finite_time_summary,
    gln_frame,
    mi_summary,
    pair_table,
    pairing_means,
    pairing_table,
    relu_frame,
    relu_pair_table,
    relu_summary,
    relu_variant_frame,
    run_counts,
    seed_pairing_inconsistency,
    seed_pairing_points,
    summarize,
    tasks_of_seeds,
    triangle_check,
    triangle_table,
    zero_unit_table,
)
from .tasks import AUTHORS_L2, SVM_RC_AUTHORS, gln_problem

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
        "frac_cells_within_1p5_svm_l2_authors": frac(AUTHORS_L2),
        "frac_cells_within_1p5_gd_shallow": frac("GD-shallow-GLN"),
        "frac_cells_within_1p5_svm_shallow": frac("SVM-shallow"),
        "frac_cells_within_1p5_gd_relu": frac("GD-ReLU"),
        "frac_cells_within_1p5_svm_rc": frac("SVM-RC"),
        "frac_cells_within_1p5_svm_lc": frac("SVM-LC"),
        "frac_cells_within_1p5_svm_hl": frac("SVM-HL"),
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


def best_relu(
    relu: pd.DataFrame, frame: pd.DataFrame, momentum: float | None = None
) -> pd.DataFrame:
    """Fig. 3c: the best ReLU models (at `momentum`; None: over both) and deep GLNs of similar
    size per training size."""
    if momentum is not None:
        relu = relu[relu["momentum"] == momentum]
    return best_table(pd.concat([relu, frame]), RELU_BEST_LABELS, RELU_BEST_QUERIES)


def best_per_seed(frame: pd.DataFrame, method: str, query: str | None = None) -> pd.Series:
    """`best_per_n` before the mean over seeds: the best validation error per (N, seed)."""
    f = frame[frame["method"] == method].dropna(subset=["val_error"])
    if query:
        f = f.query(query)
    return f.groupby(["N", "seed"])["val_error"].min()


# -------------------------------------------------------------------------------------------
# Per-seed points (their evidence for the claims: evidence.py)
# -------------------------------------------------------------------------------------------


def paired(frame: pd.DataFrame, a: str, b: str, keys, value: str = "val_error") -> pd.DataFrame:
    """Per-seed points where both methods have a value: `diff` = a's `value` minus b's."""
    piv = frame.pivot_table(index=list(keys) + ["seed"], columns="method", values=value)
    if not {a, b} <= set(piv.columns):
        return pd.DataFrame(columns=list(keys) + ["seed", "diff"])
    return (piv[a] - piv[b]).rename("diff").dropna().reset_index()


def best_paired(frame: pd.DataFrame, a, b) -> pd.DataFrame:
    """Fig. 2c / 3c: per (N, seed), the best of method a minus the best of method b; a and b are
    methods or (method, query) pairs."""
    a, b = (x if isinstance(x, tuple) else (x, None) for x in (a, b))
    diff = best_per_seed(frame, *a) - best_per_seed(frame, *b)
    return diff.rename("diff").dropna().reset_index()


# -------------------------------------------------------------------------------------------
# Metrics behind the claims
# -------------------------------------------------------------------------------------------


def _mean(series) -> float:
    s = pd.Series(series).dropna()
    return float(s.mean()) if len(s) else float("nan")


CELLS = ["H", "C", "N"]  # a deep-GLN configuration (Fig. 2a, b: MI, momentum 0)


def _svm_vs_gd(main: pd.DataFrame, method: str) -> dict:
    """`method`'s per-seed points against the paired GD-GLN: the gap (per-seed evidence), share
    better than GD, per-seed correlation of the errors, inconsistency (per-seed evidence), share
    below 2p(1-p), and inconsistency - 2p(1-p) (per-seed evidence)."""
    s = main[main["method"] == method].dropna(subset=["svm_minus_gd"])
    s = s.assign(below=s["inconsistency"] - s["incons_uncorrelated"])
    return {
        "gap": paired_evidence(s, "svm_minus_gd"),
        "better": _mean(s["svm_minus_gd"] < 0),
        "corr": correlation_evidence(s, "val_error", "gd_val_error"),
        "incons": level_evidence(s, "inconsistency"),
        "below": _mean(s["inconsistency"] < s["incons_uncorrelated"]),
        "below_diff": paired_evidence(s, "below"),
    }


def gln_metrics(frame: pd.DataFrame) -> dict:
    """The quantities behind the claims of Sec. 4.1 and C.1, from `gln_frame` rows (deep GLN).
    'main' is the paper's Fig. 2a set: median init, momentum 0, C in {2, 4}, per-seed points.
    Quantities that vary from seed to seed are per-seed `Evidence` (one value per seed: the
    mean over that seed's configurations)."""
    deep = frame[(frame["depth"] == "deep") & (frame["momentum"] == 0.0)]
    main = deep[deep["median_init"]]
    gln, l2, eq23 = (_svm_vs_gd(main, m) for m in ("SVM-GLN", "SVM-L2", "SVM-L2-eq23"))
    out: dict = {
        "gap_gln_minus_gd": gln["gap"],
        "frac_gln_better_than_gd": gln["better"],
        "corr_gln_gd": gln["corr"],
        "incons_gln": gln["incons"],
        "frac_incons_gln_below_uncorrelated": gln["below"],
        "incons_gln_minus_uncorrelated": gln["below_diff"],
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
    out["incons_l2_minus_gln"] = paired_evidence(
        paired(main, "SVM-L2", "SVM-GLN", CELLS, "inconsistency")
    )
    # Fig. 2d (C = 2, MI): per seed, the share of configurations where SVM-GLN beats GD-GLN,
    # and SVM-L2 minus SVM-GLN per H (mean over N)
    c2 = main[main["C"] == 2]
    out["share_configs_gln_below_gd"] = share_evidence(paired(c2, "SVM-GLN", "GD-GLN", CELLS))
    gap = paired(c2, "SVM-L2", "SVM-GLN", ["H", "N"])
    if len(gap):
        out["gap_l2_minus_gln_smallest_H"] = paired_evidence(gap[gap["H"] == gap["H"].min()])
        out["gap_l2_minus_gln_largest_H"] = paired_evidence(gap[gap["H"] == gap["H"].max()])
        # "for few hidden units in particular": smallest H minus largest H, per seed
        out["gap_l2_minus_gln_smallest_minus_largest_H"] = contrast_evidence(
            gap.assign(diff=-gap["diff"]), "H"
        )
    # Sec. C.1: without median init
    nomi = deep[~deep["median_init"]]
    if len(nomi):
        gd = deep[deep["method"] == "GD-GLN"].assign(
            method=np.where(deep[deep["method"] == "GD-GLN"]["median_init"], "MI", "no MI")
        )
        out["gd_error_nomi_minus_mi"] = paired_evidence(paired(gd, "no MI", "MI", CELLS))
        out["incons_l2_minus_gln_nomi"] = paired_evidence(
            paired(nomi, "SVM-L2", "SVM-GLN", CELLS, "inconsistency")
        )
        s = nomi[nomi["method"] == "SVM-GLN"].dropna(subset=["svm_minus_gd"])
        out["gap_gln_minus_gd_nomi"] = paired_evidence(s, "svm_minus_gd")
    # Sec. C.1 / Fig. 4c: C = 4, H = 100 (MI), SVM-L2 minus SVM-GLN, mean over N per seed
    svm_rows = frame[(frame["depth"] == "deep") & frame["median_init"]]
    svm_rows = svm_rows.drop_duplicates(["method", "H", "C", "N", "seed"])
    c4 = svm_rows[(svm_rows["C"] == 4) & (svm_rows["H"] == 100)]
    if len(c4):
        last = paired(c4, "SVM-L2", "SVM-GLN", ["N"])
        if len(last):
            out["gap_l2_minus_gln_c4_h100"] = paired_evidence(last)
    return out


def pairing_metrics(pairing: pd.DataFrame, points: pd.DataFrame | None = None) -> dict:
    """`pairing_table` averaged over the cells with the authors' inconsistency, with and without MI:
    ours, theirs, ours compared as they did (GD cutoffs redrawn), its triangle-bound breaks.
    With `points` (`seed_pairing_points`), the redrawn comparison minus the authors' per seed
    (mean over the median-init cells both have)."""
    both = pairing.dropna(subset=["authors' (published)"])
    mi, no = both[both["median_init"]], both[~both["median_init"]]
    redrawn, theirs = _mean(mi[REDRAWN]), _mean(mi["authors' (published)"])
    out = {
        "incons_same_seed_mi": _mean(mi["same seed (definition)"]),
        "incons_authors_mi": theirs,
        "incons_same_seed_no_mi": _mean(no["same seed (definition)"]),
        "incons_authors_no_mi": _mean(no["authors' (published)"]),
        "incons_redrawn_cutoffs_mi": redrawn,
        "triangle_breaks_redrawn_cutoffs": float(pairing[REDRAWN_BREAKS].sum()),
    }
    if points is not None:
        p = points[points["median_init"]].dropna(subset=["authors' (published)"])
        p = p.assign(diff=p[REDRAWN] - p["authors' (published)"])
        out["incons_redrawn_minus_authors_mi"] = paired_evidence(p)
    return out


def triangle_metrics(ours: pd.DataFrame, authors: pd.DataFrame) -> dict[str, float]:
    """How many per-seed SVM points break the triangle bound (`frames.triangle_check`): ours,
    and the authors' with and without median init."""
    o, a = triangle_check(ours), triangle_check(authors)
    return {
        "triangle_breaks_ours": float(o["breaks"].sum()),
        "triangle_breaks_authors_mi": float(a[a["median_init"]]["breaks"].sum()),
        "triangle_breaks_authors_no_mi": float(a[~a["median_init"]]["breaks"].sum()),
    }


def sparsity_metrics(frame: pd.DataFrame) -> dict:
    """Sec. 4.2's group sparsity: share of units with zeta_h = 0, SVM-GLN against SVM-L2 (the
    same problems, paired per seed), and the SVM-GLN's share at the largest H minus the
    smallest, per seed."""
    s = deep_svm_runs(frame)
    s = s.assign(zero_share=1 - s["active_units"] / s["H"])
    keys = ["H", "C", "N", "median_init"]
    d = paired(s, "SVM-GLN", "SVM-L2", keys, "zero_share")
    g = s[s["method"] == "SVM-GLN"]
    return {
        "zero_units_gln": _mean(g["zero_share"]),
        "zero_units_l2": _mean(s[s["method"] == "SVM-L2"]["zero_share"]),
        "zero_units_gln_minus_l2": paired_evidence(d),
        "zero_units_gln_largest_minus_smallest_H": contrast_evidence(g, "H", "zero_share"),
    }


def best_metrics(frame: pd.DataFrame, shallow: pd.DataFrame) -> dict:
    """Fig. 2c: best shallow GLN (GD) vs the best deep SVM-L2 / SVM-GLN, per N (H <= 100), the
    mean over N per seed."""
    both = pd.concat([frame, shallow])
    return {
        "best_shallow_minus_best_l2": paired_evidence(
            best_paired(both, "GD-shallow-GLN", "SVM-L2")
        ),
        "best_l2_minus_best_gln": paired_evidence(best_paired(both, "SVM-L2", "SVM-GLN")),
    }


RELU_CELLS = ["H", "N"]
SIMILAR_GLN = "C == 2 and H <= 50"  # Fig. 3c: no more parameters than the FReLU


def relu_metrics(frame: pd.DataFrame, gln: pd.DataFrame | None = None, momentum: float = 0.0):
    """The quantities behind the claims of Sec. 5.2 (Fig. 3) at `momentum` (the paper's Fig. 3:
    0.9; Fig. 5 adds 0). Differences are paired per seed where both models have a solution;
    each claim's evidence records how many of its models' runs had none (infeasible SVMs)."""
    f = frame[frame["momentum"] == momentum]
    rc = f[f["method"] == "SVM-RC"].dropna(subset=["val_error"])
    rc = rc.assign(below=rc["inconsistency"] - rc["incons_uncorrelated"])
    rc_only = ["SVM-RC"]
    out = {
        "corr_rc_gd_relu": with_dropped(
            correlation_evidence(rc, "val_error", "gd_val_error"), f, rc_only
        ),
        "incons_rc": with_dropped(level_evidence(rc, "inconsistency"), f, rc_only),
        "frac_incons_rc_below_uncorrelated": _mean(rc["below"] < 0),
        "incons_rc_minus_uncorrelated": with_dropped(paired_evidence(rc, "below"), f, rc_only),
    }
    lc_rc = paired(f, "SVM-LC", "SVM-RC", RELU_CELLS)
    lc_rc_inc = paired(f, "SVM-LC", "SVM-RC", RELU_CELLS, "inconsistency")
    hl_lc = paired(f, "SVM-HL", "SVM-LC", RELU_CELLS)
    hl_lc_inc = paired(f, "SVM-HL", "SVM-LC", RELU_CELLS, "inconsistency")
    lc_and_rc, hl_and_lc = ["SVM-LC", "SVM-RC"], ["SVM-HL", "SVM-LC"]
    out.update(
        {
            "error_lc_minus_rc": with_dropped(paired_evidence(lc_rc), f, lc_and_rc),
            "incons_lc_minus_rc": with_dropped(paired_evidence(lc_rc_inc), f, lc_and_rc),
            "error_hl_minus_lc": with_dropped(paired_evidence(hl_lc), f, hl_and_lc),
            "incons_hl_minus_lc": with_dropped(paired_evidence(hl_lc_inc), f, hl_and_lc),
        }
    )
    out["best_hl_minus_best_gd_relu"] = with_dropped(
        paired_evidence(best_paired(f, "SVM-HL", "GD-ReLU")), f, ["SVM-HL"]
    )
    # Fig. 3d, "uniformly ... for any number of hidden units": the H least favourable to "< 0"
    by_h = {h: paired_evidence(lc_rc[lc_rc["H"] == h]) for h in sorted(lc_rc["H"].unique())}
    out["frac_h_lc_better_than_rc"] = _mean(lc_rc.groupby("H")["diff"].mean() < 0)
    if by_h:
        h, ev = decision.least_favourable(by_h, "high")
        out["error_lc_minus_rc_least_favourable_h"] = with_dropped(ev, f[f["H"] == h], lc_and_rc)
        out["least_favourable_h_lc_minus_rc"] = h
    disparity = paired(f, "SVM-LC", "GD-ReLU", RELU_CELLS)
    by_h_mean = disparity.groupby("H")["diff"].mean()
    out["lc_disparity_grows_with_H"] = bool(by_h_mean.iloc[-1] > by_h_mean.iloc[0])
    out["lc_disparity_largest_minus_smallest_H"] = with_dropped(
        contrast_evidence(disparity, "H"), f, ["SVM-LC"]
    )
    if gln is not None:  # Fig. 3c: deep GLNs with C = 2 and H <= 50 (no more parameters)
        both = pd.concat([f, gln])
        lc_svm = best_paired(both, "SVM-LC", ("SVM-GLN", SIMILAR_GLN))
        rc_svm = best_paired(both, "SVM-RC", ("SVM-GLN", SIMILAR_GLN))
        lc_gd = best_paired(both, "SVM-LC", ("GD-GLN", SIMILAR_GLN))
        rc_gd = best_paired(both, "SVM-RC", ("GD-GLN", SIMILAR_GLN))
        out.update(
            {
                "best_lc_minus_best_svm_gln": with_dropped(paired_evidence(lc_svm), f, ["SVM-LC"]),
                "best_rc_minus_best_svm_gln": with_dropped(paired_evidence(rc_svm), f, ["SVM-RC"]),
                "best_lc_minus_best_gd_gln": _mean(lc_gd["diff"]),
                "best_rc_minus_best_gd_gln": _mean(rc_gd["diff"]),
            }
        )
    return out


def momentum_metrics(relu: pd.DataFrame) -> dict:
    """Appendix C.2: without momentum (0 against 0.9, paired per H, N and seed) the GD-ReLU's
    error and its inconsistency with the SVMs (SVM-RC, SVM-LC, SVM-HL; pairs where both solves
    exist). Positive: worse without momentum."""
    m = relu.assign(method=relu["method"] + np.where(relu["momentum"] == 0.0, " m0", " m0.9"))
    err = paired(m, "GD-ReLU m0", "GD-ReLU m0.9", RELU_CELLS)
    inc = pd.concat(
        [
            paired(m, f"{s} m0", f"{s} m0.9", RELU_CELLS, "inconsistency").assign(svm=s)
            for s in RELU_SVMS
        ]
    )
    if not len(err):
        return {}
    return {
        "gd_relu_error_m0_minus_m09": paired_evidence(err),
        "frac_gd_relu_worse_without_momentum": _mean(err["diff"] > 0),
        "incons_m0_minus_m09": with_dropped(paired_evidence(inc), relu, RELU_SVMS),
    }


# -------------------------------------------------------------------------------------------
# SVM-L2 as the authors' code solves it (models.gln_authors) in place of the paper's SVM-L2
# -------------------------------------------------------------------------------------------


def with_variant(frame: pd.DataFrame, variants: pd.DataFrame, variant: str, method: str):
    """`frame` with its rows of `method` replaced by `variants`' rows of `variant`, renamed
    `method`: a claim's metric computed exactly as for ours, with the variant in its place."""
    rows = variants[variants["method"] == variant].assign(method=method)
    return pd.concat([frame[frame["method"] != method], rows], ignore_index=True)


def with_l2(frame: pd.DataFrame, variants: pd.DataFrame, method: str = AUTHORS_L2) -> pd.DataFrame:
    """`frame` with its SVM-L2 rows replaced by `variants`' rows of `method`, named SVM-L2."""
    return with_variant(frame, variants, method, "SVM-L2")


def authors_l2_metrics(
    frame: pd.DataFrame, variants: pd.DataFrame, shallow: pd.DataFrame
) -> dict[str, float]:
    """The metrics of the SVM-L2 claims of Figs. 2 and 4, computed exactly as for our SVM-L2
    (`gln_metrics`, `best_metrics`) with the authors' program in its place, under the names of
    L2_STATISTICS."""
    swapped = with_l2(frame, variants)
    m = {**gln_metrics(swapped), **best_metrics(swapped, shallow)}
    return {variant: m.get(ours, float("nan")) for _, ours, variant in L2_STATISTICS}


# (statistic, our SVM-L2's metric, the authors' program's metric): the SVM-L2 claims' numbers
# (per-seed evidence: the tables show the mean over seeds)
L2_STATISTICS = [
    ("SVM-L2 minus GD-GLN error (Fig. 2a)", "gap_l2_minus_gd", "gap_l2auth_minus_gd"),
    ("correlation with GD-GLN error, per seed (Fig. 2a)", "corr_l2_gd", "corr_l2auth_gd"),
    (
        "inconsistency minus SVM-GLN's (Fig. 2b)",
        "incons_l2_minus_gln",
        "incons_l2auth_minus_gln",
    ),
    (
        "best shallow minus best SVM-L2 (Fig. 2c)",
        "best_shallow_minus_best_l2",
        "best_shallow_minus_best_l2auth",
    ),
    (
        "best SVM-L2 minus best SVM-GLN (Fig. 2c)",
        "best_l2_minus_best_gln",
        "best_l2auth_minus_best_gln",
    ),
    (
        "SVM-L2 minus SVM-GLN at the smallest H (Fig. 2d)",
        "gap_l2_minus_gln_smallest_H",
        "gap_l2auth_minus_gln_smallest_H",
    ),
    (
        "that gap at the smallest H minus at the largest (Fig. 2d)",
        "gap_l2_minus_gln_smallest_minus_largest_H",
        "gap_l2auth_minus_gln_smallest_minus_largest_H",
    ),
    (
        "inconsistency minus SVM-GLN's without MI (Fig. 4b)",
        "incons_l2_minus_gln_nomi",
        "incons_l2auth_minus_gln_nomi",
    ),
    (
        "SVM-L2 minus SVM-GLN, C = 4, H = 100 (Fig. 4c)",
        "gap_l2_minus_gln_c4_h100",
        "gap_l2auth_minus_gln_c4_h100",
    ),
]


def l2_programs_beside(metrics: dict, authors_data: dict) -> pd.DataFrame:
    """The SVM-L2 claims' statistics for our SVM-L2 and for the authors' program (both from
    `metrics`), and the same statistic of the authors' published data (`authors_data`, from
    `gln_metrics` of their per-seed results, where it can be computed from them); per-seed
    evidence as its mean over seeds."""
    nan = float("nan")
    rows = [
        {
            "statistic": name,
            "our SVM-L2": estimate(metrics.get(ours, nan)),
            "authors' program": estimate(metrics.get(variant, nan)),
            "authors' data": estimate(authors_data.get(ours, nan)),
        }
        for name, ours, variant in L2_STATISTICS
    ]
    return pd.DataFrame(rows).set_index("statistic").astype(float).round(4)


def metrics_beside_authors(ours: dict, theirs: dict) -> pd.DataFrame:
    """`gln_metrics` of our runs beside the same statistic of the authors' per-seed data
    (per-seed evidence as its mean over seeds)."""
    table = pd.DataFrame(
        {
            "ours": {k: estimate(v) for k, v in ours.items()},
            "authors' data, same statistic": {k: estimate(v) for k, v in theirs.items()},
        }
    )
    return table.astype(float).round(4)


# (statistic, our SVM-RC's metric, the authors' construction's metric): the SVM-RC claims
RC_STATISTICS = [
    (
        "correlation with GD-ReLU error, per seed (Fig. 3a)",
        "corr_rc_gd_relu",
        "corr_rcauth_gd_relu",
    ),
    ("inconsistency with GD-ReLU (Fig. 3b)", "incons_rc", "incons_rcauth"),
    (
        "inconsistency minus 2p(1-p)",
        "incons_rc_minus_uncorrelated",
        "incons_rcauth_minus_uncorrelated",
    ),
    ("SVM-LC minus SVM-RC error (Fig. 3a)", "error_lc_minus_rc", "error_lc_minus_rcauth"),
    ("SVM-LC minus SVM-RC inconsistency", "incons_lc_minus_rc", "incons_lc_minus_rcauth"),
    (
        "best SVM-RC minus best SVM-GLN",
        "best_rc_minus_best_svm_gln",
        "best_rcauth_minus_best_svm_gln",
    ),
    (
        "SVM-LC minus SVM-RC error at the least favourable H",
        "error_lc_minus_rc_least_favourable_h",
        "error_lc_minus_rcauth_least_favourable_h",
    ),
    ("that H", "least_favourable_h_lc_minus_rc", "least_favourable_h_lc_minus_rcauth"),
]


# the claims whose void seed plans were replaced: decided on the replacement seeds' networks alone
REPLACED_PLAN_METRICS = (
    "error_lc_minus_rc_least_favourable_h",
    "lc_disparity_largest_minus_smallest_H",
)


def replaced_plan_metrics(replacement: pd.DataFrame, gln, momentum: float) -> dict:
    """`relu_metrics` of the replacement seeds' ReLU networks (`relu_frame` of
    `tasks.relu_replacement_tasks`) for REPLACED_PLAN_METRICS only: a least favourable H is
    chosen on those seeds, and no other claim, table or figure reads them."""
    m = relu_metrics(replacement, gln, momentum)
    return {k: m[k] for k in REPLACED_PLAN_METRICS}


def authors_rc_metrics(relu, variants, gln, momentum: float) -> dict:
    """The SVM-RC claims' metrics (`relu_metrics`) with the SVM-RC rows of `relu` replaced by
    the authors' construction's (`variants`, method SVM_RC_AUTHORS), under RC_STATISTICS' names."""
    m = relu_metrics(with_variant(relu, variants, SVM_RC_AUTHORS, "SVM-RC"), gln, momentum)
    return {variant: m.get(ours, float("nan")) for _, ours, variant in RC_STATISTICS}


def finite_time_metrics(ft: pd.DataFrame) -> dict:
    """Finite against infinite time (Discussion): per seed, the change from the paper's step
    count to the longest run (mean over the seed's cells) of the GD-GLN's inconsistency with
    the SVM-GLN and of its validation error."""
    return {
        "finite_time_incons_change": contrast_evidence(ft, "steps", "inconsistency"),
        "finite_time_error_change": contrast_evidence(ft, "steps", "val_error"),
    }
