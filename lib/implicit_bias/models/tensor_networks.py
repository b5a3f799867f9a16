"""Linear tensor networks (Yun, Krishnan & Mobahi 2021, "A unifying view on implicit bias in
training linear neural networks"): the networks, their data tensors and their training.

A depth-L linear tensor network computes f(x; Theta) = M(x) o (v_1, ..., v_L): a data tensor
M(x) (linear in x) contracted with one parameter vector per layer (Sec. 2 of the paper). Three
architectures fit the frame:

* ``diag``: diagonal networks, [M(x)]_{j..j} = x_j;
* ``conv``: circular convolutional networks, [M(x)]_{j_1..j_L} = x_{(sum_l j_l) mod d}
  (0-based; full-length when every filter has length d);
* ``fc``: fully connected networks, v_l = vec(W_l), M(x) built block-diagonally.

Every network is linear in x, f(x) = x^T beta(Theta). Because f is multilinear in the v_l,
M(x) o (v_1, .., I, .., v_L) is the gradient of f with respect to v_l: the tensor singular
vector machinery below runs on the network itself (autograd), never forming M(x); the explicit
tensors (`data_tensor`) exist to check that identity (`tensor_form_check`).

Here: data tensors and forward passes, tensor singular vectors (higher-order power method,
"Singular value decomposition of tensor"), data and initializations, and the two training
loops (exponential loss with fraction-of-norm steps, square loss). What the theorems predict
(max-margin problems, h_L / H_L / Q_{L,alpha}, the closed forms of Thm 3 and Thm 6) lives in
`implicit_bias.models.tensor_networks_theory`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np
import torch

ARCHS = ("diag", "conv", "fc")

# ----------------------------------------------------------------------------------------------
# Data tensors (Sec. 2) and the networks' forward passes


def _check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}; valid: {', '.join(ARCHS)}")
    return arch


def data_tensor(arch: str, x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The data tensor M(x) of Sec. 2, as a dense array (small sizes only).

    `shape`: for ``diag`` [L] (tensor d x .. x d); for ``conv`` the filter lengths
    [k_1, .., k_L] (k_L = d); for ``fc`` the widths [d_1 = d, d_2, .., d_L], giving a tensor of
    shape (d_1 d_2, d_2 d_3, .., d_{L-1} d_L, d_L) with v_l = vec(W_l) in row-major order.
    """
    x = np.asarray(x, dtype=float)
    d = x.shape[0]
    if _check_arch(arch) == "diag":
        (L,) = shape
        M = np.zeros((d,) * L)
        M[(np.arange(d),) * L] = x
        return M
    if arch == "conv":
        ks = list(shape)
        if ks[-1] != d or any(k > d for k in ks):
            raise ValueError("conv filters need k_l <= d and k_L = d")
        # 0-based version of the slide's [M]_{j_1..j_L} = x_{(sum j_l - L + 1) mod d}
        return x[np.add.reduce(np.indices(ks), axis=0) % d]
    dims = list(shape)
    if dims[0] != d:
        raise ValueError("fc widths must start with d")
    # x (x) I_{d_2} (x) .. (x) I_{d_L} has axes (i_1, i_2, i_2', .., i_L, i_L'); grouping
    # consecutive pairs gives (i_1 i_2), (i_2' i_3), .., (i_L'), i.e. the block-diagonal M_fc.
    M = x
    for k in dims[1:]:
        M = np.multiply.outer(M, np.eye(k))
    new_shape = [dims[i] * dims[i + 1] for i in range(len(dims) - 1)] + [dims[-1]]
    return M.reshape(new_shape)


def contract(M: np.ndarray, vectors: Sequence[np.ndarray]) -> float:
    """The full multilinear contraction M o (v_1, .., v_L) (a scalar)."""
    out = M
    for v in vectors:
        out = np.tensordot(out, np.asarray(v, dtype=float).reshape(-1), axes=([0], [0]))
    return float(out)


def circular_conv(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[h * w]_i = sum_j h_{(i + j) mod d} w_j for each row of h (the slide's definition).

    A circular cross-correlation, so in the DFT domain it is H_k conj(W_k) (w zero-padded to
    length d); through real FFTs it is ~2x faster than gathering the d x k windows."""
    d = h.shape[-1]
    spectrum = torch.fft.rfft(h, dim=-1) * torch.conj(torch.fft.rfft(w, n=d))
    return torch.fft.irfft(spectrum, n=d, dim=-1)


def predict(arch: str, X: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
    """The network's outputs f(x_i; Theta) for the rows of X, by its own forward pass."""
    if _check_arch(arch) == "diag":
        w = params[0]
        for p in params[1:]:
            w = w * p
        return X @ w
    h = X
    if arch == "conv":
        for w in params[:-1]:
            h = circular_conv(h, w)
        return h @ params[-1]
    for W in params[:-1]:
        h = h @ W
    return h @ params[-1]


def linear_coefficients(arch: str, params: Sequence[torch.Tensor], d: int) -> torch.Tensor:
    """beta(Theta) with f(x) = x^T beta: the network evaluated on the identity's rows."""
    p0 = params[0]
    eye = torch.eye(d, dtype=p0.dtype, device=p0.device)
    return predict(arch, eye, params)


def layer_gradients(
    arch: str, x: torch.Tensor, params: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """M(x) o (v_1, .., v_{l-1}, I, v_{l+1}, .., v_L) for every l, flattened (= grad_{v_l} f)."""
    leaves = [p.detach().clone().requires_grad_(True) for p in params]
    f = predict(arch, x.reshape(1, -1), leaves)[0]
    grads = torch.autograd.grad(f, leaves)
    return [g.reshape(-1) for g in grads]


# ----------------------------------------------------------------------------------------------
# Tensor singular vectors ("Singular value decomposition of tensor" slide; Thm 1)


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / torch.linalg.vector_norm(v)


def singular_vector_residual(arch: str, x: torch.Tensor, params: Sequence[torch.Tensor]) -> float:
    """How far the directions u_l = v_l/||v_l|| are from a singular tuple of M(x):
    max_l ||M(x) o (.., I, ..) - s u_l|| / |s| with s = M(x) o (u_1, .., u_L)."""
    units = [_unit(p) for p in params]
    grads = layer_gradients(arch, x, units)
    s = float(predict(arch, x.reshape(1, -1), units)[0])
    return max(
        float(torch.linalg.vector_norm(g - s * u.reshape(-1))) for g, u in zip(grads, units)
    ) / abs(s)


def tensor_power_iteration(
    arch: str,
    x: torch.Tensor,
    init: Sequence[torch.Tensor],
    max_iter: int = 20000,
    tol: float = 1e-13,
) -> tuple[list[torch.Tensor], float, int]:
    """A singular tuple of M(x) by the higher-order power method (Gauss-Seidel sweeps of
    u_l <- M(x) o (.., I, ..) / norm), started from `init`. Returns (u_l, s, iterations)."""
    units = [_unit(p.detach().clone()) for p in init]
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        change = 0.0
        for l in range(len(units)):
            g = layer_gradients(arch, x, units)[l].reshape(units[l].shape)
            new = _unit(g)
            change = max(change, float(torch.linalg.vector_norm(new - units[l])))
            units[l] = new
        if change < tol:
            break
    s = float(predict(arch, x.reshape(1, -1), units)[0])
    return units, s, iterations


def abs_cosine(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> float:
    a = np.asarray(torch.as_tensor(a).detach().cpu(), dtype=float).reshape(-1)
    b = np.asarray(torch.as_tensor(b).detach().cpu(), dtype=float).reshape(-1)
    return float(abs(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def cosine(a, b) -> float:
    a = np.asarray(a, dtype=float).reshape(-1)
    b = np.asarray(b, dtype=float).reshape(-1)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ----------------------------------------------------------------------------------------------
# Data and initializations


def separable_data(
    n: int, d: int, sparsity: int, seed: int, even: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian inputs labelled by a sparse teacher (separable by construction), float64.

    With `even`, inputs are symmetrized to even vectors (x_j = x_{-j mod d})."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if even:
        X = even_part(X)
    teacher = np.zeros(d)
    teacher[rng.choice(d, sparsity, replace=False)] = rng.standard_normal(sparsity)
    y = np.sign(X @ teacher)
    y[y == 0] = 1.0
    return X, y


def regression_data(n: int, d: int, seed: int, even: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """An underdetermined regression (n < d): Gaussian X, y from a sparse teacher."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if even:
        X = even_part(X)
    teacher = np.zeros(d)
    teacher[rng.choice(d, 3, replace=False)] = 1.0
    if even:
        teacher = even_part(teacher)
    return X, X @ teacher


def even_part(X: np.ndarray) -> np.ndarray:
    """(x + reversed x) / 2 with index j -> -j mod d, applied to the last axis."""
    d = X.shape[-1]
    rev = (-np.arange(d)) % d
    return (X + X[..., rev]) / 2


def dft_matrix(d: int) -> np.ndarray:
    """[F]_{jk} = exp(-2 pi i jk / d) / sqrt(d) (Cor 3; unitary)."""
    j = np.arange(d)
    return np.exp(-2j * np.pi * np.outer(j, j) / d) / np.sqrt(d)


def init_params(
    arch: str,
    d: int,
    L: int,
    alpha: float,
    seed: int,
    width: int | None = None,
    last_scale: float = 0.0,
    even: bool = False,
    dtype=torch.float64,
    device="cpu",
) -> list[torch.Tensor]:
    """Initial parameters satisfying the papers' conditions on initial directions.

    ``diag``: w_l = alpha wbar, wbar = 1 + 0.1 N(0, I), for every l < L (one draw) and
    w_L = last_scale * alpha N(0, I)
    (Cor 2 needs [w_l]_j^2 - [w_L]_j^2 >= lambda; last_scale = 0 is Cor 5's w_L(0) = 0).
    ``conv`` (full length): w_l = alpha (e_0 + 0.1 N(0, I)/sqrt(d)) for l < L (one draw), whose
    Fourier
    magnitudes are close to 1/sqrt(d), and w_L as for diag (Cor 3's condition).
    ``fc``: W_l with i.i.d. N(0, alpha^2 / fan_in) entries, widths `width` (Cor 1 has no
    condition beyond reaching loss < 1).
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype).to(device)

    if _check_arch(arch) == "fc":
        width = width or d
        dims = [d] + [width] * (L - 1)
        params = [alpha * randn(dims[i], dims[i + 1]) / math.sqrt(dims[i]) for i in range(L - 1)]
        return params + [alpha * randn(width) / math.sqrt(width)]
    if arch == "diag":
        wbar = 1 + 0.1 * randn(d)
    else:
        wbar = torch.zeros(d, dtype=dtype, device=device)
        wbar[0] = 1.0
        noise = 0.1 * randn(d) / math.sqrt(d)
        if even:  # Cor 6 needs an even wbar (then F wbar is real)
            noise = torch.as_tensor(even_part(noise.cpu().numpy()), dtype=dtype, device=device)
        wbar = wbar + noise
    # the same direction for all l < L, as Thm 5 / Cor 5 / Cor 6 require (v_l = U_l eta_bar)
    return [alpha * wbar.clone() for _ in range(L - 1)] + [last_scale * alpha * randn(d)]


# ----------------------------------------------------------------------------------------------
# Training


def _norm(params: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.sqrt(sum((p * p).sum() for p in params))  # type: ignore[arg-type]  # sum of tensors is a tensor, not the start value 0


def train_exponential(
    arch: str,
    X: np.ndarray,
    y: np.ndarray,
    params: Sequence[torch.Tensor],
    steps: int,
    rel_step: float,
    record: Collection[int] = (),
    decay: float | None = None,
    renormalize: bool = False,
) -> dict:
    """Gradient descent on the exponential loss sum_i exp(-y_i f(x_i)) with the step
    eta_t = rel_step * ||Theta|| / ||grad log L||, applied to the normalized gradient
    grad L / L = grad log L.

    Why: gradient flow's path does not depend on how time is parametrized, and this schedule
    moves Theta by a fixed fraction of its norm per step, so the norm (and the margin) grows
    geometrically and the slow, log-loss-time convergence of directions becomes reachable.
    All in the parameters' dtype; log L by logsumexp, so no underflow.

    With `decay`, the fraction shrinks as rel_step / sqrt(1 + t / decay): the norm still grows
    without bound (the fractions' sum diverges) while the O(rel_step) jitter of the direction in
    the hard-margin regime (where the softmax over margins is a hard max) dies out.

    With `renormalize` the parameters are rescaled to unit norm after every step, which keeps
    long runs in floating-point range. Only valid for a single data point: then
    grad log L = -y grad f is homogeneous in Theta, the update commutes with scaling and the
    directions are unchanged (with several points the softmax over margins depends on scale).

    Returns the final parameters, beta, u = X^T r / ||X^T r|| at the last step and u_avg, its
    average over the second half of the steps (Thm 1's u_inf: once the margins are huge the
    softmax weights jump between support points from step to step, so only averages settle),
    and a history at the steps listed in `record` (beta and log(1/L)).

    Gradients in closed form (`_exponential_step_parts`), one forward pass per step shared by
    the loss, the gradient, the history and u_avg (u is the gradient's X^T r); the autograd
    loop it replaces is `_train_exponential_autograd`.
    """
    device, dtype = params[0].device, params[0].dtype
    yt = torch.as_tensor(y, dtype=dtype, device=device)
    if renormalize and len(yt) != 1:
        raise ValueError("renormalize keeps directions only for one data point")
    # rows -y_i x_i: the exponents -y_i f(x_i) are one product with beta, and the gradient's
    # X^T (-y * softmax) one product with the weights
    signed_X = -yt[:, None] * torch.as_tensor(X, dtype=dtype, device=device)
    signed_XT = signed_X.T.contiguous()
    d = signed_X.shape[1]
    theta, layers, mask = _layer_buffer(_check_arch(arch), params, d)
    record = set(record)
    history = []
    u_sum = torch.zeros(d, dtype=dtype, device=device)
    for step in range(steps + 1):
        beta, backward = _exponential_step_parts(arch, theta, layers, mask, d)
        exponents = signed_X @ beta  # log L = logsumexp(exponents)
        if step in record:
            history.append(
                {
                    "step": step,
                    "log_inv_loss": float(-torch.logsumexp(exponents, dim=0)),
                    "beta": beta.cpu().numpy().copy(),
                    "params": [p.clone() for p in layers],
                }
            )
        if step == steps:
            break
        # grad log L = sum_i softmax_i grad(-y_i f(x_i)): the layer gradients of r^T f with
        # r = -y softmax, all through g = X^T r, which is also the step's u
        g = signed_XT @ torch.softmax(exponents, dim=0)
        grads = backward(g)
        if step >= steps // 2:
            u_sum.addcdiv_(g, torch.linalg.vector_norm(g))
        frac = rel_step if decay is None else rel_step / math.sqrt(1 + step / decay)
        ratio = torch.linalg.vector_norm(theta) / torch.linalg.vector_norm(grads)
        theta.addcmul_(grads, ratio, value=-frac)  # eta = frac ||Theta|| / ||grad||
        if renormalize:
            theta /= torch.linalg.vector_norm(theta)
    # the last pass of the loop ran the forward at the final parameters
    u = signed_XT @ torch.softmax(exponents, dim=0)
    return {
        "params": [p.clone() for p in layers],
        "beta": beta.cpu().numpy().copy(),
        "u": u / torch.linalg.vector_norm(u),
        "u_avg": u_sum / torch.linalg.vector_norm(u_sum),
        "log_inv_loss": float(-torch.logsumexp(exponents, dim=0)),
        "history": history,
    }


def _layer_buffer(
    arch: str, params: Sequence[torch.Tensor], d: int
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
    """All layers in one buffer, so a step's norm and update are one operation each, and every
    layer as a view into it. diag and conv: an L x d array, short conv filters zero-padded to
    d (their circular convolution is the padded one's) with a mask that keeps the padding's
    gradient at zero; fc: the flattened W_1, .., W_{L-1}, v one after another."""
    if arch == "fc":
        theta = torch.cat([p.detach().reshape(-1) for p in params])
        layers, start = [], 0
        for p in params:
            layers.append(theta[start : start + p.numel()].view(p.shape))
            start += p.numel()
        return theta, layers, None
    lengths = [p.numel() for p in params]
    if any(p.dim() != 1 for p in params) or (arch == "diag" and set(lengths) != {d}):
        raise ValueError(f"{arch} layers are vectors of length d = {d}")
    if arch == "conv" and (max(lengths) > d or lengths[-1] != d):
        raise ValueError("conv filters need k_l <= d and k_L = d")
    theta = params[0].new_zeros(len(params), d)
    for row, p in zip(theta, params):
        row[: p.numel()] = p.detach()
    layers = [row[:k] for row, k in zip(theta, lengths)]
    if min(lengths) == d:
        return theta, layers, None
    positions = torch.arange(d, device=theta.device)
    return theta, layers, (positions < torch.tensor(lengths, device=theta.device)[:, None])


def _exclusive_products(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The product of all the rows, and stacked, for each l the product of all but the l-th
    (prefix times suffix products: no division, so a zero layer such as w_L(0) = 0 is fine;
    a handful of small products, cheaper per step than cumulative products of the stack)."""
    if len(rows) == 1:
        return rows[0], torch.ones_like(rows[0])[None]
    prefix = [rows[0]]  # prefix[k] = rows[0] .. rows[k], k < L - 1
    for r in rows[1:-1]:
        prefix.append(prefix[-1] * r)
    suffix = [rows[-1]]
    for r in reversed(rows[1:-1]):
        suffix.append(suffix[-1] * r)
    suffix.reverse()  # suffix[k] = rows[k + 1] .. rows[L - 1]
    others = [suffix[0], *(p * q for p, q in zip(prefix[:-1], suffix[1:])), prefix[-1]]
    return prefix[-1] * rows[-1], torch.stack(others)


def _exponential_step_parts(
    arch: str, theta: torch.Tensor, layers: list[torch.Tensor], mask: torch.Tensor | None, d: int
):
    """beta(Theta), and the map g -> the gradient in Theta of g^T beta (= grad of r^T f for
    fixed weights r, with g = X^T r), in the layout of `_layer_buffer`'s buffer.

    diag: beta = w_l * c_l, gradient g * c_l (c_l the product of the other layers); conv: beta's
    spectrum is the product of the filters', gradient g correlated with c_l (spectrum
    rfft(g) conj(C_l)); fc: beta = W_1 .. W_{L-1} v, gradient in W_l the outer product of
    g^T W_1 .. W_{l-1} and W_{l+1} .. v, all matrix-vector products (autograd's forward pays
    for X W_1, an n x d x d product)."""
    if arch == "diag":
        beta, others = _exclusive_products(theta.unbind(0))
        return beta, lambda g: g * others
    if arch == "conv":
        spectrum, others = _exclusive_products(torch.fft.rfft(theta, dim=-1).unbind(0))
        conj_others = others.conj()

        def conv_backward(g: torch.Tensor) -> torch.Tensor:
            grads = torch.fft.irfft(torch.fft.rfft(g) * conj_others, n=d, dim=-1)
            return grads if mask is None else grads * mask

        return torch.fft.irfft(spectrum, n=d), conv_backward
    suffixes = [layers[-1]]  # W_{l+1} .. W_{L-1} v, from the last layer back to beta
    for W in reversed(layers[:-1]):
        suffixes.append(W @ suffixes[-1])
    suffixes.reverse()

    def fc_backward(g: torch.Tensor) -> torch.Tensor:
        grads = torch.empty_like(theta)
        start, row = 0, g  # row = g^T W_1 .. W_{l-1}
        for W, right in zip(layers[:-1], suffixes[1:]):
            torch.outer(row, right, out=grads[start : start + W.numel()].view(W.shape))
            start += W.numel()
            row = row @ W
        grads[start:] = row
        return grads

    return suffixes[0].clone() if len(layers) == 1 else suffixes[0], fc_backward


def _train_exponential_autograd(
    arch: str,
    X: np.ndarray,
    y: np.ndarray,
    params: Sequence[torch.Tensor],
    steps: int,
    rel_step: float,
    record: Collection[int] = (),
    decay: float | None = None,
    renormalize: bool = False,
) -> dict:
    """`train_exponential` with autograd's gradients and a second forward pass for u_avg
    (the original loop: the reference the closed form is tested and benchmarked against)."""
    device, dtype = params[0].device, params[0].dtype
    Xt = torch.as_tensor(X, dtype=dtype, device=device)
    yt = torch.as_tensor(y, dtype=dtype, device=device)
    theta = [p.detach().clone().requires_grad_(True) for p in params]
    record = set(record)
    history = []
    d = Xt.shape[1]
    u_sum = torch.zeros(d, dtype=dtype, device=device)

    def log_loss():
        return torch.logsumexp(-yt * predict(arch, Xt, theta), dim=0)

    for step in range(steps + 1):
        if step in record:
            with torch.no_grad():
                history.append(
                    {
                        "step": step,
                        "log_inv_loss": float(-log_loss()),
                        "beta": linear_coefficients(arch, theta, d).cpu().numpy(),
                        "params": [p.detach().clone() for p in theta],
                    }
                )
        if step == steps:
            break
        grads = torch.autograd.grad(log_loss(), theta)
        with torch.no_grad():
            if step >= steps // 2:
                weights = torch.softmax(-yt * predict(arch, Xt, theta), dim=0)
                u = Xt.T @ (-yt * weights)
                u_sum = u_sum + u / torch.linalg.vector_norm(u)
            frac = rel_step if decay is None else rel_step / math.sqrt(1 + step / decay)
            eta = frac * _norm(theta) / _norm(grads)
            for p, g in zip(theta, grads):
                p -= eta * g
            if renormalize:
                if len(yt) != 1:
                    raise ValueError("renormalize keeps directions only for one data point")
                scale = _norm(theta)
                for p in theta:
                    p /= scale
    with torch.no_grad():
        f = predict(arch, Xt, theta)
        weights = torch.softmax(-yt * f, dim=0)  # r_i / sum |r|, up to the sign -y_i
        u = Xt.T @ (-yt * weights)
        u = u / torch.linalg.vector_norm(u)
        final = {
            "params": [p.detach() for p in theta],
            "beta": linear_coefficients(arch, theta, d).cpu().numpy(),
            "u": u,
            "u_avg": u_sum / torch.linalg.vector_norm(u_sum),
            "log_inv_loss": float(-torch.logsumexp(-yt * f, dim=0)),
            "history": history,
        }
    return final


def _all_but_one(arch: str, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """For each layer l, the combination of all the other filters that multiplies w_l in beta:
    diag, c_l = prod_{k != l} w_k; conv, the spectrum prod_{k != l} rfft(w_k) (beta is the
    circular convolution w_1 (*) .. (*) w_L, so beta's spectrum is the product of the filters').
    Prefix and suffix products: no division, so zero filters (w_L(0) = 0) are fine."""
    factors = list(params) if arch == "diag" else [torch.fft.rfft(w) for w in params]
    prefix = [torch.ones_like(factors[0])]
    for f in factors[:-1]:
        prefix.append(prefix[-1] * f)
    suffix = [torch.ones_like(factors[0])]
    for f in reversed(factors[1:]):
        suffix.append(suffix[-1] * f)
    suffix.reverse()
    return [a * b for a, b in zip(prefix, suffix)]


def square_loss_parts(
    arch: str, X: torch.Tensor, y: torch.Tensor, params: Sequence[torch.Tensor], jacobian: bool
) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
    """Loss 1/2 ||f(X) - y||^2, its gradient in every layer and (if asked) the Jacobian of the
    outputs in the parameters, in closed form for the diag and conv networks.

    f(x) = x^T beta with beta linear in each w_l: beta = w_l * c_l (diag), or the circular
    convolution of w_l with c_l (conv). With g = X^T r (r the residuals) the layer gradient is
    g * c_l, or g correlated with c_l (spectrum rfft(g) conj(C_l)); the Jacobian's block l is
    X * c_l, or the rows of X correlated with c_l. What autograd computes (`layer_gradients`,
    checked against it in the tests), without its per-operation cost: the square-loss runs of
    Cor. 5 / 6 take hundreds of thousands of steps on problems of 20 x 60."""
    d = X.shape[1]
    others = _all_but_one(arch, params)
    if arch == "diag":
        beta = params[0] * others[0]
        residual = X @ beta - y
        g = X.T @ residual
        grads = [g * c for c in others]
        blocks = [X * c for c in others] if jacobian else []
    elif arch == "conv":
        beta = torch.fft.irfft(torch.fft.rfft(params[0]) * others[0], n=d)
        residual = X @ beta - y
        g = X.T @ residual
        g_hat = torch.fft.rfft(g)
        grads = [torch.fft.irfft(g_hat * torch.conj(c), n=d) for c in others]
        if jacobian:
            X_hat = torch.fft.rfft(X, dim=-1)
            blocks = [torch.fft.irfft(X_hat * torch.conj(c), n=d, dim=-1) for c in others]
        else:
            blocks = []
    else:
        raise ValueError(f"closed-form gradients for diag and conv only, not {arch!r}")
    J = torch.cat(blocks, dim=1) if jacobian else None
    return 0.5 * (residual @ residual), grads, J


def train_square(
    arch: str,
    X: np.ndarray,
    y: np.ndarray,
    params: Sequence[torch.Tensor],
    steps: int,
    rel_step: float,
    stability: float,
    tol: float = 1e-24,
    curvature_every: int = 25,
) -> dict:
    """Gradient descent on 1/2 ||f(X) - y||^2 with
    eta_t = min(rel_step ||Theta|| / ||grad||, stability / ||J||_2^2),
    J the Jacobian of the outputs in the parameters (refreshed every `curvature_every` steps):
    fraction-of-norm steps through the slow start of small initializations, and a step below
    the stability limit 2 / lambda_max of the Gauss-Newton curvature near the solution. Both
    knobs are discretization parameters: halving both approximates gradient flow's path more
    closely (its limit is what Thm 5 describes). Stops when the loss drops below `tol`
    (`converged`: decided on the loss the loop computes, not on a re-evaluation whose round-off
    may land on the other side of `tol`; the default 1e-24 lies some 1e5 times above the
    float64 floor of the loss, about n (1e-16 max |y|)^2); `steps` ending first leaves
    `converged` False.
    Gradients and Jacobian in closed form (`square_loss_parts`) for diag and conv, by autograd
    for fc. Returns params, beta, loss, steps used and `converged`."""
    device, dtype = params[0].device, params[0].dtype
    Xt = torch.as_tensor(X, dtype=dtype, device=device)
    yt = torch.as_tensor(y, dtype=dtype, device=device)
    if _check_arch(arch) == "fc":
        return _train_square_autograd(
            arch, Xt, yt, params, steps, rel_step, stability, tol, curvature_every
        )
    theta = [p.detach().clone() for p in params]
    used, cap, converged = 0, math.inf, False
    for step in range(1, steps + 1):
        used = step
        refresh = (step - 1) % curvature_every == 0
        loss_t, grads, J = square_loss_parts(arch, Xt, yt, theta, jacobian=refresh)
        if J is not None:
            cap = stability / float(torch.linalg.matrix_norm(J, ord=2)) ** 2
        if float(loss_t) < tol:
            converged = True
            break
        eta = min(cap, float(rel_step * _norm(theta) / _norm(grads)))
        for p, g in zip(theta, grads):
            p -= eta * g
    beta = linear_coefficients(arch, theta, X.shape[1]).cpu().numpy()
    loss = float(0.5 * ((predict(arch, Xt, theta) - yt) ** 2).sum())
    return {"params": theta, "beta": beta, "loss": loss, "steps": used, "converged": converged}


def _train_square_autograd(
    arch: str,
    Xt: torch.Tensor,
    yt: torch.Tensor,
    params: Sequence[torch.Tensor],
    steps: int,
    rel_step: float,
    stability: float,
    tol: float,
    curvature_every: int,
) -> dict:
    """`train_square` with autograd's gradients and Jacobian (any architecture)."""
    theta = [p.detach().clone().requires_grad_(True) for p in params]
    used, cap, converged = 0, math.inf, False
    for step in range(1, steps + 1):
        used = step
        if (step - 1) % curvature_every == 0:
            jac = torch.autograd.functional.jacobian(
                lambda *ps: predict(arch, Xt, ps), tuple(p.detach() for p in theta)
            )
            J = torch.cat([j.reshape(len(yt), -1) for j in jac], dim=1)
            cap = stability / float(torch.linalg.matrix_norm(J, ord=2)) ** 2
        loss_t = 0.5 * ((predict(arch, Xt, theta) - yt) ** 2).sum()
        if float(loss_t.detach()) < tol:
            converged = True
            break
        grads = torch.autograd.grad(loss_t, theta)
        with torch.no_grad():
            eta = min(cap, float(rel_step * _norm(theta) / _norm(grads)))
            for p, g in zip(theta, grads):
                p -= eta * g
    with torch.no_grad():
        beta = linear_coefficients(arch, theta, Xt.shape[1]).cpu().numpy()
        loss = float(0.5 * ((predict(arch, Xt, theta) - yt) ** 2).sum())
    return {
        "params": [p.detach() for p in theta],
        "beta": beta,
        "loss": loss,
        "steps": used,
        "converged": converged,
    }


# ----------------------------------------------------------------------------------------------
# Small self-checks shown in the chapter


def tensor_form_check(seed: int = 0, d: int = 6) -> list[dict]:
    """Sec. 2: the contraction M(x) o (v_1, .., v_L) against each network's own forward pass,
    for diagonal, (full-length and short-filter) convolutional and fully connected nets."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d)
    cases = [
        ("diag", [3], [rng.standard_normal(d) for _ in range(3)]),
        ("conv", [d, d, d], [rng.standard_normal(d) for _ in range(3)]),
        ("conv", [3, 4, d], [rng.standard_normal(k) for k in (3, 4, d)]),
        (
            "fc",
            [d, 4, 3],
            [rng.standard_normal((d, 4)), rng.standard_normal((4, 3)), rng.standard_normal(3)],
        ),
    ]
    rows = []
    for arch, shape, vs in cases:
        M = data_tensor(arch, x, shape)
        tensor_value = contract(M, vs)
        network_value = float(
            predict(arch, torch.as_tensor(x)[None], [torch.as_tensor(v) for v in vs])[0]
        )
        rows.append(
            {
                "architecture": arch,
                "shape": str(list(M.shape)),
                "M(x) o (v_1..v_L)": tensor_value,
                "network f(x)": network_value,
                "relative error": abs(tensor_value - network_value) / abs(network_value),
            }
        )
    return rows
