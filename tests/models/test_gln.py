"""Unit tests for the GLN model family (Lippl, Abbott & Chung 2022): `implicit_bias.models.gln`
(contexts, models, training), `gln_svm` (the cvxpy programs, against independent formulations)
and `gln_theory` (the theory checks of the gln_norm chapter)."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

from implicit_bias.models import gln, gln_svm, gln_theory


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny tensors: one thread avoids oversubscribing a small shared CPU (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _problem(N=24, D=6, H=3, C=2, seed=0):
    """Random inputs and contexts with labels from a random teacher GLN (so separable)."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(size=(N, D - 1)), np.ones((N, 1))])
    ctx = rng.integers(0, C, size=(N, H))
    y = np.where(gln.predict_gln(rng.normal(size=(H, C, D)), X, ctx) > 0, 1.0, -1.0)
    return X, y, ctx


# ---- data and contexts -------------------------------------------------------------------


def test_preprocess_scales_to_pm1_and_appends_constant():
    X = gln.preprocess_images(np.array([[0.0, 0.5, 1.0]]))
    np.testing.assert_allclose(X, [[-1.0, 0.0, 1.0, 1.0]])


def test_median_init_halves_the_training_data_and_contexts_in_range():
    rng = np.random.default_rng(1)
    Xp = rng.normal(size=(201, 7))
    planes = gln.sample_hyperplanes(Xp, n_units=5, n_contexts=4, seed=3, median_init=True)
    ctx = gln.assign_contexts(Xp, planes)
    assert ctx.shape == (201, 5) and ctx.min() >= 0 and ctx.max() <= 3
    for bit in range(2):  # each hyperplane puts half the points (plus the median) on each side
        share = ((ctx >> bit) & 1).mean(0)
        assert np.all(np.abs(share - 0.5) <= 1 / 201 + 1e-12)
    random_cut = gln.sample_hyperplanes(Xp, 5, 4, seed=3, median_init=False)
    assert not np.allclose(random_cut.cutoffs, planes.cutoffs)
    with pytest.raises(ValueError):
        gln.sample_hyperplanes(Xp, 5, 3, seed=0)


def test_assign_contexts_is_the_bit_code_of_the_hyperplane_sides():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 7))
    planes = gln.sample_hyperplanes(X, n_units=4, n_contexts=8, seed=5, median_init=False)
    ctx = gln.assign_contexts(X, planes)
    for n, h in itertools.product(range(30), range(4)):
        bits = [X[n] @ planes.weights[h, j] - planes.cutoffs[h, j] >= 0 for j in range(3)]
        assert ctx[n, h] == sum(2**j for j, b in enumerate(bits) if b)


def test_pack_signs_roundtrip_and_rates():
    f = np.array([0.3, -1.0, 2.0, -0.1, 5.0, 1.0, -3.0, 0.2, -0.5])
    np.testing.assert_array_equal(gln.unpack_signs(gln.pack_signs(f), len(f)), np.sign(f))
    assert gln.error_rate(f, np.ones_like(f)) == pytest.approx(4 / 9)
    assert gln.inconsistency(f, -f) == 1.0
    assert gln.uncorrelated_inconsistency(0.1) == pytest.approx(0.18)


# ---- convex programs against independent formulations ---------------------------------------


def test_svm_gln_primal_equals_dual_and_recovers_zeta():
    X, y, ctx = _problem()
    primal = gln_svm.svm_gln(X, y, ctx, 2, solver="CLARABEL")
    dual = gln_svm.svm_gln_dual(X, y, ctx, 2, solver="CLARABEL")
    assert primal.status == "optimal" and dual.status == "optimal"
    assert primal.objective == pytest.approx(dual.objective, rel=1e-6)
    zeta = gln_svm.recover_zeta_from_dual(X, y, ctx, 2, dual.dual)
    f_primal = gln.predict_gln(primal.primal, X, ctx)
    f_dual = gln.predict_gln(zeta, X, ctx)
    np.testing.assert_allclose(f_dual, f_primal, atol=1e-3)
    kkt = gln_theory.svm_gln_kkt(primal, X, y, ctx, 2)
    assert max(kkt.values()) < 1e-4


def test_svm_gln_row_space_reduction_is_exact_and_solvers_agree():
    X, y, ctx = _problem(N=10, D=14, H=2, C=2, seed=2)  # D > N: the reduction matters
    full = gln_svm.svm_gln(X, y, ctx, 2, solver="CLARABEL", reduce=False)
    reduced = gln_svm.svm_gln(X, y, ctx, 2, solver="CLARABEL", reduce=True)
    ecos = gln_svm.svm_gln(X, y, ctx, 2, solver="ECOS")
    assert reduced.objective == pytest.approx(full.objective, rel=1e-6)
    assert ecos.objective == pytest.approx(full.objective, rel=1e-6)
    np.testing.assert_allclose(reduced.primal, full.primal, atol=1e-5)


def _bruteforce_l2(X, y, ctx, C):
    """min sum over all C^H predictors of ||beta_gamma||^2 by explicit enumeration."""
    H, D = ctx.shape[1], X.shape[1]
    zs = [cp.Variable((C, D)) for _ in range(H)]
    beta = {g: sum(zs[h][g[h]] for h in range(H)) for g in itertools.product(range(C), repeat=H)}
    cons = [y[n] * (beta[tuple(ctx[n])] @ X[n]) >= 1 for n in range(len(X))]
    prob = cp.Problem(cp.Minimize(sum(cp.sum_squares(b) for b in beta.values())), cons)
    prob.solve(solver="CLARABEL")
    return prob.value, np.stack([z.value for z in zs])


@pytest.mark.parametrize("H,C", [(3, 2), (2, 3)])
def test_svm_l2_closed_form_matches_bruteforce_enumeration(H, C):
    X, y, ctx = _problem(N=18, D=4, H=H, C=C, seed=4)
    res = gln_svm.svm_l2(X, y, ctx, C, solver="CLARABEL", variant="exact")
    value, zeta_bf = _bruteforce_l2(X, y, ctx, C)
    # the reported objective is ||beta||^2 / C^(H-1)
    assert res.objective * C ** (H - 1) == pytest.approx(value, rel=1e-6)
    np.testing.assert_allclose(
        gln_theory.all_predictors(res.primal), gln_theory.all_predictors(zeta_bf), atol=1e-4
    )


def test_svm_l2_eq23_variant_is_a_different_program():
    X, y, ctx = _problem(N=30, D=5, H=3, C=2, seed=5)
    exact = gln_svm.svm_l2(X, y, ctx, 2, variant="exact")
    eq23 = gln_svm.svm_l2(X, y, ctx, 2, variant="eq23")
    # the eq23 solution is feasible but not the minimum of sum ||beta||^2
    assert gln_theory.beta_norm_sq_closed_form(eq23.primal) > (
        1.001 * gln_theory.beta_norm_sq_closed_form(exact.primal)
    )
    # its reported objective is ||A zeta||^2 / C^2 with the printed A
    assert eq23.objective == pytest.approx(gln_theory.a_zeta_norm_sq(eq23.primal) / 4, rel=1e-6)


def test_shallow_svm_is_one_svm_per_context():
    X, y, ctx = _problem(N=30, D=5, H=1, C=3, seed=6)  # with n_contexts = 4, context 3 is empty
    res = gln_svm.svm_shallow(X, y, ctx, 4)
    assert res.status == "optimal"
    np.testing.assert_array_equal(res.primal[3], 0.0)
    total = 0.0
    for c in range(3):  # the same SVMs, one at a time, without the row-space reduction
        idx = ctx[:, 0] == c
        b = cp.Variable(5)
        prob = cp.Problem(cp.Minimize(cp.sum_squares(b)), [cp.multiply(y[idx], X[idx] @ b) >= 1])
        total += prob.solve(solver="ECOS")
        np.testing.assert_allclose(res.primal[c], b.value, atol=1e-3)
    assert res.objective == pytest.approx(total, rel=1e-6)


def test_frelu_svm_against_direct_formulation():
    X, y, _ = _problem(N=20, D=5, H=3, seed=7)
    rng = np.random.default_rng(8)
    gates = rng.random((20, 3)) > 0.3
    gates[:, 0] = True  # every sample uses at least one unit
    res = gln_svm.svm_frelu(X, y, gates)
    z = cp.Variable((3, 5))
    f = cp.sum(cp.multiply(gates, X @ z.T), axis=1)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.norm(z, 2, axis=1))), [cp.multiply(y, f) >= 1])
    prob.solve(solver="ECOS")
    assert res.objective == pytest.approx(prob.value, rel=1e-6)
    np.testing.assert_allclose(
        gln.predict_frelu(res.primal, X, gates), np.sum(gates * (X @ z.value.T), 1), atol=1e-4
    )


def test_linear_svm_margins():
    X, y, _ = _problem(N=8, D=10, seed=9)
    res = gln_svm.svm_linear(X, y)
    margins = y * (X @ res.primal)
    assert margins.min() == pytest.approx(1.0, abs=1e-6)


def test_fast_solver_dispatch_agrees_with_cvxpy():
    pytest.importorskip("implicit_bias.models.gln_solvers")
    X, y, ctx = _problem(N=30, D=6, H=3, C=2, seed=10)
    for method in ("SVM-GLN", "SVM-L2", "SVM-L2-eq23"):
        fast = gln_svm.solve_program(method, X, y, ctx, 2, solver="fast")
        ref = gln_svm.solve_program(method, X, y, ctx, 2, solver="CLARABEL")
        assert fast.status == "optimal"
        np.testing.assert_allclose(
            gln_theory.all_predictors(fast.primal), gln_theory.all_predictors(ref.primal), atol=1e-4
        )
    with pytest.raises(ValueError):
        gln_svm.solve_program("SVM-GLN", X, y, ctx, 2, solver="nope")


# ---- theory checks -----------------------------------------------------------------------


def test_beta_norm_identity_and_constant():
    rng = np.random.default_rng(11)
    for H, C in [(2, 2), (3, 2), (3, 3), (4, 2)]:
        zeta = rng.normal(size=(H, C, 3))
        brute = float((gln_theory.all_predictors(zeta) ** 2).sum())
        assert gln_theory.beta_norm_sq_closed_form(zeta) == pytest.approx(brute, rel=1e-12)
        assert gln_theory.beta_norm_sq_eq24(zeta) == pytest.approx(brute, rel=1e-12)
        corrected = C ** (H - 2) * gln_theory.a_zeta_norm_sq(zeta, corrected=True)
        assert corrected == pytest.approx(brute, rel=1e-12)


def test_eq25_does_not_solve_a_squared_equals_m_but_corrected_does():
    for H, C in [(2, 2), (3, 2), (4, 4)]:
        assert gln_theory.a_squared_minus_m(H, C, corrected=False) > 0.1
        assert gln_theory.a_squared_minus_m(H, C, corrected=True) < 1e-12


def test_eq21_is_twice_the_squared_gln_norm():
    rng = np.random.default_rng(12)
    for D in (1, 3):
        beta = gln_theory.all_predictors(rng.normal(size=(2, 2, D)))
        ratio = gln_theory.gln_norm_eq21(beta) ** 2 / gln_theory.gln_norm(beta) ** 2
        assert ratio == pytest.approx(2.0, rel=1e-5)


def test_lemma_b6_equivariance_and_b7_rank():
    rng = np.random.default_rng(13)
    zeta = gln_theory.zeta_from_weights(rng.normal(size=(3, 2, 4)), rng.normal(size=3))
    beta = gln_theory.all_predictors(zeta)
    assert gln_theory.equivariance_residual(beta) < 1e-12
    assert gln_theory.equivariance_residual(rng.normal(size=beta.shape)) > 0.1  # generic beta fails
    for H, C in [(2, 2), (3, 2), (2, 3), (3, 4)]:
        assert gln_theory.predictor_map_rank(H, C) == (C - 1) * H + 1


def test_theorem_3_1_toy_approaches_svm_gln():
    p = gln_theory.toy_problem(30, seed=1)
    svm = gln_svm.svm_gln(p["X"], p["y"], p["ctx"], 2)
    snaps = gln_theory.train_full_batch_gln(
        p["X"], p["y"], p["ctx"], 2, n_steps=3000, lr=0.5, record=[300, 3000]
    )
    traj = gln_theory.theorem_trajectory(p, snaps, svm)
    assert traj[1]["cos_beta"] > traj[0]["cos_beta"] > 0.8
    assert traj[1]["margin_ratio"] > traj[0]["margin_ratio"]
    assert traj[1]["stationarity"] < traj[0]["stationarity"]
    assert traj[1]["margin_ratio"] < 1 + 1e-6  # the SVM's margin bounds GD's from above


def test_kkt_residual_is_zero_at_the_svm_solution():
    p = gln_theory.toy_problem(20, seed=2)
    svm = gln_svm.svm_gln(p["X"], p["y"], p["ctx"], 2)
    # the balanced weights of Eq. (18) realizing the SVM's zeta are a KKT point of Eq. (6)
    z = svm.primal
    norms = np.linalg.norm(z.reshape(2, -1), axis=1)
    w2 = np.sqrt(norms)
    w1 = z / np.where(w2 > 0, w2, 1)[:, None, None]
    kkt = gln_theory.kkt_residual_eq7(w1, w2, p["X"], p["y"], p["ctx"], lam=svm.dual)
    assert kkt["stationarity"] < 1e-4 and abs(kkt["complementary_slackness"]) < 1e-4
    # unbalanced weights realizing the same zeta are not a KKT point of Eq. (6)
    off = gln_theory.kkt_residual_eq7(w1 * 2, w2 / 2, p["X"], p["y"], p["ctx"], lam=svm.dual)
    assert off["stationarity"] > 0.1


# ---- models and training -----------------------------------------------------------------


def test_deep_gln_forward_matches_zeta_predictor():
    X, _, ctx = _problem(N=12, D=5, H=4, C=3, seed=14)
    p = gln.init_deep_gln([0], 4, 3, 5, dtype=torch.float64)
    out = gln.forward_deep_gln(p, torch.as_tensor(X)[None], torch.as_tensor(ctx)[None])
    zeta = gln_theory.zeta_from_weights(p["w1"][0].numpy(), p["w2"][0].numpy())
    np.testing.assert_allclose(out[0].numpy(), gln.predict_gln(zeta, X, ctx), atol=1e-12)
    w = p["w1"][0, :, 1].numpy()  # orthogonal init: orthonormal rows per context
    np.testing.assert_allclose(w @ w.T, np.eye(4), atol=1e-12)
    assert np.linalg.norm(p["w2"][0].numpy()) == pytest.approx(1.0)


def test_shallow_and_relu_forward():
    X, _, ctx = _problem(N=7, D=5, H=1, C=4, seed=15)
    p = gln.init_shallow_gln([0], 4, 5, dtype=torch.float64)
    out = gln.forward_shallow_gln(p, torch.as_tensor(X)[None], torch.as_tensor(ctx[:, 0])[None])
    np.testing.assert_allclose(
        out[0].numpy(), gln.predict_shallow(p["w"][0].numpy(), X, ctx), atol=1e-12
    )
    r = gln.init_relu([0], 6, 5, dtype=torch.float64)
    out = gln.forward_relu(r, torch.as_tensor(X)[None])
    ref = np.maximum(X @ r["w1"][0].numpy().T, 0) @ r["w2"][0].numpy()
    np.testing.assert_allclose(out[0].numpy(), ref, atol=1e-12)


def test_batched_training_equals_separate_runs():
    X, y, ctx = _problem(N=40, D=5, H=3, C=2, seed=16)
    Xs = torch.as_tensor(np.stack([X, X[::-1].copy()]))
    ys = torch.as_tensor(np.stack([y, y[::-1].copy()]))
    cs = torch.as_tensor(np.stack([ctx, ctx[::-1].copy()]))
    sched = gln.Schedule(n_steps=30, batch_size=16, lr_drop_step=15, momentum=0.9)
    both = gln.train_batched(
        "deep", gln.init_deep_gln([0, 1], 3, 2, 5, torch.float64), Xs, ys, cs, sched, [0, 1]
    )
    alone = gln.train_batched(
        "deep", gln.init_deep_gln([1], 3, 2, 5, torch.float64), Xs[1:], ys[1:], cs[1:], sched, [1]
    )
    for k in both:
        torch.testing.assert_close(both[k][1], alone[k][0], rtol=1e-10, atol=1e-12)
    start = gln.init_deep_gln([0, 1], 3, 2, 5, torch.float64)
    assert not torch.allclose(both["w1"], start["w1"])  # training moved the weights


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_kernel_form_deep_sgd_equals_feature_form_sgd(momentum):
    """The deep GLN's kernel-form trainer (w1 = w1(0) + A X) must give the iterates of plain SGD
    on w1, w2, b2: two replicas, a partial last batch, the learning-rate drop, momentum."""
    X, y, ctx = _problem(N=45, D=30, H=3, C=4, seed=21)
    Xs = torch.as_tensor(np.stack([X, X[::-1].copy()]))
    ys = torch.as_tensor(np.stack([y, -y]))
    cs = torch.as_tensor(np.stack([ctx, ctx[::-1].copy()]))
    start = gln.init_deep_gln([0, 1], 3, 4, 30, torch.float64)
    sched = gln.Schedule(n_steps=37, batch_size=8, lr=0.3, lr_drop_step=11, momentum=momentum)
    kernel = gln._train_deep_kernel(start, Xs, ys, cs, sched, [0, 1])
    dense = gln._train_dense("deep", start, Xs, ys, cs, sched, [0, 1])
    assert set(kernel) == set(dense)
    for k in dense:
        torch.testing.assert_close(kernel[k], dense[k], rtol=0, atol=1e-12)
        assert (kernel[k] - start[k]).abs().max() > 0.05  # training moved every parameter


def test_deep_training_uses_the_kernel_form_for_small_training_sets(monkeypatch):
    calls = []
    monkeypatch.setattr(gln, "_train_deep_kernel", lambda *a: calls.append("kernel") or {})
    monkeypatch.setattr(gln, "_train_dense", lambda *a: calls.append("dense") or {})
    sched = gln.Schedule(n_steps=1)
    for N in (30, 60):  # D = 30: kernel form up to N = 1.5 D = 45
        X = torch.zeros(1, N, 30)
        gln.train_batched("deep", {}, X, torch.ones(1, N), torch.zeros(1, N, 2), sched, [0])
    gln.train_batched("relu", {}, torch.zeros(1, 30, 30), torch.ones(1, 30), None, sched, [0])
    assert calls == ["kernel", "dense", "dense"]


def test_relu_network_without_output_bias():
    """The authors' ReLU network has no output bias: no b2 to train, none in the output."""
    X, y, _ = _problem(N=40, D=5, H=1, C=2, seed=22)
    start = gln.init_relu([0], 6, 5, dtype=torch.float64, output_bias=False)
    with_bias = gln.init_relu([0], 6, 5, dtype=torch.float64)
    assert "b2" not in start and torch.equal(start["w1"], with_bias["w1"])
    sched = gln.Schedule(n_steps=20, batch_size=8, lr=0.3, lr_drop_step=10)
    trained = gln.train_batched(
        "relu", start, torch.as_tensor(X)[None], torch.as_tensor(y)[None], None, sched, [0]
    )
    assert set(trained) == {"w1", "w2"}
    out = gln.predict_batched("relu", trained, torch.as_tensor(X), None)[0].numpy()
    ref = np.maximum(X @ trained["w1"][0].numpy().T, 0) @ trained["w2"][0].numpy()
    np.testing.assert_allclose(out, ref, atol=1e-12)


def _shallow_problem(seed: int):
    """Two replicas of a small shallow-GLN problem (45 samples, 16 contexts) and their init."""
    rng = np.random.default_rng(seed)
    R, N, D, C = 2, 45, 6, 16
    X = torch.as_tensor(rng.normal(size=(R, N, D)))
    y = torch.as_tensor(np.sign(rng.normal(size=(R, N))))
    ctx = torch.as_tensor(rng.integers(0, C, size=(R, N)))
    return X, y, ctx, gln.init_shallow_gln([0, 1], C, D, dtype=torch.float64)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_lazy_shallow_sgd_equals_dense_sgd(momentum):
    """The shallow trainer updates only the rows a batch uses (idle rows in closed form); it must
    give the iterates of plain SGD over all rows, with a partial last batch and the lr drop."""
    X, y, ctx, start = _shallow_problem(17)
    sched = gln.Schedule(n_steps=37, batch_size=8, lr=0.3, lr_drop_step=11, momentum=momentum)
    lazy = gln.train_batched("shallow", start, X, y, ctx, sched, [0, 1])["w"]
    dense = gln._train_dense("shallow", start, X, y, ctx, sched, [0, 1])["w"]
    torch.testing.assert_close(lazy, dense, rtol=0, atol=1e-12)
    assert (lazy - start["w"]).abs().max() > 0.1  # training moved the weights


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_kernel_form_shallow_sgd_equals_dense_sgd(momentum):
    """The shallow GLN's kernel-form trainer (w[c] = w(0)[c] + sum a_n x_n over the context's
    samples) must give the iterates of plain SGD over all rows: two replicas with their own
    contexts, contexts no sample uses, a partial last batch, the lr drop, momentum."""
    rng = np.random.default_rng(5)
    R, N, D, C = 2, 20, 30, 8  # N <= 1.5 D: train_batched takes the kernel form
    X = torch.as_tensor(rng.normal(size=(R, N, D)))
    y = torch.as_tensor(np.sign(rng.normal(size=(R, N))))
    ctx = torch.as_tensor(rng.integers(0, C - 2, size=(R, N)))  # contexts C-2, C-1 unused
    start = gln.init_shallow_gln([0, 1], C, D, dtype=torch.float64)
    sched = gln.Schedule(n_steps=37, batch_size=8, lr=0.3, lr_drop_step=11, momentum=momentum)
    kernel = gln.train_batched("shallow", start, X, y, ctx, sched, [0, 1])["w"]
    dense = gln._train_dense("shallow", start, X, y, ctx, sched, [0, 1])["w"]
    torch.testing.assert_close(kernel, dense, rtol=0, atol=1e-12)
    assert (kernel - start["w"]).abs().max() > 0.1  # training moved the weights
    assert torch.equal(kernel[:, C - 2 :], start["w"][:, C - 2 :])  # unused contexts stay


def test_shallow_training_uses_the_kernel_form_for_small_training_sets(monkeypatch):
    calls = []
    monkeypatch.setattr(gln, "_train_shallow_kernel", lambda *a: calls.append("kernel") or {})
    monkeypatch.setattr(gln, "_train_shallow_lazy", lambda *a: calls.append("lazy") or {})
    sched = gln.Schedule(n_steps=1)
    # D = 30: kernel form up to N = D, up to 1.5 D = 45 with at least 1,024 contexts
    for N, C in ((30, 2), (31, 2), (45, 1024), (46, 1024)):
        w = {"w": torch.zeros(1, C, 30)}
        X = torch.zeros(1, N, 30)
        gln.train_batched("shallow", w, X, torch.ones(1, N), torch.zeros(1, N), sched, [0])
    assert calls == ["kernel", "lazy", "kernel", "lazy"]


def test_shallow_sgd_without_momentum_skips_the_catch_up_bit_for_bit():
    """Without momentum the lazy trainer skips the idle rows' catch-up: the iterates are those
    of the catch-up path exactly, not just to rounding."""
    X, y, ctx, start = _shallow_problem(3)
    sched = gln.Schedule(n_steps=37, batch_size=8, lr=0.3, lr_drop_step=11, momentum=0.0)
    fast = gln._train_shallow_lazy(start, X, y, ctx, sched, [0, 1])["w"]
    full = gln._train_shallow_lazy(start, X, y, ctx, sched, [0, 1], catch_up_idle=True)["w"]
    assert torch.equal(fast, full)
    with_momentum = gln.Schedule(n_steps=37, batch_size=8, lr=0.3, lr_drop_step=11, momentum=0.5)
    skipped = gln._train_shallow_lazy(start, X, y, ctx, with_momentum, [0, 1], catch_up_idle=False)
    caught = gln._train_shallow_lazy(start, X, y, ctx, with_momentum, [0, 1])
    assert not torch.allclose(skipped["w"], caught["w"])  # the catch-up matters with momentum


def test_idle_step_factors_equal_the_sums_they_replace():
    sched = gln.Schedule(n_steps=50, lr=0.2, lr_drop_step=20, lr_factor=0.25, momentum=0.9)
    lrs = [sched.lr * (sched.lr_factor if j >= sched.lr_drop_step else 1.0) for j in range(50)]
    last = torch.tensor([-1, 0, 5, 18, 19, 20, 33, 49])
    for t in (19, 20, 35, 49):
        ok = last <= t
        factor, decay = gln._idle_steps_factors(last[ok], t, sched)
        for s, a, d in zip(last[ok].tolist(), factor.tolist(), decay.tolist()):
            expected = sum(lrs[j] * sched.momentum ** (j - s) for j in range(s + 1, t + 1))
            assert a == pytest.approx(expected, rel=1e-12, abs=1e-15)
            assert d == pytest.approx(sched.momentum ** (t - s), rel=1e-12)


def test_training_separates_a_small_problem():
    p = gln_theory.toy_problem(30, seed=3)
    X = torch.as_tensor(p["X"])[None]
    y = torch.as_tensor(p["y"])[None]
    ctx = torch.as_tensor(p["ctx"])[None]
    params = gln.train_batched(
        "deep",
        gln.init_deep_gln([0], 2, 2, 3, torch.float64),
        X,
        y,
        ctx,
        gln.Schedule(n_steps=400, batch_size=8, lr=0.5, lr_drop_step=200),
        [0],
    )
    f = gln.predict_batched("deep", params, X, ctx)[0].numpy()
    assert gln.error_rate(f, p["y"]) == 0.0
