"""Figures of the warped_imd chapter (Azulay et al. 2021), one function per figure, each returning
a matplotlib Figure in the book's style (the notebook saves it with `ch.save_figure`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below, power_of_ten

# Theorem 2's cases in words (the profile names them for the program)
CASE_NAMES = {
    "delta_pos": r"$\delta > 0$",
    "delta_pos_large": r"$\delta > 0$, large",
    "delta_zero": r"$\delta = 0$",
    "delta_neg": r"$\delta < 0$",
    "sign_change": "sign change",
    "sign_change_small": "sign change, small",
}


def case_name(case: str) -> str:
    """A Theorem 2 case as the figures name it (an unknown case keeps its own name)."""
    return CASE_NAMES.get(case, case.replace("_", " "))


def hessian_map(df: pd.DataFrame):
    """Eq. (6): strip plot of the Hessian-map asymmetry per metric variant (log scale), one colour
    per delta; `df` is `analysis.hessian_map_frame`."""
    fig, ax = figure(1, 1, width=5.0, height=3.2)
    variants = [
        ("plain", "plain IMD\n$H^{-1}$"),
        ("warped", "warped\n$|a| H^{-1}$"),
        ("wrong_warp_a2", "wrong warp\n$a^2 H^{-1}$"),
    ]
    for i, (col, _) in enumerate(variants):
        for j, (delta, grp) in enumerate(df.groupby("delta")):
            x = i + 0.15 * (j - 1) + 0.03 * np.arange(len(grp)) / max(len(grp), 1)
            ax.scatter(
                x,
                np.maximum(grp[col], 1e-17),
                s=14,
                color=PALETTE[j],
                label=f"$\\delta$ = {power_of_ten(delta)}" if i == 0 else None,
            )
    ax.set_xticks(range(len(variants)), [lab for _, lab in variants])
    ax.set_yscale("log")
    ax.axhline(1e-12, color="grey", ls=":", lw=1)
    ax.set_ylabel("asymmetry max|$\\partial_k M_{ij} - \\partial_j M_{ik}$| / max|$\\partial M$|")
    ax.legend(fontsize=7, loc="center right")  # between the symmetric and asymmetric strips
    ax.set_title("Eq. (6): symmetry of $\\partial M$ (autograd, float64)", fontsize=9)
    return fig


def time_warping(res: dict, marks=(0.25, 0.5, 1.0, 2.0)):
    """Sec. 5. Left: gradient flow (time t) and the mirror flow of Q (time tau) in the
    beta-plane, with the points each reaches at the same clock readings `marks`. Right: the warp
    tau(t) and |a(t)|. `res` is the result of `task_time_warp`."""
    fig, axes = figure(1, 2, width=8.0, height=3.6)
    axes = np.ravel(axes)
    ax = axes[0]
    gf, mf = np.array(res["gf_beta"]), np.array(res["mf_beta"])
    ax.plot(gf[:, 0], gf[:, 1], color=PALETTE[0], lw=2.5, label="gradient flow, time $t$")
    ax.plot(
        mf[:, 0],
        mf[:, 1],
        color=PALETTE[1],
        lw=1.2,
        ls="--",
        label="mirror flow of $Q$, time $\\tau$",
    )
    t = np.array(res["time"])
    for m in marks:
        for path, col, mk in ((gf, PALETTE[0], "o"), (mf, PALETTE[1], "s")):
            p = [np.interp(m, t, path[:, j]) for j in range(2)]
            ax.plot(*p, mk, color=col, ms=5, mfc="none" if mk == "s" else col)
    x = np.array(res["X"])[0]
    yv = np.array(res["y"])[0]
    lim = np.array(res["limit"])
    direction = np.array([-x[1], x[0]]) / np.linalg.norm(x)
    line = lim[None] + np.linspace(-0.6, 0.6, 2)[:, None] * direction
    ax.plot(
        line[:, 0], line[:, 1], color="grey", lw=1, label=f"$\\langle x, \\beta\\rangle$ = {yv:.2f}"
    )
    ax.plot(*lim, "*", color="black", ms=9, label="argmin $Q$")
    ax.set_xlabel("$\\beta_1$")
    ax.set_ylabel("$\\beta_2$")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=6.5, loc="best")
    ax = axes[1]
    ax.plot(t, res["tau_of_t"], color=PALETTE[2], label="$\\tau(t) = \\int_0^t |a|$")
    ax.plot(t, t, color="grey", ls=":", lw=1, label="$\\tau = t$")
    ax.plot(t, np.abs(res["a_of_t"]), color=PALETTE[3], label="$|a(t)|$")
    ax.set_xlabel("gradient-flow time $t$")
    ax.set_ylabel("warped time $\\tau$, $|a|$")
    ax.legend(fontsize=7, loc="upper left")  # above tau(0) = 0, left of the curves' rise
    fig.suptitle(
        "Sec. 5: gradient flow and the warped mirror flow of $Q$ "
        "(marks at $t = \\tau$ = 0.25, 0.5, 1, 2)",
        fontsize=9,
    )
    return fig


def theorem2(df: pd.DataFrame, etas: list[float]):
    """Theorem 2. Left: GD error against the normalized step per case (dotted: gradient flow's
    error). Right: the gradient-flow limit's distance to the right Q-min and to each wrong
    variant. `df` is `analysis.theorem2_table`."""
    fig, axes = figure(1, 2, width=8.4, height=5.2)
    axes = np.ravel(axes)
    ax = axes[0]
    cols = [f"gd_err_eta{e:g}" for e in etas]
    for i, (case, grp) in enumerate(df.groupby("case", sort=False)):
        ax.plot(etas, grp[cols].max().to_numpy(), "o-", color=PALETTE[i], label=case_name(case))
        ax.axhline(grp["gf_err"].max(), color=PALETTE[i], ls=":", lw=1)
    e = np.array(sorted(etas))
    ax.plot(
        e,
        0.5 * df[cols].to_numpy().min() * e / e.min(),
        color="grey",
        ls="--",
        lw=1,
        label="slope 1",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="normalized GD step $\\eta$",
        ylabel="$\\|\\beta_{GD} - \\beta_Q\\| / \\|\\beta_Q\\|$ (worst seed)",
    )
    ax.set_title("GD (dots) and gradient flow (dotted)")
    # below the axes: inside, the legend would hide the dotted gradient-flow lines; two
    # columns, so it is no wider than its panel (wider, constrained layout gives up)
    legend_below(ax, ncol=2, offset=0.2)
    ax = axes[1]
    labels = ["gf_err", "wrong_unit_w0", "wrong_sigma_from_a0", "wrong_delta_zero"]
    names = ["right $Q$", "$w_0/\\|w_0\\|$", "$\\sigma$ = sign$(a_0)$", "$\\delta$ = 0"]
    width = 0.8 / len(labels)
    cases = list(dict.fromkeys(df["case"]))
    for j, (col, name) in enumerate(zip(labels, names)):
        vals = [max(df.loc[df["case"] == c, col].max(), 1e-17) for c in cases]
        ax.bar(np.arange(len(cases)) + (j - 1.5) * width, vals, width, color=PALETTE[j], label=name)
    # anchored at their right end, the rotated case names stay inside the figure
    ax.set_xticks(
        range(len(cases)),
        [case_name(c) for c in cases],
        rotation=45,
        ha="right",
        rotation_mode="anchor",
    )
    ax.set(yscale="log", ylabel="distance of the gradient-flow\nlimit (relative)")
    legend_below(ax, ncol=2, offset=0.42)  # under the turned case names
    ax.set_title("a variant equal to the right $Q$\nin a case has the same bar")
    fig.suptitle("Theorem 2: gradient descent and gradient flow against argmin $Q$")
    return fig


def anti_ntk(anti: list[dict], seeds: list[int], k: int):
    """Theorem 3: distance of the gradient-flow limit to min-L2 against the initialization
    scale eps (log-log), one line per problem; `anti` holds the results of `task_anti_ntk`."""
    fig, ax = figure(1, 1, width=4.6, height=3.3)
    for i, (seed, res) in enumerate(zip(seeds, anti)):
        ax.plot(
            res["eps"],
            res["dist_l2"],
            "o-",
            color=PALETTE[i % len(PALETTE)],
            label=f"problem {seed}: slope {res['slope']:.3f}",
        )
    eps = np.array(anti[0]["eps"])
    ax.plot(
        eps, eps * anti[0]["dist_l2"][0] / eps[0] / 2, color="grey", ls="--", lw=1, label="slope 1"
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="initialization scale $\\epsilon$",
        ylabel="$\\|\\beta_\\infty - X^+y\\| / \\|X^+y\\|$",
    )
    legend_below(ax, ncol=2)
    ax.set_title(f"Theorem 3: k = {k} neurons, initialization $\\times\\epsilon$", fontsize=9)
    return fig


def regimes(df: pd.DataFrame, theory: pd.DataFrame):
    """Sec. 7.2: distances to min-L2 and to the Mahalanobis (NTK) predictor against alpha at
    s = 1 (left) and against s at alpha = 1 (right); markers: gradient flow, lines: Q-min.
    Both for the first problem seed of `df` (`analysis.regimes_frame`; the claims use the worst
    seed); `theory` is `analysis.regime_theory` for that problem."""
    fig, axes = figure(1, 2, width=8.4, height=3.4)
    seed = df["seed"].iloc[0]
    df = df[df["seed"] == seed]
    specs = [
        ("alpha", "alpha", "scale $\\alpha$ (shape $s$ = 1)"),
        ("shape", "s", "shape $s$ (scale $\\alpha$ = 1)"),
    ]
    for ax, (sweep, xcol, xlabel) in zip(np.ravel(axes), specs):
        gf = df[df["sweep"] == sweep].groupby(xcol).max(numeric_only=True)
        th = theory[theory["sweep"] == sweep]
        ax.plot(th[xcol], th["q_dist_l2"], color=PALETTE[0], lw=1)
        ax.plot(th[xcol], th["q_dist_ntk"], color=PALETTE[1], lw=1)
        ax.plot(gf.index, gf["gf_dist_l2"], "o", color=PALETTE[0], label="to min-$\\ell_2$")
        ax.plot(gf.index, gf["gf_dist_ntk"], "s", color=PALETTE[1], label="to Mahalanobis (NTK)")
        if sweep == "alpha":
            z = df[df["sweep"] == "alpha_zero_output"].groupby(xcol).max(numeric_only=True)
            thz = theory[theory["sweep"] == "alpha_zero_output"]
            ax.plot(thz[xcol], thz["q_dist_ntk"], color=PALETTE[2], lw=1, ls="--")
            ax.plot(
                z.index, z["gf_dist_ntk"], "^", color=PALETTE[2], label="to NTK, $X\\beta_0 = 0$"
            )
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="relative distance")
        legend_below(ax, ncol=2)
    fig.suptitle(
        f"Sec. 7.2: gradient-flow limits (markers) and argmin $Q$ (lines), problem {seed}",
        fontsize=9,
    )
    return fig


def fig7_2(grids: list[tuple[str, dict]]):
    """Fig. 7.2: level sets of Q (solid) and of its quadratic model at beta0 (dashed), one panel
    per (title, grid) of `analysis.q_level_grids`: its first half (the shapes at alpha = 1) down
    the left column, its second half (the scales at s = 1) down the right one, so the figure
    keeps to two panels a row in three rows. Each panel keeps equal scales on its two axes
    (circles stay circles) by widening its data limits, not by shrinking its box."""
    rows = -(-len(grids) // 2)
    fig, axes = figure(rows, 2, height=3.0 * rows)
    for k, (title, g) in enumerate(grids):
        ax = axes[k % rows, k // rows]
        n = int(round(np.sqrt(len(g["q"]))))
        shape = (n, n)
        b1, b2 = g["b1"].reshape(shape), g["b2"].reshape(shape)
        levels = np.quantile(g["q"], [0.03, 0.1, 0.2, 0.35, 0.5, 0.7])
        ax.contour(
            b1,
            b2,
            g["q"].reshape(shape),
            levels=np.unique(levels),
            colors=PALETTE[0],
            linewidths=1.2,
        )
        ax.contour(
            b1,
            b2,
            g["quad"].reshape(shape),
            levels=np.unique(levels),
            colors=PALETTE[1],
            linewidths=0.9,
            linestyles="--",
        )
        ax.plot(*g["beta0"], "x", color="black", ms=5)
        ax.plot(0, 0, "+", color="grey", ms=6)
        ax.set_title(f"{title}, mismatch {g['quad_mismatch']:.2g}")
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_xlabel("$\\beta_1$")
        ax.set_ylabel("$\\beta_2$")
    fig.suptitle(
        "Fig. 7.2: $Q$ (solid) and its Mahalanobis model at $\\beta_0$ (dashed)\n"
        "left: the shape $s$ grows at $\\alpha$ = 1; right: the scale $\\alpha$ grows at $s$ = 1"
    )
    return fig
