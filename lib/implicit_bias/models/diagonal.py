"""Two-layer diagonal linear networks with untied weights (Azulay et al. 2021, Sec. 4 and 7.1).

Model (Eq. (8) of Azulay et al.): the predictor is beta = u+ * v+ - u- * v- (elementwise), trained
by gradient descent on the square loss L = 1/(2n) ||X beta - y||^2. The tied model of Woodworth
et al. (2020), beta = w+^2 - w-^2, is the special case u = v (up to a factor 2 in time).

Theorem 1 (unbiased initialization u+0 = u-0 = u0, v+0 = v-0 = v0): gradient flow converges to

    argmin Q(beta)  s.t.  X beta = y,   Q(beta) = sum_i m_i q(beta_i / m_i),
    q(z) = z asinh(z) - sqrt(1 + z^2) + 1,   m_i = u0_i^2 + v0_i^2

(the paper's q_k with k = 4 m^2, up to a constant factor; restored formulas in
`shared/notes/math_azulay_yun.md`, section 1). With scale alpha = |u0 v0| and shape
s = |u0 / v0| (Sec. 7.1), m = alpha (s + 1/s). Appendix A (any initialization): with
M = (u+0^2 + v+0^2 + u-0^2 + v-0^2) / 2, beta0 the initial predictor and K = sqrt(M^2 - beta0^2),
the regularizer is the Bregman divergence sum_i [beta asinh(beta/K) - sqrt(beta^2 + K^2)
- beta asinh(beta0/K)] (+ const).

Gradient descent and the flow integrator are batched over a grid of initializations (one tensor
program, shape (B, d)) and device-agnostic; the convex solves (Newton on the n-dimensional dual,
cvxpy primal cross-check) run in float64 numpy. The chapter's experiments (task functions,
tables, metrics, figures) are in `implicit_bias.chapters.untied_diagonal`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.integrate import solve_ivp

# ----------------------------------------------------------------------------------------------
# Initializations
# ----------------------------------------------------------------------------------------------


@dataclass
class DiagonalParams:
    """The four weight vectors of the untied diagonal network, each of shape (B, d)."""

    u_plus: torch.Tensor
    v_plus: torch.Tensor
    u_minus: torch.Tensor
    v_minus: torch.Tensor

    def predictor(self) -> torch.Tensor:
        """beta = u+ v+ - u- v- (Eq. (8))."""
        return self.u_plus * self.v_plus - self.u_minus * self.v_minus

    def clone(self) -> DiagonalParams:
        return DiagonalParams(*(t.clone() for t in self.tensors()))

    def to(self, device: torch.device | str) -> DiagonalParams:
        return DiagonalParams(*(t.to(device) for t in self.tensors()))

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.u_plus, self.v_plus, self.u_minus, self.v_minus

    def effective_scale(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(K, beta0) of Appendix A: K = sqrt(M^2 - beta0^2), M = (u+^2+v+^2+u-^2+v-^2)/2.

        For an unbiased initialization beta0 = 0 and K = m = u0^2 + v0^2.
        """
        # M = P + N and beta0 = P - N with P, N >= 0 (see `_plus_minus_weights`), so
        # K^2 = M^2 - beta0^2 = 4 P N: computed that way it is never negative through rounding.
        p, n = _plus_minus_weights(self)
        return 2 * torch.sqrt(p * n), p - n


def _plus_minus_weights(params: DiagonalParams) -> tuple[torch.Tensor, torch.Tensor]:
    """beta(G) = P e^{2G} - N e^{-2G} along gradient flow (proof of Thm 1, App. A)."""
    a_plus = params.u_plus + params.v_plus
    b_plus = params.u_plus - params.v_plus
    a_minus = params.u_minus + params.v_minus
    b_minus = params.u_minus - params.v_minus
    return (a_plus**2 + b_minus**2) / 4, (b_plus**2 + a_minus**2) / 4


def unbiased_init(u0: torch.Tensor, v0: torch.Tensor) -> DiagonalParams:
    """Unbiased initialization (Sec. 4): u+0 = u-0 = u0 and v+0 = v-0 = v0, so beta(0) = 0."""
    return DiagonalParams(u0.clone(), v0.clone(), u0.clone(), v0.clone())


def scale_shape_init(alpha: torch.Tensor, shape: torch.Tensor, d: int) -> DiagonalParams:
    """Uniform unbiased initialization with scale alpha = |u0 v0| and shape s = |u0 / v0|.

    `alpha` and `shape` are 1-d tensors of length B (one run each); every coordinate gets
    u0 = sqrt(alpha s), v0 = sqrt(alpha / s) (Sec. 7.1). An infinite shape means v0 = 0.
    """
    alpha = alpha.reshape(-1, 1)
    shape = shape.reshape(-1, 1)
    u0 = torch.sqrt(alpha * shape).expand(-1, d)
    v0 = torch.where(torch.isinf(shape), torch.zeros_like(u0), torch.sqrt(alpha / shape))
    return unbiased_init(u0, v0.expand(-1, d))


def m_from_scale_shape(alpha, shape):
    """m = u0^2 + v0^2 = alpha (s + 1/s) (Sec. 7.1): symmetric under s -> 1/s."""
    return alpha * (shape + 1.0 / shape)


def tied_to_untied_init(alpha_w: torch.Tensor) -> DiagonalParams:
    """Woodworth et al.'s w+ = w- = alpha_w (shape (B, d)) as an untied net with u = v = alpha_w.

    Then m = 2 alpha_w^2 and Q equals Woodworth's alpha_w^2 sum q_W(beta / alpha_w^2).
    """
    return unbiased_init(alpha_w, alpha_w)


# ----------------------------------------------------------------------------------------------
# Theorem 1's regularizer
# ----------------------------------------------------------------------------------------------


def q_function(z: np.ndarray | float) -> np.ndarray:
    """q(z) = z asinh(z) - sqrt(1 + z^2) + 1 (Eq. (9) up to the constant factor, m = 1)."""
    z = np.asarray(z, dtype=float)
    # 1 - sqrt(1+z^2) = -z^2 / (1 + sqrt(1+z^2)) avoids cancellation for small |z|.
    return z * np.arcsinh(z) - z**2 / (1.0 + np.sqrt(1.0 + z**2))


def q_paper(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The paper's notation (Eq. (9)), with r = sqrt k:
    q_k(x) = (r / 4) [1 - sqrt(1 + 4 x^2 / k) + (2 x / r) asinh(2 x / r)].

    Equals m q(x/m) / 2 with k = 4 m^2 (a constant factor, same minimizer).
    """
    rk = np.sqrt(np.asarray(k, dtype=float))
    z = 2 * np.asarray(x, dtype=float) / rk
    return rk / 4 * q_function(z)


def regularizer_q(beta: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Q(beta) = sum_i m_i q(beta_i / m_i) (Theorem 1), summed over the last axis."""
    m = np.asarray(m, dtype=float)
    return np.sum(m * q_function(np.asarray(beta, dtype=float) / m), axis=-1)


def grad_regularizer_q(beta: np.ndarray, m: np.ndarray) -> np.ndarray:
    """grad Q(beta) = asinh(beta / m) (elementwise)."""
    return np.arcsinh(np.asarray(beta, dtype=float) / np.asarray(m, dtype=float))


def regularizer_q_general(beta: np.ndarray, k: np.ndarray, beta0: np.ndarray) -> np.ndarray:
    """Appendix A's regularizer for any initialization: the Bregman divergence of
    sum K q(beta / K) about beta0 (zero with zero gradient at beta = beta0)."""
    beta = np.asarray(beta, dtype=float)
    beta0 = np.asarray(beta0, dtype=float)
    k = np.asarray(k, dtype=float)
    phi0 = np.arcsinh(beta0 / k)
    value = k * q_function(beta / k) - k * q_function(beta0 / k) - phi0 * (beta - beta0)
    return np.sum(value, axis=-1)


def woodworth_q(beta: np.ndarray, alpha_w: np.ndarray) -> np.ndarray:
    """Woodworth et al. (2020)'s tied regularizer alpha^2 sum q_W(beta / alpha^2),
    q_W(z) = 2 - sqrt(4 + z^2) + z asinh(z / 2)."""
    a2 = np.asarray(alpha_w, dtype=float) ** 2
    z = np.asarray(beta, dtype=float) / a2
    return np.sum(a2 * (2 - np.sqrt(4 + z**2) + z * np.arcsinh(z / 2)), axis=-1)


def normalized_q_shape(b: np.ndarray, m: float) -> np.ndarray:
    """Q_m(b) / Q_m(1) for the scalar regularizer m q(b/m) (App. E: |b| as m -> 0, b^2 as
    m -> infinity)."""
    return m * q_function(np.asarray(b) / m) / (m * q_function(1.0 / m))


def kkt_residual(X: np.ndarray, grad: np.ndarray) -> float:
    """Relative distance of grad Q(beta) from range(X^T): ||P_perp grad|| / ||grad||.

    Zero at the constrained minimizer of Q (Lagrange condition); ~1 for a generic point.
    """
    X = np.asarray(X, dtype=float)
    grad = np.asarray(grad, dtype=float)
    coef = np.linalg.lstsq(X.T, grad, rcond=None)[0]
    return float(np.linalg.norm(grad - X.T @ coef) / max(np.linalg.norm(grad), 1e-300))  # type: ignore[operator]  # max of a numpy floating and a float


@dataclass
class QMinResult:
    """min Q s.t. X beta = y, from the dual: beta = K sinh(X^T nu + phi0)."""

    beta: np.ndarray
    nu: np.ndarray
    iterations: int
    residual: float  # ||X beta - y|| / ||y||
    converged: bool


def q_minimizer(
    X: np.ndarray,
    y: np.ndarray,
    k: np.ndarray,
    beta0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 500,
    max_exponent_step: float = 5.0,
) -> QMinResult:
    """argmin Q(beta) s.t. X beta = y by damped Newton on the smooth dual in n variables.

    KKT of Theorem 1 (App. A): grad Q(beta) = asinh(beta/K) - phi0 = X^T nu, phi0 = asinh(beta0/K),
    so beta(nu) = K sinh(X^T nu + phi0) and nu minimizes the strictly convex dual
    Phi(nu) = sum_i K_i cosh((X^T nu)_i + phi0_i) - y^T nu, whose gradient is X beta(nu) - y.
    Safeguarded Newton with Armijo backtracking: a few dozen steps even for K ~ 1e-30.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    k = np.broadcast_to(np.asarray(k, dtype=float), (d,))
    phi0 = np.zeros(d) if beta0 is None else np.arcsinh(np.asarray(beta0, dtype=float) / k)
    y_norm = max(np.linalg.norm(y), 1e-300)

    def dual(nu):
        z = X.T @ nu + phi0
        with np.errstate(over="ignore"):  # an overflowing trial step is rejected below
            return float(np.sum(k * np.cosh(z)) - y @ nu), z

    nu = np.zeros(n)
    phi, z = dual(nu)
    converged = False
    iterations = 0
    best = np.inf
    stalled = 0
    quadratic = False
    for _ in range(max_iter):
        iterations += 1
        beta = k * np.sinh(z)
        grad = X @ beta - y
        gnorm = float(np.linalg.norm(grad))
        if gnorm <= tol * y_norm:  # type: ignore[operator]  # y_norm is max of a numpy floating and a float
            converged = True
            break
        if quadratic:  # full Newton steps that stop shrinking the gradient: rounding floor
            stalled = stalled + 1 if gnorm >= 0.5 * best else 0
            if stalled >= 3:
                break
        best = min(best, gnorm)
        hess = (X * (k * np.cosh(z))) @ X.T
        try:
            step = -np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(hess, grad, rcond=None)[0]
        # Safeguard: move any exponent (X^T nu)_i by at most max_exponent_step per iteration
        # (for tiny K the raw Newton step is ~1/K long; log(1/K) / 5 safeguarded steps reach
        # the right exponents instead).
        dz = float(np.max(np.abs(X.T @ step)))
        if dz > max_exponent_step:
            step *= max_exponent_step / dz
        slope = float(grad @ step)
        t = 1.0
        # Armijo backtracking, except in the quadratic phase where the predicted decrease is
        # below the rounding of Phi and the full Newton step is taken.
        quadratic = -slope <= 1e-12 * max(1.0, abs(phi))
        if not quadratic:
            while t >= 1e-12:
                new_phi, new_z = dual(nu + t * step)
                if np.isfinite(new_phi) and new_phi <= phi + 1e-4 * t * slope:
                    break
                t *= 0.5
            if t < 1e-12:
                break
        else:
            new_phi, new_z = dual(nu + step)
        nu, phi, z = nu + t * step, new_phi, new_z
    beta = k * np.sinh(z)
    residual = float(np.linalg.norm(X @ beta - y) / y_norm)  # type: ignore[operator]  # y_norm is max of a numpy floating and a float
    return QMinResult(beta, nu, iterations, residual, converged or residual <= 1e3 * tol)


def l1_dual(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dual of basis pursuit min ||b||_1 s.t. X b = y (the rich limit m -> 0 of Theorem 1,
    App. E): max y^T nu s.t. ||X^T nu||_inf <= 1, solved with HiGHS (scipy's linprog).

    Returns nu and the dual slacks 1 - |X^T nu|_j (>= 0; zero on the L1 solution's support).
    Why they matter: Q's minimizer is beta = m sinh(X^T nu_m) with nu_m ~ log(2/m) nu, so an
    off-support coordinate is |beta_j| ~ C_j (m/2)^{slack_j}: the slacks set how fast each
    coordinate vanishes as m -> 0.
    """
    from scipy.optimize import linprog

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    a_ub = np.vstack([X.T, -X.T])
    res = linprog(-y, A_ub=a_ub, b_ub=np.ones(2 * X.shape[1]), bounds=(None, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"l1_dual: linprog failed: {res.message}")
    nu = np.asarray(res.x, dtype=float)
    return nu, np.maximum(1.0 - np.abs(X.T @ nu), 0.0)


def q_minimizer_cvxpy(
    X: np.ndarray, y: np.ndarray, m: np.ndarray, solver: str = "CLARABEL", **solver_options
):
    """Independent primal cross-check of `q_minimizer` (unbiased case) with a generic solver.

    m q(beta/m) = min { A log(2A/m) + B log(2B/m) - A - B + m : A - B = beta, A B >= m^2/4 }
    (at the optimum A, B = (sqrt(beta^2 + m^2) +- beta) / 2), which is DCP: entropies and a
    geometric mean. `solver_options` go to the solver (e.g. tighter tolerances). Returns
    `implicit_bias.models.convex.ConvexSolution`.
    """
    import cvxpy as cp

    from .convex import ConvexSolution

    X = np.asarray(X, dtype=float)
    d = X.shape[1]
    m = np.broadcast_to(np.asarray(m, dtype=float), (d,))
    a = cp.Variable(d, nonneg=True)
    b = cp.Variable(d, nonneg=True)
    log_c = np.log(2.0 / m)
    obj = cp.sum(-cp.entr(a) - cp.entr(b)) + (a + b) @ (log_c - 1.0) + float(np.sum(m))
    cons = [X @ (a - b) == np.asarray(y, dtype=float)]
    cons += [cp.geo_mean(cp.hstack([a[i], b[i]])) >= m[i] / 2 for i in range(d)]
    problem = cp.Problem(cp.Minimize(obj), cons)
    try:
        problem.solve(solver=solver, **solver_options)
    except cp.error.SolverError as err:
        return ConvexSolution(None, f"solver_error: {err}", float("nan"), solver)
    x = None if a.value is None else np.asarray(a.value - b.value, dtype=float)
    value = float(problem.value) if problem.value is not None else float("nan")
    return ConvexSolution(x, str(problem.status), value, solver)


# ----------------------------------------------------------------------------------------------
# Training: gradient descent (batched) and gradient flow (check)
# ----------------------------------------------------------------------------------------------


def _gradients(X: torch.Tensor, y: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """g = X^T (X beta - y) / n for each row of beta (shape (B, d))."""
    return (beta @ X.T - y) @ X / X.shape[0]


def _velocity(params: DiagonalParams, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """-grad L in parameter space: u+' = -g v+, v+' = -g u+, u-' = g v-, v-' = g u-."""
    return (-g * params.v_plus, -g * params.u_plus, g * params.v_minus, g * params.u_minus)


def curvature_bound(X: torch.Tensor) -> float:
    """lambda_max(X^T X / n): the loss curvature in beta-space."""
    return float(torch.linalg.matrix_norm(X, ord=2) ** 2 / X.shape[0])


def stable_steps(
    X: torch.Tensor, params: DiagonalParams, beta_bound: float, rel_step: float
) -> torch.Tensor:
    """Per-run step sizes rel_step / (lambda_max * 2 (max_i M_i + beta_bound)).

    Along the flow the parameter-space Gauss-Newton curvature is lambda_max * max_i (u+^2 + v+^2
    + u-^2 + v-^2) = lambda_max * max_i 2 sqrt(K_i^2 + beta_i^2); `beta_bound` bounds |beta_i|.
    rel_step = 1 is at the stability edge; the GD-vs-flow bias is proportional to rel_step.
    """
    big_m = sum(t**2 for t in params.tensors()).amax(dim=1) / 2  # type: ignore[union-attr]  # sum of tensors is a tensor, not the start value 0
    return rel_step / (curvature_bound(X) * 2 * (big_m + beta_bound))


@dataclass
class TrainResult:
    beta: torch.Tensor  # (B, d) final predictors
    steps: torch.Tensor  # (B,) steps taken (int64)
    residual: torch.Tensor  # (B,) ||X beta - y|| / ||y||
    converged: torch.Tensor  # (B,) bool


def gradient_descent(
    X: torch.Tensor,
    y: torch.Tensor,
    params: DiagonalParams,
    steps: torch.Tensor,
    tol: float = 1e-10,
    max_steps: int = 100_000,
    check_every: int = 100,
) -> TrainResult:
    """Full-batch gradient descent on L = ||X beta - y||^2 / (2n), batched over B runs.

    `steps` (shape (B,)) holds each run's step size. Every `check_every` steps, runs whose
    relative residual is below `tol` are frozen and dropped from the batch (so a grid with a
    few slow runs costs what those runs cost). Works on any device/dtype of X.
    """
    p = [t.to(X).clone() for t in params.tensors()]
    n_runs = p[0].shape[0]
    device = X.device
    eta = steps.reshape(-1, 1).to(X)
    y_norm = torch.linalg.vector_norm(y).clamp_min(1e-300)
    active = torch.arange(n_runs, device=device)
    taken = torch.zeros(n_runs, dtype=torch.int64, device=device)
    out = [t.clone() for t in p]
    done = 0
    cur = [t for t in p]  # updated in place: the clones above are this function's own
    cur_eta = eta
    n = X.shape[0]
    xt = X.T
    while active.numel() > 0 and done < max_steps:
        chunk = min(check_every, max_steps - done)
        # The step of `_gradients` and `_velocity` written into preallocated buffers: the same
        # operations in the same order (so the same numbers), without a fresh tensor per
        # operation and step.
        up, vp, um, vm = cur
        beta, tmp, g = (torch.empty_like(up) for _ in range(3))
        resid = torch.empty(up.shape[0], n, dtype=up.dtype, device=up.device)
        for _ in range(chunk):
            torch.mul(up, vp, out=beta)
            beta.sub_(torch.mul(um, vm, out=tmp))  # beta = u+ v+ - u- v-
            torch.mm(beta, xt, out=resid).sub_(y)  # X beta - y
            torch.mm(resid, X, out=g).div_(n).mul_(cur_eta)  # eta X^T (X beta - y) / n
            torch.mul(g, vp, out=tmp)
            vp.sub_(torch.mul(g, up, out=beta))  # v+ - g u+ (u+ before its update)
            up.sub_(tmp)  # u+ - g v+
            torch.mul(g, vm, out=tmp)
            vm.add_(torch.mul(g, um, out=beta))  # v- + g u-
            um.add_(tmp)  # u- + g v-
        done += chunk
        taken[active] += chunk
        beta = cur[0] * cur[1] - cur[2] * cur[3]
        res = torch.linalg.vector_norm(beta @ X.T - y, dim=1) / y_norm
        finished = (res <= tol) | ~torch.isfinite(res)
        for o, c in zip(out, cur):
            o[active] = c
        if finished.any():
            keep = ~finished
            active = active[keep]
            cur = [c[keep] for c in cur]
            cur_eta = cur_eta[keep]
    final = DiagonalParams(*out)
    beta = final.predictor()
    res = torch.linalg.vector_norm(beta @ X.T - y, dim=1) / y_norm
    return TrainResult(beta, taken, res, res <= tol)


def gradient_flow(
    X: np.ndarray,
    y: np.ndarray,
    params: DiagonalParams,
    tol: float = 1e-9,
    kkt_tol: float = 1e-9,
    t_chunk: float = 50.0,
    max_chunks: int = 200,
    rtol: float = 1e-12,
    atol: float = 1e-15,
) -> TrainResult:
    """Gradient flow theta' = -grad L for each run, integrated with scipy's DOP853 (a check of
    Theorem 1 on small problems: no step-size bias), in chunks of time `t_chunk`.

    A run stops when the state satisfies both optimality conditions of Theorem 1's program
    (App. A form, K and beta0 of the run's initialization): primal feasibility,
    ||X beta - y|| / ||y|| <= tol, and stationarity, `kkt_residual(X, grad Q(beta))` <= kkt_tol
    with grad Q(beta) = asinh(beta / K) - asinh(beta0 / K). A run that has not met them after
    `max_chunks` chunks is reported unconverged (`converged` False); nothing else stops it.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    y_norm = max(np.linalg.norm(y), 1e-300)
    k_all, beta0_all = (t.detach().cpu().double().numpy() for t in params.effective_scale())
    betas, steps, residuals, done = [], [], [], []
    for b in range(params.u_plus.shape[0]):
        state = np.concatenate([t[b].detach().cpu().double().numpy() for t in params.tensors()])
        k, phi0 = k_all[b], np.arcsinh(beta0_all[b] / k_all[b])

        def rhs(_t, w):
            up, vp, um, vm = w.reshape(4, d)
            g = X.T @ (X @ (up * vp - um * vm) - y) / n
            return np.concatenate([-g * vp, -g * up, g * vm, g * um])

        nfev = 0
        optimal = False
        for _ in range(max_chunks):
            sol = solve_ivp(rhs, (0.0, t_chunk), state, method="DOP853", rtol=rtol, atol=atol)
            state = sol.y[:, -1]
            nfev += sol.nfev
            up, vp, um, vm = state.reshape(4, d)
            beta = up * vp - um * vm
            res = np.linalg.norm(X @ beta - y) / y_norm  # type: ignore[operator]  # y_norm is max of a numpy floating and a float
            if res <= tol and kkt_residual(X, np.arcsinh(beta / k) - phi0) <= kkt_tol:
                optimal = True
                break
        betas.append(beta)
        steps.append(nfev)
        residuals.append(res)
        done.append(optimal)
    return TrainResult(
        torch.tensor(np.array(betas)),
        torch.tensor(steps),
        torch.tensor(residuals, dtype=torch.float64),
        torch.tensor(done),
    )


def tied_gradient_descent(
    X: torch.Tensor,
    y: torch.Tensor,
    alpha_w: torch.Tensor,
    step: float,
    tol: float = 1e-10,
    max_steps: int = 100_000,
) -> torch.Tensor:
    """Woodworth et al.'s tied model beta = w+^2 - w-^2, w+(0) = w-(0) = alpha_w (shape (B, d)),
    trained directly in its own parametrization (an independent implementation)."""
    wp, wm = alpha_w.clone(), alpha_w.clone()
    y_norm = torch.linalg.vector_norm(y)
    for i in range(max_steps):
        g = _gradients(X, y, wp**2 - wm**2)
        wp, wm = wp - 2 * step * g * wp, wm + 2 * step * g * wm
        if i % 100 == 0:
            res = torch.linalg.vector_norm((wp**2 - wm**2) @ X.T - y, dim=1) / y_norm
            if bool((res <= tol).all()):
                break
    return wp**2 - wm**2


# ----------------------------------------------------------------------------------------------
# Data (Woodworth et al. 2020's sparse regression, Azulay Sec. 9) and metrics
# ----------------------------------------------------------------------------------------------


def sparse_regression_data(
    n: int, d: int, r_star: int, noise_var: float = 0.01, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ~ N(0, I_d), beta* r*-sparse with nonzero entries 1/sqrt(r*) (||beta*|| = 1),
    y = <beta*, x> + N(0, noise_var) (Sec. 9 after Woodworth et al. 2020). Returns X, y, beta*.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    beta_star = np.zeros(d)
    beta_star[:r_star] = 1.0 / np.sqrt(r_star)
    y = X @ beta_star + np.sqrt(noise_var) * rng.standard_normal(n)
    return X, y, beta_star


def population_error(beta, beta_star):
    """E_x[(<beta - beta*, x>)^2] = ||beta - beta*||^2 for x ~ N(0, I) (excess test error)."""
    diff = np.asarray(beta, dtype=float) - np.asarray(beta_star, dtype=float)
    return np.sum(diff**2, axis=-1)


def relative_distance(a, b):
    """||a - b|| / ||b|| over the last axis."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.linalg.norm(a - b, axis=-1) / np.maximum(np.linalg.norm(b, axis=-1), 1e-300)


# ----------------------------------------------------------------------------------------------
# The initializations of the Theorem 1 check
# ----------------------------------------------------------------------------------------------

THEOREM1_INITS = ("random", "small", "large", "unbalanced", "v0_zero", "biased")


def theorem1_inits(d: int, rng: np.random.Generator) -> DiagonalParams:
    """The initializations of the Theorem 1 check, one row each (names in THEOREM1_INITS):
    random per-coordinate u0, v0 ~ U(0.1, 1); small (0.03 U(0.5, 1)); large (x 3); unbalanced
    (u0 ~ 3 U, v0 ~ 1e-3 U: shape ~ 3e3); v0 = 0 (infinite shape); and a biased one with four
    independent vectors (Appendix A's general result, beta(0) != 0)."""

    def unif(lo, hi):
        return torch.tensor(rng.uniform(lo, hi, (1, d)), dtype=torch.float64)

    rows = [
        unbiased_init(unif(0.1, 1), unif(0.1, 1)),
        unbiased_init(0.03 * unif(0.5, 1), 0.03 * unif(0.5, 1)),
        unbiased_init(3 * unif(0.5, 1), 3 * unif(0.5, 1)),
        unbiased_init(3 * unif(0.5, 1), 1e-3 * unif(0.5, 1)),
        unbiased_init(unif(0.1, 1), torch.zeros(1, d, dtype=torch.float64)),
        DiagonalParams(unif(0.1, 1), unif(0.1, 1), unif(0.1, 1), unif(0.1, 1)),
    ]
    return DiagonalParams(
        *(
            torch.cat([getattr(r, f) for r in rows])
            for f in ("u_plus", "v_plus", "u_minus", "v_minus")
        )
    )
