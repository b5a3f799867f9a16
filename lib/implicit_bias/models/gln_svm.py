"""The convex programs of Lippl, Abbott & Chung (2022) through cvxpy: the reference path.

SVM-GLN (Eq. 20/52), its Lagrange dual, SVM-L2 (Sec. 4.1, Appendix A Eq. 23-25), the shallow
GLN's per-context SVM, the FReLU SVM (Eq. 22) and the plain linear SVM, each solved by a cvxpy
solver (ECOS as the paper, Clarabel, OSQP, SCS); and `solve_program`, which dispatches one of the
chapter's programs either to cvxpy or to the fast exact solvers of
`implicit_bias.models.gln_solvers`. Data convention: `implicit_bias.models.gln`.

None of the SVMs has a separate bias term: like the paper's homogeneous networks, the constant
feature of `X` plays that role (and is regularized with the other weights).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .gln import one_hot_contexts

CVXPY_SOLVERS = ("ECOS", "CLARABEL", "OSQP", "SCS")
SVM_METHODS = ("SVM-GLN", "SVM-L2", "SVM-L2-eq23", "SVM-shallow")


@dataclass
class SVMResult:
    """A convex program's solution; a failed solve keeps its status and has `primal = None`.

    `primal` is zeta (H, C, D) for the GLN programs, (H, D) for the FReLU programs, (C, D) for the
    shallow per-context SVM and (D,) for a plain SVM. `dual` holds the margin multipliers lambda.
    """

    primal: np.ndarray | None
    objective: float
    status: str
    solver: str
    dual: np.ndarray | None = None
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.primal is not None and self.status in ("optimal", "optimal_inaccurate")


def _row_space_basis(X: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis V (D, r) of the row space of X.

    Exact reduction for all the programs below: their norms are invariant under rotations of the
    D axis and their constraints only see <zeta_hc, x_n>, so a solution lives in span{x_n}.
    """
    _, s, vt = np.linalg.svd(X, full_matrices=False)
    r = int((s > tol * s[0]).sum())
    return vt[:r].T


def _margin_operator(X: np.ndarray, y: np.ndarray, gates: np.ndarray) -> sp.csr_matrix:
    """Sparse G (N, H*C*D) with G @ vec(zeta) = y_n * sum_{h,c} gates[n,h,c] <zeta_hc, x_n>."""
    N, D = X.shape
    _, H, C = gates.shape
    n_idx, h_idx, c_idx = np.nonzero(gates)
    rows = np.repeat(n_idx, D)
    cols = np.repeat((h_idx * C + c_idx) * D, D) + np.tile(np.arange(D), len(n_idx))
    vals = (y[n_idx, None] * gates[n_idx, h_idx, c_idx, None] * X[n_idx]).ravel()
    return sp.csr_matrix((vals, (rows, cols)), shape=(N, H * C * D))


def _solve(problem: cp.Problem, solver: str, max_iters: int | None) -> str:
    kwargs = {}
    if max_iters is not None:
        kwargs["max_iters" if solver in ("ECOS", "SCS") else "max_iter"] = max_iters
    try:
        problem.solve(solver=solver, **kwargs)
    except cp.error.SolverError as err:  # recorded like the paper's missing points
        return f"solver_error: {str(err)[:200]}"
    return str(problem.status)


def _group_lasso_svm(X, y, gates, solver, reduce, max_iters, weights_mean=None) -> SVMResult:
    """min sum_h ||zeta_h||_F  s.t.  y_n sum_{h,c} gates[n,h,c] <zeta_hc, x_n> >= 1.

    `gates` (N, H, C): one-hot contexts for the GLN (Eq. 52), the ReLU gates with C = 1 for the
    FReLU (Eq. 22). With `weights_mean` set, the objective is instead the quadratic
    weights_mean * ||sum_h mean_c zeta_hc||^2 + sum_{h,c} ||zeta_hc - mean_c zeta_hc||^2 (SVM-L2).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    N, D = X.shape
    _, H, C = gates.shape
    V = _row_space_basis(X) if reduce else np.eye(D)
    Xr = X @ V
    r = Xr.shape[1]
    z = cp.Variable(H * C * r)
    G = _margin_operator(Xr, y, gates)
    margin = G @ z >= 1
    if weights_mean is None:
        blocks = cp.reshape(z, (H, C * r), order="C")
        objective = cp.sum(cp.norm(blocks, 2, axis=1))
    else:
        # mean over contexts and the within-unit residuals as sparse linear maps of vec(zeta)
        mean_op = sp.kron(sp.kron(sp.eye(H), np.ones((1, C)) / C), sp.eye(r))  # (H r, HCr)
        total_op = sp.kron(np.ones((1, H)), sp.eye(r)) @ mean_op  # (r, HCr)
        resid_op = sp.eye(H * C * r) - sp.kron(sp.kron(sp.eye(H), np.ones((C, C)) / C), sp.eye(r))
        objective = weights_mean * cp.sum_squares(total_op @ z) + cp.sum_squares(resid_op @ z)
    problem = cp.Problem(cp.Minimize(objective), [margin])
    start = time.perf_counter()
    status = _solve(problem, solver, max_iters)
    seconds = time.perf_counter() - start
    if z.value is None:
        return SVMResult(None, float("nan"), status, solver, None, seconds)
    zeta = np.einsum("hcr,dr->hcd", np.asarray(z.value).reshape(H, C, r), V)
    dual = None if margin.dual_value is None else np.asarray(margin.dual_value, dtype=np.float64)
    return SVMResult(zeta, float(problem.value), status, solver, dual, seconds)


def svm_gln(
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    solver: str = "CLARABEL",
    reduce: bool = True,
    max_iters: int | None = None,
) -> SVMResult:
    """SVM-GLN, Eq. (52) of Lippl et al. (the GLN norm of Eq. 20 under fixed margins):

        min_zeta  sum_h ||zeta_h||_F   s.t.  y_n < sum_h zeta[h, contexts[n, h]], x_n > >= 1,

    zeta (H, C, D), no bias term (the constant feature of X plays that role). The paper solved it
    with cvxpy + ECOS (at most 200 iterations). `reduce` solves in the row space of X (exact).
    The objective is the GLN norm of the solution; `dual` holds the multipliers lambda_n.
    """
    gates = one_hot_contexts(contexts, n_contexts)
    return _group_lasso_svm(X, y, gates, solver, reduce, max_iters)


def svm_gln_dual(
    X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int, solver: str = "CLARABEL"
) -> SVMResult:
    """The Lagrange dual of Eq. (52), an independent formulation used to check `svm_gln`:

        max_lambda sum_n lambda_n  s.t.  lambda >= 0,
                   sum_c || sum_{n: contexts[n,h] = c} lambda_n y_n x_n ||^2 <= 1  for every h.

    Strong duality: its optimum equals the GLN norm of `svm_gln`. `primal` is None (the primal is
    recovered by `recover_zeta_from_dual`); `dual` holds lambda.
    """
    X = np.asarray(X, dtype=np.float64)
    N, _ = X.shape
    H = contexts.shape[1]
    lam = cp.Variable(N, nonneg=True)
    cons = []
    for h in range(H):
        onehot = one_hot_contexts(contexts[:, h], n_contexts)  # (N, C)
        g_h = X.T @ cp.multiply(cp.reshape(cp.multiply(lam, y), (N, 1), order="C"), onehot)
        cons.append(cp.norm(g_h, "fro") <= 1)
    problem = cp.Problem(cp.Maximize(cp.sum(lam)), cons)
    start = time.perf_counter()
    status = _solve(problem, solver, None)
    seconds = time.perf_counter() - start
    value = float(problem.value) if problem.value is not None else float("nan")
    dual = None if lam.value is None else np.maximum(np.asarray(lam.value), 0.0)
    return SVMResult(None, value, status, solver, dual, seconds)


def dual_directions(
    X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int, lam: np.ndarray
) -> np.ndarray:
    """g[h, c] = sum_{n: contexts[n,h] = c} lambda_n y_n x_n, shape (H, C, D) (Eq. 54/56)."""
    gates = one_hot_contexts(contexts, n_contexts)
    return np.einsum("nhc,n,nd->hcd", gates, lam * y, X)


def recover_zeta_from_dual(
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    lam: np.ndarray,
    active_tol: float = 1e-4,
) -> np.ndarray:
    """Primal zeta from the dual solution via Eq. (56): zeta_hc = t_h g_hc, where the scales
    t_h >= 0 (t_h = ||zeta_h||) solve the small LP min sum t_h s.t. the margins are >= 1, with
    t_h = 0 for units whose dual constraint is slack (||g_h|| < 1).
    """
    g = dual_directions(X, y, contexts, n_contexts, lam)
    H = g.shape[0]
    active = np.linalg.norm(g.reshape(H, -1), axis=1) > 1 - active_tol
    # margin of unit h's direction on sample n: y_n <g[h, c_nh], x_n>
    unit_margin = y[:, None] * np.einsum("nhd,nd->nh", g[np.arange(H)[None], contexts], X)
    t = cp.Variable(H, nonneg=True)
    cons = [unit_margin @ t >= 1] + ([t[~active] == 0] if (~active).any() else [])
    cp.Problem(cp.Minimize(cp.sum(t)), cons).solve(solver="CLARABEL")
    assert t.value is not None
    return t.value[:, None, None] * g


def svm_l2(
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    solver: str = "CLARABEL",
    variant: str = "exact",
    reduce: bool = True,
    max_iters: int | None = None,
) -> SVMResult:
    """SVM-L2 (Sec. 4.1): the minimum L2 norm of all C^H predictors under the architecture's
    constraints, min sum_gamma ||beta_gamma||^2 s.t. y_n <beta_{gamma(n)}, x_n> >= 1, written in
    zeta without enumerating the C^H predictors (Appendix A).

    With m_h = mean_c zeta_hc and r_hc = zeta_hc - m_h (Eq. 24 diagonalized):

        sum_gamma ||beta_gamma||^2 = C^(H-1) (C ||sum_h m_h||^2 + sum_{h,c} ||r_hc||^2).

    `variant="exact"` minimizes this (the objective reported is the bracket, i.e. ||beta||^2 /
    C^(H-1)). `variant="eq23"` minimizes ||A zeta||^2 with A as printed in Eq. (23)/(25), which is
    (C/H)||sum_h m_h||^2 + C^2 sum ||r_hc||^2 (reported divided by C^2): Eq. (25) does not solve
    A^2 = M (see `a_squared_minus_m`), so this is a different norm. The paper solved SVM-L2 with
    OSQP (at most 10,000 iterations).
    """
    H = contexts.shape[1]
    C = n_contexts
    if variant == "exact":
        weight = float(C)
    elif variant == "eq23":
        weight = 1.0 / (H * C)
    else:
        raise ValueError(f"unknown variant {variant!r}; valid: 'exact', 'eq23'")
    gates = one_hot_contexts(contexts, n_contexts)
    return _group_lasso_svm(X, y, gates, solver, reduce, max_iters, weights_mean=weight)


def svm_shallow(
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    solver: str = "CLARABEL",
    max_iters: int | None = None,
) -> SVMResult:
    """The shallow GLN's SVM (Sec. 4.1, Fig. 2c): min sum_c ||beta_c||^2 s.t.
    y_n <beta_{c(n)}, x_n> >= 1, i.e. an independent hard-margin SVM per context (no bias term;
    the constant feature plays that role). `contexts` is (N,) or (N, 1). Empty contexts get 0.
    `primal` is (C, D); the status is the worst of the per-context statuses.
    """
    X = np.asarray(X, dtype=np.float64)
    ctx = np.asarray(contexts).reshape(-1)
    beta = np.zeros((n_contexts, X.shape[1]))
    statuses, objective, seconds = [], 0.0, 0.0
    for c in np.unique(ctx):
        idx = ctx == c
        V = _row_space_basis(X[idx])
        Xc = X[idx] @ V
        b = cp.Variable(Xc.shape[1])
        problem = cp.Problem(cp.Minimize(cp.sum_squares(b)), [cp.multiply(y[idx], Xc @ b) >= 1])
        start = time.perf_counter()
        statuses.append(_solve(problem, solver, max_iters))
        seconds += time.perf_counter() - start
        if b.value is None:
            return SVMResult(None, float("nan"), statuses[-1], solver, None, seconds)
        beta[c] = V @ b.value
        objective += float(problem.value)
    worst = next((s for s in statuses if s != "optimal"), "optimal")
    return SVMResult(beta, objective, worst, solver, None, seconds)


def svm_frelu(
    X: np.ndarray,
    y: np.ndarray,
    gates: np.ndarray,
    solver: str = "CLARABEL",
    reduce: bool = True,
    max_iters: int | None = None,
) -> SVMResult:
    """FReLU SVM, Eq. (22): min sum_h ||zeta_h||_2 s.t.
    y_n < sum_{h: gates[n,h]} zeta_h, x_n > >= 1.

    `gates` (N, H) bool: random median-init hyperplane contexts (SVM-RC) or the gates
    [<w1_h, x_n> > 0] of a trained ReLU network (SVM-LC). `primal` is zeta (H, D).
    """
    g = np.asarray(gates, dtype=np.float64)[..., None]
    res = _group_lasso_svm(X, y, g, solver, reduce, max_iters)
    if res.primal is not None:
        res.primal = res.primal[:, 0]
    return res


def svm_linear(
    features: np.ndarray, y: np.ndarray, solver: str = "CLARABEL", max_iters: int | None = None
) -> SVMResult:
    """Plain hard-margin SVM, min ||v||^2 s.t. y_n <v, phi_n> >= 1 (SVM-HL on the ReLU net's
    hidden activations, Sec. 5.2; append a constant feature for a bias)."""
    F = np.asarray(features, dtype=np.float64)
    v = cp.Variable(F.shape[1])
    cons = [cp.multiply(y, F @ v) >= 1]
    problem = cp.Problem(cp.Minimize(cp.sum_squares(v)), cons)
    start = time.perf_counter()
    status = _solve(problem, solver, max_iters)
    seconds = time.perf_counter() - start
    if v.value is None:
        return SVMResult(None, float("nan"), status, solver, None, seconds)
    return SVMResult(
        np.asarray(v.value),
        float(problem.value),
        status,
        solver,
        np.asarray(cons[0].dual_value),
        seconds,
    )


# -------------------------------------------------------------------------------------------
# One program, any solver: cvxpy or the fast exact solvers
# -------------------------------------------------------------------------------------------


def solve_program(
    method: str,
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    solver: str = "CLARABEL",
    max_iters: int | None = None,
    device: str = "cpu",
) -> SVMResult:
    """Dispatch one of the chapter's convex programs to a solver: a cvxpy solver name (ECOS, as
    the paper, CLARABEL, OSQP, SCS) or "fast" (the exact torch solvers of
    `implicit_bias.models.gln_solvers`, on `device`)."""
    if solver == "fast":
        return _solve_fast(method, X, y, contexts, n_contexts, device)
    if solver not in CVXPY_SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; valid: {CVXPY_SOLVERS + ('fast',)}")
    if method == "SVM-GLN":
        return svm_gln(X, y, contexts, n_contexts, solver, max_iters=max_iters)
    if method == "SVM-L2":
        return svm_l2(X, y, contexts, n_contexts, solver, "exact", max_iters=max_iters)
    if method == "SVM-L2-eq23":
        return svm_l2(X, y, contexts, n_contexts, solver, "eq23", max_iters=max_iters)
    if method == "SVM-shallow":
        return svm_shallow(X, y, contexts, n_contexts, solver, max_iters=max_iters)
    raise ValueError(f"unknown method {method!r}; valid: {SVM_METHODS}")


def _solve_fast(method, X, y, contexts, n_contexts, dev: str) -> SVMResult:
    from implicit_bias.models import gln_solvers  # exact dual interior-point solvers in torch

    if method == "SVM-GLN":
        out = gln_solvers.svm_gln(X, y, contexts, n_contexts, device=dev)
    elif method in ("SVM-L2", "SVM-L2-eq23"):
        norm = "exact" if method == "SVM-L2" else "eq23"
        out = gln_solvers.svm_l2(X, y, contexts, n_contexts, variant=norm, device=dev)
    elif method == "SVM-shallow":
        out = gln_solvers.shallow_svm(
            X, y, np.asarray(contexts).reshape(-1), n_contexts, device=dev
        )
    else:
        raise ValueError(f"unknown method {method!r}; valid: {SVM_METHODS}")
    return _from_fast(out)


def _from_fast(out) -> SVMResult:
    """Convert a `gln_solvers.SVMSolution` (objective in that module's convention)."""
    primal = None if out.weights is None else out.weights.detach().cpu().numpy()
    dual = None if out.dual is None else out.dual.detach().cpu().numpy()
    return SVMResult(
        primal,
        float(out.objective),
        str(out.status),
        "fast",
        dual,
        float(out.solve_time),
        {"duality_gap": float(out.gap_relative), "iterations": int(out.iterations)},
    )
