"""The chapter's figures, one function each, in the book's style; each returns the Figure (the
notebook saves it with the data `analysis` gives for it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import NullLocator

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below, power_of_ten

from . import analysis

DRIFT_LABELS = {
    "lemma2": "Lemma 2 (vertices)",
    "theorem1_linear": "Thm 1, linear",
    "theorem1_active": "Thm 1, stable ReLU",
    "lemma3": "Lemma 3 (layers)",
    "lemma4": "ReLU Gram (Lemma 4)",
    "not_covered": "ResNetDiagonal off-diag.",
}
DRIFT_COLORS = {
    "lemma2": PALETTE[0],
    "theorem1_linear": PALETTE[2],
    "theorem1_active": PALETTE[1],
    "lemma3": PALETTE[4],
    "lemma4": PALETTE[3],
    "not_covered": PALETTE[5],
}


# The runs as a legend names them (the analysis's run names are the program's)
RUN_NAMES = {"synthetic_deep": "synthetic, deeper", "mnist": "MNIST", "resfree": "ResNetFree"}


def layer_name(layer: str) -> str:
    """A layer as a legend names it: the model's parameter "1.K" is "conv kernel, layer 1",
    a dense layer "2" (or "2.W") "dense, layer 2"."""
    index, _, kind = layer.partition(".")
    return f"{'conv kernel' if kind == 'K' else 'dense'}, layer {index}"


def step_ticks(etas) -> list[str]:
    """Step sizes as tick labels: plain decimals down to 10⁻⁴, powers of ten below."""
    return [power_of_ten(e, plain=(1e-4, 1e4)) for e in etas]


def lemma1_tree(results: list[dict[str, Any]]):
    """f(x) against T(h(x)) for every Lemma 1 network and input."""
    fig, ax = figure(1, 1)
    df = analysis.lemma1_tree_data(results)
    for arch, grp in df.groupby("arch", sort=False):
        ax.plot(grp["network"], grp["tree_of_paths"], "o", ms=3, label=arch, alpha=0.7)
    lim = float(np.abs(df[["network", "tree_of_paths"]].to_numpy()).max()) * 1.05
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8, label="y = x")
    ax.set(
        xlabel="network output f(x)",
        ylabel="tree network T(h(x))",
        title=r"Lemma 1: $f = T \circ h$",
    )
    ax.legend(loc="upper left")  # the points lie on the diagonal
    return fig


def invariance_drift(rows: list[dict[str, Any]], summary: pd.DataFrame):
    """Drift against step size, log-log: invariants (left), Lemma 4 and ResNetDiagonal
    off-diagonals (right); a dotted slope-1 guide on both."""
    fig, axes = figure(1, 2, height=4.0)
    axes = np.ravel(axes)
    data = analysis.drift_data(rows, summary)
    panels = [("lemma2", "theorem1_linear", "theorem1_active", "lemma3"), ("lemma4", "not_covered")]
    for ax, groups in zip(axes, panels):
        for group in groups:
            part = data[data["group"] == group]
            for k, (_, line) in enumerate(part.groupby(["arch", "seed", "invariant"])):
                ax.plot(
                    line["eta"],
                    line["drift"],
                    "-o",
                    ms=2.5,
                    lw=0.9,
                    alpha=0.8,
                    color=DRIFT_COLORS[group],
                    label=DRIFT_LABELS[group] if k == 0 else None,
                )
        etas = np.sort(data["eta"].unique())
        top = data[data["group"].isin(groups)]["drift"].max()
        ax.plot(etas, top * etas / etas[-1], "k:", lw=1.2, label="slope 1 (drift ∝ η)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="step size η (flow time T fixed)",
            ylabel="max drift from t = 0",
        )
        ax.set_xticks(etas, step_ticks(etas), minor=False)
        ax.xaxis.set_minor_locator(NullLocator())
        legend_below(ax, ncol=2)
    axes[0].set_title("Invariants: drift ∝ η", fontsize=8)
    axes[1].set_title("Not invariant: drift stays as η → 0", fontsize=8)
    fig.suptitle("Lemmas 2-4 and Theorem 1: drift of the invariants under GD", fontsize=9)
    return fig


def theorem2_rank_one(traj: pd.DataFrame, runs: tuple[str, ...] = ("synthetic", "mnist")):
    """Left: 1 - ||W||_2^2/||W||_F^2 against ||W||_F^2 with the bound Delta_j / ||W||_F^2 of
    Eq. (13) (dashed), and the ReLU layers (grey). Right: 1 - alignment of adjacent layers
    against ||W_j||_F^2."""
    fig, axes = figure(1, 2, height=4.0)
    axes = np.ravel(axes)
    data = analysis.rank_one_data(traj, runs)
    part = data["rank_one"]
    relu = traj[traj["run"].isin(runs) & (traj["act"] == "relu")].copy()
    relu["one_minus_ratio"] = 1.0 - relu["ratio"]
    relu = analysis.at_loss_levels(relu, ["frob_sq", "one_minus_ratio"], ("frob_sq",))
    # one colour per (data set, layer); seeds share it and only the first seed is labelled
    keys = sorted({(r, la) for r, la in zip(part["run"], part["layer"])})
    colors = {key: PALETTE[k % 8] for k, key in enumerate(keys)}
    first_seed = part["seed"].min() if len(part) else 0
    for (run, seed, layer), g in part.groupby(["run", "seed", "layer"]):
        color = colors[(run, layer)]
        lab = f"{RUN_NAMES.get(run, run)}, layer {layer}" if seed == first_seed else None
        axes[0].plot(g["frob_sq"], g["one_minus_ratio"], "-o", ms=2.5, color=color, label=lab)
        axes[0].plot(g["frob_sq"], g["bound"], "--", color=color, lw=0.8)
    for k, (_, g) in enumerate(relu.groupby(["run", "seed", "layer"])):
        axes[0].plot(
            g["frob_sq"],
            g["one_minus_ratio"],
            ":",
            color="grey",
            lw=1.0,
            label="ReLU layers (not covered)" if k == 0 else None,
        )
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel=r"$\|W_j\|_F^2$",
        ylabel=r"$1 - \|W_j\|_2^2 / \|W_j\|_F^2$",
        title=r"Eq. (13): rank one; dashed: $\Delta_j / \|W_j\|_F^2$",
    )
    legend_below(axes[0], ncol=2)
    al = data["alignment"].copy()
    al["one_minus_alignment"] = (1.0 - al["alignment"]).clip(lower=1e-16)
    for (run, seed, layer), g in al.groupby(["run", "seed", "layer"]):
        axes[1].plot(
            g["frob_sq"],
            g["one_minus_alignment"],
            "-o",
            ms=2.5,
            color=colors.get((run, layer), "grey"),
            label=(
                f"{RUN_NAMES.get(run, run)}: layers {layer}, {int(layer) + 1}"
                if seed == first_seed
                else None
            ),
        )
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel=r"$\|W_j\|_F^2$",
        ylabel=r"$1 - |\langle v_{j+1}, u_j \rangle|$",
        title="Eq. (15): adjacent layers align",
    )
    legend_below(axes[1], ncol=2)
    fig.suptitle("Theorem 2 / Corollary 1: synthetic data and binary MNIST", fontsize=9)
    return fig


def _rep_label(layer: str) -> str:
    if layer.endswith(".VR"):
        return "block [V R]"
    if layer.endswith(".WR"):
        return "block [W; R]"
    return layer_name(layer)


def theorem2_reduced_alignment(traj: pd.DataFrame):
    """Left: ResNetFree run, ratio of each linear representation with the 1/8^{N_j} bound.
    Right: the linear conv layer's ratio with its predicted limit (reduced alignment). Both
    against log(1/loss), at the losses of `analysis.at_loss_levels`."""
    fig, axes = figure(1, 2, height=3.4)
    axes = np.ravel(axes)
    data = analysis.reduced_alignment_data(traj)
    res, conv = data["resfree"], data["conv"]
    for frame in (res, conv):
        frame["log_inv_loss"] = np.log(1.0 / frame["loss"].to_numpy(float))
    layers = sorted(set(res["layer"]))
    first = res["seed"].min() if len(res) else 0
    for (seed, layer), g in res.groupby(["seed", "layer"]):
        if g["ratio"].iloc[0] > 0 and not (g["ratio"] == 1.0).all():
            n = int(g["n_resfree_after"].iloc[0])
            axes[0].plot(
                g["log_inv_loss"],
                g["ratio"],
                "-o",
                ms=2.5,
                color=PALETTE[layers.index(layer) % 8],
                label=_rep_label(layer) + f" ($N_j$ = {n})" if seed == first else None,
            )
    axes[0].axhline(1 / 8, color="k", ls="--", lw=0.8, label="bound 1/8 ($N_j$ = 1)")
    xlabel = r"$\log(1/L)$ (training loss $L$)"
    axes[0].set(
        xscale="log",
        ylim=(0, 1.02),
        xlabel=xlabel,
        ylabel=r"$\|W\|_2^2 / \|W\|_F^2$",
        title="Linear ResNetFree block",
    )
    axes[0].legend(fontsize=6.5, loc="center right")  # below the ratios' plateau near 1
    acts = traj[traj["run"] == "conv"].groupby("layer")["act"].first()
    last_layer = max(acts.index, key=lambda name: int(name.split(".")[0]), default=None)
    for (seed, layer), g in conv.groupby(["seed", "layer"]):
        first_conv = seed == conv["seed"].min()
        if layer.endswith(".K") and acts[layer] == "linear":
            axes[1].plot(
                g["log_inv_loss"],
                g["ratio"],
                "-o",
                ms=2.5,
                color=PALETTE[0],
                label=layer_name(layer) if first_conv else None,
            )
            axes[1].plot(
                g["log_inv_loss"],
                g["predicted_ratio"],
                "--",
                color=PALETTE[3],
                lw=0.9,
                label="limit predicted from the next layer" if first_conv else None,
            )
        elif acts[layer] == "linear" and layer != last_layer:
            axes[1].plot(
                g["log_inv_loss"],
                g["ratio"],
                ":",
                color="grey",
                label=layer_name(layer) if first_conv else None,
            )
    axes[1].set(
        xscale="log",
        ylim=(0, 1.02),
        xlabel=xlabel,
        ylabel=r"$\|W\|_2^2 / \|W\|_F^2$",
        title="Reduced alignment: linear conv layer",
    )
    axes[1].legend(fontsize=6.5, loc="lower right")  # below the ratios, which settle high
    fig.suptitle("Theorem 2: ResNetFree bound and reduced alignment of a conv layer", fontsize=9)
    return fig


def theorem2_rates(traj: pd.DataFrame, rates: pd.DataFrame, steps: pd.DataFrame):
    """Left: 1 - ||W||_2^2/||W||_F^2 against ||W||_F^2 over the late snapshots of the synthetic
    and synthetic_deep runs, with a slope -1 guide (Eq. (13)). Right: max_t gap / Delta_j of the
    synthetic runs against the step size, per seed and layer, with the bound 1."""
    fig, axes = figure(1, 2, height=4.2)
    axes = np.ravel(axes)
    data = analysis.rate_data(traj, rates)
    markers = {"synthetic": "-o", "synthetic_deep": "-s"}
    keys = sorted({(r, la) for r, la in zip(data["run"], data["layer"])})
    for (run, layer), g in data.groupby(["run", "layer"], sort=True):
        marker = markers.get(run, "-o")
        for j, (_, line) in enumerate(g.groupby("seed")):
            axes[0].plot(
                line["frob_sq"],
                line["one_minus_ratio"],
                marker,
                ms=2.5,
                lw=0.9,
                color=PALETTE[keys.index((run, layer)) % 8],
                label=f"{RUN_NAMES.get(run, run)}, layer {layer}" if j == 0 else None,
            )
    if len(data):
        f = np.geomspace(data["frob_sq"].min(), data["frob_sq"].max(), 10)
        top = float(data["one_minus_ratio"].max())
        axes[0].plot(f, top * f[0] / f, "k:", lw=1.2, label="slope -1")
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel=r"$\|W_j\|_F^2$",
        ylabel=r"$1 - \|W_j\|_2^2 / \|W_j\|_F^2$",
        title="Rank-one rate (loss ≤ 10⁻¹⁰)",
    )
    legend_below(axes[0], ncol=2)
    for (seed, layer), g in steps.groupby(["seed", "layer"], sort=True):
        g = g.sort_values("eta")
        axes[1].plot(
            g["eta"],
            g["gap_over_bound_max"],
            "-o",
            ms=3,
            color=PALETTE[int(layer) % 8],
            label=f"layer {layer}" if seed == steps["seed"].min() else None,
        )
    axes[1].axhline(1.0, color="k", ls="--", lw=0.8, label=r"bound $\Delta_j$")
    etas = np.sort(steps["eta"].unique())
    axes[1].set_xscale("log")
    axes[1].set_xticks(etas, step_ticks(etas), minor=False)
    axes[1].set(
        xlabel="normalized-GD step size η",
        ylabel=r"$\max_t (\|W_j\|_F^2 - \|W_j\|_2^2) / \Delta_j$",
        title="Eq. (13) against the step size",
    )
    axes[1].xaxis.set_minor_locator(NullLocator())
    legend_below(axes[1], ncol=2)
    fig.suptitle(
        r"Theorem 2: the $1/\|W_j\|_F^2$ rate, and the gap bound as $\eta \to 0$", fontsize=9
    )
    return fig
