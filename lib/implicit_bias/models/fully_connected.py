"""Two-layer fully connected networks: warped infinitesimal mirror descent (Azulay et al. 2021).

Models (square loss L = 1/2 ||X beta - y||^2, residual r = X beta - y, g = X^T r):

* single hidden neuron   f(x) = a <w, x>,            beta = a w          (Sec. 6, Thm 2)
* k hidden neurons       f(x) = a^T W x,              beta = W^T a        (Prop. 1, Thm 3)
* single leaky-ReLU unit f(x) = a sigma_rho(<w, x>)                       (Sec. 8, Thm 4)

The paper's formulas were lost in the text extraction; the ones used here are the restored and
verified ones of `shared/notes/math_azulay_yun.md` (Sec. 2-5), re-checked by `tests/`:

* conserved delta = a^2 - ||w||^2 (Du et al. 2018, Thm 2.1), a(beta)^2 = (delta + S) / 2 with
  S = sqrt(delta^2 + 4 ||beta||^2);
* predictor dynamics beta' = -H(beta) g, H = a^2 I + beta beta^T / a^2 (App. B, Eq. 23);
* Theorem 2: Q(beta) = F(||beta||) - sigma <w0, beta>, F(r) = (sqrt 2 / 6) sqrt(delta + S)
  (S - 2 delta), sigma = sign(a_inf);  the Hessian of F(||beta||) is |a| H^{-1} (Eq. 24).

Everything that checks theory runs in float64. Dynamics are torch programs batched over
initializations (leading batch axis B) and take a `device`, so they run on CUDA unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.optimize
import torch

from implicit_bias.core.device import resolve_device

Array = np.ndarray
DTYPE = torch.float64


# ----------------------------------------------------------------------------------------------
# Problems and initializations
# ----------------------------------------------------------------------------------------------
def random_regression(n: int, d: int, seed: int) -> tuple[Array, Array]:
    """An underdetermined regression (n < d): X ~ N(0, 1)^{n x d}, y ~ N(0, 1)^n."""
    if n >= d:
        raise ValueError(f"need an underdetermined problem, got n={n} >= d={d}")
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


def init_from_scale_shape(alpha: float, s: float, u: Array, sign: float = 1.0
                          ) -> tuple[float, Array]:
    """(a0, w0) with scale alpha = |a0| ||w0||, shape s = |a0| / ||w0||, orientation u (Sec. 7.2).

    Then delta = a0^2 - ||w0||^2 = alpha (s - 1/s) and beta0 = a0 w0 = sign * alpha * u.
    """
    u = np.asarray(u, dtype=float)
    u = u / np.linalg.norm(u)
    return float(sign * np.sqrt(alpha * s)), np.sqrt(alpha / s) * u


def null_projector(X: Array) -> Array:
    """P_perp: the orthogonal projector onto null(X)."""
    return np.eye(X.shape[1]) - np.linalg.pinv(X) @ X


# ----------------------------------------------------------------------------------------------
# Theorem 2's regularizer (numpy) and its constrained minimizer
# ----------------------------------------------------------------------------------------------
def _delta_plus_s(r: Array, delta: float) -> Array:
    """delta + sqrt(delta^2 + 4 r^2), written without cancellation when delta < 0."""
    r = np.asarray(r, dtype=float)
    big_s = np.sqrt(delta**2 + 4.0 * r**2)
    if delta >= 0:
        return delta + big_s
    return 4.0 * r**2 / (big_s - delta)  # = delta + S, since (S + delta)(S - delta) = 4 r^2


def a_squared(r: Array, delta: float) -> Array:
    """a(beta)^2 as a function of r = ||beta||: the positive root of a^4 - delta a^2 - r^2 = 0."""
    return 0.5 * _delta_plus_s(r, delta)


def radial_potential(r: Array, delta: float) -> Array:
    """F(r) with F'(r) = r / |a(r)| (Thm 2): (sqrt 2 / 6) sqrt(delta + S) (S - 2 delta)."""
    r = np.asarray(r, dtype=float)
    big_s = np.sqrt(delta**2 + 4.0 * r**2)
    return np.sqrt(2.0) / 6.0 * np.sqrt(_delta_plus_s(r, delta)) * (big_s - 2.0 * delta)


def q_single_neuron(beta: Array, w0: Array, delta: float, sigma: float) -> Array:
    """Theorem 2's implicit regularizer Q(beta) = F(||beta||) - sigma <w0, beta> (last axis = d)."""
    beta = np.asarray(beta, dtype=float)
    return radial_potential(np.linalg.norm(beta, axis=-1), delta) - sigma * beta @ w0


def grad_q_single_neuron(beta: Array, w0: Array, delta: float, sigma: float) -> Array:
    """grad Q = beta / |a(beta)| - sigma w0 (the key identity of App. B: w = sign(a) beta / |a|)."""
    beta = np.asarray(beta, dtype=float)
    a = np.sqrt(a_squared(np.linalg.norm(beta, axis=-1), delta))
    return beta / a[..., None] - sigma * np.asarray(w0, dtype=float)


def hess_q_single_neuron(beta: Array, delta: float) -> Array:
    """Hessian of Q (= of F(||beta||)): I / |a| - beta beta^T / (|a|^3 S) = |a| H(beta)^{-1}."""
    beta = np.asarray(beta, dtype=float)
    r = np.linalg.norm(beta)
    a = np.sqrt(a_squared(r, delta))
    big_s = np.sqrt(delta**2 + 4.0 * r**2)
    return np.eye(beta.size) / a - np.outer(beta, beta) / (a**3 * big_s)


@dataclass
class QMinimizer:
    """The constrained minimizer argmin Q s.t. X beta = y, with the |a_inf| it implies."""

    beta: Array
    a_abs: float
    method: str


def q_min_single_neuron(X: Array, y: Array, w0: Array, delta: float, sigma: float) -> QMinimizer:
    """argmin Q(beta) s.t. X beta = y for Theorem 2's Q, in closed form.

    KKT: grad Q(beta) = beta / |a| - sigma w0 in range(X^T), so P_perp beta = sigma |a| P_perp w0
    and beta = X^+ y + sigma |a| P_perp w0; |a|^2 = A(||beta||) then reduces to the quadratic
    |a|^4 - c |a|^2 - ||X^+ y||^2 = 0 with c = delta + ||P_perp w0||^2.
    """
    beta_l2 = np.linalg.pinv(X) @ y
    p_w0 = null_projector(X) @ w0
    c = delta + p_w0 @ p_w0
    b2 = beta_l2 @ beta_l2
    # positive root of t^2 - c t - b2 = 0, written stably for c < 0
    t = (c + np.sqrt(c**2 + 4 * b2)) / 2 if c >= 0 else 2 * b2 / (np.sqrt(c**2 + 4 * b2) - c)
    a_abs = float(np.sqrt(t))
    return QMinimizer(beta_l2 + sigma * a_abs * p_w0, a_abs, "closed_form")


def q_min_numeric(X: Array, y: Array, q: Callable[[Array], float],
                  grad: Callable[[Array], Array], hess: Callable[[Array], Array] | None = None,
                  ) -> Array:
    """A generic cross-check: minimize a smooth convex Q over {beta : X beta = y} numerically.

    Parametrizes the affine set as X^+ y + N z (N an orthonormal basis of null(X)) and runs a
    trust-region Newton method (or BFGS without a Hessian) on z.
    """
    beta_p = np.linalg.pinv(X) @ y
    _, sv, vt = np.linalg.svd(X)
    basis = vt[int(np.sum(sv > 1e-12 * sv[0])):].T
    fun = lambda z: float(q(beta_p + basis @ z))  # noqa: E731
    jac = lambda z: basis.T @ grad(beta_p + basis @ z)  # noqa: E731
    z0 = np.zeros(basis.shape[1])
    if hess is None:
        res = scipy.optimize.minimize(fun, z0, jac=jac, method="BFGS", options={"gtol": 1e-12})
        return beta_p + basis @ res.x
    hz = lambda z: basis.T @ hess(beta_p + basis @ z) @ basis  # noqa: E731
    res = scipy.optimize.minimize(fun, z0, jac=jac, hess=hz, method="trust-exact",
                                  options={"gtol": 1e-10})
    z = res.x
    for _ in range(5):  # a few plain Newton steps polish to round-off (quadratic convergence)
        z = z - np.linalg.solve(hz(z), jac(z))
    return beta_p + basis @ z


def kkt_residual(beta: Array, X: Array, w0: Array, delta: float, sigma: float) -> float:
    """Relative KKT stationarity residual ||P_perp grad Q(beta)|| / ||grad Q(beta)|| (Eq. 2).

    Zero iff grad Q(beta) lies in range(X^T), i.e. beta is a stationary point of
    min Q s.t. X beta = const (Theorem 4 uses the leaky-ReLU's affine constraints).
    """
    grad = grad_q_single_neuron(beta, w0, delta, sigma)
    return float(np.linalg.norm(null_projector(X) @ grad) / np.linalg.norm(grad))


def q_min_balanced(X: Array, y: Array, a0: Array, u0: Array) -> QMinimizer:
    """Prop. 1: for W0 = a0 u0^T, ||u0|| = 1, Q = (2/3) ||beta||^{3/2} - ||a0|| <u0, beta>.

    The network then follows the single neuron with delta = 0 and w0 -> ||a0|| u0.
    """
    return q_min_single_neuron(X, y, np.linalg.norm(a0) * np.asarray(u0), 0.0, 1.0)


def leaky_relu_inverse(z: Array, rho: float) -> Array:
    """sigma_rho^{-1}: the leaky ReLU max(z, rho z) is a bijection for rho > 0."""
    z = np.asarray(z, dtype=float)
    return np.where(z >= 0, z, z / rho)


def q_min_leaky(X: Array, y: Array, w0: Array, delta: float, sign_a: float,
                rho: float) -> QMinimizer:
    """Thm 4, made concrete: with s = sign(a_inf) the constraint a sigma(<w, x_i>) = y_i is affine,
    <beta, x_i> = s sigma^{-1}(s y_i), so the limit is Theorem 2's Q-min under these labels."""
    y_lin = sign_a * leaky_relu_inverse(sign_a * np.asarray(y), rho)
    return q_min_single_neuron(X, y_lin, w0, delta, sign_a)


def mahalanobis_predictor(X: Array, y: Array, a0: float, w0: Array) -> Array:
    """App. F's NTK-regime limit: argmin (beta - beta0)^T B (beta - beta0) s.t. X beta = y with
    B ~ H0^{-1}, H0 = a0^2 I + w0 w0^T the tangent kernel's matrix at initialization:
    beta_NTK = beta0 + H0 X^T (X H0 X^T)^{-1} (y - X beta0)."""
    beta0 = a0 * w0
    h0 = a0**2 * np.eye(w0.size) + np.outer(w0, w0)
    return beta0 + h0 @ X.T @ np.linalg.solve(X @ h0 @ X.T, y - X @ beta0)


# ----------------------------------------------------------------------------------------------
# Metric tensors and the Hessian-map test (Eq. 6)
# ----------------------------------------------------------------------------------------------
def predictor_metric(beta: torch.Tensor, delta: float, warp_power: float = 0.0) -> torch.Tensor:
    """M(beta) = |a(beta)|^p H(beta)^{-1}: p = 0 is plain IMD (Eq. 4), p = 1 the paper's warp
    g = |a| (Eq. 10, App. B.1); other p are deliberately wrong warps, to show the test can fail.

    H = a^2 I + beta beta^T / a^2 is the predictor-space metric of gradient flow (App. B, Eq. 23).
    """
    r2 = beta @ beta
    big_s = torch.sqrt(delta**2 + 4 * r2)
    a2 = (delta + big_s) / 2 if delta >= 0 else 2 * r2 / (big_s - delta)
    eye = torch.eye(beta.numel(), dtype=beta.dtype, device=beta.device)
    m = torch.linalg.inv(a2 * eye + torch.outer(beta, beta) / a2)
    return a2 ** (warp_power / 2) * m


def hessian_map_asymmetry(metric: Callable[[torch.Tensor], torch.Tensor], beta: Array,
                          method: str = "autograd", h: float = 1e-5) -> float:
    """Relative violation of the Hessian-map condition d_k M_ij = d_j M_ik (Eq. 6).

    Returns max |T_ijk - T_ikj| / max |T| with T_ijk = d_k M_ij, computed by exact automatic
    differentiation (`autograd`) or central finite differences (`fd`). A Hessian map gives 0
    (round-off); the plain IMD metric of a fully connected neuron gives O(1).
    """
    b = torch.as_tensor(np.asarray(beta, dtype=float), dtype=DTYPE)
    if method == "autograd":
        t = torch.autograd.functional.jacobian(metric, b)  # t[i, j, k] = d M_ij / d beta_k
    elif method == "fd":
        cols = []
        for k in range(b.numel()):
            e = torch.zeros_like(b)
            e[k] = h
            cols.append((metric(b + e) - metric(b - e)) / (2 * h))
        t = torch.stack(cols, dim=-1)
    else:
        raise ValueError(f"unknown method {method!r}; valid: 'autograd', 'fd'")
    asym = (t - t.transpose(1, 2)).abs().max()
    return float(asym / t.abs().max())


# ----------------------------------------------------------------------------------------------
# Dynamics: gradient descent (Euler) and gradient flow (RK4), batched over initializations
# ----------------------------------------------------------------------------------------------
def _leaky(z: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    return torch.where(z >= 0, z, rho * z)


def _single_neuron_field(X: torch.Tensor, y: torch.Tensor, rho: torch.Tensor | None):
    """Negative gradient of 1/2 ||f(X) - y||^2 for (a (B,), w (B, d)); rho (B, 1) holds each
    run's leaky-ReLU slope, None means a linear unit."""

    def field(params: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        a, w = params
        z = w @ X.T                                          # (B, n) pre-activations
        act = z if rho is None else _leaky(z, rho)
        r = a[:, None] * act - y                             # residuals (B, n)
        slope = 1.0 if rho is None else torch.where(z >= 0, torch.ones_like(z), rho)
        da = -(r * act).sum(1)
        dw = -a[:, None] * ((r * slope) @ X)
        return (da, dw), 0.5 * (r**2).sum(1)

    return field


def _multi_neuron_field(X: torch.Tensor, y: torch.Tensor):
    """Negative gradient for f(x) = a^T W x with a (B, k), W (B, k, d)."""

    def field(params: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        a, W = params
        beta = torch.einsum("bk,bkd->bd", a, W)
        r = beta @ X.T - y
        g = r @ X                                            # (B, d)
        return (-torch.einsum("bkd,bd->bk", W, g), -a[:, :, None] * g[:, None, :]), \
            0.5 * (r**2).sum(1)

    return field


def _integrate(field, params: tuple[torch.Tensor, ...], step: torch.Tensor, method: str,
               max_steps: int, tol: torch.Tensor, check_every: int = 200):
    """Euler (= gradient descent with step `step`) or classical RK4 (gradient flow).

    `step` has shape (B,): each initialization gets its own step (scaled to its curvature).
    Stops once every run's loss is below its `tol` (checked every `check_every` steps).
    Returns (params, loss, steps taken, whether each entry of the first parameter changed sign
    at some step: for the single neuron, whether the outer weight a crossed zero).
    """
    def bc(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape + (1,) * (like.dim() - 1))

    sign0 = torch.sign(params[0])
    flipped = torch.zeros_like(params[0], dtype=torch.bool)
    steps = 0
    while steps < max_steps:
        for _ in range(check_every):
            if method == "euler":
                k1, _ = field(params)
                params = tuple(p + bc(step, p) * k for p, k in zip(params, k1))
            elif method == "rk4":
                k1, _ = field(params)
                k2, _ = field(tuple(p + bc(step / 2, p) * k for p, k in zip(params, k1)))
                k3, _ = field(tuple(p + bc(step / 2, p) * k for p, k in zip(params, k2)))
                k4, _ = field(tuple(p + bc(step, p) * k for p, k in zip(params, k3)))
                params = tuple(p + bc(step / 6, p) * (q1 + 2 * q2 + 2 * q3 + q4)
                               for p, q1, q2, q3, q4 in zip(params, k1, k2, k3, k4))
            else:
                raise ValueError(f"unknown method {method!r}; valid: 'euler', 'rk4'")
            flipped |= torch.sign(params[0]) != sign0
        steps += check_every
        _, loss = field(params)
        if bool((loss < tol).all()):
            break
    _, loss = field(params)
    return params, loss, steps, flipped


def _curvature_scale(X: Array, size2: Array) -> Array:
    """lambda_max(X X^T) times a bound on the parameter-space NTK factor (a^2 + ||w||^2)."""
    return np.linalg.eigvalsh(X @ X.T).max() * size2


def _loss_tol(X: Array, y: Array, r: Array, rtol: float) -> Array:
    """Stop at ||residual|| < rtol * max(||y||, ||X||_2 R): relative to the problem's own scale,
    so a large initialization is not asked for accuracy below float64 round-off."""
    scale = np.maximum(np.linalg.norm(y), np.linalg.norm(X, 2) * r)
    return 0.5 * (rtol * scale) ** 2


def train_single_neuron(X: Array, y: Array, a0: Array, w0: Array, eta: float | Array,
                        method: str = "euler", rho: float | Array | None = None,
                        beta_scale: Array | None = None, max_steps: int = 200_000,
                        rtol: float = 1e-11, device: str | torch.device = "cpu") -> dict:
    """Train a batch of single neurons (a0 (B,), w0 (B, d)) to zero loss; float64.

    The step is eta / (lambda_max(X X^T) sqrt(delta^2 + 4 R^2)), R = max(||beta0||, beta_scale):
    since a^2 + ||w||^2 = sqrt(delta^2 + 4 ||beta||^2), eta < 2 is then stable near the limit and
    one eta means the same discretization for every initialization. `method="euler"` is gradient
    descent, `"rk4"` integrates gradient flow. rho: None (linear) or the leaky-ReLU slope(s).
    Stops when every run's residual is below rtol times the problem's scale (see `_loss_tol`).
    """
    dev = resolve_device(device)
    a0 = np.atleast_1d(np.asarray(a0, dtype=float))
    w0 = np.atleast_2d(np.asarray(w0, dtype=float))
    delta = a0**2 - (w0**2).sum(1)
    r = np.linalg.norm(a0[:, None] * w0, axis=1)
    if beta_scale is not None:
        r = np.maximum(r, np.asarray(beta_scale, dtype=float))
    step = np.asarray(eta, dtype=float) / _curvature_scale(X, np.sqrt(delta**2 + 4 * r**2))
    t = lambda v: torch.as_tensor(v, dtype=DTYPE, device=dev)  # noqa: E731
    rho_t = None if rho is None else t(np.broadcast_to(rho, a0.shape)[:, None].copy())
    field = _single_neuron_field(t(X), t(y), rho_t)
    tol = t(_loss_tol(X, y, r, rtol))
    (a, w), loss, steps, flipped = _integrate(field, (t(a0), t(w0)), t(step), method,
                                              max_steps, tol)
    a, w = a.cpu().numpy(), w.cpu().numpy()
    return {"a": a, "w": w, "beta": a[:, None] * w, "loss": loss.cpu().numpy(), "steps": steps,
            "sign_changed": flipped.cpu().numpy(), "delta": delta, "step": step}


def train_multi_neuron(X: Array, y: Array, a0: Array, W0: Array, eta: float | Array,
                       method: str = "euler", beta_scale: Array | None = None,
                       max_steps: int = 200_000, rtol: float = 1e-11,
                       device: str | torch.device = "cpu") -> dict:
    """Train a batch of k-neuron networks f = a^T W x (a0 (B, k), W0 (B, k, d)); float64.

    Step eta / (lambda_max(X X^T) (||a0||^2 + ||W0||_F^2 + 2 R)), R = max(||beta0||, beta_scale).
    """
    dev = resolve_device(device)
    a0 = np.atleast_2d(np.asarray(a0, dtype=float))
    W0 = np.asarray(W0, dtype=float).reshape(a0.shape + (-1,))
    r = np.linalg.norm(np.einsum("bk,bkd->bd", a0, W0), axis=1)
    if beta_scale is not None:
        r = np.maximum(r, np.asarray(beta_scale, dtype=float))
    step = np.asarray(eta, dtype=float) / _curvature_scale(
        X, (a0**2).sum(1) + (W0**2).sum((1, 2)) + 2 * r)
    t = lambda v: torch.as_tensor(v, dtype=DTYPE, device=dev)  # noqa: E731
    field = _multi_neuron_field(t(X), t(y))
    tol = t(_loss_tol(X, y, r, rtol))
    (a, W), loss, steps, _ = _integrate(field, (t(a0), t(W0)), t(step), method, max_steps, tol)
    a, W = a.cpu().numpy(), W.cpu().numpy()
    return {"a": a, "W": W, "beta": np.einsum("bk,bkd->bd", a, W), "loss": loss.cpu().numpy(),
            "steps": steps, "step": step}


# ----------------------------------------------------------------------------------------------
# Time warping (Sec. 5): gradient flow in t versus the mirror flow of Q in tau, d tau = |a| dt
# ----------------------------------------------------------------------------------------------
def _rk4_path(field: Callable[[Array], Array], x0: Array, dt: float, n_steps: int,
              record_every: int) -> Array:
    """Fixed-step RK4 of x' = field(x), recording every `record_every` steps (numpy, one run)."""
    x, out = np.asarray(x0, dtype=float), [np.asarray(x0, dtype=float)]
    for i in range(1, n_steps + 1):
        k1 = field(x)
        k2 = field(x + dt / 2 * k1)
        k3 = field(x + dt / 2 * k2)
        k4 = field(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if i % record_every == 0:
            out.append(x)
    return np.array(out)


def gradient_flow_path(X: Array, y: Array, a0: float, w0: Array, end: float, dt: float,
                       clock: str = "t", record_every: int = 1) -> dict:
    """Parameter gradient flow of the single neuron, recorded along the way (numpy RK4).

    clock="t": the ordinary flow theta' = -grad L(theta), integrating tau' = |a| alongside.
    clock="tau": the same flow in warped time, d theta / d tau = -grad L / |a| (Sec. 5), with
    dt / d tau = 1 / |a| alongside (needs a != 0 throughout, e.g. delta > 0).
    Returns t, tau, a(t) and beta = a w at the recorded points.
    """
    if clock not in ("t", "tau"):
        raise ValueError(f"unknown clock {clock!r}; valid: 't', 'tau'")

    def field(p: Array) -> Array:
        a, w = p[0], p[1:-1]
        g = X.T @ (X @ (a * w) - y)
        flow = np.concatenate([[-w @ g], -a * g])
        if clock == "t":
            return np.concatenate([flow, [abs(a)]])
        return np.concatenate([flow / abs(a), [1.0 / abs(a)]])

    n_steps = int(np.ceil(end / dt / record_every)) * record_every
    path = _rk4_path(field, np.concatenate([[a0], w0, [0.0]]), dt, n_steps, record_every)
    own = dt * record_every * np.arange(len(path))
    other = path[:, -1]
    t, tau = (own, other) if clock == "t" else (other, own)
    return {"t": t, "tau": tau, "a": path[:, 0], "beta": path[:, :1] * path[:, 1:-1]}


def warped_mirror_flow_path(X: Array, y: Array, beta0: Array, delta: float, tau_end: float,
                            dtau: float, record_every: int = 1) -> dict:
    """Mirror flow of Q in warped time: d grad Q(beta) / d tau = -X^T r (Eq. 11), i.e.
    d beta / d tau = -(hess Q)^{-1} X^T r = -H(beta) X^T r / |a(beta)|, integrated in beta-space
    alone (no network parameters)."""
    def field(b: Array) -> Array:
        a2 = float(a_squared(np.linalg.norm(b), delta))
        g = X.T @ (X @ b - y)
        return -(a2 * g + b * (b @ g) / a2) / np.sqrt(a2)

    n_steps = int(np.ceil(tau_end / dtau / record_every)) * record_every
    path = _rk4_path(field, beta0, dtau, n_steps, record_every)
    return {"tau": dtau * record_every * np.arange(len(path)), "beta": path}


def path_length(path: Array) -> float:
    """Arc length of a polyline."""
    return float(np.linalg.norm(np.diff(path, axis=0), axis=1).sum())


# ----------------------------------------------------------------------------------------------
# Chapter experiments: sweep tasks (JSON in, JSON out), one per unit of work
# ----------------------------------------------------------------------------------------------
def _rel(x: Array, ref: Array, scale: Array | None = None) -> float:
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref if scale is None else scale))


def _unit(v: Array) -> Array:
    return v / np.linalg.norm(v)


def _orientation(X: Array, y: Array, seed: int, anti_aligned: bool = False,
                 in_null: bool = False) -> Array:
    """A random initialization direction u; `anti_aligned` points it against X^+ y (so the
    outer weight must change sign), `in_null` puts it in null(X) (zero initial output)."""
    rng = np.random.default_rng(seed + 1000)
    u = _unit(rng.standard_normal(X.shape[1]))
    if anti_aligned:
        u = _unit(-_unit(np.linalg.pinv(X) @ y) + 0.3 * u)
    if in_null:
        u = _unit(null_projector(X) @ u)
    return u


def task_hessian_map(task: dict) -> dict:
    """Eq. (6) at random points: asymmetry of d M for plain, warped and wrongly warped metrics.

    task: dim, deltas, n_points, seed. Also compares the warped metric with the Hessian of
    Theorem 2's Q (it must be equal, App. B.1) and the autograd test with finite differences.
    """
    rng = np.random.default_rng(task["seed"])
    rows = []
    for delta in task["deltas"]:
        for point in range(task["n_points"]):
            beta = rng.standard_normal(task["dim"])
            asym = {p: hessian_map_asymmetry(
                lambda b, p=p, dl=delta: predictor_metric(b, dl, p), beta) for p in (0.0, 1.0, 2.0)}
            warped = predictor_metric(torch.as_tensor(beta), delta, 1.0).numpy()
            hess = hess_q_single_neuron(beta, delta)
            rows.append({
                "delta": delta, "point": point, "plain": asym[0.0], "warped": asym[1.0],
                "wrong_warp_a2": asym[2.0],
                "warped_fd": hessian_map_asymmetry(
                    lambda b, dl=delta: predictor_metric(b, dl, 1.0), beta, method="fd"),
                "warped_vs_hess_q": float(np.abs(warped - hess).max() / np.abs(hess).max()),
            })
    return {"rows": rows}


def task_time_warp(task: dict) -> dict:
    """Sec. 5 on a 2-d problem: gradient flow and the mirror flow of Q in beta-space.

    Compares, on the same grid, (i) gradient flow run in warped time tau with the mirror flow
    at the same tau (must agree: same points), (ii) gradient flow in ordinary time t with the
    mirror flow at tau = t (differ: different speeds). task: alpha, s, seed, end, dt, n_plot.
    """
    X, y = random_regression(1, 2, task["seed"])
    X, y = X / np.linalg.norm(X), y / np.linalg.norm(X)  # unit-norm row: times of order one
    u = _orientation(X, y, task["seed"])
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u)
    delta = a0**2 - w0 @ w0
    end, dt = task["end"], task["dt"]
    gf_t = gradient_flow_path(X, y, a0, w0, end, dt, clock="t")
    gf_tau = gradient_flow_path(X, y, a0, w0, end, dt, clock="tau")
    mf = warped_mirror_flow_path(X, y, a0 * w0, delta, end, dt)
    limit = q_min_single_neuron(X, y, w0, delta, float(np.sign(a0))).beta
    length = path_length(gf_t["beta"])
    gap = lambda p, q: float(np.linalg.norm(p - q, axis=1).max() / length)  # noqa: E731
    idx = np.unique(np.geomspace(1, len(gf_t["t"]), task["n_plot"]).astype(int) - 1)
    return {
        "same_tau_gap_rel": gap(gf_tau["beta"], mf["beta"]),
        "same_time_gap_rel": gap(gf_t["beta"], mf["beta"]),
        "gf_end_err": _rel(gf_t["beta"][-1], limit), "mf_end_err": _rel(mf["beta"][-1], limit),
        "abs_a_min": float(np.abs(gf_t["a"]).min()), "abs_a_max": float(np.abs(gf_t["a"]).max()),
        "X": X.tolist(), "y": y.tolist(), "limit": limit.tolist(),
        "time": gf_t["t"][idx].tolist(), "tau_of_t": gf_t["tau"][idx].tolist(),
        "a_of_t": gf_t["a"][idx].tolist(), "gf_beta": gf_t["beta"][idx].tolist(),
        "mf_beta": mf["beta"][idx].tolist(), "gf_tau_beta": gf_tau["beta"][idx].tolist(),
    }


def task_theorem2(task: dict) -> dict:
    """Theorem 2 on one problem, all initialization cases in one batch: gradient descent (each
    step size) and gradient flow against the closed-form Q-min, a Newton cross-check, and
    deliberately wrong variants of Q.

    task: n, d, seed, cases ([{name, alpha, s, anti_aligned}, ...]), etas, gf_eta, device.
    Returns {"cases": [one dict per case]}.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    etas = np.asarray(task["etas"], dtype=float)
    inits = []
    for case in task["cases"]:
        u = _orientation(X, y, task["seed"], anti_aligned=case["anti_aligned"])
        a0, w0 = init_from_scale_shape(case["alpha"], case["s"], u)
        delta = a0**2 - w0 @ w0
        size = max(np.linalg.norm(q_min_single_neuron(X, y, w0, delta, sg).beta)
                   for sg in (1, -1))
        inits.append((a0, w0, delta, size))
    a0s = np.array([i[0] for i in inits])
    w0s = np.array([i[1] for i in inits])
    sizes = np.array([i[3] for i in inits])
    m = len(etas)  # GD batch: case-major, one run per (case, eta)
    gd = train_single_neuron(X, y, np.repeat(a0s, m), np.repeat(w0s, m, axis=0),
                             np.tile(etas, len(inits)), beta_scale=np.repeat(sizes, m),
                             device=task["device"])
    gf = train_single_neuron(X, y, a0s, w0s, task["gf_eta"], method="rk4", beta_scale=sizes,
                             device=task["device"])
    out = []
    for c, (case, (a0, w0, delta, _)) in enumerate(zip(task["cases"], inits)):
        sigma = float(np.sign(gf["a"][c]))
        theory = q_min_single_neuron(X, y, w0, delta, sigma)
        newton = q_min_numeric(X, y, lambda b: q_single_neuron(b, w0, delta, sigma),  # noqa: B023
                               lambda b: grad_q_single_neuron(b, w0, delta, sigma),  # noqa: B023
                               lambda b: hess_q_single_neuron(b, delta))  # noqa: B023
        beta_gf = gf["beta"][c]
        wrong = {
            "unit_w0": q_min_single_neuron(X, y, _unit(w0), delta, sigma).beta,
            "sigma_from_a0": q_min_single_neuron(X, y, w0, delta, float(np.sign(a0))).beta,
            "delta_zero": q_min_single_neuron(X, y, w0, 0.0, sigma).beta,
        }
        out.append({
            "name": case["name"], "delta": float(delta), "a0": a0, "a_inf": float(gf["a"][c]),
            "sign_changed": bool(gf["sign_changed"][c]),
            "gd_err": [_rel(b, theory.beta) for b in gd["beta"][c * m:(c + 1) * m]],
            "gd_loss": gd["loss"][c * m:(c + 1) * m].tolist(),
            "gf_err": _rel(beta_gf, theory.beta), "gf_loss": float(gf["loss"][c]),
            "a_abs_err": abs(abs(gf["a"][c]) - theory.a_abs) / theory.a_abs,
            "newton_vs_closed_form": _rel(newton, theory.beta),
            "kkt_residual_gf": kkt_residual(beta_gf, X, w0, delta, sigma),
            "wrong_err": {k: _rel(beta_gf, v) for k, v in wrong.items()},
            "wrong_differs": {k: _rel(v, theory.beta) for k, v in wrong.items()},
        })
    return {"cases": out, "gd_steps": gd["steps"], "gf_steps": gf["steps"]}


def task_balanced(task: dict) -> dict:
    """Prop. 1: k neurons from a strictly balanced W0 = a0 u0^T, against the closed form; the
    same formula applied to a generic (unbalanced) initialization of equal size must miss; and
    the exact identity beta_inf = X^+ y + P_perp W0^T a_inf (App. D) for the generic one.

    task: n, d, k, seed, scale, etas, gf_eta, device.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    rng = np.random.default_rng(task["seed"] + 2000)
    k, d = task["k"], task["d"]
    a0 = task["scale"] * rng.standard_normal(k)
    u0 = _unit(rng.standard_normal(d))
    W0 = np.outer(a0, u0)
    theory = q_min_balanced(X, y, a0, u0)
    size = np.linalg.norm(theory.beta)
    etas = np.asarray(task["etas"], dtype=float)
    m = len(etas)
    gd = train_multi_neuron(X, y, np.tile(a0, (m, 1)), np.tile(W0, (m, 1, 1)), etas,
                            beta_scale=np.full(m, size), device=task["device"])
    gf = train_multi_neuron(X, y, [a0], W0[None], task["gf_eta"], method="rk4",
                            beta_scale=[size], device=task["device"])
    # generic initialization of the same Frobenius size: Prop. 1 does not apply
    W_gen = rng.standard_normal((k, d))
    W_gen *= np.linalg.norm(W0) / np.linalg.norm(W_gen)
    gen = train_multi_neuron(X, y, [a0], W_gen[None], task["gf_eta"], method="rk4",
                             beta_scale=[size], device=task["device"])
    beta0_gen = W_gen.T @ a0
    prop1_on_generic = q_min_balanced(X, y, a0, _unit(beta0_gen)).beta
    identity = np.linalg.pinv(X) @ y + null_projector(X) @ (W_gen.T @ gen["a"][0])
    return {
        "gd_err": [_rel(b, theory.beta) for b in gd["beta"]], "gd_steps": gd["steps"],
        "gf_err": _rel(gf["beta"][0], theory.beta), "gf_steps": gf["steps"],
        "gf_loss": float(gf["loss"][0]),
        "generic_err_vs_prop1": _rel(gen["beta"][0], prop1_on_generic),
        "generic_identity_err": _rel(gen["beta"][0], identity),
        "balance_drift": float(np.abs(np.outer(gf["a"][0], gf["a"][0])
                                      - gf["W"][0] @ gf["W"][0].T).max()),
    }


def task_anti_ntk(task: dict) -> dict:
    """Thm 3: a generic k-neuron initialization scaled by eps; distance of the gradient-flow
    limit to the min-L2 interpolator X^+ y (batched over eps). task: n, d, k, seed, eps,
    gf_eta, device."""
    X, y = random_regression(task["n"], task["d"], task["seed"])
    rng = np.random.default_rng(task["seed"] + 3000)
    k, d = task["k"], task["d"]
    a_dir, W_dir = rng.standard_normal(k), rng.standard_normal((k, d)) / np.sqrt(d)
    eps = np.asarray(task["eps"], dtype=float)
    beta_l2 = np.linalg.pinv(X) @ y
    gf = train_multi_neuron(X, y, eps[:, None] * a_dir, eps[:, None, None] * W_dir,
                            np.full(len(eps), task["gf_eta"]), method="rk4",
                            beta_scale=np.full(len(eps), np.linalg.norm(beta_l2)),
                            device=task["device"])
    dist = [_rel(b, beta_l2) for b in gf["beta"]]
    slope = np.polyfit(np.log(eps), np.log(dist), 1)[0]
    return {"eps": eps.tolist(), "dist_l2": dist, "slope": float(slope),
            "loss": gf["loss"].tolist(), "steps": gf["steps"]}


def task_leaky(task: dict) -> dict:
    """Thm 4: leaky-ReLU neurons (one per slope rho, batched): the limit's KKT residual for
    Theorem 2's Q under the affine constraints <beta, x_i> = s sigma^{-1}(s y_i), its distance
    to that Q-min, and to the (wrong) Q-min under the raw labels (a linear unit's).

    task: n, d, seed, rhos, alpha, s, etas, gf_eta, device. Returns {"rows": one per rho}.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"] + 7)
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u)
    delta = a0**2 - w0 @ w0
    rhos = np.asarray(task["rhos"], dtype=float)
    etas = np.asarray(task["etas"], dtype=float)
    k, m = len(rhos), len(etas)
    size = np.array([2 * np.linalg.norm(np.linalg.pinv(X) @ leaky_relu_inverse(y, r)) + 1
                     for r in rhos])
    gd = train_single_neuron(X, y, np.full(k * m, a0), np.tile(w0, (k * m, 1)),
                             np.tile(etas, k), rho=np.repeat(rhos, m),
                             beta_scale=np.repeat(size, m), device=task["device"])
    gf = train_single_neuron(X, y, np.full(k, a0), np.tile(w0, (k, 1)), task["gf_eta"],
                             method="rk4", rho=rhos, beta_scale=size, device=task["device"])
    rows = []
    for i, rho in enumerate(rhos):
        s_inf = float(np.sign(gf["a"][i]))
        beta = gf["beta"][i]
        theory = q_min_leaky(X, y, w0, delta, s_inf, rho).beta
        gd_beta, gd_a = gd["beta"][i * m:(i + 1) * m], gd["a"][i * m:(i + 1) * m]
        rows.append({
            "rho": float(rho), "kkt_residual_gf": kkt_residual(beta, X, w0, delta, s_inf),
            "kkt_residual_gd": [kkt_residual(b, X, w0, delta, float(np.sign(a)))
                                for b, a in zip(gd_beta, gd_a)],
            "gf_err": _rel(beta, theory), "gd_err": [_rel(b, theory) for b in gd_beta],
            "linear_label_err": _rel(beta, q_min_single_neuron(X, y, w0, delta, s_inf).beta),
            "negative_preactivations": int(np.sum(s_inf * (X @ beta) < 0)),
            "gf_loss": float(gf["loss"][i]), "sign_changed": bool(gf["sign_changed"][i]),
        })
    return {"rows": rows, "gf_steps": gf["steps"], "gd_steps": gd["steps"]}


def task_regimes(task: dict) -> dict:
    """Sec. 7.2 / App. F: gradient-flow limits over a list of (alpha, s), distances to the min-L2
    interpolator and to the Mahalanobis (NTK) predictor, beside the closed-form Q-min.

    task: n, d, seed, points ([[alpha, s], ...]), in_null (zero initial output), gf_eta, device.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"], in_null=task.get("in_null", False))
    beta_l2 = np.linalg.pinv(X) @ y
    inits = [init_from_scale_shape(al, s, u) for al, s in task["points"]]
    a0 = np.array([a for a, _ in inits])
    w0 = np.array([w for _, w in inits])
    deltas = a0**2 - (w0**2).sum(1)
    sizes = [max(np.linalg.norm(q_min_single_neuron(X, y, w, dl, sg).beta) for sg in (1, -1))
             for w, dl in zip(w0, deltas)]
    gf = train_single_neuron(X, y, a0, w0, np.full(len(a0), task["gf_eta"]), method="rk4",
                             beta_scale=np.array(sizes), device=task["device"])
    rows = []
    for i, (alpha, s) in enumerate(task["points"]):
        theory = q_min_single_neuron(X, y, w0[i], deltas[i], float(np.sign(gf["a"][i]))).beta
        ntk = mahalanobis_predictor(X, y, a0[i], w0[i])
        beta0 = a0[i] * w0[i]
        rows.append({
            "alpha": alpha, "s": s, "delta": float(deltas[i]),
            "gf_dist_l2": _rel(gf["beta"][i], beta_l2),
            "gf_dist_ntk": _rel(gf["beta"][i], ntk, ntk - beta0),
            "q_dist_l2": _rel(theory, beta_l2), "q_dist_ntk": _rel(theory, ntk, ntk - beta0),
            "gf_vs_q": _rel(gf["beta"][i], theory), "loss": float(gf["loss"][i]),
            "sign_changed": bool(gf["sign_changed"][i]),
        })
    return {"rows": rows, "steps": gf["steps"]}


def q_level_grid(alpha: float, s: float, u: Array, n_grid: int, radius: float) -> dict:
    """Fig. 7.2: Theorem 2's Q on a 2-d grid around beta0 = alpha u, beside its quadratic
    (Mahalanobis, App. F) model at beta0; the window is beta0 +- radius max(1, ||beta0||).

    Returns the grid and the relative sup-distance of Q - Q(beta0) from that model on it.
    """
    a0, w0 = init_from_scale_shape(alpha, s, u)
    delta = a0**2 - w0 @ w0
    beta0 = a0 * w0
    half = radius * max(1.0, np.linalg.norm(beta0))
    g1, g2 = np.meshgrid(np.linspace(beta0[0] - half, beta0[0] + half, n_grid),
                         np.linspace(beta0[1] - half, beta0[1] + half, n_grid))
    pts = np.stack([g1.ravel(), g2.ravel()], axis=1)
    q = q_single_neuron(pts, w0, delta, 1.0) - q_single_neuron(beta0, w0, delta, 1.0)
    diff = pts - beta0
    quad = 0.5 * np.einsum("pi,ij,pj->p", diff, hess_q_single_neuron(beta0, delta), diff)
    span = np.abs(q).max()
    return {"b1": pts[:, 0], "b2": pts[:, 1], "q": q, "quad": quad, "beta0": beta0,
            "quad_mismatch": float(np.abs(q - quad).max() / span)}


# ----------------------------------------------------------------------------------------------
# Summaries: sweep results -> tables and the chapter's claim metrics
# ----------------------------------------------------------------------------------------------
def hessian_map_metrics(rows: list[dict]) -> dict:
    """Claim metrics of the Hessian-map test (Eq. 6) over all tested points."""
    return {
        "hessian_plain_min_asymmetry": min(r["plain"] for r in rows),
        "hessian_warped_max_asymmetry": max(r["warped"] for r in rows),
        "hessian_wrong_warp_min_asymmetry": min(r["wrong_warp_a2"] for r in rows),
        "warped_metric_vs_hessian_q_max": max(r["warped_vs_hess_q"] for r in rows),
    }


def theorem2_table(results: list[dict], seeds: list[int], etas: list[float]) -> pd.DataFrame:
    """One row per (seed, case): GD errors per step, gradient-flow error, wrong variants."""
    rows = []
    for seed, res in zip(seeds, results):
        for c in res["cases"]:
            row = {"seed": seed, "case": c["name"], "delta": c["delta"],
                   "sign_changed": c["sign_changed"], "gf_err": c["gf_err"],
                   "newton_vs_closed_form": c["newton_vs_closed_form"],
                   "kkt_residual_gf": c["kkt_residual_gf"]}
            row.update({f"gd_err_eta{eta:g}": e for eta, e in zip(etas, c["gd_err"])})
            row.update({f"wrong_{k}": v for k, v in c["wrong_err"].items()})
            row.update({f"differs_{k}": v for k, v in c["wrong_differs"].items()})
            rows.append(row)
    return pd.DataFrame(rows)


def _halving_ratios(df: pd.DataFrame, etas: list[float]) -> np.ndarray:
    cols = [f"gd_err_eta{eta:g}" for eta in sorted(etas, reverse=True)]
    return np.concatenate([(df[a] / df[b]).to_numpy() for a, b in zip(cols[:-1], cols[1:])])


def theorem2_metrics(df: pd.DataFrame, etas: list[float]) -> dict:
    """Claim metrics of Theorem 2. A wrong variant counts only where it is a different point
    from the right Q-min (differs by > 1e-6): e.g. sigma = sign(a0) only after a sign change."""
    ratios = []
    for k in ("unit_w0", "sigma_from_a0", "delta_zero"):
        real = df[f"differs_{k}"] > 1e-6
        ratios.extend((df.loc[real, f"wrong_{k}"] / df.loc[real, "gf_err"]).tolist())
    flips = df[df["sign_changed"]]
    return {
        "thm2_gf_max_err": float(df["gf_err"].max()),
        "thm2_newton_vs_closed_form_max": float(df["newton_vs_closed_form"].max()),
        "thm2_gd_min_halving_ratio": float(_halving_ratios(df, etas).min()),
        "thm2_gd_max_err_smallest_step": float(df[f"gd_err_eta{min(etas):g}"].max()),
        "thm2_sign_change_observed": bool(len(flips) > 0),
        "thm2_sign_change_wrong_sigma_err": float(flips["wrong_sigma_from_a0"].min())
        if len(flips) else float("nan"),
        "thm2_wrong_variant_min_ratio": float(min(ratios)),
    }


def multi_neuron_metrics(balanced: list[dict], anti: list[dict], etas: list[float]) -> dict:
    """Claim metrics of Proposition 1 and Theorem 3."""
    gd = pd.DataFrame([{f"gd_err_eta{e:g}": v for e, v in zip(etas, b["gd_err"])}
                       for b in balanced])
    return {
        "prop1_gf_max_err": max(b["gf_err"] for b in balanced),
        "prop1_gd_min_halving_ratio": float(_halving_ratios(gd, etas).min()),
        "prop1_generic_init_min_err": min(b["generic_err_vs_prop1"] for b in balanced),
        "multi_identity_max_err": max(b["generic_identity_err"] for b in balanced),
        "thm3_dist_l2_smallest_eps": max(a["dist_l2"][-1] for a in anti),
        "thm3_min_loglog_slope": min(a["slope"] for a in anti),
    }


def leaky_table(results: list[dict], seeds: list[int]) -> pd.DataFrame:
    """One row per (seed, rho) of Theorem 4's check."""
    rows = []
    for seed, res in zip(seeds, results):
        for r in res["rows"]:
            row = {"seed": seed, **{k: v for k, v in r.items() if not isinstance(v, list)}}
            row.update({f"kkt_residual_gd{i}": v for i, v in enumerate(r["kkt_residual_gd"])})
            rows.append(row)
    return pd.DataFrame(rows)


def leaky_metrics(df: pd.DataFrame) -> dict:
    """Claim metrics of Theorem 4 (raw labels coincide with the right ones at rho = 1)."""
    return {
        "thm4_max_kkt_residual": float(df["kkt_residual_gf"].max()),
        "thm4_max_gf_err": float(df["gf_err"].max()),
        "thm4_min_linear_label_err": float(df.loc[df["rho"] < 1, "linear_label_err"].min()),
    }


def regimes_table(results: list[dict], seeds: list[int], sweep: str) -> pd.DataFrame:
    """Long table of the scale / shape sweeps (sweep = 'alpha', 'shape' or 'alpha_zero_output')."""
    return pd.DataFrame([{"seed": seed, "sweep": sweep, **row}
                         for seed, res in zip(seeds, results) for row in res["rows"]])


def regime_metrics(df: pd.DataFrame) -> dict:
    """Claim metrics of Sec. 7.2 / App. F from the gradient-flow limits (worst seed)."""
    alpha = df[df["sweep"] == "alpha"]
    shape = df[df["sweep"] == "shape"]
    zero = df[df["sweep"] == "alpha_zero_output"]
    mid = alpha[(alpha["alpha"] == 1.0) & (alpha["s"] == 1.0)]
    return {
        "regime_gf_vs_q_max": float(df["gf_vs_q"].max()),
        "regime_dist_l2_smallest_alpha":
            float(alpha.loc[alpha["alpha"] == alpha["alpha"].min(), "gf_dist_l2"].max()),
        "regime_dist_ntk_largest_alpha":
            float(alpha.loc[alpha["alpha"] == alpha["alpha"].max(), "gf_dist_ntk"].max()),
        "regime_dist_ntk_largest_alpha_zero_output":
            float(zero.loc[zero["alpha"] == zero["alpha"].max(), "gf_dist_ntk"].max()),
        "regime_dist_ntk_largest_shape":
            float(shape.loc[shape["s"] == shape["s"].max(), "gf_dist_ntk"].max()),
        "regime_min_dist_alpha1_s1":
            float(np.minimum(mid["gf_dist_l2"], mid["gf_dist_ntk"]).min()),
    }


def closed_form_regimes(n: int, d: int, seed: int, points: list[list[float]],
                        in_null: bool = False) -> pd.DataFrame:
    """Theory curves for Sec. 7.2: distances of the Q-min (sigma = sign(a0) = +1; no sign change
    for s >= 1) to min-L2 and to the Mahalanobis predictor, on a dense (alpha, s) list."""
    X, y = random_regression(n, d, seed)
    u = _orientation(X, y, seed, in_null=in_null)
    beta_l2 = np.linalg.pinv(X) @ y
    rows = []
    for alpha, s in points:
        a0, w0 = init_from_scale_shape(alpha, s, u)
        q = q_min_single_neuron(X, y, w0, a0**2 - w0 @ w0, 1.0).beta
        ntk = mahalanobis_predictor(X, y, a0, w0)
        rows.append({"alpha": alpha, "s": s, "q_dist_l2": _rel(q, beta_l2),
                     "q_dist_ntk": _rel(q, ntk, ntk - a0 * w0)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# Figures (the notebook passes axes from implicit_bias.core.plotting.figure and saves the data)
# ----------------------------------------------------------------------------------------------
def plot_hessian_map(ax, df: pd.DataFrame, palette: list[str]) -> None:
    """Strip plot of the Hessian-map asymmetry (Eq. 6) per metric variant, log scale."""
    variants = [("plain", "plain IMD\n$H^{-1}$"), ("warped", "warped\n$|a| H^{-1}$"),
                ("wrong_warp_a2", "wrong warp\n$a^2 H^{-1}$")]
    for i, (col, _) in enumerate(variants):
        for j, (delta, grp) in enumerate(df.groupby("delta")):
            x = i + 0.15 * (j - 1) + 0.03 * np.arange(len(grp)) / max(len(grp), 1)
            ax.scatter(x, np.maximum(grp[col], 1e-17), s=14, color=palette[j],
                       label=f"$\\delta$ = {delta:g}" if i == 0 else None)
    ax.set_xticks(range(len(variants)), [lab for _, lab in variants])
    ax.set_yscale("log")
    ax.axhline(1e-12, color="grey", ls=":", lw=1)
    ax.set_ylabel("asymmetry max|$\\partial_k M_{ij} - \\partial_j M_{ik}$| / max|$\\partial M$|")
    ax.legend(fontsize=7)


def plot_time_warp(axes, res: dict, palette: list[str], marks=(0.25, 0.5, 1.0, 2.0)) -> None:
    """Left: gradient flow (time t) and the mirror flow of Q (time tau) in the beta-plane, with
    the points each reaches at the same clock reading. Right: the warp tau(t) and |a(t)|."""
    axes = np.ravel(axes)
    ax = axes[0]
    gf, mf = np.array(res["gf_beta"]), np.array(res["mf_beta"])
    ax.plot(gf[:, 0], gf[:, 1], color=palette[0], lw=2.5, label="gradient flow, time $t$")
    ax.plot(mf[:, 0], mf[:, 1], color=palette[1], lw=1.2, ls="--",
            label="mirror flow of $Q$, time $\\tau$")
    t = np.array(res["time"])
    for m in marks:
        for path, col, mk in ((gf, palette[0], "o"), (mf, palette[1], "s")):
            p = [np.interp(m, t, path[:, j]) for j in range(2)]
            ax.plot(*p, mk, color=col, ms=5, mfc="none" if mk == "s" else col)
    x = np.array(res["X"])[0]
    yv = np.array(res["y"])[0]
    lim = np.array(res["limit"])
    direction = np.array([-x[1], x[0]]) / np.linalg.norm(x)
    line = lim[None] + np.linspace(-0.6, 0.6, 2)[:, None] * direction
    ax.plot(line[:, 0], line[:, 1], color="grey", lw=1,
            label=f"$\\langle x, \\beta\\rangle$ = {yv:.2f}")
    ax.plot(*lim, "*", color="black", ms=9, label="argmin $Q$")
    ax.set_xlabel("$\\beta_1$")
    ax.set_ylabel("$\\beta_2$")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=6.5, loc="best")
    ax = axes[1]
    ax.plot(t, res["tau_of_t"], color=palette[2], label="$\\tau(t) = \\int_0^t |a|$")
    ax.plot(t, t, color="grey", ls=":", lw=1, label="$\\tau = t$")
    ax.plot(t, np.abs(res["a_of_t"]), color=palette[3], label="$|a(t)|$")
    ax.set_xlabel("gradient-flow time $t$")
    ax.set_ylabel("warped time $\\tau$, $|a|$")
    ax.legend(fontsize=7)


def time_warp_frame(res: dict) -> pd.DataFrame:
    """The numbers of the time-warping figure."""
    gf, mf = np.array(res["gf_beta"]), np.array(res["mf_beta"])
    return pd.DataFrame({"t_or_tau": res["time"], "tau_of_t": res["tau_of_t"],
                         "a": res["a_of_t"], "gf_beta1": gf[:, 0], "gf_beta2": gf[:, 1],
                         "mf_beta1": mf[:, 0], "mf_beta2": mf[:, 1]})


def plot_theorem2(axes, df: pd.DataFrame, etas: list[float], palette: list[str]) -> None:
    """Left: GD error vs normalized step per case (with gradient flow's error). Right: the
    gradient-flow limit's distance to the right Q-min and to each wrong variant."""
    axes = np.ravel(axes)
    ax = axes[0]
    cols = [f"gd_err_eta{e:g}" for e in etas]
    for i, (case, grp) in enumerate(df.groupby("case", sort=False)):
        ax.plot(etas, grp[cols].max().to_numpy(), "o-", color=palette[i], label=case)
        ax.axhline(grp["gf_err"].max(), color=palette[i], ls=":", lw=1)
    e = np.array(sorted(etas))
    ax.plot(e, 0.5 * df[cols].to_numpy().min() * e / e.min(), color="grey", ls="--", lw=1,
            label="slope 1")
    ax.set(xscale="log", yscale="log", xlabel="normalized GD step $\\eta$",
           ylabel="$\\|\\beta_{GD} - \\beta_Q\\| / \\|\\beta_Q\\|$ (worst seed)")
    ax.set_title("GD (dots) and gradient flow (dotted)", fontsize=8)
    ax.legend(fontsize=6.5)
    ax = axes[1]
    labels = ["gf_err", "wrong_unit_w0", "wrong_sigma_from_a0", "wrong_delta_zero"]
    names = ["right $Q$", "$w_0/\\|w_0\\|$", "$\\sigma$ = sign$(a_0)$", "$\\delta$ = 0"]
    width = 0.8 / len(labels)
    cases = list(dict.fromkeys(df["case"]))
    for j, (col, name) in enumerate(zip(labels, names)):
        vals = [max(df.loc[df["case"] == c, col].max(), 1e-17) for c in cases]
        ax.bar(np.arange(len(cases)) + (j - 1.5) * width, vals, width, color=palette[j],
               label=name)
    ax.set_xticks(range(len(cases)), cases, rotation=20, fontsize=7)
    ax.set(yscale="log", ylabel="distance of the GF limit (relative)")
    ax.set_ylim(top=ax.get_ylim()[1] * 1e3)  # room for the legend above the bars
    ax.legend(fontsize=6.5, ncol=2, loc="upper center")
    ax.set_title("a variant equal to the right $Q$ in a case has the same bar", fontsize=8)


def plot_anti_ntk(ax, anti: list[dict], seeds: list[int], palette: list[str]) -> pd.DataFrame:
    """Theorem 3: distance to min-L2 against the initialization scale eps (log-log)."""
    rows = []
    for i, (seed, res) in enumerate(zip(seeds, anti)):
        ax.plot(res["eps"], res["dist_l2"], "o-", color=palette[i % len(palette)],
                label=f"problem {seed}: slope {res['slope']:.3f}")
        rows += [{"seed": seed, "eps": e, "dist_l2": d} for e, d in zip(res["eps"],
                                                                          res["dist_l2"])]
    eps = np.array(anti[0]["eps"])
    ax.plot(eps, eps * anti[0]["dist_l2"][0] / eps[0] / 2, color="grey", ls="--", lw=1,
            label="slope 1")
    ax.set(xscale="log", yscale="log", xlabel="initialization scale $\\epsilon$",
           ylabel="$\\|\\beta_\\infty - X^+y\\| / \\|X^+y\\|$")
    ax.legend(fontsize=7)
    return pd.DataFrame(rows)


def plot_regimes(axes, df: pd.DataFrame, theory: pd.DataFrame, palette: list[str]) -> None:
    """Sec. 7.2: distances to min-L2 and to the Mahalanobis (NTK) predictor against alpha at
    s = 1 (left) and against s at alpha = 1 (right); markers: gradient flow, lines: Q-min.
    Both for the first problem seed of `df` (the claims use the worst seed)."""
    df = df[df["seed"] == df["seed"].iloc[0]]
    specs = [("alpha", "alpha", "scale $\\alpha$ (shape $s$ = 1)"),
             ("shape", "s", "shape $s$ (scale $\\alpha$ = 1)")]
    for ax, (sweep, xcol, xlabel) in zip(np.ravel(axes), specs):
        gf = df[df["sweep"] == sweep].groupby(xcol).max(numeric_only=True)
        th = theory[theory["sweep"] == sweep]
        ax.plot(th[xcol], th["q_dist_l2"], color=palette[0], lw=1)
        ax.plot(th[xcol], th["q_dist_ntk"], color=palette[1], lw=1)
        ax.plot(gf.index, gf["gf_dist_l2"], "o", color=palette[0], label="to min-$\\ell_2$")
        ax.plot(gf.index, gf["gf_dist_ntk"], "s", color=palette[1],
                label="to Mahalanobis (NTK)")
        if sweep == "alpha":
            z = df[df["sweep"] == "alpha_zero_output"].groupby(xcol).max(numeric_only=True)
            thz = theory[theory["sweep"] == "alpha_zero_output"]
            ax.plot(thz[xcol], thz["q_dist_ntk"], color=palette[2], lw=1, ls="--")
            ax.plot(z.index, z["gf_dist_ntk"], "^", color=palette[2],
                    label="to NTK, $X\\beta_0 = 0$")
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="relative distance")
        ax.legend(fontsize=6.5)


def plot_q_levels(axes, grids: list[tuple[str, dict]], palette: list[str]) -> pd.DataFrame:
    """Fig. 7.2: level sets of Q (solid) and of its quadratic model at beta0 (dashed)."""
    frames = []
    for ax, (title, g) in zip(np.ravel(axes), grids):
        n = int(round(np.sqrt(len(g["q"]))))
        shape = (n, n)
        b1, b2 = g["b1"].reshape(shape), g["b2"].reshape(shape)
        levels = np.quantile(g["q"], [0.03, 0.1, 0.2, 0.35, 0.5, 0.7])
        ax.contour(b1, b2, g["q"].reshape(shape), levels=np.unique(levels), colors=palette[0],
                   linewidths=1.2)
        ax.contour(b1, b2, g["quad"].reshape(shape), levels=np.unique(levels),
                   colors=palette[1], linewidths=0.9, linestyles="--")
        ax.plot(*g["beta0"], "x", color="black", ms=5)
        ax.plot(0, 0, "+", color="grey", ms=6)
        ax.set_title(f"{title}\nmismatch {g['quad_mismatch']:.2g}", fontsize=8)
        ax.set_aspect("equal")
        ax.set_xlabel("$\\beta_1$", fontsize=8)
        ax.set_ylabel("$\\beta_2$", fontsize=8)
        frames.append(pd.DataFrame({"panel": title, "b1": g["b1"], "b2": g["b2"], "q": g["q"],
                                    "quad": g["quad"]}))
    return pd.concat(frames, ignore_index=True)
