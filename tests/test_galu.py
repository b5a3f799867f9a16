"""Unit tests for implicit_bias.models.galu (Fiat, Malach & Shalev-Shwartz, GaLU networks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from implicit_bias.models import galu

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


def test_theorem1_small_case():
    # E[min L_S] = 1 - rank/m: Monte Carlo within 5 of its standard errors, for both gates and
    # for kd < m, kd = m, kd > m.
    for m, d, k, gate in [(30, 4, 3, "step"), (24, 4, 6, "sigmoid"), (20, 4, 8, "step")]:
        out = galu.theorem1_task({"m": m, "d": d, "k": k, "gate": gate, "seed": 1,
                                  "n_labels": 4000})
        assert out["rank"] <= min(m, k * d)
        if out["formula"] > 0:
            assert abs(out["mc_mean"] - out["formula"]) < 5 * out["mc_se"]
        else:
            assert out["mc_mean"] < 1e-12  # round-off of ||y||^2 - ||P y||^2


def test_rank_bounded_by_active_points_for_step_gates():
    # A point whose k 0-1 gates are all closed has Phi(x) = 0, so rank <= #active points.
    out = galu.theorem1_task({"m": 64, "d": 32, "k": 2, "gate": "step", "seed": 0,
                              "n_labels": 10})
    assert out["m_active"] < 64 and out["rank"] <= out["m_active"]
    out = galu.theorem1_task({"m": 64, "d": 32, "k": 2, "gate": "sigmoid", "seed": 0,
                              "n_labels": 10})
    assert out["rank"] == 64


def test_lemma1_formulas_and_monte_carlo():
    train, test = galu.lemma1_formulas(0.5, 5, 20)
    assert train == pytest.approx(0.25 * 15 / 20)
    assert test == pytest.approx(0.25 * (1 + 5 / 14))  # = sigma^2 (1 + d / (m - d - 1))
    with pytest.raises(ValueError):
        galu.lemma1_formulas(1.0, 5, 6)
    mc = galu.lemma1_monte_carlo(5, 20, 0.5, 1.0, 20000, seed=0)
    assert abs(mc["train_mean"] - train) < 5 * mc["train_se"]
    assert abs(mc["test_mean"] - test) < 5 * mc["test_se"]


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
    losses = galu.acs(X, Y, U, 15, "step", seed=0)["losses"]
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:]))
    assert losses[-1] < losses[0]
    # d' = 1: one W-step already reaches the closed-form optimum (readout adds nothing, Sec. 4)
    res = galu.acs(X, Y[:, :1], U, 1, "step", seed=0)
    best = float(galu.least_squares(galu.galu_features(X, U), Y[:, 0])[1])
    assert res["losses"][1] == pytest.approx(best, rel=1e-9)


def test_train_one_hidden_width_masking_matches_separate_runs():
    X, Y = galu.random_regression(60, 3, 1, seed=14)
    both = galu.train_one_hidden(X.expand(2, -1, -1), Y.expand(2, -1, -1), 5, "relu", [0, 0],
                                 50, 0.01, widths=[2, 5])["train_mse"]
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


# ----------------------------------------------------------------------------------------------
# Chapter helpers: tiny end-to-end runs of every task -> frame -> metrics -> figure
# ----------------------------------------------------------------------------------------------


@pytest.fixture(autouse=False)
def agg_backend():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def test_fig1_helpers_on_synthetic_results(agg_backend):
    tasks = [{"dataset": ds, "k": k, "seed": 0, "models": list(galu.DEEP_MODELS)}
             for ds in ("mnist", "fashion_mnist") for k in (8, 16)]
    accs = {"galu0": 0.90, "relu": 0.91, "linear": 0.85, "relu_readout": 0.70}
    results = [{**{f"{m}_test_acc": a for m, a in accs.items()},
                **{f"{m}_train_acc": a for m, a in accs.items()}} for _ in tasks]
    df = galu.fig1_frame(tasks, results)
    met = galu.fig1_metrics(df)
    assert met["fig1_max_mean_abs_gap_relu_galu0"] == pytest.approx(0.01)
    assert met["fig1_min_gap_galu0_minus_linear"] == pytest.approx(0.05)
    assert met["fig1_min_mean_gap_relu_minus_readout"] == pytest.approx(0.21)
    galu.plot_fig1(df)


def test_theorem1_helpers(agg_backend):
    cfg = {"thm1_cases": [[24, 4, 3, "step"], [24, 4, 8, "sigmoid"]], "thm1_seeds": [0],
           "thm1_n_labels": 500, "thm1_rank_cases": [[24, 4, 3]],
           "thm1_few_gate_cases": [[16, 16, 1]], "thm1_rank_draws": 2}
    tasks = galu.theorem1_tasks(cfg, "cpu")
    df = galu.theorem1_frame(tasks, [galu.theorem1_task(t) for t in tasks])
    met = galu.theorem1_metrics(df)
    assert met["thm1_max_abs_z"] < 5
    assert met["thm1_rank_full_fraction"] == 1.0
    assert met["thm1_rank_full_fraction_few_gates"] == 0.0  # k = 1: half the rows vanish
    assert met["thm1_rank_equals_min_kd_active_fraction"] == 1.0
    galu.plot_theorem1(df)


def test_fig2_helpers(agg_backend):
    cfg = {"fig2_m": 48, "fig2_d": 4, "fig2_k": [1, 2, 4], "fig2_seeds": [0],
           "fig2_alg1_steps": 20, "relu_steps": 30, "relu_lr": 0.01}
    tasks = galu.fig2_tasks(cfg, "cpu")
    res = [galu.fig2_task(t) for t in tasks]
    df = galu.fig2_frame(tasks, res)
    assert (df["galu_2k"].values[:-1] >= df["galu_2k"].values[1:] - 1e-12).all()
    met = galu.fig2_metrics(df, res, 48, 4)
    assert met["fig2_alg1_nonincreasing"] is True
    assert set(met) == {"fig2_min_gap_galu_minus_relu", "fig2_min_gap_relu_minus_galu_2k",
                        "fig2_alg1_nonincreasing", "fig2_fraction_of_gap_closed_by_alg1"}
    galu.plot_fig2(df, 48, 4)


def test_fig3_fig4_helpers(agg_backend):
    cfg = {"fig3_m": 80, "fig3_m_test": 50, "fig3_d": 5, "fig3_n_clusters": 4, "fig3_k": 4,
           "fig3_sigma_x": 0.1, "fig3_sigma_y": [0.0, 0.5, 1.0], "fig3_p": [0.0, 0.3],
           "fig3_seeds": [0], "relu_steps": 20, "relu_lr": 0.01,
           "fig4_sigma_y": [0.0, 0.5, 1.0], "fig4_seeds": [0, 1]}
    tasks = galu.fig3_tasks(cfg, "cpu")
    df = galu.fig3_frame(tasks, [galu.fig3_task(t) for t in tasks])
    assert set(df.model) == {"galu", "galu_adam", "relu"}
    met = galu.fig3_metrics(df)
    assert -1 <= met["fig3_min_spearman_test_vs_noise"] <= 1
    galu.plot_fig3(df)
    tasks = galu.fig4_tasks(cfg, "cpu")
    df4 = galu.fig4_frame(tasks, [galu.fig3_task(t) for t in tasks])
    assert len(df4) == 6 and (df4["l2_sq"] > 0).all()
    assert 0 <= galu.fig4_metrics(df4)["fig4_r2_gap_vs_l2_sq"] <= 1
    galu.plot_fig4(df4)


def test_lemma1_helpers(agg_backend):
    cfg = {"lemma1_d": 3, "lemma1_m_minus_d": [2, 5, 10], "lemma1_n_rep": 4000,
           "lemma1_n_rep_d_plus_2": 4000, "lemma1_sigma_small": 0.1, "lemma1_seed": 0}
    tasks = galu.lemma1_tasks(cfg, "cpu")
    assert sorted({t["m"] for t in tasks}) == [5, 8, 13]
    df = galu.lemma1_frame(tasks, [galu.lemma1_task(t) for t in tasks])
    met = galu.lemma1_metrics(df)
    assert met["lemma1_max_abs_z_train"] < 5
    # D_sigma,beta is D_1,0 scaled by sigma on the same draws: exactly sigma^2 times the loss
    a, b = df[df.dist == "D_1,0"], df[df.dist == "D_sigma,beta"]
    np.testing.assert_allclose(b.test_mean.values - 0.01, 0.01 * (a.test_mean.values - 1),
                               rtol=0.3)
    galu.plot_lemma1(df)


def test_fig5_helpers(agg_backend):
    cfg = {"fig5_m": 32, "fig5_d": 4, "fig5_dout": [1, 2], "fig5_k": [[2, 4, 8], [4, 8, 16]],
           "fig5_seeds": [0], "fig5_acs_iters": 5, "relu_steps": 200, "relu_lr": 0.02}
    tasks = galu.fig5_tasks(cfg, "cpu")
    res = [galu.fig5_task(t) for t in tasks]
    assert all(r["acs_nonincreasing"] for r in res)
    curves, mins = galu.fig5_frames(tasks, res, 0.3)
    assert len(curves) == 6 and len(mins) == 2
    met = galu.fig5_metrics(mins, res)
    assert met["fig5_acs_nonincreasing"] is True
    galu.plot_fig5(curves, mins, 0.3, 32, 4)
