"""Gated linear networks and their implicit bias (Lippl, Abbott & Chung, 2022).

Everything the `gln_norm` chapter computes: the data pipeline of the paper's MNIST experiments,
the random hyperplane contexts, the models (deep two-layer GLN, shallow GLN, ReLU network), the
paper's training schedule batched over many replicas in one tensor program, the reference convex
programs (through cvxpy) and the theory helpers of Sections 4 and B.2 and Appendix A.

Data convention (shared with `implicit_bias.models.gln_solvers`, the fast exact interior-point solvers):

* `X` (N, D) float64, the constant-1 feature already appended when it is used (the paper's
  inputs are pixels scaled to [-1, 1] plus a constant 1, D = 785);
* `y` (N,) float64 in {-1, +1};
* `contexts` (N, H) int64, unit h's local context of sample n, in range(C) (for the shallow GLN
  H = 1 and C = 2^k);
* the primal variable `zeta` has shape (H, C, D): zeta[h, c] = w2[h] * w1[h, c] (Eq. 17), and the
  predictor of global context gamma is beta_gamma = sum_h zeta[h, gamma_h] (Eq. 15).

None of the SVMs has a separate bias term: like the paper's homogeneous networks, the constant
feature of `X` plays that role (and is regularized with the other weights).
"""

from __future__ import annotations

import base64
import functools
import itertools
import math
import time
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch

CVXPY_SOLVERS = ("ECOS", "CLARABEL", "OSQP", "SCS")

# --------------------------------------------------------------------------------------------
# Data (Appendix A and the authors' protocol: binary MNIST 0-4 vs 5-9, pixels in [-1, 1] + 1)
# --------------------------------------------------------------------------------------------


def preprocess_images(images: np.ndarray) -> np.ndarray:
    """Pixels in [0, 1] -> [-1, 1] with a constant 1 feature appended (float64, D = 785)."""
    X = 2.0 * np.asarray(images, dtype=np.float64) - 1.0
    return np.hstack([X, np.ones((len(X), 1))])


@functools.lru_cache(maxsize=1)
def _mnist_train() -> tuple[np.ndarray, np.ndarray]:
    from implicit_bias.core.data import binary_labels, load_mnist

    images, labels = load_mnist("train")
    return preprocess_images(images), binary_labels(labels)


VAL_SEED = 20220  # one fixed validation split for every run, disjoint from all training sets


def binary_mnist(n_train: int, seed: int, n_val: int) -> dict[str, np.ndarray]:
    """The paper's binary MNIST task (Sec. 4.1): a seeded training subset of size `n_train` and a
    fixed validation split of `n_val` images (12,000 in the paper), disjoint, from MNIST train.
    """
    from implicit_bias.core.data import seeded_subset

    X, y = _mnist_train()
    val = seeded_subset(len(X), n_val, VAL_SEED)
    train = seeded_subset(len(X), n_train, seed, exclude=val)
    return {"X": X[train], "y": y[train], "X_val": X[val], "y_val": y[val]}


# --------------------------------------------------------------------------------------------
# Contexts: k random hyperplanes per unit, C = 2^k local contexts (Appendix A)
# --------------------------------------------------------------------------------------------


@dataclass
class Hyperplanes:
    """k hyperplanes for each of H units: context = sum_j 2^j [<w_hj, x> - b_hj >= 0]."""

    weights: np.ndarray  # (H, k, P)
    cutoffs: np.ndarray  # (H, k)

    @property
    def n_contexts(self) -> int:
        return 2 ** self.weights.shape[1]


def sample_hyperplanes(X_train: np.ndarray, n_units: int, n_contexts: int, seed: int,
                       median_init: bool = True, weight_sd: float = 36.0,
                       cutoff_sd: float = 9.0) -> Hyperplanes:
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


# --------------------------------------------------------------------------------------------
# Convex programs (Sec. 4, Eq. 20/52, Appendix A Eq. 23-25, Sec. 5 Eq. 22), cvxpy reference path
# --------------------------------------------------------------------------------------------


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
    cols = (np.repeat((h_idx * C + c_idx) * D, D) + np.tile(np.arange(D), len(n_idx)))
    vals = (y[n_idx, None] * gates[n_idx, h_idx, c_idx, None] * X[n_idx]).ravel()
    return sp.csr_matrix((vals, (rows, cols)), shape=(N, H * C * D))


def one_hot_contexts(contexts: np.ndarray, n_contexts: int) -> np.ndarray:
    """(N, H) context indices -> (N, H, C) 0/1 gates."""
    return (np.asarray(contexts)[..., None] == np.arange(n_contexts)).astype(np.float64)


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
        resid_op = sp.eye(H * C * r) - sp.kron(sp.kron(sp.eye(H), np.ones((C, C)) / C),
                                                sp.eye(r))
        objective = (weights_mean * cp.sum_squares(total_op @ z)
                     + cp.sum_squares(resid_op @ z))
    problem = cp.Problem(cp.Minimize(objective), [margin])
    start = time.perf_counter()
    status = _solve(problem, solver, max_iters)
    seconds = time.perf_counter() - start
    if z.value is None:
        return SVMResult(None, float("nan"), status, solver, None, seconds)
    zeta = np.einsum("hcr,dr->hcd", np.asarray(z.value).reshape(H, C, r), V)
    dual = None if margin.dual_value is None else np.asarray(margin.dual_value, dtype=np.float64)
    return SVMResult(zeta, float(problem.value), status, solver, dual, seconds)


def svm_gln(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
            solver: str = "CLARABEL", reduce: bool = True,
            max_iters: int | None = None) -> SVMResult:
    """SVM-GLN, Eq. (52) of Lippl et al. (the GLN norm of Eq. 20 under fixed margins):

        min_zeta  sum_h ||zeta_h||_F   s.t.  y_n < sum_h zeta[h, contexts[n, h]], x_n > >= 1,

    zeta (H, C, D), no bias term (the constant feature of X plays that role). The paper solved it
    with cvxpy + ECOS (at most 200 iterations). `reduce` solves in the row space of X (exact).
    The objective is the GLN norm of the solution; `dual` holds the multipliers lambda_n.
    """
    gates = one_hot_contexts(contexts, n_contexts)
    return _group_lasso_svm(X, y, gates, solver, reduce, max_iters)


def svm_gln_dual(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
                 solver: str = "CLARABEL") -> SVMResult:
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


def dual_directions(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
                    lam: np.ndarray) -> np.ndarray:
    """g[h, c] = sum_{n: contexts[n,h] = c} lambda_n y_n x_n, shape (H, C, D) (Eq. 54/56)."""
    gates = one_hot_contexts(contexts, n_contexts)
    return np.einsum("nhc,n,nd->hcd", gates, lam * y, X)


def recover_zeta_from_dual(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
                           lam: np.ndarray, active_tol: float = 1e-4) -> np.ndarray:
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
    return t.value[:, None, None] * g


def svm_l2(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
           solver: str = "CLARABEL", variant: str = "exact", reduce: bool = True,
           max_iters: int | None = None) -> SVMResult:
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


def svm_shallow(X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int,
                solver: str = "CLARABEL", max_iters: int | None = None) -> SVMResult:
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


def svm_frelu(X: np.ndarray, y: np.ndarray, gates: np.ndarray, solver: str = "CLARABEL",
              reduce: bool = True, max_iters: int | None = None) -> SVMResult:
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


def svm_linear(features: np.ndarray, y: np.ndarray, solver: str = "CLARABEL",
               max_iters: int | None = None) -> SVMResult:
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
    return SVMResult(np.asarray(v.value), float(problem.value), status, solver,
                     np.asarray(cons[0].dual_value), seconds)


# --------------------------------------------------------------------------------------------
# Predictions, errors, inconsistency
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Theory helpers (Sec. 4, Lemma B.6/B.7, Eq. 21, Eq. 23-25, Theorem 3.1 / Eq. 7, Eq. 56)
# --------------------------------------------------------------------------------------------


def zeta_from_weights(w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """zeta_hc = w2_h w1_hc (Eq. 17); w1 (H, C, D), w2 (H,)."""
    return w2[:, None, None] * w1


def all_predictors(zeta: np.ndarray) -> np.ndarray:
    """Every global context's predictor beta_gamma = sum_h zeta[h, gamma_h] (Eq. 15), as an
    array of shape (C,)*H + (D,). Enumerates C^H predictors: small H and C only."""
    H, C, D = zeta.shape
    beta = np.zeros((C,) * H + (D,))
    for h in range(H):
        shape = [1] * H + [D]
        shape[h] = C
        beta = beta + zeta[h].reshape(shape)
    return beta


def equivariance_residual(beta: np.ndarray) -> float:
    """Largest violation of Lemma B.6 / Eq. (16): for every unit h, the difference between two
    predictors that differ only in unit h's context is the same whatever the other contexts.
    `beta` as returned by `all_predictors`. Zero for any GLN."""
    H = beta.ndim - 1
    worst = 0.0
    for h in range(H):
        diff = np.diff(beta, axis=h)  # beta[.., c+1, ..] - beta[.., c, ..] along unit h
        ref = diff[tuple([0] * h + [slice(None)] + [0] * (H - h - 1))]  # others at context 0
        worst = max(worst, float(np.abs(diff - np.expand_dims(
            ref, tuple(i for i in range(H) if i != h))).max()))
    return worst


def predictor_map_rank(n_units: int, n_contexts: int) -> int:
    """Rank of the linear map zeta -> (beta_gamma)_gamma for D = 1 (Lemma B.7: the number of
    freely choosable predictors, (C-1)H + 1)."""
    H, C = n_units, n_contexts
    rows = [np.concatenate([np.eye(C)[g] for g in gamma])
            for gamma in itertools.product(range(C), repeat=H)]
    return int(np.linalg.matrix_rank(np.array(rows)))


def m_matrix(n_units: int, n_contexts: int) -> np.ndarray:
    """M of Eq. (24) on the (h, c) indices (the d index is a Kronecker identity):
    M = C delta_hh' delta_cc' + (1 - delta_hh')."""
    H, C = n_units, n_contexts
    same_h = np.kron(np.eye(H), np.ones((C, C)))
    return C * np.eye(H * C) + (1.0 - same_h)


def a_matrix(n_units: int, n_contexts: int, corrected: bool = False) -> np.ndarray:
    """A of the ansatz below Eq. (24): alpha + beta delta_hh' + gamma delta_cc' + kappa
    delta_hh' delta_cc'. `corrected=False`: Eq. (25) as printed (1/(HC), -1, 0, C).
    `corrected=True`: the coefficients that do solve A^2 = M, (1/sqrt(HC), -1/sqrt(C), 0,
    sqrt(C)) (derived in the chapter)."""
    H, C = n_units, n_contexts
    if corrected:
        a, b, k = 1 / math.sqrt(H * C), -1 / math.sqrt(C), math.sqrt(C)
    else:
        a, b, k = 1 / (H * C), -1.0, float(C)
    same_h = np.kron(np.eye(H), np.ones((C, C)))
    return a * np.ones((H * C, H * C)) + b * same_h + k * np.eye(H * C)


def a_squared_minus_m(n_units: int, n_contexts: int, corrected: bool = False) -> float:
    """max |A^2 - M|: zero iff Eq. (25)'s claim A^2 = M holds."""
    A = a_matrix(n_units, n_contexts, corrected)
    return float(np.abs(A @ A - m_matrix(n_units, n_contexts)).max())


def beta_norm_sq_closed_form(zeta: np.ndarray) -> float:
    """sum_gamma ||beta_gamma||^2 = C^(H-1) (C ||sum_h m_h||^2 + sum_hc ||r_hc||^2) (exact)."""
    H, C, _ = zeta.shape
    m = zeta.mean(1)
    r = zeta - m[:, None]
    return C ** (H - 1) * (C * float((m.sum(0) ** 2).sum()) + float((r**2).sum()))


def beta_norm_sq_eq24(zeta: np.ndarray) -> float:
    """C^(H-2) zeta^T M zeta, the paper's intermediate result below Eq. (24)."""
    H, C, D = zeta.shape
    z = zeta.reshape(H * C, D)
    return C ** (H - 2) * float(np.einsum("id,ij,jd->", z, m_matrix(H, C), z))


def a_zeta_norm_sq(zeta: np.ndarray, corrected: bool = False) -> float:
    """||A zeta||^2 with A from Eq. (23)/(25) (or the corrected A)."""
    H, C, D = zeta.shape
    Az = a_matrix(H, C, corrected) @ zeta.reshape(H * C, D)
    return float((Az**2).sum())


def gln_norm(beta: np.ndarray, solver: str = "CLARABEL") -> float:
    """||beta||_GLN by Eq. (20): min sum_h ||zeta_h||_F s.t. beta_gamma = sum_h zeta[h, gamma_h]
    for all C^H global contexts; `beta` as from `all_predictors` (small H, C)."""
    H = beta.ndim - 1
    C, D = beta.shape[0], beta.shape[-1]
    zeta = [cp.Variable((C, D)) for _ in range(H)]
    cons = [sum(zeta[h][g[h]] for h in range(H)) == beta[g]
            for g in itertools.product(range(C), repeat=H)]
    problem = cp.Problem(cp.Minimize(sum(cp.norm(z, "fro") for z in zeta)), cons)
    problem.solve(solver=solver)
    return float(problem.value)


def gln_norm_eq21(beta: np.ndarray) -> float:
    """The closed form printed as Eq. (21) for H = C = 2, beta (2, 2, D):
    sqrt(||beta||^2 + 1/2 sum_ij ||beta_ij - beta_{i'j}|| ||beta_ij - beta_{ij'}||)."""
    total = float((beta**2).sum())
    for i, j in itertools.product(range(2), repeat=2):
        total += 0.5 * (np.linalg.norm(beta[i, j] - beta[1 - i, j])
                        * np.linalg.norm(beta[i, j] - beta[i, 1 - j]))
    return math.sqrt(total)


def svm_gln_kkt(res: SVMResult, X: np.ndarray, y: np.ndarray, contexts: np.ndarray,
                n_contexts: int) -> dict[str, float]:
    """KKT residuals of Eq. (52) at (zeta, lambda) from a solver: primal feasibility
    max(0, 1 - margin), dual feasibility (lambda >= 0 and ||g_h|| <= 1), complementary slackness
    max lambda_n |margin_n - 1|, stationarity of Eq. (56) max_h ||zeta_h - ||zeta_h|| g_h|| /
    max_h ||zeta_h||, and the duality gap |sum_h ||zeta_h|| - sum_n lambda_n| / objective.
    """
    zeta, lam = res.primal, res.dual
    margin = y * predict_gln(zeta, X, contexts)
    g = dual_directions(X, y, contexts, n_contexts, lam)
    H = zeta.shape[0]
    zn = np.linalg.norm(zeta.reshape(H, -1), axis=1)
    gn = np.linalg.norm(g.reshape(H, -1), axis=1)
    stat = np.linalg.norm((zeta - zn[:, None, None] * g).reshape(H, -1), axis=1)
    return {
        "primal_feasibility": float(np.maximum(0.0, 1.0 - margin).max()),
        "dual_feasibility": float(max(np.maximum(0.0, -lam).max(), np.maximum(0, gn - 1).max())),
        "complementary_slackness": float(np.max(lam * np.abs(margin - 1.0))),
        "stationarity": float(stat.max() / zn.max()),
        "duality_gap": float(abs(zn.sum() - lam.sum()) / zn.sum()),
    }


# --------------------------------------------------------------------------------------------
# Models, batched over R independent replicas (seeds / configs of one shape), device-agnostic
# --------------------------------------------------------------------------------------------


def _orthogonal(rows: int, cols: int, gen: torch.Generator, dtype, device) -> torch.Tensor:
    """An orthogonal (rows, cols) matrix as torch.nn.init.orthogonal_ (Saxe et al., 2014)."""
    a = torch.randn(max(rows, cols), min(rows, cols), generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r))
    q = q if rows >= cols else q.T
    return q.to(dtype=dtype, device=device)


def init_deep_gln(seeds: list[int], n_units: int, n_contexts: int, dim: int,
                  dtype=torch.float32, device="cpu") -> dict[str, torch.Tensor]:
    """Deep GLN parameters, one replica per seed: w1 (R, H, C, D) orthogonal per context (no
    first-layer bias; the constant feature plays that role), w2 (R, H) orthogonal (a unit
    vector), b2 (R,) = 0."""
    w1, w2 = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        w1.append(torch.stack([_orthogonal(n_units, dim, gen, dtype, device)
                               for _ in range(n_contexts)], 1))
        w2.append(_orthogonal(1, n_units, gen, dtype, device)[0])
    return {"w1": torch.stack(w1), "w2": torch.stack(w2),
            "b2": torch.zeros(len(seeds), dtype=dtype, device=device)}


def init_shallow_gln(seeds: list[int], n_contexts: int, dim: int, dtype=torch.float32,
                     device="cpu") -> dict[str, torch.Tensor]:
    """Shallow GLN: one linear predictor per context, w (R, C, D), orthogonal init."""
    return {"w": torch.stack([_orthogonal(n_contexts, dim, torch.Generator().manual_seed(s),
                                          dtype, device) for s in seeds])}


def init_relu(seeds: list[int], n_units: int, dim: int, dtype=torch.float32,
              device="cpu") -> dict[str, torch.Tensor]:
    """Two-layer ReLU network, Kaiming normal init (He et al., 2015): w1 (R, H, D) with sd
    sqrt(2/D), w2 (R, H) with sd sqrt(2/H), b2 = 0 (first-layer bias via the constant feature)."""
    w1, w2 = [], []
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        w1.append(torch.randn(n_units, dim, generator=gen, dtype=torch.float64)
                  * math.sqrt(2 / dim))
        w2.append(torch.randn(n_units, generator=gen, dtype=torch.float64)
                  * math.sqrt(2 / n_units))
    return {"w1": torch.stack(w1).to(dtype=dtype, device=device),
            "w2": torch.stack(w2).to(dtype=dtype, device=device),
            "b2": torch.zeros(len(seeds), dtype=dtype, device=device)}


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
    """f(x) = w2 . relu(w1 x) + b2. X (R, B, D) -> (R, B)."""
    hidden = torch.relu(torch.einsum("rbd,rhd->rbh", X, p["w1"]))
    return (hidden * p["w2"][:, None, :]).sum(-1) + p["b2"][:, None]


FORWARD = {"deep": forward_deep_gln, "shallow": forward_shallow_gln, "relu": forward_relu}


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


def train_batched(kind: str, params: dict, X: torch.Tensor, y: torch.Tensor,
                  ctx: torch.Tensor | None, schedule: Schedule, seeds: list[int]) -> dict:
    """Train R independent replicas in one tensor program with `schedule`.

    X (R, N, D), y (R, N) in {-1, +1}, ctx (R, N, H) / (R, N) / None. The loss is the sum over
    replicas of each replica's mean logistic loss, so every replica follows its own SGD path.
    Epochs of ceil(N / batch) mini-batches (the last one partial), reshuffled per replica by
    its own seed, so a replica's run does not depend on which others share the batch.
    """
    if kind == "shallow":
        return _train_shallow_lazy(params, X, y, ctx, schedule, seeds)
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
            yield step, lr, perm[:, start:start + B]
            step += 1


def _train_dense(kind: str, params: dict, X: torch.Tensor, y: torch.Tensor,
                 ctx: torch.Tensor | None, schedule: Schedule, seeds: list[int]) -> dict:
    forward = FORWARD[kind]
    params = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    # SGD with momentum written out (the update of torch.optim.SGD with dampening 0, no
    # Nesterov): v <- mu v + g, p <- p - lr v; avoids torch.optim's slow first import
    velocity = {k: torch.zeros_like(v) for k, v in params.items()}
    rows = torch.arange(X.shape[0], device=X.device)[:, None]
    targets = (y > 0).to(X.dtype)
    for _, lr, idx in _minibatches(X.shape[1], schedule, seeds, X.device):
        out = forward(params, X[rows, idx], None if ctx is None else ctx[rows, idx])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            out, targets[rows, idx], reduction="none").mean(1).sum()
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for (k, p), g in zip(params.items(), grads):
                if schedule.momentum:
                    velocity[k].mul_(schedule.momentum).add_(g)
                    g = velocity[k]
                p.sub_(lr * g)
    return {k: v.detach() for k, v in params.items()}


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
        return n * 0.0 if mu == 0 else mu * (1 - mu ** n) / (1 - mu)

    lr1, lr2 = schedule.lr, schedule.lr * schedule.lr_factor
    factor = lr1 * geometric(n1) + lr2 * mu ** n1 * geometric(n2)
    return factor, mu ** (t - s)


def _catch_up(W, V, last, rows, t, schedule) -> None:
    """Bring `rows` of the lazily updated weights and velocities to their state after step t."""
    factor, decay = _idle_steps_factors(last.index_select(0, rows), t, schedule)
    v = V.index_select(0, rows)
    W.index_add_(0, rows, v * factor.to(W.dtype)[:, None], alpha=-1)
    V.index_copy_(0, rows, v * decay.to(V.dtype)[:, None])
    last.index_fill_(0, rows, t)


@torch.no_grad()
def _train_shallow_lazy(params: dict, X: torch.Tensor, y: torch.Tensor, ctx: torch.Tensor,
                        schedule: Schedule, seeds: list[int]) -> dict:
    """The shallow GLN's SGD (momentum included) touching only the rows of the current batch.

    A mini-batch's gradient is zero outside the contexts of its samples; an idle row's
    velocity just decays and its weights drift along it, which has a closed form
    (`_idle_steps_factors`). So each row is brought up to date only when a batch uses it (and
    once at the end): O(batch x D) work per step instead of O(contexts x D): at 2^15 contexts a
    step touches 128 of 3 x 32,768 rows. Same iterates as `_train_dense` up to rounding (tested).
    """
    w = params["w"]
    R, C, D = w.shape
    W = w.reshape(R * C, D).clone()
    V = torch.zeros_like(W)
    last = torch.full((R * C,), -1, dtype=torch.long, device=W.device)  # W, V are after step
    rows = torch.arange(R, device=X.device)[:, None]
    offsets = rows * C
    targets = (y > 0).to(X.dtype)
    for step, lr, idx in _minibatches(X.shape[1], schedule, seeds, X.device):
        Xb, flat = X[rows, idx], (ctx[rows, idx] + offsets)
        used = torch.unique(flat)
        _catch_up(W, V, last, used, step - 1, schedule)
        out = (W[flat] * Xb).sum(-1)
        # gradient of the replica's mean logistic loss w.r.t. its output
        g = (torch.sigmoid(out) - targets[rows, idx]) / idx.shape[1]
        V.index_copy_(0, used, V.index_select(0, used) * schedule.momentum)
        V.index_add_(0, flat.reshape(-1), (g[..., None] * Xb).reshape(-1, D))
        W.index_add_(0, used, V.index_select(0, used), alpha=-lr)
        last.index_fill_(0, used, step)
    touched = torch.nonzero(last >= 0).squeeze(1)
    _catch_up(W, V, last, touched, schedule.n_steps - 1, schedule)
    return {"w": W.reshape(R, C, D)}


@torch.no_grad()
def predict_batched(kind: str, params: dict, X: torch.Tensor, ctx: torch.Tensor | None,
                    chunk: int = 2000) -> torch.Tensor:
    """Outputs (R, N) of R replicas on X (R, N, D) (or a shared (N, D)), in chunks."""
    forward = FORWARD[kind]
    R = next(iter(params.values())).shape[0]
    if X.dim() == 2:
        X = X.expand(R, *X.shape)
    outs = []
    for s in range(0, X.shape[1], chunk):
        c = None if ctx is None else ctx[:, s:s + chunk]
        outs.append(forward(params, X[:, s:s + chunk], c))
    return torch.cat(outs, 1)


# --------------------------------------------------------------------------------------------
# Sweep tasks (module-level, JSON in / JSON out, for `Chapter.sweep`)
# --------------------------------------------------------------------------------------------

SVM_METHODS = ("SVM-GLN", "SVM-L2", "SVM-L2-eq23", "SVM-shallow")


def solve_program(method: str, X: np.ndarray, y: np.ndarray, contexts: np.ndarray,
                  n_contexts: int, solver: str = "CLARABEL",
                  max_iters: int | None = None, device: str = "cpu") -> SVMResult:
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
        out = gln_solvers.shallow_svm(X, y, np.asarray(contexts).reshape(-1), n_contexts,
                                      device=dev)
    else:
        raise ValueError(f"unknown method {method!r}; valid: {SVM_METHODS}")
    return _from_fast(out)


def _from_fast(out) -> SVMResult:
    """Convert a `gln_solvers.SVMSolution` (objective in that module's convention)."""
    primal = None if out.weights is None else out.weights.detach().cpu().numpy()
    dual = None if out.dual is None else out.dual.detach().cpu().numpy()
    return SVMResult(primal, float(out.objective), str(out.status), "fast", dual,
                     float(out.solve_time), {"duality_gap": float(out.gap_relative),
                                             "iterations": int(out.iterations)})


def gln_problem(N: int, seed: int, n_val: int, n_units: int, n_contexts: int,
                median_init: bool) -> dict[str, np.ndarray]:
    """One seed's data and contexts: the seed draws both the training subset and the
    hyperplanes (the paper's 'context seeds')."""
    data = binary_mnist(N, seed, n_val)
    planes = sample_hyperplanes(pixel_features(data["X"]), n_units, n_contexts, seed,
                                median_init)
    data["ctx"] = assign_contexts(pixel_features(data["X"]), planes)
    data["ctx_val"] = assign_contexts(pixel_features(data["X_val"]), planes)
    return data


def _torch(a, dtype, device):
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def _task_device(task: dict) -> torch.device:
    """The task's device; on a CPU, one torch thread per process (on a shared or small CPU,
    more threads oversubscribe the cores: measured 3x slower on the 2-core machine)."""
    from implicit_bias.core.device import resolve_device

    device = resolve_device(task["device"])  # `Chapter.sweep` gives every task its device
    if device.type == "cpu":
        torch.set_num_threads(task.get("cpu_threads", 1))
    return device


def gd_task(task: dict) -> dict:
    """Train a deep GLN (`depth="deep"`, H units, C contexts) or a shallow GLN (`"shallow"`,
    C = 2^k contexts, H ignored) for every seed of `task["seeds"]` in one batched program with the
    paper's schedule; return per-seed final train/validation errors and packed validation signs.
    """
    start = time.perf_counter()
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds, depth = list(task["seeds"]), task["depth"]
    H = task["H"] if depth == "deep" else 1
    probs = [gln_problem(task["N"], s, task["n_val"], H, task["C"], task["median_init"])
             for s in seeds]
    X = _torch(np.stack([p["X"] for p in probs]), dtype, device)
    y = _torch(np.stack([p["y"] for p in probs]), dtype, device)
    ctx = torch.as_tensor(np.stack([p["ctx"] for p in probs]), device=device)
    ctx_val = torch.as_tensor(np.stack([p["ctx_val"] for p in probs]), device=device)
    X_val = _torch(probs[0]["X_val"], dtype, device)
    if depth == "deep":
        params = init_deep_gln(seeds, H, task["C"], X.shape[-1], dtype, device)
    else:
        params = init_shallow_gln(seeds, task["C"], X.shape[-1], dtype, device)
        ctx, ctx_val = ctx[..., 0], ctx_val[..., 0]
    schedule = Schedule(n_steps=task["n_steps"], lr_drop_step=task["lr_drop_step"],
                        momentum=task["momentum"])
    params = train_batched(depth, params, X, y, ctx, schedule, seeds)
    f_train = predict_batched(depth, params, X, ctx).double().cpu().numpy()
    f_val = predict_batched(depth, params, X_val, ctx_val).double().cpu().numpy()
    y_val = probs[0]["y_val"]
    return {
        "val_error": [error_rate(f, y_val) for f in f_val],
        "train_error": [error_rate(f, p["y"]) for f, p in zip(f_train, probs)],
        "pred_val": [pack_signs(f) for f in f_val],
        "seconds": time.perf_counter() - start,
    }


def svm_task(task: dict) -> dict:
    """Solve one convex program (`method` in SVM_METHODS) for every seed of the task; return
    per-seed validation/train errors, objective, solver status, time, group sparsity (units with
    ||zeta_h|| > 1e-6 max_h ||zeta_h||) and packed validation signs. A failed solve is recorded
    with its status (errors None)."""
    out = {k: [] for k in ("val_error", "train_error", "objective", "solver_status",
                           "solve_seconds", "active_units", "pred_val", "duality_gap")}
    method = task["method"]
    device = _task_device(task)
    for seed in task["seeds"]:
        H = task["H"] if method != "SVM-shallow" else 1
        p = gln_problem(task["N"], seed, task["n_val"], H, task["C"], task["median_init"])
        res = solve_program(method, p["X"], p["y"], p["ctx"], task["C"], task["solver"],
                            task.get("max_iters"), device=str(device))
        out["solver_status"].append(res.status)
        out["solve_seconds"].append(res.seconds)
        out["objective"].append(res.objective)
        out["duality_gap"].append(res.info.get("duality_gap"))
        if res.primal is None:
            for k in ("val_error", "train_error", "active_units", "pred_val"):
                out[k].append(None)
            continue
        predict = predict_shallow if method == "SVM-shallow" else predict_gln
        f_val = predict(res.primal, p["X_val"], p["ctx_val"])
        out["val_error"].append(error_rate(f_val, p["y_val"]))
        out["train_error"].append(error_rate(predict(res.primal, p["X"], p["ctx"]), p["y"]))
        norms = np.linalg.norm(res.primal.reshape(res.primal.shape[0], -1), axis=1)
        out["active_units"].append(int((norms > 1e-6 * norms.max()).sum()))
        out["pred_val"].append(pack_signs(f_val))
    worst = [s for s in out["solver_status"] if s != "optimal"]
    out["status"] = worst[0] if worst else "ok"
    return out


def relu_task(task: dict) -> dict:
    """Sec. 5.2: train ReLU networks (H units, one per seed, batched), then for every seed solve
    SVM-RC (Eq. 22 with random median-init hyperplane gates), SVM-LC (Eq. 22 with the trained
    network's gates [<w1_h, x> > 0]) and SVM-HL (linear SVM on the hidden activations plus a
    constant); return errors and inconsistencies with the GD-ReLU."""
    start = time.perf_counter()
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds, H, solver = list(task["seeds"]), task["H"], task["solver"]
    datas = [binary_mnist(task["N"], s, task["n_val"]) for s in seeds]
    X = _torch(np.stack([d["X"] for d in datas]), dtype, device)
    y = _torch(np.stack([d["y"] for d in datas]), dtype, device)
    X_val = _torch(datas[0]["X_val"], dtype, device)
    schedule = Schedule(n_steps=task["n_steps"], lr_drop_step=task["lr_drop_step"],
                        momentum=task["momentum"])
    params = train_batched("relu", init_relu(seeds, H, X.shape[-1], dtype, device), X, y, None,
                           schedule, seeds)
    f_gd = predict_batched("relu", params, X_val, None).double().cpu().numpy()
    out: dict = {"GD-ReLU": {"val_error": [error_rate(f, datas[0]["y_val"]) for f in f_gd]}}
    for name in ("SVM-RC", "SVM-LC", "SVM-HL"):
        out[name] = {k: [] for k in ("val_error", "inconsistency", "solver_status",
                                     "solve_seconds")}
    w1 = params["w1"].double().cpu().numpy()
    for r, (seed, d) in enumerate(zip(seeds, datas)):
        planes = sample_hyperplanes(pixel_features(d["X"]), H, 2, seed, median_init=True)
        programs = {
            "SVM-RC": (assign_contexts(pixel_features(d["X"]), planes) == 1,
                       assign_contexts(pixel_features(d["X_val"]), planes) == 1),
            "SVM-LC": (d["X"] @ w1[r].T > 0, d["X_val"] @ w1[r].T > 0),
        }
        for name, (g_tr, g_val) in programs.items():
            res = _frelu(d["X"], d["y"], g_tr, solver, str(device))
            f = None if res.primal is None else predict_frelu(res.primal, d["X_val"], g_val)
            _record(out[name], res, f, f_gd[r], d["y_val"])
        feats = np.hstack([np.maximum(d["X"] @ w1[r].T, 0), np.ones((len(d["X"]), 1))])
        feats_val = np.hstack([np.maximum(d["X_val"] @ w1[r].T, 0), np.ones((len(d["X_val"]), 1))])
        res = _linear(feats, d["y"], solver, str(device))
        _record(out["SVM-HL"], res, None if res.primal is None else feats_val @ res.primal,
                f_gd[r], d["y_val"])
    out["seconds"] = time.perf_counter() - start
    return out


def _frelu(X, y, gates, solver, device: str) -> SVMResult:
    if solver == "fast":
        from implicit_bias.models import gln_solvers

        return _from_fast(gln_solvers.svm_frelu(X, y, gates, device=device))
    return svm_frelu(X, y, gates, solver)


def _linear(F, y, solver, device: str) -> SVMResult:
    if solver == "fast":
        from implicit_bias.models import gln_solvers

        return _from_fast(gln_solvers.linear_svm(F, y, device=device))
    return svm_linear(F, y, solver)


def _record(slot: dict, res: SVMResult, f: np.ndarray | None, f_gd: np.ndarray,
            y_val: np.ndarray) -> None:
    slot["solver_status"].append(res.status)
    slot["solve_seconds"].append(res.seconds)
    slot["val_error"].append(None if f is None else error_rate(f, y_val))
    slot["inconsistency"].append(None if f is None else inconsistency(f, f_gd))


# --------------------------------------------------------------------------------------------
# Theorem 3.1 on a small separable problem (Fig. 1's two-dimensional GLN with H = C = 2)
# --------------------------------------------------------------------------------------------


def toy_problem(n_points: int = 40, seed: int = 0, min_margin: float = 0.1) -> dict:
    """Fig. 1's setting: x in [-1, 1]^2 with a constant feature (D = 3); unit 0's context is
    [x1 > 0], unit 1's is [x2 > 0] (H = C = 2); labels from a random teacher GLN, keeping only
    points with teacher margin >= `min_margin` (relative), so the data are GLN-separable."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(2, 2, 3))
    pts, X, ctx = [], None, None
    while len(pts) < n_points:
        x = rng.uniform(-1, 1, size=2)
        xf = np.array([x[0], x[1], 1.0])
        c = np.array([[int(x[0] > 0), int(x[1] > 0)]])
        f = predict_gln(teacher, xf[None], c)[0]
        if abs(f) >= min_margin * np.abs(teacher).sum() / 4:
            pts.append((xf, c[0], np.sign(f)))
    X = np.array([p[0] for p in pts])
    ctx = np.array([p[1] for p in pts], dtype=np.int64)
    y = np.array([p[2] for p in pts])
    return {"X": X, "y": y, "ctx": ctx, "teacher": teacher}


def toy_contexts(X: np.ndarray) -> np.ndarray:
    """The toy's contexts: unit 0 looks at the sign of x1, unit 1 at the sign of x2."""
    return np.stack([X[:, 0] > 0, X[:, 1] > 0], 1).astype(np.int64)


def gln_margins(w1: np.ndarray, w2: np.ndarray, X: np.ndarray, y: np.ndarray,
                ctx: np.ndarray) -> np.ndarray:
    """y_n f_w(x_n) for the bias-free (homogeneous) deep GLN."""
    return y * predict_gln(zeta_from_weights(w1, w2), X, ctx)


def train_full_batch_gln(X: np.ndarray, y: np.ndarray, ctx: np.ndarray, n_contexts: int,
                         n_steps: int, lr: float, init_scale: float = 0.1, seed: int = 0,
                         loss: str = "logistic", record: list[int] | None = None,
                         normalized: bool = False) -> list[dict]:
    """Full-batch gradient descent on the homogeneous deep GLN (no output bias, as Theorem 3.1
    assumes) with the logistic or exponential loss (mean over samples), float64, hand-written
    gradients (numpy; a tiny problem trained for many steps). With `normalized`, the step size is
    lr / loss (gradient descent on log L, which only speeds up the approach to the same limit
    direction; Nacson et al., 2019). Returns snapshots (step, w1, w2, loss) at `record` steps."""
    rng = np.random.default_rng(seed)
    N, D = X.shape
    H = ctx.shape[1]
    w1 = init_scale * rng.normal(size=(H, n_contexts, D))
    w2 = init_scale * rng.normal(size=H)
    gates = one_hot_contexts(ctx, n_contexts)  # (N, H, C)
    record = sorted(set(record or [n_steps]))
    snaps = []
    for step in range(n_steps + 1):
        # per-unit outputs u[n, h] = <w1[h, c_nh], x_n>
        u = np.einsum("nhc,hcd,nd->nh", gates, w1, X)
        margin = y * (u @ w2)
        # log of each sample's loss and of d loss / d margin, in log space so that the
        # normalized steps survive losses far below the float64 range
        if loss == "logistic":
            log_ell = np.where(margin > 30, -margin, np.log(np.logaddexp(0, -margin)))
            log_slope = -np.logaddexp(0, margin)  # log sigmoid(-m)
        elif loss == "exponential":
            log_ell = log_slope = -margin
        else:
            raise ValueError(f"unknown loss {loss!r}; valid: 'logistic', 'exponential'")
        log_value = float(np.logaddexp.reduce(log_ell) - math.log(N))
        value = math.exp(log_value)
        log_eta = math.log(lr) - (log_value if normalized else 0.0)
        dmargin = -np.exp(log_slope + log_eta) / N  # step size folded in
        if step == record[len(snaps)]:
            snaps.append({"step": step, "w1": w1.copy(), "w2": w2.copy(), "loss": value,
                          "log_loss": log_value})
            if len(snaps) == len(record):
                break
        g = dmargin * y  # dL/df_n
        grad_w2 = g @ u
        grad_w1 = np.einsum("n,nhc,nd->hcd", g, gates, X) * w2[:, None, None]
        w1 -= grad_w1
        w2 -= grad_w2
    return snaps


def kkt_residual_eq7(w1: np.ndarray, w2: np.ndarray, X: np.ndarray, y: np.ndarray,
                     ctx: np.ndarray, lam: np.ndarray | None = None) -> dict[str, float]:
    """How far w is from a KKT point of Eq. (6)/(7) (Theorem 3.1), with the multipliers the
    proof uses: lambda_n proportional to the loss-gradient weights exp(-margin_n) (the exponential
    tail of the logistic and exponential losses). After rescaling w so its smallest margin is 1
    (degree-2 homogeneity):

    * stationarity: min_{c > 0} ||w - c sum_n lambda_n y_n grad_w f_w(x_n)|| / ||w||, i.e. the
      sine of the angle between w and the negative loss gradient (Lyu & Li's approximate KKT);
    * complementary slackness: sum_n lambda_n (margin_n - 1) / sum_n lambda_n.

    Both tend to 0 as gradient descent converges in direction; they need no guess of the
    support set. Given multipliers `lam` (e.g. the SVM-GLN's), those are used instead."""
    H, C, D = w1.shape
    raw = gln_margins(w1, w2, X, y, ctx)
    if raw.min() <= 0:  # not yet separating: no KKT point to be near
        return {"stationarity": float("nan"), "complementary_slackness": float("nan")}
    if lam is None:
        lam = np.exp(-(raw - raw.min()))  # proportional to exp(-margin), overflow-safe
    margin = raw / raw.min()
    gates = one_hot_contexts(ctx, C)
    u = np.einsum("nhc,hcd,nd->nh", gates, w1, X)
    ly = lam * y
    direction = np.concatenate([(np.einsum("n,nhc,nd->hcd", ly, gates, X)
                                 * w2[:, None, None]).ravel(), ly @ u])
    w = np.concatenate([w1.ravel(), w2])
    cos = float(w @ direction / np.linalg.norm(w) / np.linalg.norm(direction))
    return {"stationarity": math.sqrt(max(0.0, 1.0 - cos**2)) if cos > 0 else 1.0,
            "complementary_slackness": float(lam @ (margin - 1) / lam.sum())}


def theorem_trajectory(problem: dict, snaps: list[dict], svm: SVMResult) -> list[dict]:
    """Per snapshot: cosine between the GD-GLN's zeta (Eq. 17) and the SVM-GLN solution, the
    cosine of the C^H predictors beta, the normalized margin min_n y_n f(x_n) / sum_h ||zeta_h||
    relative to the SVM-GLN's 1 / objective, and the Eq. (7) KKT residuals."""
    X, y, ctx = problem["X"], problem["y"], problem["ctx"]
    z_star = svm.primal
    b_star = all_predictors(z_star).ravel()
    rows = []
    for s in snaps:
        z = zeta_from_weights(s["w1"], s["w2"])
        b = all_predictors(z).ravel()
        H = z.shape[0]
        group = np.linalg.norm(z.reshape(H, -1), axis=1).sum()
        margin = (y * predict_gln(z, X, ctx)).min()
        rows.append({
            "step": s["step"], "log10_loss": s["log_loss"] / math.log(10),
            "cos_zeta": float(z.ravel() @ z_star.ravel()
                              / np.linalg.norm(z) / np.linalg.norm(z_star)),
            "cos_beta": float(b @ b_star / np.linalg.norm(b) / np.linalg.norm(b_star)),
            "margin_ratio": float(margin / group * svm.objective),
            **kkt_residual_eq7(s["w1"], s["w2"], X, y, ctx),
        })
    return rows


# --------------------------------------------------------------------------------------------
# Chapter helpers: task lists from a profile, result tables, metrics, the authors' numbers
# --------------------------------------------------------------------------------------------


def expand_blocks(blocks: list[dict]) -> list[dict]:
    """Each block is a dict of lists; return the product of every block, in order, deduplicated."""
    seen, out = set(), []
    for block in blocks:
        keys = list(block)
        for values in itertools.product(*(block[k] for k in keys)):
            cfg = dict(zip(keys, values))
            key = tuple(sorted(cfg.items()))
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


def _common(cfg: dict, device: str | None) -> dict:
    out = {"seeds": list(cfg["seeds"]), "n_val": cfg["n_val"], "n_steps": cfg["n_steps"],
           "lr_drop_step": cfg["lr_drop_step"], "dtype": cfg["dtype"]}
    return out if device is None else {**out, "device": device}


def gd_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """Deep GLN training tasks of a profile (one per (H, C, N, MI, momentum), seeds batched)."""
    return [{"depth": "deep", **c, **_common(cfg, device)}
            for c in expand_blocks(cfg["gln_blocks"])]


def svm_tasks(cfg: dict) -> list[dict]:
    """Convex-program tasks: every method for every (H, C, N, MI) of the GLN blocks."""
    configs = expand_blocks([{k: v for k, v in b.items() if k != "momentum"}
                             for b in cfg["gln_blocks"]])
    return [{"method": m, **c, "seeds": list(cfg["seeds"]), "n_val": cfg["n_val"],
             "solver": cfg["solver"]} for c in configs for m in cfg["svm_methods"]]


def shallow_gd_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """Shallow GLN training tasks (2^k contexts)."""
    return [{"depth": "shallow", "H": 1, "C": 2 ** c.pop("k"), **c, **_common(cfg, device)}
            for c in expand_blocks(cfg["shallow_blocks"])]


def shallow_svm_tasks(cfg: dict) -> list[dict]:
    """Shallow per-context SVM tasks, up to 2^shallow_svm_max_k contexts."""
    blocks = [{k: v for k, v in b.items() if k != "momentum"} for b in cfg["shallow_blocks"]]
    return [{"method": "SVM-shallow", "H": 1, "C": 2 ** c["k"], "N": c["N"],
             "median_init": c["median_init"], "seeds": list(cfg["seeds"]),
             "n_val": cfg["n_val"], "solver": cfg["solver"]}
            for c in expand_blocks(blocks) if c["k"] <= cfg["shallow_svm_max_k"]]


def relu_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """ReLU network tasks (GD-ReLU with its SVM-RC, SVM-LC and SVM-HL)."""
    return [{**c, **_common(cfg, device), "solver": cfg["solver"]}
            for c in expand_blocks(cfg["relu_blocks"])]


KEYS = ["depth", "H", "C", "N", "median_init"]


def gln_frame(gd_tasks_: list[dict], gd_results: list[dict], svm_tasks_: list[dict],
              svm_results: list[dict]) -> pd.DataFrame:
    """One row per (method, depth, H, C, N, MI, momentum, seed): validation error and, for the
    SVMs, the inconsistency with the GD network of the same configuration, seed and momentum,
    2p(1-p) of that GD network, and the paired SVM-minus-GD gap."""
    import pandas as pd

    rows, gd_signs = [], {}
    for t, r in zip(gd_tasks_, gd_results):
        method = "GD-GLN" if t["depth"] == "deep" else "GD-shallow-GLN"
        if r.get("status") == "error":  # a failed task: its rows are there, as missing
            rows += [{"method": method, "depth": t["depth"], "H": t["H"], "C": t["C"],
                      "N": t["N"], "median_init": t["median_init"], "momentum": t["momentum"],
                      "seed": seed, "val_error": None, "train_error": None, "status": "error"}
                     for seed in t["seeds"]]
            continue
        for i, seed in enumerate(t["seeds"]):
            key = (t["depth"], t["H"], t["C"], t["N"], t["median_init"], seed)
            gd_signs.setdefault(key, {})[t["momentum"]] = (
                unpack_signs(r["pred_val"][i], t["n_val"]), r["val_error"][i])
            rows.append({"method": method, "depth": t["depth"], "H": t["H"], "C": t["C"],
                         "N": t["N"], "median_init": t["median_init"],
                         "momentum": t["momentum"], "seed": seed,
                         "val_error": r["val_error"][i], "train_error": r["train_error"][i],
                         "status": "ok"})
    for t, r in zip(svm_tasks_, svm_results):
        depth = "shallow" if t["method"] == "SVM-shallow" else "deep"
        for i, seed in enumerate(t["seeds"]):
            status = r.get("solver_status", [r.get("error", "error")] * len(t["seeds"]))[i]
            err = r["val_error"][i] if "val_error" in r else None
            key = (depth, t["H"], t["C"], t["N"], t["median_init"], seed)
            for momentum, (signs, gd_err) in sorted(gd_signs.get(key, {None: (None, None)})
                                                    .items(), key=lambda kv: str(kv[0])):
                row = {"method": t["method"], "depth": depth, "H": t["H"], "C": t["C"],
                       "N": t["N"], "median_init": t["median_init"], "momentum": momentum,
                       "seed": seed, "val_error": err, "status": status}
                if err is not None and signs is not None:
                    svm_signs = unpack_signs(r["pred_val"][i], t["n_val"])
                    row.update(inconsistency=inconsistency(svm_signs, signs),
                               incons_uncorrelated=uncorrelated_inconsistency(gd_err),
                               svm_minus_gd=err - gd_err, gd_val_error=gd_err)
                rows.append(row)
    return pd.DataFrame(rows)


def summarize(frame: pd.DataFrame, value: str = "val_error") -> pd.DataFrame:
    """Mean, standard error (the paper's error bars) and count over seeds per configuration."""
    keys = ["method", "depth", "H", "C", "N", "median_init", "momentum"]
    g = frame.dropna(subset=[value]).groupby(keys, dropna=False)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"] / np.sqrt(out["count"])
    return out.rename(columns={"mean": f"{value}_mean", "se": f"{value}_se",
                               "std": f"{value}_std", "count": "n_seeds"})


def load_reference(root=None) -> pd.DataFrame:
    """The authors' published results (data/reference/lippl2022/gln.csv) with this module's
    column names (H, C, N, median_init, momentum; NaN momentum for the SVMs)."""
    import pandas as pd

    from implicit_bias.core.paths import project_root

    root = root or project_root() / "data" / "reference" / "lippl2022"
    ref = pd.read_csv(root / "gln.csv")
    ref = ref.rename(columns={"hidden_units": "H", "contexts": "C", "train_size": "N"})
    ref["method"] = ref["method"].replace({"SVM-shallow-GLN": "SVM-shallow"})
    ref.loc[ref["depth"] == "shallow", "H"] = 1  # this module's convention for shallow GLNs
    return ref


def compare_with_reference(summary: pd.DataFrame, ref: pd.DataFrame,
                           tolerance: float = 0.015) -> pd.DataFrame:
    """Our mean validation error beside the authors' for every cell we ran (same method, H, C,
    N, MI and, for GD, momentum); our SVM-L2-eq23 is compared with the authors' SVM-L2 too."""
    ours = summary.copy()
    ours["ref_method"] = ours["method"].replace({"SVM-L2-eq23": "SVM-L2"})
    ours["momentum_key"] = np.where(ours["method"].str.startswith("GD"), ours["momentum"], -1.0)
    ours = ours.drop_duplicates(["method", "depth", "H", "C", "N", "median_init",
                                 "momentum_key"])
    ref = ref.copy()
    ref["momentum_key"] = ref["momentum"].fillna(-1.0)
    ref = ref[ref["n_files"] > 0]
    cols = ["method", "depth", "H", "C", "N", "median_init", "momentum_key"]
    merged = ours.merge(ref[cols + ["val_error_mean", "val_error_se"]].rename(
        columns={"method": "ref_method", "val_error_mean": "paper_mean",
                 "val_error_se": "paper_se"}),
        on=["ref_method"] + cols[1:], how="inner")
    # cells whose runs the authors published without a final value are not comparable
    merged = merged.dropna(subset=["paper_mean"])
    merged["difference"] = merged["val_error_mean"] - merged["paper_mean"]
    merged["within_tolerance"] = merged["difference"].abs() <= tolerance
    keep = ["method", "depth", "H", "C", "N", "median_init", "momentum", "n_seeds",
            "val_error_mean", "val_error_se", "paper_mean", "paper_se", "difference",
            "within_tolerance"]
    return merged[keep].sort_values(["method", "C", "median_init", "H", "N"]).reset_index(
        drop=True)


def relu_frame(tasks: list[dict], results: list[dict]) -> pd.DataFrame:
    """One row per (method, H, N, momentum, seed) of the ReLU experiments (Sec. 5.2): validation
    error and, for the SVMs, inconsistency with the GD-ReLU and its 2p(1-p)."""
    import pandas as pd

    rows = []
    for t, r in zip(tasks, results):
        if r.get("status") == "error":  # a failed task: its rows are there, as missing
            rows += [{"method": m, "H": t["H"], "N": t["N"], "momentum": t["momentum"],
                      "seed": seed, "val_error": None, "status": "error"}
                     for seed in t["seeds"] for m in ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")]
            continue
        gd = r["GD-ReLU"]["val_error"]
        for i, seed in enumerate(t["seeds"]):
            base = {"H": t["H"], "N": t["N"], "momentum": t["momentum"], "seed": seed}
            rows.append({"method": "GD-ReLU", **base, "val_error": gd[i], "status": "ok"})
            for m in ("SVM-RC", "SVM-LC", "SVM-HL"):
                rows.append({"method": m, **base, "val_error": r[m]["val_error"][i],
                             "inconsistency": r[m]["inconsistency"][i],
                             "incons_uncorrelated": uncorrelated_inconsistency(gd[i]),
                             "gd_val_error": gd[i], "status": r[m]["solver_status"][i]})
    return pd.DataFrame(rows)


def best_per_n(frame: pd.DataFrame, method: str, query: str | None = None) -> pd.DataFrame:
    """Fig. 2c's statistic: per training size N and seed, the minimum validation error over all
    other hyperparameters, then mean and standard error over seeds."""
    f = frame[frame["method"] == method].dropna(subset=["val_error"])
    if query:
        f = f.query(query)
    per_seed = f.groupby(["N", "seed"])["val_error"].min().reset_index()
    out = per_seed.groupby("N")["val_error"].agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"] / np.sqrt(out["count"])
    out.insert(0, "method", method)
    return out


def _mean(series) -> float:
    s = pd.Series(series).dropna()
    return float(s.mean()) if len(s) else float("nan")


def gln_metrics(frame: pd.DataFrame) -> dict[str, float]:
    """The quantities behind the claims of Sec. 4.1 and C.1, from `gln_frame` rows (deep GLN).
    'main' is the paper's Fig. 2a set: median init, momentum 0, C in {2, 4}, per-seed points."""
    deep = frame[(frame["depth"] == "deep") & (frame["momentum"] == 0.0)]
    main = deep[deep["median_init"]]
    out: dict[str, float] = {}
    for m, tag in (("SVM-GLN", "gln"), ("SVM-L2", "l2"), ("SVM-L2-eq23", "l2eq23")):
        s = main[main["method"] == m].dropna(subset=["svm_minus_gd"])
        out[f"gap_{tag}_minus_gd"] = _mean(s["svm_minus_gd"])
        out[f"frac_{tag}_better_than_gd"] = _mean(s["svm_minus_gd"] < 0)
        out[f"corr_{tag}_gd"] = (float(np.corrcoef(s["val_error"], s["gd_val_error"])[0, 1])
                                 if len(s) > 2 else float("nan"))
        out[f"incons_{tag}"] = _mean(s["inconsistency"])
        out[f"frac_incons_{tag}_below_uncorrelated"] = _mean(
            s["inconsistency"] < s["incons_uncorrelated"])
    out["incons_l2_minus_gln"] = out["incons_l2"] - out["incons_gln"]
    # Fig. 2d: SVM-L2 minus SVM-GLN per H (C = 2, MI), averaged over N and seeds
    c2 = summarize(main[main["C"] == 2])
    piv = c2.pivot_table(index="H", columns="method", values="val_error_mean")
    if {"SVM-L2", "SVM-GLN"} <= set(piv.columns):
        gap = (piv["SVM-L2"] - piv["SVM-GLN"]).dropna()
        out["gap_l2_minus_gln_smallest_H"] = float(gap.iloc[0])
        out["gap_l2_minus_gln_largest_H"] = float(gap.iloc[-1])
        out["gap_l2_shrinks_with_H"] = bool(gap.iloc[0] > gap.iloc[-1])
    # Sec. C.1: without median init
    nomi = deep[~deep["median_init"]]
    if len(nomi):
        paired = summarize(deep[deep["method"] == "GD-GLN"]).pivot_table(
            index=["H", "C", "N"], columns="median_init", values="val_error_mean").dropna()
        out["gd_error_nomi_minus_mi"] = float((paired[False] - paired[True]).mean())
        s = nomi.dropna(subset=["inconsistency"])
        out["incons_l2_minus_gln_nomi"] = (_mean(s[s["method"] == "SVM-L2"]["inconsistency"])
                                           - _mean(s[s["method"] == "SVM-GLN"]["inconsistency"]))
        out["gap_gln_minus_gd_nomi"] = _mean(s[s["method"] == "SVM-GLN"]["svm_minus_gd"])
    # Sec. C.1 / Fig. 4c: C = 4 at the largest H, SVM-L2 minus SVM-GLN, smallest over N
    # SVM-only: rows without a paired GD run carry momentum NaN
    svm_rows = frame[(frame["depth"] == "deep") & frame["median_init"]
                     & (frame["momentum"].isna() | (frame["momentum"] == 0.0))]
    c4 = summarize(svm_rows[svm_rows["C"] == 4])
    if len(c4) and c4["H"].max() >= 100:
        last = c4[c4["H"] == c4["H"].max()].pivot_table(index="N", columns="method",
                                                          values="val_error_mean")
        if {"SVM-L2", "SVM-GLN"} <= set(last.columns):
            out["gap_l2_minus_gln_c4_h100_min_over_n"] = float(
                (last["SVM-L2"] - last["SVM-GLN"]).min())
    return out


def best_metrics(frame: pd.DataFrame, shallow: pd.DataFrame) -> dict[str, float]:
    """Fig. 2c: best shallow GLN (GD) vs the best deep SVM-L2 / SVM-GLN, per N (H <= 100)."""
    both = pd.concat([frame, shallow])
    b = {m: best_per_n(both, m).set_index("N")["mean"]
         for m in ("GD-shallow-GLN", "SVM-L2", "SVM-GLN", "GD-GLN")}
    return {"best_shallow_minus_best_l2": float((b["GD-shallow-GLN"] - b["SVM-L2"]).mean()),
            "best_l2_minus_best_gln": float((b["SVM-L2"] - b["SVM-GLN"]).mean())}


def relu_metrics(frame: pd.DataFrame, gln: pd.DataFrame | None = None) -> dict[str, float]:
    """The quantities behind the claims of Sec. 5.2 and C.2 (momentum 0 unless stated)."""
    f = frame[frame["momentum"] == 0.0]
    mean = {m: _mean(f[f["method"] == m]["val_error"]) for m in
            ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")}
    inc = {m: _mean(f[f["method"] == m]["inconsistency"]) for m in ("SVM-RC", "SVM-LC", "SVM-HL")}
    rc = f[f["method"] == "SVM-RC"].dropna(subset=["val_error"])
    out = {
        "corr_rc_gd_relu": (float(np.corrcoef(rc["val_error"], rc["gd_val_error"])[0, 1])
                            if len(rc) > 2 else float("nan")),
        "incons_rc": inc["SVM-RC"],
        "frac_incons_rc_below_uncorrelated": _mean(rc["inconsistency"]
                                                   < rc["incons_uncorrelated"]),
        "error_lc_minus_rc": mean["SVM-LC"] - mean["SVM-RC"],
        "incons_lc_minus_rc": inc["SVM-LC"] - inc["SVM-RC"],
        "error_hl_minus_lc": mean["SVM-HL"] - mean["SVM-LC"],
        "incons_hl_minus_lc": inc["SVM-HL"] - inc["SVM-LC"],
    }
    best = {m: best_per_n(frame, m).set_index("N")["mean"] for m in
            ("GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL")}
    out["best_hl_minus_best_gd_relu"] = float((best["SVM-HL"] - best["GD-ReLU"]).mean())
    s = summarize(f.assign(depth="relu", C=2, median_init=True))
    piv = s.pivot_table(index="H", columns="method", values="val_error_mean")
    out["frac_h_lc_better_than_rc"] = float(((piv["SVM-LC"] < piv["SVM-RC"])).mean())
    disparity = (piv["SVM-LC"] - piv["GD-ReLU"]).dropna()
    out["lc_disparity_grows_with_H"] = bool(disparity.iloc[-1] > disparity.iloc[0])
    if gln is not None:  # Fig. 3c: deep GLNs with C = 2 and H <= 50 (no more parameters)
        g = best_per_n(gln, "GD-GLN", "C == 2 and H <= 50").set_index("N")["mean"]
        out["best_lc_minus_best_gln"] = float((best["SVM-LC"] - g).mean())
        out["best_rc_minus_best_gln"] = float((best["SVM-RC"] - g).mean())
    return out


# --------------------------------------------------------------------------------------------
# Figures (the notebook calls these; each returns the figure and the numbers it plots)
# --------------------------------------------------------------------------------------------

METHOD_COLORS = {"GD-GLN": 7, "SVM-GLN": 0, "SVM-L2": 1, "SVM-L2-eq23": 4, "GD-ReLU": 7,
                 "SVM-RC": 1, "SVM-LC": 0, "SVM-HL": 2, "GD-shallow-GLN": 3,
                 "SVM-shallow": 5}


def _color(method: str) -> str:
    from implicit_bias.core.plotting import PALETTE

    return PALETTE[METHOD_COLORS.get(method, 6)]


def plot_toy(problem: dict, snap: dict, svm: SVMResult):
    """Fig. 1: the toy GLN (H = C = 2): data and the two units' contexts; the GD-GLN's output
    and its four per-region predictors; the SVM-GLN's output."""
    from implicit_bias.core.plotting import figure

    fig, axes = figure(1, 3)
    axes = np.ravel(axes)
    X, y = problem["X"], problem["y"]
    g = np.linspace(-1, 1, 201)
    gx, gy = np.meshgrid(g, g)
    grid = np.stack([gx.ravel(), gy.ravel(), np.ones(gx.size)], 1)
    gctx = toy_contexts(grid)
    zetas = {"GD-GLN (trained)": zeta_from_weights(snap["w1"], snap["w2"]),
             "SVM-GLN (Eq. 52)": svm.primal}
    ax = axes[0]
    for label, color in ((1, 0), (-1, 1)):
        sel = y == label
        ax.scatter(X[sel, 0], X[sel, 1], s=14, color=_palette(color), label=f"y = {label:+d}")
    ax.axvline(0, color="0.4", lw=1, ls="--", label="unit 1 context boundary")
    ax.axhline(0, color="0.4", lw=1, ls=":", label="unit 2 context boundary")
    ax.set(title="Fig. 1d-f: data and contexts", xlabel="$x_1$", ylabel="$x_2$")
    ax.legend(fontsize=6, loc="lower left")
    rows = []
    for ax, (name, z) in zip(axes[1:], zetas.items()):
        f = predict_gln(z, grid, gctx).reshape(gx.shape)
        ax.contourf(gx, gy, np.sign(f), levels=[-2, 0, 2], colors=[_palette(1), _palette(0)],
                    alpha=0.25)
        ax.contour(gx, gy, f, levels=[0], colors="k", linewidths=1.2)
        ax.scatter(X[:, 0], X[:, 1], s=8, c=[_palette(0 if v > 0 else 1) for v in y])
        ax.axvline(0, color="0.4", lw=0.8, ls="--")
        ax.axhline(0, color="0.4", lw=0.8, ls=":")
        ax.set(title=f"Fig. 1g: {name}", xlabel="$x_1$", ylabel="$x_2$")
        beta = all_predictors(z / np.abs(z).max())
        for c1, c2 in itertools.product(range(2), repeat=2):
            rows.append({"model": name, "context_unit1": c1, "context_unit2": c2,
                         **{f"beta_{i}": float(beta[c1, c2, i]) for i in range(3)}})
    return fig, pd.DataFrame(rows)


def _palette(i: int) -> str:
    from implicit_bias.core.plotting import PALETTE

    return PALETTE[i]


def plot_theorem(traj: pd.DataFrame):
    """Theorem 3.1 numerically: GD's normalized predictor approaches the SVM-GLN solution."""
    from implicit_bias.core.plotting import figure

    fig, axes = figure(1, 2)
    axes = np.ravel(axes)
    t = traj[traj["step"] > 0]
    ax = axes[0]
    ax.plot(t["step"], 1 - t["cos_zeta"], "o-", color=_palette(0),
            label=r"1 - cos($\zeta$, $\zeta^*$)")
    ax.plot(t["step"], 1 - t["cos_beta"], "s-", color=_palette(2),
            label=r"1 - cos($\beta$, $\beta^*$)")
    ax.plot(t["step"], 1 - t["margin_ratio"], "^-", color=_palette(1),
            label="1 - normalized margin / SVM's")
    ax.set(xscale="log", yscale="log", xlabel="full-batch GD step",
           title="Theorem 3.1: distance to SVM-GLN")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(t["step"], t["stationarity"], "o-", color=_palette(3), label="stationarity (Eq. 7)")
    ax.plot(t["step"], t["complementary_slackness"], "s-", color=_palette(4),
            label="complementary slackness")
    ax.set(xscale="log", yscale="log", xlabel="full-batch GD step", ylabel="residual",
           title="Eq. 7: approximate KKT residuals")
    ax.legend(fontsize=7)
    return fig, traj


def _errorbar(ax, x, y, xerr, yerr, method, label=None, marker="o", alpha=1.0, **kw):
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=marker, ms=4, color=_color(method),
                label=label or method, alpha=alpha, elinewidth=0.8, capsize=0, **kw)


def _pair_table(frame: pd.DataFrame, x_method: str, methods: list[str], keys: list[str]):
    """Config means (± se over seeds) of each method beside the reference method's."""
    s = frame.dropna(subset=["val_error"]).groupby(["method"] + keys)
    agg = s.agg(val_error=("val_error", "mean"), val_error_se=("val_error", "sem"),
                inconsistency=("inconsistency", "mean"),
                inconsistency_se=("inconsistency", "sem")).reset_index()
    ref = agg[agg["method"] == x_method][keys + ["val_error", "val_error_se"]].rename(
        columns={"val_error": "gd_error", "val_error_se": "gd_error_se"})
    return agg[agg["method"].isin(methods)].merge(ref, on=keys)


def plot_fig2ab(frame: pd.DataFrame, ref: pd.DataFrame | None, x_method: str = "GD-GLN",
                methods=("SVM-GLN", "SVM-L2", "SVM-L2-eq23"), title: str = "Fig. 2",
                keys=("H", "C", "N")):
    """Fig. 2a/3a (error of the network vs. the SVMs') and 2b/3b (inconsistency vs. the
    network's error, with the grey line 2p(1-p)); config means ± 1 s.e. over seeds. The
    authors' numbers (hollow markers) where they exist."""
    from implicit_bias.core.plotting import figure

    keys = list(keys)
    fig, axes = figure(1, 2, width=7.6)
    axes = np.ravel(axes)
    table = _pair_table(frame, x_method, list(methods), keys)
    for m in methods:
        t = table[table["method"] == m]
        _errorbar(axes[0], t["gd_error"], t["val_error"], t["gd_error_se"], t["val_error_se"], m)
        _errorbar(axes[1], t["gd_error"], t["inconsistency"], t["gd_error_se"],
                  t["inconsistency_se"], m)
    if ref is not None and len(ref):
        for m in ("SVM-GLN", "SVM-L2"):
            r = ref[ref["method"] == m]
            axes[0].scatter(r["gd_ref_val_error_mean"], r["val_error_mean"], s=16,
                            facecolors="none", edgecolors=_color(m), label=f"{m} (authors')")
            axes[1].scatter(r["gd_ref_val_error_mean"], r["inconsistency_mean"], s=16,
                            facecolors="none", edgecolors=_color(m), label=f"{m} (authors')")
    values = np.concatenate([table["gd_error"], table["val_error"]])
    lo, hi = 0.8 * float(np.nanmin(values)), 1.1 * float(np.nanmax(values))
    if ref is not None and len(ref):
        lo = min(lo, 0.8 * float(np.nanmin(ref["val_error_mean"])))
        hi = max(hi, 1.05 * float(np.nanmax(ref["val_error_mean"])))
    line = np.linspace(lo, hi, 50)
    axes[0].plot(line, line, color="0.6", lw=1, zorder=0, label="identical error")
    axes[1].plot(line, 2 * line * (1 - line), color="0.6", lw=1, zorder=0,
                 label="2p(1-p): uncorrelated")
    axes[0].set(xlabel=f"{x_method} validation error", ylabel="SVM validation error",
                title=f"{title}a: errors")
    axes[1].set(xlabel=f"{x_method} validation error", ylabel=f"inconsistency with {x_method}",
                title=f"{title}b: inconsistency")
    axes[0].legend(fontsize=6)
    axes[1].legend(fontsize=6)
    return fig, table


def plot_vs_h(summary: pd.DataFrame, ref: pd.DataFrame | None, methods, C: int = 2,
              title: str = "Fig. 2d", x_method: str = "GD-GLN"):
    """Fig. 2d/3d/4c: validation error vs. number of hidden units, one panel per N; ours solid
    (± 1 s.e.), the authors' dashed."""
    from implicit_bias.core.plotting import figure

    Ns = sorted(summary["N"].unique())
    fig, axes = figure(1, len(Ns), width=max(3.4 * len(Ns), 3.8))
    axes = np.atleast_1d(axes).ravel()
    rows = []
    for ax, N in zip(axes, Ns):
        for m in methods:
            s = summary[(summary["method"] == m) & (summary["N"] == N)
                        & (summary["C"] == C)].sort_values("H")
            if not len(s):
                continue
            ax.errorbar(s["H"], s["val_error_mean"], yerr=s["val_error_se"], marker="o",
                        ms=4, color=_color(m), label=m)
            rows.append(s.assign(source="ours"))
            if ref is not None:
                r = ref[(ref["method"] == m) & (ref["N"] == N) & (ref["C"] == C)
                        & (ref["n_files"] > 0)].sort_values("H")
                if len(r):
                    ax.plot(r["H"], r["val_error_mean"], ls="--", marker="x", ms=4,
                            color=_color(m), label=f"{m} (authors')")
        ax.set(xscale="log", xlabel="hidden units H", ylabel="validation error",
               title=f"{title}: C = {C}, N = {N}")
        hs = sorted(summary["H"].unique())
        ax.set_xticks(hs, [str(int(h)) for h in hs])
        ax.minorticks_off()
        ax.legend(fontsize=6)
    data = pd.concat(rows) if rows else pd.DataFrame()
    return fig, data


def plot_best(best: pd.DataFrame, ref_best: pd.DataFrame | None, title: str = "Fig. 2c"):
    """Fig. 2c/3c: the best model of each kind per training size (min over hyperparameters per
    seed, mean ± 1 s.e. over seeds); the authors' numbers dashed."""
    from implicit_bias.core.plotting import figure

    fig, ax = figure(1, 1, width=6.4)
    for m, s in best.groupby("label", sort=False):
        ax.errorbar(s["N"], s["mean"], yerr=s["se"], marker="o", ms=4,
                    color=_color(s["method"].iloc[0]), label=m)
    if ref_best is not None:
        for m, s in ref_best.groupby("label", sort=False):
            ax.plot(s["N"], s["mean"], ls="--", marker="x", ms=4,
                    color=_color(s["method"].iloc[0]), label=f"{m} (authors')")
    ax.set(xscale="log", xlabel="training set size N", ylabel="best validation error",
           title=f"{title}: best models")
    ns = sorted(best["N"].unique())
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.minorticks_off()
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the curves
    return fig, best


def reference_best(ref_root=None) -> pd.DataFrame:
    """The authors' Fig. 2c numbers (best.csv) labelled like `best_table`."""
    from implicit_bias.core.paths import project_root

    root = ref_root or project_root() / "data" / "reference" / "lippl2022"
    b = pd.read_csv(root / "best.csv")
    b = b[b["figure"] == "2c"]
    names = {("Shallow GLN", "GD"): ("GD-shallow-GLN", "shallow GLN, GD"),
             ("Shallow GLN", "SVM"): ("SVM-shallow", "shallow GLN, SVM"),
             ("Deep GLN (GLN Norm)", "GD"): ("GD-GLN", "deep GLN, GD"),
             ("Deep GLN (GLN Norm)", "SVM"): ("SVM-GLN", "deep GLN, SVM-GLN"),
             ("Deep GLN (L2 Norm)", "SVM"): ("SVM-L2", "deep GLN, SVM-L2")}
    rows = []
    for _, r in b.iterrows():
        key = (r["network"], r["training"])
        if key in names:
            rows.append({"method": names[key][0], "label": names[key][1], "N": r["train_size"],
                         "mean": r["val_error_mean"], "se": r["val_error_se"]})
    return pd.DataFrame(rows)


def best_table(frames: pd.DataFrame, labels: dict[str, str],
               queries: dict[str, str] | None = None) -> pd.DataFrame:
    """`best_per_n` for several methods, labelled, in one table."""
    queries = queries or {}
    out = [best_per_n(frames, m, queries.get(m)).assign(label=lab) for m, lab in labels.items()]
    return pd.concat(out, ignore_index=True)


def reference_frame(root=None) -> pd.DataFrame:
    """The authors' per-seed results (gln_per_seed.csv) as `gln_frame` rows, so the chapter's
    statistics can be computed on their numbers exactly as on ours (SVM rows are paired, as in
    their tables, with the GD-GLN at momentum 0)."""
    from implicit_bias.core.paths import project_root

    root = root or project_root() / "data" / "reference" / "lippl2022"
    r = pd.read_csv(root / "gln_per_seed.csv")
    r = r.rename(columns={"hidden_units": "H", "contexts": "C", "train_size": "N",
                          "gd_ref_val_error": "gd_val_error"})
    r["method"] = r["method"].replace({"SVM-shallow-GLN": "SVM-shallow"})
    r["momentum"] = r["momentum"].fillna(0.0)
    r = r[r["H"].isna() | (r["H"] <= 100)]
    r["H"] = r["H"].fillna(1).astype(int)
    cols = ["method", "depth", "H", "C", "N", "median_init", "momentum", "seed", "val_error",
            "inconsistency", "incons_uncorrelated", "svm_minus_gd", "gd_val_error"]
    return r[cols].dropna(subset=["val_error"]).reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Theory sections of the chapter, each returning (table, metrics)
# --------------------------------------------------------------------------------------------


def architecture_checks(sizes: list[list[int]], seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Lemma B.6 (Eq. 16) on GLN weights after a short training run, and Lemma B.7's count
    of free predictors (rank of zeta -> beta) for every (H, C) in `sizes`."""
    p = toy_problem(40, seed)
    snap = train_full_batch_gln(p["X"], p["y"], p["ctx"], 2, 2000, 0.5, seed=seed)[-1]
    beta = all_predictors(zeta_from_weights(snap["w1"], snap["w2"]))
    rng = np.random.default_rng(seed)
    rows = [{"H": H, "C": C, "rank of zeta -> beta": predictor_map_rank(H, C),
             "(C-1)H+1 (Lemma B.7)": (C - 1) * H + 1, "C^H predictors": C**H,
             "equivariance residual, random GLN": equivariance_residual(all_predictors(
                 zeta_from_weights(rng.normal(size=(H, C, 3)), rng.normal(size=H))))}
            for H, C in sizes]
    table = pd.DataFrame(rows)
    metrics = {
        "equivariance_residual_trained": max(equivariance_residual(beta),
                                             float(table.iloc[:, -1].max())),
        "equivariance_residual_unconstrained": equivariance_residual(
            rng.normal(size=beta.shape)),
        "lemma_b7_rank_matches": bool((table.iloc[:, 2] == table.iloc[:, 3]).all()),
    }
    return table, metrics


def norm_checks(seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Eq. 21 against Eq. 20 (H = C = 2), Eq. 25's A^2 = M, the constant of Eq. 24, and the
    closed-form SVM-L2 against enumerating the C^H predictors (small problems)."""
    rng = np.random.default_rng(seed)
    rows = []
    for D in (1, 3, 10):
        beta = all_predictors(rng.normal(size=(2, 2, D)))
        eq20, eq21 = gln_norm(beta), gln_norm_eq21(beta)
        rows.append({"check": f"Eq. 21 vs Eq. 20, D = {D}", "paper": eq21**2,
                     "independent": eq20**2, "ratio": eq21**2 / eq20**2})
    ratios = [r["ratio"] for r in rows]
    ident = []
    for H, C in ((2, 2), (3, 2), (3, 3), (4, 2)):
        zeta = rng.normal(size=(H, C, 3))
        brute = float((all_predictors(zeta) ** 2).sum())
        ident.append(abs(beta_norm_sq_eq24(zeta) - brute) / brute)
        rows.append({"check": f"||beta||^2: C^(H-2) zeta'M zeta vs enumeration, H={H} C={C}",
                     "paper": beta_norm_sq_eq24(zeta), "independent": brute,
                     "ratio": beta_norm_sq_eq24(zeta) / brute})
        eq23 = C ** (H - 2) * a_zeta_norm_sq(zeta)
        rows.append({"check": f"||beta||^2: C^(H-2) ||A zeta||^2 (Eq. 23/25), H={H} C={C}",
                     "paper": eq23, "independent": brute, "ratio": eq23 / brute})
    a2 = [a_squared_minus_m(H, C) for H, C in ((2, 2), (3, 2), (4, 4))]
    a2c = [a_squared_minus_m(H, C, corrected=True) for H, C in ((2, 2), (3, 2), (4, 4))]
    rows.append({"check": "max |A^2 - M|, Eq. 25 coefficients", "paper": max(a2),
                 "independent": 0.0, "ratio": float("nan")})
    rows.append({"check": "max |A^2 - M|, corrected coefficients", "paper": max(a2c),
                 "independent": 0.0, "ratio": float("nan")})
    # SVM-L2 closed form vs brute-force enumeration of the C^H predictors
    X = np.hstack([rng.normal(size=(16, 3)), np.ones((16, 1))])
    ctx = rng.integers(0, 2, size=(16, 3))
    y = np.where(predict_gln(rng.normal(size=(3, 2, 4)), X, ctx) > 0, 1.0, -1.0)
    closed = svm_l2(X, y, ctx, 2).objective * 2 ** (3 - 1)
    zs = [cp.Variable((2, 4)) for _ in range(3)]
    betas = {g: sum(zs[h][g[h]] for h in range(3)) for g in itertools.product(range(2), repeat=3)}
    prob = cp.Problem(cp.Minimize(sum(cp.sum_squares(b) for b in betas.values())),
                      [y[n] * (betas[tuple(ctx[n])] @ X[n]) >= 1 for n in range(16)])
    brute = prob.solve(solver="CLARABEL")
    rows.append({"check": "SVM-L2: closed form vs enumerating 8 predictors (H=3, C=2)",
                 "paper": closed, "independent": brute, "ratio": closed / brute})
    metrics = {
        "eq21_over_eq20_squared": float(np.mean(ratios)),
        "eq21_ratio_spread": float(np.ptp(ratios)),
        "a2_minus_m_max_abs": float(max(a2)),
        "a2_minus_m_corrected_max_abs": float(max(a2c)),
        "beta_norm_identity_rel_error": float(max(ident)),
        "svm_l2_closed_vs_enumeration_rel": float(abs(closed - brute) / brute),
    }
    return pd.DataFrame(rows), metrics


def theorem_experiment(n_points: int, n_steps: int, lr: float, seed: int = 0,
                       loss: str = "logistic") -> tuple[dict, list[dict], SVMResult, pd.DataFrame,
                                                         dict]:
    """Theorem 3.1 on Fig. 1's toy problem: full-batch GD (log-spaced checkpoints) against the
    SVM-GLN solved by cvxpy (Clarabel); returns problem, snapshots, SVM, trajectory, metrics."""
    p = toy_problem(n_points, seed)
    svm = svm_gln(p["X"], p["y"], p["ctx"], 2, solver="CLARABEL")
    record = sorted({0, *np.unique(np.geomspace(10, n_steps, 12).astype(int)).tolist()})
    snaps = train_full_batch_gln(p["X"], p["y"], p["ctx"], 2, n_steps, lr, seed=seed,
                                 loss=loss, record=record)
    traj = pd.DataFrame(theorem_trajectory(p, snaps, svm))
    sep = traj[traj["margin_ratio"] > 0]  # after the data are separated
    metrics = {
        "theorem_distance_decreasing": bool(np.all(np.diff(1 - sep["cos_beta"]) < 0)
                                            and np.all(np.diff(sep["margin_ratio"]) > 0)),
        "theorem_kkt_decreasing": bool(np.all(np.diff(sep["stationarity"]) < 0)),
        "theorem_final_cos_beta": float(traj["cos_beta"].iloc[-1]),
        "theorem_final_margin_ratio": float(traj["margin_ratio"].iloc[-1]),
        "theorem_final_stationarity": float(traj["stationarity"].iloc[-1]),
    }
    return p, snaps, svm, traj, metrics


def kkt_experiment(N: int, n_val: int, reference_solver: str = "ECOS", H: int = 10,
                   C: int = 2, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """SVM-GLN on one MNIST problem by the fast solver and by cvxpy (`reference_solver`): the KKT
    residuals of Eq. 52/56 for both, and their agreement (objective, held-out predictions)."""
    p = gln_problem(N, seed, n_val, H, C, True)
    rows, sols = [], {}
    for solver in ("fast", reference_solver):
        res = solve_program("SVM-GLN", p["X"], p["y"], p["ctx"], C, solver)
        sols[solver] = res
        rows.append({"solver": solver, "status": res.status, "objective": res.objective,
                     "seconds": res.seconds, **svm_gln_kkt(res, p["X"], p["y"], p["ctx"], C)})
    f = {s: predict_gln(r.primal, p["X_val"], p["ctx_val"]) for s, r in sols.items()}
    fast, ref = sols["fast"], sols[reference_solver]
    table = pd.DataFrame(rows)
    metrics = {
        "svm_gln_kkt_max": float(table[table["solver"] == "fast"].iloc[0, 4:].max()),
        "svm_gln_kkt_max_reference": float(table[table["solver"] != "fast"].iloc[0, 4:].max()),
        "svm_gln_fast_vs_ecos_objective_rel": abs(fast.objective - ref.objective)
        / ref.objective,
        "svm_gln_fast_vs_ecos_val_disagreement": inconsistency(f["fast"], f[reference_solver]),
    }
    return table, metrics


def seed_pairing_inconsistency(gd_tasks_: list[dict], gd_results: list[dict],
                               svm_tasks_: list[dict], svm_results: list[dict],
                               method: str = "SVM-GLN") -> pd.DataFrame:
    """Inconsistency between `method` and the GD-GLN (momentum 0) per configuration, pairing
    each SVM with the GD network of the same seed (same hyperplanes and training subset: the
    definition) and, for comparison, with GD networks of the other seeds; plus GD vs GD across
    seeds. Shows what the inconsistency of unrelated draws of the same configuration is."""
    gd = {(t["H"], t["C"], t["N"], t["median_init"]): (t, r) for t, r in zip(gd_tasks_, gd_results)
          if t["depth"] == "deep" and t["momentum"] == 0.0 and "pred_val" in r}
    rows = []
    for t, r in zip(svm_tasks_, svm_results):
        key = (t["H"], t["C"], t["N"], t["median_init"])
        if t["method"] != method or key not in gd or None in r.get("pred_val", [None]):
            continue
        gt, gr = gd[key]
        S = [unpack_signs(p, t["n_val"]) for p in r["pred_val"]]
        G = [unpack_signs(p, gt["n_val"]) for p in gr["pred_val"]]
        k = len(S)
        rows.append({"H": t["H"], "C": t["C"], "N": t["N"], "median_init": t["median_init"],
                     "same seed (definition)": np.mean([inconsistency(S[i], G[i])
                                                        for i in range(k)]),
                     "SVM vs GD of another seed": np.mean([inconsistency(S[i], G[j])
                                                           for i in range(k) for j in range(k)
                                                           if i != j]),
                     "GD vs GD of another seed": np.mean([inconsistency(G[i], G[j])
                                                          for i in range(k)
                                                          for j in range(i + 1, k)])})
    return pd.DataFrame(rows)


def committed_paper_comparison() -> tuple[pd.DataFrame, dict] | None:
    """The committed paper-profile comparison with the authors' numbers
    (`results/paper/gln_norm/comparison_with_authors.csv`, written by the paper-profile run of
    the chapter) and that run's claims report (`results/paper/claims/gln_norm.json`), or None
    if they are not committed.

    Lets every profile of the chapter show the paper-scale table; it is read-only and never
    enters the smoke profile's claims.
    """
    import json

    import pandas as pd

    from ..core.paths import project_root

    results = project_root() / "results" / "paper"
    table = results / "gln_norm" / COMPARISON_FILE
    report = results / "claims" / "gln_norm.json"
    if not (table.exists() and report.exists()):
        return None
    return pd.read_csv(table), json.loads(report.read_text())


COMPARISON_FILE = "comparison_with_authors.csv"
