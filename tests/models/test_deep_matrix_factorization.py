"""Tests of implicit_bias.models.deep_matrix_factorization against independent computations:
autograd for the chain rule, the definition of balancedness, numpy's SVD, a closed form of the
nuclear-norm program, and Theorem 3's equation with a gap that shrinks with the step (and
fails when the theorem's balancedness assumption is broken)."""

import numpy as np
import pytest
import torch

from implicit_bias.models.deep_matrix_factorization import (
    balanced_init,
    effective_rank,
    factor_gradients,
    gaussian_init,
    ground_truth,
    loss_gradient,
    min_nuclear_norm_completion,
    observation_masks,
    ode_integrated,
    product,
    rate_exponent,
    singular_value_dynamics,
    tail_share,
    train_completion,
    train_completion_authors,
)

torch.set_num_threads(1)


def test_ground_truth_has_the_rank_and_the_scale():
    w = ground_truth(20, 3, seed=0)
    s = np.linalg.svd(w, compute_uv=False)
    assert np.isclose(np.linalg.norm(w), 20) and s[2] > 1e-6 and s[3] < 1e-10


def test_masks_are_nested_and_have_the_counts():
    masks = observation_masks(10, [5, 30, 60], seed=1)
    assert masks.sum(axis=(1, 2)).tolist() == [5, 30, 60]
    assert not (masks[0] & ~masks[1]).any() and not (masks[1] & ~masks[2]).any()
    with pytest.raises(ValueError):
        observation_masks(10, [101], seed=1)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_balanced_init_is_balanced_with_the_scale(depth):
    ws = balanced_init(6, depth, 1e-2, batch=2, seed=0)
    for a, b in zip(ws, ws[1:]):  # W_{j+1}^T W_{j+1} = W_j W_j^T
        assert torch.allclose(b.transpose(1, 2) @ b, a @ a.transpose(1, 2), atol=1e-15)
    s = torch.linalg.svdvals(product(ws))
    assert torch.allclose(s, torch.full_like(s, 1e-2), rtol=1e-10)


def test_factor_gradients_match_autograd():
    gen = torch.Generator().manual_seed(3)
    ws = [
        torch.randn(2, 5, 5, generator=gen, dtype=torch.float64, requires_grad=True)
        for _ in range(3)
    ]
    target = torch.randn(2, 5, 5, generator=gen, dtype=torch.float64)
    mask = (torch.rand(2, 5, 5, generator=gen) < 0.5).double()
    w = product(ws)
    loss = ((mask * (w - target)) ** 2).sum(dim=(1, 2)) / (2 * mask.sum(dim=(1, 2)))
    loss.sum().backward()
    ours = factor_gradients([x.detach() for x in ws], loss_gradient(w.detach(), target, mask))
    for a, x in zip(ours, ws):
        assert torch.allclose(a, x.grad, atol=1e-13)


def test_completion_converges_and_a_cap_is_unconverged():
    target = ground_truth(12, 1, seed=0)
    masks = observation_masks(12, [80], seed=0)
    lr = 144 / (2 * np.linalg.norm(target, 2))
    run = train_completion(target, masks, 2, 1e-3, lr, 5000, 1e-8, seed=0, adaptive=False)
    assert run.converged.all() and run.train_mse[0] <= 1e-8
    # 80 of 144 entries of a rank-one matrix: recovered approximately (2.4% at depth 2 from 1e-3;
    # the residual error is the implicit bias's, not the optimizer's: the fit is to 1e-8)
    assert np.linalg.norm(run.w[0] - target) / np.linalg.norm(target) < 0.05
    capped = train_completion(target, masks, 2, 1e-3, lr, 3, 1e-8, seed=0, adaptive=False)
    assert not capped.converged.any() and capped.steps[0] == 3


def test_nuclear_norm_completion_with_every_entry_observed_is_the_matrix():
    """All entries observed: the only feasible point is W* itself (closed form)."""
    target = ground_truth(6, 2, seed=2)
    x, status = min_nuclear_norm_completion(target, np.ones((6, 6), bool), "SCS")
    assert status == "optimal" and np.allclose(x, target, atol=1e-5)


def test_nuclear_norm_completion_meets_the_rank_one_lower_bound():
    """One missing entry of a rank-one matrix: filling it in by the rank-one value gives
    nuclear norm = Frobenius norm, the smallest possible, so the solver must find it."""
    u = np.array([1.0, 2.0, -1.0, 0.5])
    target = np.outer(u, u[::-1])
    mask = np.ones((4, 4), bool)
    mask[0, 0] = False
    x, status = min_nuclear_norm_completion(target, mask, "SCS")
    assert status == "optimal"
    assert np.isclose(np.linalg.norm(x, "nuc"), np.linalg.norm(target, "nuc"), rtol=1e-6)


def test_a_capped_nuclear_norm_solve_is_not_optimal():
    target = ground_truth(10, 2, seed=0)
    mask = observation_masks(10, [50], seed=0)[0]
    _, status = min_nuclear_norm_completion(target, mask, "SCS", eps=1e-12, max_iters=5)
    assert status != "optimal"


def test_tail_share():
    assert tail_share(np.diag([3.0, 1.0, 0.0]), 2) == 0.0
    assert np.isclose(tail_share(np.diag([3.0, 1.0, 1.0]), 2), 0.2)


def _dynamics(depth, lr_factor, init="balanced", scale=1e-3, horizon=150):
    target = ground_truth(8, 2, seed=0)
    mask = observation_masks(8, [44], seed=0)[0]
    base = 64 / (depth * np.linalg.norm(target, 2) ** (2 - 2 / depth))
    run = singular_value_dynamics(
        target, mask, depth, scale, lr_factor * base, horizon * base, 2, seed=0, init=init
    )
    gap = np.abs(ode_integrated(run.sigma, run.ode_rate, lr_factor * base) - run.sigma).max()
    return run, gap / run.sigma[-1, 0], lr_factor * base


@pytest.mark.parametrize("depth", [2, 3])
def test_theorem3_gap_shrinks_linearly_with_the_step(depth):
    _, gap_a, _ = _dynamics(depth, 0.1)
    _, gap_b, _ = _dynamics(depth, 0.05)
    assert gap_b < 0.01
    assert 0.8 < np.log(gap_a / gap_b) / np.log(2) < 1.2


def test_theorem3_fails_without_balancedness():
    """Break the theorem's assumption: i.i.d. factors at a non-small scale are far from
    balanced, and the equation no longer describes the singular values."""
    _, gap_balanced, _ = _dynamics(3, 0.05)
    _, gap_unbalanced, _ = _dynamics(3, 0.05, init="gaussian", scale=1.0)
    assert gap_unbalanced > 20 * gap_balanced and gap_unbalanced > 0.05


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_rate_exponent_is_one_minus_one_over_depth(depth):
    run, _, lr = _dynamics(depth, 0.05, horizon=400)  # depth 4 leaves 1e-3 later
    slope, points = rate_exponent(run.sigma, run.inner, lr, 1e-2)
    assert points > 100 and abs(slope - (1 - 1 / depth)) < 0.02


def test_rate_exponent_sees_the_rates_not_the_formula():
    """The fit uses measured rates only: singular values planted to move by d sigma/dt =
    -<grad, u v^T> (exponent 0) beside a depth-3 run's inner products are read back as 0."""
    run, _, lr = _dynamics(3, 0.05)
    planted = run.sigma[0] - lr * np.vstack([np.zeros((1, 2)), np.cumsum(run.inner[:-1], axis=0)])
    slope, _ = rate_exponent(np.abs(planted), run.inner, lr, 1e-2)
    assert abs(slope) < 0.05


def _group_rmsprop_by_autograd(
    target, mask, weights, steps, lr=1e-3, alpha=0.99, eps=1e-4, group=True
):
    """The authors' loop written independently: autograd on the factors, one parameter at a
    time, and GroupRMSprop's update as their opt.py states it (float32). `group=False` keeps
    one running mean per factor instead (torch's RMSprop with a scalar per tensor)."""
    params = [w.clone().requires_grad_(True) for w in weights]
    square_avg = torch.tensor(0.0)
    per_factor = [torch.tensor(0.0) for _ in params]
    for k in range(1, steps + 1):
        e2e = params[0]
        for p in params[1:]:
            e2e = p @ e2e
        loss = ((e2e - target)[mask] ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        square_avg = square_avg * alpha
        for p in params:
            square_avg = square_avg + (1 - alpha) * (p.grad**2).sum()
        step = lr / ((square_avg / (1 - alpha**k)).sqrt() + eps)
        with torch.no_grad():
            for j, p in enumerate(params):
                if not group:
                    per_factor[j] = per_factor[j] * alpha + (1 - alpha) * (p.grad**2).sum()
                    step = lr / ((per_factor[j] / (1 - alpha**k)).sqrt() + eps)
                p -= step * p.grad
    e2e = params[0]
    for p in params[1:]:
        e2e = p @ e2e
    return e2e.detach()


@pytest.mark.parametrize("depth", [2, 3])
def test_authors_protocol_matches_group_rmsprop_by_autograd(depth):
    n, steps = 6, 25
    target = torch.as_tensor(ground_truth(n, 2, seed=4), dtype=torch.float32)
    mask = torch.as_tensor(observation_masks(n, [20], seed=4)[0])
    ws = gaussian_init(n, depth, [0.3], seed=7)
    ref = _group_rmsprop_by_autograd(target, mask, [w[0] for w in ws], steps)
    run = train_completion_authors(
        target[None].numpy(), mask[None].numpy(), depth, [0.3], seed=7, max_steps=steps
    )
    assert run.steps[0] == steps and not run.converged[0]
    assert np.allclose(run.w[0], ref.numpy(), rtol=1e-4, atol=1e-6)
    # the update moved the factors well beyond that tolerance, so the comparison can fail
    start = product(ws)[0]
    assert np.abs(ref.numpy() - start.numpy()).max() > 1e-3
    # and one running mean per factor (plain RMSprop's grouping) gives another trajectory: the
    # check sees what makes the optimizer GroupRMSprop
    other = _group_rmsprop_by_autograd(target, mask, [w[0] for w in ws], steps, group=False)
    assert not np.allclose(run.w[0], other.numpy(), rtol=1e-4, atol=1e-6)


def test_authors_first_step_by_hand():
    """One 1 x 1 'matrix', depth 2, factors a and b: loss (ab - y)^2, grads 2(ab - y)(b, a);
    v = (1 - alpha) |g|^2, bias-corrected to |g|^2, so the step is lr g / (|g| + eps)."""
    torch.manual_seed(0)
    ws = gaussian_init(1, 2, [0.5], seed=3)
    a, b = float(ws[0][0, 0, 0]), float(ws[1][0, 0, 0])
    y = 2.0
    r = a * b - y
    ga, gb = 2 * r * b, 2 * r * a
    c = 1e-3 / (np.hypot(ga, gb) + 1e-4)
    expected = (a - c * ga) * (b - c * gb)
    run = train_completion_authors(
        np.full((1, 1, 1), y), np.ones((1, 1, 1), bool), 2, [0.5], seed=3, max_steps=1
    )
    assert np.isclose(run.w[0, 0, 0], expected, rtol=1e-6)
    assert not np.isclose(run.w[0, 0, 0], a * b, rtol=1e-6)


def test_authors_gaussian_init_has_their_end_to_end_norm():
    ws = gaussian_init(100, 3, [1e-3, 1e-5], seed=0)
    fro = torch.linalg.matrix_norm(product(ws).double()).numpy()
    ratio = fro / (np.array([1e-3, 1e-5]) * 10.0)
    assert ws[0].dtype == torch.float32 and np.all((0.8 <= ratio) & (ratio <= 1.2))


def test_authors_protocol_stops_at_their_threshold():
    target = ground_truth(12, 1, seed=2)
    masks = observation_masks(12, [60], seed=2)
    run = train_completion_authors(target[None], masks, 2, [1e-3], seed=0, lr=1e-2, max_steps=20000)
    assert run.converged[0] and run.train_mse[0] <= 1e-6
    capped = train_completion_authors(target[None], masks, 2, [1e-3], seed=0, lr=1e-2, max_steps=10)
    assert not capped.converged[0] and capped.steps[0] == 10


def test_effective_rank():
    assert np.isclose(effective_rank(np.diag([3.0, 3.0, 3.0, 0.0])), 3.0, rtol=1e-8)
    p = np.array([2.0, 1.0]) / 3
    assert np.isclose(
        effective_rank(np.diag([2.0, 1.0])), np.exp(-(p * np.log(p)).sum()), rtol=1e-8
    )
    # invariant under rotations and scale, below the count of non-zero singular values
    q = np.linalg.qr(np.random.default_rng(0).standard_normal((4, 4)))[0]
    w = q @ np.diag([5.0, 1.0, 0.1, 0.0])
    assert np.isclose(effective_rank(w), effective_rank(7 * w.T), rtol=1e-8)
    assert 1.0 < effective_rank(w) < 3.0
