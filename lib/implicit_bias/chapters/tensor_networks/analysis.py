"""The frames, tables and metrics of the tensor-networks chapter, built from the sweeps' results
(and the small self-checks of `implicit_bias.models`). Every metric a claim of
`data/claims/tensor_networks.yaml` names is set here, under its literal name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from implicit_bias.core.verdicts import decision
from implicit_bias.core.verdicts.evidence import Value, converged_runs, unconverged_seeds
from implicit_bias.models import tensor_networks as tn
from implicit_bias.models import tensor_networks_theory as theory

# ----------------------------------------------------------------------------------------------
# One form for three architectures (Sec. 2)


def tensor_form(seed: int = 0) -> pd.DataFrame:
    """The contraction M(x) o (v_1, .., v_L) against each network's forward pass."""
    return pd.DataFrame(tn.tensor_form_check(seed=seed))


def tensor_form_metrics(form: pd.DataFrame) -> dict:
    return {"tensor_form_max_rel_error": float(form["relative error"].max())}


# ----------------------------------------------------------------------------------------------
# Per-seed evidence: every seed draws its own problem (data, initialization), so a claim over
# several seeds is decided on the seeds' values by the book's rule (`core.verdicts.decision`);
# the runs of
# one seed (depths, labels, points) are not independent of each other, so each seed contributes
# one value, the worst of its runs in the claim's direction.


def by_seed(
    frame: pd.DataFrame, value: str, agg: str, dropped: int | list = 0, seed: str = "data_seed"
):
    """`decision.per_seed` of `value` aggregated per seed by `agg` ("max": the worst of a seed's
    runs for an upper bound, "min" for a lower one), with the unconverged runs left out
    recorded: `dropped` names their seeds (one entry a run, so that a verdict on some seeds
    counts only theirs), or, where the runs' seeds are not at hand, counts them."""
    evidence = decision.per_seed(frame.groupby(seed)[value].agg(agg))
    if isinstance(dropped, list):
        return evidence.with_dropped_runs(dropped)
    return dataclasses.replace(evidence, dropped=int(dropped))


# ----------------------------------------------------------------------------------------------
# Classification (Thm 1, Cor 1-3)


def reference_runs(cls: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The runs whose reference direction was solved to its solver's stopping rule (convex
    programs "optimal", reweighted l1 "converged"), and how many were left out: every claim
    that compares a run with its reference rests on these only."""
    if "reference_status" not in cls:
        return cls, 0
    return converged_runs(cls, status="reference_status")


def _label(frame: pd.DataFrame) -> list[str]:
    return [f"{a} L={L}" for a, L in zip(frame["arch"], frame["L"])]


def classification_frame(tasks: list[dict], runs: list[dict]) -> pd.DataFrame:
    """One row per run: its architecture, depth and seed, and everything the task returned,
    plus the Fourier sparsity index of its predictor (`fourier_sparsity`)."""
    cls = pd.DataFrame(
        [
            {**{k: t[k] for k in ("arch", "L", "data_seed")}, "rel_step": t.get("rel_step"), **r}
            for t, r in zip(tasks, runs)
        ]
    )
    cls["fourier_sparsity"] = cls["fourier_magnitudes"].map(fourier_sparsity)
    return cls


def at_step(cls: pd.DataFrame, rel_step: float) -> pd.DataFrame:
    """The runs at the profile's step fraction (the step-size variants of `cor2_spread` left
    out), renumbered."""
    return cls[cls["rel_step"] == rel_step].reset_index(drop=True)


def cor2_spread(cls: pd.DataFrame) -> pd.DataFrame:
    """Cor 2, L = 2: the final cosine gap to the LP solution of every diag L = 2 run, one row
    per seed, one column per step fraction c."""
    diag2 = cls[(cls["arch"] == "diag") & (cls["L"] == 2)]
    table = diag2.pivot_table(index="data_seed", columns="rel_step", values="final_cosine_gap")
    table.columns = [f"gap at c = {c:g}" for c in table.columns]
    return table


def cor2_spread_metrics(cls: pd.DataFrame) -> dict:
    """The standard deviation (ddof 1) of the diag L = 2 final gaps over all seeds and step
    fractions (shown beside the claim, which is decided on the seeds at the profile's step)."""
    diag2 = reference_runs(cls)[0].query("arch == 'diag' and L == 2")
    return {"cor2_diag_l2_gap_spread": float(diag2["final_cosine_gap"].std(ddof=1))}


def thm1_table(cls: pd.DataFrame) -> pd.DataFrame:
    """Thm 1's final residuals per run (the figure's data, with the columns' own names)."""
    return cls[
        ["arch", "L", "data_seed", "thm1_kkt_residual", "thm1_uavg_residual", "final_cosine_gap"]
    ]


def thm1_display(thm1: pd.DataFrame) -> pd.DataFrame:
    """`thm1_table` with the column names the chapter shows."""
    return thm1.rename(
        columns={
            "thm1_kkt_residual": "residual, u from multipliers",
            "thm1_uavg_residual": "residual, averaged u",
            "final_cosine_gap": "1 - cos to reference",
        }
    )


def residual_paths(cls: pd.DataFrame) -> pd.DataFrame:
    """Thm 1's residual (u from the multipliers) at every recorded step of every run."""
    return pd.concat(
        [
            pd.DataFrame({"run": run, "seed": s, "step": st, "residual": res})
            for run, s, st, res in zip(
                _label(cls), cls["data_seed"], cls["steps"], cls["thm1_kkt_residual_path"]
            )
        ],
        ignore_index=True,
    )


def thm1_metrics(cls: pd.DataFrame, paths: pd.DataFrame) -> dict:
    """Per seed, over the runs whose reference converged: the largest final residual, and the
    largest ratio of a run's final residual to its residual at the middle checkpoint (the claim:
    below one half)."""
    kept, _ = reference_runs(cls)
    dropped = unconverged_seeds(cls, "data_seed", status="reference_status")
    labels = set(zip(_label(kept), kept["data_seed"]))
    ratios = [
        {"data_seed": seed, "ratio": g["residual"].iloc[-1] / g["residual"].iloc[len(g) // 2]}
        for (run, seed), g in paths.groupby(["run", "seed"])
        if (run, seed) in labels
    ]
    return {
        "thm1_max_singular_residual": by_seed(kept, "thm1_kkt_residual", "max", dropped),
        "thm1_residual_end_to_middle": by_seed(pd.DataFrame(ratios), "ratio", "max", dropped),
    }


def cosine_curves(cls: pd.DataFrame) -> pd.DataFrame:
    """1 - cos(beta, reference) at every recorded step, with log(1 / loss) there."""
    return pd.concat(
        [
            pd.DataFrame({"run": run, "seed": s, "step": st, "log_inv_loss": ll, "cosine_gap": cg})
            for run, s, st, ll, cg in zip(
                _label(cls), cls["data_seed"], cls["steps"], cls["log_inv_loss"], cls["cosine_gap"]
            )
        ],
        ignore_index=True,
    )


def corollary_metrics(cls: pd.DataFrame) -> dict:
    """Cor 1-3, per seed over the runs whose reference converged: the final cosine gaps to the
    references (the worst over depths for fc, and over L >= 3 for the stationary points), and
    the diag L = 2 gap at the last checkpoint over its gap at the middle (log-spaced) one."""
    kept, _ = reference_runs(cls)
    kept = kept.assign(shrink=[g[-1] / g[len(g) // 2] for g in kept["cosine_gap"]])

    def sel(arch, deep):
        return kept[(kept["arch"] == arch) & ((kept["L"] >= 3) if deep else (kept["L"] == 2))]

    def lost(arch, deep=None):  # runs of this selection whose reference did not converge
        rows = cls[cls["arch"] == arch]
        if deep is not None:
            rows = rows[(rows["L"] >= 3) if deep else (rows["L"] == 2)]
        return rows.loc[rows.index.difference(kept.index), "data_seed"].tolist()

    fc = kept[kept["arch"] == "fc"]
    return {
        "cor1_fc_max_cosine_gap": by_seed(fc, "final_cosine_gap", "max", lost("fc")),
        "cor2_diag_l2_cosine_gap": by_seed(
            sel("diag", False), "final_cosine_gap", "max", lost("diag", False)
        ),
        "cor2_diag_deep_max_cosine_gap": by_seed(
            sel("diag", True), "final_cosine_gap", "max", lost("diag", True)
        ),
        "cor3_conv_l2_cosine_gap": by_seed(
            sel("conv", False), "final_cosine_gap", "max", lost("conv", False)
        ),
        "cor3_conv_deep_max_cosine_gap": by_seed(
            sel("conv", True), "final_cosine_gap", "max", lost("conv", True)
        ),
        "cor2_gap_shrink_ratio": by_seed(sel("diag", False), "shrink", "max", lost("diag", False)),
    }


def irl1_control_frame(tasks: list[dict], runs: list[dict], cls: pd.DataFrame) -> pd.DataFrame:
    """L >= 3: how far reweighted l1 moves GD's direction (its `final_cosine_gap`) beside how
    far it moves the control starts (the l2 SVM, the L = 2 reference), the ratio of the nearer
    control to GD's gap, and 1 - cos between GD's stationary point and each control's. `status`
    is "ok" only where every reweighted-l1 run of the row (both controls, GD's reference)
    converged."""
    ref = cls.set_index(["arch", "L", "data_seed"])
    rows = []
    for t, r in zip(tasks, runs):
        gd = ref.loc[(t["arch"], t["L"], t["data_seed"])]
        gd_z = np.asarray(gd["reference_z"])
        moved = min(r["moved_from_l2_svm"], r["moved_from_l2_reference"])
        converged = r.get("status", "ok") == "ok" and gd.get("reference_status") in (
            None,
            "converged",
            "optimal",
        )
        rows.append(
            {
                "arch": t["arch"],
                "L": t["L"],
                "data_seed": t["data_seed"],
                "status": "ok" if converged else "unconverged",
                "moved from GD": gd["final_cosine_gap"],
                "moved from l2 SVM": r["moved_from_l2_svm"],
                "moved from L=2 reference": r["moved_from_l2_reference"],
                "control / GD": moved / gd["final_cosine_gap"],
                "1 - cos(GD's point, SVM's)": 1 - tn.cosine(gd_z, r["stationary_from_l2_svm"]),
                "1 - cos(GD's point, L=2 ref's)": 1
                - tn.cosine(gd_z, r["stationary_from_l2_reference"]),
            }
        )
    return pd.DataFrame(rows)


def irl1_control_metrics(control: pd.DataFrame) -> dict:
    """Per seed, over the converged rows: the smallest control / GD movement ratio among the
    diag and among the conv runs with L >= 3."""
    out = {}
    for arch, name in (
        ("diag", "cor2_deep_min_control_ratio"),
        ("conv", "cor3_deep_min_control_ratio"),
    ):
        runs = control[control["arch"] == arch]
        kept, _ = converged_runs(runs)
        out[name] = by_seed(kept, "control / GD", "min", unconverged_seeds(runs, "data_seed"))
    return out


def irl1_control_summary(control: pd.DataFrame) -> pd.DataFrame:
    """Per architecture: the converged rows' ranges (min, max) of the moves from GD, from the
    l2 SVM and from the L = 2 reference, of the control / GD ratio, and the rows left out."""
    kept, _ = converged_runs(control)
    cols = ["moved from GD", "moved from l2 SVM", "moved from L=2 reference", "control / GD"]
    summary = kept.groupby("arch")[cols].agg(["min", "max"])
    summary[("rows left out", "unconverged")] = control.groupby("arch")["status"].apply(
        lambda s: int((s != "ok").sum())
    )
    return summary


def fourier_sparsity(mags) -> float:
    """||F beta||_1 / (sqrt(d) ||F beta||_2): 1 for a flat spectrum, 1/sqrt(d) for one
    frequency."""
    mags = np.asarray(mags)
    return float(mags.sum() / (np.sqrt(len(mags)) * np.linalg.norm(mags)))


def fourier_spectra(cls: pd.DataFrame) -> pd.DataFrame:
    """Each run's DFT magnitudes |F beta|_j, sorted and divided by the largest."""
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "run": run,
                    "seed": s,
                    "rank": np.arange(1, len(m) + 1),
                    "magnitude": np.sort(m)[::-1] / np.max(m),
                }
            )
            for run, s, m in zip(_label(cls), cls["data_seed"], cls["fourier_magnitudes"])
        ],
        ignore_index=True,
    )


def fourier_sparsity_table(cls: pd.DataFrame) -> pd.DataFrame:
    """The Fourier sparsity index per architecture and depth (mean over seeds)."""
    sparsity = cls.groupby(["arch", "L"])["fourier_sparsity"].mean()
    return sparsity.to_frame("Fourier sparsity index (mean over seeds)")


def fourier_metrics(cls: pd.DataFrame) -> dict:
    """Cor 3, per seed: the sparsity index of the least sparse conv net minus that of the
    sparsest fc net (the claim: below 0, every conv net sparser than every fc net). GD's
    predictor alone, no reference: every run counts."""
    conv = cls[cls["arch"] == "conv"].groupby("data_seed")["fourier_sparsity"].max()
    fc = cls[cls["arch"] == "fc"].groupby("data_seed")["fourier_sparsity"].min()
    return {"cor3_conv_minus_fc_sparsity": decision.paired(conv, fc)}


# ----------------------------------------------------------------------------------------------
# Theorem 3 (one point, classification)


def theorem3_frame(tasks: list[dict], runs: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{**{k: t[k] for k in ("seed", "y")}, **r} for t, r in zip(tasks, runs)])


def theorem3_table(thm3: pd.DataFrame) -> pd.DataFrame:
    return thm3[["seed", "y", "lambda", "error_v1", "error_v2", "sign_rule_holds", "norm_ratio"]]


def theorem3_metrics(thm3: pd.DataFrame) -> dict:
    """Per seed (one point each, both labels): the largest direction error and the largest
    deviation of ||v_1|| / ||v_2|| from 1; whether the sign rule holds in every run (an exact
    property of each run, not a size)."""
    thm3 = thm3.assign(
        direction_error=thm3[["error_v1", "error_v2"]].max(axis=1),
        norm_deviation=(thm3["norm_ratio"] - 1).abs(),
    )
    return {
        "thm3_max_direction_error": by_seed(thm3, "direction_error", "max", seed="seed"),
        "thm3_sign_rule_holds": bool(thm3["sign_rule_holds"].all()),
        "thm3_norm_ratio_deviation": by_seed(thm3, "norm_deviation", "max", seed="seed"),
    }


# ----------------------------------------------------------------------------------------------
# Lemma 4: h_L and H_L


def lemma4_frame(Ls=(2, 3, 4, 5)) -> pd.DataFrame:
    """Lemma 4's ODE against the closed forms of h_L^{-1} and H_L."""
    return pd.DataFrame(theory.lemma4_ode_check(Ls=Ls))


def lemma4_table(lemma4: pd.DataFrame) -> pd.DataFrame:
    return lemma4.groupby("L")[["error_h_inverse", "error_H"]].max()


def lemma4_metrics(lemma4: pd.DataFrame) -> dict:
    return {
        "lemma4_max_abs_error_vs_ode": float(lemma4[["error_h_inverse", "error_H"]].max().max())
    }


def hl_curves(Ls=(2, 3, 4), grid=None) -> pd.DataFrame:
    """The closed forms H_L(t) and h_L^{-1}(t) on a grid of t (default 241 points in
    [-6, 6])."""
    grid = np.linspace(-6, 6, 241) if grid is None else grid
    return pd.DataFrame(
        [
            {
                "L": L,
                "t": t,
                "H_L": float(theory.H(np.array([t]), L)[0]),
                "h_inverse": float(theory.h_inverse(np.array([t]), L)[0]),
            }
            for L in Ls
            for t in grid
        ]
    )


# ----------------------------------------------------------------------------------------------
# Theorem 5 / Corollaries 5 and 6: which argument of H_L is right


def argument_frame(tasks: list[dict], runs: list[dict], rel_step: float) -> pd.DataFrame:
    """One row per regression run: architecture, depth, seed, step knob ("h" for the profile's
    `rel_step`, else "h/2"), the relative errors to the Q-minimizers and the final loss."""
    return pd.DataFrame(
        [
            {
                "arch": t["arch"],
                "L": t["L"],
                "seed": t["data_seed"],
                "step knob": "h" if t["rel_step"] == rel_step else "h/2",
                "status": r.get("status", "ok"),
                **{k: v for k, v in r.items() if k.startswith("error") or k == "loss"},
            }
            for t, r in zip(tasks, runs)
        ]
    )


def by_step_knob(args: pd.DataFrame, knob: str) -> pd.DataFrame:
    """The runs at one step knob ("h" or "h/2"), indexed by (arch, L, seed)."""
    return args[args["step knob"] == knob].set_index(["arch", "L", "seed"]).sort_index()


def halving_ratio(args: pd.DataFrame) -> pd.Series:
    """error(h) / error(h/2) of the derived form, per run."""
    return by_step_knob(args, "h")["error_derived"] / by_step_knob(args, "h/2")["error_derived"]


def with_cor6_unnormalized(args: pd.DataFrame, tasks: list[dict], runs: list[dict]) -> pd.DataFrame:
    """`args` with two columns for the conv runs (NaN for diag): `error_cor6_printed_unnormalized`,
    the GD limit's relative distance to Cor 6's printed minimizer with F the unnormalized DFT
    sqrt(d) F, and `cor6_minimizer_diff`, that minimizer's relative distance to the derived one
    (unitary F with d^{-(L-1)/2}), each solved by its own Newton run on the task's data."""
    errors, diffs = [], []
    for t, r in zip(tasks, runs):
        if t["arch"] != "conv":
            errors.append(np.nan)
            diffs.append(np.nan)
            continue
        X, y = tn.regression_data(t["n"], t["d"], t["data_seed"], even=True)
        wbar = tn.init_params("conv", t["d"], t["L"], 1.0, int(t["wbar"]), even=True)[0].numpy()
        derived = theory.q_limit(X, y, "conv", t["L"], t["alpha"], wbar, "derived")
        printed = theory.cor6_printed_unnormalized_dft(X, y, t["L"], t["alpha"], wbar)
        beta = np.asarray(r["beta"])
        errors.append(float(np.linalg.norm(beta - printed) / np.linalg.norm(printed)))
        diffs.append(float(np.linalg.norm(printed - derived) / np.linalg.norm(derived)))
    return args.assign(error_cor6_printed_unnormalized=errors, cor6_minimizer_diff=diffs)


def argument_metrics(args: pd.DataFrame) -> dict:
    """Per seed, over the converged runs (a run and its half-step partner both, for the
    ratios): at the step h/2 the derived forms' worst error and the printed forms' best (Cor 6
    also read with the unnormalized DFT: its worst error, and its minimizer's largest distance
    to the derived one); the smallest and the largest error-halving ratio of the diag and the
    conv nets."""
    kept, _ = converged_runs(args)
    pairs = kept.groupby(["arch", "L", "seed"])["step knob"].nunique() == 2
    pairs = pairs[pairs].index
    kept = kept.set_index(["arch", "L", "seed"]).loc[pairs].reset_index()
    ratio = halving_ratio(kept).rename("ratio").reset_index()
    half = kept[kept["step knob"] == "h/2"]
    out = {}
    for arch in ("diag", "conv"):
        lost = int((args["arch"] == arch).sum() - (kept["arch"] == arch).sum())
        h, r = half[half["arch"] == arch], ratio[ratio["arch"] == arch]

        def ev(frame, value, agg, lost=lost):
            return by_seed(frame, value, agg, lost, seed="seed")

        if arch == "diag":
            out["cor5_max_rel_error_half_step"] = ev(h, "error_derived", "max")
            out["cor5_min_error_halving_ratio"] = ev(r, "ratio", "min")
            out["cor5_max_error_halving_ratio"] = ev(r, "ratio", "max")
            out["thm5_printed_min_rel_error"] = ev(h, "error_thm5_printed", "min")
        else:
            out["cor6_max_rel_error_derived"] = ev(h, "error_derived", "max")
            out["cor6_min_error_halving_ratio"] = ev(r, "ratio", "min")
            out["cor6_max_error_halving_ratio"] = ev(r, "ratio", "max")
            out["cor6_min_rel_error_printed"] = ev(h, "error_cor6_printed", "min")
            out["cor6_max_rel_error_printed_unnormalized"] = ev(
                h, "error_cor6_printed_unnormalized", "max"
            )
            out["cor6_printed_unnormalized_vs_derived_max_rel_diff"] = ev(
                kept[kept["arch"] == "conv"], "cor6_minimizer_diff", "max"
            )
    return out


def argument_errors(args: pd.DataFrame) -> pd.DataFrame:
    """The errors at the step h/2 in long form (one row per run and formula), the figure's
    data."""
    half = by_step_knob(args, "h/2")
    return (
        half.reset_index()
        .melt(
            id_vars=["arch", "L", "seed"],
            value_vars=[
                "error_derived",
                "error_thm5_printed",
                "error_cor6_printed",
                "error_cor6_printed_unnormalized",
            ],
            var_name="formula",
            value_name="relative_error",
        )
        .dropna()
    )


# ----------------------------------------------------------------------------------------------
# From l2 to l1 as alpha shrinks (Cor 5)


def alpha_theory(cfg: dict) -> pd.DataFrame:
    """The Q_{L,alpha}-minimizer's distances to the min-l1 and min-l2 interpolators along the
    profile's `theory_alphas` (wbar = 1), for every depth."""
    return pd.DataFrame(
        [
            row
            for L in cfg["reg_depths"]
            for row in theory.alpha_sweep_theory(
                cfg["reg_n"], cfg["reg_d"], cfg["reg_seeds"][0], L, cfg["theory_alphas"]
            )
        ]
    )


def alpha_gd_frame(tasks: list[dict], runs: list[dict]) -> pd.DataFrame:
    """The GD limits of the alpha sweep: distances to both interpolators, error to Q-min."""
    return pd.DataFrame(
        [
            {
                "L": t["L"],
                "alpha": t["alpha"],
                "status": r.get("status", "ok"),
                **{k: r[k] for k in ("distance_l1", "distance_l2", "error_derived")},
            }
            for t, r in zip(tasks, runs)
        ]
    )


def alpha_metrics(theory_frame: pd.DataFrame, gd: pd.DataFrame) -> dict:
    """One fixed problem (the profile's first regression seed, wbar = 1), so plain values:
    the Q-minimizer's distance to min-l1 at the smallest alpha (L = 3) and the largest distance
    to min-l2 at the largest alpha (converged Newton solves only); whether GD's distance to
    min-l1 grows with alpha at every depth that keeps at least two converged runs (runs stopped
    by the step cap are left out and counted)."""
    theory_kept, theory_dropped = converged_runs(theory_frame)
    smallest = theory_kept[theory_kept["alpha"] == theory_kept["alpha"].min()].set_index("L")
    largest = theory_kept[theory_kept["alpha"] == theory_kept["alpha"].max()]
    kept, dropped = converged_runs(gd)
    groups = [g for _, g in kept.groupby("L") if len(g) >= 2]
    grows = bool(groups) and all(
        np.all(np.diff(g.sort_values("alpha")["distance_l1"].to_numpy()) > 0) for g in groups
    )
    return {
        "cor5_l1_distance_smallest_alpha_L3": Value(
            float(smallest.loc[3, "distance_l1"]), theory_dropped
        ),
        "cor5_l2_distance_largest_alpha": Value(
            float(largest["distance_l2"].max()), theory_dropped
        ),
        "cor5_gd_l1_distance_decreases_with_alpha": Value(grows, dropped),
    }


def alpha_depths_checked(gd: pd.DataFrame) -> list[int]:
    """The depths whose GD limits enter `cor5_gd_moves_toward_l1` (two or more converged)."""
    kept, _ = converged_runs(gd)
    counts = kept.groupby("L").size()
    return [int(L) for L in counts[counts >= 2].index]


# ----------------------------------------------------------------------------------------------
# Theorem 6 (one point, regression)


def theorem6_frame(runs: list[dict], tasks: list[dict]) -> pd.DataFrame:
    """One row per Thm 6 run with its seed; `low_rank` marks the band-limited points (rank
    m < k1)."""
    thm6 = pd.DataFrame(runs)
    return thm6.assign(seed=[t["seed"] for t in tasks], low_rank=thm6["m"] < thm6["k1"])


def theorem6_table(thm6: pd.DataFrame) -> pd.DataFrame:
    return thm6.drop(columns=["status", "device", "seconds"], errors="ignore")


def theorem6_metrics(thm6: pd.DataFrame) -> dict:
    """Per seed over the converged runs (generic and band-limited point): the closed form's
    worst error against the flow (all runs, and the band-limited ones whose out-of-range terms
    are nonzero), the printed v_2's best, and the smallest and largest GD error-halving ratio."""
    kept, _ = converged_runs(thm6)
    dropped = unconverged_seeds(thm6, "seed")
    kept = kept.assign(ratio=kept["gd_error"] / kept["gd_error_half"])
    low = kept[kept["low_rank"]]
    return {
        "thm6_flow_rel_error": by_seed(kept, "flow_error", "max", dropped, seed="seed"),
        "thm6_low_rank_flow_rel_error": by_seed(low, "flow_error", "max", dropped, seed="seed"),
        "thm6_printed_flow_rel_error": by_seed(
            kept, "flow_error_printed", "min", dropped, seed="seed"
        ),
        "thm6_gd_min_error_halving_ratio": by_seed(kept, "ratio", "min", dropped, seed="seed"),
        "thm6_gd_max_error_halving_ratio": by_seed(kept, "ratio", "max", dropped, seed="seed"),
    }
