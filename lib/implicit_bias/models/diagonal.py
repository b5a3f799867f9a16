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
cvxpy primal cross-check) run in float64 numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
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


def q_function(z: np.ndarray) -> np.ndarray:
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


def kkt_residual(X: np.ndarray, grad: np.ndarray) -> float:
    """Relative distance of grad Q(beta) from range(X^T): ||P_perp grad|| / ||grad||.

    Zero at the constrained minimizer of Q (Lagrange condition); ~1 for a generic point.
    """
    X = np.asarray(X, dtype=float)
    grad = np.asarray(grad, dtype=float)
    coef = np.linalg.lstsq(X.T, grad, rcond=None)[0]
    return float(np.linalg.norm(grad - X.T @ coef) / max(np.linalg.norm(grad), 1e-300))


@dataclass
class QMinResult:
    """min Q s.t. X beta = y, from the dual: beta = K sinh(X^T nu + phi0)."""

    beta: np.ndarray
    nu: np.ndarray
    iterations: int
    residual: float  # ||X beta - y|| / ||y||
    converged: bool


def q_minimizer(X: np.ndarray, y: np.ndarray, k: np.ndarray, beta0: np.ndarray | None = None,
                tol: float = 1e-12, max_iter: int = 500,
                max_exponent_step: float = 5.0) -> QMinResult:
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
        if gnorm <= tol * y_norm:
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
    residual = float(np.linalg.norm(X @ beta - y) / y_norm)
    return QMinResult(beta, nu, iterations, residual, converged or residual <= 1e3 * tol)


def q_minimizer_cvxpy(X: np.ndarray, y: np.ndarray, m: np.ndarray, solver: str = "CLARABEL",
                      **solver_options):
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
    obj = (cp.sum(-cp.entr(a) - cp.entr(b)) + (a + b) @ (log_c - 1.0) + float(np.sum(m)))
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


def stable_steps(X: torch.Tensor, params: DiagonalParams, beta_bound: float,
                 rel_step: float) -> torch.Tensor:
    """Per-run step sizes rel_step / (lambda_max * 2 (max_i M_i + beta_bound)).

    Along the flow the parameter-space Gauss-Newton curvature is lambda_max * max_i (u+^2 + v+^2
    + u-^2 + v-^2) = lambda_max * max_i 2 sqrt(K_i^2 + beta_i^2); `beta_bound` bounds |beta_i|.
    rel_step = 1 is at the stability edge; the GD-vs-flow bias is proportional to rel_step.
    """
    big_m = sum(t**2 for t in params.tensors()).amax(dim=1) / 2
    return rel_step / (curvature_bound(X) * 2 * (big_m + beta_bound))


@dataclass
class TrainResult:
    beta: torch.Tensor        # (B, d) final predictors
    steps: torch.Tensor       # (B,) steps taken (int64)
    residual: torch.Tensor    # (B,) ||X beta - y|| / ||y||
    converged: torch.Tensor   # (B,) bool


def gradient_descent(X: torch.Tensor, y: torch.Tensor, params: DiagonalParams,
                     steps: torch.Tensor, tol: float = 1e-10, max_steps: int = 100_000,
                     check_every: int = 100) -> TrainResult:
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
    cur = [t for t in p]
    cur_eta = eta
    while active.numel() > 0 and done < max_steps:
        chunk = min(check_every, max_steps - done)
        for _ in range(chunk):
            beta = cur[0] * cur[1] - cur[2] * cur[3]
            g = _gradients(X, y, beta) * cur_eta
            up, vp, um, vm = cur
            cur = [up - g * vp, vp - g * up, um + g * vm, vm + g * um]
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


def gradient_flow(X: np.ndarray, y: np.ndarray, params: DiagonalParams, tol: float = 1e-12,
                  t_chunk: float = 50.0, max_chunks: int = 200, rtol: float = 1e-12,
                  atol: float = 1e-15) -> TrainResult:
    """Gradient flow theta' = -grad L for each run, integrated with scipy's DOP853 (a check of
    Theorem 1 on small problems: no step-size bias). Integrates in chunks of time until the
    relative residual is below `tol`.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    y_norm = max(np.linalg.norm(y), 1e-300)
    betas, steps, residuals = [], [], []
    for b in range(params.u_plus.shape[0]):
        state = np.concatenate([t[b].detach().cpu().double().numpy() for t in params.tensors()])

        def rhs(_t, w):
            up, vp, um, vm = w.reshape(4, d)
            g = X.T @ (X @ (up * vp - um * vm) - y) / n
            return np.concatenate([-g * vp, -g * up, g * vm, g * um])

        nfev = 0
        last = np.inf
        for _ in range(max_chunks):
            sol = solve_ivp(rhs, (0.0, t_chunk), state, method="DOP853", rtol=rtol, atol=atol)
            state = sol.y[:, -1]
            nfev += sol.nfev
            up, vp, um, vm = state.reshape(4, d)
            beta = up * vp - um * vm
            res = np.linalg.norm(X @ beta - y) / y_norm
            # Done, or at the integrator's accuracy floor (the residual stopped shrinking).
            if res <= tol or res > 0.5 * last:
                break
            last = res
        betas.append(beta)
        steps.append(nfev)
        residuals.append(np.linalg.norm(X @ beta - y) / y_norm)
    res = torch.tensor(residuals, dtype=torch.float64)
    return TrainResult(torch.tensor(np.array(betas)), torch.tensor(steps), res, res <= tol)


def tied_gradient_descent(X: torch.Tensor, y: torch.Tensor, alpha_w: torch.Tensor, step: float,
                          tol: float = 1e-10, max_steps: int = 100_000) -> torch.Tensor:
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


def sparse_regression_data(n: int, d: int, r_star: int, noise_var: float = 0.01,
                           seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
# Experiments (one sweep task each: JSON in, JSON out)
# ----------------------------------------------------------------------------------------------

THEOREM1_INITS = ("random", "small", "large", "unbalanced", "v0_zero", "biased")


def theorem1_inits(d: int, rng: np.random.Generator) -> DiagonalParams:
    """The initializations of the Theorem 1 check, one row each (names in THEOREM1_INITS):
    random per-coordinate u0, v0 ~ U(0.1, 1); small (0.03 U(0.5, 1)); large (x 3); unbalanced
    (u0 ~ 3 U, v0 ~ 1e-3 U: shape ~ 3e3); v0 = 0 (infinite shape); and a biased one with four
    independent vectors (Appendix A's general result, beta(0) != 0)."""
    def unif(lo, hi):
        return torch.tensor(rng.uniform(lo, hi, (1, d)), dtype=torch.float64)

    rows = [unbiased_init(unif(0.1, 1), unif(0.1, 1)),
            unbiased_init(0.03 * unif(0.5, 1), 0.03 * unif(0.5, 1)),
            unbiased_init(3 * unif(0.5, 1), 3 * unif(0.5, 1)),
            unbiased_init(3 * unif(0.5, 1), 1e-3 * unif(0.5, 1)),
            unbiased_init(unif(0.1, 1), torch.zeros(1, d, dtype=torch.float64)),
            DiagonalParams(unif(0.1, 1), unif(0.1, 1), unif(0.1, 1), unif(0.1, 1))]
    return DiagonalParams(*(torch.cat([getattr(r, f) for r in rows]) for f in
                            ("u_plus", "v_plus", "u_minus", "v_minus")))


def theorem1_task(task: dict) -> dict:
    """Theorem 1 (and App. A) on a random regression (X, y ~ N(0, 1), n < d): distance of the
    GD limit (several step sizes) and of the gradient-flow limit to the Q-minimizer, of the
    Q-minimizers with a wrong scale (m/2, 2m, the control), and the tied (Woodworth) model.

    task: n, d, seed, rel_steps (decreasing), tol, max_steps, gradient_flow (bool), device.
    """
    rng = np.random.default_rng(task["seed"])
    n, d = task["n"], task["d"]
    X = rng.standard_normal((n, d))
    y = rng.standard_normal(n)
    device = torch.device(task.get("device", "cpu"))
    Xt = torch.tensor(X, device=device)
    yt = torch.tensor(y, device=device)
    params = theorem1_inits(d, rng)
    k, beta0 = (t.cpu().numpy() for t in params.effective_scale())
    qmins = [q_minimizer(X, y, k[b], beta0[b]) for b in range(len(THEOREM1_INITS))]
    q_beta = np.array([q.beta for q in qmins])
    beta_bound = 3 * float(np.abs(np.linalg.pinv(X) @ y).max())
    out: dict = {"inits": list(THEOREM1_INITS), "rel_steps": task["rel_steps"],
                 "qmin_kkt": [kkt_residual(X, np.arcsinh(q.beta / k[b])
                                           - np.arcsinh(beta0[b] / k[b]))
                              for b, q in enumerate(qmins)],
                 "qmin_residual": [q.residual for q in qmins],
                 "gd_error": [], "gd_steps": [], "gd_converged": []}
    for rel in task["rel_steps"]:
        steps = stable_steps(Xt, params.to(device), beta_bound, rel)
        res = gradient_descent(Xt, yt, params.to(device), steps, tol=task["tol"],
                               max_steps=task["max_steps"])
        beta = res.beta.cpu().numpy()
        out["gd_error"].append(relative_distance(beta, q_beta).tolist())
        out["gd_steps"].append(res.steps.cpu().tolist())
        out["gd_converged"].append(res.converged.cpu().tolist())
    # Kernel regime (Sec. 7.1, App. E): for m_i >> |beta_i| the limit is the RKHS-norm
    # interpolator of the tangent kernel 2 x^T diag(m) x', i.e. min-L2 weighted by m (an
    # unweighted min-L2 is the wrong kernel when m varies across coordinates).
    from .convex import min_l2_interpolator

    plain = min_l2_interpolator(X, y).x
    out["dist_weighted_l2"] = [float(relative_distance(
        beta[b], min_l2_interpolator(X, y, weights=k[b]).x)) for b in range(len(k))]
    out["dist_plain_l2"] = [float(relative_distance(beta[b], plain)) for b in range(len(k))]
    # Control: the same program with the scale off by 2 either way must miss the GD limit.
    for name, factor in (("wrong_half", 0.5), ("wrong_double", 2.0)):
        out[name] = [float(relative_distance(beta[b], q_minimizer(X, y, factor * k[b],
                                                                  beta0[b]).beta))
                     for b in range(len(THEOREM1_INITS))]
    if task.get("gradient_flow", True):
        flow = gradient_flow(X, y, params, tol=task["tol"])
        out["gf_error"] = relative_distance(flow.beta.numpy(), q_beta).tolist()
    # Woodworth et al.'s tied model, trained in its own parametrization: m = 2 alpha_w^2.
    alpha_w = torch.tensor(rng.uniform(0.05, 0.5, (1, d)), dtype=torch.float64)
    eta = task["rel_steps"][-1] / (curvature_bound(Xt) * 4 * (float(alpha_w.max()) ** 2
                                                              + beta_bound))
    tied = tied_gradient_descent(Xt, yt, alpha_w.to(device), eta, tol=task["tol"],
                                 max_steps=task["max_steps"])
    tied_q = q_minimizer(X, y, 2 * alpha_w[0].numpy() ** 2).beta
    out["tied_error"] = float(relative_distance(tied[0].cpu().numpy(), tied_q))
    return out


def scale_shape_task(task: dict) -> dict:
    """Gradient descent from uniform unbiased initializations at the (alpha, s) points of the
    task, on Woodworth et al.'s sparse regression (Sec. 9), batched in one tensor program.

    Returns per point: population error of the GD limit and of Theorem 1's Q-minimizer
    (m = alpha (s + 1/s)), relative distances GD-to-Q, GD-to-min-L1, GD-to-min-L2, steps and
    convergence; plus the population errors of the min-L1 and min-L2 interpolators.
    task: n, d, r_star, noise_var, seed, points [[alpha, s], ...], rel_step, beta_bound, tol,
    max_steps, device, and optionally extra_m (Q-minimizers only, their distances to min-L1/L2).
    """
    from .convex import min_l1_interpolator, min_l2_interpolator

    X, y, beta_star = sparse_regression_data(task["n"], task["d"], task["r_star"],
                                             task["noise_var"], task["seed"])
    device = torch.device(task.get("device", "cpu"))
    Xt = torch.tensor(X, device=device)
    yt = torch.tensor(y, device=device)
    pts = np.array(task["points"], dtype=float)
    alpha = torch.tensor(pts[:, 0], dtype=torch.float64, device=device)
    shape = torch.tensor(pts[:, 1], dtype=torch.float64, device=device)
    params = scale_shape_init(alpha, shape, task["d"])
    steps = stable_steps(Xt, params, task["beta_bound"], task["rel_step"])
    res = gradient_descent(Xt, yt, params, steps, tol=task["tol"], max_steps=task["max_steps"],
                           check_every=200)
    beta = res.beta.cpu().numpy()
    m = m_from_scale_shape(pts[:, 0], pts[:, 1])
    q_beta = np.array([q_minimizer(X, y, mi).beta for mi in m])
    l1 = min_l1_interpolator(X, y)
    l2 = min_l2_interpolator(X, y)
    # Theorem 1's prediction at scales m far beyond gradient descent's reach (optional).
    extra = [q_minimizer(X, y, mi).beta for mi in task.get("extra_m", [])]
    return {"extra_m": task.get("extra_m", []),
            "extra_m_dist_l1": [float(relative_distance(b, l1.x)) for b in extra],
            "extra_m_dist_l2": [float(relative_distance(b, l2.x)) for b in extra],
            "alpha": pts[:, 0].tolist(), "shape": pts[:, 1].tolist(), "m": m.tolist(),
            "pop_error_gd": population_error(beta, beta_star).tolist(),
            "pop_error_q": population_error(q_beta, beta_star).tolist(),
            "gd_vs_q": relative_distance(beta, q_beta).tolist(),
            "dist_l1": relative_distance(beta, l1.x).tolist(),
            "dist_l2": relative_distance(beta, l2.x).tolist(),
            "steps": res.steps.cpu().tolist(), "converged": res.converged.cpu().tolist(),
            "pop_error_l1": float(population_error(l1.x, beta_star)), "l1_status": l1.status,
            "pop_error_l2": float(population_error(l2.x, beta_star))}


# ----------------------------------------------------------------------------------------------
# Summaries (metrics and tables the chapter shows)
# ----------------------------------------------------------------------------------------------


def log_grid(spec) -> np.ndarray:
    """10 ** linspace(start, stop, num) from a profile's [start, stop, num]."""
    start, stop, num = spec
    return 10.0 ** np.linspace(start, stop, int(num))


def step_slope(errors: np.ndarray, rel_steps) -> np.ndarray:
    """Least-squares slope of log(error) against log(step), per column of errors (steps, runs)."""
    x = np.log(np.asarray(rel_steps, dtype=float))
    ly = np.log(np.asarray(errors, dtype=float))
    x = x - x.mean()
    return (x @ (ly - ly.mean(axis=0))) / (x @ x)


def theorem1_frame(results: list[dict], seeds) -> pd.DataFrame:
    """One row per (seed, initialization) of `theorem1_task` results."""
    rows = []
    for seed, res in zip(seeds, results):
        gd = np.array(res["gd_error"])
        slopes = step_slope(gd, res["rel_steps"])
        for b, name in enumerate(res["inits"]):
            row = {"seed": seed, "init": name}
            row.update({f"gd_error_step_{s:g}": gd[i, b] for i, s in enumerate(res["rel_steps"])})
            row.update({"step_slope": slopes[b], "gf_error": res.get("gf_error", [np.nan] * 9)[b],
                        "wrong_half": res["wrong_half"][b], "wrong_double": res["wrong_double"][b],
                        "qmin_kkt": res["qmin_kkt"][b],
                        "dist_weighted_l2": res["dist_weighted_l2"][b],
                        "dist_plain_l2": res["dist_plain_l2"][b],
                        "gd_steps_smallest": res["gd_steps"][-1][b],
                        "gd_converged": all(c[b] for c in res["gd_converged"])})
            rows.append(row)
    return pd.DataFrame(rows)


def theorem1_metrics(frame: pd.DataFrame, results: list[dict]) -> dict:
    """The Theorem 1 claims' metrics from `theorem1_frame`."""
    smallest = [c for c in frame.columns if c.startswith("gd_error_step_")][-1]
    wrong = np.minimum(frame["wrong_half"], frame["wrong_double"])
    # kernel-regime rows (every m_i >> |beta_i|): large and unbalanced initializations
    ntk = frame[frame["init"].isin(["large", "unbalanced"])]
    ntk = ntk.assign(ratio=ntk["dist_weighted_l2"] / ntk["dist_plain_l2"])
    return {"thm1_gf_max_rel_error": float(frame["gf_error"].max()),
            "thm1_gd_max_rel_error": float(frame[smallest].max()),
            "thm1_step_slope_min": float(frame["step_slope"].min()),
            "thm1_step_slope_max": float(frame["step_slope"].max()),
            "thm1_wrong_scale_min_ratio": float((wrong / frame[smallest]).min()),
            "thm1_qmin_max_kkt": float(frame["qmin_kkt"].max()),
            "tied_rel_error": float(max(r["tied_error"] for r in results)),
            "thm1_ntk_weighted_over_plain_l2": float(ntk["ratio"].max())}


def scale_shape_frame(results: list[dict], seeds) -> pd.DataFrame:
    """Long table (seed, alpha, shape, ...) of `scale_shape_task` results."""
    keys = ("alpha", "shape", "m", "pop_error_gd", "pop_error_q", "gd_vs_q", "dist_l1",
            "dist_l2", "steps", "converged")
    frames = []
    for seed, res in zip(seeds, results):
        frame = pd.DataFrame({k: res[k] for k in keys})
        frame.insert(0, "seed", seed)
        frame["pop_error_l1"] = res["pop_error_l1"]
        frame["pop_error_l2"] = res["pop_error_l2"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def mirror_shapes(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the rows of shape 1/s from those of shape s > 1.

    Exact, not an approximation: swapping u and v leaves the model (beta = u v) and every
    gradient-descent update unchanged, so the run from (alpha, 1/s) is the run from (alpha, s)
    with the roles of u and v exchanged and yields the same predictor, bit for bit
    (`tests/test_diagonal.py` checks this).
    """
    mirrored = frame[frame["shape"] > 1].copy()
    mirrored["shape"] = 1.0 / mirrored["shape"]
    return (pd.concat([frame, mirrored], ignore_index=True)
            .sort_values(["seed", "alpha", "shape"], ignore_index=True))


def fig71_metrics(frame: pd.DataFrame, small_alpha_max: float) -> dict:
    """Fig. 7.1's claims: per data seed and small alpha (<= small_alpha_max), the population
    error is lowest at s = 1 and grows (within 1%) as log s moves away from 0 on both sides."""
    rel = (frame["pop_error_gd"] - frame["pop_error_q"]).abs() / frame["pop_error_q"]
    argmin_ok, drops, ratios = [], [], []
    for (_, alpha), row in frame.groupby(["seed", "alpha"]):
        if alpha > small_alpha_max * (1 + 1e-9):
            continue
        row = row.sort_values("shape")
        err = row["pop_error_gd"].to_numpy()
        log_s = np.log10(row["shape"].to_numpy())
        center = int(np.argmin(np.abs(log_s)))
        argmin_ok.append(int(np.argmin(err)) == center)
        for side in (err[center:], err[center::-1]):  # moving away from s = 1
            drops.append(float(np.max((side[:-1] - side[1:]) / side[:-1])))
            ratios.append(float(side[-1] / side[0]))
    return {"fig71_gd_vs_q_max_rel_pop_error": float(rel.max()),
            "fig71_small_alpha_rows_argmin_at_s1": float(np.mean(argmin_ok)),
            "fig71_max_relative_drop_away_from_s1": max(drops),
            "fig71_extreme_over_balanced_min_ratio": min(ratios)}


def normalized_q_shape(b: np.ndarray, m: float) -> np.ndarray:
    """Q_m(b) / Q_m(1) for the scalar regularizer m q(b/m) (App. E: |b| as m -> 0, b^2 as
    m -> infinity)."""
    return m * q_function(np.asarray(b) / m) / (m * q_function(1.0 / m))


def q_shape_frame(m_values, num: int = 201) -> pd.DataFrame:
    b = np.linspace(-1.5, 1.5, num)
    data = {"beta": b, "abs": np.abs(b), "square": b**2}
    data.update({f"m={m:g}": normalized_q_shape(b, m) for m in m_values})
    return pd.DataFrame(data)


def q_shape_metrics() -> dict:
    """Max deviation of the normalized Q_m from b^2 (m = 1e3) and |b| (m = 1e-12) on [-1, 1]."""
    b = np.linspace(-1.0, 1.0, 2001)
    return {"qm_max_dev_from_square_m1e3": float(np.max(np.abs(normalized_q_shape(b, 1e3)
                                                                - b**2))),
            "qm_max_dev_from_abs_m1e-12": float(np.max(np.abs(normalized_q_shape(b, 1e-12)
                                                               - np.abs(b))))}


def regimes_metrics(balanced: pd.DataFrame, unbalanced: pd.DataFrame,
                    results: list[dict]) -> dict:
    """Sec. 7.1 limits: along s = 1 (alpha grid) and at a tiny alpha (shape grid), per seed."""
    mono = all(np.all(np.diff(g.sort_values("alpha")["dist_l1"].to_numpy()) > 0)
               for _, g in balanced.groupby("seed"))
    top = balanced[balanced["alpha"] == balanced["alpha"].max()]
    far = unbalanced[unbalanced["shape"] == unbalanced["shape"].max()]
    return {"regimes_dist_l1_monotone": bool(mono),
            "regimes_large_alpha_dist_l2": float(top["dist_l2"].max()),
            "regimes_unbalanced_dist_l2": float(far["dist_l2"].max()),
            "regimes_qmin_tiny_m_dist_l1": float(max(max(r["extra_m_dist_l1"])
                                                     for r in results))}


# ----------------------------------------------------------------------------------------------
# Plots (axes in, nothing returned; the notebook makes the figure with implicit_bias.core.plotting)
# ----------------------------------------------------------------------------------------------


GF_ERROR_FLOOR = 1e-9  # above the gradient-flow round-off measured on every CPU (<= 1e-10)


def plot_theorem1(ax, frame: pd.DataFrame, palette) -> None:
    """GD limit's relative distance to argmin Q against the relative step, one line per init
    (seed 0), with the gradient-flow error as a marker at the left edge, drawn at no less than
    GF_ERROR_FLOOR: below it the error is the integrator's round-off (1e-14 to 1e-10, different
    on every CPU), which would otherwise set the axis and move the whole picture."""
    cols = [c for c in frame.columns if c.startswith("gd_error_step_")]
    steps = [float(c.removeprefix("gd_error_step_")) for c in cols]
    first = frame[frame["seed"] == frame["seed"].min()]
    for color, (_, row) in zip(palette, first.iterrows()):
        ax.loglog(steps, row[cols].to_numpy(float), "o-", color=color, label=row["init"])
        ax.loglog([min(steps) / 2], [max(row["gf_error"], GF_ERROR_FLOOR)], "s", color=color,
                  mfc="none")
    ax.axhline(GF_ERROR_FLOOR, color="0.6", lw=0.8, ls=":")
    ax.annotate("gradient flow: at or below this line", (min(steps) / 2, GF_ERROR_FLOOR),
                textcoords="offset points", xytext=(2, -9), fontsize=6, color="0.4")
    ax.set_xlabel("relative step size (1 = stability edge)")
    ax.set_ylabel(r"$\|\beta_{GD} - \beta_Q\| / \|\beta_Q\|$")
    ax.legend(fontsize=7, ncol=2, title="open squares: gradient flow", title_fontsize=7)


def plot_q_shape(ax, frame: pd.DataFrame, palette) -> None:
    """Normalized Q_m(b) / Q_m(1) for several m, with |b| and b^2 (App. E)."""
    ax.plot(frame["beta"], frame["abs"], "k--", lw=1, label=r"$|\beta|$")
    ax.plot(frame["beta"], frame["square"], "k:", lw=1, label=r"$\beta^2$")
    for color, col in zip(palette, [c for c in frame.columns if c.startswith("m=")]):
        ax.plot(frame["beta"], frame[col], color=color, label=col)
    ax.set_xlabel(r"$\beta$")
    ax.set_ylabel(r"$Q_m(\beta) / Q_m(1)$")
    ax.set_ylim(0, 2.3)
    ax.legend(fontsize=7)


def plot_distances(ax, frame: pd.DataFrame, x: str, palette, xlabel: str) -> None:
    """Relative distance of the GD limit to the min-L1 and min-L2 interpolators (mean over
    seeds) against scale or shape."""
    mean = frame.groupby(x)[["dist_l1", "dist_l2"]].mean().reset_index()
    ax.loglog(mean[x], mean["dist_l1"], "o-", color=palette[0], label="to min-$\\ell_1$")
    ax.loglog(mean[x], mean["dist_l2"], "s-", color=palette[1], label="to min-$\\ell_2$")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("relative distance")
    ax.legend(fontsize=7)


def fig71_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Population error (mean over data seeds) on the (alpha, s) grid, GD and Theorem 1."""
    return (frame.groupby(["alpha", "shape"])[["m", "pop_error_gd", "pop_error_q",
                                               "pop_error_l1", "pop_error_l2"]]
            .mean().reset_index())


def plot_fig71(fig, ax, table: pd.DataFrame) -> None:
    """Fig. 7.1: heatmap of the population error over log scale and log shape, s = 1 dashed."""
    grid = table.pivot(index="alpha", columns="shape", values="pop_error_gd")
    la, ls = np.log10(grid.index.to_numpy()), np.log10(grid.columns.to_numpy())

    def edges(v):
        h = (v[1] - v[0]) / 2 if len(v) > 1 else 0.5
        return np.concatenate([v - h, [v[-1] + h]])

    mesh = ax.pcolormesh(edges(ls), edges(la), grid.to_numpy(), cmap="viridis", shading="flat")
    fig.colorbar(mesh, ax=ax, label=r"population error $\|\beta - \beta^*\|^2$")
    ax.axvline(0.0, color="white", ls="--", lw=1.2, label="balanced, s = 1")
    ax.set_xlabel(r"shape $\log_{10} s$,  $s = |u_0 / v_0|$")
    ax.set_ylabel(r"scale $\log_{10} \alpha$,  $\alpha = |u_0 v_0|$")
    ax.legend(fontsize=7, loc="lower left")


def plot_collapse(ax, table: pd.DataFrame, palette) -> None:
    """Population error against m = alpha (s + 1/s): GD (dots) on Theorem 1's curve (line)."""
    t = table.sort_values("m")
    ax.semilogx(t["m"], t["pop_error_q"], "-", color=palette[1], label="Theorem 1 (argmin Q)")
    ax.semilogx(t["m"], t["pop_error_gd"], "o", ms=3, color=palette[0], label="gradient descent")
    ax.axhline(t["pop_error_l1"].iloc[0], color="k", ls="--", lw=1, label="min-$\\ell_1$")
    ax.axhline(t["pop_error_l2"].iloc[0], color="k", ls=":", lw=1, label="min-$\\ell_2$")
    ax.set_xlabel(r"$m = \alpha (s + 1/s)$")
    ax.set_ylabel("population error")
    ax.legend(fontsize=7)


def rich_limit_task(task: dict) -> dict:
    """Theorem 1's minimizer at tiny m on the Sec. 9 data: relative distance to min-L1 and
    dist * log(1/m) (constant if the approach is ~ 1/log(1/m), the rate of Q's entropy term).
    task: n, d, r_star, noise_var, seed, m_values."""
    from .convex import min_l1_interpolator

    X, y, _ = sparse_regression_data(task["n"], task["d"], task["r_star"], task["noise_var"],
                                     task["seed"])
    l1 = min_l1_interpolator(X, y).x
    rows = []
    for m in task["m_values"]:
        q = q_minimizer(X, y, m)
        dist = float(relative_distance(q.beta, l1))
        rows.append({"m": m, "dist_l1": dist, "dist_times_log_1_over_m": dist * np.log(1 / m),
                     "kkt": kkt_residual(X, grad_regularizer_q(q.beta, m)),
                     "residual": q.residual})
    return {"rows": rows}
