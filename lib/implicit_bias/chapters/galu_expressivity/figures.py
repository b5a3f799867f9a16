"""The chapter's figures, one function per figure: each takes the analysis frames and returns a
matplotlib Figure in the book's style (the notebook saves it with `Chapter.save_figure`)."""

from __future__ import annotations

import numpy as np

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below
from implicit_bias.models.galu import DEEP_MODELS, GATES, linear_fit

MODEL_LABELS = {
    "galu0": "GaLU0 (sigmoid gates)",
    "relu": "ReLU",
    "linear": "linear",
    "relu_readout": "ReLU, readout only",
}
# Fig. 3's three curves per model: column, line style, marker size, legend words
FIG3_CURVES = (
    ("test", "o-", 4, "test"),
    ("train", "x--", 4, "train"),
    ("test_clean", "s:", 3, "test, clean labels"),
)
FIG3_LABELS = {"galu": "GaLU, closed form", "galu_adam": "GaLU, Adam", "relu": "ReLU, Adam"}
FIG5_LABELS = {
    "galu_acs": "GaLU, alternate convex search",
    "galu_adam": "GaLU, Adam",
    "galu": "GaLU, better fit (scored)",
    "relu": "ReLU, Adam",
}


def fig1(df):
    """Fig. 1: test accuracy against width, one panel per dataset (mean and std over seeds)."""
    datasets = list(dict.fromkeys(df["dataset"]))
    # tall enough for the legend under the panels
    fig, axes = figure(1, len(datasets), width=3.6 * len(datasets), height=3.8)
    names = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}
    for ax, ds in zip(axes[0], datasets):
        for i, model in enumerate(DEEP_MODELS):
            sub = df[(df.dataset == ds) & (df.model == model)].groupby("k")["test_acc"]
            mean, std = sub.mean(), sub.std().fillna(0)
            ax.errorbar(
                mean.index,
                100 * mean,
                yerr=100 * std,
                marker="o",
                ms=3,
                color=PALETTE[i],
                ls="--" if model == "relu_readout" else "-",
                label=MODEL_LABELS[model],
                capsize=2,
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("neurons per hidden layer k")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"Fig. 1: {names.get(ds, ds)}, PCA to 64")
    legend_below(axes[0][0], ncol=2)  # inside, it met the readout-only curve
    return fig


def theorem1(df):
    """Theorem 1: Monte Carlo against the formula, and the rank statement for few 0-1 gates."""
    fig, axes = figure(1, 2, width=7.2, height=3.0)
    ax = axes[0][0]
    mc = df[df.kind == "mc"]
    for i, gate in enumerate(GATES):
        sub = mc[mc.gate == gate]
        ax.errorbar(
            sub.formula,
            sub.mc_mean,
            yerr=2 * sub.mc_se,
            fmt="o",
            ms=4,
            color=PALETTE[i],
            label=f"{gate} gates (MC, 2 s.e.)",
        )
    ax.plot([0, 1], [0, 1], color="grey", lw=1, label="y = x")
    ax.set_xlabel(r"$1 - \mathrm{rank}(\bar X)/m$ (Theorem 1)")
    ax.set_ylabel(r"Monte Carlo $E[\min L_S]$")
    ax.set_title("Theorem 1: formula vs Monte Carlo")
    ax.legend(fontsize=7, loc="upper left")  # above the diagonal, where no point lies
    ax = axes[0][1]
    sub = df[df.kind.isin(["few", "lowdim"])]
    few = sub.groupby(["m", "d", "k"])[["min_m_kd", "rank", "rank_bound"]].mean().reset_index()
    x = np.arange(len(few))
    bars = (
        ("min_m_kd", r"$\min(m, kd)$ (paper)"),
        ("rank", r"$\mathrm{rank}(\bar X)$, observed"),
        ("rank_bound", "upper bound from the gate patterns"),
    )
    for i, (col, label) in enumerate(bars):
        ax.bar(x + (i - 1) * 0.27, few[col], width=0.27, color=PALETTE[i], label=label)
    # one number per line (m, d, k): six groups fit side by side at 9 pt, unturned
    ax.set_xticks(x, [f"{r.m}\n{r.d}\n{r.k}" for r in few.itertuples()])
    ax.set_xlabel("m / d / k (top to bottom)")
    ax.set_yscale("log")
    ax.set_ylabel("count (mean over draws)")
    ax.set_title("Rank statement: few 0-1 gates, low d")
    ax.set_ylim(top=ax.get_ylim()[1] * 8)  # room above the bars for the legend
    ax.legend(loc="upper left", ncol=1, frameon=False)
    return fig


def fig2(df, m: int, d: int):
    """Fig. 2: training MSE against width on random labels, with Theorem 1's curve (ReLU: the
    mean over the runs that met their stopping rule)."""
    fig, axes = figure(1, 1, width=4.6, height=3.9)  # room for the legend under the panel
    ax = axes
    df = df.assign(relu=df["relu"].where(df["relu_converged"].astype(bool)))
    mean = df.groupby("k").mean()
    ks = np.array(mean.index)
    lines = [
        ("galu", "GaLU(k), closed form", "o-"),
        ("galu_alg1", "GaLU(512), Algorithm 1", "s-"),
        ("relu", "ReLU(k), Adam to convergence", "^-"),
        ("galu_2k", "GaLU(2k), closed form", "v:"),
    ]
    for i, (col, label, style) in enumerate(lines):
        ax.plot(ks, mean[col], style, color=PALETTE[i], ms=4, label=label)
    kk = np.linspace(ks.min(), ks.max(), 200)
    ax.plot(
        kk, 1 - np.minimum(m, kk * d) / m, color="grey", lw=1, label=r"$1 - \min(m, kd)/m$ (Thm. 1)"
    )
    ax.set_xlabel("neurons k")
    ax.set_ylabel("training MSE")
    ax.set_title(f"Fig. 2: memorizing N(0,1) labels (m = {m}, d = {d})")
    legend_below(ax, ncol=2, fontsize=7)  # inside, it covered Theorem 1's curve
    return fig


def fig3(df):
    """Fig. 3: train and test error against label noise in the cluster model."""
    fig, axes = figure(1, 2, width=7.4, height=4.6)  # room for the legend under the panels
    cols = ["train", "test", "test_clean"]
    mean = df.groupby(["task", "model", "noise"])[cols].mean().reset_index()
    for ax, task in zip(axes[0], ("regression", "classification")):
        for i, model in enumerate(FIG3_LABELS):
            sub = mean[(mean.task == task) & (mean.model == model)]
            for column, style, size, what in FIG3_CURVES:
                ax.plot(
                    sub.noise,
                    sub[column],
                    style,
                    color=PALETTE[i],
                    ms=size,
                    label=f"{FIG3_LABELS[model]}: {what}",
                )
        if task == "regression":
            ax.set_yscale("symlog", linthresh=0.01)
            ax.set_xlabel(r"label noise $\sigma_y$")
            ax.set_ylabel("MSE")
        else:
            ax.set_xlabel("label flip probability p")
            ax.set_ylabel("0-1 error")
        ax.set_title(f"Fig. 3: cluster model, {task}")
    # one legend for both panels, under them: inside, it covered the test errors' rise
    handles, labels = axes[0][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False, fontsize=6)
    return fig


def fig4(df):
    """Fig. 4: generalization gap against ||w||_2^2 and ||w||_1^2, with least-squares lines,
    for the closed-form fits (the paper's figure); two-layer Adam fits as crosses."""
    fig, axes = figure(1, 2, width=7.2, height=3.0)
    cf, adam = df[df.fit == "closed_form"], df[df.fit == "adam"]
    for ax, p, name in zip(axes[0], ("l2", "l1"), (r"$\|w\|_2^2$", r"$\|w\|_1^2$")):
        fit = linear_fit(cf[f"{p}_sq"], cf["gap"])
        xx = np.linspace(0, cf[f"{p}_sq"].max(), 50)
        ax.plot(
            xx,
            fit["slope"] * xx + fit["intercept"],
            color=PALETTE[3],
            lw=1,
            label=f"least-squares line, $R^2$ = {fit['r2']:.4f}",
        )
        ax.scatter(
            cf[f"{p}_sq"],
            cf["gap"],
            s=14,
            c=cf["sigma_y"],
            cmap="viridis",
            zorder=3,
            label="closed-form GaLU fits",
        )
        if len(adam) > 2:
            r2 = linear_fit(adam[f"{p}_sq"], adam["gap"])["r2"]
            ax.scatter(
                adam[f"{p}_sq"],
                adam["gap"],
                s=14,
                marker="x",
                color=PALETTE[1],
                zorder=4,
                label=f"both layers by Adam, $R^2$ = {r2:.2f}",
            )
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel(f"{name} (colour: $\\sigma_y$)")
        ax.set_ylabel("test MSE - train MSE")
        ax.set_title(f"Fig. 4: gap vs {name}")
        ax.legend(fontsize=6, loc="upper left")  # the gap grows to the right
    return fig


def lemma1(df):
    """Lemma 1: losses against m on D_1,0, and both distributions at m = d + 2."""
    fig, axes = figure(1, 2, width=7.4, height=3.1)
    ax = axes[0][0]
    sub = df[df.dist == "D_1,0"].sort_values("m")
    mm = np.linspace(sub.m.min(), sub.m.max(), 200)
    d = int(sub.d.iloc[0])
    ax.plot(sub.m, sub.train_mean, "o", color=PALETTE[0], label="train (MC)")
    ax.plot(mm, 1 - d / mm, color=PALETTE[0], lw=1, label=r"$\sigma^2 (1 - d/m)$")
    ax.plot(sub.m, sub.test_mean, "s", color=PALETTE[3], label="test (MC mean)")
    ax.plot(sub.m, sub.test_median, "x", color=PALETTE[4], label="test (MC median)")
    mm2 = mm[mm > d + 1.5]
    ax.plot(mm2, 1 + d / (mm2 - d - 1), color=PALETTE[3], lw=1, label="Lemma 1 test formula")
    ax.set_yscale("log")
    ax.set_xlabel("training set size m")
    ax.set_ylabel("loss")
    ax.set_title(f"Lemma 1 on $D_{{1,0}}$ (d = {d})")
    ax.legend(fontsize=6, loc="upper right")  # the losses meet towards the right
    ax = axes[0][1]
    edge = df[df.m == d + 2]
    x = np.arange(len(edge))
    for i, (col, label) in enumerate(
        (("train_mean", "train"), ("test_mean", "test (mean)"), ("test_median", "test (median)"))
    ):
        ax.bar(x + (i - 1) * 0.25, edge[col], width=0.25, color=PALETTE[i], label=label)
    ax.scatter(
        x + 0.0,
        edge.formula_test,
        marker="_",
        s=300,
        color="black",
        label="Lemma 1 (test)",
        zorder=3,
    )
    # the data's names (D_1,0, D_sigma,beta) as the paper writes them
    shown = {"D_1,0": r"$D_{1,0}$", "D_sigma,beta": r"$D_{\sigma,\beta}$"}
    ticks = [f"{shown.get(r.dist, r.dist)}\n($\\sigma$ = {r.sigma:g})" for r in edge.itertuples()]
    ax.set_xticks(x, ticks)
    ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.set_title(f"m = d + 2 = {d + 2}")
    ax.legend(fontsize=6, loc="upper right")  # over the small losses of the second data set
    return fig


def fig5(curves, mins, threshold: float, m: int, d: int):
    """Fig. 5: smallest width below the threshold against d', and the curves it is read from."""
    fig, axes = figure(1, 2, width=7.4, height=4.4)  # room for the legends under the panels
    ax = axes[0][0]
    k = mins.groupby("d_out")[list(FIG5_LABELS)].mean()
    for i, (col, label) in enumerate(FIG5_LABELS.items()):
        # markers and dashes keep coinciding curves visible
        ax.plot(
            k.index,
            k[col],
            ("o-", "s--", "D-", "^:")[i],
            color=PALETTE[i],
            ms=(8, 6, 3, 4)[i],
            mfc="none" if i == 0 else PALETTE[i],
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("output dimension d'")
    ax.set_ylabel(f"smallest k with MSE < {threshold}")
    ax.set_title(f"Fig. 5 (m = {m}, d = {d})")
    legend_below(ax)  # inside, it met the curves at d' = 4
    ax = axes[0][1]
    mean = curves.groupby(["d_out", "k"])[["galu", "relu"]].mean().reset_index()
    for j, dout in enumerate(sorted(mean.d_out.unique())):
        sub = mean[mean.d_out == dout]
        ax.plot(sub.k, sub.galu, "-", color=PALETTE[j], label=f"d′ = {dout}: GaLU")
        ax.plot(sub.k, sub.relu, "--", color=PALETTE[j], label=f"d′ = {dout}: ReLU")
    ax.set_xscale("log", base=2)
    ax.axhline(threshold, color="grey", lw=1)
    ax.set_xlabel("neurons k")
    ax.set_ylabel("training MSE")
    ax.set_title("Training MSE against width")
    legend_below(ax, ncol=2)  # inside, it covered the d′ = 2 GaLU curve
    return fig
