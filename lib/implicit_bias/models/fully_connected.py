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

Everything that checks theory runs in float64. The dynamics (vector fields and the Euler / RK4
integrator) are torch programs batched over initializations (leading batch axis B) that run on
whatever device their tensors live on; the chapter's training loops, which place the tensors on
the run's device, are in `implicit_bias.chapters.warped_imd.tasks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.integrate
import scipy.optimize
import torch

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


def init_from_scale_shape(
    alpha: float, s: float, u: Array, sign: float = 1.0
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
def _delta_plus_s(r: Array | np.floating | float, delta: float) -> Array:
    """delta + sqrt(delta^2 + 4 r^2), written without cancellation when delta < 0."""
    r = np.asarray(r, dtype=float)
    big_s = np.sqrt(delta**2 + 4.0 * r**2)
    if delta >= 0:
        return delta + big_s
    return 4.0 * r**2 / (big_s - delta)  # = delta + S, since (S + delta)(S - delta) = 4 r^2


def a_squared(r: Array | np.floating | float, delta: float) -> Array:
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


def q_min_numeric(
    X: Array,
    y: Array,
    q: Callable[[Array], float],
    grad: Callable[[Array], Array],
    hess: Callable[[Array], Array] | None = None,
) -> Array:
    """A generic cross-check: minimize a smooth convex Q over {beta : X beta = y} numerically.

    Parametrizes the affine set as X^+ y + N z (N an orthonormal basis of null(X)) and runs a
    trust-region Newton method (or BFGS without a Hessian) on z.
    """
    beta_p = np.linalg.pinv(X) @ y
    _, sv, vt = np.linalg.svd(X)
    basis = vt[int(np.sum(sv > 1e-12 * sv[0])) :].T
    fun = lambda z: float(q(beta_p + basis @ z))  # noqa: E731
    jac = lambda z: basis.T @ grad(beta_p + basis @ z)  # noqa: E731
    z0 = np.zeros(basis.shape[1])
    if hess is None:
        res = scipy.optimize.minimize(fun, z0, jac=jac, method="BFGS", options={"gtol": 1e-12})
        return beta_p + basis @ res.x
    hz = lambda z: basis.T @ hess(beta_p + basis @ z) @ basis  # noqa: E731
    res = scipy.optimize.minimize(
        fun, z0, jac=jac, hess=hz, method="trust-exact", options={"gtol": 1e-10}
    )
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


def kkt_residual_active(
    beta: Array, X: Array, w0: Array, delta: float, sigma: float, active: Array
) -> float:
    """`kkt_residual` with only the samples in `active` (boolean, shape (n,)) as constraints'
    gradients: ||P grad Q(beta)|| / ||grad Q(beta)||, P the projector onto the orthogonal
    complement of span{x_i : active_i}.

    For a ReLU neuron (rho = 0) a sample with negative pre-activation has Clarke
    sub-differential {0} (App. G, Definition 1), so only the others can balance grad Q.
    """
    grad = grad_q_single_neuron(beta, w0, delta, sigma)
    xa = np.asarray(X, dtype=float)[np.asarray(active, dtype=bool)]
    proj = np.eye(grad.size) - np.linalg.pinv(xa) @ xa if xa.size else np.eye(grad.size)
    return float(np.linalg.norm(proj @ grad) / np.linalg.norm(grad))


def relu_teacher_regression(n: int, d: int, seed: int) -> tuple[Array, Array, Array]:
    """Gaussian X (as `random_regression`) with labels y = max(X w*, 0) of a random ReLU
    teacher w* (entries N(0, 1/d)): about half the labels are 0. Returns X, y, w*."""
    X, _ = random_regression(n, d, seed)
    w_star = np.random.default_rng(seed + 5000).standard_normal(d) / np.sqrt(d)
    return X, np.maximum(X @ w_star, 0.0), w_star


def q_min_balanced(X: Array, y: Array, a0: Array, u0: Array) -> QMinimizer:
    """Prop. 1: for W0 = a0 u0^T, ||u0|| = 1, Q = (2/3) ||beta||^{3/2} - ||a0|| <u0, beta>.

    The network then follows the single neuron with delta = 0 and w0 -> ||a0|| u0.
    """
    return q_min_single_neuron(X, y, np.linalg.norm(a0) * np.asarray(u0), 0.0, 1.0)


def leaky_relu_inverse(z: Array, rho: float) -> Array:
    """sigma_rho^{-1}: the leaky ReLU max(z, rho z) is a bijection for rho > 0."""
    z = np.asarray(z, dtype=float)
    return np.where(z >= 0, z, z / rho)


def q_min_leaky(
    X: Array, y: Array, w0: Array, delta: float, sign_a: float, rho: float
) -> QMinimizer:
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


def hessian_map_asymmetry(
    metric: Callable[[torch.Tensor], torch.Tensor],
    beta: Array,
    method: str = "autograd",
    h: float = 1e-5,
) -> float:
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
        z = w @ X.T  # (B, n) pre-activations
        act = z if rho is None else _leaky(z, rho)
        r = a[:, None] * act - y  # residuals (B, n)
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
        g = r @ X  # (B, d)
        return (-torch.einsum("bkd,bd->bk", W, g), -a[:, :, None] * g[:, None, :]), 0.5 * (
            r**2
        ).sum(1)

    return field


def _integrate(
    field,
    params: tuple[torch.Tensor, ...],
    step: torch.Tensor,
    method: str,
    max_steps: int,
    tol: torch.Tensor,
    check_every: int = 200,
):
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
                params = tuple(
                    p + bc(step / 6, p) * (q1 + 2 * q2 + 2 * q3 + q4)
                    for p, q1, q2, q3, q4 in zip(params, k1, k2, k3, k4)
                )
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


def gradient_flow_implicit(
    X: Array,
    y: Array,
    a0: float,
    w0: Array,
    tol: float,
    max_steps: int = 100_000,
    rtol: float = 1e-12,
    atol: float = 1e-14,
) -> dict:
    """Gradient flow of one single neuron by the implicit Radau IIA method (order 5, adaptive
    step, exact Jacobian; numpy float64), for the stiff case delta < 0.

    Why: with delta < 0 the limit can have a tiny outer weight, |a_inf|^2 ~ ||X^+ y||^2 / |c|
    (c = delta + ||P_perp w0||^2, `q_min_single_neuron`), while a^2 + ||w||^2 >= |delta|. The
    loss's Hessian at the limit, X H X^T with H = a^2 I + w w^T, then has eigenvalues from
    about a^2 lambda_min(X X^T) to |delta| lambda_max(X X^T): a stiffness ratio of order
    alpha^2 at large scale alpha (1e8 .. 1e10 at alpha = 1e4, s < 1), beyond any explicit
    method's step budget. An implicit method takes steps as long as the slow mode allows.
    It preserves the linear invariant P_perp w = P_perp w0 exactly (as every Runge-Kutta
    method does); delta = a^2 - ||w||^2 drifts at the level of `rtol`.

    Stops at the first accepted step with loss 1/2 ||X a w - y||^2 < tol (the rule of the RK4
    runs, `_loss_tol`); a run still above it after `max_steps` steps is unconverged.
    Returns a, w, beta, loss, steps, converged, and whether a changed sign at an accepted step.
    """
    gram, xty = X.T @ X, X.T @ y

    def field(_: float, p: Array) -> Array:
        a, w = p[0], p[1:]
        g = gram @ (a * w) - xty
        return np.concatenate([[-w @ g], -a * g])

    def jacobian(_: float, p: Array) -> Array:
        # minus the Hessian of L(a, w) = 1/2 ||X a w - y||^2
        a, w = p[0], p[1:]
        g_w = gram @ w
        cross = -(gram @ (a * w) - xty) - a * g_w
        jac = np.empty((p.size, p.size))
        jac[0, 0], jac[0, 1:], jac[1:, 0] = -w @ g_w, cross, cross
        jac[1:, 1:] = -(a**2) * gram
        return jac

    solver = scipy.integrate.Radau(
        field, 0.0, np.concatenate([[a0], w0]), np.inf, rtol=rtol, atol=atol, jac=jacobian
    )
    sign0, flipped, steps = np.sign(a0), False, 0
    loss = float("inf")
    while steps < max_steps and solver.status == "running":
        solver.step()
        steps += 1
        a, w = float(solver.y[0]), solver.y[1:]
        flipped |= bool(np.sign(a) != sign0)
        r = X @ (a * w) - y
        loss = 0.5 * float(r @ r)
        if loss < tol:
            break
    a, w = float(solver.y[0]), solver.y[1:].copy()
    return {
        "a": a,
        "w": w,
        "beta": a * w,
        "loss": loss,
        "steps": steps,
        "converged": bool(loss < tol),
        "sign_changed": flipped,
    }


# ----------------------------------------------------------------------------------------------
# Time warping (Sec. 5): gradient flow in t versus the mirror flow of Q in tau, d tau = |a| dt
# ----------------------------------------------------------------------------------------------
def _rk4_path(
    field: Callable[[Array], Array], x0: Array, dt: float, n_steps: int, record_every: int
) -> Array:
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


def gradient_flow_path(
    X: Array,
    y: Array,
    a0: float,
    w0: Array,
    end: float,
    dt: float,
    clock: str = "t",
    record_every: int = 1,
) -> dict:
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


def warped_mirror_flow_path(
    X: Array,
    y: Array,
    beta0: Array,
    delta: float,
    tau_end: float,
    dtau: float,
    record_every: int = 1,
) -> dict:
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
# Small helpers shared by the chapter's experiments: relative distances, initial directions
# ----------------------------------------------------------------------------------------------
def _rel(x: Array, ref: Array, scale: Array | None = None) -> float:
    """||x - ref|| / ||ref|| (or / ||scale||): the relative distance every check reports."""
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref if scale is None else scale))


def _unit(v: Array) -> Array:
    """v / ||v||."""
    return v / np.linalg.norm(v)


def _orientation(
    X: np.ndarray[tuple[int, int], np.dtype[Any]],
    y: Array,
    seed: int,
    anti_aligned: bool = False,
    in_null: bool = False,
) -> Array:
    """A random initialization direction u; `anti_aligned` points it against X^+ y (so the
    outer weight must change sign), `in_null` puts it in null(X) (zero initial output)."""
    rng = np.random.default_rng(seed + 1000)
    u = _unit(rng.standard_normal(X.shape[1]))
    if anti_aligned:
        u = _unit(-_unit(np.linalg.pinv(X) @ y) + 0.3 * u)
    if in_null:
        u = _unit(null_projector(X) @ u)
    return u


# ----------------------------------------------------------------------------------------------
# Fig. 7.2: Q on a grid beside its quadratic (Mahalanobis) model
# ----------------------------------------------------------------------------------------------
def q_level_grid(alpha: float, s: float, u: Array, n_grid: int, radius: float) -> dict:
    """Fig. 7.2: Theorem 2's Q on a 2-d grid around beta0 = alpha u, beside its quadratic
    (Mahalanobis, App. F) model at beta0; the window is beta0 +- radius max(1, ||beta0||).

    Returns the grid and the relative sup-distance of Q - Q(beta0) from that model on it.
    """
    a0, w0 = init_from_scale_shape(alpha, s, u)
    delta = a0**2 - w0 @ w0
    beta0 = a0 * w0
    half = radius * max(1.0, float(np.linalg.norm(beta0)))
    g1, g2 = np.meshgrid(
        np.linspace(beta0[0] - half, beta0[0] + half, n_grid),
        np.linspace(beta0[1] - half, beta0[1] + half, n_grid),
    )
    pts = np.stack([g1.ravel(), g2.ravel()], axis=1)
    q = q_single_neuron(pts, w0, delta, 1.0) - q_single_neuron(beta0, w0, delta, 1.0)
    diff = pts - beta0
    quad = 0.5 * np.einsum("pi,ij,pj->p", diff, hess_q_single_neuron(beta0, delta), diff)
    span = np.abs(q).max()
    return {
        "b1": pts[:, 0],
        "b2": pts[:, 1],
        "q": q,
        "quad": quad,
        "beta0": beta0,
        "quad_mismatch": float(np.abs(q - quad).max() / span),
    }
