"""Tests of the task functions of the chapter galu_expressivity (and of the task lists built from
a profile): what each returns on tiny problems, and how each is declared."""

from __future__ import annotations

import pytest
import torch

from implicit_bias.chapters.galu_expressivity import tasks
from implicit_bias.core.engine.data import DataError
from implicit_bias.core.engine.tasks import spec_of
from implicit_bias.models import galu

torch.set_num_threads(1)

TASK_FUNCTIONS = (
    tasks.fig1_task,
    tasks.theorem1_task,
    tasks.fig2_task,
    tasks.fig3_task,
    tasks.lemma1_task,
    tasks.fig4_task,
    tasks.fig5_task,
)


def test_task_functions_are_declared_with_one_thread_and_the_device():
    for fn in TASK_FUNCTIONS:
        spec = spec_of(fn)
        assert spec is not None, fn.__name__
        assert spec.threads == 1 and spec.uses_device, fn.__name__


def test_theorem1_small_case():
    # E[min L_S] = 1 - rank/m: Monte Carlo within 5 of its standard errors, for both gates and
    # for kd < m, kd = m, kd > m.
    for m, d, k, gate in [(30, 4, 3, "step"), (24, 4, 6, "sigmoid"), (20, 4, 8, "step")]:
        out = tasks.theorem1_task(
            {"m": m, "d": d, "k": k, "gate": gate, "seed": 1, "n_labels": 4000}
        )
        assert out["rank"] <= min(m, k * d)
        if out["formula"] > 0:
            assert abs(out["mc_mean"] - out["formula"]) < 5 * out["mc_se"]
        else:
            assert out["mc_mean"] < 1e-12  # round-off of ||y||^2 - ||P y||^2


def test_rank_bounded_by_active_points_for_step_gates():
    # A point whose k 0-1 gates are all closed has Phi(x) = 0, so rank <= #active points, and
    # the task's bound holds; in low dimension the active points do not bound the rank well:
    # d = 1 gives rank 2 with all 128 points active.
    out = tasks.theorem1_task({"m": 64, "d": 32, "k": 2, "gate": "step", "seed": 0, "n_labels": 10})
    assert out["m_active"] < 64 and out["rank"] <= out["m_active"]
    assert out["rank"] <= out["rank_bound"] < 64
    out = tasks.theorem1_task({"m": 128, "d": 1, "k": 8, "gate": "step", "seed": 0, "n_labels": 2})
    assert out["rank"] == out["rank_bound"] == 2 < min(out["m_active"], 8)
    out = tasks.theorem1_task(
        {"m": 64, "d": 32, "k": 2, "gate": "sigmoid", "seed": 0, "n_labels": 10}
    )
    assert out["rank"] == 64


def test_task_lists_follow_the_profile():
    cfg = {
        "fig1_datasets": ["mnist"],
        "fig1_k": [8, 16],
        "fig1_seeds": [0, 1],
        "fig1_n_train": 100,
        "fig1_n_test": 50,
        "pca_dim": 4,
        "fig1_epochs": 1,
        "fig1_lr": 0.01,
        "fig1_batch_size": 32,
    }
    runs = tasks.fig1_tasks(cfg, "cpu")
    assert len(runs) == 4 and all(r["models"] == list(galu.DEEP_MODELS) for r in runs)
    assert {r["device"] for r in runs} == {"cpu"}
    cfg = {
        "fig5_m": 32,
        "fig5_d": 4,
        "fig5_dout": [1, 2],
        "fig5_k": [[2, 4], [4, 8]],
        "fig5_seeds": [0, 1],
        "fig5_acs_iters": 5,
        "fig5_acs_tol": 1e-5,
        "fig5_acs_dout_max": 2,
        "relu_lr": 0.01,
        "adam_window": 10,
        "adam_tol": 1e-3,
        "adam_halvings": 1,
        "adam_max_steps": 100,
    }
    runs = tasks.fig5_tasks(cfg, "cpu")
    assert [(r["d_out"], r["k_grid"]) for r in runs][::2] == [(1, [2, 4]), (2, [4, 8])]
    cfg = {
        "fig3_m": 80,
        "fig3_m_test": 50,
        "fig3_d": 5,
        "fig3_n_clusters": 4,
        "fig3_k": 4,
        "fig3_sigma_x": 0.1,
        "fig3_sigma_y": [0.0, 0.5],
        "fig3_p": [0.0, 0.3],
        "fig3_seeds": [0],
        "relu_steps": 20,
        "relu_lr": 0.01,
        "fig4_sigma_y": [0.0, 1.0],
        "fig4_seeds": [0, 1],
        "adam_window": 10,
        "adam_tol": 1e-3,
        "adam_halvings": 1,
        "adam_max_steps": 100,
    }
    assert [r["noise"] for r in tasks.fig3_tasks(cfg, "cpu")] == [[0.0, 0.5], [0.0, 0.3]]
    assert [r["seed"] for r in tasks.fig4_tasks(cfg, "cpu")] == [0, 1]


def test_fig4_noise_is_drawn_afresh_per_level_and_seed():
    # Fig. 4's points must be independent draws: the noise of sigma_y = 1 is not twice that of
    # sigma_y = 0.5 (the earlier task reused one draw, which made R^2 close to 1 by
    # construction), and two seeds differ.
    base = {"m": 60, "m_test": 40, "d": 4, "n_clusters": 3, "k": 3, "sigma_x": 0.1}
    adam = {"adam_lr": 0.01, "adam_window": 10, "adam_tol": 1e-3, "adam_halvings": 1}
    runs = [
        tasks.fig4_task({**base, **adam, "noise": [0.0, 0.5, 1.0], "seed": s, "adam_max_steps": 0})
        for s in (0, 1)
    ]
    gaps = [[te - tr for tr, te in zip(r["galu_train_mse"], r["galu_test_mse"])] for r in runs]
    # one rescaled draw gives gap(1) - gap(0) = 4 (gap(0.5) - gap(0)) exactly
    g = gaps[0]
    assert abs((g[2] - g[0]) - 4 * (g[1] - g[0])) > 1e-3 * abs(g[2] - g[0])
    assert gaps[0] != gaps[1]
    out = tasks.fig4_task({**base, **adam, "noise": [0.0, 0.5], "seed": 0, "adam_max_steps": 5})
    assert out["status"] == "unconverged" and out["adam_steps"] == [5, 5]


def test_fig1_task_on_a_small_mnist_subset():
    task = {
        "dataset": "mnist",
        "k": 8,
        "seed": 0,
        "n_train": 600,
        "n_test": 200,
        "pca_dim": 16,
        "epochs": 4,
        "lr": 0.01,
        "batch_size": 64,
        "models": ["relu", "linear"],
        "device": "cpu",
    }
    try:
        out = tasks.fig1_task(task)
    except DataError as err:
        pytest.skip(f"MNIST is not available: {err}")
    assert set(out) == {"relu_test_acc", "relu_train_acc", "linear_test_acc", "linear_train_acc"}
    assert all(0 <= v <= 1 for v in out.values())
    assert out["relu_train_acc"] > 0.25  # above chance (0.1) after four short epochs
    assert tasks.fig1_task(task) == out  # seeded: the same task gives the same result


def test_fig5_task_equals_the_masked_batch_it_replaced():
    # Fig. 5's Adam fits train each width at its own size; the masked batch at the largest
    # width (the reference) is the same maths: the same stops and MSEs to round-off.
    task = {
        "m": 40,
        "d": 3,
        "d_out": 2,
        "k_grid": [2, 3, 5],
        "seed": 1,
        "acs_iters": 30,
        "acs_tol": 1e-5,
        "acs_dout_max": 2,
        "adam_lr": 0.01,
        "adam_window": 100,
        "adam_tol": 1e-3,
        "adam_halvings": 1,
        "adam_max_steps": 3000,
    }
    out = tasks.fig5_task(task)
    X, Y = galu.random_regression(40, 3, 2, 1, "cpu")
    g = torch.Generator().manual_seed(2)
    U = torch.zeros(3, 3, 5, dtype=torch.float64)
    for i, k in enumerate(task["k_grid"]):
        U[i, :, :k] = torch.randn(3, k, generator=g, dtype=torch.float64)
    acs = [galu.acs(X, Y, U[i, :, :k], 30, "step", 3, tol=1e-5) for i, k in enumerate([2, 3, 5])]
    assert out["galu_acs"] == [r["losses"][-1] for r in acs]
    for arch, name in (("galu", "galu_adam"), ("relu", "relu")):
        ref = galu.train_one_hidden_converged(
            X.expand(3, -1, -1),
            Y.expand(3, -1, -1),
            5,
            arch,
            [4] * 3,
            0.01,
            100,
            1e-3,
            1,
            3000,
            widths=[2, 3, 5],
            U=U if arch == "galu" else None,
        )
        assert out[f"{name}_steps"] == ref["steps"]
        assert out[f"{name}_converged"] == ref["converged"]
        assert out[name] == pytest.approx(ref["train_mse"], rel=1e-10)
