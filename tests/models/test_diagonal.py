"""Unit tests for implicit_bias.models.diagonal (Azulay et al. 2021, Theorem 1 and Sec. 7.1): the
numerics. The chapter's tasks, tables and figures are tested in tests/chapters/untied_diagonal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.models import diagonal as dg
from implicit_bias.models.convex import min_l1_interpolator, min_l2_interpolator


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny float64 problems: extra threads only add overhead on a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((6, 15))
    y = rng.standard_normal(6)
    return X, y


def _single(params: dg.DiagonalParams, b: int) -> dg.DiagonalParams:
    return dg.DiagonalParams(*(t[b : b + 1] for t in params.tensors()))


def test_q_function_values_and_small_argument_accuracy():
    z = np.array([0.0, 1e-9, 0.5, -2.0, 50.0])
    naive = z * np.arcsinh(z) - np.sqrt(1 + z**2) + 1
    assert np.allclose(dg.q_function(z), naive, rtol=1e-12, atol=1e-15)
    # Near 0, q(z) = z^2/2 - z^4/24 + ...: the stable form keeps full relative accuracy.
    assert dg.q_function(1e-9) == pytest.approx(0.5e-18, rel=1e-12)
    assert np.all(dg.q_function(np.linspace(-5, 5, 101)) >= 0)


def test_gradient_of_q_matches_finite_differences():
    rng = np.random.default_rng(0)
    beta = rng.standard_normal(7)
    m = rng.uniform(0.01, 3.0, 7)
    grad = dg.grad_regularizer_q(beta, m)
    h = 1e-6
    fd = np.array(
        [
            (dg.regularizer_q(beta + h * e, m) - dg.regularizer_q(beta - h * e, m)) / (2 * h)
            for e in np.eye(7)
        ]
    )
    assert np.allclose(grad, fd, rtol=1e-7, atol=1e-8)
    # A wrong scale gives a visibly different gradient (the check can fail).
    assert not np.allclose(dg.grad_regularizer_q(beta, 2 * m), fd, rtol=1e-3)


def test_paper_q_k_and_woodworth_forms_agree():
    beta = np.linspace(-3, 3, 13)
    m = 0.7
    # Paper's q_k with k = 4 m^2 is half of m q(beta / m).
    assert np.allclose(dg.q_paper(beta, 4 * m**2), m * dg.q_function(beta / m) / 2, rtol=1e-12)
    # Woodworth et al.'s tied regularizer with alpha_w^2 = m / 2 is exactly Q.
    alpha_w = np.sqrt(m / 2)
    assert np.allclose(
        dg.woodworth_q(beta[:, None], alpha_w), dg.regularizer_q(beta[:, None], m), rtol=1e-12
    )


def test_general_regularizer_reduces_to_unbiased_and_is_a_bregman_divergence():
    rng = np.random.default_rng(2)
    beta, beta0 = rng.standard_normal(5), rng.standard_normal(5)
    k = rng.uniform(0.1, 2, 5)
    assert dg.regularizer_q_general(beta, k, np.zeros(5)) == pytest.approx(
        dg.regularizer_q(beta, k), rel=1e-12
    )
    assert dg.regularizer_q_general(beta0, k, beta0) == pytest.approx(0.0, abs=1e-14)
    assert dg.regularizer_q_general(beta, k, beta0) > 0


def test_effective_scale_of_unbiased_and_biased_inits():
    u0 = torch.tensor([[0.3, 1.0, 2.0]], dtype=torch.float64)
    v0 = torch.tensor([[0.5, 0.0, 1e-3]], dtype=torch.float64)
    k, beta0 = dg.unbiased_init(u0, v0).effective_scale()
    assert torch.allclose(k, u0**2 + v0**2) and torch.all(beta0 == 0)
    p = dg.DiagonalParams(*(torch.rand(2, 4, dtype=torch.float64) for _ in range(4)))
    k, beta0 = p.effective_scale()
    big_m = sum(t**2 for t in p.tensors()) / 2
    assert torch.allclose(k, torch.sqrt(big_m**2 - beta0**2), rtol=1e-10)
    assert torch.allclose(beta0, p.predictor())


def test_scale_shape_parametrization():
    alpha = torch.tensor([1e-3, 2.0], dtype=torch.float64)
    shape = torch.tensor([10.0, 0.5], dtype=torch.float64)
    p = dg.scale_shape_init(alpha, shape, 3)
    assert torch.allclose(p.u_plus * p.v_plus, alpha[:, None].expand(-1, 3))
    assert torch.allclose(p.u_plus / p.v_plus, shape[:, None].expand(-1, 3))
    k, _ = p.effective_scale()
    assert torch.allclose(k[:, 0], dg.m_from_scale_shape(alpha, shape))


@pytest.mark.parametrize("m", [1e-30, 1e-6, 0.05, 1.0, 1e4])
def test_q_minimizer_satisfies_kkt_and_constraints(problem, m):
    X, y = problem
    res = dg.q_minimizer(X, y, m)
    assert res.converged
    assert res.residual < 1e-10
    assert dg.kkt_residual(X, dg.grad_regularizer_q(res.beta, m)) < 1e-10
    # A generic interpolator (min-L2) is not a KKT point of Q unless m is huge.
    if m < 1:
        l2 = min_l2_interpolator(X, y).x
        assert dg.kkt_residual(X, dg.grad_regularizer_q(l2, m)) > 1e-2


def test_q_minimizer_general_init_kkt(problem):
    X, y = problem
    rng = np.random.default_rng(3)
    k, beta0 = rng.uniform(0.05, 1, 15), 0.3 * rng.standard_normal(15)
    res = dg.q_minimizer(X, y, k, beta0)
    grad = np.arcsinh(res.beta / k) - np.arcsinh(beta0 / k)
    assert res.residual < 1e-10 and dg.kkt_residual(X, grad) < 1e-10


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
@pytest.mark.parametrize("m", [0.02, 1.0])
def test_q_minimizer_matches_cvxpy_primal(problem, m):
    X, y = problem
    weights = np.linspace(0.5, 2.0, X.shape[1]) * m  # per-coordinate m
    newton = dg.q_minimizer(X, y, weights)
    # Interior-point accuracy in x is about the square root of the gap: ask for a tight gap.
    tight = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12}
    generic = dg.q_minimizer_cvxpy(X, y, weights, **tight)
    assert generic.status in ("optimal", "optimal_inaccurate")
    assert dg.relative_distance(generic.x, newton.beta) < 1e-6
    assert generic.objective == pytest.approx(dg.regularizer_q(newton.beta, weights), rel=1e-8)
    # The wrong scale is a different program with a visibly different answer.
    assert dg.relative_distance(dg.q_minimizer(X, y, 2 * weights).beta, generic.x) > 1e-3


def test_limits_of_q_minimizer(problem):
    X, y = problem
    l2 = min_l2_interpolator(X, y).x
    l1 = min_l1_interpolator(X, y).x
    assert dg.relative_distance(dg.q_minimizer(X, y, 1e4).beta, l2) < 1e-6
    far = dg.relative_distance(dg.q_minimizer(X, y, 1e-2).beta, l1)
    near = dg.relative_distance(dg.q_minimizer(X, y, 1e-20).beta, l1)
    assert near < far and near < 0.1


def test_gradient_descent_limit_matches_q_minimizer_and_bias_halves(problem):
    X, y = problem
    Xt, yt = torch.tensor(X), torch.tensor(y)
    rng = np.random.default_rng(4)
    u0 = torch.tensor(rng.uniform(0.2, 1, (1, 15)))
    v0 = torch.tensor(rng.uniform(0.2, 1, (1, 15)))
    params = dg.unbiased_init(u0, v0)
    q = dg.q_minimizer(X, y, (u0**2 + v0**2)[0].numpy()).beta
    errors = []
    for rel in (0.4, 0.2):
        steps = dg.stable_steps(Xt, params, beta_bound=3.0, rel_step=rel)
        res = dg.gradient_descent(Xt, yt, params, steps, tol=1e-12, max_steps=50_000)
        assert bool(res.converged.all())
        errors.append(float(dg.relative_distance(res.beta[0].numpy(), q)))
    assert errors[0] < 1e-2
    assert 1.6 < errors[0] / errors[1] < 2.4  # first-order (O(step)) bias
    # The wrong scale is much further away than GD's discretization bias.
    wrong = dg.q_minimizer(X, y, 2 * (u0**2 + v0**2)[0].numpy()).beta
    assert dg.relative_distance(res.beta[0].numpy(), wrong) > 10 * errors[1]


def test_gradient_flow_matches_q_minimizer(problem):
    X, y = problem
    rng = np.random.default_rng(5)
    params = dg.DiagonalParams(*(torch.tensor(rng.uniform(0.1, 1, (1, 15))) for _ in range(4)))
    k, beta0 = (t[0].numpy() for t in params.effective_scale())
    flow = dg.gradient_flow(X, y, params, tol=1e-10, kkt_tol=1e-10)
    q = dg.q_minimizer(X, y, k, beta0).beta
    assert bool(flow.converged[0]) and float(flow.residual[0]) <= 1e-10
    assert dg.relative_distance(flow.beta[0].numpy(), q) < 1e-7


def test_gradient_flow_stops_on_optimality_not_on_a_slow_residual(problem):
    """A small initialization converges slowly (the residual falls by less than half per
    chunk): the flow must keep going until the optimality conditions hold, and a run whose
    time budget ends first is reported unconverged, not cut off as if it had converged."""
    X, y = problem
    u0 = torch.full((1, 15), 1e-3, dtype=torch.float64)
    params = dg.unbiased_init(u0, u0)
    q = dg.q_minimizer(X, y, 2e-6).beta
    flow = dg.gradient_flow(X, y, params, tol=1e-9, kkt_tol=1e-9, t_chunk=5.0, max_chunks=2000)
    assert bool(flow.converged[0])
    assert dg.relative_distance(flow.beta[0].numpy(), q) < 1e-6
    short = dg.gradient_flow(X, y, params, tol=1e-9, kkt_tol=1e-9, t_chunk=5.0, max_chunks=3)
    assert not bool(short.converged[0]) and float(short.residual[0]) > 1e-9


def test_l1_dual_slacks_and_the_rate_of_the_rich_limit(problem):
    """LP duality: y^T nu = ||b_L1||_1, slacks vanish on the L1 support; an off-support
    coordinate of argmin Q decays like (m/2)^{slack} (exponent within 0.05 on this problem)."""
    X, y = problem
    nu, slack = dg.l1_dual(X, y)
    l1 = min_l1_interpolator(X, y).x
    assert y @ nu == pytest.approx(np.abs(l1).sum(), rel=1e-6)
    support = np.abs(l1) > 1e-6
    assert np.all(slack >= 0) and np.all(slack[support] < 1e-6)
    m1, m2 = 1e-40, 1e-60
    b1, b2 = dg.q_minimizer(X, y, m1).beta, dg.q_minimizer(X, y, m2).beta
    exponent = np.log(np.abs(b1) / np.abs(b2)) / np.log(m1 / m2)
    off = slack > 1e-6
    assert np.max(np.abs(exponent - slack)[off]) < 0.05
    # a wrong slack vector (shuffled) is caught
    assert np.max(np.abs(exponent[off] - np.roll(slack[off], 1))) > 0.05


def test_gradient_descent_batches_independent_runs(problem):
    X, y = problem
    Xt, yt = torch.tensor(X), torch.tensor(y)
    alpha = torch.tensor([1e-2, 1.0, 10.0], dtype=torch.float64)
    shape = torch.tensor([1.0, 3.0, 100.0], dtype=torch.float64)
    params = dg.scale_shape_init(alpha, shape, 15)
    steps = dg.stable_steps(Xt, params, 3.0, 0.4)
    batch = dg.gradient_descent(Xt, yt, params, steps, tol=1e-9, max_steps=20_000)
    one = dg.gradient_descent(Xt, yt, _single(params, 1), steps[1:2], tol=1e-9, max_steps=20_000)
    assert torch.allclose(batch.beta[1], one.beta[0], rtol=1e-12, atol=1e-14)
    assert int(batch.steps[1]) == int(one.steps[0])


def _plain_gradient_descent(X, y, params, steps, tol, max_steps, check_every):
    """`gradient_descent` written out with a fresh tensor per operation (Eq. (8)'s gradients,
    `_velocity`'s signs), freezing converged runs the same way: what the in-place loop must
    reproduce bit for bit."""
    cur = [t.clone() for t in params.tensors()]
    eta = steps.reshape(-1, 1)
    active = torch.arange(cur[0].shape[0])
    out = [t.clone() for t in cur]
    taken = torch.zeros(cur[0].shape[0], dtype=torch.int64)
    done = 0
    while active.numel() > 0 and done < max_steps:
        chunk = min(check_every, max_steps - done)
        for _ in range(chunk):
            up, vp, um, vm = cur
            g = (((up * vp - um * vm) @ X.T - y) @ X / X.shape[0]) * eta
            cur = [up - g * vp, vp - g * up, um + g * vm, vm + g * um]
        done += chunk
        taken[active] += chunk
        res = torch.linalg.vector_norm((cur[0] * cur[1] - cur[2] * cur[3]) @ X.T - y, dim=1)
        finished = res / torch.linalg.vector_norm(y) <= tol
        for o, c in zip(out, cur):
            o[active] = c
        active, cur, eta = active[~finished], [c[~finished] for c in cur], eta[~finished]
    return dg.DiagonalParams(*out).predictor(), taken


def test_gradient_descent_equals_the_plain_loop_bit_for_bit(problem):
    X, y = problem
    Xt, yt = torch.tensor(X), torch.tensor(y)
    alpha = torch.tensor([1e-3, 1e-2, 1.0, 10.0], dtype=torch.float64)
    shape = torch.tensor([1.0, 30.0, 3.0, 1.0], dtype=torch.float64)
    params = dg.scale_shape_init(alpha, shape, 15)
    steps = dg.stable_steps(Xt, params, 3.0, 0.4)
    res = dg.gradient_descent(Xt, yt, params, steps, tol=1e-9, max_steps=6_000, check_every=50)
    beta, taken = _plain_gradient_descent(Xt, yt, params, steps, 1e-9, 6_000, 50)
    assert len(set(res.steps.tolist())) > 1  # runs froze at different steps
    assert torch.equal(res.beta, beta) and torch.equal(res.steps, taken)
    # the comparison can fail: a step size one ulp larger moves the limits
    other, _ = _plain_gradient_descent(Xt, yt, params, steps * (1 + 2**-52), 1e-9, 6_000, 50)
    assert not torch.equal(res.beta, other)


def test_shape_mirror_symmetry_is_exact(problem):
    X, y = problem
    Xt, yt = torch.tensor(X), torch.tensor(y)
    alpha = torch.tensor([1e-2, 1e-2], dtype=torch.float64)
    shape = torch.tensor([20.0, 1 / 20.0], dtype=torch.float64)
    params = dg.scale_shape_init(alpha, shape, 15)
    # Build the 1/s run by swapping u and v of the s run, so the symmetry is tested bitwise.
    p = params
    swapped = dg.DiagonalParams(p.v_plus[:1], p.u_plus[:1], p.v_minus[:1], p.u_minus[:1])
    steps = dg.stable_steps(Xt, _single(params, 0), 3.0, 0.4)
    a = dg.gradient_descent(Xt, yt, _single(params, 0), steps, tol=1e-9, max_steps=5_000)
    b = dg.gradient_descent(Xt, yt, swapped, steps, tol=1e-9, max_steps=5_000)
    assert torch.equal(a.beta, b.beta)
    # (the table helper that relies on this, analysis.mirror_shapes, is tested with the chapter)


def test_tied_model_is_the_untied_special_case(problem):
    X, y = problem
    Xt, yt = torch.tensor(X), torch.tensor(y)
    alpha_w = torch.full((1, 15), 0.3, dtype=torch.float64)
    tied = dg.tied_gradient_descent(Xt, yt, alpha_w, step=0.01, tol=1e-12, max_steps=50_000)
    q = dg.q_minimizer(X, y, 2 * 0.3**2).beta
    assert dg.relative_distance(tied[0].numpy(), q) < 1e-2


def test_sparse_regression_data_and_population_error():
    X, y, beta_star = dg.sparse_regression_data(30, 50, 5, noise_var=0.01, seed=7)
    assert X.shape == (30, 50) and y.shape == (30,)
    assert np.count_nonzero(beta_star) == 5 and np.linalg.norm(beta_star) == pytest.approx(1.0)
    noise = y - X @ beta_star
    assert 0.03 < noise.std() < 0.2
    X2, y2, _ = dg.sparse_regression_data(30, 50, 5, noise_var=0.01, seed=7)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert dg.population_error(beta_star, beta_star) == 0.0
    assert dg.population_error(np.zeros(50), beta_star) == pytest.approx(1.0)
