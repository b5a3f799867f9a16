"""The authors' SVM-RC gates (`implicit_bias.models.gln_random_contexts`): orthonormal
directions, median cutoffs on the cutoff data, H hyperplane gates plus one always-on gate, and
why the FReLU SVM on them cannot fail for a sample with every gate closed."""

from __future__ import annotations

import numpy as np
import pytest

from implicit_bias.models import gln_random_contexts as rc
from implicit_bias.models import gln_solvers
from implicit_bias.models.gln import predict_frelu


def _data(n=201, d=12, seed=0):
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.standard_normal((n, d - 1)), np.ones((n, 1))])
    return X


def defects(gates: rc.OrthogonalGates, X_cutoff: np.ndarray, n_units: int) -> list[str]:
    """What is wrong with `gates` as the authors' construction on `X_cutoff` (empty: nothing)."""
    out = []
    W = gates.weights
    if W.shape != (n_units, X_cutoff.shape[1]):
        out.append("shape")
    elif not np.allclose(W @ W.T, np.eye(n_units), atol=1e-10):
        out.append("not orthonormal")
    elif not np.array_equal(gates.cutoffs, rc.lower_median(X_cutoff @ W.T)):
        out.append("cutoffs are not the medians of the cutoff data")
    G = rc.gate_matrix(X_cutoff, gates)
    if G.shape != (len(X_cutoff), n_units + 1) or gates.n_gates != n_units + 1:
        out.append("not H + 1 gates")
    elif not G[:, -1].all():
        out.append("no always-on gate")
    else:
        share = G[:, :-1].mean(0)  # each hyperplane opens for (about) half of the cutoff data
        if (share < 0.5).any() or (share > 0.5 + 1.0 / len(X_cutoff)).any():
            out.append("a hyperplane does not halve the cutoff data")
    return out


@pytest.mark.parametrize("n_units", [1, 5, 11])
def test_construction(n_units):
    X = _data()
    gates = rc.sample_orthogonal_gates(X, n_units, seed=3)
    assert defects(gates, X, n_units) == []
    assert rc.gate_matrix(X, gates).sum(1).min() >= 1  # every sample has an open gate


def test_seed_draws_other_directions():
    X = _data()
    a, b = (rc.sample_orthogonal_gates(X, 4, seed=s).weights for s in (0, 1))
    assert not np.allclose(a, b)


def test_lower_median_is_torchs():
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(0).standard_normal((10, 3))
    assert np.array_equal(rc.lower_median(v), torch.median(torch.tensor(v), 0).values.numpy())


def test_too_many_units_is_refused():
    with pytest.raises(ValueError):
        rc.orthogonal_directions(5, 4, 0)


def _broken(kind: str, X: np.ndarray, n_units: int) -> rc.OrthogonalGates:
    g = rc.sample_orthogonal_gates(X, n_units, seed=3)
    if kind == "normal directions":
        W = np.random.default_rng(0).normal(0, 36, g.weights.shape)
        return rc.OrthogonalGates(W, rc.lower_median(X @ W.T))
    if kind == "mean cutoffs":
        return rc.OrthogonalGates(g.weights, (X @ g.weights.T).mean(0) + 0.3)
    if kind == "median of other data":
        return rc.OrthogonalGates(g.weights, rc.lower_median(X[:50] @ g.weights.T))
    if kind == "one unit short":
        return rc.OrthogonalGates(g.weights[:-1], g.cutoffs[:-1])
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["normal directions", "mean cutoffs", "median of other data", "one unit short"]
)
def test_defects_are_detected(kind):
    X = _data()
    assert defects(_broken(kind, X, 5), X, 5) != []


def test_missing_always_on_gate_is_detected(monkeypatch):
    X = _data()
    gates = rc.sample_orthogonal_gates(X, 5, seed=3)
    monkeypatch.setattr(rc, "gate_matrix", lambda X, g: X @ g.weights.T >= g.cutoffs[None])
    assert defects(gates, X, 5) != []


def test_always_on_gate_keeps_a_closed_sample_feasible():
    """A sample whose hyperplane gates are all closed makes the FReLU SVM without the always-on
    gate infeasible (its output is 0); with it the same data are separated with margin 1."""
    rng = np.random.default_rng(1)
    X = _data(n=60, d=30, seed=1)  # (H + 1) d > N: separable once no sample is dark
    y = np.where(rng.standard_normal(60) > 0, 1.0, -1.0)
    gates = rc.sample_orthogonal_gates(X, 3, seed=2)
    G = rc.gate_matrix(X, gates)
    closed = np.flatnonzero(~G[:, :-1].any(1))
    assert len(closed)  # this draw has such a sample (about N / 2^H expected)
    without = gln_solvers.svm_frelu(X, y, G[:, :-1])
    assert without.weights is None or without.status != "optimal"
    sol = gln_solvers.svm_frelu(X, y, G)
    assert sol.status == "optimal"
    zeta = np.asarray(sol.weights.cpu() if hasattr(sol.weights, "cpu") else sol.weights)
    assert (y * predict_frelu(zeta, X, G)).min() >= 1 - 1e-6
