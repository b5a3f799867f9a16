"""Gated linear networks and their implicit bias (Lippl, Abbott & Chung, 2022): inputs,
contexts, predictions and the trained models.

The numerics of the `gln_norm` chapter live in four modules:

* this one: the inputs' preprocessing, the random hyperplane contexts, predictions, error rates
  and inconsistency, and the models (deep two-layer GLN, shallow GLN, ReLU network) trained with
  the paper's schedule, batched over many replicas in one tensor program;
* `implicit_bias.models.gln_svm`: the paper's convex programs through cvxpy (the reference path)
  and the dispatch of a program to a solver;
* `implicit_bias.models.gln_solvers` (on `implicit_bias.models.gln_ipm`): the fast exact
  interior-point solvers of the same programs;
* `implicit_bias.models.gln_theory`: the theory helpers of Sections 3-4, B.2 and Appendix A.

Data convention (shared by all of them):

* `X` (N, D) float64, the constant-1 feature already appended when it is used (the paper's
  inputs are pixels scaled to [-1, 1] plus a constant 1, D = 785);
* `y` (N,) float64 in {-1, +1};
* `contexts` (N, H) int64, unit h's local context of sample n, in range(C) (for the shallow GLN
  H = 1 and C = 2^k);
* the primal variable `zeta` has shape (H, C, D): zeta[h, c] = w2[h] * w1[h, c] (Eq. 17), and the
  predictor of global context gamma is beta_gamma = sum_h zeta[h, gamma_h] (Eq. 15).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# -------------------------------------------------------------------------------------------
# Inputs (Appendix A and the authors' protocol: pixels in [-1, 1] plus a constant 1)
# -------------------------------------------------------------------------------------------


def preprocess_images(images: np.ndarray) -> np.ndarray:
    """Pixels in [0, 1] -> [-1, 1] with a constant 1 feature appended (float64, D = 785)."""
    X = 2.0 * np.asarray(images, dtype=np.float64) - 1.0
    return np.hstack([X, np.ones((len(X), 1))])


# -------------------------------------------------------------------------------------------
# Contexts: k random hyperplanes per unit, C = 2^k local contexts (Appendix A)
# -------------------------------------------------------------------------------------------


@dataclass
class Hyperplanes:
    """k hyperplanes for each of H units: context = sum_j 2^j [<w_hj, x> - b_hj >= 0]."""

    weights: np.ndarray  # (H, k, P)
    cutoffs: np.ndarray  # (H, k)

    @property
    def n_contexts(self) -> int:
        return 2 ** self.weights.shape[1]


def sample_hyperplanes(
    X_train: np.ndarray,
    n_units: int,
    n_contexts: int,
    seed: int,
    median_init: bool = True,
    weight_sd: float = 36.0,
    cutoff_sd: float = 9.0,
) -> Hyperplanes:
    """Random hyperplanes as in Appendix A: normal weights (sd 36), cutoffs N(0, 9^2) or, with
    median init (MI, the main-text setting), the median of the training projections so that each
    hyperplane halves the training data. `X_train` holds the features the gates look at.
    """
    k = int(round(math.log2(n_contexts)))
    if 2**k != n_contexts:
        raise ValueError(f"n_contexts must be a power of 2, got {n_contexts}")
    rng = np.random.default_rng(seed)
    weights = rng.normal(0.0, weight_sd, size=(n_units, k, X_train.shape[1]))
    if median_init:
        cutoffs = np.median(_projections(X_train, weights), axis=0).reshape(n_units, k)
    else:
        cutoffs = rng.normal(0.0, cutoff_sd, size=(n_units, k))
    return Hyperplanes(weights, np.asarray(cutoffs, dtype=np.float64).reshape(n_units, k))


def _projections(X: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(N, H * k) projections <w_hj, x> as one BLAS product (numpy's einsum does not use BLAS
    here: 9x slower at N = 12,000, H = 100, k = 1)."""
    return X @ weights.reshape(-1, weights.shape[-1]).T


def assign_contexts(X: np.ndarray, planes: Hyperplanes) -> np.ndarray:
    """(N, H) int64 local context of every sample for every unit."""
    H, k, _ = planes.weights.shape
    bits = _projections(X, planes.weights).reshape(len(X), H, k) - planes.cutoffs[None] >= 0
    return (bits * (2 ** np.arange(bits.shape[-1]))).sum(-1).astype(np.int64)


def pixel_features(X: np.ndarray) -> np.ndarray:
    """The features the gates see: the pixels, without the constant feature."""
    return X[:, :-1]


def one_hot_contexts(contexts: np.ndarray, n_contexts: int) -> np.ndarray:
    """(N, H) context indices -> (N, H, C) 0/1 gates."""
    return (np.asarray(contexts)[..., None] == np.arange(n_contexts)).astype(np.float64)


# -------------------------------------------------------------------------------------------
# Predictions, errors, inconsistency
# -------------------------------------------------------------------------------------------


def predict_gln(zeta: np.ndarray, X: np.ndarray, contexts: np.ndarray) -> np.ndarray:
    """f(x_n) = sum_h <zeta[h, contexts[n, h]], x_n>  (Eq. 15/17), shape (N,)."""
    H, C, D = zeta.shape
    P = (X @ zeta.reshape(H * C, D).T).reshape(len(X), H, C)
    return np.take_along_axis(P, contexts[..., None], axis=2)[..., 0].sum(1)


def predict_frelu(zeta: np.ndarray, X: np.ndarray, gates: np.ndarray) -> np.ndarray:
    """f(x_n) = sum_{h: gates[n,h]} <zeta_h, x_n>  (Sec. 5.1), shape (N,)."""
    return ((X @ zeta.T) * gates).sum(1)


def predict_shallow(beta: np.ndarray, X: np.ndarray, contexts: np.ndarray) -> np.ndarray:
    """f(x_n) = <beta[c(n)], x_n> for the shallow GLN, shape (N,)."""
    ctx = np.asarray(contexts).reshape(-1)
    return np.einsum("nd,nd->n", beta[ctx], X)


def error_rate(f: np.ndarray, y: np.ndarray) -> float:
    """Share of samples with sign(f) != y (f = 0 counts as an error)."""
    return float(np.mean(np.sign(f) != np.sign(y)))


def inconsistency(f1: np.ndarray, f2: np.ndarray) -> float:
    """Share of points where two models' predicted signs differ (Fig. 2b, 3b)."""
    return float(np.mean(np.sign(f1) != np.sign(f2)))


def uncorrelated_inconsistency(p: float) -> float:
    """2p(1-p): the inconsistency of two independent predictors of error p (footnote 6)."""
    return 2.0 * p * (1.0 - p)


def pack_signs(f: np.ndarray) -> str:
    """Predicted signs (f > 0) as a compact base64 bit string, for JSON caches."""
    return base64.b64encode(np.packbits(np.asarray(f) > 0).tobytes()).decode("ascii")


def unpack_signs(s: str, n: int) -> np.ndarray:
    """Inverse of `pack_signs`: an array of +-1.0 of length n."""
    bits = np.unpackbits(np.frombuffer(base64.b64decode(s), dtype=np.uint8))[:n]
    return np.where(bits > 0, 1.0, -1.0)


# -------------------------------------------------------------------------------------------
# Models, batched over R independent replicas (seeds / configs of one shape), device-agnostic
# -------------------------------------------------------------------------------------------


def _orthogonal(rows: int, cols: int, gen: torch.Generator, dtype, device) -> torch.Tensor:
    """An orthogonal (rows, cols) matrix as torch.nn.init.orthogonal_ (Saxe et al., 2014)."""
    a = torch.randn(max(rows, cols), min(rows, cols), generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r))
    q = q if rows >= cols else q.T
    return q.to(dtype=dtype, device=device)


def init_deep_gln(
    seeds: list[int], n_units: int, n_contexts: int, dim: int, dtype=torch.float32, device="cpu"
) -> dict[str, torch.Tensor]:
    """Deep GLN parameters, one replica per seed: w1 (R, H, C, D) orthogonal per context (no
    first-layer bias; the constant feature plays that role), w2 (R, H) orthogonal (a unit
    vector), b2 (R,) = 0."""
    w1, w2 = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        w1.append(
            torch.stack(
                [_orthogonal(n_units, dim, gen, dtype, device) for _ in range(n_contexts)], 1
            )
        )
        w2.append(_orthogonal(1, n_units, gen, dtype, device)[0])
    return {
        "w1": torch.stack(w1),
        "w2": torch.stack(w2),
        "b2": torch.zeros(len(seeds), dtype=dtype, device=device),
    }


def init_shallow_gln(
    seeds: list[int], n_contexts: int, dim: int, dtype=torch.float32, device="cpu"
) -> dict[str, torch.Tensor]:
    """Shallow GLN: one linear predictor per context, w (R, C, D), orthogonal init."""
    return {
        "w": torch.stack(
            [
                _orthogonal(n_contexts, dim, torch.Generator().manual_seed(s), dtype, device)
                for s in seeds
            ]
        )
    }


def init_relu(
    seeds: list[int],
    n_units: int,
    dim: int,
    dtype=torch.float32,
    device="cpu",
    output_bias: bool = True,
) -> dict[str, torch.Tensor]:
    """Two-layer ReLU network, Kaiming normal init (He et al., 2015): w1 (R, H, D) with sd
    sqrt(2/D), w2 (R, H) with sd sqrt(2/H), b2 = 0 (first-layer bias via the constant feature);
    without b2 when not `output_bias` (the authors' network has none)."""
    w1, w2 = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        w1.append(
            torch.randn(n_units, dim, generator=gen, dtype=torch.float64) * math.sqrt(2 / dim)
        )
        w2.append(torch.randn(n_units, generator=gen, dtype=torch.float64) * math.sqrt(2 / n_units))
    params = {
        "w1": torch.stack(w1).to(dtype=dtype, device=device),
        "w2": torch.stack(w2).to(dtype=dtype, device=device),
    }
    if output_bias:
        params["b2"] = torch.zeros(len(seeds), dtype=dtype, device=device)
    return params


def forward_deep_gln(p: dict, X: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
    """f(x) = sum_h w2_h <w1[h, ctx_h(x)], x> + b2 (Eq. 15 plus the authors' output bias).
    X (R, B, D), ctx (R, B, H) -> (R, B)."""
    P = torch.einsum("rbd,rhcd->rbhc", X, p["w1"])
    sel = torch.gather(P, 3, ctx.unsqueeze(-1)).squeeze(-1)
    return (sel * p["w2"][:, None, :]).sum(-1) + p["b2"][:, None]


def forward_shallow_gln(p: dict, X: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
    """f(x) = <w[ctx(x)], x>. X (R, B, D), ctx (R, B) -> (R, B)."""
    R = X.shape[0]
    W = p["w"][torch.arange(R, device=X.device)[:, None], ctx]  # (R, B, D)
    return (W * X).sum(-1)


def forward_relu(p: dict, X: torch.Tensor, ctx=None) -> torch.Tensor:
    """f(x) = w2 . relu(w1 x) + b2, or without b2 when `p` has none (the authors' network).
    X (R, B, D) -> (R, B)."""
    hidden = torch.relu(torch.einsum("rbd,rhd->rbh", X, p["w1"]))
    out = (hidden * p["w2"][:, None, :]).sum(-1)
    return out + p["b2"][:, None] if "b2" in p else out


FORWARD: dict[str, Callable[..., torch.Tensor]] = {
    "deep": forward_deep_gln,
    "shallow": forward_shallow_gln,
    "relu": forward_relu,
}


@dataclass
class Schedule:
    """The authors' optimizer schedule (Appendix A and their protocol): mini-batch SGD, batch 128,
    shuffled every epoch, 3,200 steps, learning rate 0.04 then x0.25 at step 1,600, momentum 0
    (main text) or 0.9, logistic (binary cross-entropy) loss."""

    n_steps: int = 3200
    batch_size: int = 128
    lr: float = 0.04
    lr_drop_step: int = 1600
    lr_factor: float = 0.25
    momentum: float = 0.0


def train_batched(
    kind: str,
    params: dict,
    X: torch.Tensor,
    y: torch.Tensor,
    ctx: torch.Tensor | None,
    schedule: Schedule,
    seeds: list[int],
) -> dict:
    """Train R independent replicas in one tensor program with `schedule`.

    X (R, N, D), y (R, N) in {-1, +1}, ctx (R, N, H) / (R, N) / None. The loss is the sum over
    replicas of each replica's mean logistic loss, so every replica follows its own SGD path.
    Epochs of ceil(N / batch) mini-batches (the last one partial), reshuffled per replica by
    its own seed, so a replica's run does not depend on which others share the batch.
    """
    if kind == "shallow" and shallow_kernel_form(X.shape[1], params["w"].shape[1], X.shape[2]):
        return _train_shallow_kernel(params, X, y, ctx, schedule, seeds)  # type: ignore[arg-type]  # the shallow GLN always has contexts
    if kind == "shallow":
        return _train_shallow_lazy(params, X, y, ctx, schedule, seeds)  # type: ignore[arg-type]
    if kind == "deep" and X.shape[1] <= KERNEL_FORM_MAX_RATIO * X.shape[2]:
        return _train_deep_kernel(params, X, y, ctx, schedule, seeds)  # type: ignore[arg-type]  # the deep GLN always has contexts
    return _train_dense(kind, params, X, y, ctx, schedule, seeds)


def _minibatches(N: int, schedule: Schedule, seeds: list[int], device):
    """(step, learning rate, indices (R, b)) of the schedule: epochs of ceil(N / batch)
    mini-batches (the last one partial), reshuffled per replica by its own seed."""
    gens = [torch.Generator().manual_seed(10_000 + s) for s in seeds]
    step, B = 0, schedule.batch_size
    while step < schedule.n_steps:
        perm = torch.stack([torch.randperm(N, generator=g) for g in gens]).to(device)
        for start in range(0, N, B):
            if step >= schedule.n_steps:
                return
            lr = schedule.lr * (schedule.lr_factor if step >= schedule.lr_drop_step else 1.0)
            yield step, lr, perm[:, start : start + B]
            step += 1


def _take_rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """t (R, N, ...) at the mini-batch idx (R, B) -> (R, B, ...): t[rows, idx] as one
    index_select of the flattened rows (the same copy; advanced indexing took 70 us a call,
    most of a small step)."""
    R, N = t.shape[:2]
    flat = (idx + N * torch.arange(R, device=idx.device)[:, None]).reshape(-1)
    rest = t.shape[2:]
    return t.reshape(R * N, *rest).index_select(0, flat).reshape(R, idx.shape[1], *rest)


def _train_dense(
    kind: str,
    params: dict,
    X: torch.Tensor,
    y: torch.Tensor,
    ctx: torch.Tensor | None,
    schedule: Schedule,
    seeds: list[int],
) -> dict:
    forward = FORWARD[kind]
    params = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    # SGD with momentum written out (the update of torch.optim.SGD with dampening 0, no
    # Nesterov): v <- mu v + g, p <- p - lr v; avoids torch.optim's slow first import
    velocity = {k: torch.zeros_like(v) for k, v in params.items()}
    targets = (y > 0).to(X.dtype)
    for _, lr, idx in _minibatches(X.shape[1], schedule, seeds, X.device):
        out = forward(params, _take_rows(X, idx), None if ctx is None else _take_rows(ctx, idx))
        loss = (
            torch.nn.functional.binary_cross_entropy_with_logits(
                out, _take_rows(targets, idx), reduction="none"
            )
            .mean(1)
            .sum()
        )
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for (k, p), g in zip(params.items(), grads):
                if schedule.momentum:
                    velocity[k].mul_(schedule.momentum).add_(g)
                    g = velocity[k]
                p.sub_(lr * g)
    return {k: v.detach() for k, v in params.items()}


# The deep GLN trains in kernel form when N <= this x D: a step costs about N / (2 D) of the
# feature form's (one (B, N) x (N, H C) product against a forward and a backward (B, D) x
# (D, H C) one). Measured on one Zen 5 core, 3 replicas, H = 100, C = 4: 1.5 / 2.9 / 6.1 ms a
# step at N = 500 / 1,000 / 2,000 against 5.6-6.4 ms (benchmarks/bench_gln_training.py).
KERNEL_FORM_MAX_RATIO = 1.5


@torch.no_grad()
def _train_deep_kernel(
    params: dict,
    X: torch.Tensor,
    y: torch.Tensor,
    ctx: torch.Tensor,
    schedule: Schedule,
    seeds: list[int],
) -> dict:
    """The deep GLN's SGD (momentum included) in kernel form: the same iterates as
    `_train_dense` in exact arithmetic (tested to round-off in float64).

    Every SGD update of w1[h, c] is a combination of training inputs, so
    w1 = w1(0) + sum_n A[n, h, c] x_n, and a unit's pre-activation on training sample m is
    <w1(0)[h, c], x_m> + sum_n A[n, h, c] K[n, m] with K = X X^T. A step reads B rows of K
    (O(B N H C)) and writes the B rows of A of its mini-batch (momentum: all of A, O(N H C)),
    instead of two O(B D H C) products; w1 is rebuilt once at the end.
    """
    w1_init, w2, b2 = params["w1"], params["w2"].clone(), params["b2"].clone()
    R, H, C, D = w1_init.shape
    N = X.shape[1]
    K = torch.bmm(X, X.transpose(1, 2))  # (R, N, N)
    # <w1(0)[h, ctx_nh], x_n> for every training sample: the contexts of a sample are fixed
    pre_init = torch.einsum("rnd,rhcd->rnhc", X, w1_init).gather(3, ctx.unsqueeze(-1))[..., 0]
    A = torch.zeros(R * N, H * C, dtype=X.dtype, device=X.device)
    V = torch.zeros_like(A) if schedule.momentum else None
    v2, vb = torch.zeros_like(w2), torch.zeros_like(b2)
    offsets = N * torch.arange(R, device=X.device)[:, None]
    targets = (y > 0).to(X.dtype)
    for _, lr, idx in _minibatches(N, schedule, seeds, X.device):
        Bn = idx.shape[1]
        flat = (idx + offsets).reshape(-1)
        Kb = _take_rows(K, idx)  # (R, B, N); K is symmetric
        ctx_b = _take_rows(ctx, idx)  # (R, B, H)
        learned = torch.bmm(Kb, A.view(R, N, H * C)).view(R, Bn, H, C)
        pre = _take_rows(pre_init, idx) + learned.gather(3, ctx_b.unsqueeze(-1))[..., 0]
        out = (pre * w2[:, None, :]).sum(-1) + b2[:, None]
        g = (torch.sigmoid(out) - _take_rows(targets, idx)) / Bn  # d(mean loss)/d(out)
        g_pre = g[..., None] * w2[:, None, :]  # (R, B, H)
        g_A = torch.zeros(R, Bn, H, C, dtype=X.dtype, device=X.device)
        g_A.scatter_(3, ctx_b.unsqueeze(-1), g_pre.unsqueeze(-1))
        g_w2, g_b2 = torch.einsum("rb,rbh->rh", g, pre), g.sum(1)
        if V is None:
            A.index_add_(0, flat, g_A.view(R * Bn, H * C), alpha=-lr)
            w2.sub_(lr * g_w2)
            b2.sub_(lr * g_b2)
        else:
            mu = schedule.momentum
            V.mul_(mu).index_add_(0, flat, g_A.view(R * Bn, H * C))
            A.sub_(lr * V)
            w2.sub_(lr * v2.mul_(mu).add_(g_w2))
            b2.sub_(lr * vb.mul_(mu).add_(g_b2))
    learned_w1 = torch.bmm(A.view(R, N, H * C).transpose(1, 2), X).view(R, H, C, D)
    return {"w1": w1_init + learned_w1, "w2": w2, "b2": b2}


def shallow_kernel_form(n_samples: int, n_contexts: int, dim: int) -> bool:
    """Whether the shallow GLN trains in kernel form (`_train_shallow_kernel`): its step reads
    B rows of an N x N matrix whatever C is; the lazy trainer's reads B rows of X and of the
    (C, D) weights, scattered over C D floats, which slows it once they leave the cache.
    Measured per task (3 replicas, 3,200 steps, one Zen 5 core): N = 500 (0.64 D) 0.85 s
    against 0.87-1.09 at C = 2 and 1.06 against 2.26 at C = 2^15; N = 1,000 (1.27 D) 1.45
    against 1.00 at C = 2, 1.5 against 1.5 at C = 256, 1.4-1.6 against 1.8-3.1 at C >= 2^12."""
    return n_samples <= dim or (n_samples <= 1.5 * dim and n_contexts >= 1024)


@torch.no_grad()
def _train_shallow_kernel(
    params: dict,
    X: torch.Tensor,
    y: torch.Tensor,
    ctx: torch.Tensor,
    schedule: Schedule,
    seeds: list[int],
) -> dict:
    """The shallow GLN's SGD (momentum included) in kernel form: the same iterates as
    `_train_dense` in exact arithmetic (tested to round-off in float64).

    Every update of w[c] is a combination of the training inputs of context c, so
    w[c] = w(0)[c] + sum_{n: c_n = c} a_n x_n, and the output on training sample m is
    <w(0)[c_m], x_m> + sum_n a_n [c_n = c_m] <x_n, x_m>. A step reads B rows of that masked
    Gram matrix and updates B coefficients a_n (momentum: all N), whatever the number of
    contexts; w is rebuilt once at the end.
    """
    w = params["w"]
    R, C, D = w.shape
    N = X.shape[1]
    replica = torch.arange(R, device=X.device)[:, None]
    gram = torch.bmm(X, X.transpose(1, 2)) * (ctx[:, :, None] == ctx[:, None, :])  # (R, N, N)
    out_init = (w[replica, ctx] * X).sum(-1)  # (R, N): <w(0)[c_n], x_n>
    a = torch.zeros(R * N, dtype=X.dtype, device=X.device)
    v = torch.zeros_like(a) if schedule.momentum else None
    offsets = N * replica
    targets = (y > 0).to(X.dtype)
    for _, lr, idx in _minibatches(N, schedule, seeds, X.device):
        flat = (idx + offsets).reshape(-1)
        learned = torch.bmm(_take_rows(gram, idx), a.view(R, N, 1))[..., 0]
        out = _take_rows(out_init, idx) + learned
        g = ((torch.sigmoid(out) - _take_rows(targets, idx)) / idx.shape[1]).reshape(-1)
        if v is None:
            a.index_add_(0, flat, g, alpha=-lr)
        else:
            a.sub_(lr * v.mul_(schedule.momentum).index_add_(0, flat, g))
    W = w.reshape(R * C, D).clone()
    W.index_add_(0, (ctx + C * replica).reshape(-1), (a.view(R, N, 1) * X).reshape(R * N, D))
    return {"w": W.view(R, C, D)}


def _idle_steps_factors(last: torch.Tensor, t: int, schedule: Schedule):
    """For rows last updated at step `last` and then idle (zero gradient) through step t:
    the factor a with W_t = W_last - a V_last, sum_{j=last+1}^{t} lr_j mu^(j - last), and the
    velocity decay mu^(t - last), in float64 (closed-form geometric sums, split at the
    learning-rate drop)."""
    mu, d = schedule.momentum, schedule.lr_drop_step
    s = last.to(torch.float64)
    n1 = torch.clamp(min(t, d - 1) - s, min=0)  # idle steps before the drop, then after it
    n2 = torch.clamp(t - torch.clamp(s, min=d - 1), min=0)

    def geometric(n):  # sum_{i=1}^{n} mu^i
        return n * 0.0 if mu == 0 else mu * (1 - mu**n) / (1 - mu)

    lr1, lr2 = schedule.lr, schedule.lr * schedule.lr_factor
    factor = lr1 * geometric(n1) + lr2 * mu**n1 * geometric(n2)
    return factor, mu ** (t - s)


def _catch_up(W, V, last, rows, t, schedule) -> None:
    """Bring `rows` of the lazily updated weights and velocities to their state after step t."""
    factor, decay = _idle_steps_factors(last.index_select(0, rows), t, schedule)
    v = V.index_select(0, rows)
    W.index_add_(0, rows, v * factor.to(W.dtype)[:, None], alpha=-1)
    V.index_copy_(0, rows, v * decay.to(V.dtype)[:, None])
    last.index_fill_(0, rows, t)


@torch.no_grad()
def _train_shallow_lazy(
    params: dict,
    X: torch.Tensor,
    y: torch.Tensor,
    ctx: torch.Tensor,
    schedule: Schedule,
    seeds: list[int],
    catch_up_idle: bool | None = None,
) -> dict:
    """The shallow GLN's SGD (momentum included) touching only the rows of the current batch.

    A mini-batch's gradient is zero outside the contexts of its samples; an idle row's
    velocity just decays and its weights drift along it, which has a closed form
    (`_idle_steps_factors`). So each row is brought up to date only when a batch uses it (and
    once at the end): O(batch x D) work per step instead of O(contexts x D): at 2^15 contexts a
    step touches 128 of 3 x 32,768 rows. Same iterates as `_train_dense` up to rounding (tested).
    Without momentum an idle row neither moves nor keeps a velocity, so the catch-up is skipped
    unless `catch_up_idle` (bit-identical either way: it would add 0 to W and zero V, as the
    step's own `* momentum` does; tested).
    """
    w = params["w"]
    R, C, D = w.shape
    W = w.reshape(R * C, D).clone()
    V = torch.zeros_like(W)
    last = torch.full((R * C,), -1, dtype=torch.long, device=W.device)  # W, V are after step
    rows = torch.arange(R, device=X.device)[:, None]
    offsets = rows * C
    targets = (y > 0).to(X.dtype)
    lazy = schedule.momentum != 0.0 if catch_up_idle is None else catch_up_idle
    for step, lr, idx in _minibatches(X.shape[1], schedule, seeds, X.device):
        Xb, flat = _take_rows(X, idx), (_take_rows(ctx, idx) + offsets)
        used = torch.unique(flat)
        if lazy:
            _catch_up(W, V, last, used, step - 1, schedule)
        out = (W.index_select(0, flat.reshape(-1)).reshape(Xb.shape) * Xb).sum(-1)
        # gradient of the replica's mean logistic loss w.r.t. its output
        g = (torch.sigmoid(out) - _take_rows(targets, idx)) / idx.shape[1]
        V.index_copy_(0, used, V.index_select(0, used) * schedule.momentum)
        V.index_add_(0, flat.reshape(-1), (g[..., None] * Xb).reshape(-1, D))
        W.index_add_(0, used, V.index_select(0, used), alpha=-lr)
        if lazy:
            last.index_fill_(0, used, step)
    if lazy:
        touched = torch.nonzero(last >= 0).squeeze(1)
        _catch_up(W, V, last, touched, schedule.n_steps - 1, schedule)
    return {"w": W.reshape(R, C, D)}


@torch.no_grad()
def predict_batched(
    kind: str, params: dict, X: torch.Tensor, ctx: torch.Tensor | None, chunk: int = 2000
) -> torch.Tensor:
    """Outputs (R, N) of R replicas on X (R, N, D) (or a shared (N, D)), in chunks."""
    forward = FORWARD[kind]
    R = next(iter(params.values())).shape[0]
    if X.dim() == 2:
        X = X.expand(R, *X.shape)
    outs = []
    for s in range(0, X.shape[1], chunk):
        c = None if ctx is None else ctx[:, s : s + chunk]
        outs.append(forward(params, X[:, s : s + chunk], c))
    return torch.cat(outs, 1)
