"""The figures of the separable_max_margin chapter (Soudry et al. 2018): one function per
figure, each returning a matplotlib Figure (saving, with the figure's data and provenance, is
`Chapter.save_figure`'s job), and the tables of the numbers each one plots."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from implicit_bias.core.site.plotting import PALETTE, figure, legend_below, power_of_ten

OPTIMIZER_COLOR = {"GD": PALETTE[0], "GDMO": PALETTE[1], "Adam": PALETTE[2]}


def figure1_data(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The numbers of the Figure 1 panels: one seed of the paper's data, GD and GDMO."""
    rows = frame[(frame["experiment"] == "figure1_logistic") & (frame["seed"] == seed)]
    return rows[
        ["optimizer", "t", "w_0", "w_1", "norm", "train_loss", "angle_gap", "margin_gap", "dist"]
    ].reset_index(drop=True)


def figure1(data: pd.DataFrame, X: np.ndarray, y: np.ndarray, w_hat: np.ndarray) -> Figure:
    """The paper's Figure 1: (A) the data, the max-margin separator and GD's direction at the
    last step; (B) ||w(t)||, normalized to 1 at the last step; (C) the training loss;
    (D) the angle gap 1 - cos; (E) the margin gap."""
    fig, axes = figure(nrows=1, ncols=5, width=15, height=3.2)
    axes = axes.ravel()
    ax = axes[0]
    positive, negative = X[y == 1], X[y == -1]
    ax.scatter(positive[:, 0], positive[:, 1], marker="+", color="k", s=40)
    ax.scatter(negative[:, 0], negative[:, 1], marker="o", edgecolors="k", facecolors="none", s=30)
    grid = np.linspace(-3.5, 3.5, 2)
    ax.plot(grid, -w_hat[0] / w_hat[1] * grid, color="k", label="max margin")
    gd = data[data["optimizer"] == "GD"]
    t_last = gd["t"].max()
    ax.set_xlim(-3.5, 3.5)
    ax.set_ylim(-3.5, 3.5)
    ax.set_title(f"(A) data, separators at t = {power_of_ten(t_last)}")
    panels = [
        ("norm", r"(B) $\|w(t)\| / \|w(T)\|$", "semilogx"),
        ("train_loss", "(C) training loss", "loglog"),
        ("angle_gap", r"(D) angle gap $1 - \cos$", "loglog"),
        ("margin_gap", "(E) margin gap", "loglog"),
    ]
    for optimizer, rows in data.groupby("optimizer", sort=False):
        color = OPTIMIZER_COLOR[optimizer]
        for ax, (column, title, scale) in zip(axes[1:], panels):
            values = rows[column] / (rows[column].iloc[-1] if column == "norm" else 1.0)
            getattr(ax, scale)(rows["t"], values, color=color, label=optimizer)
            ax.set_title(title)
            ax.set_xlabel("t")
    last = gd[gd["t"] == t_last].iloc[0]
    direction_line(
        axes[0],
        np.array([last["w_0"], last["w_1"]]),
        color=PALETTE[0],
        ls="--",
        label="GD at t = T",
    )
    legend_below(axes[0], ncol=2)  # inside, it covered the separators
    axes[1].legend(loc="upper left")  # the norms start at 0 and end at 1, bottom left to top right
    return fig


def direction_line(ax, w: np.ndarray, **kwargs) -> None:
    """The separator orthogonal to w through the origin."""
    grid = np.linspace(-3.5, 3.5, 2)
    ax.plot(grid, -w[0] / w[1] * grid, **kwargs)


def rates_data(frame: pd.DataFrame) -> pd.DataFrame:
    """The predicted-constant ratios over time on the generic data (mean over seeds)."""
    columns = [
        "residual_error",
        "direction_constant_ratio",
        "margin_constant_ratio",
        "loss_constant_ratio",
    ]
    rows = frame[frame["experiment"].str.startswith("generic")]
    return rows.groupby(["experiment", "optimizer", "t"], sort=False)[columns].mean().reset_index()


def rates(data: pd.DataFrame) -> Figure:
    """The rates of the theorem with their constants predicted from the SVM: each ratio tends to
    1 (the residual's distance to w_tilde to 0)."""
    fig, axes = figure(nrows=1, ncols=4, width=14, height=3.2)
    axes = axes.ravel()
    titles = {
        "residual_error": r"$\|\rho(t) - \tilde w\| / \|\tilde w\|$",
        "direction_constant_ratio": r"distance $\times \|w\|$ / predicted",
        "margin_constant_ratio": r"margin gap $\times \|w\|$ / predicted",
        "loss_constant_ratio": r"$L(w)\, \eta t / \|\hat w\|^2$",
    }
    styles = {"generic_logistic": "-", "generic_exp": "--"}
    for (experiment, optimizer), rows in data.groupby(["experiment", "optimizer"], sort=False):
        for ax, (column, title) in zip(axes, titles.items()):
            plot = ax.loglog if column == "residual_error" else ax.semilogx
            plot(
                rows["t"],
                rows[column],
                styles[experiment],
                color=OPTIMIZER_COLOR[optimizer],
                label=f"{optimizer}, {experiment.removeprefix('generic_')} loss",
            )
            ax.set_title(title)
            ax.set_xlabel("t")
    for ax in axes[1:]:
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylim(0.0, 2.0)
    legend_below(axes[0], ncol=2)  # inside, it covered GDMO's early peak
    return fig


def validation_data(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[(frame["experiment"] == "generic_logistic") & (frame["optimizer"] == "GD")]
    return rows.groupby("t")[["val_loss", "val_error", "train_loss"]].mean().reset_index()


def validation(data: pd.DataFrame) -> Figure:
    """Sec. 3: the held-out loss rises (like log t) while the held-out error settles."""
    fig, axes = figure(nrows=1, ncols=2, width=9, height=3.2)
    axes = axes.ravel()
    axes[0].semilogx(data["t"], data["val_loss"], color=PALETTE[0], label="validation loss")
    axes[0].set_title("mean validation loss")
    axes[1].semilogx(data["t"], data["val_error"], color=PALETTE[1])
    axes[1].set_title("validation error")
    for ax in axes:
        ax.set_xlabel("t")
    return fig


def optimizers_data(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[frame["experiment"] == "figure1_x2_scaled_logistic"]
    return rows.groupby(["optimizer", "t"], sort=False)[["dist", "angle_gap"]].mean().reset_index()


def optimizers(data: pd.DataFrame) -> Figure:
    """The paper's Adam experiment: the distance of w(t)/||w(t)|| to the max-margin direction
    for GD, GDMO and Adam on Figure 1's data with x2 multiplied by 20 (mean over seeds)."""
    fig, ax = figure(width=5, height=3.4)
    for optimizer, rows in data.groupby("optimizer", sort=False):
        ax.loglog(rows["t"], rows["dist"], color=OPTIMIZER_COLOR[optimizer], label=optimizer)
    ax.set_xlabel("t")
    ax.set_ylabel(r"$\| w / \|w\| - \hat w / \|\hat w\| \|$")
    ax.legend(loc="lower left")  # the distances fall towards the right
    return fig
