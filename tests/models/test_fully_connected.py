"""Unit tests for implicit_bias.models.fully_connected (Azulay et al. 2021, chapter warped_imd).

Every closed form is checked against an independent computation: derivatives against finite
differences, minimizers against their KKT conditions and generic solvers (scipy, cvxpy).
Deliberately wrong variants must fail. The dynamics (training loops and the chapter's tasks) are
tested in tests/chapters/warped_imd.
"""

from __future__ import annotations

import ast
import inspect

import cvxpy as cp
import numpy as np
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
        _fd_grad(lambda b: fc.q_single_neuron(b, w0, delta, -1.0), beta), g, atol=1e-7
    )
    hess_fd = np.array(
        [
            _fd_grad(lambda b, i=i: fc.grad_q_single_neuron(b, w0, delta, -1.0)[i], beta)
            for i in range(9)
        ]
    )
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
    assert np.isclose(
        fc.hessian_map_asymmetry(metric(0.0), beta),
        fc.hessian_map_asymmetry(metric(0.0), beta, method="fd"),
        rtol=1e-6,
    )


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
    args = (
        lambda b: fc.q_single_neuron(b, w0, delta, sigma),
        lambda b: fc.grad_q_single_neuron(b, w0, delta, sigma),
    )
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


def test_q_level_grid_quadratic_model_is_exact_to_second_order():
    u = np.array([1.0, 0.5])
    near = fc.q_level_grid(50.0, 20.0, u, n_grid=11, radius=1e-3)
    far = fc.q_level_grid(1.0, 1.0, u, n_grid=11, radius=1.0)
    assert near["quad_mismatch"] < 1e-2 < far["quad_mismatch"]


def test_model_module_is_pure_numerics():
    """No pandas, matplotlib or project code outside implicit_bias.models."""
    tree = ast.parse(inspect.getsource(fc))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    top = {name.split(".")[0] for name in imported}
    assert not top & {"pandas", "matplotlib"}
    assert all(
        not m.startswith("implicit_bias") or m.startswith("implicit_bias.models") for m in imported
    )


def test_kkt_residual_active_and_relu_teacher(problem):
    X, w0 = problem[0], np.random.default_rng(9).standard_normal(problem[0].shape[1])
    beta = np.random.default_rng(8).standard_normal(X.shape[1])
    full = fc.kkt_residual(beta, X, w0, 0.5, 1.0)
    all_on = np.ones(X.shape[0], dtype=bool)
    assert fc.kkt_residual_active(beta, X, w0, 0.5, 1.0, all_on) == pytest.approx(full)
    # fewer constraints: a larger residual; none: the whole gradient
    fewer = fc.kkt_residual_active(beta, X, w0, 0.5, 1.0, np.arange(X.shape[0]) > 0)
    assert fewer >= full
    none = fc.kkt_residual_active(beta, X, w0, 0.5, 1.0, np.zeros(X.shape[0], dtype=bool))
    assert none == pytest.approx(1.0)
    Xr, yr, w_star = fc.relu_teacher_regression(6, 15, 0)
    assert Xr.shape == (6, 15) and np.all(yr >= 0) and np.allclose(yr, np.maximum(Xr @ w_star, 0))


def _stiff_start(problem, alpha=1e3, s=0.3):
    X, y, u = problem
    a0, w0 = fc.init_from_scale_shape(alpha, s, u)
    return X, y, a0, w0, a0**2 - w0 @ w0


def test_implicit_gradient_flow_reaches_q_min_in_the_stiff_case(problem):
    """delta < 0 at a large scale: the limit's outer weight is tiny (a stiffness ratio |delta| /
    a_inf^2 of order alpha^2); the Radau run still reaches Theorem 2's Q-min, keeps the linear
    invariant P_perp w = P_perp w0 and the conserved delta."""
    X, y, a0, w0, delta = _stiff_start(problem)
    run = fc.gradient_flow_implicit(X, y, a0, w0, tol=1e-20)
    assert run["converged"] and run["loss"] < 1e-20 and run["steps"] > 10
    sigma = float(np.sign(run["a"]))
    theory = fc.q_min_single_neuron(X, y, w0, delta, sigma)
    assert abs(delta) / run["a"] ** 2 > 1e5  # genuinely stiff at the limit
    assert np.linalg.norm(run["beta"] - theory.beta) < 1e-7 * np.linalg.norm(theory.beta)
    assert abs(abs(run["a"]) - theory.a_abs) < 1e-7 * theory.a_abs
    proj = fc.null_projector(X)
    assert np.linalg.norm(proj @ (run["w"] - w0)) < 1e-10 * np.linalg.norm(w0)
    assert abs(run["a"] ** 2 - run["w"] @ run["w"] - delta) < 1e-9 * abs(delta)
    assert np.allclose(run["beta"], run["a"] * run["w"])
    # a sign change is reported iff the outer weight ended with the other sign
    assert run["sign_changed"] == (sigma != np.sign(a0))
    # the other branch's Q-min is a different point: the check can tell them apart
    other = fc.q_min_single_neuron(X, y, w0, delta, -sigma).beta
    assert np.linalg.norm(run["beta"] - other) > 1e-2 * np.linalg.norm(theory.beta)


def test_implicit_gradient_flow_stopped_by_its_step_cap_is_unconverged(problem):
    X, y, a0, w0, _ = _stiff_start(problem)
    run = fc.gradient_flow_implicit(X, y, a0, w0, tol=1e-20, max_steps=5)
    assert run["steps"] == 5 and not run["converged"] and run["loss"] >= 1e-20
