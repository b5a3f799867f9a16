"""The figures of the tensor-networks chapter, one function each, drawn from the frames of
`implicit_bias.chapters.tensor_networks.analysis`; each returns the matplotlib Figure (the
notebook saves it with `Chapter.save_figure`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below

ARCH_COLOURS = {"diag": PALETTE[0], "conv": PALETTE[1], "fc": PALETTE[2]}
DEPTH_STYLES = ["-", "--", ":", "-."]


def run_style(run: str) -> dict:
    """Colour by architecture and line style by depth for a run label "<arch> L=<L>", so that
    every run of a seed (3 architectures x up to 4 depths) is drawn differently."""
    arch, depth = run.split(" L=")
    return {
        "color": ARCH_COLOURS[arch],
        "linestyle": DEPTH_STYLES[(int(depth) - 2) % len(DEPTH_STYLES)],
    }


def plot_by_group(
    ax,
    frame,
    x: str,
    y: str,
    group: str,
    floor: float = 1e-16,
    **kwargs,
) -> None:
    """One log-log line per run (`group` holds "<arch> L=<L>" labels, styled by `run_style`),
    the chapter's convergence plots; values below `floor` (exact zeros) are drawn at the
    floor, non-positive x are dropped."""
    for name, g in frame.groupby(group):
        keep = g[x] > 0
        ax.loglog(
            g[x][keep],
            g[y][keep].clip(lower=floor),
            label=run_name(name),
            **run_style(name),
            **kwargs,
        )


ARCH_NAMES = {"diag": "diagonal", "conv": "convolutional", "fc": "fully connected"}


def run_name(run: str) -> str:
    """A run label "<arch> L=<L>" in words: "diag L=2" is "diagonal, L = 2"."""
    arch, depth = run.split(" L=")
    return f"{ARCH_NAMES.get(arch, arch)}, L = {depth}"


def cases_of(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """The cases (architecture, depth) of the runs in `frame`, in the order of `by_case`'s
    columns."""
    return sorted({(a, int(L)) for a, L in zip(frame["arch"], frame["L"])})


def case_labels(cases: list[tuple[str, int]], short: bool = False) -> list[str]:
    """Tick labels of the cases: "diagonal / L = 2", or abbreviated "diag / L=2" where nine
    share a half-width panel (in words they would not fit unturned)."""
    if short:
        return [f"{a}\nL={L}" for a, L in cases]
    return [f"{ARCH_NAMES.get(a, a)}\nL = {L}" for a, L in cases]


def by_case(
    ax,
    frame: pd.DataFrame,
    value: str,
    seed: str,
    cases: list[tuple[str, int]],
    offset: float = 0.0,
    **style,
) -> None:
    """Each run's `value` as a point over its case (one column of points per case of `cases`),
    the seeds spread a little sideways so that they do not hide each other, the column moved by
    `offset` (several quantities side by side)."""
    seeds = sorted(set(frame[seed]))
    spread = np.linspace(-0.07, 0.07, len(seeds)) if len(seeds) > 1 else np.zeros(1)
    x = [
        cases.index((a, int(L))) + offset + spread[seeds.index(s)]
        for a, L, s in zip(frame["arch"], frame["L"], frame[seed])
    ]
    ax.scatter(x, frame[value], **style)


def thm1_residuals(paths: pd.DataFrame, cls: pd.DataFrame, seed: int):
    """Thm 1: the singular-vector residual along training (runs of `seed`), and the final
    residual of every run from both estimates of u_inf."""
    fig, axes = figure(1, 2, width=8.5, height=4.2)
    axes = axes.ravel()
    plot_by_group(axes[0], paths[paths["seed"] == seed], "step", "residual", "run")
    axes[0].set(
        xlabel="GD step",
        ylabel="residual (relative)",
        title="Theorem 1: residual along training",
    )
    legend_below(axes[0], ncol=2)
    cases = cases_of(cls)
    for k, (column, name, offset) in enumerate(
        (
            ("thm1_kkt_residual", "u from multipliers", -0.18),
            ("thm1_uavg_residual", "averaged u", 0.18),
        )
    ):
        by_case(axes[1], cls, column, "data_seed", cases, offset, s=9, color=PALETTE[k], label=name)
    axes[1].set_yscale("log")
    axes[1].set_xticks(range(len(cases)), case_labels(cases, short=True))
    axes[1].set(
        ylabel="final residual",
        title=r"Theorem 1: two estimates of $u_\infty$",
    )
    legend_below(axes[1], ncol=2)
    return fig


def cor123_convergence(curves: pd.DataFrame, seed: int):
    """Cor 1-3: 1 - cos between GD's predictor and its reference against the step and
    against log(1 / loss) (runs of `seed`)."""
    fig, axes = figure(1, 2, width=8.0, height=3.8)  # room for the legend under both
    axes = axes.ravel()
    for ax, x in zip(axes, ("step", "log_inv_loss")):
        plot_by_group(ax, curves[curves["seed"] == seed], x, "cosine_gap", "run")
    axes[0].set_xlabel("GD step")
    axes[1].set_xlabel("log(1 / loss)")
    for ax in axes:
        ax.set_ylabel(r"$1 - \cos(\beta$, reference)")
    axes[0].set_title("Cor. 1-3: direction vs. max-margin reference")
    # one legend for both panels, under them: inside, it covered the deeper runs' late curves
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False, fontsize=7)
    return fig


def cor3_fourier_spectra(spectra: pd.DataFrame, seed: int):
    """Cor 3: the sorted, normalized Fourier magnitudes of the predictors (runs of `seed`)."""
    fig, ax = figure(1, 1, width=5.0, height=4.4)  # room for the legend under the panel
    plot_by_group(ax, spectra[spectra["seed"] == seed], "rank", "magnitude", "run", floor=1e-12)
    ax.set_xscale("linear")
    ax.set_xlabel("rank of the Fourier coefficient (sorted by magnitude)")
    # still in code notation: its baselines are per CPU vendor (its data differ by vendor)
    ax.set_ylabel(r"$|F\beta|_j / \max_j |F\beta|_j$")
    ax.set_title("Cor. 3: Fourier spectra of the learned predictors")
    legend_below(ax, ncol=3)  # inside, it covered the convolutional runs' drop
    return fig


def lemma4_hl(curves: pd.DataFrame, ode: pd.DataFrame):
    """Lemma 4 / Thm 5: the closed forms h_L^{-1} and H_L (lines) with the ODE's values
    (dots), and t^2 / 2 for comparison."""
    fig, axes = figure(1, 2, width=8.0)
    axes = axes.ravel()
    for i, (L, g) in enumerate(curves.groupby("L")):
        axes[0].plot(g["t"], g["h_inverse"], label=f"L = {L}", color=PALETTE[i])
        axes[1].plot(g["t"], g["H_L"], label=f"L = {L}", color=PALETTE[i])
        at_L = ode[ode["L"] == L]
        axes[0].plot(at_L["h_ode"], at_L["tau"], "o", ms=3, color=PALETTE[i])
        axes[1].plot(at_L["h_ode"], at_L["H_ode"], "o", ms=3, color=PALETTE[i])
    grid = curves.loc[curves["L"] == curves["L"].iloc[0], "t"].to_numpy()
    axes[1].plot(grid, grid**2 / 2, "k:", lw=1, label=r"$t^2 / 2$")
    axes[0].set(
        xlabel="t",
        ylabel=r"$h_L^{-1}(t)$",
        title=r"Lemma 4: $h_L^{-1}$ (dots: ODE)",
        xlim=(-6, 6),
        ylim=(-2, 2),
    )
    axes[1].set(
        xlabel="t",
        ylabel=r"$H_L(t)$",
        title=r"Thm 5: $H_L$ (dots: ODE)",
        xlim=(-6, 6),
        ylim=(0, 12),
    )
    axes[1].legend(loc="upper center")  # between the branches of t^2 / 2
    return fig


FORMULA_LABELS = {
    "error_derived": r"derived (Cor 5; Cor 6 with $d^{-(L-1)/2}$)",
    "error_thm5_printed": r"Thm 5 as printed ($\alpha L$)",
    "error_cor6_printed": "Cor 6 as printed, unitary F",
    "error_cor6_printed_unnormalized": r"Cor 6 as printed, $\sqrt{d}\,F$",
}


def thm5_argument(bars: pd.DataFrame):
    """Thm 5 / Cor 5 / Cor 6: each run's relative distance from its GD limit to the
    Q-minimizer of each formula (`analysis.argument_errors`)."""
    fig, ax = figure(1, 1, width=5.0, height=4.6)
    # the derived form on the left of each case, the forms as printed on the right; the
    # unnormalized-DFT reading of Cor 6 is drawn over the derived form, which it equals
    places = {
        "error_derived": ("o", 30, -0.18),
        "error_cor6_printed_unnormalized": ("x", 40, -0.18),
        "error_thm5_printed": ("o", 30, 0.18),
        "error_cor6_printed": ("o", 30, 0.18),
    }
    cases = cases_of(bars)
    for i, (formula, g) in enumerate(bars.groupby("formula")):
        marker, size, offset = places.get(formula, ("o", 30, 0.0))
        by_case(
            ax,
            g,
            "relative_error",
            "seed",
            cases,
            offset,
            label=FORMULA_LABELS.get(formula, formula),
            color=PALETTE[i],
            marker=marker,
            s=size,
        )
    ax.set_yscale("log")
    # abbreviated ticks and a one-column legend: drawn 5 inches wide, the figure fits a phone
    # at 9 CSS px text (at 6.5 inches it needed 468 px and ran 94 px past a 390 px screen)
    ax.set_xticks(range(len(cases)), case_labels(cases, short=True))
    legend_below(ax, ncol=1, offset=0.16)
    ax.set_ylabel("rel. distance to Q-minimizer")
    ax.set_title("Thm 5 / Cor 5 / Cor 6: GD limit vs. Q-minimizers")
    return fig


def cor5_alpha_sweep(theory: pd.DataFrame, gd: pd.DataFrame, depths: Sequence[int]):
    """Cor 5: distances of the limit to the min-l1 and min-l2 interpolators against alpha;
    lines: the Q_{L,alpha}-minimizer, markers: GD limits."""
    fig, axes = figure(1, 2, width=8.0, height=3.6)  # room for the legend under the panel
    axes = axes.ravel()
    names = ("min-$\\ell_1$", "min-$\\ell_2$")
    for ax, col, name in zip(axes, ("distance_l1", "distance_l2"), names):
        for i, L in enumerate(depths):
            t, g = theory[theory["L"] == L], gd[gd["L"] == L]
            ax.loglog(t["alpha"], t[col].clip(lower=1e-9), color=PALETTE[i], label=f"Q, L = {L}")
            ax.loglog(
                g["alpha"], g[col].clip(lower=1e-9), "o", color=PALETTE[i], label=f"GD, L = {L}"
            )
        ax.set(
            xlabel="initialization scale α",
            ylabel=f"relative distance to {name}",
            title=f"Cor. 5: limit vs. {name} interpolator",
        )
    legend_below(axes[0], ncol=3)  # inside, it met the deepest runs at small alpha
    return fig
