"""__title__

Pure numerics (numpy, scipy, torch, cvxpy only: no pandas, no matplotlib, no
project machinery, no files), so that each function can be read and tested on its own.

The example: gradient descent on the least-squares loss of an underdetermined linear problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def random_problem(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian design (n x d) and targets; with n < d it has infinitely many interpolators."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


@dataclass
class GradientDescentRun:
    w: np.ndarray
    steps: int
    converged: bool


def gradient_descent(
    X: np.ndarray, y: np.ndarray, max_steps: int, tol: float
) -> GradientDescentRun:
    """Gradient descent from w = 0 on L(w) = |Xw - y|^2 / 2 with step 1/lambda_max(X^T X),
    stopped when the gradient norm falls below `tol` or after `max_steps` (unconverged)."""
    step = 1.0 / np.linalg.norm(X, 2) ** 2
    w = np.zeros(X.shape[1])
    for k in range(max_steps):
        grad = X.T @ (X @ w - y)
        if np.linalg.norm(grad) < tol:
            return GradientDescentRun(w, k, True)
        w = w - step * grad
    return GradientDescentRun(w, max_steps, False)


def min_norm_interpolator(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin |w| subject to Xw = y, by least squares (an independent computation)."""
    return np.linalg.lstsq(X, y, rcond=None)[0]
