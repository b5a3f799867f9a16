"""Reference convex programs shared by several chapters (cvxpy, solver status always kept).

These are the *independent* references that gradient-descent limits are checked against: the
minimum-norm interpolators of underdetermined regression and the hard-margin max-margin
classifiers. A failed solve is returned with its status and `x = None`, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np


@dataclass
class ConvexSolution:
    x: np.ndarray | None
    status: str
    objective: float
    solver: str

    @property
    def ok(self) -> bool:
        return self.status == "optimal" and self.x is not None


def _solve(problem: cp.Problem, variable: cp.Variable, solver: str) -> ConvexSolution:
    try:
        problem.solve(solver=solver)
    except cp.error.SolverError as err:  # recorded, as the papers' missing points
        return ConvexSolution(None, f"solver_error: {err}", float("nan"), solver)
    x = None if variable.value is None else np.asarray(variable.value, dtype=float)
    objective = float(problem.value) if problem.value is not None else float("nan")
    return ConvexSolution(x, str(problem.status), objective, solver)


def min_l2_interpolator(
    X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None
) -> ConvexSolution:
    """argmin sum_i x_i^2 / w_i  s.t.  X x = y  (closed form; w = 1 gives X^+ y).

    With weights w the solution is W X^T (X W X^T)^+ y, W = diag(w): the RKHS-norm interpolator
    of the kernel x^T W x' (the NTK regime of diagonal networks).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if weights is None:
        x = np.linalg.pinv(X) @ y
        objective = float(x @ x)
    else:
        w = np.asarray(weights, dtype=float)
        if np.any(w <= 0):
            raise ValueError("weights must be positive")
        XW = X * w
        x = w * (X.T @ np.linalg.lstsq(XW @ X.T, y, rcond=None)[0])
        objective = float(np.sum(x**2 / w))
    residual = np.linalg.norm(X @ x - y) / max(np.linalg.norm(y), 1e-300)  # type: ignore[operator]  # max of a numpy floating and a float
    status = "optimal" if residual < 1e-8 else f"inconsistent (residual {residual:.1e})"
    return ConvexSolution(x, status, objective, "closed_form")


def min_l1_interpolator(X: np.ndarray, y: np.ndarray, solver: str = "CLARABEL") -> ConvexSolution:
    """Basis pursuit: argmin ||x||_1 s.t. X x = y (the rich-regime limit)."""
    X = np.asarray(X, dtype=float)
    x = cp.Variable(X.shape[1])
    problem = cp.Problem(cp.Minimize(cp.norm1(x)), [X @ x == np.asarray(y, dtype=float)])
    return _solve(problem, x, solver)


def max_margin(
    X: np.ndarray, y: np.ndarray, norm: str = "l2", solver: str = "CLARABEL"
) -> ConvexSolution:
    """Hard-margin classifier: argmin ||w|| s.t. y_i <x_i, w> >= 1 (no bias term).

    `norm` is "l2" (the SVM; objective reported as ||w||_2) or "l1" (an LP).
    Non-separable data comes back with status "infeasible".
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w = cp.Variable(X.shape[1])
    if norm == "l2":
        objective = cp.norm2(w)
    elif norm == "l1":
        objective = cp.norm1(w)
    else:
        raise ValueError(f"unknown norm {norm!r}; valid: 'l1', 'l2'")
    problem = cp.Problem(cp.Minimize(objective), [cp.multiply(y, X @ w) >= 1])
    return _solve(problem, w, solver)
