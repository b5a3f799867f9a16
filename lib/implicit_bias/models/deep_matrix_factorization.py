"""Deep matrix factorization (Arora, Cohen, Hu & Luo, 2019): matrix completion with a depth-N
linear factorization W = W_N ... W_1 trained by gradient descent from a small balanced
initialization, the minimum nuclear-norm completion it is compared with, and the singular-value
dynamics of Theorem 3 (Sec. 3).

Pure numerics: numpy, torch and cvxpy only. Every training routine runs a batch of independent
problems (seeds, observation counts) as one tensor program (`torch.bmm`), in float64; the
authors' protocol (`train_completion_authors`) runs in float32, as their code does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch


def ground_truth(n: int, rank: int, seed: int) -> np.ndarray:
    """A random n x n matrix of rank `rank`, U V^T with Gaussian factors, scaled so that its
    Frobenius norm is n (entries of root-mean-square 1), as in the authors' `gen_gt.py`."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, rank))
    v = rng.standard_normal((n, rank))
    w = u @ v.T
    return w * (n / np.linalg.norm(w))


def observation_masks(n: int, counts: list[int], seed: int) -> np.ndarray:
    """Boolean masks (len(counts), n, n) of observed entries, drawn uniformly without
    replacement. The masks are nested: the first `counts[k]` entries of one random order of all
    n^2 entries, so that a larger count observes everything a smaller one does."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n * n)
    masks = np.zeros((len(counts), n * n), dtype=bool)
    for k, m in enumerate(counts):
        if not 0 < m <= n * n:
            raise ValueError(f"an observation count must lie in [1, {n * n}], got {m}")
        masks[k, order[:m]] = True
    return masks.reshape(len(counts), n, n)


def balanced_init(n: int, depth: int, scale: float, batch: int, seed: int) -> list[torch.Tensor]:
    """Balanced factors with W_N ... W_1 = scale * (an orthogonal matrix): W_j = a Q_j Q_{j-1}^T
    with random orthogonal Q_0, ..., Q_N and a = scale^(1/N), so that W_{j+1}^T W_{j+1} =
    W_j W_j^T = a^2 I (the balancedness Theorem 3 assumes) and every singular value of the
    product is `scale`. One independent draw per batch element; float64."""
    gen = torch.Generator().manual_seed(int(seed))
    a = scale ** (1.0 / depth)
    qs = [
        torch.linalg.qr(torch.randn(batch, n, n, generator=gen, dtype=torch.float64))[0]
        for _ in range(depth + 1)
    ]
    return [a * torch.bmm(qs[j + 1], qs[j].transpose(1, 2)) for j in range(depth)]


def product(weights: list[torch.Tensor]) -> torch.Tensor:
    """The end-to-end matrix W_N ... W_1 (batched)."""
    w = weights[0]
    for f in weights[1:]:
        w = torch.bmm(f, w)
    return w


def loss_gradient(w: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The gradient with respect to the end-to-end matrix W of the completion loss
    l(W) = sum over observed (i, j) of (W_ij - W*_ij)^2 / (2 m), m the number of observations
    of each problem: P_Omega(W - W*) / m."""
    m = mask.sum(dim=(1, 2), keepdim=True)
    return mask * (w - target) / m


def factor_gradients(weights: list[torch.Tensor], g: torch.Tensor) -> list[torch.Tensor]:
    """Gradients of l(W_N ... W_1) with respect to each factor, by the chain rule:
    dl/dW_j = (W_N ... W_{j+1})^T G (W_{j-1} ... W_1)^T, with G = dl/dW."""
    depth = len(weights)
    n = weights[0].shape[-1]
    eye = torch.eye(n, dtype=g.dtype).expand_as(g)
    prefix = [eye]  # prefix[j] = W_j ... W_1 (prefix[0] = I)
    for f in weights:
        prefix.append(torch.bmm(f, prefix[-1]))
    grads: list[torch.Tensor] = []  # from the last factor to the first
    suffix = eye  # W_N ... W_{j+1}
    for j in range(depth - 1, -1, -1):
        grads.append(torch.bmm(torch.bmm(suffix.transpose(1, 2), g), prefix[j].transpose(1, 2)))
        suffix = torch.bmm(suffix, weights[j])
    return grads[::-1]


def _prefixes(weights: list[torch.Tensor]) -> list[torch.Tensor]:
    """[W_1, W_2 W_1, ..., W_N ... W_1]: the last is the end-to-end matrix."""
    out = [weights[0]]
    for f in weights[1:]:
        out.append(torch.bmm(f, out[-1]))
    return out


def _chain_gradients(
    weights: list[torch.Tensor], prefix: list[torch.Tensor], g: torch.Tensor
) -> list[torch.Tensor]:
    """dl/dW_j = (W_N ... W_{j+1})^T G (W_{j-1} ... W_1)^T from the prefixes of `_prefixes`,
    without products by the identity (the chain rule of `factor_gradients`, 3N - 3 products
    instead of 4N)."""
    depth = len(weights)
    grads: list[torch.Tensor] = []
    suffix = None  # W_N ... W_{j+1}
    for j in range(depth - 1, -1, -1):
        left = g if suffix is None else torch.bmm(suffix.transpose(1, 2), g)
        grads.append(left if j == 0 else torch.bmm(left, prefix[j - 1].transpose(1, 2)))
        if j > 0:
            suffix = weights[j] if suffix is None else torch.bmm(suffix, weights[j])
    return grads[::-1]


@dataclass
class CompletionRun:
    w: np.ndarray  # (batch, n, n) end-to-end matrices at the stop
    steps: np.ndarray  # (batch,) steps taken
    converged: np.ndarray  # (batch,) whether the training loss reached `tol`
    train_mse: np.ndarray  # (batch,) mean squared error on the observed entries at the stop


def train_completion(
    target: np.ndarray,
    masks: np.ndarray,
    depth: int,
    scale: float,
    lr: float,
    max_steps: int,
    tol: float,
    seed: int,
    adaptive: bool = True,
    alpha: float = 0.99,
) -> CompletionRun:
    """Gradient descent on the factors of a batch of completion problems (targets (B, n, n) or
    one (n, n) target for all, masks (B, n, n)), each from its own balanced initialization of
    end-to-end scale `scale`, until each problem's mean squared error on its observed entries
    is at most `tol` (that problem's factors then stay where they are) or `max_steps`.

    `adaptive=True` scales each problem's step by one scalar, lr / sqrt(a running mean of its
    squared gradient norm), the authors' `GroupRMSprop` (alpha 0.99): every step still follows
    the negative gradient, so the iterates track the same gradient flow, on another clock.
    `adaptive=False` is plain gradient descent with step `lr`."""
    tgt = torch.as_tensor(target, dtype=torch.float64)
    msk = torch.as_tensor(masks, dtype=torch.float64)
    batch, n = msk.shape[0], msk.shape[-1]
    if tgt.dim() == 2:
        tgt = tgt.expand(batch, n, n)
    weights = balanced_init(n, depth, scale, batch, seed)
    # Problems that meet the stopping rule leave the batch (their end-to-end matrix is kept),
    # so that the remaining ones do not pay for them.
    idx = torch.arange(batch)
    w_out = torch.zeros(batch, n, n, dtype=torch.float64)
    steps = torch.full((batch,), max_steps, dtype=torch.int64)
    mse_out = torch.zeros(batch, dtype=torch.float64)
    converged = torch.zeros(batch, dtype=torch.bool)
    sq_avg = torch.zeros(batch, dtype=torch.float64)
    for k in range(max_steps + 1):
        prefix = _prefixes(weights)
        w = prefix[-1]
        t, mk = tgt[idx], msk[idx]
        mse = ((mk * (w - t)) ** 2).sum(dim=(1, 2)) / mk.sum(dim=(1, 2))
        done = mse <= tol
        if k == max_steps:
            done = torch.ones_like(done)
        if bool(done.any()):
            w_out[idx[done]], mse_out[idx[done]] = w[done], mse[done]
            steps[idx[done]] = k
            converged[idx[done]] = mse[done] <= tol
            keep = ~done
            idx, sq_avg = idx[keep], sq_avg[keep]
            weights = [f[keep] for f in weights]
            prefix = [f[keep] for f in prefix]
            w, t, mk = w[keep], t[keep], mk[keep]
        if len(idx) == 0:
            break
        grads = _chain_gradients(weights, prefix, loss_gradient(w, t, mk))
        if adaptive:
            sq = sum((gr**2).sum(dim=(1, 2)) for gr in grads)
            sq_avg = alpha * sq_avg + (1 - alpha) * sq
            step = lr / (torch.sqrt(sq_avg / (1 - alpha ** (k + 1))) + 1e-12)
        else:
            step = torch.full((len(idx),), lr, dtype=torch.float64)
        weights = [f - step.view(-1, 1, 1) * gr for f, gr in zip(weights, grads)]
    return CompletionRun(w_out.numpy(), steps.numpy(), converged.numpy(), mse_out.numpy())


def gaussian_init(
    n: int, depth: int, scales: list[float], seed: int, dtype: torch.dtype = torch.float32
) -> list[torch.Tensor]:
    """The authors' Gaussian initialization (their `main.py`, `initialization = 'gaussian'`):
    every entry of every factor i.i.d. N(0, std^2) with std = scale^(1/N) / sqrt(n), so that the
    end-to-end matrix has Frobenius norm about scale * sqrt(n) (the norm of a balanced start
    whose singular values are all `scale`). One draw per entry of `scales` (the batch)."""
    gen = torch.Generator().manual_seed(int(seed))
    std = torch.tensor([a ** (1.0 / depth) / np.sqrt(n) for a in scales], dtype=torch.float64)
    return [
        (
            std.view(-1, 1, 1) * torch.randn(len(scales), n, n, generator=gen, dtype=torch.float64)
        ).to(dtype)
        for _ in range(depth)
    ]


def train_completion_authors(
    targets: np.ndarray,
    masks: np.ndarray,
    depth: int,
    scales: list[float],
    seed: int,
    lr: float = 1e-3,
    alpha: float = 0.99,
    eps: float = 1e-4,
    tol: float = 1e-6,
    max_steps: int = 1_000_000,
) -> CompletionRun:
    """The authors' protocol (their `main.py` and `opt.py`), for a batch of completion problems
    (targets and masks (B, n, n), one initialization scale each), in float32:

    - the loss is the mean squared error on the observed entries, mean_Omega (W_ij - W*_ij)^2
      (no factor 1/2), its gradient with respect to W is 2 P_Omega(W - W*) / m;
    - factors from `gaussian_init` at each problem's scale;
    - `GroupRMSprop`: one running mean v of the squared norm of the gradient of all factors
      together, v <- alpha v + (1 - alpha) sum_j ||dl/dW_j||^2, and every factor steps by
      -lr / (sqrt(v / (1 - alpha^k)) + eps) dl/dW_j at the k-th step (lr 1e-3, alpha 0.99 and
      the eps 1e-4 that `main.py` passes);
    - the training loss is checked before each step: a problem whose loss is at most `tol`
      (their `train_thres` 1e-6) stops there, one that reaches `max_steps` (their `n_iters`
      1e6) is unconverged.

    Each problem's optimizer state is its own: the batch is independent runs in one program."""
    tgt = torch.as_tensor(targets, dtype=torch.float32)
    msk = torch.as_tensor(masks, dtype=torch.float32)
    batch, n = msk.shape[0], msk.shape[-1]
    weights = gaussian_init(n, depth, scales, seed)
    m = msk.sum(dim=(1, 2))
    idx = torch.arange(batch)
    w_out = torch.zeros(batch, n, n, dtype=torch.float32)
    steps = torch.full((batch,), max_steps, dtype=torch.int64)
    loss_out = torch.zeros(batch, dtype=torch.float32)
    converged = torch.zeros(batch, dtype=torch.bool)
    sq_avg = torch.zeros(batch, dtype=torch.float32)
    for k in range(max_steps + 1):
        prefix = _prefixes(weights)
        w = prefix[-1]
        t, mk, mm = tgt[idx], msk[idx], m[idx]
        resid = mk * (w - t)
        loss = (resid**2).sum(dim=(1, 2)) / mm
        done = loss <= tol
        if k == max_steps:
            done = torch.ones_like(done)
        if bool(done.any()):
            w_out[idx[done]], loss_out[idx[done]] = w[done], loss[done]
            steps[idx[done]] = k
            converged[idx[done]] = loss[done] <= tol
            keep = ~done
            idx, sq_avg, mm, resid = idx[keep], sq_avg[keep], mm[keep], resid[keep]
            weights = [f[keep] for f in weights]
            prefix = [f[keep] for f in prefix]
        if len(idx) == 0:
            break
        grads = _chain_gradients(weights, prefix, 2 * resid / mm.view(-1, 1, 1))
        sq_avg = alpha * sq_avg + (1 - alpha) * sum((gr**2).sum(dim=(1, 2)) for gr in grads)
        step = lr / (torch.sqrt(sq_avg / (1 - alpha ** (k + 1))) + eps)
        weights = [f - step.view(-1, 1, 1) * gr for f, gr in zip(weights, grads)]
    return CompletionRun(w_out.numpy(), steps.numpy(), converged.numpy(), loss_out.numpy())


def min_nuclear_norm_completion(
    target: np.ndarray,
    mask: np.ndarray,
    solver: str = "SCS",
    eps: float = 1e-9,
    max_iters: int = 100_000,
):
    """argmin ||X||_* subject to X_ij = W*_ij on the observed entries (cvxpy): the solution
    Conjecture 1 (Sec. 2) says gradient descent on a depth-2 factorization tends to. Returns
    (X or None, the solver's status). `eps` and `max_iters` are SCS's stopping tolerance and
    iteration cap: a solve stopped by the cap reports "optimal_inaccurate", and no claim uses it."""
    import cvxpy as cp

    x = cp.Variable(target.shape)
    idx = np.nonzero(mask)
    cons = [x[idx] == target[idx]]
    prob = cp.Problem(cp.Minimize(cp.normNuc(x)), cons)
    kwargs = {"eps": eps, "max_iters": max_iters} if solver == "SCS" else {}
    try:
        with warnings.catch_warnings():  # an inaccurate solve is reported by its status
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **kwargs)
    except cp.error.SolverError as e:
        return None, f"solver_error: {e}"
    return (None if x.value is None else np.asarray(x.value)), prob.status


def projected_gradients(w: np.ndarray, g: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top `k` singular values of W and <grad l(W), u_r v_r^T> for each, from the SVD of the
    end-to-end matrix and the loss gradient with respect to it (never from the factors)."""
    u, s, vt = np.linalg.svd(w)
    return s[:k], np.einsum("ir,ij,rj->r", u[:, :k], g, vt[:k])


def singular_value_ode_rates(sigma: np.ndarray, inner: np.ndarray, depth: int) -> np.ndarray:
    """The right-hand side of Theorem 3's equation (Sec. 3):
    d sigma_r / dt = -N (sigma_r^2)^(1 - 1/N) <grad l(W), u_r v_r^T>."""
    return -depth * (sigma**2) ** (1 - 1 / depth) * inner


@dataclass
class DynamicsRun:
    times: np.ndarray  # (T,) t = step * lr at each record
    sigma: np.ndarray  # (T, k) measured top-k singular values of W(t)
    inner: np.ndarray  # (T, k) <grad l(W(t)), u_r v_r^T>
    ode_rate: np.ndarray  # (T, k) Theorem 3's right-hand side at W(t)
    converged: bool
    steps: int


def singular_value_dynamics(
    target: np.ndarray,
    mask: np.ndarray,
    depth: int,
    scale: float,
    lr: float,
    t_end: float,
    k: int,
    seed: int,
    init: str = "balanced",
    tol: float = 1e-8,
) -> DynamicsRun:
    """Plain gradient descent (step `lr`) on one completion problem up to time t_end = steps *
    lr, recording at every step the top-k singular values of W(t) and the right-hand side of
    Theorem 3's equation at W(t). `init="gaussian"` draws the factors i.i.d. with the same
    end-to-end scale instead (not balanced: outside the theorem's assumption). `converged` says
    whether the training mean squared error reached `tol` by t_end."""
    n = target.shape[0]
    if init == "balanced":
        weights = balanced_init(n, depth, scale, 1, seed)
    elif init == "gaussian":
        gen = torch.Generator().manual_seed(int(seed))
        std = scale ** (1.0 / depth) / np.sqrt(n)  # the authors' Gaussian initialization
        weights = [
            std * torch.randn(1, n, n, generator=gen, dtype=torch.float64) for _ in range(depth)
        ]
    else:
        raise ValueError(f"unknown init {init!r}; valid: balanced, gaussian")
    tgt = torch.as_tensor(target, dtype=torch.float64)[None]
    msk = torch.as_tensor(mask, dtype=torch.float64)[None]
    n_steps = int(round(t_end / lr))
    sig_rows, inner_rows = [], []
    for _ in range(n_steps + 1):
        w = product(weights)
        g = loss_gradient(w, tgt, msk)
        s_k, inner_k = projected_gradients(w[0].numpy(), g[0].numpy(), k)
        sig_rows.append(s_k)
        inner_rows.append(inner_k)
        grads = factor_gradients(weights, g)
        weights = [f - lr * gr for f, gr in zip(weights, grads)]
    mse = float((((msk * (w - tgt)) ** 2).sum() / msk.sum()).item())
    sig, inner = np.array(sig_rows), np.array(inner_rows)
    return DynamicsRun(
        np.arange(n_steps + 1) * lr,
        sig,
        inner,
        singular_value_ode_rates(sig, inner, depth),
        mse <= tol,
        n_steps,
    )


def tail_share(w: np.ndarray, rank: int) -> float:
    """The share of W's nuclear norm beyond its top `rank` singular values: 0 for a matrix of
    rank at most `rank`, a continuous measure of how far W is from that rank."""
    s = np.linalg.svd(w, compute_uv=False)
    return float(s[rank:].sum() / s.sum())


def effective_rank(w: np.ndarray) -> float:
    """The authors' effective rank (their `plot.ipynb`, after Roy & Vetterli): exp of the
    entropy of the singular values normalized to sum 1, exp(-sum p_r log(p_r + 1e-10)) with
    p = sigma / sum(sigma). k equal non-zero singular values give k."""
    s = np.linalg.svd(w, compute_uv=False)
    p = s / s.sum()
    return float(np.exp(-np.sum(p * np.log(p + 1e-10))))


def ode_integrated(sigma: np.ndarray, ode_rate: np.ndarray, lr: float) -> np.ndarray:
    """Singular values integrated from Theorem 3's right-hand side along the run:
    sigma_hat(t_k) = sigma(0) + sum_{j<k} lr * rate(t_j) (forward Euler on the recorded rates).
    Gradient descent moves sigma by lr * rate + O(lr^2) a step, so over a fixed time the gap to
    the measured sigma is O(lr) when the theorem holds."""
    steps = np.cumsum(ode_rate[:-1] * lr, axis=0)
    return sigma[0] + np.concatenate([np.zeros((1, sigma.shape[1])), steps])


def rate_exponent(
    sigma: np.ndarray, inner: np.ndarray, lr: float, floor: float
) -> tuple[float, int]:
    """Least-squares slope of log|measured rate / <grad l, u_r v_r^T>| against log sigma_r^2,
    over the steps where sigma_r > floor and the inner product is not negligible (above 1e-3 of
    its largest magnitude). The measured rate is the difference quotient of the measured
    singular values and the inner product comes from the SVD of W and the loss gradient, so the
    depth enters nowhere: Theorem 3 says the slope is 1 - 1/N. Returns (slope, points used)."""
    measured = np.diff(sigma, axis=0) / lr
    s, inn = sigma[:-1], inner[:-1]
    keep = (s > floor) & (np.abs(inn) > 1e-3 * np.abs(inn).max())
    keep &= np.sign(measured) == -np.sign(inn)  # the flow's direction: the ratio's log exists
    if keep.sum() < 3:
        return float("nan"), int(keep.sum())
    x = np.log(s[keep] ** 2)
    y = np.log(np.abs(measured[keep] / inn[keep]))
    return float(np.polyfit(x, y, 1)[0]), int(keep.sum())
