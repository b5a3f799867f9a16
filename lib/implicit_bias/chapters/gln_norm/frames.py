"""The gln_norm chapter's result frames: one row per run of each sweep (`gln_frame`,
`relu_frame`), their summaries over seeds, the numbers each figure plots, and the seed-pairing
and triangle checks of the inconsistency (Fig. 2b). The metrics the claims name are computed from
these frames in `analysis.py`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from implicit_bias.models.gln import inconsistency, uncorrelated_inconsistency, unpack_signs

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
    "SVM-GLN": "deep GLN, SVM-GLN (C = 2, H <= 50)",
}
RELU_BEST_QUERIES = {"GD-GLN": "C == 2 and H <= 50", "SVM-GLN": "C == 2 and H <= 50"}


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
                    "active_units": (r.get("active_units") or [None] * len(t["seeds"]))[i],
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


def tasks_of_seeds(tasks_: list[dict], results: list[dict], seeds) -> tuple[list[dict], list[dict]]:
    """The tasks whose seeds are all among `seeds`, with their results (the exploratory seed
    group of a sweep whose later groups hold confirmatory seeds)."""
    keep = {int(s) for s in seeds}
    pairs = [(t, r) for t, r in zip(tasks_, results) if set(t["seeds"]) <= keep]
    return [t for t, _ in pairs], [r for _, r in pairs]


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


def relu_variant_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """`relu_frame`'s rows for a ReLU SVM variant's sweep (one SVM per task, named by the task's
    `method`; the GD-ReLU of the same seeds is retrained there), without the GD-ReLU rows."""
    rows = []
    for t, r in zip(tasks, results):
        m = t["method"]
        for i, seed in enumerate(t["seeds"]):
            base = {"method": m, "H": t["H"], "N": t["N"], "momentum": t["momentum"], "seed": seed}
            if r.get("status") == "error":
                rows.append({**base, "val_error": None, "status": "error"})
                continue
            gd = r["GD-ReLU"]["val_error"][i]
            rows.append(
                {
                    **base,
                    "val_error": r[m]["val_error"][i],
                    "inconsistency": r[m]["inconsistency"][i],
                    "incons_uncorrelated": uncorrelated_inconsistency(gd),
                    "gd_val_error": gd,
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


def relu_summary(relu: pd.DataFrame, momentum: float | None = 0.0) -> pd.DataFrame:
    """Fig. 3d: configuration means of the ReLU experiments at `momentum` (None: all), labelled
    like the deep GLN's (C = 2 and median init) so `error_vs_h` applies."""
    rs = summarize(relu.assign(depth="relu", C=2, median_init=True))
    return rs if momentum is None else rs[rs["momentum"] == momentum]


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


def _svm_and_gd_signs(gd_tasks_, gd_results, svm_tasks_, svm_results, method: str):
    """Per solved `method` SVM with a deep GD-GLN (momentum 0) of the same configuration: the
    task, both results and the validation signs, per seed, of the SVM (S), the GD-GLN (G) and
    the GD-GLN with redrawn cutoffs (R: the authors' comparison; with median init their
    reloaded GD-GLN had random cutoffs, without it the trained ones, then R is G)."""
    # keyed by the seed group too: an SVM task pairs with the GD task of its own seeds
    gd = {
        (t["H"], t["C"], t["N"], t["median_init"], tuple(t["seeds"])): (t, r)
        for t, r in zip(gd_tasks_, gd_results)
        if t["depth"] == "deep" and t["momentum"] == 0.0 and "pred_val" in r
    }
    for t, r in zip(svm_tasks_, svm_results):
        key = (t["H"], t["C"], t["N"], t["median_init"], tuple(t["seeds"]))
        if t["method"] != method or key not in gd or None in r.get("pred_val", [None]):
            continue
        gt, gr = gd[key]
        S = [unpack_signs(p, t["n_val"]) for p in r["pred_val"]]
        G = [unpack_signs(p, gt["n_val"]) for p in gr["pred_val"]]
        R = [unpack_signs(p, gt["n_val"]) for p in gr.get("pred_val_redrawn_cutoffs", [])] or G
        yield t, r, gr, S, G, R


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
    rows = []
    for t, r, gr, S, G, R in _svm_and_gd_signs(
        gd_tasks_, gd_results, svm_tasks_, svm_results, method
    ):
        k = len(S)
        row = {
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
        redrawn = [inconsistency(S[i], R[i]) for i in range(k)]
        row[REDRAWN] = np.mean(redrawn)
        bound = [r["val_error"][i] + gr["val_error"][i] for i in range(k)]
        row[REDRAWN_BREAKS] = int(sum(d > b + 1e-6 for d, b in zip(redrawn, bound)))
        rows.append(row)
    return pd.DataFrame(rows)


def seed_pairing_points(
    gd_tasks_: list[dict],
    gd_results: list[dict],
    svm_tasks_: list[dict],
    svm_results: list[dict],
    ref: pd.DataFrame,
    method: str = "SVM-GLN",
) -> pd.DataFrame:
    """`seed_pairing_inconsistency`'s same-seed and redrawn-cutoff comparisons before the mean
    over seeds: one row per configuration and seed, with the authors' published cell mean
    beside it where their grid has the cell."""
    rows = []
    for t, _, _, S, G, R in _svm_and_gd_signs(
        gd_tasks_, gd_results, svm_tasks_, svm_results, method
    ):
        key = (t["H"], t["C"], t["N"], t["median_init"])
        for i, seed in enumerate(t["seeds"]):
            rows.append(
                {
                    **dict(zip(("H", "C", "N", "median_init"), key)),
                    "seed": seed,
                    "same seed (definition)": inconsistency(S[i], G[i]),
                    REDRAWN: inconsistency(S[i], R[i]),
                }
            )
    r_inc = ref[ref["method"] == method][["H", "C", "N", "median_init", "inconsistency_mean"]]
    return pd.DataFrame(rows).merge(
        r_inc.rename(columns={"inconsistency_mean": "authors' (published)"}),
        on=["H", "C", "N", "median_init"],
        how="left",
    )


REDRAWN = "as the authors compared (GD cutoffs redrawn)"
REDRAWN_BREAKS = "seeds breaking the triangle bound, as the authors compared"


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
    """The columns of `pairing_table` averaged over its cells, with and without median init (the
    authors' median-init comparisons used a GD network with other cutoffs: `triangle_table`)."""
    g = pairing.drop(columns=["H", "C", "N", REDRAWN_BREAKS], errors="ignore").groupby(
        "median_init"
    )
    out = g.mean().round(4)
    out.insert(0, "cells", g.size())
    return out


def triangle_check(frame: pd.DataFrame, tol: float = 1e-6) -> pd.DataFrame:
    """Per-seed SVM rows with the slack of the triangle bound: two classifiers on the same points
    disagree on at most the sum of their error rates, so inconsistency <= SVM error + GD error.
    `slack` = SVM error + GD error - inconsistency; a row `breaks` the bound when slack < -tol,
    which no pair of classifiers evaluated on the same points can do."""
    s = frame.dropna(subset=["inconsistency", "val_error", "gd_val_error"]).copy()
    s["slack"] = s["val_error"] + s["gd_val_error"] - s["inconsistency"]
    s["breaks"] = s["slack"] < -tol
    return s


def triangle_table(frame: pd.DataFrame, tol: float = 1e-6) -> pd.DataFrame:
    """`triangle_check` per method and median init: per-seed points, how many break the bound,
    and the smallest slack."""
    s = triangle_check(frame, tol)
    g = s.groupby(["method", "median_init"])
    return pd.DataFrame(
        {
            "points": g.size(),
            "break the bound": g["breaks"].sum(),
            "smallest slack": g["slack"].min(),
        }
    ).reset_index()


def zero_unit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Group sparsity (Sec. 4.2: the GLN norm is a group lasso over the units' zeta_h): the share
    of hidden units whose predictor zeta_h is zero (norm below 1e-6 of the largest; the solver's
    `active_units`), mean over seeds and N, per method, C and H."""
    s = deep_svm_runs(frame)
    s = s.assign(zero_share=1 - s["active_units"] / s["H"])
    return s.groupby(["method", "C", "H"])["zero_share"].mean().unstack("H").round(4).reset_index()


def deep_svm_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The deep SVMs' per-seed runs once each (`gln_frame` repeats an SVM row for every momentum
    of its GD partner), with a solution (`active_units` known)."""
    s = frame[(frame["depth"] == "deep") & frame["method"].str.startswith("SVM")]
    s = s.dropna(subset=["active_units"])
    return s.drop_duplicates(["method", "H", "C", "N", "median_init", "seed"])


def finite_time_frame(
    longer_tasks: list[dict],
    longer_results: list[dict],
    svm_tasks_: list[dict],
    svm_results: list[dict],
) -> pd.DataFrame:
    """One row per (H, C, N, seed, steps) of the longer GD-GLN runs: validation and training
    errors, training loss, and the inconsistency with the SVM-GLN of the same configuration and
    seed (median init), whose error is `svm_val_error` (NaN where that SVM failed)."""
    svm = {}
    for t, r in zip(svm_tasks_, svm_results):
        if t["method"] == "SVM-GLN" and t["median_init"] and r.get("status") != "error":
            for i, seed in enumerate(t["seeds"]):
                svm[(t["H"], t["C"], t["N"], seed)] = (r["pred_val"][i], r["val_error"][i])
    rows = []
    for t, r in zip(longer_tasks, longer_results):
        for j, steps in enumerate(r["steps"]):
            for i, seed in enumerate(t["seeds"]):
                signs, svm_error = svm.get((t["H"], t["C"], t["N"], seed), (None, None))
                gd = unpack_signs(r["pred_val"][j][i], t["n_val"])
                rows.append(
                    {
                        **{k: t[k] for k in ("H", "C", "N")},
                        "seed": seed,
                        "steps": steps,
                        "val_error": r["val_error"][j][i],
                        "train_error": r["train_error"][j][i],
                        "train_loss": r["train_loss"][j][i],
                        "inconsistency": np.nan
                        if signs is None
                        else inconsistency(gd, unpack_signs(signs, t["n_val"])),
                        "svm_val_error": np.nan if svm_error is None else svm_error,
                    }
                )
    return pd.DataFrame(rows)


def finite_time_summary(ft: pd.DataFrame) -> pd.DataFrame:
    """`finite_time_frame` per (H, C, N, steps): means and standard errors over the seeds of
    the inconsistency with the SVM-GLN and of both validation errors (what the figure plots)."""
    values = ["inconsistency", "val_error", "svm_val_error"]
    g = ft.groupby(["H", "C", "N", "steps"])[values]
    se = g.std(ddof=1) / np.sqrt(g.count())
    return g.mean().add_suffix("_mean").join(se.add_suffix("_se")).reset_index()
