"""Tests for the figures of the low_rank_invariants chapter: each draws from small runs of the
task functions and returns a Figure with the expected panels, and the data the notebook saves
with it is not empty."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from implicit_bias.chapters.low_rank_invariants import analysis, figures, tasks

matplotlib.use("Agg")
torch.set_num_threads(1)

THEOREM2_CFG = {
    "lr_seeds": [0],
    "lr_synthetic_n": 30,
    "lr_synthetic_dim": 5,
    "lr_conv_length": 8,
    "lr_width_relu": 8,
    "lr_width_lin": 6,
    "lr_n_linear": 1,
    "lr_init": 0.1,
    "lr_eta": 0.05,
    "lr_steps": 60,
    "lr_records": 4,
    "lr_loss_floor": 1e-250,
    "mnist_n": 10,
    "mnist_width_relu": 4,
    "mnist_width_lin": 4,
    "mnist_init": 0.1,
    "mnist_eta": 0.5,
    "mnist_steps": 5,
    "conv_n": 30,
    "conv_steps": 60,
    "lr_deep_n_linear": 2,
    "lr_deep_init": 0.1,
    "lr_small_etas": [0.025],
}


@pytest.fixture(scope="module")
def traj():
    runs = [t for t in tasks.theorem2_tasks(THEOREM2_CFG) if t["run"] != "mnist"]  # no MNIST
    return analysis.trajectories(runs, [tasks.low_rank_run(t) for t in runs])


def _check(fig, n_axes):
    assert isinstance(fig, Figure) and len(fig.axes) == n_axes
    assert all(ax.has_data() for ax in fig.axes)
    plt.close(fig)


def test_theorem2_rank_one(traj):
    data = analysis.rank_one_data(traj, runs=("synthetic",))
    assert len(data["rank_one"]) > 0 and (data["rank_one"]["bound"] > 0).all()
    _check(figures.theorem2_rank_one(traj, runs=("synthetic",)), 2)


def test_theorem2_reduced_alignment(traj):
    data = analysis.reduced_alignment_data(traj)
    assert len(data["resfree"]) > 0 and data["conv"]["predicted_ratio"].notna().any()
    fig = figures.theorem2_reduced_alignment(traj)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert "conv kernel, layer 1" in labels  # in words, never the parameter's name "1.K"
    assert not any(".K" in label or ".W" in label for label in labels)
    _check(fig, 2)


def test_layer_and_step_names_are_words():
    assert figures.layer_name("1.K") == "conv kernel, layer 1"
    assert figures.layer_name("2") == figures.layer_name("2.W") == "dense, layer 2"
    assert figures.step_ticks([0.000625, 0.01, 2.5e-5]) == ["0.000625", "0.01", "2.5 × 10⁻⁵"]


def test_invariance_drift():
    inv = tasks.invariance_sweep(
        {
            "arch": "convolutional",
            "seed": 0,
            "width": 4,
            "n": 10,
            "T": 0.5,
            "steps": [20, 40],
            "n_records": 4,
        }
    )
    inv_rows = [dict(r, seed=0) for r in inv["rows"]]
    summary = analysis.drift_summary(inv_rows)
    data = analysis.drift_data(inv_rows, summary)
    assert set(data["group"]) <= set(analysis.DRIFT_GROUPS) and len(data) > 0
    assert set(figures.DRIFT_LABELS) == set(figures.DRIFT_COLORS) == set(analysis.DRIFT_GROUPS)
    _check(figures.invariance_drift(inv_rows, summary), 2)


def test_lemma1_tree():
    res = [tasks.lemma1_check({"arch": "fully connected", "seed": 0, "n": 3})]
    assert len(analysis.lemma1_tree_data(res)) == 3
    _check(figures.lemma1_tree(res), 1)


def test_theorem2_rates(traj):
    # the tiny runs stop far above the late-phase loss: give the snapshots late losses
    late = traj.assign(loss=10.0 ** -(11.0 + traj["step"]))
    rates = analysis.rank_one_rates(late)
    final = analysis.low_rank_final(late.to_dict("records"))
    steps = analysis.step_size_table(final)
    assert set(steps["eta"]) == {0.05, 0.025} and len(analysis.rate_data(late, rates)) > 0
    _check(figures.theorem2_rates(late, rates, steps), 2)
