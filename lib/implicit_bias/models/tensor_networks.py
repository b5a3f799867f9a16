"""Linear tensor networks (Yun, Krishnan & Mobahi 2021, "A unifying view on implicit bias in
training linear neural networks").

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
tensors (`data_tensor`) exist to check that identity.

Theory pieces: tensor singular vectors (higher-order power method, "Singular value
decomposition of tensor"), the l_{2/L} max-margin problems of Thm 2 / Cor 2 / Cor 3 (LP for
L = 2, a stationary point by iteratively reweighted l1 for L > 2), h_L and H_L of Lemma 4 /
Thm 5, the Q_{L,alpha} interpolation minimizer of Thm 5 / Cor 5 / Cor 6, and the closed forms
of Thm 3 and Thm 6 (single data point, 2 layers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cvxpy as cp
import numpy as np
import torch
from scipy import optimize, special

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


def layer_gradients(arch: str, x: torch.Tensor, params: Sequence[torch.Tensor]
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


def singular_vector_residual(arch: str, x: torch.Tensor, params: Sequence[torch.Tensor]
                             ) -> float:
    """How far the directions u_l = v_l/||v_l|| are from a singular tuple of M(x):
    max_l ||M(x) o (.., I, ..) - s u_l|| / |s| with s = M(x) o (u_1, .., u_L)."""
    units = [_unit(p) for p in params]
    grads = layer_gradients(arch, x, units)
    s = float(predict(arch, x.reshape(1, -1), units)[0])
    return max(float(torch.linalg.vector_norm(g - s * u.reshape(-1))) for g, u in
               zip(grads, units)) / abs(s)


def tensor_power_iteration(arch: str, x: torch.Tensor, init: Sequence[torch.Tensor],
                           max_iter: int = 20000, tol: float = 1e-13
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


def separable_data(n: int, d: int, sparsity: int, seed: int, even: bool = False
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


def regression_data(n: int, d: int, seed: int, even: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
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


def init_params(arch: str, d: int, L: int, alpha: float, seed: int, width: int | None = None,
                last_scale: float = 0.0, even: bool = False, dtype=torch.float64,
                device="cpu") -> list[torch.Tensor]:
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
        params = [alpha * randn(dims[i], dims[i + 1]) / math.sqrt(dims[i])
                  for i in range(L - 1)]
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
    return torch.sqrt(sum((p * p).sum() for p in params))


def train_exponential(arch: str, X: np.ndarray, y: np.ndarray, params: Sequence[torch.Tensor],
                      steps: int, rel_step: float, record: Sequence[int] = (),
                      decay: float | None = None, renormalize: bool = False) -> dict:
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
    """
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
                history.append({"step": step, "log_inv_loss": float(-log_loss()),
                                "beta": linear_coefficients(arch, theta, d).cpu().numpy(),
                                "params": [p.detach().clone() for p in theta]})
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
        final = {"params": [p.detach() for p in theta],
                 "beta": linear_coefficients(arch, theta, d).cpu().numpy(),
                 "u": u, "u_avg": u_sum / torch.linalg.vector_norm(u_sum),
                 "log_inv_loss": float(-torch.logsumexp(-yt * f, dim=0)),
                 "history": history}
    return final


def train_square(arch: str, X: np.ndarray, y: np.ndarray, params: Sequence[torch.Tensor],
                 steps: int, rel_step: float, stability: float, tol: float = 1e-24,
                 curvature_every: int = 25) -> dict:
    """Gradient descent on 1/2 ||f(X) - y||^2 with
    eta_t = min(rel_step ||Theta|| / ||grad||, stability / ||J||_2^2),
    J the Jacobian of the outputs in the parameters (refreshed every `curvature_every` steps):
    fraction-of-norm steps through the slow start of small initializations, and a step below
    the stability limit 2 / lambda_max of the Gauss-Newton curvature near the solution. Both
    knobs are discretization parameters: halving both approximates gradient flow's path more
    closely (its limit is what Thm 5 describes). Stops when the loss drops below `tol`.
    Returns params, beta, loss and steps used."""
    device, dtype = params[0].device, params[0].dtype
    Xt = torch.as_tensor(X, dtype=dtype, device=device)
    yt = torch.as_tensor(y, dtype=dtype, device=device)
    theta = [p.detach().clone().requires_grad_(True) for p in params]
    used, cap = 0, math.inf
    for step in range(1, steps + 1):
        used = step
        if (step - 1) % curvature_every == 0:
            jac = torch.autograd.functional.jacobian(
                lambda *ps: predict(arch, Xt, ps), tuple(p.detach() for p in theta))
            J = torch.cat([j.reshape(len(y), -1) for j in jac], dim=1)
            cap = stability / float(torch.linalg.matrix_norm(J, ord=2)) ** 2
        loss_t = 0.5 * ((predict(arch, Xt, theta) - yt) ** 2).sum()
        if float(loss_t.detach()) < tol:
            break
        grads = torch.autograd.grad(loss_t, theta)
        with torch.no_grad():
            eta = min(cap, float(rel_step * _norm(theta) / _norm(grads)))
            for p, g in zip(theta, grads):
                p -= eta * g
    with torch.no_grad():
        beta = linear_coefficients(arch, theta, X.shape[1]).cpu().numpy()
        loss = float(0.5 * ((predict(arch, Xt, theta) - yt) ** 2).sum())
    return {"params": [p.detach() for p in theta], "beta": beta, "loss": loss, "steps": used}


# ----------------------------------------------------------------------------------------------
# Max-margin problems (Cor 1, Thm 2 / Cor 2, Cor 3)


def margin_normalized(X: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """z scaled so that its minimum margin min_i y_i x_i^T z is 1."""
    return z / np.min(y * (X @ z))


def max_margin_with_duals(X: np.ndarray, y: np.ndarray, norm: str,
                          weights: np.ndarray | None = None, solver: str = "CLARABEL"
                          ) -> tuple[np.ndarray, np.ndarray]:
    """argmin ||z|| s.t. y_i x_i^T z >= 1 and the constraints' multipliers nu >= 0.

    `norm`: "l2" (the SVM of Cor 1, as min ||z||_2^2 / 2), "l1" (Cor 2, L = 2; an LP) or
    "fourier_l1" (Cor 3, L = 2: sum_j |[F z]_j| with the complex modulus written as
    ||(Re F_j z, Im F_j z)||_2, an SOCP); `weights` turn the l1 norms into weighted ones (the
    reweighted steps below). The multipliers give u_inf of Thm 1: at a KKT point of the margin
    problem the parameters are a singular tuple of M(X^T (y * nu)).
    """
    d = X.shape[1]
    z = cp.Variable(d)
    w = np.ones(d) if weights is None else np.asarray(weights, dtype=float)
    if norm == "l2":
        objective = cp.sum_squares(z) / 2
    elif norm == "l1":
        objective = w @ cp.abs(z)
    elif norm == "fourier_l1":
        F = dft_matrix(d)
        objective = w @ cp.norm(cp.vstack([F.real @ z, F.imag @ z]), 2, axis=0)
    else:
        raise ValueError(f"unknown norm {norm!r}; valid: 'l2', 'l1', 'fourier_l1'")
    margins = cp.multiply(y, X @ z) >= 1
    problem = cp.Problem(cp.Minimize(objective), [margins])
    problem.solve(solver=solver)
    if z.value is None:
        raise RuntimeError(f"max-margin ({norm}) failed: {problem.status}")
    return np.asarray(z.value), np.maximum(np.asarray(margins.dual_value), 0.0)


def fourier_l1_max_margin(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ||F z||_1 s.t. y_i x_i^T z >= 1 (Cor 3 with L = 2)."""
    return max_margin_with_duals(X, y, "fourier_l1")[0]


def lp_stationary_point(X: np.ndarray, y: np.ndarray, L: int, z0: np.ndarray,
                        fourier: bool = False, iters: int = 30) -> dict:
    """A stationary point of min ||T z||_{2/L} s.t. y_i x_i^T z >= 1 (Thm 2 / Cor 2 / Cor 3),
    T = I or the DFT F, by iteratively reweighted l1 (majorize-minimize of sum |T z|^{2/L},
    each step a weighted-l1 max-margin program) started from `z0` (e.g. GD's direction).

    The objective decreases monotonically and its limit points are stationary; started at a
    trained network's direction, it finds the stationary point GD is heading to (if any).
    Returns z, the last step's multipliers nu, the objective sum |Tz|^{2/L} per iteration and
    the last relative change.
    """
    d = X.shape[1]
    p = 2.0 / L
    T = dft_matrix(d) if fourier else np.eye(d)
    z_cur = margin_normalized(X, y, np.asarray(z0, dtype=float))
    objective = [float(np.sum(np.abs(T @ z_cur) ** p))]
    change, nu = float("nan"), np.zeros(len(y))
    for _ in range(iters):
        mag = np.abs(T @ z_cur)
        eps = 1e-9 * mag.max()
        weights = ((mag + eps) / (mag.max() + eps)) ** (p - 1)  # gradient of |.|^p, rescaled
        z_new, nu = max_margin_with_duals(X, y, "fourier_l1" if fourier else "l1", weights)
        change = float(np.linalg.norm(z_new - z_cur) / np.linalg.norm(z_cur))
        z_cur = z_new
        objective.append(float(np.sum(np.abs(T @ z_cur) ** p)))
        if change < 1e-10:
            break
    return {"z": z_cur, "nu": nu, "objective": objective, "last_change": change}


# ----------------------------------------------------------------------------------------------
# Lemma 4 / Theorem 5: h_L, H_L and the Q_{L,alpha} interpolation minimizer


def _q_star(y: np.ndarray, L: int, iters: int = 100) -> np.ndarray:
    """q >= 0 solving q (1 + q^2)^{(L-1)/2} = y >= 0 (that is h_L at the time where q_L = q).

    Newton in u = log q: phi(u) = u + (L-1)/2 log(1 + e^{2u}) - log y is convex and increasing,
    so Newton from the right (q_0 = min(y, y^{1/L}), where h >= y) converges monotonically."""
    y = np.asarray(y, dtype=float)
    out = np.zeros_like(y)
    pos = y > 0
    if not np.any(pos):
        return out
    yp = y[pos]
    u = np.log(np.minimum(yp, yp ** (1.0 / L)))
    log_y = np.log(yp)
    for _ in range(iters):
        e2 = np.exp(np.minimum(2 * u, 700.0))
        # log(1 + e^{2u}) computed stably
        phi = u + 0.5 * (L - 1) * np.logaddexp(0.0, 2 * u) - log_y
        dphi = 1 + (L - 1) * e2 / (1 + e2)
        step = phi / dphi
        u = u - step
        if np.max(np.abs(step)) < 1e-15:
            break
    out[pos] = np.exp(u)
    return out


def _time_of_q(q: np.ndarray, L: int) -> np.ndarray:
    """T_L(q) = int_0^q (1 + s^2)^{-(L-1)/2} ds = int_0^{atan q} cos^{L-3}: the ODE time at
    which q_L reaches q (p_L = sqrt(1 + q_L^2) by the invariant p^2 - q^2 = 1)."""
    q = np.asarray(q, dtype=float)
    if L == 2:
        return np.arcsinh(q)
    if L == 3:
        return np.arctan(q)
    b = (L - 2) / 2.0  # int_0^phi cos^k = B(1/2, (k+1)/2)/2 * I_{sin^2 phi}(1/2, (k+1)/2)
    x = q**2 / (1 + q**2)
    return 0.5 * special.beta(0.5, b) * special.betainc(0.5, b, x)


def escape_time(L: int) -> float:
    """c of Lemma 4: the end of the maximal interval of existence (inf for L = 2)."""
    if L == 2:
        return math.inf
    return 0.5 * special.beta(0.5, (L - 2) / 2.0)


def h_inverse(y: np.ndarray, L: int) -> np.ndarray:
    """h_L^{-1}(y) for h_L = p_L^{L-1} q_L of Lemma 4 (odd, so computed on |y|)."""
    y = np.asarray(y, dtype=float)
    return np.sign(y) * _time_of_q(_q_star(np.abs(y), L), L)


def h_forward(t: np.ndarray, L: int) -> np.ndarray:
    """h_L(t) = p^{L-1} q on (-c, c), by inverting T_L in closed form."""
    t = np.asarray(t, dtype=float)
    a = np.abs(t)
    if L == 2:
        q = np.sinh(a)
    elif L == 3:
        q = np.tan(a)
    else:
        b = (L - 2) / 2.0
        x = special.betaincinv(0.5, b, a / (0.5 * special.beta(0.5, b)))
        q = np.sqrt(x / (1 - x))
    return np.sign(t) * q * (1 + q**2) ** ((L - 1) / 2)


def H(y: np.ndarray, L: int) -> np.ndarray:
    """H_L(y) = int_0^y h_L^{-1} (Thm 5) = y T_L(q*) - q*^2/2 (integration by parts, with
    int_0^tau h = int q dq); even, convex, ~ y^2/2 near 0 and ~ c|y| for large |y|."""
    a = np.abs(np.asarray(y, dtype=float))
    q = _q_star(a, L)
    return a * _time_of_q(q, L) - 0.5 * q**2


def _h_prime_at(q: np.ndarray, L: int) -> np.ndarray:
    """h_L'(tau) at the time where q_L = q: (L-1) p^{2L-4} q^2 + p^{2L-2}."""
    p2 = 1 + q**2
    return (L - 1) * p2 ** (L - 2) * q**2 + p2 ** (L - 1)


def q_value(z: np.ndarray, L: int, scale: np.ndarray, weight: np.ndarray) -> float:
    """Q(z) = sum_j weight_j H_L(z_j / scale_j); Cor 5: weight = alpha^2 wbar^2,
    scale = alpha^L |wbar|^L."""
    return float(np.sum(weight * H(np.asarray(z) / scale, L)))


def q_minimizer(X: np.ndarray, y: np.ndarray, L: int, scale: np.ndarray, weight: np.ndarray,
                max_iter: int = 500, tol: float = 1e-20) -> dict:
    """argmin sum_j weight_j H_L(z_j / scale_j) s.t. X z = y (Thm 5 / Cor 5 / Cor 6).

    Equality-constrained Newton's method with backtracking from X^+ y: the objective is smooth
    and strictly convex, its Hessian diagonal, so each step solves an n x n system. Returns z,
    the iterations and the KKT residual ||P_null(grad Q)|| / ||grad Q||.
    """
    X = np.asarray(X, dtype=float)
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (X.shape[1],))
    weight = np.broadcast_to(np.asarray(weight, dtype=float), (X.shape[1],))
    z = np.linalg.pinv(X) @ y

    def grad_hess(z):
        t = z / scale
        q = _q_star(np.abs(t), L)
        g = weight / scale * np.sign(t) * _time_of_q(q, L)
        h = weight / scale**2 / _h_prime_at(q, L)
        return g, h

    def objective(z):
        return q_value(z, L, scale, weight)

    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        g, h = grad_hess(z)
        hinv = 1.0 / h
        # Newton step dz = -Hinv (g - X^T nu), with X dz = 0 (z stays feasible)
        A = (X * hinv) @ X.T
        nu = np.linalg.solve(A, X @ (hinv * g))
        dz = -hinv * (g - X.T @ nu)
        decrement = float(-(g @ dz))
        if decrement < tol * max(1.0, abs(objective(z))):
            break
        step, f0 = 1.0, objective(z)
        while objective(z + step * dz) > f0 - 0.25 * step * decrement and step > 1e-12:
            step *= 0.5
        if step <= 1e-12:  # no more progress at float64 resolution
            break
        z = z + step * dz
        z = z - np.linalg.pinv(X) @ (X @ z - y)  # remove round-off drift from X z = y
    g, _ = grad_hess(z)
    proj = g - X.T @ np.linalg.lstsq(X.T, g, rcond=None)[0]
    kkt = float(np.linalg.norm(proj) / np.linalg.norm(g))
    return {"z": z, "iterations": it, "kkt_residual": kkt}


# ----------------------------------------------------------------------------------------------
# Theorem 3 and Theorem 6: one data point, two layers


def two_layer_svd(M: np.ndarray, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compact SVD M = U_1 diag(s) U_2^T (s > tol * s_max)."""
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    keep = s > tol * s[0]
    return U[:, keep], s[keep], Vt[keep].T


def theorem3_limit(M: np.ndarray, y: float) -> tuple[np.ndarray, np.ndarray]:
    """Thm 3's limit directions of (v_1, v_2) for one point: rho = argmin ||rho||_1 s.t.
    y s^T rho >= 1 puts all its mass on the top singular value, so v_1 -> U_1 eta_1,
    v_2 -> U_2 eta_2 with |eta_1| = |eta_2| = |rho|^{1/2} and sign(eta_1) = sign(y) sign(eta_2)
    (returned as unit vectors of the concatenated, equal-norm pair; a global sign is free)."""
    U1, s, U2 = two_layer_svd(M)
    if len(s) > 1 and s[1] > s[0] * (1 - 1e-9):
        raise ValueError("top singular value is not simple: the l1 problem has many solutions")
    rho = np.zeros_like(s)
    rho[0] = np.sign(y) / s[0]
    eta2 = np.sqrt(np.abs(rho))
    eta1 = np.sign(y) * eta2
    return U1 @ eta1, U2 @ eta2


def theorem6_limit(M: np.ndarray, y: float, v1bar: np.ndarray, v2bar: np.ndarray,
                   alpha: float, as_printed: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, float]:
    """Thm 6's closed-form limit of gradient flow on 1/2 (f(x) - y)^2 from
    (v_1, v_2)(0) = alpha (v1bar, v2bar):

    v_1 = alpha U_1 (a cosh(nu s) + b sinh(nu s)) + alpha (I - U_1 U_1^T) v1bar, likewise v_2
    with a <-> b, where a = U_1^T v1bar, b = U_2^T v2bar and nu = g^{-1}(y / alpha^2),
    g(nu) = sum_j s_j ((a_j^2 + b_j^2)/2 sinh(2 s_j nu) + a_j b_j cosh(2 s_j nu)).
    Returns (v_1, v_2, nu). `as_printed=True` gives the slide's v_2 instead, which repeats
    v_1's bracket (a cosh + b sinh); it fails even at nu = 0, where v_2 must be alpha v2bar.
    """
    U1, s, U2 = two_layer_svd(M)
    a, b = U1.T @ v1bar, U2.T @ v2bar

    def g(nu):
        return float(np.sum(s * ((a**2 + b**2) / 2 * np.sinh(2 * s * nu)
                                 + a * b * np.cosh(2 * s * nu))))

    target = y / alpha**2
    hi = 1.0
    while (g(hi) - target) * (g(-hi) - target) > 0:
        hi *= 2
    nu = optimize.brentq(lambda t: g(t) - target, -hi, hi, xtol=1e-15, rtol=1e-15)
    ch, sh = np.cosh(nu * s), np.sinh(nu * s)
    v1 = alpha * U1 @ (a * ch + b * sh) + alpha * (v1bar - U1 @ a)
    inner2 = (a * ch + b * sh) if as_printed else (b * ch + a * sh)
    v2 = alpha * U2 @ inner2 + alpha * (v2bar - U2 @ b)
    return v1, v2, nu


# ----------------------------------------------------------------------------------------------
# Sweep tasks (JSON in, JSON out) used by the chapter


def _reference_direction(arch: str, L: int, X: np.ndarray, y: np.ndarray, beta: np.ndarray
                         ) -> tuple[str, np.ndarray, np.ndarray]:
    """The direction the theorem predicts and its margin multipliers: Cor 1 (fc: l2 SVM),
    Cor 2 with L = 2 (diag: l1 LP), Cor 3 with L = 2 (conv: Fourier-l1 SOCP); for L > 2
    (nonconvex l_{2/L}) the stationary point that iteratively reweighted l1 reaches from GD's
    own direction."""
    if arch == "fc":
        return ("l2 max-margin (SVM)", *max_margin_with_duals(X, y, "l2"))
    if L == 2 and arch == "diag":
        return ("l1 max-margin (LP)", *max_margin_with_duals(X, y, "l1"))
    if L == 2:
        return ("Fourier-l1 max-margin (SOCP)", *max_margin_with_duals(X, y, "fourier_l1"))
    st = lp_stationary_point(X, y, L, beta, fourier=arch == "conv")
    return f"stationary point of the l_(2/{L}) problem (IRL1 from GD)", st["z"], st["nu"]


def classification_task(task: dict) -> dict:
    """One exponential-loss run on separable data (Thm 1, Cor 1-3): trains, then measures
    Thm 1's singular-vector residual (u_inf from the reference problem's multipliers, and
    from the late-phase average u_avg), the cosine to the predicted direction along the run,
    and the Fourier spectrum."""
    device = torch.device(task.get("device", "cpu"))
    X, y = separable_data(task["n"], task["d"], task["sparsity"], task["data_seed"])
    params = init_params(task["arch"], task["d"], task["L"], task["alpha"], task["init_seed"],
                         device=device)
    out = train_exponential(task["arch"], X, y, params, task["steps"], task["rel_step"],
                            record=task["record"], decay=task["decay"])
    beta = out["beta"]
    name, ref, nu = _reference_direction(task["arch"], task["L"], X, y, beta)
    # Thm 1 with u_inf from the reference's multipliers: -u_inf ~ X^T (y * nu)
    x_kkt = torch.as_tensor(X.T @ (y * nu), dtype=out["params"][0].dtype,
                            device=out["params"][0].device)
    margins = y * (X @ beta)
    F = dft_matrix(task["d"])
    return {
        "reference": name, "reference_z": ref.tolist(), "beta": beta.tolist(),
        "steps": [h["step"] for h in out["history"]],
        "log_inv_loss": [h["log_inv_loss"] for h in out["history"]],
        "cosine_gap": [1 - cosine(h["beta"], ref) for h in out["history"]],
        "final_cosine_gap": 1 - cosine(beta, ref),
        "thm1_kkt_residual": singular_vector_residual(task["arch"], x_kkt, out["params"]),
        "thm1_kkt_residual_path": [singular_vector_residual(task["arch"], x_kkt, h["params"])
                                   for h in out["history"]],
        "dual_weights": nu.tolist(),
        "thm1_uavg_residual": singular_vector_residual(task["arch"], -out["u_avg"],
                                                       out["params"]),
        "normalized_margins": (margins / margins.min()).tolist(),
        "fourier_magnitudes": np.abs(F @ beta).tolist(),
    }


def q_limit(X: np.ndarray, y: np.ndarray, arch: str, L: int, alpha: float, wbar: np.ndarray,
            variant: str = "derived") -> np.ndarray:
    """The Q_{L,alpha}-minimizer that Thm 5 predicts as GD's regression limit.

    ``diag`` (Cor 5): Q = alpha^2 sum wbar_j^2 H_L(z_j / (alpha^L |wbar_j|^L)); the variant
    "thm5_printed" uses the Theorem 5 slide's argument rho_j / (alpha L |eta_j|^L).
    ``conv`` (Cor 6, even data and wbar): with S = d^{(L-1)/2} F and U_l = F^* (Cor 3),
    rho = d^{-(L-1)/2} F z, so "derived" is
    Q = alpha^2 sum [F wbar]_j^2 H_L(d^{-(L-1)/2} [F z]_j / (alpha^L |[F wbar]_j|^L));
    "cor6_printed" drops the d^{-(L-1)/2} (as the slide prints it). On even vectors F acts as
    its real part C (symmetric, C^2 = I there), so we solve for zeta = F z with X C zeta = y.
    """
    if arch == "diag":
        a = np.abs(wbar)
        scale = (alpha * L * a**L) if variant == "thm5_printed" else alpha**L * a**L
        return q_minimizer(X, y, L, scale, alpha**2 * a**2)["z"]
    d = X.shape[1]
    C = dft_matrix(d).real
    eta = C @ wbar
    factor = 1.0 if variant == "cor6_printed" else d ** (-(L - 1) / 2)
    scale = alpha**L * np.abs(eta) ** L / factor
    return C @ q_minimizer(X @ C, y, L, scale, alpha**2 * eta**2)["z"]


def regression_task(task: dict) -> dict:
    """One square-loss run from w_l(0) = alpha wbar (l < L), w_L(0) = 0 (Thm 5, Cor 5, Cor 6),
    with the GD limit compared to the Q-minimizers (derived and as printed) and to the
    min-l1 / weighted min-l2 interpolators (the alpha -> 0 / alpha -> inf ends)."""
    from .convex import min_l1_interpolator, min_l2_interpolator

    device = torch.device(task.get("device", "cpu"))
    arch, L, d, alpha = task["arch"], task["L"], task["d"], task["alpha"]
    even = arch == "conv"
    X, y = regression_data(task["n"], d, task["data_seed"], even=even)
    if task["wbar"] == "ones":
        wbar = np.zeros(d) if even else np.ones(d)
        if even:
            wbar[0] = 1.0
    else:
        params0 = init_params(arch, d, L, 1.0, int(task["wbar"]), even=even)
        wbar = params0[0].numpy()
    params = [torch.as_tensor(alpha * wbar, device=device) for _ in range(L - 1)]
    params.append(torch.zeros(d, dtype=torch.float64, device=device))
    out = train_square(arch, X, y, params, task["steps"], task["rel_step"], task["stability"])
    beta = out["beta"]

    def rel(z):
        return float(np.linalg.norm(beta - z) / np.linalg.norm(z))

    result = {"beta": beta.tolist(), "loss": out["loss"], "steps_used": out["steps"]}
    if not out["loss"] < 1e-24:  # train_square's target: stopped by the step cap instead
        result["status"] = "unconverged"
    variants = ["derived", "thm5_printed"] if arch == "diag" else ["derived", "cor6_printed"]
    for v in variants:
        result[f"error_{v}"] = rel(q_limit(X, y, arch, L, alpha, wbar, v))
    if arch == "diag":
        l1 = min_l1_interpolator(X, y).x
        l2 = min_l2_interpolator(X, y, weights=np.abs(wbar) ** (2 * L - 2)).x
        result["distance_l1"], result["distance_l2"] = rel(l1), rel(l2)
    return result


def single_point_setup(d: int, k1: int, seed: int, last_scale: float = 0.3
                       ) -> dict:
    """One data point x ~ N(0, I_d) and a 2-layer circular conv net with filters (k1, d)
    (k1 < d: not orthogonally decomposable, only Thm 3 / Thm 6's assumptions apply), with
    initial directions v1bar = U_1 (1 + 0.1 N) + (I - U_1 U_1^T) N, v2bar = last_scale U_2 N:
    the condition [U_1^T v1bar]_j^2 - [U_2^T v2bar]_j^2 >= lambda is reported as `lambda`."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d)
    M = data_tensor("conv", x, [k1, d])
    U1, s, U2 = two_layer_svd(M)
    m = len(s)
    n1 = rng.standard_normal(k1)
    v1bar = U1 @ (1 + 0.1 * rng.standard_normal(m)) + (n1 - U1 @ (U1.T @ n1))
    v2bar = last_scale * U2 @ rng.standard_normal(m)
    lam = float(np.min((U1.T @ v1bar) ** 2 - (U2.T @ v2bar) ** 2))
    return {"x": x, "M": M, "s": s, "v1bar": v1bar, "v2bar": v2bar, "lambda": lam}


def theorem3_task(task: dict) -> dict:
    """Thm 3: a 2-layer tensor network on one point (x, y) with the exponential loss; GD with
    fraction-of-norm steps (for one point the normalized update is linear in Theta, so any
    step keeps the flow's limit direction: the top singular pair of M(x)), compared with the
    closed-form limit. Returns the direction errors 1 - |cos| of v_1 and v_2, whether the
    relative sign follows sign(eta_1) = sign(y) sign(eta_2), and ||v_1|| / ||v_2||."""
    setup = single_point_setup(task["d"], task["k1"], task["seed"])
    y = float(task["y"])
    k1, d = task["k1"], task["d"]
    params = [torch.as_tensor(task["alpha"] * setup["v1bar"]),
              torch.as_tensor(task["alpha"] * setup["v2bar"])]
    # train_exponential runs the conv net with filters (k1, d) on the single point
    out = train_exponential("conv", setup["x"][None], np.array([y]), params, task["steps"],
                            task["rel_step"], renormalize=task.get("renormalize", False))
    v1, v2 = (p.cpu().numpy() for p in out["params"])
    p1, p2 = theorem3_limit(setup["M"], y)
    sign_ok = bool(np.sign(v1 @ p1) == np.sign(v2 @ p2))
    assert v1.shape == (k1,) and v2.shape == (d,)
    return {"lambda": setup["lambda"], "s": setup["s"].tolist(),
            "error_v1": 1 - abs(cosine(v1, p1)), "error_v2": 1 - abs(cosine(v2, p2)),
            "sign_rule_holds": sign_ok,
            "norm_ratio": float(np.linalg.norm(v1) / np.linalg.norm(v2)),
            "log_inv_loss": out["log_inv_loss"]}


def _two_layer_gd(M, y, v1, v2, lr, tol=1e-12, max_steps=10**7):
    """GD on the square loss until the residual |r| falls below `tol`; returns (v1, v2, steps),
    steps as a fractional crossing time: log |r| interpolated linearly between the two steps
    that bracket `tol`. The residual decays geometrically, so this time is a smooth function of
    the iterates, and `tol` sits well above round-off (|r| ~ 1e-16 |y|), where counting whole
    steps to a threshold turned kernel-dependent round-off into tens of steps. steps is NaN if
    `max_steps` ran out (unconverged)."""
    previous = None
    for step in range(max_steps):
        r = float(v1 @ M @ v2 - y)
        if abs(r) < tol:
            if previous is None:
                return v1, v2, 0.0
            return v1, v2, step - 1 + math.log(previous / tol) / math.log(previous / abs(r))
        previous = abs(r)
        v1, v2 = v1 - lr * r * (M @ v2), v2 - lr * r * (M.T @ v1)
    return v1, v2, math.nan


def _two_layer_flow(M, y, v1, v2, t_end):
    from scipy.integrate import solve_ivp

    k1 = len(v1)

    def rhs(_, z):
        a, b = z[:k1], z[k1:]
        r = a @ M @ b - y
        return np.concatenate([-r * (M @ b), -r * (M.T @ a)])

    sol = solve_ivp(rhs, (0, t_end), np.concatenate([v1, v2]), method="DOP853",
                    rtol=1e-13, atol=1e-15)
    z = sol.y[:, -1]
    return z[:k1], z[k1:]


def theorem6_task(task: dict) -> dict:
    """Thm 6: 2-layer tensor network, one point, square loss, from alpha (v1bar, v2bar).
    Gradient flow (DOP853, tight tolerances) and GD at step sizes lr and lr/2, each against the
    closed form (corrected v_2) and the slide's printed v_2. Relative errors on (v_1, v_2)."""
    setup = single_point_setup(task["d"], task["k1"], task["seed"])
    M, y, alpha = setup["M"], float(task["y"]), task["alpha"]
    v1_0, v2_0 = alpha * setup["v1bar"], alpha * setup["v2bar"]
    c1, c2, nu = theorem6_limit(M, y, setup["v1bar"], setup["v2bar"], alpha)
    p1, p2, _ = theorem6_limit(M, y, setup["v1bar"], setup["v2bar"], alpha, as_printed=True)
    closed = np.concatenate([c1, c2])
    printed = np.concatenate([p1, p2])

    def err(a, b, ref):
        return float(np.linalg.norm(np.concatenate([a, b]) - ref) / np.linalg.norm(ref))

    # the loss decays like exp(-2 kappa t) with kappa = ||grad f||^2 at the limit
    kappa = float(np.linalg.norm(M @ c2) ** 2 + np.linalg.norm(M.T @ c1) ** 2)
    f1, f2 = _two_layer_flow(M, y, v1_0, v2_0, t_end=40.0 / kappa)
    result = {"lambda": setup["lambda"], "nu": nu, "flow_error": err(f1, f2, closed),
              "flow_error_printed": err(f1, f2, printed),
              "flow_residual": float(abs(f1 @ M @ f2 - y))}
    lr = task["lr_factor"] / kappa
    for name, step in (("gd_error", lr), ("gd_error_half", lr / 2)):
        g1, g2, used = _two_layer_gd(M, y, v1_0, v2_0, step)
        result[name] = err(g1, g2, closed)
        result[name + "_steps"] = used
    if any(math.isnan(result[k]) for k in ("gd_error_steps", "gd_error_half_steps")):
        result["status"] = "unconverged"
    return result


# ----------------------------------------------------------------------------------------------
# Small self-checks shown in the chapter


def tensor_form_check(seed: int = 0, d: int = 6) -> list[dict]:
    """Sec. 2: the contraction M(x) o (v_1, .., v_L) against each network's own forward pass,
    for diagonal, (full-length and short-filter) convolutional and fully connected nets."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(d)
    cases = [("diag", [3], [rng.standard_normal(d) for _ in range(3)]),
             ("conv", [d, d, d], [rng.standard_normal(d) for _ in range(3)]),
             ("conv", [3, 4, d], [rng.standard_normal(k) for k in (3, 4, d)]),
             ("fc", [d, 4, 3], [rng.standard_normal((d, 4)), rng.standard_normal((4, 3)),
                                rng.standard_normal(3)])]
    rows = []
    for arch, shape, vs in cases:
        M = data_tensor(arch, x, shape)
        tensor_value = contract(M, vs)
        network_value = float(predict(arch, torch.as_tensor(x)[None],
                                      [torch.as_tensor(v) for v in vs])[0])
        rows.append({"architecture": arch, "shape": str(list(M.shape)),
                     "M(x) o (v_1..v_L)": tensor_value, "network f(x)": network_value,
                     "relative error": abs(tensor_value - network_value) / abs(network_value)})
    return rows


def lemma4_ode_check(Ls: Sequence[int] = (2, 3, 4, 5), points: int = 25) -> list[dict]:
    """Integrate Lemma 4's ODE p' = p^{L-2} q, q' = p^{L-1} (with I' = tau h_L'(tau), so that
    I(tau) = H_L(h_L(tau)) by substitution) and compare with the closed-form h_L^{-1} and H_L
    used everywhere else. Rows: L, tau, h_L from the ODE, H_L from the ODE and from `H`."""
    from scipy.integrate import solve_ivp

    rows = []
    for L in Ls:
        def rhs(t, s, L=L):
            p, q, _ = s
            return [p ** (L - 2) * q, p ** (L - 1),
                    t * ((L - 1) * p ** (2 * L - 4) * q**2 + p ** (2 * L - 2))]

        t_end = min(3.0, 0.95 * escape_time(L))
        sol = solve_ivp(rhs, (0, t_end), [1.0, 0.0, 0.0], rtol=1e-13, atol=1e-14,
                        dense_output=True)
        taus = np.linspace(t_end / points, t_end, points)
        p, q, integral = sol.sol(taus)
        h = p ** (L - 1) * q
        for tau, h_ode, H_ode, hinv, H_closed in zip(taus, h, integral, h_inverse(h, L),
                                                    H(h, L)):
            rows.append({"L": L, "tau": tau, "h_ode": h_ode, "H_ode": H_ode,
                         "h_inverse_closed": hinv, "H_closed": H_closed,
                         "error_h_inverse": abs(hinv - tau),
                         "error_H": abs(H_closed - H_ode) / max(1.0, abs(H_ode))})
    return rows


def alpha_sweep_theory(n: int, d: int, data_seed: int, L: int, alphas: Sequence[float]
                       ) -> list[dict]:
    """Cor 5 with wbar = 1: the Q_{L,alpha}-minimizer's relative distance to the min-l1 and
    the min-l2 interpolators along `alphas` (the theory curve the GD limits are plotted on)."""
    from .convex import min_l1_interpolator, min_l2_interpolator

    X, y = regression_data(n, d, data_seed)
    l1, l2 = min_l1_interpolator(X, y).x, min_l2_interpolator(X, y).x
    rows = []
    for alpha in alphas:
        z = q_limit(X, y, "diag", L, alpha, np.ones(d))
        rows.append({"L": L, "alpha": alpha,
                     "distance_l1": float(np.linalg.norm(z - l1) / np.linalg.norm(l1)),
                     "distance_l2": float(np.linalg.norm(z - l2) / np.linalg.norm(l2))})
    return rows


def plot_by_group(ax, frame, x: str, y: str, group: str, palette: Sequence[str],
                  floor: float = 1e-16, style: str = "-", **kwargs) -> None:
    """One log-log line per value of `group` (the chapter's convergence plots); values below
    `floor` (exact zeros) are drawn at the floor, non-positive x are dropped."""
    for i, (name, g) in enumerate(frame.groupby(group)):
        keep = g[x] > 0
        ax.loglog(g[x][keep], g[y][keep].clip(lower=floor), style, label=name,
                  color=palette[i % len(palette)], **kwargs)
