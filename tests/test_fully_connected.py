"""Unit tests for implicit_bias.models.fully_connected (Azulay et al. 2021, chapter warped_imd).

Every closed form is checked against an independent computation: derivatives against finite
differences, minimizers against their KKT conditions and generic solvers (scipy, cvxpy), and
against the dynamics themselves on small problems. Deliberately wrong variants must fail.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest
import torch

from implicit_bias.models import fully_connected as fc

torch.set_num_threads(1)
DELTAS = [-2.0, 0.0, 1.5]


@pytest.fixture(scope="module")
def problem():
    X, y = fc.random_regression(4, 9, seed=3)
    u = np.random.default_rng(4).standard_normal(9)
    return X, y, u


def _fd_grad(f, x, h=1e-6):
    e = np.eye(x.size)
    return np.array([(f(x + h * e[i]) - f(x - h * e[i])) / (2 * h) for i in range(x.size)])


def test_random_regression_requires_underdetermined():
    with pytest.raises(ValueError, match="underdetermined"):
        fc.random_regression(5, 5, 0)


def test_init_scale_shape_identities():
    a0, w0 = fc.init_from_scale_shape(0.7, 3.0, np.array([3.0, 4.0]), sign=-1)
    assert np.isclose(abs(a0) * np.linalg.norm(w0), 0.7)
    assert np.isclose(abs(a0) / np.linalg.norm(w0), 3.0)
    assert np.isclose(a0**2 - w0 @ w0, 0.7 * (3.0 - 1 / 3.0))
    np.testing.assert_allclose(a0 * w0, -0.7 * np.array([0.6, 0.8]))


@pytest.mark.parametrize("delta", DELTAS)
def test_radial_potential_derivative_is_r_over_a(delta):
    r = np.array([0.05, 0.4, 1.0, 3.0])
    h = 1e-6
    fd = (fc.radial_potential(r + h, delta) - fc.radial_potential(r - h, delta)) / (2 * h)
    np.testing.assert_allclose(fd, r / np.sqrt(fc.a_squared(r, delta)), rtol=1e-7)


def test_a_squared_solves_quartic_and_is_stable_for_very_negative_delta():
    r = np.array([1e-3, 0.5, 2.0])
    for delta in (-1e6, -3.0, 0.0, 2.0):
        a2 = fc.a_squared(r, delta)
        terms = a2**2 + abs(delta) * a2 + r**2  # residual relative to the terms' size
        assert np.all(np.abs(a2**2 - delta * a2 - r**2) <= 1e-14 * terms)
    # the naive (delta + S) / 2 loses every digit here; the stable form keeps a^2 = r^2 / |delta|
    np.testing.assert_allclose(fc.a_squared(1e-3, -1e6), 1e-12, rtol=1e-9)


@pytest.mark.parametrize("delta", DELTAS)
def test_grad_and_hessian_of_q_match_finite_differences(delta, problem):
    _, _, u = problem
    beta = np.random.default_rng(0).standard_normal(9)
    w0 = 0.7 * u
    g = fc.grad_q_single_neuron(beta, w0, delta, -1.0)
    np.testing.assert_allclose(
        _fd_grad(lambda b: fc.q_single_neuron(b, w0, delta, -1.0), beta), g, atol=1e-7)
    hess_fd = np.array([_fd_grad(lambda b, i=i: fc.grad_q_single_neuron(b, w0, delta, -1.0)[i],
                                 beta) for i in range(9)])
    np.testing.assert_allclose(fc.hess_q_single_neuron(beta, delta), hess_fd, atol=1e-7)


@pytest.mark.parametrize("delta", DELTAS)
def test_warped_metric_is_the_hessian_of_q_and_a_hessian_map(delta):
    beta = np.random.default_rng(1).standard_normal(4)
    warped = fc.predictor_metric(torch.as_tensor(beta), delta, 1.0).numpy()
    np.testing.assert_allclose(warped, fc.hess_q_single_neuron(beta, delta), atol=1e-14)
    metric = lambda p: lambda b: fc.predictor_metric(b, delta, p)  # noqa: E731
    assert fc.hessian_map_asymmetry(metric(1.0), beta) < 1e-13
    assert fc.hessian_map_asymmetry(metric(1.0), beta, method="fd") < 1e-7
    # plain IMD metric and a wrong warp (|a|^2) both violate Eq. (6) by a wide margin
    assert fc.hessian_map_asymmetry(metric(0.0), beta) > 0.1
    assert fc.hessian_map_asymmetry(metric(2.0), beta) > 0.1
    # the two derivative methods agree on the failing one too
    assert np.isclose(fc.hessian_map_asymmetry(metric(0.0), beta),
                      fc.hessian_map_asymmetry(metric(0.0), beta, method="fd"), rtol=1e-6)


def test_hessian_map_test_accepts_a_known_hessian_map():
    # diag(1 / sqrt(b_i^2 + 1)) is the Hessian of sum_i (b_i asinh b_i - sqrt(b_i^2 + 1))
    metric = lambda b: torch.diag(1 / torch.sqrt(b**2 + 1))  # noqa: E731
    assert fc.hessian_map_asymmetry(metric, np.array([0.3, -1.2, 2.0])) < 1e-15
    with pytest.raises(ValueError, match="valid"):
        fc.hessian_map_asymmetry(metric, np.ones(2), method="bad")


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("sigma", [1.0, -1.0])
def test_closed_form_q_min_is_feasible_kkt_and_matches_newton(delta, sigma, problem):
    X, y, u = problem
    w0 = 0.8 * u / np.linalg.norm(u)
    sol = fc.q_min_single_neuron(X, y, w0, delta, sigma)
    np.testing.assert_allclose(X @ sol.beta, y, atol=1e-12)
    assert fc.kkt_residual(sol.beta, X, w0, delta, sigma) < 1e-12
    assert np.isclose(sol.a_abs**2, fc.a_squared(np.linalg.norm(sol.beta), delta), rtol=1e-12)
    args = (lambda b: fc.q_single_neuron(b, w0, delta, sigma),
            lambda b: fc.grad_q_single_neuron(b, w0, delta, sigma))
    newton = fc.q_min_numeric(X, y, *args, lambda b: fc.hess_q_single_neuron(b, delta))
    bfgs = fc.q_min_numeric(X, y, *args)
    np.testing.assert_allclose(newton, sol.beta, atol=1e-11)
    np.testing.assert_allclose(bfgs, sol.beta, atol=1e-5)
    # a wrong linear coefficient (w0 / ||w0|| instead of w0) gives another point
    wrong = fc.q_min_single_neuron(X, y, w0 / np.linalg.norm(w0), delta, sigma).beta
    assert np.linalg.norm(wrong - sol.beta) > 1e-2


def test_balanced_q_min_matches_a_conic_solver(problem):
    # Prop. 1's Q = (2/3)||beta||^{3/2} - ||a0|| <u0, beta> is DCP: an independent solver
    X, y, u = problem
    a0, u0 = np.array([0.5, -1.0, 0.3]), u / np.linalg.norm(u)
    beta = cp.Variable(X.shape[1])
    objective = (2 / 3) * cp.power(cp.norm(beta, 2), 1.5) - np.linalg.norm(a0) * (u0 @ beta)
    cp.Problem(cp.Minimize(objective), [X @ beta == y]).solve(solver="CLARABEL")
    np.testing.assert_allclose(fc.q_min_balanced(X, y, a0, u0).beta, beta.value, atol=2e-5)


def test_mahalanobis_predictor_is_the_kernel_interpolator(problem):
    X, y, u = problem
    a0, w0 = fc.init_from_scale_shape(2.0, 0.5, u)
    b = fc.mahalanobis_predictor(X, y, a0, w0)
    np.testing.assert_allclose(X @ b, y, atol=1e-12)
    h0 = a0**2 * np.eye(9) + np.outer(w0, w0)
    # KKT of min (b - b0)^T H0^{-1} (b - b0): H0^{-1}(b - b0) in range(X^T)
    grad = np.linalg.solve(h0, b - a0 * w0)
    assert np.linalg.norm(fc.null_projector(X) @ grad) < 1e-12 * np.linalg.norm(grad)


@pytest.mark.parametrize("s", [3.0, 1.0, 0.6])
def test_gradient_flow_and_descent_reach_theorem2(s, problem):
    X, y, u = problem
    a0, w0 = fc.init_from_scale_shape(1.5, s, u)
    delta = a0**2 - w0 @ w0
    size = [np.linalg.norm(fc.q_min_single_neuron(X, y, w0, delta, 1.0).beta)]
    gf = fc.train_single_neuron(X, y, [a0], [w0], 0.5, method="rk4", beta_scale=size)
    sigma = float(np.sign(gf["a"][0]))
    theory = fc.q_min_single_neuron(X, y, w0, delta, sigma).beta
    assert np.linalg.norm(gf["beta"][0] - theory) < 1e-5 * np.linalg.norm(theory)
    gd = fc.train_single_neuron(X, y, [a0, a0], [w0, w0], np.array([0.4, 0.2]),
                                beta_scale=size * 2)
    errs = np.linalg.norm(gd["beta"] - theory, axis=1)
    assert errs[1] < errs[0] / 1.6  # first-order discretization bias: halves with the step


def test_sign_change_needs_sigma_of_the_limit(problem):
    X, y, _ = problem
    # against X^+ y, plus a null-space part (else both signs give the same point)
    a0, w0 = fc.init_from_scale_shape(0.5, 0.3, fc._orientation(X, y, 0, anti_aligned=True))
    delta = a0**2 - w0 @ w0
    gf = fc.train_single_neuron(X, y, [a0], [w0], 0.5, method="rk4", beta_scale=[3.0])
    assert gf["sign_changed"][0] and gf["a"][0] < 0
    right = fc.q_min_single_neuron(X, y, w0, delta, -1.0).beta
    wrong = fc.q_min_single_neuron(X, y, w0, delta, 1.0).beta
    assert np.linalg.norm(gf["beta"][0] - right) < 1e-5 * np.linalg.norm(right)
    assert np.linalg.norm(gf["beta"][0] - wrong) > 1e-2 * np.linalg.norm(right)


def test_multi_neuron_balanced_and_generic(problem):
    out = fc.task_balanced({"n": 4, "d": 9, "k": 3, "seed": 2, "scale": 0.8, "etas": [0.5],
                            "gf_eta": 0.5, "device": "cpu"})
    assert out["gf_err"] < 1e-5
    assert out["generic_identity_err"] < 1e-8   # beta_inf = X^+ y + P_perp W0^T a_inf, always
    assert out["generic_err_vs_prop1"] > 1e-2   # Prop. 1 needs strict balance


def test_leaky_relu_limit_is_the_affine_q_min(problem):
    np.testing.assert_allclose(fc.leaky_relu_inverse(np.array([-0.2, 0.0, 3.0]), 0.25),
                               [-0.8, 0.0, 3.0])
    out = fc.task_leaky({"n": 4, "d": 9, "seed": 2, "rhos": [0.5], "alpha": 1.0, "s": 2.0,
                         "etas": [0.5], "gf_eta": 0.5, "device": "cpu"})["rows"][0]
    assert out["kkt_residual_gf"] < 1e-5 and out["gf_err"] < 1e-5
    assert out["negative_preactivations"] > 0      # the nonlinearity was actually used
    assert out["linear_label_err"] > 1e-2          # treating the unit as linear is wrong


def test_time_warp_same_points_different_speeds():
    out = fc.task_time_warp({"alpha": 0.5, "s": 2.0, "seed": 0, "end": 3.0, "dt": 5e-3,
                             "n_plot": 20})
    assert out["same_tau_gap_rel"] < 1e-8
    assert out["same_time_gap_rel"] > 0.05
    with pytest.raises(ValueError, match="clock"):
        fc.gradient_flow_path(np.ones((1, 2)), np.ones(1), 1.0, np.ones(2), 1.0, 0.1, clock="s")


def test_anti_ntk_distance_is_linear_in_the_scale():
    out = fc.task_anti_ntk({"n": 4, "d": 9, "k": 2, "seed": 0, "eps": [0.1, 0.01],
                            "gf_eta": 0.5, "device": "cpu"})
    assert 0.9 < out["slope"] < 1.1 and out["dist_l2"][-1] < 1e-2


def test_q_level_grid_quadratic_model_is_exact_to_second_order():
    u = np.array([1.0, 0.5])
    near = fc.q_level_grid(50.0, 20.0, u, n_grid=11, radius=1e-3)
    far = fc.q_level_grid(1.0, 1.0, u, n_grid=11, radius=1.0)
    assert near["quad_mismatch"] < 1e-2 < far["quad_mismatch"]


def test_unknown_integrator_raises(problem):
    X, y, u = problem
    with pytest.raises(ValueError, match="valid"):
        fc.train_single_neuron(X, y, [1.0], [u], 0.1, method="leapfrog")


def test_theorem2_metrics_only_count_wrong_variants_that_differ():
    res = [{"cases": [{
        "name": "c", "delta": 1.0, "sign_changed": False, "gf_err": 1e-7, "gd_err": [0.02, 0.01],
        "newton_vs_closed_form": 1e-15, "kkt_residual_gf": 1e-7,
        "wrong_err": {"unit_w0": 0.3, "sigma_from_a0": 1e-7, "delta_zero": 0.2},
        "wrong_differs": {"unit_w0": 0.3, "sigma_from_a0": 0.0, "delta_zero": 0.2}}]}]
    m = fc.theorem2_metrics(fc.theorem2_table(res, [0], [0.8, 0.4]), [0.8, 0.4])
    assert np.isclose(m["thm2_wrong_variant_min_ratio"], 0.2 / 1e-7)  # sigma variant skipped
    assert np.isclose(m["thm2_gd_min_halving_ratio"], 2.0)
    assert m["thm2_gd_max_err_smallest_step"] == 0.01
    assert m["thm2_sign_change_observed"] is False


def test_regime_sweep_and_metrics_on_a_small_grid():
    pts = [[1e-3, 1.0], [1.0, 1.0], [1e3, 1.0]]
    res = fc.task_regimes({"n": 3, "d": 7, "seed": 0, "points": pts, "gf_eta": 0.5,
                           "device": "cpu"})
    shape = fc.task_regimes({"n": 3, "d": 7, "seed": 0, "points": [[1.0, 1e3]], "gf_eta": 0.5,
                             "device": "cpu"})
    df = pd.concat([fc.regimes_table([res], [0], "alpha"), fc.regimes_table([shape], [0], "shape"),
                    fc.regimes_table([res], [0], "alpha_zero_output")], ignore_index=True)
    m = fc.regime_metrics(df)
    assert m["regime_gf_vs_q_max"] < 1e-4
    assert m["regime_dist_l2_smallest_alpha"] < 0.1 and m["regime_dist_ntk_largest_shape"] < 1e-4
    theory = fc.closed_form_regimes(3, 7, 0, pts)
    np.testing.assert_allclose(theory["q_dist_l2"], df.loc[:2, "gf_dist_l2"], rtol=1e-3)


def test_summaries_and_plots_run():
    import matplotlib
    matplotlib.use("Agg")
    from implicit_bias.core.plotting import PALETTE, figure
    hm = fc.task_hessian_map({"dim": 3, "deltas": [0.0], "n_points": 2, "seed": 0})
    m = fc.hessian_map_metrics(hm["rows"])
    assert m["hessian_warped_max_asymmetry"] < 1e-12 < m["hessian_plain_min_asymmetry"]
    fig, ax = figure(1, 1)
    fc.plot_hessian_map(ax, pd.DataFrame(hm["rows"]), PALETTE)
    grids = [("a", fc.q_level_grid(1.0, 1.0, np.array([1.0, 0.0]), 9, 1.0))]
    fig, axes = figure(1, 1)
    assert len(fc.plot_q_levels([axes], grids, PALETTE)) == 81
