"""Tests of SVM-L2 as the authors' code solves it (`implicit_bias.models.gln_authors`), against
independent computations: the authors' construction of their norm with explicit column-major
reshapes (cvxpy), the explicit inverse of the ridged norm, cvxpy solves of the same program, and
the paper's SVM-L2-eq23 where the column-major order permutes nothing."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import torch

from implicit_bias.models import gln_authors, gln_solvers
from implicit_bias.models.gln import predict_gln


@pytest.fixture(autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _their_norm(rows: np.ndarray, H: int, C: int, order: str) -> float:
    """The authors' construction of ||A zeta||^2 (their functions/train_convex.py), step by step
    on a numeric (H C, D) matrix with row r = h C + c: the total over rows, the sum over each
    unit's contexts and C zeta - that sum, all through cvxpy reshapes of the stated `order`
    (their cvxpy 1.1 used column-major, "F", by default)."""
    D = rows.shape[1]
    z = cp.Constant(rows)
    total = cp.reshape(cp.sum(z, axis=0), (1, D), order=order)
    by_context = cp.reshape(cp.transpose(z), (D * H, C), order=order)
    unit_sum = cp.reshape(cp.sum(by_context, axis=1), (D * H, 1), order=order)
    centred = cp.transpose(cp.reshape(C * by_context - unit_sum, (D, H * C), order=order))
    return float(cp.sum_squares(centred + total / (H * C)).value)


def _toy(n: int, H: int, C: int, D: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(n, D - 1)), np.ones((n, 1))])
    ctx = rng.integers(0, C, size=(n, H))
    y = np.where(predict_gln(rng.normal(size=(H, C, D)), X, ctx) > 0, 1.0, -1.0)
    return X, y, ctx


@pytest.mark.parametrize("H,C", [(3, 2), (2, 4), (4, 4), (5, 2), (1, 4), (3, 1)])
def test_objective_is_their_column_major_construction(H, C):
    rows = np.random.default_rng(H * 10 + C).normal(size=(H * C, 5))
    theirs = _their_norm(rows, H, C, "F") / C**2
    assert gln_authors.authors_objective(rows.reshape(H, C, 5)) == pytest.approx(theirs, rel=1e-12)


def test_row_major_construction_is_eq23_and_differs_when_the_order_matters():
    """The check above can fail: the row-major construction (what the paper describes) is the
    Eq. 23 norm, (C/H) ||sum_h m_h||^2 + C^2 sum ||r_hc||^2, which differs from the authors'
    objective as soon as H > 1 and C > 1, and coincides with it otherwise."""
    for H, C, permuted in ((3, 2, True), (4, 4, True), (1, 4, False), (3, 1, False)):
        zeta = np.random.default_rng(0).normal(size=(H, C, 5))
        m = zeta.mean(1)
        eq23 = (C / H) * (m.sum(0) ** 2).sum() + C**2 * ((zeta - m[:, None]) ** 2).sum()
        row_major = _their_norm(zeta.reshape(H * C, 5), H, C, "C")
        assert row_major == pytest.approx(eq23, rel=1e-12)
        ours = gln_authors.authors_objective(zeta) * C**2
        assert (abs(ours - row_major) > 1e-6 * row_major) == permuted


def test_groups():
    assert gln_authors.authors_groups(2, 2).tolist() == [[0, 1], [0, 1]]  # units: [[0,0],[1,1]]
    assert gln_authors.authors_groups(3, 2).tolist() == [[0, 1], [2, 0], [1, 2]]
    assert gln_authors.authors_groups(1, 4).tolist() == [[0, 0, 0, 0]]
    assert gln_authors.authors_groups(3, 1).tolist() == [[0], [1], [2]]


@pytest.mark.parametrize("H,C", [(3, 2), (2, 4)])
def test_kernel_is_the_inverse_of_the_ridged_norm(H, C):
    """Against the explicit (N + ridge I)^-1 of the norm built from its groups."""
    ridge = 1e-3
    group = gln_authors.authors_groups(H, C).reshape(-1)
    same = (group[:, None] == group[None]).astype(float)
    norm = np.eye(H * C) - same / C + np.ones((H * C, H * C)) / (H * C**3)
    _, _, ctx = _toy(12, H, C)
    g = np.zeros((12, H * C))
    g[np.arange(12)[:, None], np.arange(H) * C + ctx] = 1
    expect = g @ np.linalg.inv(norm + ridge * np.eye(H * C)) @ g.T
    got = gln_authors.authors_context_kernel(torch.as_tensor(ctx), C, ridge).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("H,C,seed", [(3, 2, 0), (2, 4, 1), (4, 2, 2)])
def test_fast_solver_matches_cvxpy_on_their_construction(H, C, seed):
    """The ridged program solved by Clarabel on the authors' own (column-major) construction of
    the norm gives the same zeta as the fast solver's closed form; with no ridge, cvxpy reaches
    the same optimal Q, at a zeta of no smaller norm (the fast one is the minimum-norm one)."""
    X, y, ctx = _toy(24, H, C, seed=seed)
    ridge = 1e-3
    fast = gln_authors.svm_l2_authors(X, y, ctx, C, ridge=ridge)
    assert fast.status == "optimal"
    z = cp.Variable((H * C, X.shape[1]))
    D = X.shape[1]
    total = cp.reshape(cp.sum(z, axis=0), (1, D), order="F")
    by_context = cp.reshape(cp.transpose(z), (D * H, C), order="F")
    unit_sum = cp.reshape(cp.sum(by_context, axis=1), (D * H, 1), order="F")
    centred = cp.transpose(cp.reshape(C * by_context - unit_sum, (D, H * C), order="F"))
    their_norm = cp.sum_squares(centred + total / (H * C)) / C**2
    rows = np.arange(H) * C + ctx  # (N, H): the rows each sample uses, row-major as theirs
    margins = cp.hstack([y[n] * cp.sum(z[rows[n]] @ X[n]) for n in range(len(y))])
    ridged = cp.Problem(cp.Minimize(their_norm + ridge * cp.sum_squares(z)), [margins >= 1])
    ridged.solve(solver="CLARABEL")
    np.testing.assert_allclose(fast.primal.reshape(H * C, D), z.value, atol=2e-5)
    exact = gln_authors.svm_l2_authors(X, y, ctx, C)  # default ridge: the limit
    plain = cp.Problem(cp.Minimize(their_norm), [margins >= 1])
    q_star = plain.solve(solver="CLARABEL")
    assert exact.extra["authors_objective"] == pytest.approx(q_star, rel=1e-5, abs=1e-9)
    assert np.linalg.norm(exact.primal) <= np.linalg.norm(z.value) * (1 + 1e-6)
    assert exact.extra["zeta_margin_mismatch"] < 1e-6


def test_solver_check_fails_when_the_groups_are_the_units(monkeypatch):
    """The comparison above can fail: with the paper's grouping (by unit) in place of the
    column-major one, the fast solver solves SVM-L2-eq23, which the authors' construction tells
    apart."""
    monkeypatch.setattr(
        gln_authors, "_row_groups", lambda H, C, device: torch.arange(H * C, device=device) // C
    )
    with pytest.raises(AssertionError):
        test_fast_solver_matches_cvxpy_on_their_construction(3, 2, 0)


def test_cvxpy_program_reaches_the_same_optimum():
    X, y, ctx = _toy(30, 3, 2, seed=3)
    fast = gln_authors.svm_l2_authors(X, y, ctx, 2)
    for solver in ("CLARABEL", "OSQP"):
        res = gln_authors.svm_l2_authors_cvxpy(X, y, ctx, 2, solver)
        assert res.status == "optimal"
        assert res.objective == pytest.approx(fast.extra["authors_objective"], rel=1e-3)
        assert (y * predict_gln(res.primal, X, ctx)).min() > 1 - 1e-3


def test_coincides_with_eq23_when_the_order_permutes_nothing():
    """H = 1: the authors' groups are the unit, so their program is SVM-L2-eq23 (the same
    minimum-norm zeta)."""
    X, y, ctx = _toy(20, 1, 4, seed=4)
    ours = gln_authors.svm_l2_authors(X, y, ctx, 4)
    eq23 = gln_solvers.svm_l2(X, y, ctx, 4, variant="eq23")
    assert ours.extra["authors_objective"] == pytest.approx(eq23.objective, rel=1e-6)
    np.testing.assert_allclose(ours.primal, eq23.primal, rtol=1e-5, atol=1e-7)


def test_differs_from_eq23_when_the_order_permutes():
    """H = 3, C = 2: the permuted groups leave directions that change predictions at no cost,
    so the authors' optimum is lower than SVM-L2-eq23's and the predictors differ."""
    X, y, ctx = _toy(20, 3, 2, seed=5)
    ours = gln_authors.svm_l2_authors(X, y, ctx, 2)
    eq23 = gln_solvers.svm_l2(X, y, ctx, 2, variant="eq23")
    assert ours.extra["authors_objective"] < 0.9 * eq23.objective
    Xt = np.random.default_rng(6).normal(size=(200, 4))
    ct = np.random.default_rng(7).integers(0, 2, size=(200, 3))
    f, g = predict_gln(ours.primal, Xt, ct), predict_gln(eq23.primal, Xt, ct)
    assert np.abs(f - g).max() > 1e-2 * np.abs(g).max()
