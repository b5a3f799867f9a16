"""What the theorems of Yun, Krishnan & Mobahi (2021) predict for linear tensor networks
(the networks and their training: `implicit_bias.models.tensor_networks`).

The l_{2/L} max-margin problems of Cor 1 / Thm 2 / Cor 2 / Cor 3 with their multipliers (an SVM,
an LP or an SOCP for L = 2, a stationary point by iteratively reweighted l1 for L > 2), h_L and
H_L of Lemma 4 / Thm 5, the Q_{L,alpha} interpolation minimizer of Thm 5 / Cor 5 / Cor 6, the
closed forms of Thm 3 and Thm 6 (single data point, 2 layers), and the pieces the chapter's
tasks compare them with: the reference direction of a classification run, the Q-limit of a
regression run, the single-point set-up and the 2-layer gradient descent and flow.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import cvxpy as cp
import numpy as np
from scipy import optimize, special

from .tensor_networks import data_tensor, dft_matrix, regression_data

# ----------------------------------------------------------------------------------------------
# Max-margin problems (Cor 1, Thm 2 / Cor 2, Cor 3)


def margin_normalized(X: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """z scaled so that its minimum margin min_i y_i x_i^T z is 1."""
    return z / np.min(y * (X @ z))


def max_margin_with_duals(
    X: np.ndarray,
    y: np.ndarray,
    norm: str,
    weights: np.ndarray | None = None,
    solver: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """argmin ||z|| s.t. y_i x_i^T z >= 1 and the constraints' multipliers nu >= 0 (see
    `max_margin_solve`, which also returns the solver's status)."""
    z, nu, _ = max_margin_solve(X, y, norm, weights, solver)
    return z, nu


# Clarabel ends the Fourier-l1 SOCP "optimal_inaccurate" on most of the chapter's problems
# (many cones at zero, a degenerate optimum); ECOS solves them "optimal".
SOLVERS = {"l2": "CLARABEL", "l1": "CLARABEL", "fourier_l1": "ECOS"}


def max_margin_solve(
    X: np.ndarray,
    y: np.ndarray,
    norm: str,
    weights: np.ndarray | None = None,
    solver: str | None = None,
) -> tuple[np.ndarray, np.ndarray, str]:
    """argmin ||z|| s.t. y_i x_i^T z >= 1, the constraints' multipliers nu >= 0 and the
    solver's status ("optimal" when it met its own stopping rule).

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
    with warnings.catch_warnings():  # an inaccurate solve is reported by its status
        warnings.simplefilter("ignore", UserWarning)
        problem.solve(solver=solver or SOLVERS[norm])
    if z.value is None:
        raise RuntimeError(f"max-margin ({norm}) failed: {problem.status}")
    return (
        np.asarray(z.value),
        np.maximum(np.asarray(margins.dual_value), 0.0),
        str(problem.status),
    )


def fourier_l1_max_margin(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ||F z||_1 s.t. y_i x_i^T z >= 1 (Cor 3 with L = 2)."""
    return max_margin_with_duals(X, y, "fourier_l1")[0]


# IRL1's stopping rule: a relative change of z ten times the convex solvers' own relative
# accuracy (1e-8), the floor below which successive solutions differ by solver round-off.
IRL1_TOL = 1e-7


def lp_stationary_point(
    X: np.ndarray,
    y: np.ndarray,
    L: int,
    z0: np.ndarray,
    fourier: bool = False,
    iters: int = 400,
    tol: float = IRL1_TOL,
) -> dict:
    """A stationary point of min ||T z||_{2/L} s.t. y_i x_i^T z >= 1 (Thm 2 / Cor 2 / Cor 3),
    T = I or the DFT F, by iteratively reweighted l1 (majorize-minimize of sum |T z|^{2/L},
    each step a weighted-l1 max-margin program) started from `z0` (e.g. GD's direction).

    The objective decreases monotonically and its limit points are stationary; started at a
    trained network's direction, it finds the stationary point GD is heading to (if any).
    Stopping rule: the relative change of z falls below `tol`, in a step whose convex program
    its solver solved to its own tolerance ("optimal"); `converged` says whether that happened
    within `iters` steps (a run stopped by the cap is unconverged). Returns z, the last step's
    multipliers nu, the objective sum |Tz|^{2/L} per iteration, the last relative change, the
    steps taken and `converged`.
    """
    d = X.shape[1]
    p = 2.0 / L
    T = dft_matrix(d) if fourier else np.eye(d)
    z_cur = margin_normalized(X, y, np.asarray(z0, dtype=float))
    objective = [float(np.sum(np.abs(T @ z_cur) ** p))]
    change, nu, converged, steps = float("nan"), np.zeros(len(y)), False, 0
    for steps in range(1, iters + 1):  # noqa: B007 - the count is returned
        mag = np.abs(T @ z_cur)
        eps = 1e-9 * mag.max()
        weights = ((mag + eps) / (mag.max() + eps)) ** (p - 1)  # gradient of |.|^p, rescaled
        z_new, nu, status = max_margin_solve(X, y, "fourier_l1" if fourier else "l1", weights)
        change = float(np.linalg.norm(z_new - z_cur) / np.linalg.norm(z_cur))
        z_cur = z_new
        objective.append(float(np.sum(np.abs(T @ z_cur) ** p)))
        if change < tol and status == "optimal":
            converged = True
            break
    return {
        "z": z_cur,
        "nu": nu,
        "objective": objective,
        "last_change": change,
        "iterations": steps,
        "converged": converged,
    }


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


# Relative Newton decrement below which `q_minimizer` takes full steps (quadratic convergence
# region; Armijo's test still resolves decreases of this size against float64 round-off).
PURE_NEWTON = 1e-10


def q_minimizer(
    X: np.ndarray,
    y: np.ndarray,
    L: int,
    scale: np.ndarray,
    weight: np.ndarray,
    max_iter: int = 500,
    tol: float = 1e-20,
) -> dict:
    """argmin sum_j weight_j H_L(z_j / scale_j) s.t. X z = y (Thm 5 / Cor 5 / Cor 6).

    Equality-constrained Newton's method with backtracking from X^+ y: the objective is smooth
    and strictly convex, its Hessian diagonal, so each step solves an n x n system. Once the
    Newton decrement is below `PURE_NEWTON` times the objective, the full step is taken without
    the line search: there the decrease is below what float64 values of the objective resolve,
    so backtracking halved every step away and stopped at a KKT residual of 1e-10..1e-8 that
    depended on the CPU's rounding; pure Newton converges quadratically there. Stops when the
    decrement falls below `tol` times the objective or stops falling (round-off): `converged`;
    a stalled line search or `max_iter` steps leave it False. Returns z, the iterations, the
    KKT residual ||P_null(grad Q)|| / ||grad Q|| and `converged`.
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

    it, previous, converged = 0, None, False
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is returned
        g, h = grad_hess(z)
        hinv = 1.0 / h
        # Newton step dz = -Hinv (g - X^T nu), with X dz = 0 (z stays feasible)
        A = (X * hinv) @ X.T
        nu = np.linalg.solve(A, X @ (hinv * g))
        dz = -hinv * (g - X.T @ nu)
        # lambda^2 = -g^T dz = dz^T H dz; the second form has no cancellation (-g^T dz hit a
        # floor of +-1e-16 and stopped the iteration at a KKT residual of 5e-10)
        decrement = float(dz @ (h * dz))
        f0 = objective(z)
        if decrement < tol * max(1.0, abs(f0)):
            converged = True
            break
        pure = decrement < PURE_NEWTON * max(1.0, abs(f0))
        step = 1.0
        if not pure:
            while objective(z + step * dz) > f0 - 0.25 * step * decrement and step > 1e-12:
                step *= 0.5
            if step <= 1e-12:  # no more progress at float64 resolution
                break
        elif previous is not None and decrement >= previous:  # round-off floor: no more progress
            converged = True  # quadratic convergence ended at float64's floor
            break
        previous = decrement if pure else None
        z = z + step * dz
        z = z - np.linalg.pinv(X) @ (X @ z - y)  # remove round-off drift from X z = y
    g, _ = grad_hess(z)
    proj = g - X.T @ np.linalg.lstsq(X.T, g, rcond=None)[0]
    kkt = float(np.linalg.norm(proj) / np.linalg.norm(g))
    return {"z": z, "iterations": it, "kkt_residual": kkt, "converged": converged}


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


def theorem6_limit(
    M: np.ndarray,
    y: float,
    v1bar: np.ndarray,
    v2bar: np.ndarray,
    alpha: float,
    as_printed: bool = False,
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
        return float(
            np.sum(s * ((a**2 + b**2) / 2 * np.sinh(2 * s * nu) + a * b * np.cosh(2 * s * nu)))
        )

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
# The references the chapter's tasks compare training with


def _reference_direction(
    arch: str, L: int, X: np.ndarray, y: np.ndarray, beta: np.ndarray
) -> tuple[str, np.ndarray, np.ndarray, dict]:
    """The direction the theorem predicts, its margin multipliers and how its solver ended
    (`status`: the convex solver's status, or "converged" / "unconverged" for reweighted l1,
    with its `last_change` and `iterations`): Cor 1 (fc: l2 SVM), Cor 2 with L = 2 (diag: l1
    LP), Cor 3 with L = 2 (conv: Fourier-l1 SOCP); for L > 2 (nonconvex l_{2/L}) the stationary
    point that iteratively reweighted l1 reaches from GD's own direction."""
    if arch == "fc" or L == 2:
        norm = "l2" if arch == "fc" else "l1" if arch == "diag" else "fourier_l1"
        name = {
            "l2": "l2 max-margin (SVM)",
            "l1": "l1 max-margin (LP)",
            "fourier_l1": "Fourier-l1 max-margin (SOCP)",
        }[norm]
        z, nu, status = max_margin_solve(X, y, norm)
        return name, z, nu, {"status": status, "last_change": None, "iterations": None}
    st = lp_stationary_point(X, y, L, beta, fourier=arch == "conv")
    info = {
        "status": "converged" if st["converged"] else "unconverged",
        "last_change": st["last_change"],
        "iterations": st["iterations"],
    }
    return f"stationary point of the l_(2/{L}) problem (IRL1 from GD)", st["z"], st["nu"], info


def q_limit_solution(
    X: np.ndarray,
    y: np.ndarray,
    arch: str,
    L: int,
    alpha: float,
    wbar: np.ndarray,
    variant: str = "derived",
) -> dict:
    """The Q_{L,alpha}-minimizer that Thm 5 predicts as GD's regression limit.

    ``diag`` (Cor 5): Q = alpha^2 sum wbar_j^2 H_L(z_j / (alpha^L |wbar_j|^L)); the variant
    "thm5_printed" uses the Theorem 5 slide's argument rho_j / (alpha L |eta_j|^L).
    ``conv`` (Cor 6, even data and wbar): with S = d^{(L-1)/2} F and U_l = F^* (Cor 3),
    rho = d^{-(L-1)/2} F z, so "derived" is
    Q = alpha^2 sum [F wbar]_j^2 H_L(d^{-(L-1)/2} [F z]_j / (alpha^L |[F wbar]_j|^L));
    "cor6_printed" drops the d^{-(L-1)/2} (as the slide prints it). On even vectors F acts as
    its real part C (symmetric, C^2 = I there), so we solve for zeta = F z with X C zeta = y.
    Returns `q_minimizer`'s dict (z, iterations, kkt_residual, converged).
    """
    if arch == "diag":
        a = np.abs(wbar)
        scale = (alpha * L * a**L) if variant == "thm5_printed" else alpha**L * a**L
        return q_minimizer(X, y, L, scale, alpha**2 * a**2)
    d = X.shape[1]
    C = dft_matrix(d).real
    eta = C @ wbar
    factor = 1.0 if variant == "cor6_printed" else d ** (-(L - 1) / 2)
    scale = alpha**L * np.abs(eta) ** L / factor
    sol = q_minimizer(X @ C, y, L, scale, alpha**2 * eta**2)
    return {**sol, "z": C @ sol["z"]}


def q_limit(
    X: np.ndarray,
    y: np.ndarray,
    arch: str,
    L: int,
    alpha: float,
    wbar: np.ndarray,
    variant: str = "derived",
) -> np.ndarray:
    """The minimizer z of `q_limit_solution`."""
    return q_limit_solution(X, y, arch, L, alpha, wbar, variant)["z"]


def cor6_printed_unnormalized_dft(
    X: np.ndarray, y: np.ndarray, L: int, alpha: float, wbar: np.ndarray
) -> np.ndarray:
    """Cor 6's minimizer exactly as the slide prints it, with F read as the unnormalized DFT
    F' = sqrt(d) F ([F']_{jk} = exp(-2 pi i jk / d)) instead of the unitary F of Cor 3:
    Q = alpha^2 sum [F' wbar]_j^2 H_L([F' z]_j / (alpha^L |[F' wbar]_j|^L)) s.t. X z = y.
    Since [F' z]_j / |[F' wbar]_j|^L = d^{-(L-1)/2} [F z]_j / |[F wbar]_j|^L and the prefactor
    only gains the constant d, its minimizer is the derived one of `q_limit`: the missing
    d^{-(L-1)/2} is a convention of the DFT's scaling. Solved for zeta = F' z (real on even
    vectors), z = F'^{-1} zeta = Re(F'^*) zeta / d."""
    d = X.shape[1]
    Fp = np.sqrt(d) * dft_matrix(d)
    eta = (Fp @ wbar).real
    back = (np.conj(Fp).T / d).real  # F'^{-1} restricted to real (even) spectra
    scale = alpha**L * np.abs(eta) ** L
    sol = q_minimizer(X @ back, y, L, scale, alpha**2 * eta**2)
    if not sol["converged"]:
        raise RuntimeError("Newton did not converge on Cor 6's printed (unnormalized) minimizer")
    return back @ sol["z"]


def low_rank_point_setup(
    d: int, k1: int, seed: int, bandwidth: int, last_scale: float = 0.3
) -> dict:
    """Like `single_point_setup`, but with a band-limited point x (DFT coefficients only at the
    frequencies |k| < bandwidth, so M(x) has rank m = 2 bandwidth - 1 < k1): U_1 (k1 x m) and
    U_2 (d x m) are not square, and both initial directions get a component outside their
    range, so Thm 6's terms alpha (I - U_l U_l^T) vbar_l are reached."""
    rng = np.random.default_rng(seed)
    freq = np.minimum(np.arange(d), d - np.arange(d))
    spectrum = np.fft.fft(rng.standard_normal(d))
    x = np.fft.ifft(np.where(freq < bandwidth, spectrum, 0.0)).real
    M = data_tensor("conv", x, [k1, d])
    U1, s, U2 = two_layer_svd(M, tol=1e-9)
    m = len(s)
    n1, n2 = rng.standard_normal(k1), rng.standard_normal(d)
    v1bar = U1 @ (1 + 0.1 * rng.standard_normal(m)) + (n1 - U1 @ (U1.T @ n1))
    v2bar = last_scale * (U2 @ rng.standard_normal(m) + (n2 - U2 @ (U2.T @ n2)))
    lam = float(np.min((U1.T @ v1bar) ** 2 - (U2.T @ v2bar) ** 2))
    return {"x": x, "M": M, "s": s, "v1bar": v1bar, "v2bar": v2bar, "lambda": lam, "m": m}


def single_point_setup(d: int, k1: int, seed: int, last_scale: float = 0.3) -> dict:
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
    """Gradient flow on the square loss from (v1, v2) to time `t_end` (DOP853); raises if the
    integrator does not reach `t_end` at its tolerances."""
    from scipy.integrate import solve_ivp

    k1 = len(v1)

    def rhs(_, z):
        a, b = z[:k1], z[k1:]
        r = a @ M @ b - y
        return np.concatenate([-r * (M @ b), -r * (M.T @ a)])

    sol = solve_ivp(
        rhs, (0, t_end), np.concatenate([v1, v2]), method="DOP853", rtol=1e-13, atol=1e-15
    )
    if not sol.success:
        raise RuntimeError(f"gradient flow integration failed: {sol.message}")
    z = sol.y[:, -1]
    return z[:k1], z[k1:]


# ----------------------------------------------------------------------------------------------
# Small self-checks shown in the chapter


def lemma4_ode_check(Ls: Sequence[int] = (2, 3, 4, 5), points: int = 25) -> list[dict]:
    """Integrate Lemma 4's ODE p' = p^{L-2} q, q' = p^{L-1} (with I' = tau h_L'(tau), so that
    I(tau) = H_L(h_L(tau)) by substitution) and compare with the closed-form h_L^{-1} and H_L
    used everywhere else. Rows: L, tau, h_L from the ODE, H_L from the ODE and from `H`."""
    from scipy.integrate import solve_ivp

    rows = []
    for L in Ls:

        def rhs(t, s, L=L):
            p, q, _ = s
            return [
                p ** (L - 2) * q,
                p ** (L - 1),
                t * ((L - 1) * p ** (2 * L - 4) * q**2 + p ** (2 * L - 2)),
            ]

        t_end = min(3.0, 0.95 * escape_time(L))
        sol = solve_ivp(rhs, (0, t_end), [1.0, 0.0, 0.0], rtol=1e-13, atol=1e-14, dense_output=True)
        taus = np.linspace(t_end / points, t_end, points)
        p, q, integral = sol.sol(taus)
        h = p ** (L - 1) * q
        for tau, h_ode, H_ode, hinv, H_closed in zip(taus, h, integral, h_inverse(h, L), H(h, L)):
            rows.append(
                {
                    "L": L,
                    "tau": tau,
                    "h_ode": h_ode,
                    "H_ode": H_ode,
                    "h_inverse_closed": hinv,
                    "H_closed": H_closed,
                    "error_h_inverse": abs(hinv - tau),
                    "error_H": abs(H_closed - H_ode) / max(1.0, abs(H_ode)),
                }
            )
    return rows


def alpha_sweep_theory(
    n: int, d: int, data_seed: int, L: int, alphas: Sequence[float]
) -> list[dict]:
    """Cor 5 with wbar = 1: the Q_{L,alpha}-minimizer's relative distance to the min-l1 and
    the min-l2 interpolators along `alphas` (the theory curve the GD limits are plotted on)."""
    from .convex import min_l1_interpolator, min_l2_interpolator

    X, y = regression_data(n, d, data_seed)
    l1, l2 = min_l1_interpolator(X, y).x, min_l2_interpolator(X, y).x
    assert l1 is not None and l2 is not None
    rows = []
    for alpha in alphas:
        sol = q_limit_solution(X, y, "diag", L, alpha, np.ones(d))
        z = sol["z"]
        rows.append(
            {
                "L": L,
                "alpha": alpha,
                "status": "converged" if sol["converged"] else "unconverged",
                "distance_l1": float(np.linalg.norm(z - l1) / np.linalg.norm(l1)),
                "distance_l2": float(np.linalg.norm(z - l2) / np.linalg.norm(l2)),
            }
        )
    return rows
