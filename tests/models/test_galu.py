"""Unit tests for implicit_bias.models.galu (Fiat, Malach & Shalev-Shwartz, GaLU networks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from implicit_bias.models import galu, galu_theory

torch.set_num_threads(1)
F64 = torch.float64


def _gauss(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def test_gates_and_features_match_neuron_definition():
    X, U = _gauss(7, 3, seed=0), _gauss(3, 4, seed=1)
    for gate in galu.GATES:
        Phi = galu.galu_features(X, U, gate)
        assert Phi.shape == (7, 12)
        w = _gauss(12, seed=2)
        # N(x) = sum_j sigma(x^T u_j) x^T w_j, neuron by neuron (Sec. 4)
        sig = torch.sigmoid if gate == "sigmoid" else (lambda z: (z > 0).to(F64))
        direct = sum(sig(X @ U[:, j]) * (X @ w[3 * j : 3 * j + 3]) for j in range(4))
        torch.testing.assert_close(Phi @ w, direct)
    with pytest.raises(ValueError, match="valid"):
        galu.gate_values(X, "tanh")


def test_relu_is_galu_with_tied_weights():
    # f_w = g_{w,w}: a ReLU neuron is a 0-1 GaLU neuron whose gate equals its weights (Sec. 1).
    X, w = _gauss(50, 4, seed=3), _gauss(4, 1, seed=4)
    torch.testing.assert_close(galu.galu_predict(X, w, w[:, 0], "step"), torch.relu(X @ w)[:, 0])


def test_closed_form_fit_equals_gradient_descent_on_same_galu():
    # Same gates: GD on the linear weights from 0 converges to the min-norm least-squares fit,
    # and Adam on both layers (k x readout) reaches the same optimal training loss.
    m, d, k = 120, 3, 2  # kd = 6 < m: unique optimum, well conditioned (fast GD)
    X, y = _gauss(m, d, seed=5), _gauss(m, seed=6)
    U = _gauss(d, k, seed=7)
    Phi = galu.galu_features(X, U)
    w_ls, mse_ls, r = galu.least_squares(Phi, y)
    assert r == k * d
    w = torch.zeros(k * d, dtype=F64)
    lr = 1.0 / torch.linalg.matrix_norm(Phi, 2) ** 2 * m / 2
    for _ in range(3000):
        w -= lr * 2 / m * Phi.T @ (Phi @ w - y)
    torch.testing.assert_close(w, w_ls, atol=1e-8, rtol=0)
    # two-layer GaLU trained by Adam with the same gates (train_one_hidden draws U itself:
    # compare with the closed form on those gates)
    res = galu.train_one_hidden(X[None], y[None, :, None], k, "galu", [0], 1500, 0.05)
    U0 = torch.randn(d, k, generator=_seeded_after_wv(0, d, k), dtype=F64)
    mse0 = float(galu.least_squares(galu.galu_features(X, U0), y)[1])
    assert res["train_mse"][0] == pytest.approx(mse0, rel=1e-3)
    assert float(mse_ls) <= float(((Phi @ torch.zeros(k * d, dtype=F64) - y) ** 2).mean())


def _seeded_after_wv(seed, d, k, dout=1):
    # the generator state train_one_hidden uses for U: after drawing W (d, k) and V (k, dout)
    g = torch.Generator().manual_seed(seed)
    torch.randn(d, k, generator=g, dtype=F64)
    torch.randn(k, dout, generator=g, dtype=F64)
    return g


def test_least_squares_min_norm_when_underdetermined():
    Phi, y = _gauss(6, 10, seed=8), _gauss(6, seed=9)
    w, mse, r = galu.least_squares(Phi, y)
    assert r == 6 and float(mse) < 1e-20
    torch.testing.assert_close(w, torch.linalg.pinv(Phi) @ y)


def test_theorem1_monte_carlo_against_rank_formula():
    # The numerics of Theorem 1 on one draw of x and u: full rank min(m, kd) for sigmoid gates,
    # Monte Carlo mean within 5 standard errors of 1 - rank/m (|z| > 5 has probability 6e-7
    # under the theorem), exactly 0 once kd >= m.
    X, g = _gauss(30, 4, seed=20), torch.Generator().manual_seed(21)
    out = galu_theory.theorem1_monte_carlo(X, _gauss(4, 3, seed=22), "sigmoid", 4000, g)
    assert out["rank"] == out["min_m_kd"] == 12 and out["formula"] == pytest.approx(1 - 12 / 30)
    assert abs(out["mc_mean"] - out["formula"]) < 5 * out["mc_se"]
    out = galu_theory.theorem1_monte_carlo(X, _gauss(4, 8, seed=23), "sigmoid", 100, g)
    assert out["rank"] == 30 and out["formula"] == 0 and out["mc_se"] == 0
    assert out["mc_mean"] < 1e-12


def test_theorem1_check_fails_on_a_wrong_rank(monkeypatch):
    # The Monte Carlo side is least squares on the explicit features, independent of the rank:
    # a rank off by one moves the formula by 1/m, i.e. by (1/m) / mc_se = 63 standard errors
    # here, and the check must see it (with the old shared SVD basis it could not).
    X, U = _gauss(30, 4, seed=20), _gauss(4, 3, seed=22)
    monkeypatch.setattr(galu_theory, "feature_rank", lambda Phi: 11)
    out = galu_theory.theorem1_monte_carlo(X, U, "sigmoid", 4000, torch.Generator().manual_seed(21))
    assert abs(out["mc_mean"] - out["formula"]) > 5 * out["mc_se"]


def test_rank_upper_bound_holds_and_the_paper_statement_breaks_in_low_dimension():
    # rank(X_bar) <= min(m, kd, sum_s min(d, n_s), d rank(S)) on every draw (0-1 gates), in
    # high and low dimension, with few and many gates; the bound is below min(m, kd) where
    # the paper's "rank = min(m, kd) with high probability" fails.
    for m, d, k in [(128, 1, 8), (128, 2, 8), (128, 2, 40), (128, 3, 30), (64, 32, 2), (60, 4, 6)]:
        for seed in range(3):
            X, U = _gauss(m, d, seed=100 + seed), _gauss(d, k, seed=200 + seed)
            r = galu.feature_rank(galu.galu_features(X, U))
            assert r <= galu_theory.rank_upper_bound(X, U) <= min(m, k * d)
    # d = 1: the sign of x decides every gate, two patterns, rank 2 < min(m, kd) = 8
    X, U = _gauss(128, 1, seed=1), _gauss(1, 8, seed=2)
    assert galu.feature_rank(galu.galu_features(X, U)) == galu_theory.rank_upper_bound(X, U) == 2
    # few gates, kd >= m: zero rows of all-closed points
    X, U = _gauss(64, 32, seed=0), _gauss(32, 2, seed=1)
    assert galu_theory.rank_upper_bound(X, U) < 64


def test_lemma1_formulas_and_monte_carlo():
    train, test = galu_theory.lemma1_formulas(0.5, 5, 20)
    assert train == pytest.approx(0.25 * 15 / 20)
    assert test == pytest.approx(0.25 * (1 + 5 / 14))  # = sigma^2 (1 + d / (m - d - 1))
    with pytest.raises(ValueError):
        galu_theory.lemma1_formulas(1.0, 5, 6)
    # 5 standard errors of the Monte Carlo mean: |z| > 5 has probability 6e-7 if correct
    mc = galu_theory.lemma1_monte_carlo(5, 20, 0.5, 1.0, 20000, seed=0)
    assert abs(mc["train_mean"] - train) < 5 * mc["train_se"]
    assert abs(mc["test_mean"] - test) < 5 * mc["test_se"]
    # a wrong input breaks the check: data drawn with sigma = 0.55 against the formula at 0.5
    # (10% in sigma, 21% in the losses, about 60 standard errors here)
    bad = galu_theory.lemma1_monte_carlo(5, 20, 0.55, 1.0, 20000, seed=0)
    assert abs(bad["train_mean"] - train) > 5 * bad["train_se"]
    assert abs(bad["test_mean"] - test) > 5 * bad["test_se"]


def test_algorithm1_never_increases_loss_and_tracks_exact_loss():
    X, y = _gauss(120, 4, seed=10), _gauss(120, seed=11)
    res = galu.improve_gates(X, y, 6, 200, "step", seed=3)
    losses = res["losses"]
    assert len(losses) == 201
    assert all(b <= a for a, b in zip(losses, losses[1:]))
    assert res["accepted"] > 0 and losses[-1] < losses[0]
    exact = float(galu.least_squares(galu.galu_features(X, res["U"]), y)[1])
    assert losses[-1] == pytest.approx(exact, rel=1e-9)


def test_acs_is_monotone_and_exact_at_dout_one():
    X, Y = galu.random_regression(80, 4, 3, seed=12)
    U = _gauss(4, 6, seed=13)
    res = galu.acs(X, Y, U, 15, "step", seed=0, tol=1e-12)
    losses = res["losses"]
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:]))
    assert losses[-1] < losses[0]
    # 15 rounds cannot meet a tolerance of 1e-12: stopped by the cap, so unconverged
    assert res["rounds"] == 15 and res["converged"] is False
    # d' = 1: one W-step already reaches the closed-form optimum (readout adds nothing, Sec. 4)
    res = galu.acs(X, Y[:, :1], U, 50, "step", seed=0)
    best = float(galu.least_squares(galu.galu_features(X, U), Y[:, 0])[1])
    assert res["losses"][1] == pytest.approx(best, rel=1e-9)
    assert res["converged"] is True and res["rounds"] == 2  # the second round gains nothing


def test_converged_adam_reaches_the_closed_form_and_reports_its_cap():
    # d' = 1 GaLU with the gates given: both layers by Adam to the stopping rule must reach the
    # closed-form optimum on those gates. It cannot go below it (a lower loss means the gates
    # differ: the check fails on a wrong U), and the stopping rule leaves at most the gain of a
    # few windows at the smallest rate, each below tol x mean(y^2) = 1e-5 x ~1; we allow
    # 1e-3 (100 such windows).
    m, d, k = 120, 3, 4
    X, y = _gauss(m, d, seed=5), _gauss(m, seed=6)
    U = _gauss(d, k, seed=7)
    best = float(galu.least_squares(galu.galu_features(X, U), y)[1])
    res = galu.train_one_hidden_converged(
        X[None], y[None, :, None], k, "galu", [0], 0.02, 200, 1e-5, 2, 20000, U=U[None]
    )
    assert res["converged"] == [True] and res["steps"][0] < 20000
    assert best - 1e-12 <= res["train_mse"][0] <= best + 1e-3
    other = galu.train_one_hidden_converged(
        X[None], y[None, :, None], k, "galu", [0], 0.02, 200, 1e-5, 2, 20000, U=-U[None]
    )
    assert abs(other["train_mse"][0] - best) > 1e-3  # other gates: another optimum
    # a cap too small to meet the rule: unconverged, stopped at the cap
    capped = galu.train_one_hidden_converged(
        X[None], y[None, :, None], k, "relu", [0], 0.02, 50, 1e-5, 2, 100
    )
    assert capped["converged"] == [False] and capped["steps"] == [100]


def test_converged_adam_runs_are_independent_of_their_batch():
    X, Y = galu.random_regression(60, 3, 2, seed=14)
    args = (0.01, 100, 1e-3, 1, 3000)
    both = galu.train_one_hidden_converged(
        X.expand(2, -1, -1), Y.expand(2, -1, -1), 5, "relu", [0, 0], *args, widths=[2, 5]
    )
    alone = galu.train_one_hidden_converged(X[None], Y[None], 5, "relu", [0], *args)
    assert both["train_mse"][1] == pytest.approx(alone["train_mse"][0], rel=1e-10)
    assert both["steps"][1] == alone["steps"][0]
    with pytest.raises(ValueError):
        galu.train_one_hidden_converged(X[None], Y[None], 5, "tanh", [0], *args)


def test_train_one_hidden_width_masking_matches_separate_runs():
    X, Y = galu.random_regression(60, 3, 1, seed=14)
    both = galu.train_one_hidden(
        X.expand(2, -1, -1), Y.expand(2, -1, -1), 5, "relu", [0, 0], 50, 0.01, widths=[2, 5]
    )["train_mse"]
    alone = galu.train_one_hidden(X[None], Y[None], 5, "relu", [0], 50, 0.01)["train_mse"]
    assert both[1] == pytest.approx(alone[0], rel=1e-10)
    assert both[0] != pytest.approx(both[1])
    with pytest.raises(ValueError):
        galu.train_one_hidden(X[None], Y[None], 5, "tanh", [0], 1, 0.01)


def test_smallest_width_and_first_below():
    assert galu.smallest_width(lambda k: 1.0 / k, 0.3, 100) == 4
    assert galu.smallest_width(lambda k: 1.0, 0.3, 16) is None
    assert galu.first_below([8, 2, 4], [0.1, 0.9, 0.25], 0.3) == 4
    assert galu.first_below([1, 2], [0.9, 0.5], 0.3) is None


def test_cluster_model_shapes_and_noise():
    Xtr, ytr, Xte, yte = galu.cluster_model(300, 200, 5, 4, 0.1, "classification", 0.0, 0)
    assert Xtr.shape == (300, 5) and Xte.shape == (200, 5)
    assert set(ytr.unique().tolist()) <= {-1.0, 1.0}
    # noiseless labels are a function of the cluster: nearest centre predicts them perfectly
    _, ytr2, _, _ = galu.cluster_model(300, 200, 5, 4, 0.1, "classification", 0.5, 0)
    assert 0.3 < float((ytr2 != ytr).double().mean()) < 0.7
    with pytest.raises(ValueError):
        galu.cluster_model(10, 10, 2, 2, 0.1, "ranking", 0.0, 0)


def test_deepnet_models_and_frozen_parameters():
    x = _gauss(5, 8, seed=15).float()
    for model in galu.DEEP_MODELS:
        net = galu.DeepNet(8, 6, 3, model)
        assert net(x).shape == (5, 3)
    net = galu.DeepNet(8, 6, 3, "relu_readout")
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert trainable == {"out.weight", "out.bias"}
    net = galu.DeepNet(8, 6, 3, "galu0")
    assert "u1" not in dict(net.named_parameters())  # gates are buffers: never trained
    lin = galu.DeepNet(8, 6, 3, "linear")
    # a linear network is linear in its input
    torch.testing.assert_close(lin(2 * x) - lin(x), lin(x) - lin(0 * x))


def test_pca_project_and_linear_fit():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(200, 10)) * np.arange(1, 11)
    Ztr, Zte = galu.pca_project(A, A[:20], 3)
    assert Ztr.shape == (200, 3)
    assert np.mean((Ztr**2).sum(1)) == pytest.approx(3.0)
    # components are decorrelated and sorted by variance
    C = np.cov(Ztr, rowvar=False)
    assert abs(C[0, 1]) < 1e-10 and C[0, 0] > C[1, 1] > C[2, 2]
    fit = galu.linear_fit(np.arange(5.0), 3 * np.arange(5.0) + 1)
    assert fit["slope"] == pytest.approx(3) and fit["r2"] == pytest.approx(1)
    assert math.isfinite(galu.linear_fit([0, 1, 2], [1, 0, 1])["r2"])


def test_least_squares_many_equals_one_fit_per_target():
    # One SVD for several targets: each fit is least_squares' own (bit for bit), on full-rank
    # and rank-deficient features, for vector and matrix targets.
    full = _gauss(40, 6, seed=20)
    deficient = torch.cat([full, full[:, :2] + full[:, 2:4]], 1)  # rank 6 of 8 columns
    targets = [_gauss(40, seed=21), _gauss(40, seed=22), _gauss(40, 3, seed=23)]
    for Phi in (full, deficient):
        fits = galu.least_squares_many(Phi, targets)
        assert len(fits) == len(targets)
        for (w, mse, r), Y in zip(fits, targets):
            w1, mse1, r1 = galu.least_squares(Phi, Y)
            assert torch.equal(w, w1) and torch.equal(mse, mse1) and r == r1 == 6
            # and the minimum-norm solution, computed independently
            torch.testing.assert_close(w, torch.linalg.pinv(Phi) @ Y)
    # each target gets its own fit
    w_a, w_b = (f[0] for f in galu.least_squares_many(full, targets[:2]))
    assert not torch.allclose(w_a, w_b)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_cluster_model_levels_equal_cluster_model_at_each_level(task):
    levels = [0.0, 0.3, 1.0]
    Xtr, Ytr, Xte, Yte = galu.cluster_model_levels(80, 50, 4, 3, 0.1, task, levels, 5)
    assert Ytr.shape == (3, 80) and Yte.shape == (3, 50)
    for i, noise in enumerate(levels):
        Xtr1, ytr1, Xte1, yte1 = galu.cluster_model(80, 50, 4, 3, 0.1, task, noise, 5)
        assert torch.equal(Xtr, Xtr1) and torch.equal(Xte, Xte1)
        assert torch.equal(Ytr[i], ytr1) and torch.equal(Yte[i], yte1)
    assert not torch.equal(Ytr[0], Ytr[2])  # the levels differ in their labels
    with pytest.raises(ValueError):
        galu.cluster_model_levels(10, 10, 2, 2, 0.1, "ranking", [0.0], 0)


def test_train_one_hidden_converged_runs_leaving_the_batch_keep_their_results():
    # Runs that converge leave the batch; each run's result is the one it gets in a batch of
    # two copies of itself (where nothing leaves early), and its steps differ from the others'.
    X, Y = galu.random_regression(60, 3, 1, seed=24)
    targets = torch.stack([Y, 0.2 * Y + 0.5 * X[:, :1], -Y])
    args = (0.01, 100, 1e-3, 1, 3000)
    U = _gauss(3, 3, 5, seed=25)
    for arch in ("relu", "galu"):
        Ub = U if arch == "galu" else None
        res = galu.train_one_hidden_converged(
            X.expand(3, -1, -1), targets, 5, arch, [0, 1, 2], *args, U=Ub
        )
        assert len(set(res["steps"])) > 1  # runs left the batch at different steps
        for i in range(3):
            pair = galu.train_one_hidden_converged(
                X.expand(2, -1, -1),
                targets[[i, i]],
                5,
                arch,
                [i, i],
                *args,
                U=None if Ub is None else Ub[[i, i]],
            )
            assert res["steps"][i] == pair["steps"][0]
            assert res["converged"][i] == pair["converged"][0]
            assert res["train_mse"][i] == pytest.approx(pair["train_mse"][0], rel=1e-10)
            torch.testing.assert_close(res["W"][i], pair["W"][0], rtol=1e-10, atol=1e-14)
            torch.testing.assert_close(res["V"][i], pair["V"][0], rtol=1e-10, atol=1e-14)


def test_batch_means_split_a_sample_into_independent_block_means():
    x = torch.arange(10, dtype=torch.float64)
    assert galu_theory.batch_means(x, 3) == [1.5, 5.0, 8.0]  # blocks of 4, 3, 3
    assert galu_theory.batch_means(x[:2], 20) == [0.0, 1.0]  # never more blocks than draws
    out = galu_theory.theorem1_monte_carlo(
        torch.randn(16, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64),
        torch.randn(3, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
        "step",
        100,
        torch.Generator().manual_seed(2),
    )
    assert len(out["mc_batch_means"]) == galu_theory.MC_BATCHES
    assert np.mean(out["mc_batch_means"]) == pytest.approx(out["mc_mean"])


def test_confirmatory_batches_are_new_draws_appended_after_the_exploratory_ones():
    X, U = _gauss(16, 3, seed=0), _gauss(3, 2, seed=1)
    base = galu_theory.theorem1_monte_carlo(X, U, "step", 100, torch.Generator().manual_seed(2))
    more = galu_theory.theorem1_monte_carlo(X, U, "step", 100, torch.Generator().manual_seed(2), 3)
    # the exploratory batches and every summary are untouched: the plan's seeds are added only
    assert more["mc_batch_means"][: galu_theory.MC_BATCHES] == base["mc_batch_means"]
    assert {k: v for k, v in more.items() if k != "mc_batch_means"} == {
        k: v for k, v in base.items() if k != "mc_batch_means"
    }
    new = more["mc_batch_means"][galu_theory.MC_BATCHES :]
    assert (
        len(new) == 3 and len(set(new) | set(base["mc_batch_means"])) == galu_theory.MC_BATCHES + 3
    )

    base = galu_theory.lemma1_monte_carlo(5, 20, 0.5, 1.0, 2000, seed=0, chunk=700)
    more = galu_theory.lemma1_monte_carlo(
        5, 20, 0.5, 1.0, 2000, seed=0, chunk=700, confirmatory_batches=2
    )
    for side in ("train", "test"):
        assert more[f"{side}_batch_means"][: galu_theory.MC_BATCHES] == base[f"{side}_batch_means"]
        new = more[f"{side}_batch_means"][galu_theory.MC_BATCHES :]
        assert len(new) == 2 and not set(new) & set(base[f"{side}_batch_means"])
        # each new batch is an estimate of the same mean, from n_rep / MC_BATCHES new sets
        assert np.mean(new) == pytest.approx(base[f"{side}_mean"], rel=0.3)
    assert more["train_mean"] == base["train_mean"] and more["test_se"] == base["test_se"]
