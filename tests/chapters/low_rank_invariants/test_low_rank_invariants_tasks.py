"""Tests for the task functions of the low_rank_invariants chapter (Le & Jegelka, 2022) and the
task lists the notebook sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.low_rank_invariants import analysis, tasks
from implicit_bias.core.engine.tasks import spec_of

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
    "conv_n": 20,
    "conv_steps": 70,
    "lr_deep_n_linear": 2,
    "lr_deep_init": 0.2,
    "lr_small_etas": [0.025],
}


@pytest.mark.parametrize("arch", list(tasks.lemma1_architectures()))
def test_lemma1_check(arch):
    r = tasks.lemma1_check({"arch": arch, "seed": 0, "n": 5})
    assert r["max_rel_err_tree"] < 1e-12 and r["max_rel_err_same_tree_rescaled"] < 1e-12
    assert r["tree_changed_by_sign_flip"]
    assert set(r["tree_weights"]) <= {-1.0, 1.0}
    assert r["n_paths"] >= 48


@pytest.mark.parametrize("arch", list(tasks.lemma1_architectures()))
def test_lemma1_rescaled_check_can_fail(arch, monkeypatch):
    """If the h fed to the original tree did not carry the new magnitudes (a tree that only
    works for the weights it was built from would pass the same way), f' = T(h') must fail."""
    real = tasks.path_enumeration
    first: list = []

    def stale_h(g, paths, x):
        first.append(g)
        return real(first[0], paths, x)  # always the first (original) network's weights

    monkeypatch.setattr(tasks, "path_enumeration", stale_h)
    r = tasks.lemma1_check({"arch": arch, "seed": 0, "n": 5})
    assert r["max_rel_err_tree"] < 1e-12  # the original network is still right
    assert r["max_rel_err_same_tree_rescaled"] > 1e-3
    results = [dict(r, status="ok")]
    assert analysis.lemma1_metrics(results)["lemma1_sign_determined"] is False


def test_invariance_sweep_slopes_small():
    task = {
        "arch": "fully connected",
        "seed": 0,
        "width": 6,
        "n": 20,
        "T": 1.0,
        "steps": [100, 200],
        "n_records": 10,
    }
    rows = [dict(r, seed=0) for r in tasks.invariance_sweep(task)["rows"]]
    summary = analysis.drift_summary(rows)
    lin = summary.query("group in ['lemma2', 'theorem1_linear', 'lemma3']")
    assert len(lin) > 0 and lin["slope"].between(0.8, 1.2).all()
    assert (summary.query("group == 'lemma4'")["ratio_small_to_large"] > 0.8).all()


def test_low_rank_run_small():
    task = {
        "run": "synthetic",
        "data": "synthetic",
        "kind": "fc",
        "n": 30,
        "seed": 0,
        "dim": 5,
        "length": 8,
        "width_relu": 8,
        "width_lin": 6,
        "n_linear": 1,
        "init": 0.1,
        "eta": 0.05,
        "steps": 400,
        "n_records": 6,
        "loss_floor": 1e-250,
    }
    out = tasks.low_rank_run(task)
    rows = [dict(r, run="synthetic", seed=0) for r in out["rows"]]
    final = analysis.low_rank_final(rows)
    hidden = final[(final["act"] == "linear") & (final["gap_bound"] > 0)]
    assert len(hidden) == 1
    first = [r for r in rows if r["step"] == 0 and r["layer"] == hidden["layer"].iloc[0]][0]
    assert hidden["ratio"].iloc[0] > first["ratio"]
    assert (final["gap_over_bound_max"].dropna() <= 1.0).all()
    conv = tasks.low_rank_run(dict(task, kind="conv", steps=50))
    assert any(np.isfinite(r["predicted_ratio"]) for r in conv["rows"])


def test_low_rank_run_status_says_whether_the_floor_was_reached():
    task = {
        "run": "synthetic",
        "data": "synthetic",
        "kind": "fc",
        "n": 20,
        "seed": 0,
        "dim": 4,
        "length": 8,
        "width_relu": 6,
        "width_lin": 4,
        "n_linear": 1,
        "init": 0.1,
        "eta": 0.05,
        "steps": 30,
        "n_records": 4,
        "loss_floor": 1e-250,
    }
    capped = tasks.low_rank_run(task)  # 30 steps cannot reach 1e-250
    assert capped["status"] == "unconverged" and capped["final_step"] == 30
    assert not analysis.reached_floor(task, capped)
    # a floor just above the loss of an earlier snapshot is reached before the limit
    step, loss = [(r["step"], r["loss"]) for r in capped["rows"] if 0 < r["step"] < 30][-1]
    floor = dict(task, loss_floor=loss * (1 + 1e-9))
    done = tasks.low_rank_run(floor)
    assert done["status"] == "ok" and done["final_step"] <= step < 30
    assert analysis.reached_floor(floor, done)


def test_theorem2_tasks():
    runs = tasks.theorem2_tasks(THEOREM2_CFG)
    assert [t["run"] for t in runs] == [
        "synthetic",
        "mnist",
        "resfree",
        "conv",
        "synthetic_deep",
        "synthetic eta=0.025",
    ]
    assert runs[1]["data"] == "mnist" and runs[1]["steps"] == 5 and runs[2]["n_linear"] == 1
    assert (runs[3]["n"], runs[3]["steps"], runs[0]["n"]) == (20, 70, 30)
    assert {t["device"] for t in runs} == {"cpu"}
    deep, small = runs[4], runs[5]
    assert (deep["n_linear"], deep["init"], deep["eta"]) == (2, 0.2, 0.05)
    assert (small["eta"], small["steps"], small["init"]) == (0.025, 120, 0.1)
    # the new runs differ from the synthetic run only where they should
    differs = {k for k in runs[0] if runs[0][k] != small[k]}
    assert differs == {"run", "eta", "steps"}


def test_lemma1_and_invariance_task_lists():
    cfg = {
        "lemma1_seeds": [0, 1],
        "lemma1_inputs": 7,
        "inv_seeds": [3],
        "inv_width": 6,
        "inv_n": 20,
        "inv_time": 4.0,
        "inv_steps": [200, 400],
        "inv_records": 5,
    }
    lemma1 = tasks.lemma1_tasks(cfg)
    assert len(lemma1) == 2 * len(tasks.lemma1_architectures())
    assert lemma1[:2] == [
        {"arch": "fully connected", "seed": 0, "n": 7},
        {"arch": "fully connected", "seed": 1, "n": 7},
    ]
    inv = tasks.invariance_tasks(cfg, device="cpu")
    assert [t["arch"] for t in inv] == list(tasks.invariance_architectures(6))
    assert inv[0] == {
        "arch": "fully connected",
        "seed": 3,
        "width": 6,
        "n": 20,
        "T": 4.0,
        "steps": [200, 400],
        "n_records": 5,
        "device": "cpu",
    }


@pytest.mark.parametrize(
    "fn,uses_device",
    [(tasks.lemma1_check, False), (tasks.invariance_sweep, True), (tasks.low_rank_run, True)],
)
def test_task_declarations_and_single_thread(fn, uses_device):
    spec = spec_of(fn)
    assert spec is not None and spec.threads is None and spec.uses_device == uses_device
    seen = []
    pinned = tasks.single_thread(lambda: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    pinned()
    assert seen == [1] and torch.get_num_threads() == before


def test_separable_data_synthetic_is_separable():
    x, y = tasks.separable_data("synthetic", 40, seed=0, shape=(5,))
    assert x.shape == (40, 5) and set(y.tolist()) <= {-1.0, 1.0}
    x2, y2 = tasks.separable_data("synthetic", 40, seed=0, shape=(5,))
    assert torch.equal(x, x2) and torch.equal(y, y2)
