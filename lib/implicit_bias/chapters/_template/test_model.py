"""Tests of implicit_bias.models.__chapter__ against independent computations."""

import numpy as np

from implicit_bias.models.__chapter__ import gradient_descent, min_norm_interpolator, random_problem


def test_gradient_descent_from_zero_reaches_the_min_norm_interpolator():
    X, y = random_problem(10, 30, seed=0)
    run = gradient_descent(X, y, max_steps=50_000, tol=1e-12)
    assert run.converged
    assert np.allclose(run.w, np.linalg.pinv(X) @ y, atol=1e-9)


def test_a_step_cap_is_reported_as_unconverged():
    X, y = random_problem(10, 30, seed=0)
    assert not gradient_descent(X, y, max_steps=3, tol=1e-12).converged


def test_min_norm_interpolator_interpolates_and_is_orthogonal_to_the_null_space():
    X, y = random_problem(5, 12, seed=1)
    w = min_norm_interpolator(X, y)
    null = np.linalg.svd(X)[2][5:]
    assert np.allclose(X @ w, y) and np.allclose(null @ w, 0, atol=1e-12)
