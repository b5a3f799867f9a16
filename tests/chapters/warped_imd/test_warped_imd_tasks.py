"""Tests of the warped_imd chapter's tasks (Azulay et al. 2021): the training loops against the
closed forms of implicit_bias.models.fully_connected on small problems, each task function on a
small task, and the task lists the notebook sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.warped_imd import tasks
from implicit_bias.core.chapter import load_profile
from implicit_bias.core.engine.tasks import spec_of
from implicit_bias.models import fully_connected as fc

torch.set_num_threads(1)
TASKS = [
    "task_hessian_map",
    "task_time_warp",
    "task_theorem2",
    "task_balanced",
    "task_anti_ntk",
    "task_leaky",
    "task_regimes",
    "task_regimes_implicit",
    "task_leaky_negative",
    "task_relu",
]


@pytest.fixture(scope="module")
def problem():
    X, y = fc.random_regression(4, 9, seed=3)
    u = np.random.default_rng(4).standard_normal(9)
    return X, y, u


@pytest.mark.parametrize("s", [3.0, 1.0, 0.6])
def test_gradient_flow_and_descent_reach_theorem2(s, problem):
    X, y, u = problem
    a0, w0 = fc.init_from_scale_shape(1.5, s, u)
    delta = a0**2 - w0 @ w0
    size = [np.linalg.norm(fc.q_min_single_neuron(X, y, w0, delta, 1.0).beta)]
    gf = tasks.train_single_neuron(X, y, [a0], [w0], 0.5, method="rk4", beta_scale=size)
    sigma = float(np.sign(gf["a"][0]))
    theory = fc.q_min_single_neuron(X, y, w0, delta, sigma).beta
    assert np.linalg.norm(gf["beta"][0] - theory) < 1e-5 * np.linalg.norm(theory)
    gd = tasks.train_single_neuron(
        X, y, [a0, a0], [w0, w0], np.array([0.4, 0.2]), beta_scale=size * 2
    )
    errs = np.linalg.norm(gd["beta"] - theory, axis=1)
    assert errs[1] < errs[0] / 1.6  # first-order discretization bias: halves with the step


def test_sign_change_needs_sigma_of_the_limit(problem):
    X, y, _ = problem
    # against X^+ y, plus a null-space part (else both signs give the same point)
    a0, w0 = fc.init_from_scale_shape(0.5, 0.3, fc._orientation(X, y, 0, anti_aligned=True))
    delta = a0**2 - w0 @ w0
    gf = tasks.train_single_neuron(X, y, [a0], [w0], 0.5, method="rk4", beta_scale=[3.0])
    assert gf["sign_changed"][0] and gf["a"][0] < 0
    right = fc.q_min_single_neuron(X, y, w0, delta, -1.0).beta
    wrong = fc.q_min_single_neuron(X, y, w0, delta, 1.0).beta
    assert np.linalg.norm(gf["beta"][0] - right) < 1e-5 * np.linalg.norm(right)
    assert np.linalg.norm(gf["beta"][0] - wrong) > 1e-2 * np.linalg.norm(right)


def test_multi_neuron_balanced_and_generic(problem):
    out = tasks.task_balanced(
        {
            "n": 4,
            "d": 9,
            "k": 3,
            "seed": 2,
            "scale": 0.8,
            "etas": [0.5],
            "gf_eta": 0.5,
            "device": "cpu",
        }
    )
    assert out["gf_err"] < 1e-5
    assert out["generic_identity_err"] < 1e-8  # beta_inf = X^+ y + P_perp W0^T a_inf, always
    assert out["generic_err_vs_prop1"] > 1e-2  # Prop. 1 needs strict balance


def test_leaky_relu_limit_is_the_affine_q_min(problem):
    np.testing.assert_allclose(
        fc.leaky_relu_inverse(np.array([-0.2, 0.0, 3.0]), 0.25), [-0.8, 0.0, 3.0]
    )
    out = tasks.task_leaky(
        {
            "n": 4,
            "d": 9,
            "seed": 2,
            "rhos": [0.5],
            "alpha": 1.0,
            "s": 2.0,
            "etas": [0.5],
            "gf_eta": 0.5,
            "device": "cpu",
        }
    )["rows"][0]
    assert out["kkt_residual_gf"] < 1e-5 and out["gf_err"] < 1e-5
    assert out["negative_preactivations"] > 0  # the nonlinearity was actually used
    assert out["linear_label_err"] > 1e-2  # treating the unit as linear is wrong


def test_time_warp_same_points_different_speeds():
    out = tasks.task_time_warp(
        {"alpha": 0.5, "s": 2.0, "seed": 0, "end": 3.0, "dt": 5e-3, "n_plot": 20}
    )
    assert out["same_tau_gap_rel"] < 1e-8
    assert out["same_time_gap_rel"] > 0.05
    with pytest.raises(ValueError, match="clock"):
        fc.gradient_flow_path(np.ones((1, 2)), np.ones(1), 1.0, np.ones(2), 1.0, 0.1, clock="s")


def test_anti_ntk_distance_is_linear_in_the_scale():
    out = tasks.task_anti_ntk(
        {"n": 4, "d": 9, "k": 2, "seed": 0, "eps": [0.1, 0.01], "gf_eta": 0.5, "device": "cpu"}
    )
    assert 0.9 < out["slope"] < 1.1 and out["dist_l2"][-1] < 1e-2


def test_unknown_integrator_raises(problem):
    X, y, u = problem
    with pytest.raises(ValueError, match="valid"):
        tasks.train_single_neuron(X, y, [1.0], [u], 0.1, method="leapfrog")


def test_training_rejects_an_unknown_device(problem):
    X, y, u = problem
    with pytest.raises(ValueError, match="unknown device"):
        tasks.train_single_neuron(X, y, [1.0], [u], 0.1, device="tpu")
    with pytest.raises(ValueError, match="unknown device"):
        tasks.train_multi_neuron(X, y, [[1.0]], [[u]], 0.1, device="tpu")


def test_task_functions_are_declared():
    for name in TASKS:
        spec = spec_of(getattr(tasks, name))
        assert spec is not None and spec.threads == 1, name
        # the tasks that train networks read the run's device, the two numpy-only ones do not
        numpy_only = ("task_hessian_map", "task_time_warp", "task_regimes_implicit")
        assert spec.uses_device == (name not in numpy_only), name


@pytest.mark.parametrize("profile", ["smoke", "paper"])
def test_task_lists_are_those_of_the_profile(profile):
    """The task lists are the ones the chapter's sweeps cached (the sweep adds the device)."""
    cfg = load_profile("warped_imd", profile)
    problem = {"n": cfg["n"], "d": cfg["d"]}
    seeds = cfg["seeds"]
    assert tasks.theorem2_tasks(cfg) == [
        {
            **problem,
            "seed": s,
            "cases": cfg["theorem2_cases"],
            "etas": cfg["gd_etas"],
            "gf_eta": cfg["gf_eta"],
        }
        for s in seeds
    ]
    mn = {**problem, "k": cfg["k_neurons"], "gf_eta": cfg["gf_eta"]}
    assert tasks.balanced_tasks(cfg) == [
        {**mn, "seed": s, "scale": cfg["balanced_scale"], "etas": cfg["gd_etas"]} for s in seeds
    ]
    assert tasks.anti_ntk_tasks(cfg) == [
        {**mn, "seed": s, "eps": cfg["anti_ntk_eps"]} for s in seeds
    ]
    assert tasks.leaky_tasks(cfg) == [
        {**problem, **cfg["leaky"], "seed": s, "gf_eta": cfg["gf_eta"]} for s in seeds
    ]
    lk = cfg["leaky"]
    assert tasks.leaky_negative_tasks(cfg) == [
        {
            **problem,
            "seed": s,
            "alpha": lk["alpha"],
            "s": lk["s"],
            "rhos": lk["rhos"],
            "gf_eta": cfg["gf_eta"],
        }
        for s in seeds
    ]
    relu = {k: v for k, v in cfg["relu"].items() if k != "seeds"}
    assert tasks.relu_tasks(cfg) == [
        {**relu, "seed": s, "gf_eta": cfg["gf_eta"]} for s in cfg["relu"]["seeds"]
    ]
    regimes = tasks.regime_tasks(cfg)
    names = ["alpha", "shape", "alpha_zero_output", "plateau", "shape_below_one"]
    assert list(regimes) == [*names, "plateau_below_one"]
    alphas = [[a, 1.0] for a in cfg["regime_alphas"]]
    shapes = [[1.0, s] for s in cfg["regime_shapes"]]
    plateau = cfg["regime_plateau"]
    grid = [[a, s] for a in plateau["alphas"] for s in plateau["shapes"]]
    expected = {
        "alpha": (alphas, False),
        "shape": ([p for p in shapes if p[1] >= 1], False),
        "alpha_zero_output": (alphas, True),
        "plateau": ([p for p in grid if p[1] >= 1], False),
        "shape_below_one": ([p for p in shapes if p[1] < 1], False),
        "plateau_below_one": ([p for p in grid if p[1] < 1], False),
    }
    for name, (points, in_null) in expected.items():
        fn, todo = regimes[name]
        implicit = name.endswith("_below_one")
        assert points and fn is (tasks.task_regimes_implicit if implicit else tasks.task_regimes)
        extra = {} if implicit else {"gf_eta": cfg["gf_eta"]}
        assert todo == [
            {**problem, "seed": s, "points": points, "in_null": in_null, **extra} for s in seeds
        ]
    # every swept shape runs, once: s < 1 by the implicit solver, s >= 1 by RK4
    assert sorted(p[1] for p in expected["shape"][0] + expected["shape_below_one"][0]) == sorted(
        cfg["regime_shapes"]
    )
    # a profile without shapes below 1 has no implicit sweeps
    only_above = {**cfg, "regime_shapes": [1.0], "regime_plateau": {**plateau, "shapes": [1.0]}}
    assert list(tasks.regime_tasks(only_above)) == names[:4]


def test_implicit_and_rk4_gradient_flow_agree_where_both_converge():
    """alpha = 1, s = 0.5 (delta < 0, a sign change): RK4 fits the data within its budget
    there, and the two independent integrators reach the same limit."""
    X, y = fc.random_regression(4, 9, seed=3)
    u = fc._orientation(X, y, 0, anti_aligned=True)
    a0, w0 = fc.init_from_scale_shape(1.0, 0.5, u)
    rk4 = tasks.train_single_neuron(X, y, [a0], [w0], 0.5, method="rk4", beta_scale=[3.0])
    tol = float(fc._loss_tol(X, y, 3.0, 1e-11))
    assert rk4["loss"][0] < tol
    radau = fc.gradient_flow_implicit(X, y, a0, w0, tol)
    assert radau["converged"] and radau["sign_changed"] == bool(rk4["sign_changed"][0])
    assert np.linalg.norm(radau["beta"] - rk4["beta"][0]) < 1e-7 * np.linalg.norm(rk4["beta"][0])


def test_rk4_step_budget_cannot_fit_the_stiff_case_the_implicit_solver_can():
    """alpha = 1e3, s = 0.3: the stiffness of the limit defeats RK4's step budget (the reason
    the chapter's shapes below 1 run by the implicit solver)."""
    X, y = fc.random_regression(4, 9, seed=3)
    a0, w0 = fc.init_from_scale_shape(1e3, 0.3, fc._orientation(X, y, 0))
    size = max(
        np.linalg.norm(fc.q_min_single_neuron(X, y, w0, a0**2 - w0 @ w0, sg).beta) for sg in (1, -1)
    )
    scale = max(np.linalg.norm(a0 * w0), size)
    tol = float(fc._loss_tol(X, y, scale, 1e-11))
    rk4 = tasks.train_single_neuron(
        X, y, [a0], [w0], 0.25, method="rk4", beta_scale=[size], max_steps=10_000
    )
    # 10,000 steps: three times what the chapter's runs at s >= 1 need, and far from the fit
    assert rk4["steps"] == 10_000 and rk4["loss"][0] > 100 * tol
    assert fc.gradient_flow_implicit(X, y, a0, w0, tol)["converged"]


def test_task_regimes_implicit_rows_match_task_regimes_where_both_run():
    """The implicit task's rows have the RK4 task's columns and values (s = 0.5, alpha = 1,
    where RK4 converges too)."""
    common = {"n": 4, "d": 9, "seed": 1, "points": [[1.0, 0.5]], "in_null": False}
    imp = tasks.task_regimes_implicit(common)
    rk4 = tasks.task_regimes({**common, "gf_eta": 0.5, "device": "cpu"})
    assert imp["status"] == rk4["status"] == "ok" and imp["integrator"] == "radau"
    (a,), (b,) = imp["rows"], rk4["rows"]
    assert set(a) == set(b) and a["converged"] and a["gf_vs_q"] < 1e-8
    for key in ("gf_dist_l2", "gf_dist_ntk", "q_dist_ntk"):
        assert a[key] == pytest.approx(b[key], rel=1e-6), key
    assert a["sign_changed"] == b["sign_changed"]


def test_leaky_relu_negative_outer_weight_branch():
    out = tasks.task_leaky_negative(
        {
            "n": 4,
            "d": 9,
            "seed": 2,
            "rhos": [0.5],
            "alpha": 1.0,
            "s": 2.0,
            "gf_eta": 0.5,
            "device": "cpu",
        }
    )
    (row,) = out["rows"]
    assert out["status"] == "ok" and row["converged"]
    assert row["a_inf"] < 0  # the branch a < 0 is exercised (delta > 0: no sign change)
    assert row["kkt_residual_gf"] < 1e-5 and row["gf_err"] < 1e-5
    assert row["negative_preactivations"] > 0


def test_relu_counterexample_breaks_the_active_set_kkt():
    """rho = 0: a sample that switches off keeps its component in w - w0, so the KKT residual
    over the active samples is O(1) while the one over all samples is at round-off."""
    out = tasks.task_relu(
        {
            "n": 8,
            "d": 20,
            "seed": 0,
            "alpha": 1.0,
            "s": 2.0,
            "max_steps": 5000,
            "gf_eta": 0.25,
            "device": "cpu",
        }
    )
    assert out["status"] == "ok" and out["converged"] and out["gf_loss"] < 1e-20
    assert out["switched_off"] >= 1 and out["zero_labels"] > 0
    assert out["kkt_residual_active"] > 0.01
    assert out["kkt_residual_all_samples"] < 1e-5
    # a step cap too small to fit the data gives an unconverged run
    short = tasks.task_relu(
        {
            "n": 8,
            "d": 20,
            "seed": 0,
            "alpha": 1.0,
            "s": 2.0,
            "max_steps": 200,
            "gf_eta": 0.25,
            "device": "cpu",
        }
    )
    assert short["status"] == "unconverged" and not short["converged"]
