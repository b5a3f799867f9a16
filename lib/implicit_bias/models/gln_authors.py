"""SVM-L2 as the authors' code solves it (Lippl, Abbott & Chung, 2022; the convex program of their
`functions/train_convex.py`, commit 002054c), beside the paper's SVM-L2.

Their program stores zeta as a matrix with one row per (unit h, context c), row r = h C + c, and
builds the norm of Eq. (23) as printed,

    ||A zeta||^2 = sum_r || C zeta_r - sum_{r' of r's unit} zeta_r' + (1/(HC)) sum_r' zeta_r' ||^2,

through cvxpy's `reshape`, whose default order in the cvxpy version they used (1.1) is
column-major. Followed through, the column-major reshapes put row r in the group of the rows
r' = r (mod H) instead of its unit's rows (those with the same r div C): the "units" the norm
ties are the groups g(h, c) = (h C + c) mod H, each of C rows. The margin constraints are built
in row-major order and are the architecture's. So the program is

    min_zeta  Q(zeta) = sum_r ||zeta_r - m_g(r)||^2 + ||sum_r zeta_r||^2 / (H C^3)
    s.t.      y_n sum_h <zeta_{h, c_nh}, x_n> >= 1,

with m_g the mean of group g's rows (Q is ||A zeta||^2 / C^2, the convention of SVM-L2-eq23 in
`implicit_bias.models.gln_svm`). With groups equal to units (H = 1 or C = 1, where the
permutation is the identity) it is SVM-L2-eq23.

Q vanishes on every zeta that is constant on each group with zero sum over groups. For the
paper's norm those directions do not change any predictor; with the permuted groups they do (a
sample's output picks a number of rows of each group that varies with its contexts), so they
separate data at no cost: the program's minimizers form a set, often unbounded, and which one a
solver returns decides the held-out error. `svm_l2_authors` returns the minimizer of smallest
||zeta||_2 (the limit of adding ridge ||zeta||^2 as ridge -> 0); `svm_l2_authors_cvxpy` poses
the program in cvxpy on the full input dimension, as the authors did (their solver: OSQP), and
returns the minimizer that solver finds.
"""

from __future__ import annotations

import time

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
import torch

from .gln import one_hot_contexts as one_hot_gates
from .gln_ipm import (
    Array,
    SVMSolution,
    _check_certificate,
    _check_labels,
    _device,
    _finish_kernel,
    _kernel_svm,
    _sync,
    _tensor,
    one_hot_contexts,
    predict_gln,
)
from .gln_svm import SVMResult, _margin_operator, _solve


def authors_groups(n_units: int, n_contexts: int) -> np.ndarray:
    """(H, C) int: the group that the authors' column-major reshape assigns to (unit h, context
    c), (h C + c) mod H; the paper's norm groups by unit (h)."""
    rows = np.arange(n_units * n_contexts)
    return (rows % n_units).reshape(n_units, n_contexts)


def authors_objective(zeta: np.ndarray) -> float:
    """Q(zeta) = ||A zeta||^2 / C^2 of the authors' program (module docstring), zeta (H, C, D)."""
    H, C, D = zeta.shape
    rows = np.asarray(zeta, dtype=np.float64).reshape(H * C, D)
    group = authors_groups(H, C).reshape(-1)
    means = np.stack([rows[group == g].mean(0) for g in range(H)])
    residual = rows - means[group]
    return float((residual**2).sum() + (rows.sum(0) ** 2).sum() / (H * C**3))


def _row_groups(n_units: int, n_contexts: int, device) -> torch.Tensor:
    """`authors_groups` of the rows r = h C + c, flattened, as a tensor."""
    return torch.arange(n_units * n_contexts, device=device) % n_units


def _group_counts(contexts: torch.Tensor, n_contexts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows r = h C + c each sample uses (N, HC), and how many of them fall in each of the
    authors' groups (N, H)."""
    H = contexts.shape[-1]
    Z = one_hot_contexts(contexts, n_contexts)
    group = _row_groups(H, n_contexts, contexts.device)
    member = (group[:, None] == torch.arange(H, device=contexts.device)[None]).to(Z.dtype)
    return Z, Z @ member


def authors_context_kernel(contexts: torch.Tensor, n_contexts: int, ridge: float) -> torch.Tensor:
    """The context part of the kernel of min Q(zeta) + ridge ||zeta||^2: g_n^T (N + ridge I)^-1
    g_m, with g_n the rows sample n uses and Q = zeta^T N zeta. N has eigenvalue 1 on rows with
    zero sum in every group, 1/C^2 on the constant, 0 on group-constant zero-sum rows; with
    S_nm rows shared and a_n the group counts, g_n^T B g_m = a_n . a_m / C (B: group means), so

        k = (S - a.a / C) / (1 + ridge) + (a.a - H) / (C ridge) + (H / C) / (1 / C^2 + ridge).
    """
    Z, A = _group_counts(contexts, n_contexts)
    H, C = contexts.shape[-1], n_contexts
    S, AA = Z @ Z.T, A @ A.T
    return (S - AA / C) / (1 + ridge) + (AA - H) / (C * ridge) + (H / C) / (1 / C**2 + ridge)


def svm_l2_authors(
    X: Array,
    y: Array,
    contexts: Array,
    n_contexts: int,
    ridge: float = 1e-7,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """The authors' SVM-L2 program (module docstring), its minimum-norm minimizer: min Q(zeta) +
    ridge ||zeta||^2 s.t. y_n sum_h <zeta_{h, c_nh}, x_n> >= 1, a hard-margin kernel SVM
    (`authors_context_kernel`) solved by the interior-point method of the fast solvers, zeta
    recovered in closed form as (N + ridge I)^-1 Phi lam.

    A small ridge selects, among the minimizers of Q, the one of smallest ||zeta|| (the limit
    ridge -> 0; 1e-7 agrees with 1e-8 to seven digits of Q on MNIST problems of the paper's
    grid, while 1e-9 is below float64's resolution of the kernel). `objective` is the certified
    objective of the ridged program; `extra["authors_objective"]` is Q(zeta).
    """
    dev = _device(device, X)
    X = _tensor(X, dev)
    y = _tensor(y, dev)
    ctx = _tensor(contexts, dev, torch.long)
    _check_labels(y)
    N, D = X.shape
    H, C = ctx.shape[1], int(n_contexts)
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    Kx = (X @ X.T) * authors_context_kernel(ctx, C, ridge)
    mask = torch.ones(1, N, dtype=torch.bool, device=dev)
    out = _kernel_svm(Kx[None], y[None], mask, False, tol, max_iter)
    lam = out["lam"][0]
    Z, _ = _group_counts(ctx, C)
    G = (Z * (lam * y)[:, None]).T @ X  # (HC, D): sum_n lam_n y_n g_n[r] x_n
    group = _row_groups(H, C, dev)
    means = torch.zeros(H, D, dtype=G.dtype, device=dev).index_add_(0, group, G) / C
    within, total = means[group], G.sum(0, keepdim=True) / (H * C)
    rows = (G - within) / (1 + ridge) + (within - total) / ridge + total / (1 / C**2 + ridge)
    zeta = rows.reshape(H, C, D)
    _sync(dev)
    sol = _finish_kernel(
        "svm_l2_authors",
        out["status"][0],
        lam,
        0.0,
        Kx,
        y,
        mask[0],
        False,
        out["iterations"][0],
        time.perf_counter() - t0,
        time.process_time() - c0,
        zeta,
        extra={"ridge": ridge},
    )
    sol = _check_certificate(sol, tol)
    if sol.weights is not None:
        z = zeta.cpu().numpy()
        sol.extra["authors_objective"] = authors_objective(z)
        direct = y * predict_gln(zeta, X, ctx)  # margins from zeta against the kernel's
        sol.extra["zeta_margin_mismatch"] = float((direct - y * (Kx @ (lam * y))).abs().max())
    return sol


def svm_l2_authors_cvxpy(
    X: np.ndarray,
    y: np.ndarray,
    contexts: np.ndarray,
    n_contexts: int,
    solver: str = "OSQP",
    max_iters: int | None = None,
) -> SVMResult:
    """The authors' SVM-L2 program posed in cvxpy as they posed it: zeta over the full input
    dimension D (no reduction to the data's row space), Q(zeta) of the module docstring as a
    sum of squares, the margin constraints; solved by `solver` (theirs: OSQP, at most 10,000
    iterations, cvxpy's default). Returns the minimizer the solver finds (the program has many;
    module docstring). `primal` is zeta (H, C, D), `objective` Q(zeta)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    D = X.shape[1]
    H, C = contexts.shape[1], n_contexts
    gates = one_hot_gates(contexts, C)  # (N, H, C)
    z = cp.Variable(H * C * D)  # vec(zeta), row r = h C + c, then the input dimension
    margin = _margin_operator(X, y, gates) @ z >= 1
    group = authors_groups(H, C).reshape(-1)
    member = sp.csr_matrix((np.ones(H * C), (group, np.arange(H * C))), shape=(H, H * C))
    group_mean = sp.kron(member.T @ member / C, sp.eye(D))  # each row -> its group's mean
    residual = sp.eye(H * C * D) - group_mean
    total = sp.kron(np.ones((1, H * C)), sp.eye(D))
    objective = cp.sum_squares(residual @ z) + cp.sum_squares(total @ z) / (H * C**3)
    problem = cp.Problem(cp.Minimize(objective), [margin])
    start = time.perf_counter()
    status = _solve(problem, solver, max_iters)
    seconds = time.perf_counter() - start
    if z.value is None:
        return SVMResult(None, float("nan"), status, solver, None, seconds)
    zeta = np.asarray(z.value).reshape(H, C, D)
    dual = None if margin.dual_value is None else np.asarray(margin.dual_value, dtype=np.float64)
    return SVMResult(zeta, authors_objective(zeta), status, solver, dual, seconds)
