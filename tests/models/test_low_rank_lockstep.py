"""Tests for the chapter's lockstep gradient descent (`models.low_rank_lockstep`): the
batched networks against `models.low_rank.forward` run by run, and the lockstep runs against
`models.low_rank.run_gd` run one after another."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.low_rank_invariants.tasks import (
    invariance_architectures,
    positive_data,
)
from implicit_bias.models import low_rank as lr
from implicit_bias.models.low_rank_lockstep import batched_forward, run_gd_lockstep

torch.set_num_threads(1)


@pytest.mark.parametrize("arch", ["fully connected", "convolutional", "residual"])
def test_batched_forward_matches_forward_per_run(arch):
    spec, shape = invariance_architectures(6)[arch]
    x, _ = positive_data(9, shape, seed=0)
    runs = [lr.init_params(spec, shape, seed=s) for s in (1, 2, 3)]
    stacked = {k: torch.stack([r[k] for r in runs]) for k in runs[0]}
    out, pre = batched_forward(spec, stacked, x)
    for r, params in enumerate(runs):
        out_r, pre_r = lr.forward(spec, params, x)
        torch.testing.assert_close(out[r], out_r, rtol=1e-13, atol=1e-15)
        assert set(pre) == set(pre_r)
        for key in pre_r:
            torch.testing.assert_close(pre[key][r], pre_r[key], rtol=1e-13, atol=1e-15)
    # a wrong kernel orientation would be caught: flipping the conv kernels changes the output
    if arch == "convolutional":
        flipped = dict(stacked, **{"0.K": stacked["0.K"].flip(-1)})
        assert not torch.allclose(batched_forward(spec, flipped, x)[0], out)


@pytest.mark.parametrize("arch", ["fully connected", "convolutional", "residual"])
def test_run_gd_lockstep_matches_run_gd(arch):
    spec, shape = invariance_architectures(6)[arch]
    x, y = positive_data(12, shape, seed=0)
    params = lr.init_params(spec, shape, seed=1)
    steps = [20, 5, 40]  # not sorted: runs leave the batch in any order
    etas = [0.4, 1.6, 0.2]
    records = [list(range(0, s + 1, max(1, s // 4))) for s in steps]
    lock = run_gd_lockstep(spec, params, x, y, etas=etas, steps=steps, records=records)
    for eta, s, rec, got in zip(etas, steps, records, lock):
        ref = lr.run_gd(spec, params, x, y, eta=eta, steps=s, record=rec)
        assert got["steps"] == ref["steps"]
        np.testing.assert_allclose(got["losses"], ref["losses"], rtol=1e-12)
        for snap, snap_ref in zip(got["snapshots"], ref["snapshots"]):
            assert set(snap) == set(snap_ref)
            for k in snap_ref:
                # the same iterates up to round-off: the batched im2col convolutions add in another
                # order. Measured: 0 on the AMD EPYC machines, 5.0e-11 relative / 4.0e-14 absolute
                # on an Intel Xeon (residual net, one weight of 36); 10x that
                torch.testing.assert_close(snap[k], snap_ref[k], rtol=5e-10, atol=4e-13)
        assert set(got["always_active"]) == set(ref["always_active"])
        for k, m in ref["always_active"].items():
            assert torch.equal(got["always_active"][k], m)
    # the step sizes matter (the comparison can fail): run 0 and run 2 end elsewhere
    assert abs(lock[0]["losses"][-1] - lock[2]["losses"][-1]) > 1e-6
    with pytest.raises(ValueError, match="one entry per run"):
        run_gd_lockstep(spec, params, x, y, etas=[0.1], steps=[1, 2], records=[[], []])
