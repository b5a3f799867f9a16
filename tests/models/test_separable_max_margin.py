"""Tests of implicit_bias.models.separable_max_margin against independent computations."""

import numpy as np
import pytest
import torch

from implicit_bias.models import separable_max_margin as m


def test_figure1_data_and_the_qp_give_the_papers_max_margin_vector():
    data = m.separable_dataset(0, "figure1")
    assert np.allclose(data.w_hat, [0.5, 0.5])
    svm = m.hard_margin_svm(data.Z)
    assert svm.status == "optimal"
    assert np.allclose(svm.w, [0.5, 0.5], atol=1e-7)
    # KKT: w_hat = sum alpha_n z_n, alpha >= 0, and sum alpha = ||w_hat||^2 (margins are 1)
    assert np.allclose(data.Z.T @ svm.alpha, svm.w, atol=1e-7)
    assert svm.alpha.min() > -1e-9
    assert np.isclose(svm.alpha.sum(), svm.w @ svm.w, atol=1e-7)
    assert list(m.support_indices(data.Z, svm.w)) == [0, 1, 2, 3]
    assert (data.Z[4:] @ svm.w).min() >= 1.5 - 1e-9  # the off-margin points keep their gap


def test_generic_data_are_built_around_their_max_margin_vector():
    for seed in range(3):
        data = m.separable_dataset(seed, "generic")
        svm = m.hard_margin_svm(data.Z)
        assert np.linalg.norm(svm.w - data.w_hat) < 1e-6
        S = m.support_indices(data.Z, svm.w)
        assert m.support_rate(data.Z[S], svm.alpha[S]) >= 0.2 - 1e-9


def test_the_qp_reports_non_separable_data():
    data = m.separable_dataset(0, "figure1")
    Z = data.Z.copy()
    Z[0] = -Z[0]  # the point and its mirror image now carry opposite labels: not separable
    Z[2] = -Z[2]
    Z = np.concatenate([Z, -Z[:1]])
    svm = m.hard_margin_svm(Z)
    assert svm.status != "optimal" and svm.w is None


def test_residual_limit_solves_its_defining_relation():
    data = m.separable_dataset(1, "generic")
    svm = m.hard_margin_svm(data.Z)
    for eta in (0.01, 0.1):
        w_tilde = m.residual_limit(data.Z, svm.w, eta)
        S = data.Z[m.support_indices(data.Z, svm.w)]
        assert np.allclose(eta * (np.exp(-S @ w_tilde)[:, None] * S).sum(0), svm.w, atol=1e-11)


def test_residual_limit_needs_spanning_support_vectors():
    data = m.separable_dataset(0, "figure1", x2_scale=20.0)
    svm = m.hard_margin_svm(data.Z)
    with pytest.raises(ValueError, match="do not span"):
        m.residual_limit(data.Z, svm.w, 0.01)


def _numpy_heavy_ball(Z, loss, eta, gamma, steps):
    """An independent loop: plain numpy, one run."""
    w, v = np.zeros(Z.shape[1]), np.zeros(Z.shape[1])
    for _ in range(steps):
        u = Z @ w
        g = 1 / (1 + np.exp(u)) if loss == "logistic" else np.exp(-u)
        v = gamma * v + eta * Z.T @ g
        w = w + v
    return w


@pytest.mark.parametrize("loss", ["logistic", "exp"])
def test_heavy_ball_matches_a_plain_loop(loss):
    Z = np.stack([m.separable_dataset(s, "generic").Z for s in (0, 1)])
    W = m.heavy_ball(Z, loss, [0.01, 0.02], [0.0, 0.9], [50, 300])
    for i, eta in enumerate([0.01, 0.02]):
        for j, gamma in enumerate([0.0, 0.9]):
            for k, steps in enumerate([50, 300]):
                ref = _numpy_heavy_ball(Z[i], loss, eta, gamma, steps)
                assert np.allclose(W[2 * i + j, k], ref, rtol=1e-12, atol=1e-12)


def test_adam_matches_torch_optim_adam():
    Z = m.separable_dataset(0, "figure1", x2_scale=20.0).Z
    W = m.adam(Z[None], "logistic", 1e-2, [10, 200])
    w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([w], lr=1e-2)
    Zt = torch.as_tensor(Z)
    for step in range(1, 201):
        opt.zero_grad()
        torch.nn.functional.softplus(-(Zt @ w)).sum().backward()
        opt.step()
        if step in (10, 200):
            assert np.allclose(W[0, [10, 200].index(step)], w.detach().numpy(), rtol=1e-10)


def test_gradient_descent_residual_approaches_w_tilde_at_the_predicted_rate():
    """Theorem 3 at small size: rho(t) = w(t) - w_hat log t tends to w_tilde, its error
    shrinking like t^-p between 10^3 and 10^5 steps. With the wrong step in w_tilde (a broken
    input) the error does not shrink."""
    data = m.separable_dataset(0, "generic")
    svm = m.hard_margin_svm(data.Z)
    eta = 1 / np.linalg.norm(data.X, 2) ** 2
    p = m.residual_decay_exponent(data.Z, svm.w, svm.alpha)
    W = m.heavy_ball(data.Z[None], "logistic", [eta], [0.0], [1000, 100_000])[0]
    rho = W - np.log([1000, 100_000])[:, None] * svm.w
    error = np.linalg.norm(rho - m.residual_limit(data.Z, svm.w, eta), axis=1)
    measured = -np.log(error[1] / error[0]) / np.log(100)
    assert 0.7 * p < measured < 1.5 * p
    wrong = np.linalg.norm(rho - m.residual_limit(data.Z, svm.w, 2 * eta), axis=1)
    assert wrong[1] > 5 * error[1]


def test_residual_decay_exponent_of_figure1_is_the_perpendicular_eigenvalue():
    data = m.separable_dataset(0, "figure1")
    svm = m.hard_margin_svm(data.Z)
    # sum alpha z z^T with alpha = 1/8 on four points: eigenvalues 1 along (1, 1), 1/4 across
    assert np.isclose(m.residual_decay_exponent(data.Z, svm.w, svm.alpha), 0.25, atol=1e-7)


def test_log_checkpoints_hold_the_window():
    points = m.log_checkpoints(200_000, 5)
    assert points[0] == 1 and points[-1] == 200_000 and 2000 in points
    assert points == sorted(set(points))


def test_loss_and_gaps_against_direct_formulas():
    Z = np.array([[1.0, 2.0], [2.0, 0.5]])
    w = np.array([0.3, -0.1])
    u = Z @ w
    assert np.isclose(m.loss_value(Z, w, "logistic"), np.log1p(np.exp(-u)).sum())
    assert np.isclose(m.loss_value(Z, w, "exp"), np.exp(-u).sum())
    w_hat = np.array([1.0, 1.0])
    cos = w @ w_hat / (np.linalg.norm(w) * np.sqrt(2))
    assert np.isclose(m.angle_gap(w, w_hat), 1 - cos)
    assert np.isclose(m.direction_gap(w, w_hat), np.sqrt(2 - 2 * cos))
    assert np.isclose(m.margin_gap(Z, w, w_hat), 1 / np.sqrt(2) - u.min() / np.linalg.norm(w))
    # far out, the logistic loss keeps its accuracy: log(1 + e^-u) = e^-u to round-off
    far = 40 * w_hat
    assert np.isclose(
        m.loss_value(Z, far, "logistic"), np.exp(-(Z @ far)).sum(), rtol=1e-12, atol=0
    )
