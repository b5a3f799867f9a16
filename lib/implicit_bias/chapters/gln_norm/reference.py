"""The authors' published numbers for the gln_norm chapter (data/reference/lippl2022: their
results tables and per-seed values) and our results beside them, cell by cell."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from implicit_bias.core.engine.paths import project_root

from .analysis import RC_STATISTICS, estimate, summarize
from .frames import relu_variant_frame
from .tasks import AUTHORS_L2, AUTHORS_L2_SOLVER, GD_RELU_NO_BIAS

COMPARISON_FILE = "comparison_with_authors.csv"


def load_reference(root=None) -> pd.DataFrame:
    """The authors' published results (data/reference/lippl2022/gln.csv) with this module's
    column names (H, C, N, median_init, momentum; NaN momentum for the SVMs)."""
    root = root or project_root() / "data" / "reference" / "lippl2022"
    ref = pd.read_csv(root / "gln.csv")
    ref = ref.rename(columns={"hidden_units": "H", "contexts": "C", "train_size": "N"})
    ref["method"] = ref["method"].replace({"SVM-shallow-GLN": "SVM-shallow"})
    ref.loc[ref["depth"] == "shallow", "H"] = 1  # this module's convention for shallow GLNs
    return ref


def reference_frame(root=None) -> pd.DataFrame:
    """The authors' per-seed results (gln_per_seed.csv) as `gln_frame` rows, so the chapter's
    statistics can be computed on their numbers exactly as on ours (SVM rows are paired, as in
    their tables, with the GD-GLN at momentum 0)."""
    root = root or project_root() / "data" / "reference" / "lippl2022"
    r = pd.read_csv(root / "gln_per_seed.csv")
    r = r.rename(
        columns={
            "hidden_units": "H",
            "contexts": "C",
            "train_size": "N",
            "gd_ref_val_error": "gd_val_error",
        }
    )
    r["method"] = r["method"].replace({"SVM-shallow-GLN": "SVM-shallow"})
    r["momentum"] = r["momentum"].fillna(0.0)
    r = r[r["H"].isna() | (r["H"] <= 100)]
    r["H"] = r["H"].fillna(1).astype(int)
    cols = [
        "method",
        "depth",
        "H",
        "C",
        "N",
        "median_init",
        "momentum",
        "seed",
        "val_error",
        "inconsistency",
        "incons_uncorrelated",
        "svm_minus_gd",
        "gd_val_error",
    ]
    return r[cols].dropna(subset=["val_error"]).reset_index(drop=True)


def reference_best(ref_root=None) -> pd.DataFrame:
    """The authors' Fig. 2c numbers (best.csv) labelled like `best_table`."""
    root = ref_root or project_root() / "data" / "reference" / "lippl2022"
    b = pd.read_csv(root / "best.csv")
    b = b[b["figure"] == "2c"]
    names = {
        ("Shallow GLN", "GD"): ("GD-shallow-GLN", "shallow GLN, GD"),
        ("Shallow GLN", "SVM"): ("SVM-shallow", "shallow GLN, SVM"),
        ("Deep GLN (GLN Norm)", "GD"): ("GD-GLN", "deep GLN, GD"),
        ("Deep GLN (GLN Norm)", "SVM"): ("SVM-GLN", "deep GLN, SVM-GLN"),
        ("Deep GLN (L2 Norm)", "SVM"): ("SVM-L2", "deep GLN, SVM-L2"),
    }
    rows = []
    for _, r in b.iterrows():
        key = (r["network"], r["training"])
        if key in names:
            rows.append(
                {
                    "method": names[key][0],
                    "label": names[key][1],
                    "N": r["train_size"],
                    "mean": r["val_error_mean"],
                    "se": r["val_error_se"],
                }
            )
    return pd.DataFrame(rows)


def compare_with_reference(
    summary: pd.DataFrame, ref: pd.DataFrame, tolerance: float = 0.015
) -> pd.DataFrame:
    """Our mean validation error beside the authors' for every cell we ran (same method, H, C,
    N, MI and, for GD, momentum); our SVM-L2-eq23 and the authors' SVM-L2 program (both
    minimizers) are compared with the authors' SVM-L2 too."""
    ours = summary.copy()
    same = {"SVM-L2-eq23": "SVM-L2", AUTHORS_L2: "SVM-L2", AUTHORS_L2_SOLVER: "SVM-L2"}
    ours["ref_method"] = ours["method"].replace(same)
    ours["momentum_key"] = np.where(ours["method"].str.startswith("GD"), ours["momentum"], -1.0)
    ours = ours.drop_duplicates(["method", "depth", "H", "C", "N", "median_init", "momentum_key"])
    ref = ref.copy()
    ref["momentum_key"] = ref["momentum"].fillna(-1.0)
    ref = ref[ref["n_files"] > 0]
    cols = ["method", "depth", "H", "C", "N", "median_init", "momentum_key"]
    merged = ours.merge(
        ref[cols + ["val_error_mean", "val_error_se"]].rename(
            columns={
                "method": "ref_method",
                "val_error_mean": "paper_mean",
                "val_error_se": "paper_se",
            }
        ),
        on=["ref_method"] + cols[1:],
        how="inner",
    )
    # cells whose runs the authors published without a final value are not comparable
    merged = merged.dropna(subset=["paper_mean"])
    merged["difference"] = merged["val_error_mean"] - merged["paper_mean"]
    merged["within_tolerance"] = merged["difference"].abs() <= tolerance
    keep = [
        "method",
        "depth",
        "H",
        "C",
        "N",
        "median_init",
        "momentum",
        "n_seeds",
        "val_error_mean",
        "val_error_se",
        "paper_mean",
        "paper_se",
        "difference",
        "within_tolerance",
    ]
    return merged[keep].sort_values(["method", "C", "median_init", "H", "N"]).reset_index(drop=True)


def this_run_comparison(
    frame: pd.DataFrame,
    shallow: pd.DataFrame,
    ref: pd.DataFrame,
    variants: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """`compare_with_reference` for every deep and shallow cell of this run (and the SVM-L2
    variants' rows, `variants`)."""
    return compare_with_reference(summarize(pd.concat([frame, shallow, variants])), ref)


L2_PROGRAMS = ["SVM-L2", AUTHORS_L2, AUTHORS_L2_SOLVER]


def l2_programs_by_cell(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per deep-GLN cell the authors have: their SVM-L2's mean validation error beside ours
    (the paper's program) and the authors' program's (minimum-norm minimizer; and the
    minimizer their solver finds, where it was run), each with its difference from theirs."""
    keys = ["H", "C", "N", "median_init"]
    c = comparison[comparison["method"].isin(L2_PROGRAMS)]
    if not len(c):
        return pd.DataFrame(columns=keys + ["authors' SVM-L2"])
    wide = c.pivot_table(index=keys, columns="method", values="val_error_mean")
    wide = wide[[m for m in L2_PROGRAMS if m in wide.columns]]
    diff = wide.sub(c.groupby(keys)["paper_mean"].first(), axis=0)
    wide.insert(0, "authors' SVM-L2", c.groupby(keys)["paper_mean"].first())
    return wide.join(diff.add_suffix(" minus authors'")).reset_index()


def load_relu_reference(root=None) -> pd.DataFrame:
    """The authors' published ReLU results (relu.csv: GD-ReLU, SVM-RC, SVM-LC, SVM-HL; Figs. 3
    and 5) in the deep GLN's column names (C = 2, median init, depth "relu"), H <= 100 (the
    paper's grid; their SVM-GO is not in the paper)."""
    root = root or project_root() / "data" / "reference" / "lippl2022"
    ref = pd.read_csv(root / "relu.csv")
    ref = ref.rename(columns={"hidden_units": "H", "train_size": "N"})
    ref = ref[ref["in_paper_grid"] & (ref["method"] != "SVM-GO")]
    return ref.assign(depth="relu", C=2, median_init=True).reset_index(drop=True)


def compare_relu(relu_summary: pd.DataFrame, ref: pd.DataFrame, tolerance: float = 0.015):
    """Our ReLU cell means (`analysis.relu_summary(relu, None)`) beside the authors' (same method,
    H, N and momentum), in `compare_with_reference`'s columns."""
    cols = ["method", "H", "N", "momentum"]
    merged = relu_summary.merge(
        ref[cols + ["val_error_mean", "val_error_se"]].rename(
            columns={"val_error_mean": "paper_mean", "val_error_se": "paper_se"}
        ),
        on=cols,
    ).dropna(subset=["paper_mean", "val_error_mean"])
    merged["difference"] = merged["val_error_mean"] - merged["paper_mean"]
    merged["within_tolerance"] = merged["difference"].abs() <= tolerance
    keep = [
        "method",
        "depth",
        "H",
        "C",
        "N",
        "median_init",
        "momentum",
        "n_seeds",
        "val_error_mean",
        "val_error_se",
        "paper_mean",
        "paper_se",
        "difference",
        "within_tolerance",
    ]
    return merged[keep].sort_values(["method", "momentum", "H", "N"]).reset_index(drop=True)


def relu_triangle(ref: pd.DataFrame, tol: float = 1e-6) -> pd.DataFrame:
    """The triangle bound on the authors' ReLU cell means (they published no per-seed ReLU
    values): mean inconsistency <= mean SVM error + mean GD-ReLU error holds for every cell
    whose seeds all obey it, so a cell that breaks it has a seed that does."""
    s = ref.dropna(subset=["inconsistency_mean", "val_error_mean", "gd_ref_val_error_mean"])
    slack = s["val_error_mean"] + s["gd_ref_val_error_mean"] - s["inconsistency_mean"]
    s = s.assign(slack=slack, breaks=slack < -tol)
    g = s.groupby(["method", "momentum"])
    return pd.DataFrame(
        {
            "cells": g.size(),
            "break the bound": g["breaks"].sum(),
            "smallest slack": g["slack"].min(),
        }
    ).reset_index()


def authors_momentum(ref: pd.DataFrame) -> pd.DataFrame:
    """Appendix C.2 in the authors' ReLU cell means: per method, the cells where the model at
    momentum 0 has a higher error / inconsistency than at 0.9, out of the cells with both."""
    piv = ref.pivot_table(
        index=["method", "H", "N"],
        columns="momentum",
        values=["val_error_mean", "inconsistency_mean"],
    )
    rows = []
    for method, g in piv.groupby(level="method"):
        row = {"method": method}
        for v, label in (("val_error_mean", "error"), ("inconsistency_mean", "inconsistency")):
            d = (g[(v, 0.0)] - g[(v, 0.9)]).dropna()
            row[f"cells with {label} worse at momentum 0"] = int((d > 0).sum())
            row[f"cells with both ({label})"] = len(d)
            row[f"mean {label}, momentum 0 minus 0.9"] = float(d.mean()) if len(d) else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def committed_paper_comparison() -> tuple[pd.DataFrame, dict] | None:
    """The committed paper-profile comparison with the authors' numbers
    (`results/paper/gln_norm/comparison_with_authors.csv`, written by the paper-profile run of
    the chapter) and that run's claims report (`results/paper/claims/gln_norm.json`), or None
    if they are not committed.

    Lets every profile of the chapter show the paper-scale table; it is read-only and never
    enters the smoke profile's claims.
    """
    results = project_root() / "results" / "paper"
    table = results / "gln_norm" / COMPARISON_FILE
    report = results / "claims" / "gln_norm.json"
    if not (table.exists() and report.exists()):
        return None
    return pd.read_csv(table), json.loads(report.read_text())


def variants_by_cell(
    relu: pd.DataFrame,
    variants: pd.DataFrame,
    ref: pd.DataFrame | None,
    tolerance: float = 0.015,
    method: str = "SVM-RC",
) -> pd.DataFrame:
    """Per (H, N, momentum): the mean validation error of our `method` (SVM-RC: our gates),
    of its variant (`variants`: the authors' construction) and the authors' published one
    (`ref`, relu.csv; NaN where absent), each with its number of infeasible solves; `within`
    flags |ours - authors'| <= `tolerance`."""
    keys = ["H", "N", "momentum"]
    both = pd.concat([relu[relu["method"] == method], variants], ignore_index=True)
    g = both.assign(infeasible=both["status"] == "infeasible").groupby(["method"] + keys)
    wide = g.agg(err=("val_error", "mean"), infeasible=("infeasible", "sum")).unstack("method")
    wide.columns = [f"{m}: {'mean error' if c == 'err' else 'infeasible'}" for c, m in wide.columns]
    if ref is not None:
        r = ref[ref["method"] == method].set_index(keys)
        wide["authors: mean error"] = r["val_error_mean"]
        wide["authors: infeasible"] = r["n_infeasible"]
        for m in both["method"].unique():
            wide[f"{m}: within"] = (
                wide[f"{m}: mean error"] - r["val_error_mean"]
            ).abs() <= tolerance
    return wide.reset_index()


def variant_agreement(cells: pd.DataFrame) -> pd.DataFrame:
    """Per model of `variants_by_cell` (ours, the variant): the share of the cells that both it
    and the authors have (a mean error) within tolerance, those cells, and its infeasible solves
    over all cells."""
    rows = {}
    for col in [c for c in cells.columns if c.endswith(": mean error")]:
        m = col[: -len(": mean error")]
        have = m != "authors" and "authors: mean error" in cells
        both = cells.dropna(subset=[col, "authors: mean error"]) if have else None
        rows[m] = {
            "share within 1.5 points": None if both is None else both[f"{m}: within"].mean(),
            "cells": None if both is None else len(both),
            "infeasible solves": cells.get(f"{m}: infeasible", pd.Series(dtype=float)).sum(),
        }
    return pd.DataFrame(rows).T


def rc_constructions_beside(ours: dict, variant: dict) -> pd.DataFrame:
    """Each SVM-RC claim's statistic with our SVM-RC and with the authors' construction
    (per-seed evidence as its mean over seeds)."""
    rows = [
        {
            "statistic": n,
            "our SVM-RC": estimate(ours.get(a, np.nan)),
            "authors' construction": estimate(variant.get(b, np.nan)),
        }
        for n, a, b in RC_STATISTICS
    ]
    return pd.DataFrame(rows).set_index("statistic").astype(float).round(4)


def no_bias_frames(tasks: list[dict], results: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of `relu_no_bias_task`'s sweep: its GD-ReLU (method GD_RELU_NO_BIAS, as
    `relu_frame`'s GD-ReLU rows) and the authors' SVM-HL on it (`relu_variant_frame`'s rows)."""
    hl = relu_variant_frame(tasks, results)
    gd = hl[["H", "N", "momentum", "seed"]].assign(
        method=GD_RELU_NO_BIAS, val_error=hl["gd_val_error"], status="ok"
    )
    gd.loc[hl["status"] == "error", ["val_error", "status"]] = [np.nan, "error"]
    return gd, hl


def no_bias_by_cell(
    relu: pd.DataFrame, gd: pd.DataFrame, hl: pd.DataFrame, ref: pd.DataFrame | None
) -> pd.DataFrame:
    """Per (H, N, momentum): the GD-ReLU's mean error with our output bias, without it (`gd`)
    and the authors' (no bias), each with `within` 1.5 points of the authors'; then SVM-HL's
    mean inconsistency with its network: ours (constant feature, network with bias), the
    authors' SVM-HL on the network without bias (`hl`), and the authors' published one."""
    cells = variants_by_cell(relu, gd, ref, method="GD-ReLU")
    cells = cells.drop(columns=[c for c in cells.columns if c.endswith(": infeasible")])
    keys = ["H", "N", "momentum"]
    ours = relu[relu["method"] == "SVM-HL"].groupby(keys)["inconsistency"].mean()
    theirs_ours = hl.groupby(keys)["inconsistency"].mean()
    cells = cells.set_index(keys)
    cells["SVM-HL: inconsistency"] = ours
    cells["SVM-HL (no constant) on the network without bias: inconsistency"] = theirs_ours
    if ref is not None:
        r = ref[ref["method"] == "SVM-HL"].set_index(keys)
        cells["authors' SVM-HL: inconsistency"] = r["inconsistency_mean"]
    return cells.reset_index()


def no_bias_agreement(cells: pd.DataFrame) -> pd.DataFrame:
    """`variant_agreement` of `no_bias_by_cell`'s two GD-ReLU networks (trainings: no solves,
    so no infeasible count, and no row for the authors')."""
    out = variant_agreement(cells).drop(index="authors", errors="ignore")
    return out.drop(columns="infeasible solves")


OURS_DATA = "ours"  # a training subset per seed, median over it


def data_protocols_by_cell(
    frame: pd.DataFrame, tasks: list[dict], results: list[dict], ref: pd.DataFrame | None
) -> pd.DataFrame:
    """Per configuration of `authors_data_task`'s sweeps and for GD-GLN and SVM-GLN: the mean
    and seed-to-seed standard deviation of the validation error under our data protocol (from
    `frame`), under each of the authors' (`tasks`' `protocol`, `results`) and the authors'
    published ones (`ref`), whether each mean is within 1.5 points of theirs; for the SVM-GLN
    also the mean inconsistency with the GD-GLN of the same protocol."""
    keys = ("H", "C", "N", "median_init", "momentum")
    by_cell: dict[tuple, dict[str, dict]] = {}
    for t, r in zip(tasks, results):
        by_cell.setdefault(tuple(t[k] for k in keys), {})[t["protocol"]] = r
    rows = []
    for cell, runs in by_cell.items():
        c = dict(zip(keys, cell))
        mine = frame[frame["depth"] == "deep"]
        for k, v in c.items():
            mine = mine[mine[k] == v]
        for method in ("GD-GLN", "SVM-GLN"):
            ours = mine[mine["method"] == method]
            values = {OURS_DATA: (ours["val_error"], ours.get("inconsistency"))}
            for protocol, r in runs.items():
                slot = {} if r.get("status") == "error" else r[method]
                values[protocol] = (
                    pd.Series(slot.get("val_error", []), dtype=float),
                    pd.Series(slot["inconsistency"], dtype=float)
                    if "inconsistency" in slot
                    else None,
                )
            row = {**c, "method": method}
            for name, (errors, incons) in values.items():
                row[f"{name}: mean"] = errors.astype(float).mean()
                row[f"{name}: sd"] = errors.astype(float).std()
                if method == "SVM-GLN" and incons is not None:
                    row[f"{name}: inconsistency"] = incons.astype(float).mean()
            if ref is not None:
                theirs = ref[(ref["method"] == method) & (ref["depth"] == "deep")]
                for k, v in c.items():
                    if k == "momentum":
                        theirs = theirs[(theirs[k] == v) | theirs[k].isna()]
                    else:
                        theirs = theirs[theirs[k] == v]
                if len(theirs):
                    a = theirs.iloc[0]
                    row["authors: mean"], row["authors: sd"] = (
                        a["val_error_mean"],
                        a["val_error_std"],
                    )
                    if method == "SVM-GLN":
                        row["authors: inconsistency"] = a["inconsistency_mean"]
                    for name in values:
                        diff = abs(row[f"{name}: mean"] - a["val_error_mean"])
                        row[f"{name}: within"] = bool(diff <= 0.015)
            rows.append(row)
    return pd.DataFrame(rows)


def data_protocols_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per method and data protocol of `data_protocols_by_cell`: the cells, the median
    seed-to-seed sd, and, with the authors' numbers, the share of cells within 1.5 points,
    the mean difference from their means (points), their median sd and, for the SVM-GLN, the
    mean inconsistency beside theirs."""
    names = [c[: -len(": mean")] for c in cells.columns if c.endswith(": mean")]
    out = {}
    for method, g in cells.groupby("method", sort=False):
        for name in [n for n in names if n != "authors"]:
            row = {
                "cells": int(g[f"{name}: mean"].notna().sum()),
                "median sd": g[f"{name}: sd"].median(),
            }
            if "authors: mean" in g:
                have = g.dropna(subset=[f"{name}: mean", "authors: mean"])
                row["within 1.5 points"] = have[f"{name}: within"].astype(bool).mean()
                row["mean minus authors' (points)"] = (
                    100 * (have[f"{name}: mean"] - have["authors: mean"]).mean()
                )
                row["authors' median sd"] = g["authors: sd"].median()
            if f"{name}: inconsistency" in g:
                row["mean inconsistency"] = g[f"{name}: inconsistency"].mean()
                if "authors: inconsistency" in g:
                    row["authors' mean inconsistency"] = g["authors: inconsistency"].mean()
            out[(method, name)] = row
    return pd.DataFrame(out).T
