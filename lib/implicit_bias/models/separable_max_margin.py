"""Gradient descent on separable data (Soudry, Hoffer, Nacson, Gunasekar & Srebro, JMLR 2018):
the data sets of their Figure 1, the hard-margin SVM it converges to, the limit of the residual
w(t) - w_hat log t, and batched trajectories of gradient descent, heavy-ball momentum and Adam.

Notation of the paper: labels are absorbed into the points, z_n = y_n x_n, and
L(w) = sum_n l(z_n^T w) (Eq. 1) with the logistic loss l(u) = log(1 + exp(-u)) or the
exponential loss l(u) = exp(-u); gradient descent is w(t + 1) = w(t) - eta grad L(w(t)) (Eq. 2).
Pure numerics: numpy, torch and cvxpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import torch

LOSSES = ("logistic", "exp")
# Support vectors of the paper's Figure 1: x1 = (0.5, 1.5), x2 = (1.5, 0.5) with y = +1, and
# their negatives with y = -1; the max-margin vector is then w_hat = (0.5, 0.5).
FIGURE1_SUPPORT = ((0.5, 1.5), (1.5, 0.5))


@dataclass
class SeparableData:
    X: np.ndarray  # (n, d) points
    y: np.ndarray  # (n,) labels +-1
    w_hat: np.ndarray | None  # the max-margin vector the construction puts in (None if rescaled)

    @property
    def Z(self) -> np.ndarray:
        """The points with their labels absorbed, z_n = y_n x_n."""
        return self.y[:, None] * self.X


def support_pair(kind: str, rng: np.random.Generator, min_rate: float = 0.2) -> np.ndarray:
    """Two support vectors (rows) of the positive class. "figure1": the paper's; "generic": two
    random vectors of the first quadrant, resampled until the residual's predicted decay rate
    (`support_rate`, with both classes' copies) is at least `min_rate`, so that the asymptotic
    regime is reached within 10^5 to 10^6 steps (a design choice of the book: the theorem holds
    for any rate, but a rate of 0.02 would need astronomically many steps to show)."""
    if kind == "figure1":
        return np.array(FIGURE1_SUPPORT, dtype=float)
    if kind != "generic":
        raise ValueError(f"unknown data set kind {kind!r}; valid: 'figure1', 'generic'")
    while True:
        angles = np.array([rng.uniform(0.1, np.pi / 4 - 0.15), rng.uniform(np.pi / 4 + 0.15, 1.45)])
        radii = rng.uniform(1.0, 2.5, size=2)
        S = radii[:, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        alpha = np.linalg.solve(S @ S.T, np.ones(2))
        if (
            alpha.min() > 0
            and support_rate(np.concatenate([S, S]), np.tile(alpha / 2, 2)) >= min_rate
        ):
            return S


def separable_dataset(
    seed: int,
    kind: str = "figure1",
    n_random: int = 12,
    gap: float = 0.5,
    box: float = 3.0,
    x2_scale: float = 1.0,
    min_rate: float = 0.2,
) -> SeparableData:
    """The data of the paper's Figure 1: two support vectors per class (x3 = -x1, x4 = -x2) and
    `n_random` other points, half per class, "not on the margin". The paper does not say how
    those were drawn; here uniformly from [-box, box]^2, labelled by the side of w_hat and kept
    when w_hat^T x is at least 1 + gap away from zero (so the non-support terms of the gradient
    decay like t^-(1 + gap)). `x2_scale` multiplies every second coordinate afterwards (the
    variant of the paper's Adam figure, with 20); w_hat is then left to the SVM. `min_rate`:
    see `support_pair`."""
    rng = np.random.default_rng([seed, 0])
    S = support_pair(kind, rng, min_rate)
    alpha = np.linalg.solve(S @ S.T, np.ones(2))
    w_hat = S.T @ alpha
    points: dict[int, list] = {1: [], -1: []}
    while min(len(v) for v in points.values()) < n_random // 2:
        x = rng.uniform(-box, box, size=2)
        z = float(w_hat @ x)
        if abs(z) >= 1 + gap and len(points[int(np.sign(z))]) < n_random // 2:
            points[int(np.sign(z))].append(x)
    X = np.concatenate([S, -S, np.array(points[1]), np.array(points[-1])])
    y = np.concatenate([np.ones(2), -np.ones(2), np.ones(n_random // 2), -np.ones(n_random // 2)])
    if x2_scale != 1.0:
        X = X * np.array([1.0, x2_scale])
        return SeparableData(X, y, None)
    return SeparableData(X, y, w_hat)


def validation_set(
    seed: int, w_hat: np.ndarray, n: int, flip: float, box: float = 3.0, x2_scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out points from the same box, labelled by the side of w_hat with a share `flip` of
    the labels flipped: a population that no linear separator classifies perfectly, so that
    (Sec. 3) its loss grows once w(t) grows along w_hat."""
    rng = np.random.default_rng([seed, 1])
    X = rng.uniform(-box, box, size=(n, 2)) * np.array([1.0, x2_scale])
    y = np.sign(X @ (w_hat / np.array([1.0, x2_scale])))
    y[rng.random(n) < flip] *= -1
    return X, y


@dataclass
class HardMarginSVM:
    w: np.ndarray | None
    alpha: np.ndarray | None  # dual weights: w = sum_n alpha_n z_n
    status: str


def hard_margin_svm(Z: np.ndarray, solver: str = "CLARABEL") -> HardMarginSVM:
    """w_hat = argmin ||w||^2 s.t. w^T z_n >= 1 (Eq. 4 of the paper), a quadratic program
    solved by an interior-point method, with its dual weights alpha (w_hat = sum alpha_n z_n).
    Computed without any gradient descent: the independent reference of the chapter."""
    w = cp.Variable(Z.shape[1])
    constraint = Z @ w >= 1
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), [constraint])
    problem.solve(solver=solver)
    if problem.status != cp.OPTIMAL:
        return HardMarginSVM(None, None, str(problem.status))
    return HardMarginSVM(np.asarray(w.value), np.asarray(constraint.dual_value), "optimal")


def support_indices(Z: np.ndarray, w_hat: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """The points on the margin, w_hat^T z_n = 1 (to `tol`)."""
    return np.flatnonzero(Z @ w_hat <= 1 + tol)


def residual_limit(
    Z: np.ndarray, w_hat: np.ndarray, eta: float, tol: float = 1e-12, max_iter: int = 200
) -> np.ndarray:
    """The limit w_tilde of the residual rho(t) = w(t) - w_hat log t (Theorem 3; its proof
    defines w_tilde by eta exp(-z_n^T w_tilde) = alpha_n on the support vectors). Equivalently
    w_tilde is the stationary point of the convex F(w) = eta sum_S exp(-z_n^T w) + w_hat^T w,
    whose gradient vanishes when eta sum_S exp(-z_n^T w) z_n = w_hat: then GD's increment
    eta sum_S exp(-z_n^T w(t)) z_n = w_hat / t matches d/dt (w_hat log t). Solved by Newton's
    method with backtracking within the span of the support vectors (which must span R^d
    here; the component outside it depends on the start and is not determined by the data)."""
    S = Z[support_indices(Z, w_hat)]
    if np.linalg.matrix_rank(S) < Z.shape[1]:
        raise ValueError("the support vectors do not span the space: w_tilde is not unique")

    def value(w):
        return eta * np.exp(-S @ w).sum() + w_hat @ w

    w = np.zeros(Z.shape[1])
    for _ in range(max_iter):
        e = eta * np.exp(-S @ w)
        grad = w_hat - S.T @ e
        hess = S.T @ (e[:, None] * S)
        if np.linalg.norm(grad) <= tol * np.linalg.norm(w_hat):
            return w
        step = np.linalg.solve(hess, -grad)
        size = 1.0
        # backtracking while far from the minimum; near it (Newton decrement below 1e-8) full
        # steps, where F's round-off (1e-16 of its value) would stall an Armijo test
        while (
            -(grad @ step) > 1e-8
            and value(w + size * step) > value(w) + 1e-4 * size * (grad @ step)
            and size > 1e-12
        ):
            size /= 2
        w = w + size * step
    raise RuntimeError("Newton's method for w_tilde did not converge")


def support_rate(Z_support: np.ndarray, alpha_support: np.ndarray) -> float:
    """The smallest eigenvalue of sum_S alpha_n z_n z_n^T. Linearizing GD's increment
    eta sum_S exp(-z_n^T w) z_n about w_hat log t + w_tilde gives, for the deviation
    delta = rho - w_tilde, delta' = -(sum_S alpha_n z_n z_n^T) delta / t: each eigen-component
    of delta decays like t^-lambda. (The book's analysis, not the paper's; the same for any step
    size and for momentum, since alpha comes from the SVM alone.)"""
    M = (alpha_support[:, None] * Z_support).T @ Z_support
    return float(np.linalg.eigvalsh(M)[0])


def residual_decay_exponent(Z: np.ndarray, w_hat: np.ndarray, alpha: np.ndarray) -> float:
    """The predicted exponent p of |rho(t) - w_tilde| ~ t^-p: the slowest of the support
    vectors' relaxation `support_rate`, the decay t^-(theta - 1) that the non-support points
    (theta = min of z_n^T w_hat over them) force, and the 1/t of the time discretization."""
    S = support_indices(Z, w_hat)
    rest = np.setdiff1d(np.arange(len(Z)), S)
    theta = float((Z[rest] @ w_hat).min()) if len(rest) else np.inf
    return min(support_rate(Z[S], alpha[S]), theta - 1.0, 1.0)


def log_checkpoints(steps: int, per_decade: int) -> list[int]:
    """Steps 1 .. `steps`, `per_decade` per decade (log-spaced), with steps / 100 and steps."""
    k = np.arange(0, int(np.floor(np.log10(steps) * per_decade)) + 1)
    points = set(np.unique(np.round(10 ** (k / per_decade)).astype(int)).tolist())
    points |= {max(1, steps // 100), steps}
    return sorted(p for p in points if 1 <= p <= steps)


def _negative_loss_derivative(minus_u: torch.Tensor, loss: str) -> torch.Tensor:
    """-l'(u), in place of -u: sigmoid(-u) for the logistic loss, exp(-u) for the exponential."""
    if loss == "logistic":
        return torch.sigmoid(minus_u, out=minus_u)
    return torch.exp(minus_u, out=minus_u)


def heavy_ball(
    Z: np.ndarray,
    loss: str,
    etas: list[float],
    gammas: list[float],
    checkpoints: list[int],
) -> np.ndarray:
    """Gradient descent (gamma = 0, Eq. 2) and heavy-ball momentum (v <- gamma v - eta grad L,
    w <- w + v), from w(0) = 0, for a batch of data sets Z (B, n, d) with their step sizes
    `etas` (B,), each run with every gamma: one float64 tensor program of B * len(gammas) runs.
    Returns w at the checkpoints, shape (B * len(gammas), K, d), runs ordered data set major."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
    Zt = torch.as_tensor(np.repeat(Z, len(gammas), axis=0), dtype=torch.float64)
    B, _, d = Zt.shape
    Zneg = (-Zt).contiguous()
    eta = torch.tensor(np.repeat(etas, len(gammas)), dtype=torch.float64).view(B, 1, 1)
    ZT = (eta * Zt.transpose(1, 2)).contiguous()  # each run's step folded into its data
    gamma = torch.tensor(gammas * Z.shape[0], dtype=torch.float64).view(B, 1, 1)
    w = torch.zeros(B, d, 1, dtype=torch.float64)
    v = torch.zeros_like(w)
    u = torch.empty(B, Zt.shape[1], 1, dtype=torch.float64)
    out = np.empty((B, len(checkpoints), d))
    t = 0
    for k, target in enumerate(checkpoints):
        while t < target:
            torch.bmm(Zneg, w, out=u)  # -z_n^T w
            _negative_loss_derivative(u, loss)
            v.mul_(gamma).baddbmm_(ZT, u)  # -eta grad L = eta sum_n -l'(z_n^T w) z_n
            w.add_(v)
            t += 1
        out[:, k] = w[:, :, 0].numpy()
    return out


def adam(
    Z: np.ndarray,
    loss: str,
    lr: float,
    checkpoints: list[int],
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> np.ndarray:
    """Adam (Kingma & Ba's update with bias correction, the defaults of torch.optim.Adam) on
    L(w) from w(0) = 0 for a batch of data sets Z (B, n, d). Returns w at the checkpoints."""
    Zt = torch.as_tensor(Z, dtype=torch.float64)
    B, _, d = Zt.shape
    Zneg = (-Zt).contiguous()
    ZT = Zt.transpose(1, 2).contiguous()
    w = torch.zeros(B, d, 1, dtype=torch.float64)
    m = torch.zeros_like(w)
    s = torch.zeros_like(w)
    grad = torch.empty_like(w)
    u = torch.empty(B, Zt.shape[1], 1, dtype=torch.float64)
    b1, b2 = betas
    out = np.empty((B, len(checkpoints), d))
    t = 0
    for k, target in enumerate(checkpoints):
        while t < target:
            t += 1
            torch.bmm(Zneg, w, out=u)
            _negative_loss_derivative(u, loss)
            torch.bmm(ZT, u, out=grad)
            grad.neg_()
            m.mul_(b1).add_(grad, alpha=1 - b1)
            s.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (s / (1 - b2**t)).sqrt_().add_(eps)
            w.addcdiv_(m, denom, value=-lr / (1 - b1**t))
        out[:, k] = w[:, :, 0].numpy()
    return out


def loss_value(Z: np.ndarray, w: np.ndarray, loss: str) -> np.ndarray:
    """L(w) = sum_n l(z_n^T w) for w of shape (..., d): logaddexp keeps the logistic loss
    accurate at margins where exp(-u) is below the float64 epsilon."""
    u = np.einsum("nd,...d->...n", Z, w)
    per_point = np.logaddexp(0.0, -u) if loss == "logistic" else np.exp(-u)
    return per_point.sum(axis=-1)


def direction_gap(w: np.ndarray, w_hat: np.ndarray) -> np.ndarray:
    """|| w / ||w|| - w_hat / ||w_hat|| || for w of shape (..., d)."""
    unit = w / np.linalg.norm(w, axis=-1, keepdims=True)
    return np.linalg.norm(unit - w_hat / np.linalg.norm(w_hat), axis=-1)


def angle_gap(w: np.ndarray, w_hat: np.ndarray) -> np.ndarray:
    """1 - cos of the angle between w and w_hat."""
    cos = (w @ w_hat) / (np.linalg.norm(w, axis=-1) * np.linalg.norm(w_hat))
    return 1.0 - cos


def margin_gap(Z: np.ndarray, w: np.ndarray, w_hat: np.ndarray) -> np.ndarray:
    """1 / ||w_hat|| - min_n z_n^T w / ||w||: how far w's normalized margin is below the
    largest possible, 1 / ||w_hat||."""
    margins = np.einsum("nd,...d->...n", Z, w).min(axis=-1) / np.linalg.norm(w, axis=-1)
    return 1.0 / np.linalg.norm(w_hat) - margins
