"""Unit tests for implicit_bias.models.tensor_networks and tensor_networks_theory (Yun, Krishnan &
Mobahi 2021)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from implicit_bias.models import tensor_networks as tn
from implicit_bias.models import tensor_networks_theory as th

torch.set_num_threads(1)


def _random_case(arch, rng, d):
    if arch == "diag":
        return [3], [rng.standard_normal(d) for _ in range(3)]
    if arch == "conv_full":
        return [d, d, d], [rng.standard_normal(d) for _ in range(3)]
    if arch == "conv_short":
        return [2, 4, d], [rng.standard_normal(k) for k in (2, 4, d)]
    return [d, 3, 4], [
        rng.standard_normal((d, 3)),
        rng.standard_normal((3, 4)),
        rng.standard_normal(4),
    ]


@pytest.mark.parametrize("case", ["diag", "conv_full", "conv_short", "fc"])
def test_contraction_equals_forward_pass(case):
    """Sec. 2: M(x) o (v_1, .., v_L) equals the network's own forward pass."""
    rng = np.random.default_rng(1)
    d = 5
    arch = "conv" if case.startswith("conv") else case
    shape, vs = _random_case(case, rng, d)
    for _ in range(3):
        x = rng.standard_normal(d)
        M = tn.data_tensor(arch, x, shape)
        value = float(
            tn.predict(arch, torch.as_tensor(x)[None], [torch.as_tensor(v) for v in vs])[0]
        )
        assert tn.contract(M, vs) == pytest.approx(value, rel=1e-12, abs=1e-12)
        # the contraction with one slot left open is the gradient in that layer
        grads = tn.layer_gradients(arch, torch.as_tensor(x), [torch.as_tensor(v) for v in vs])
        open_first = M
        for v in vs[1:]:
            open_first = np.tensordot(open_first, np.reshape(v, -1), axes=([1], [0]))
        np.testing.assert_allclose(grads[0].numpy(), open_first, rtol=1e-12, atol=1e-12)


def test_data_tensor_structure():
    x = np.arange(1.0, 5.0)
    M = tn.data_tensor("diag", x, [3])
    assert M[2, 2, 2] == 3.0 and M.sum() == x.sum()
    Mc = tn.data_tensor("conv", x, [4, 4])
    assert Mc[1, 2] == x[3] and Mc[3, 3] == x[2]  # (1 + 2) mod 4, (3 + 3) mod 4
    with pytest.raises(ValueError):
        tn.data_tensor("conv", x, [4, 3])
    with pytest.raises(ValueError):
        tn.data_tensor("ring", x, [2])


def test_full_length_conv_is_orthogonally_decomposable():
    """Cor 3: M_conv(x) = sum_j [S x]_j (F^*_j (x) .. (x) F^*_j) with S = d^{(L-1)/2} F."""
    rng = np.random.default_rng(2)
    d, L = 6, 3
    x = rng.standard_normal(d)
    F = tn.dft_matrix(d)
    U = F.conj()
    Sx = d ** ((L - 1) / 2) * (F @ x)
    rebuilt = np.einsum("j,aj,bj,cj->abc", Sx, U, U, U)
    np.testing.assert_allclose(rebuilt.imag, 0, atol=1e-12)
    np.testing.assert_allclose(rebuilt.real, tn.data_tensor("conv", x, [d] * L), atol=1e-12)


def test_linear_coefficients_match_predictions():
    rng = np.random.default_rng(3)
    X = torch.as_tensor(rng.standard_normal((4, 6)))
    for arch in tn.ARCHS:
        params = tn.init_params(arch, 6, 3, alpha=1.0, seed=0, last_scale=0.5)
        beta = tn.linear_coefficients(arch, params, 6)
        torch.testing.assert_close(tn.predict(arch, X, params), X @ beta)


def test_power_iteration_finds_matrix_singular_pair():
    """For L = 2 the tensor singular system is the matrix SVD: HOPM gives the top pair."""
    rng = np.random.default_rng(4)
    d, k1 = 7, 3
    x = torch.as_tensor(rng.standard_normal(d))
    init = [torch.as_tensor(rng.standard_normal(k1)), torch.as_tensor(rng.standard_normal(d))]
    units, s, _ = tn.tensor_power_iteration("conv", x, init)
    M = tn.data_tensor("conv", x.numpy(), [k1, d])
    U, sv, Vt = np.linalg.svd(M)
    assert s == pytest.approx(sv[0], rel=1e-10)
    assert tn.abs_cosine(units[0], U[:, 0]) == pytest.approx(1.0, abs=1e-10)
    assert tn.abs_cosine(units[1], Vt[0]) == pytest.approx(1.0, abs=1e-10)
    assert tn.singular_vector_residual("conv", x, units) < 1e-9
    # a generic direction is not a singular tuple
    assert tn.singular_vector_residual("conv", x, init) > 1e-2


def test_max_margin_duals_satisfy_kkt():
    """The multipliers returned with each max-margin solution satisfy its KKT conditions."""
    X, y = tn.separable_data(12, 8, 2, seed=2)
    z, nu = th.max_margin_with_duals(X, y, "l2")
    np.testing.assert_allclose(z, X.T @ (y * nu), atol=1e-6)  # z = sum nu_i y_i x_i
    z1, nu1 = th.max_margin_with_duals(X, y, "l1")
    g = X.T @ (y * nu1)  # in the subdifferential of ||.||_1 at z1
    assert np.max(np.abs(g)) <= 1 + 1e-6
    np.testing.assert_allclose(g[np.abs(z1) > 1e-6], np.sign(z1[np.abs(z1) > 1e-6]), atol=1e-5)
    assert np.all(nu1[y * (X @ z1) > 1 + 1e-6] < 1e-6)  # complementary slackness


@pytest.mark.parametrize("L", [2, 3, 4, 5])
def test_h_and_H_against_lemma4_ode(L):
    """Lemma 4 / Thm 5: the closed forms of h_L, h_L^{-1} and H_L against the ODE."""

    def rhs(t, s):
        p, q, _ = s
        return [
            p ** (L - 2) * q,
            p ** (L - 1),
            t * ((L - 1) * p ** (2 * L - 4) * q**2 + p ** (2 * L - 2)),
        ]

    t_end = min(2.5, 0.9 * th.escape_time(L))
    sol = solve_ivp(rhs, (0, t_end), [1.0, 0.0, 0.0], rtol=1e-12, atol=1e-13, dense_output=True)
    taus = np.linspace(0.05, t_end, 12)
    p, q, integral = sol.sol(taus)
    h = p ** (L - 1) * q
    np.testing.assert_allclose(p**2 - q**2, 1.0, atol=1e-9)  # the invariant used
    np.testing.assert_allclose(th.h_forward(taus, L), h, rtol=1e-9)
    np.testing.assert_allclose(th.h_inverse(h, L), taus, atol=1e-10)
    np.testing.assert_allclose(th.h_inverse(-h, L), -taus, atol=1e-10)  # odd
    np.testing.assert_allclose(th.H(h, L), integral, rtol=1e-9)
    np.testing.assert_allclose(th.H(-h, L), integral, rtol=1e-9)  # even


def test_H2_closed_form_and_asymptotics():
    y = np.array([0.3, 2.0, 50.0])
    H2 = (2 * y * np.arcsinh(2 * y) - np.sqrt(1 + 4 * y**2) + 1) / 4
    np.testing.assert_allclose(th.H(y, 2), H2, rtol=1e-12)
    # near 0 that formula cancels; the series H_2 = y^2/2 - y^4/3 + .. is the reference
    assert th.H(np.array([1e-4]), 2)[0] == pytest.approx(0.5e-8 - 1e-16 / 3, rel=1e-12)
    assert th.H(np.array([1e-4]), 3)[0] == pytest.approx(0.5e-8, rel=1e-4)  # quadratic at 0
    big = np.array([1e12])  # ~ c |t| for L >= 3 (c = pi/2 for L = 3), slowly
    assert th.H(big, 3)[0] / big[0] == pytest.approx(np.pi / 2, rel=1e-3)
    assert th.escape_time(3) == pytest.approx(np.pi / 2)


def test_q_minimizer_kkt_and_limits():
    """Newton's Q-minimizer is feasible, satisfies KKT, and for L = 2 agrees with a generic
    constrained solver (SLSQP) on a small problem."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(6)
    X, y = rng.standard_normal((3, 7)), rng.standard_normal(3)
    scale, weight = 0.3**2 * np.ones(7), 0.3**2 * np.ones(7)
    sol = th.q_minimizer(X, y, 2, scale, weight)
    np.testing.assert_allclose(X @ sol["z"], y, atol=1e-10)
    assert sol["kkt_residual"] < 1e-8
    ref = minimize(
        lambda z: th.q_value(z, 2, scale, weight),
        np.linalg.pinv(X) @ y,
        constraints={"type": "eq", "fun": lambda z: X @ z - y},
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(sol["z"], ref.x, atol=1e-5)


def test_theorem6_limit_at_zero_nu_returns_initialization():
    """If y equals the initial output, g^{-1} = 0 and the limit is the initialization."""
    setup = th.single_point_setup(6, 3, seed=1)
    a = 0.4
    y0 = float((a * setup["v1bar"]) @ setup["M"] @ (a * setup["v2bar"]))
    v1, v2, nu = th.theorem6_limit(setup["M"], y0, setup["v1bar"], setup["v2bar"], a)
    assert abs(nu) < 1e-12
    np.testing.assert_allclose(v1, a * setup["v1bar"], atol=1e-12)
    np.testing.assert_allclose(v2, a * setup["v2bar"], atol=1e-12)


def test_theorem6_out_of_range_terms_on_a_low_rank_point():
    """Band-limited x: rank M(x) < k1, so U_1 and U_2 are not square; the closed form (with
    its out-of-range terms) equals gradient flow, and without them it does not."""
    setup = th.low_rank_point_setup(10, 5, seed=0, bandwidth=2)
    U1, s, U2 = th.two_layer_svd(setup["M"], tol=1e-9)
    assert setup["m"] == len(s) == 3 and U1.shape == (5, 3) and U2.shape == (10, 3)
    assert setup["lambda"] > 0
    a, y = 0.6, 1.3
    v1, v2, _ = th.theorem6_limit(setup["M"], y, setup["v1bar"], setup["v2bar"], a)
    f1, f2 = th._two_layer_flow(setup["M"], y, a * setup["v1bar"], a * setup["v2bar"], 200.0)
    flow = np.concatenate([f1, f2])
    np.testing.assert_allclose(np.concatenate([v1, v2]), flow, atol=1e-10)
    out1 = a * (setup["v1bar"] - U1 @ (U1.T @ setup["v1bar"]))
    out2 = a * (setup["v2bar"] - U2 @ (U2.T @ setup["v2bar"]))
    without = np.concatenate([v1 - out1, v2 - out2])
    assert np.linalg.norm(without - flow) > 0.1 * np.linalg.norm(flow)


def test_cor6_printed_with_unnormalized_dft_is_the_derived_form():
    """Cor 6 read with sqrt(d) F has the derived minimizer (unitary F, d^{-(L-1)/2}); read with
    the unitary F it does not. The two Newton solves agree to round-off: at most 5.6e-15
    relative under the pinned, native (AVX-512), Prescott and Sandybridge kernels; before the
    solver's decrement was computed without cancellation, 1e-8 under the pinned ones."""
    for L, d in ((2, 12), (3, 12), (3, 9), (4, 12)):
        X, y = tn.regression_data(4, d, 1, even=True)
        wbar = tn.init_params("conv", d, L, 1.0, 2, even=True)[0].numpy()
        derived = th.q_limit(X, y, "conv", L, 0.8, wbar, "derived")
        printed = th.cor6_printed_unnormalized_dft(X, y, L, 0.8, wbar)
        unitary = th.q_limit(X, y, "conv", L, 0.8, wbar, "cor6_printed")
        np.testing.assert_allclose(X @ printed, y, atol=1e-10)
        assert np.linalg.norm(printed - derived) < 1e-13 * np.linalg.norm(derived)
        assert np.linalg.norm(unitary - derived) > 1e-2 * np.linalg.norm(derived)


def test_renormalize_keeps_single_point_directions():
    """For one data point the normalized update commutes with scaling: renormalizing after
    every step leaves the directions unchanged (and is refused for several points)."""
    setup = th.single_point_setup(8, 3, seed=0)
    params = [torch.as_tensor(0.5 * setup["v1bar"]), torch.as_tensor(0.5 * setup["v2bar"])]
    X, y = setup["x"][None], np.array([1.0])
    plain = tn.train_exponential("conv", X, y, params, 200, 0.2)
    renorm = tn.train_exponential("conv", X, y, params, 200, 0.2, renormalize=True)
    for a, b in zip(plain["params"], renorm["params"]):
        assert tn.abs_cosine(a, b) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError):
        tn.train_exponential(
            "conv", np.vstack([X, X]), np.array([1.0, 1.0]), params, 2, 0.2, renormalize=True
        )


def _exponential_problem(arch, L, seed=0):
    """The paper profile's classification problem and initialization (n = 40, d = 80)."""
    X, y = tn.separable_data(40, 80, 5, seed)
    return X, y, tn.init_params(arch, 80, L, 0.1, seed)


def _relative(a, b) -> float:
    a, b = (np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in x]) for x in (a, b))
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("arch", tn.ARCHS)
@pytest.mark.parametrize("L", [2, 3, 4])
def test_closed_form_exponential_gradients_equal_autograd_along_a_run(arch, L):
    """The closed-form gradient of log L against autograd's at points along a 1200-step
    autograd run with the paper's step rule: from w_L(0) = 0 (exactly zero gradients in the
    other layers) through the slow start and, for L <= 3, into the hard-margin regime
    (log(1/L) up to 4e16, softmax weights one-hot). Then two steps of each loop from those
    points: same parameters, beta, u, u_avg, log(1/L) and history.

    Why points and not one long run: past the onset of the hard-margin regime both loops are
    chaotic (a 1e-15 relative change of the initialization grows to 1e-1 in beta within a few
    hundred steps), so two round-offs cannot agree there; whole runs are compared over their
    first 30 steps."""
    X, y, params = _exponential_problem(arch, L)
    path = tn._train_exponential_autograd(
        arch, X, y, params, 1200, 0.05, record=range(0, 1201, 150), decay=1000
    )["history"]
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    signed_X = -yt[:, None] * Xt
    for point in path:
        leaves = [p.clone().requires_grad_(True) for p in point["params"]]
        log_loss = torch.logsumexp(-yt * tn.predict(arch, Xt, leaves), dim=0)
        expected = torch.autograd.grad(log_loss, leaves)
        theta, layers, mask = tn._layer_buffer(arch, point["params"], 80)
        beta, backward = tn._exponential_step_parts(arch, theta, layers, mask, 80)
        g = signed_X.T @ torch.softmax(signed_X @ beta, dim=0)
        theta.copy_(backward(g))  # the gradient in the buffer's layout, read back per layer
        assert _relative([p.clone() for p in layers], expected) < 1e-12
        scale = float(beta.abs().max())
        np.testing.assert_allclose(beta.numpy(), point["beta"], rtol=0, atol=1e-13 * scale)

        steps = [
            loop(arch, X, y, point["params"], 2, 0.05, record=[0, 1, 2], decay=1000)
            for loop in (tn.train_exponential, tn._train_exponential_autograd)
        ]
        fast, slow = steps
        assert _relative(fast["params"], slow["params"]) < 1e-13
        assert _relative([fast["beta"]], [slow["beta"]]) < 1e-13
        for key in ("u", "u_avg"):
            assert _relative([fast[key]], [slow[key]]) < 1e-12
        assert fast["log_inv_loss"] == pytest.approx(slow["log_inv_loss"], rel=1e-13, abs=1e-13)
        assert [h["step"] for h in fast["history"]] == [h["step"] for h in slow["history"]]
        for a, b in zip(fast["history"], slow["history"]):
            assert [p.shape for p in a["params"]] == [p.shape for p in b["params"]]
            assert _relative(a["params"], b["params"]) < 1e-13
            assert a["log_inv_loss"] == pytest.approx(b["log_inv_loss"], rel=1e-13, abs=1e-13)
    # L <= 3 reach the hard-margin regime; L = 4 is still leaving its slow start at 1200 steps
    assert max(point["log_inv_loss"] for point in path) > (1e3 if L < 4 else -2.5)

    fast, slow = (
        loop(arch, X, y, params, 30, 0.05, record=[1, 10, 30], decay=1000)
        for loop in (tn.train_exponential, tn._train_exponential_autograd)
    )
    assert _relative(fast["params"], slow["params"]) < 1e-10
    assert _relative([fast["u_avg"]], [slow["u_avg"]]) < 1e-10


def test_closed_form_exponential_loop_with_short_filters_and_renormalization():
    """Thm 3's runs: a conv net with filters (k1, d), one point, renormalized every step (not
    chaotic: the normalized update is linear). The zero-padded closed form keeps the short
    filter's shape and follows the autograd loop over 500 steps."""
    setup = th.single_point_setup(10, 4, seed=1)
    params = [torch.as_tensor(0.5 * setup["v1bar"]), torch.as_tensor(0.5 * setup["v2bar"])]
    X, y = setup["x"][None], np.array([-1.0])
    fast, slow = (
        loop("conv", X, y, params, 500, 0.2, record=[0, 250, 500], renormalize=True)
        for loop in (tn.train_exponential, tn._train_exponential_autograd)
    )
    assert [p.shape for p in fast["params"]] == [(4,), (10,)]
    assert _relative(fast["params"], slow["params"]) < 1e-10
    assert _relative([fast["u_avg"]], [slow["u_avg"]]) < 1e-10
    assert _relative(fast["history"][1]["params"], slow["history"][1]["params"]) < 1e-10
    assert fast["log_inv_loss"] == pytest.approx(slow["log_inv_loss"], rel=1e-10)
    with pytest.raises(ValueError, match="k_L = d"):
        tn.train_exponential("conv", X, y, params[::-1], 1, 0.2)


def test_fourier_l1_max_margin_feasible_and_lp_stationary_point():
    X, y = tn.separable_data(10, 8, 2, seed=1)
    z = th.fourier_l1_max_margin(X, y)
    assert np.min(y * (X @ z)) == pytest.approx(1.0, abs=1e-6)
    st = th.lp_stationary_point(X, y, 3, np.ones(8) + 0.1 * np.arange(8))
    assert np.min(y * (X @ st["z"])) >= 1 - 1e-6
    assert np.all(np.diff(st["objective"]) <= 1e-6)  # majorize-minimize never goes up


def test_even_part_and_real_dft_of_even_vectors():
    rng = np.random.default_rng(7)
    v = tn.even_part(rng.standard_normal(9))
    np.testing.assert_allclose(v, v[(-np.arange(9)) % 9])
    np.testing.assert_allclose((tn.dft_matrix(9) @ v).imag, 0, atol=1e-12)


@pytest.mark.parametrize("arch", ["diag", "conv"])
@pytest.mark.parametrize("L", [2, 3, 4])
def test_closed_form_square_loss_parts_equal_autograd(arch, L):
    """Loss, layer gradients and output Jacobian of `square_loss_parts` against autograd, with a
    zero last layer (Cor. 5's w_L(0) = 0) among the cases; a wrong conjugation in the conv
    gradient (the check's broken input) misses by far more than round-off."""
    gen = torch.Generator().manual_seed(L)
    n, d = 7, 12
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    for last in (1.0, 0.0):
        params = [torch.randn(d, generator=gen, dtype=torch.float64) for _ in range(L)]
        params[-1] = last * params[-1]
        loss, grads, J = tn.square_loss_parts(arch, X, y, params, jacobian=True)
        leaves = [p.clone().requires_grad_(True) for p in params]
        ref_loss = 0.5 * ((tn.predict(arch, X, leaves) - y) ** 2).sum()
        ref_grads = torch.autograd.grad(ref_loss, leaves)
        jac = torch.autograd.functional.jacobian(lambda *ps: tn.predict(arch, X, ps), tuple(params))
        ref_J = torch.cat([j.reshape(n, -1) for j in jac], dim=1)
        assert float(loss) == pytest.approx(float(ref_loss.detach()), rel=1e-13)
        for g, r in zip(grads, ref_grads):
            assert torch.allclose(g, r, rtol=1e-12, atol=1e-12 * float(r.abs().max() + 1))
        assert torch.allclose(J, ref_J, rtol=1e-12, atol=1e-12 * float(ref_J.abs().max()))
        if arch == "conv" and last:  # broken input: correlate without the conjugate
            others = tn._all_but_one("conv", params)
            g = X.T @ (X @ tn.linear_coefficients("conv", params, d) - y)
            wrong = torch.fft.irfft(torch.fft.rfft(g) * others[0], n=d)
            assert float((wrong - ref_grads[0]).norm() / ref_grads[0].norm()) > 1e-2
    with pytest.raises(ValueError, match="diag and conv"):
        tn.square_loss_parts("fc", X, y, params, jacobian=False)


@pytest.mark.parametrize("arch", ["diag", "conv"])
@pytest.mark.parametrize("L", [2, 3])
def test_train_square_closed_form_follows_the_autograd_path(arch, L):
    """The closed-form training loop takes the autograd loop's steps: after 3000 steps from
    Cor. 5 / 6's initialization (w_L(0) = 0, the step rule's both regimes) the two are at the
    same point to round-off; the paper's runs reached the same limits to 1e-15 relative."""
    even = arch == "conv"
    X, y = tn.regression_data(6, 12, 0, even=even)
    wbar = tn.init_params(arch, 12, L, 1.0, 1, even=even)[0]
    params = [0.5 * wbar.clone() for _ in range(L - 1)] + [torch.zeros(12, dtype=torch.float64)]
    fast = tn.train_square(arch, X, y, params, 3000, 0.01, 0.1, tol=0.0)
    slow = tn._train_square_autograd(
        arch, torch.as_tensor(X), torch.as_tensor(y), params, 3000, 0.01, 0.1, 0.0, 25
    )
    assert fast["steps"] == slow["steps"] == 3000
    assert fast["loss"] < 1e-3 * float(y @ y)  # well into the fit, not at the start
    rel = np.linalg.norm(fast["beta"] - slow["beta"]) / np.linalg.norm(slow["beta"])
    assert rel < 1e-12


def test_train_square_reports_whether_it_met_its_target():
    """`converged` comes from the loss the loop stopped on: the step cap leaves it False."""
    X, y = tn.regression_data(3, 6, 0)
    params = [torch.full((6,), 0.5, dtype=torch.float64), torch.zeros(6, dtype=torch.float64)]
    done = tn.train_square("diag", X, y, params, 200000, 0.02, 0.2)
    assert done["converged"] and done["steps"] < 200000
    capped = tn.train_square("diag", X, y, params, 50, 0.02, 0.2)
    assert not capped["converged"] and capped["steps"] == 50 and capped["loss"] > 1e-24


def test_lp_stationary_point_reports_its_iteration_cap():
    X, y = tn.separable_data(6, 8, 2, 0)
    z0 = np.ones(8) + 0.1 * np.arange(8)
    st = th.lp_stationary_point(X, y, 3, z0)
    assert st["converged"] and st["last_change"] < th.IRL1_TOL
    capped = th.lp_stationary_point(X, y, 3, z0, iters=1)
    assert not capped["converged"] and capped["iterations"] == 1


def test_fourier_l1_max_margin_is_solved_to_the_solvers_tolerance():
    X, y = tn.separable_data(12, 16, 2, 0)
    z, nu, status = th.max_margin_solve(X, y, "fourier_l1")
    assert status == "optimal" and np.min(y * (X @ z)) > 1 - 1e-6
