"""Tests for implicit_bias.models.low_rank (Le & Jegelka, 2022): networks, Lemma 1's decomposition,
the invariants of Lemma 2 / Lemma 3 / Theorem 1 / Lemma 4, and the Theorem 2 quantities (the
chapter's task functions are tested in tests/chapters/low_rank_invariants).

The invariant tests use that every Q = A A^T - B^T B is quadratic in the weights: its derivative
along the gradient-flow direction d = -grad L is exactly (Q(theta + d) - Q(theta - d)) / 2, so
"conserved by gradient flow" can be tested to rounding error without integrating anything.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.low_rank_invariants.tasks import (
    invariance_architectures,
    lemma1_architectures,
    positive_data,
)
from implicit_bias.models import low_rank as lr

torch.set_num_threads(1)

FC = [
    {"type": "dense", "out": 5, "act": "relu"},
    {"type": "dense", "out": 4, "act": "relu"},
    {"type": "dense", "out": 1, "act": "linear"},
]
CONV_LINEAR = [
    {"type": "conv", "out": 3, "kernel": 3, "act": "linear"},
    {"type": "conv", "out": 2, "kernel": 2, "act": "linear"},
    {"type": "dense", "out": 3, "act": "linear"},
    {"type": "dense", "out": 1, "act": "linear"},
]
RES_LINEAR = [
    {"type": "dense", "out": 4, "act": "linear"},
    {"type": "res", "kind": "free", "hidden": 3, "act": "linear"},
    {"type": "res", "kind": "free", "hidden": 2, "act": "linear"},
    {"type": "res", "kind": "diagonal", "hidden": 2, "act": "linear"},
    {"type": "dense", "out": 1, "act": "linear"},
]


def data(shape, n=7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    y = torch.where(torch.randn(n, generator=gen) > 0, 1.0, -1.0).double()
    return x, y


def flow_derivative(spec, params, x, y, fn):
    """d/dt fn(params) along gradient flow, exact for quadratic fn."""
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss = lr.logistic_loss(lr.forward(spec, p, x)[0], y)
    grads = dict(zip(p, torch.autograd.grad(loss, list(p.values()))))
    plus = {k: params[k] - grads[k] for k in params}
    minus = {k: params[k] + grads[k] for k in params}
    return (fn(plus) - fn(minus)) / 2


# ------------------------------------------------------------------------------ networks
def test_validate_spec_shapes_and_errors():
    assert lr.validate_spec(CONV_LINEAR, (2, 8)) == [(2, 8), (3, 6), (2, 5), (3,), (1,)]
    with pytest.raises(ValueError, match="unknown type"):
        lr.validate_spec([{"type": "pool"}], (3,))
    with pytest.raises(ValueError, match="scalar output"):
        lr.validate_spec([{"type": "dense", "out": 2}], (3,))
    with pytest.raises(ValueError, match="unknown act"):
        lr.validate_spec([{"type": "dense", "out": 1, "act": "tanh"}], (3,))


def test_residual_block_definition5_by_hand():
    spec = [
        {"type": "res", "kind": "diagonal", "hidden": 1, "act": "relu"},
        {"type": "dense", "out": 1, "act": "linear"},
    ]
    p = {
        "0.W": torch.tensor([[1.0, -1.0]]),
        "0.V": torch.tensor([[2.0], [3.0]]),
        "0.D": torch.tensor([0.5, -2.0]),
        "1.W": torch.tensor([[1.0, 1.0]]),
    }
    x = torch.tensor([[3.0, 1.0]])
    # hidden relu(3 - 1) = 2; outputs relu(2*2 + 0.5*3) = 5.5, relu(3*2 - 2*1) = 4
    out, pre = lr.forward(spec, p, x)
    assert out.item() == pytest.approx(9.5)
    assert pre["0.hidden"].tolist() == [[2.0]]


@pytest.mark.parametrize(
    "spec,shape",
    [(FC, (3,)), (CONV_LINEAR, (2, 6)), (RES_LINEAR, (3,))] + list(lemma1_architectures().values()),
)
def test_graph_forward_matches_forward(spec, shape):
    params = lr.init_params(spec, shape, seed=3)
    x, _ = data(shape)
    g = lr.build_graph(spec, params, shape)
    np.testing.assert_allclose(
        g_out := lr.graph_forward(g, x.numpy()),
        lr.forward(spec, params, x)[0].numpy(),
        rtol=1e-12,
        atol=1e-14,
    )
    assert g_out.shape == (x.shape[0],)


def test_init_params_scale_and_determinism():
    a = lr.init_params(FC, (3,), seed=1)
    b = lr.init_params(FC, (3,), seed=1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    spec = [dict(FC[0], init=0.0)] + FC[1:]
    assert torch.count_nonzero(lr.init_params(spec, (3,), seed=1)["0.W"]) == 0
    assert a["0.W"].dtype == torch.float64


# ------------------------------------------------------------------------------ Lemma 1
def test_path_enumeration_and_tree_by_hand():
    # f(x) = v relu(w . x), w = (2, -3), v = -0.5: paths x1 -> h -> out and x2 -> h -> out.
    spec = [{"type": "dense", "out": 1, "act": "relu"}, {"type": "dense", "out": 1}]
    p = {"0.W": torch.tensor([[2.0, -3.0]]), "1.W": torch.tensor([[-0.5]])}
    g = lr.build_graph(spec, p, (2,))
    paths = lr.enumerate_paths(g)
    x = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, -1.0]])
    h = lr.path_enumeration(g, paths, x)
    assert sorted(map(tuple, h.tolist())) == sorted([(-1.0, -0.0), (-1.0, 1.5), (0.0, -1.5)])
    t = lr.tree_network(g, paths)
    assert t.acts == ["linear", "relu", "linear", "linear"]
    assert t.weight[1] == -1.0  # sign(v) on the hidden -> output edge
    assert sorted(t.leaf_sign) == [-1.0, 1.0, 1.0, 1.0]  # root/inner 1; leaves sign(w_i v)
    np.testing.assert_allclose(lr.tree_forward(t, h), [-1.0, 0.0, -1.5], atol=1e-15)


def test_linear_network_is_sum_of_paths():
    params = lr.init_params(CONV_LINEAR, (2, 5), seed=0)
    x, _ = data((2, 5))
    g = lr.build_graph(CONV_LINEAR, params, (2, 5))
    h = lr.path_enumeration(g, lr.enumerate_paths(g), x.numpy())
    np.testing.assert_allclose(h.sum(1), lr.forward(CONV_LINEAR, params, x)[0].numpy(), rtol=1e-12)


def test_tree_detects_wrong_inputs():
    """The check can fail: feeding T the absolute-valued h (Lemma 5's input) breaks f = T(h)."""
    spec, shape = lemma1_architectures()["fully connected"]
    params = lr.init_params(spec, shape, seed=0)
    x, _ = data(shape)
    g = lr.build_graph(spec, params, shape)
    paths = lr.enumerate_paths(g)
    t = lr.tree_network(g, paths)
    h = lr.path_enumeration(g, paths, x.numpy())
    f = lr.forward(spec, params, x)[0].numpy()
    assert np.max(np.abs(lr.tree_forward(t, np.abs(h)) - f)) > 1e-3


# ------------------------------------------------------------------------------ invariants
def test_invariant_matrix_by_hand():
    spec = [{"type": "dense", "out": 2}, {"type": "dense", "out": 1}]
    p = {"0.W": torch.tensor([[1.0, 2.0], [0.0, 3.0]]), "1.W": torch.tensor([[4.0, 5.0]])}
    (iface,) = lr.interfaces(spec, (2,))
    q = lr.invariant_matrix(spec, p, iface)
    expected = torch.tensor([[5.0, 6.0], [6.0, 9.0]]) - torch.tensor([[16.0, 20.0], [20.0, 25.0]])
    assert torch.equal(q, expected)
    assert iface.case.startswith("1")


def test_conv_rearrangements_by_hand():
    k = torch.arange(12.0).reshape(2, 3, 2)  # out 2, in 3, kernel 2
    spec = [
        {"type": "conv", "out": 3, "kernel": 1},
        {"type": "conv", "out": 2, "kernel": 2},
        {"type": "dense", "out": 1},
    ]
    p = {"0.K": torch.ones(3, 1, 1), "1.K": k, "2.W": torch.arange(6.0).reshape(1, 6)}
    # out-edges of conv 0's channels into conv 1: rows (out, tap), columns in-channels
    b = lr.out_matrix(spec, p, 1, "in", 3)
    assert b.shape == (4, 3) and b[1].tolist() == [1.0, 3.0, 5.0]  # out 0, tap 1
    # dense after conv 1 (2 channels x 3 positions): rows (out, position), columns channels
    f = lr.out_matrix(spec, p, 2, "in", 2)
    assert f.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


@pytest.mark.parametrize("spec,shape", [(CONV_LINEAR, (2, 6)), (RES_LINEAR, (3,))])
def test_linear_invariants_conserved_by_gradient_flow(spec, shape):
    params = lr.init_params(spec, shape, seed=1)
    x, y = data(shape)
    ifaces = lr.interfaces(spec, shape)
    assert {i.case[0] for i in ifaces} >= (
        {"2", "5", "1"} if spec is CONV_LINEAR else {"3", "4", "7"}
    )
    for iface in ifaces:
        dq = flow_derivative(spec, params, x, y, lambda p, f=iface: lr.invariant_matrix(spec, p, f))
        scale = torch.linalg.norm(lr.invariant_matrix(spec, params, iface)) + 1
        assert dq.diagonal().abs().max() < 1e-12 * scale, iface  # Lemma 2, Eq. (4)
        off = dq - torch.diag(dq.diagonal())
        if iface.matrix_ok:  # Theorem 1, Eq. (6)
            assert off.abs().max() < 1e-12 * scale, iface
        else:  # ResNetDiagonal neighbours: off-diagonal entries do move (not covered)
            assert off.abs().max() > 1e-6, iface
    norms = lr.layer_sq_norms(spec, params)
    names = list(norms)
    for a, b in zip(names[:-1], names[1:]):  # Lemma 3
        d = flow_derivative(
            spec,
            params,
            x,
            y,
            lambda p, a=a, b=b: torch.tensor(
                lr.layer_sq_norms(spec, p)[a] - lr.layer_sq_norms(spec, p)[b]
            ),
        )
        assert abs(float(d)) < 1e-12 * (abs(norms[a]) + 1)


def test_relu_invariants_vertex_yes_mixed_pairs_no():
    x, y = data((3,), n=12, seed=2)
    params = lr.init_params(FC, (3,), seed=2)
    _, pre = lr.forward(FC, params, x)
    for iface in lr.interfaces(FC, (3,)):
        dq = flow_derivative(FC, params, x, y, lambda p, f=iface: lr.invariant_matrix(FC, p, f))
        assert dq.diagonal().abs().max() < 1e-12  # Lemma 2, Eq. (4) holds for ReLU too
        pattern = (pre[iface.key] > 0).T  # neuron x example
        same = (pattern[:, None, :] == pattern[None, :, :]).all(-1)
        # Lemma 2, Eq. (5): pairs with one activation pattern keep their entry ...
        assert dq[same].abs().max() < 1e-12
        # ... Lemma 4: pairs with different patterns do not (generically)
        assert dq[~same].abs().max() > 1e-6


def test_run_gd_masks_and_monotone_normalized():
    x, y = positive_data(20, (6,), seed=0)
    spec = invariance_architectures(6)["fully connected"][0]
    params = lr.init_params(spec, (6,), seed=1)
    run = lr.run_gd(spec, params, x, y, eta=0.05, steps=30, record=[10])
    assert run["steps"] == [0, 10, 30] and len(run["snapshots"]) == 3
    _, pre0 = lr.forward(spec, params, x)
    assert not (run["always_active"]["0.out"] & ~(pre0["0.out"] > 0).all(0)).any()
    norm = lr.run_gd(spec, params, x, y, eta=1.0, steps=40, record=list(range(41)), normalized=True)
    assert all(b <= a for a, b in zip(norm["losses"], norm["losses"][1:]))


def _reference_normalized_gd(spec, params, x, y, eta, steps):
    """Normalized GD with backtracking written out the plain way (a forward pass for every
    candidate and again for every step): the losses run_gd must reproduce bit for bit."""
    p = {k: v.clone() for k, v in params.items()}
    losses, mult = [], 1.0
    for _ in range(steps + 1):
        q = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        loss = lr.logistic_loss(lr.forward(spec, q, x)[0], y)
        losses.append(float(loss.detach()))
        grads = torch.autograd.grad(loss, list(q.values()))
        with torch.no_grad():
            while True:
                cand = {k: p[k] - mult * eta / float(loss) * g for k, g in zip(p, grads)}
                if float(lr.logistic_loss(lr.forward(spec, cand, x)[0], y)) <= losses[-1]:
                    break
                mult *= 0.5
            mult = min(1.0, 1.25 * mult)
        p = cand
    return losses


def test_run_gd_normalized_matches_the_plain_loop_bit_for_bit():
    # run_gd reuses the accepted candidate's forward pass as the next step's: same numbers
    x, y = positive_data(20, (6,), seed=0)
    spec = invariance_architectures(6)["fully connected"][0]
    params = lr.init_params(spec, (6,), seed=1)
    run = lr.run_gd(spec, params, x, y, eta=2.0, steps=25, record=list(range(26)), normalized=True)
    ref = _reference_normalized_gd(spec, params, x, y, eta=2.0, steps=25)
    assert run["losses"] == ref
    # ... and the comparison can fail: another step size gives other losses
    assert _reference_normalized_gd(spec, params, x, y, eta=1.9, steps=25) != ref


@pytest.mark.parametrize("normalized", [True, False])
def test_run_gd_gram_form_matches_the_direct_form(normalized):
    # fewer examples (8) than inputs (30): W_1 = W_1(0) + A X, the same iterates up to rounding
    spec = [
        {"type": "dense", "out": 6, "act": "relu"},
        {"type": "dense", "out": 4, "act": "linear", "init": 0.3},
        {"type": "dense", "out": 1, "act": "linear", "init": 0.3},
    ]
    x, y = data((30,), n=8, seed=3)
    params = lr.init_params(spec, (30,), seed=4)
    kw = dict(eta=0.05 if normalized else 0.2, steps=60, record=[5, 20], normalized=normalized)
    direct = lr.run_gd(spec, params, x, y, **kw)
    gram = lr.run_gd(spec, params, x, y, gram_first_layer=True, **kw)
    assert gram["steps"] == direct["steps"] == [0, 5, 20, 60]
    np.testing.assert_allclose(gram["losses"], direct["losses"], rtol=1e-12)
    for a, b in zip(gram["snapshots"], direct["snapshots"]):
        assert list(a) == list(b)  # same keys, same order
        for k in b:
            torch.testing.assert_close(a[k], b[k], rtol=1e-12, atol=1e-14)
    for k, m in direct["always_active"].items():
        assert torch.equal(gram["always_active"][k], m)
    # the first layer did move (so the comparison can fail), and a non-dense one is refused
    assert (direct["snapshots"][-1]["0.W"] - params["0.W"]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="dense first layer"):
        lr.run_gd(
            CONV_LINEAR,
            lr.init_params(CONV_LINEAR, (2, 8)),
            *data((2, 8)),
            eta=0.1,
            steps=1,
            gram_first_layer=True,
        )


def test_forward_with_the_first_pre_activation_given():
    x, _ = data((5,))
    params = lr.init_params(FC, (5,), seed=2)
    out, pre = lr.forward(FC, params, x)
    rest = {k: v for k, v in params.items() if k != "0.W"}
    out2, pre2 = lr.forward(FC, rest, x, first_pre=x @ params["0.W"].T)
    assert torch.equal(out, out2) and all(torch.equal(pre[k], pre2[k]) for k in pre)
    with pytest.raises(ValueError, match="dense first layer"):
        lr.forward(CONV_LINEAR, {}, torch.zeros(2, 2, 8), first_pre=torch.zeros(2, 3))


# ------------------------------------------------------------------------------ Theorem 2
def test_low_rank_quantities_by_hand():
    assert lr.rank_one_ratio(np.diag([3.0, 4.0])) == pytest.approx(16 / 25)
    assert lr.rank_one_ratio(np.outer([1.0, 2.0], [3.0, -1.0, 2.0])) == pytest.approx(1.0)
    assert lr.frob_gap(np.diag([3.0, 4.0])) == pytest.approx(9.0)
    u, v, w = np.array([1.0, 0.0]), np.array([0.6, 0.8]), np.array([0.0, 1.0])
    assert lr.alignment(np.outer(v, u), np.outer(u, v)) == pytest.approx(1.0)
    assert lr.alignment(np.outer(v, u), np.outer(u, [0.8, -0.6])) == pytest.approx(0.0)
    assert lr.alignment(np.outer(w, u), np.outer(u, v)) == pytest.approx(0.8)
    # C = I - e1 e1^T = diag(0, 1): tr C - lambda_min = 1
    assert lr.chain_gap_bound(
        [torch.eye(2).double(), torch.tensor([[1.0, 0.0]]).double()]
    ) == pytest.approx([1.0, 0.0])


def test_chain_gap_bound_holds_for_balanced_and_random():
    gen = torch.Generator().manual_seed(0)
    mats = [
        torch.randn(4, 5, generator=gen, dtype=torch.float64),
        torch.randn(3, 4, generator=gen, dtype=torch.float64),
        torch.randn(1, 3, generator=gen, dtype=torch.float64),
    ]
    bounds = lr.chain_gap_bound(mats)
    for m, d in zip(mats, bounds):  # Weyl: holds at t = 0 itself
        assert lr.frob_gap(m) <= d + 1e-12
