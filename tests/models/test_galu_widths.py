"""Unit tests for implicit_bias.models.galu_widths: Fig. 5's own-width fits against the
references in implicit_bias.models.galu (masked batches at the largest width, and ACS)."""

from __future__ import annotations

import pytest
import torch

from implicit_bias.models import galu, galu_widths

torch.set_num_threads(1)
F64 = torch.float64


def _gauss(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.parametrize("arch", ["relu", "galu"])
@pytest.mark.parametrize("dout", [1, 3])
def test_own_width_runs_equal_the_masked_batch(arch, dout):
    # The reference trains every width at the largest one with the other units masked; at its
    # own width a run is the same network (masked units are exactly zero), so the two agree to
    # round-off: the same stopping steps, losses to 1e-10, the active units' weights to 1e-8.
    X, Y = galu.random_regression(60, 3, dout, seed=31)
    widths, seeds = [2, 4, 5], [0, 1, 2]
    gates = [_gauss(3, w, seed=40 + w) for w in widths]
    U = torch.zeros(len(widths), 3, 5, dtype=F64)
    for i, w in enumerate(widths):
        U[i, :, :w] = gates[i]
    args = (0.01, 100, 1e-3, 1, 3000)
    ref = galu.train_one_hidden_converged(
        X.expand(3, -1, -1),
        Y.expand(3, -1, -1),
        5,
        arch,
        seeds,
        *args,
        widths=widths,
        U=U if arch == "galu" else None,
    )
    new = galu_widths.train_widths_converged(
        X, Y, widths, arch, seeds, *args, U=gates if arch == "galu" else None
    )
    assert new["steps"] == ref["steps"] and len(set(ref["steps"])) > 1
    assert new["converged"] == ref["converged"]
    assert new["train_mse"] == pytest.approx(ref["train_mse"], rel=1e-10)
    for i, w in enumerate(widths):
        torch.testing.assert_close(new["W"][i], ref["W"][i, :, :w], rtol=1e-8, atol=1e-12)
        torch.testing.assert_close(new["V"][i], ref["V"][i, :w], rtol=1e-8, atol=1e-12)


def test_own_width_default_gates_and_cap():
    # Without U the GaLU gates are the reference's draw cut to the width; a cap too small for
    # the rule leaves the run unconverged at the cap, as in the reference.
    X, Y = galu.random_regression(50, 3, 1, seed=32)
    args = (0.01, 50, 1e-5, 2, 200)
    ref = galu.train_one_hidden_converged(
        X.expand(2, -1, -1), Y.expand(2, -1, -1), 4, "galu", [5, 6], *args, widths=[3, 4]
    )
    new = galu_widths.train_widths_converged(X, Y, [3, 4], "galu", [5, 6], *args)
    assert new["converged"] == ref["converged"] == [False, False]
    assert new["steps"] == ref["steps"] == [200, 200]
    assert new["train_mse"] == pytest.approx(ref["train_mse"], rel=1e-10)
    with pytest.raises(ValueError):
        galu_widths.train_widths_converged(X, Y, [3], "tanh", [0], *args)


@pytest.mark.parametrize("dout", [1, 2])
def test_acs_widths_equals_acs(dout):
    # The one-pass normal matrix has the same entries (the same products), so every round is
    # the reference's, bit for bit.
    X, Y = galu.random_regression(80, 4, dout, seed=12)
    U = _gauss(4, 6, seed=13)
    ref = galu.acs(X, Y, U, 40, "step", seed=3, tol=1e-9)
    new = galu_widths.acs_widths(X, Y, U, 40, "step", seed=3, tol=1e-9)
    assert new["losses"] == ref["losses"] and len(ref["losses"]) >= 5
    assert (new["rounds"], new["converged"]) == (ref["rounds"], ref["converged"])
    assert torch.equal(new["W"], ref["W"]) and torch.equal(new["V"], ref["V"])
