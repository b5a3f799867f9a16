"""Tests of the frames and metrics of the tensor-networks chapter, on small made-up sweep results
(and the model's own self-checks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from implicit_bias.chapters.tensor_networks import analysis
from implicit_bias.core.engine.paths import project_root

STEPS = [1, 10, 100, 1000]


def _classification(gap_end=1e-4):
    """Made-up classification results: every arch at L = 2, 3, one seed; the residuals and
    gaps fall along the steps (by 10x per checkpoint, to `gap_end` for the cosine gap)."""
    tasks, runs = [], []
    for i, (arch, L) in enumerate((a, L) for a in ("diag", "conv", "fc") for L in (2, 3)):
        tasks.append({"arch": arch, "L": L, "data_seed": 0, "n": 4})
        mags = [1.0, 0.0, 0.0, 0.0] if arch == "conv" else [1.0, 1.0, 1.0, 1.0]
        runs.append(
            {
                "status": "ok",
                "reference": f"ref {arch}",
                "steps": STEPS,
                "log_inv_loss": [1.0, 1e2, 1e4, 1e8],
                "cosine_gap": [gap_end * 10.0**k for k in (4, 3, 2, 0)],
                "final_cosine_gap": gap_end * (1 + i),
                "thm1_kkt_residual": 1e-3 * (1 + i),
                "thm1_kkt_residual_path": [1.0, 0.1, 0.05, 1e-3 * (1 + i)],
                "thm1_uavg_residual": 0.1,
                "fourier_magnitudes": mags,
            }
        )
    return tasks, runs


def test_every_claimed_metric_is_named_in_analysis():
    claims = yaml.safe_load((project_root() / "data/claims/tensor_networks.yaml").read_text())
    source = (project_root() / "lib/implicit_bias/chapters/tensor_networks/analysis.py").read_text()
    assert all(f'"{c["metric"]}"' in source for c in claims)


def test_tensor_form_matches_networks():
    form = analysis.tensor_form(seed=0)
    assert list(form["architecture"]) == ["diag", "conv", "conv", "fc"]
    assert analysis.tensor_form_metrics(form)["tensor_form_max_rel_error"] < 1e-12


def test_classification_frames_and_thm1_metrics():
    cls = analysis.classification_frame(*_classification())
    assert len(cls) == 6 and {"arch", "L", "data_seed", "fourier_sparsity"} <= set(cls)
    thm1 = analysis.thm1_table(cls)
    assert list(thm1.columns) == [
        "arch",
        "L",
        "data_seed",
        "thm1_kkt_residual",
        "thm1_uavg_residual",
        "final_cosine_gap",
    ]
    assert "residual, averaged u" in analysis.thm1_display(thm1).columns
    paths = analysis.residual_paths(cls)
    assert len(paths) == 6 * len(STEPS) and set(paths["run"]) == {
        f"{a} L={L}" for a in ("diag", "conv", "fc") for L in (2, 3)
    }
    metrics = analysis.thm1_metrics(cls, paths)
    assert metrics["thm1_max_singular_residual"].values == pytest.approx((6e-3,))
    assert metrics["thm1_residual_end_to_middle"].values[0] < 0.5
    cls.at[0, "thm1_kkt_residual_path"] = [1.0, 0.1, 0.01, 0.009]  # less than halved
    ratio = analysis.thm1_metrics(cls, analysis.residual_paths(cls))["thm1_residual_end_to_middle"]
    assert ratio.values == pytest.approx((0.9,))


def test_runs_whose_reference_did_not_converge_are_left_out_and_counted():
    tasks, runs = _classification()
    runs[5]["thm1_kkt_residual"] = 0.5  # fc L = 3: the worst residual and gap ...
    runs[5]["final_cosine_gap"] = 0.5
    runs[5]["reference_status"] = "optimal_inaccurate"  # ... from an inaccurate reference
    for r in runs[:5]:
        r["reference_status"] = "optimal"
    cls = analysis.classification_frame(tasks, runs)
    metrics = analysis.thm1_metrics(cls, analysis.residual_paths(cls))
    assert metrics["thm1_max_singular_residual"].values == pytest.approx((5e-3,))
    assert metrics["thm1_max_singular_residual"].dropped == 1
    cor = analysis.corollary_metrics(cls)
    assert cor["cor1_fc_max_cosine_gap"].values == pytest.approx((5e-4,))
    assert cor["cor1_fc_max_cosine_gap"].dropped == 1
    assert cor["cor2_diag_l2_cosine_gap"].dropped == 0


def test_corollary_metrics():
    cls = analysis.classification_frame(*_classification(gap_end=1e-4))
    curves = analysis.cosine_curves(cls)
    assert list(curves.columns) == ["run", "seed", "step", "log_inv_loss", "cosine_gap"]
    metrics = {k: v.estimate for k, v in analysis.corollary_metrics(cls).items()}
    # final gaps: 1e-4 x (1 + row) in the order diag 2, diag 3, conv 2, conv 3, fc 2, fc 3
    assert metrics["cor2_diag_l2_cosine_gap"] == pytest.approx(1e-4)
    assert metrics["cor2_diag_deep_max_cosine_gap"] == pytest.approx(2e-4)
    assert metrics["cor3_conv_l2_cosine_gap"] == pytest.approx(3e-4)
    assert metrics["cor3_conv_deep_max_cosine_gap"] == pytest.approx(4e-4)
    assert metrics["cor1_fc_max_cosine_gap"] == pytest.approx(6e-4)
    assert metrics["cor2_gap_shrink_ratio"] == pytest.approx(0.01)  # 100x from the middle


def test_per_seed_evidence_takes_each_seeds_worst_run():
    frame = pd.DataFrame({"data_seed": [0, 0, 1, 1, 2, 2], "gap": [1, 5, 2, 3, 4, 0.5]})
    e = analysis.by_seed(frame, "gap", "max", dropped=2)
    assert e.values == (5, 3, 4) and e.seeds == (0, 1, 2) and e.dropped == 2
    assert analysis.by_seed(frame, "gap", "min").values == (1, 2, 0.5)


def _diag2_variants(gaps):
    """Made-up diag L = 2 runs: `gaps[seed][c]` is the final gap at step fraction c."""
    tasks, runs = [], []
    for seed, by_step in gaps.items():
        for c, gap in by_step.items():
            tasks.append({"arch": "diag", "L": 2, "data_seed": seed, "rel_step": c})
            runs.append({"status": "ok", "final_cosine_gap": gap, "fourier_magnitudes": [1.0]})
    return analysis.classification_frame(tasks, runs)


def test_cor2_spread_table_and_spread():
    cls = _diag2_variants({0: {0.05: 4e-3, 0.1: 5e-3}, 1: {0.05: 3e-3, 0.1: 2e-3}})
    assert len(analysis.at_step(cls, 0.05)) == 2
    table = analysis.cor2_spread(cls)
    assert table.columns.tolist() == ["gap at c = 0.05", "gap at c = 0.1"]
    metrics = analysis.cor2_spread_metrics(cls)
    spread = float(np.std([4e-3, 5e-3, 3e-3, 2e-3], ddof=1))
    assert metrics["cor2_diag_l2_gap_spread"] == pytest.approx(spread)


def test_irl1_control_ratio_fails_when_controls_move_as_little_as_gd():
    cls = pd.DataFrame(
        [
            {"arch": a, "L": 3, "data_seed": 0, "final_cosine_gap": 1e-3, "reference_z": [1, 0]}
            for a in ("diag", "conv")
        ]
    )
    tasks = [{"arch": a, "L": 3, "data_seed": 0} for a in ("diag", "conv")]
    runs = [
        {
            "moved_from_l2_svm": 0.3,
            "moved_from_l2_reference": moved,
            "stationary_from_l2_svm": [1.0, 0.0],
            "stationary_from_l2_reference": [0.0, 1.0],
        }
        for moved in (0.05, 2e-3)
    ]
    control = analysis.irl1_control_frame(tasks, runs, cls)
    assert control["1 - cos(GD's point, SVM's)"].tolist() == pytest.approx([0.0, 0.0])
    assert control["1 - cos(GD's point, L=2 ref's)"].tolist() == pytest.approx([1.0, 1.0])
    metrics = analysis.irl1_control_metrics(control)
    assert metrics["cor2_deep_min_control_ratio"].values == pytest.approx((50.0,))
    assert metrics["cor3_deep_min_control_ratio"].values == pytest.approx((2.0,))  # below 10
    # a control stopped by IRL1's iteration cap is left out and counted
    runs[1]["status"] = "unconverged"
    metrics = analysis.irl1_control_metrics(analysis.irl1_control_frame(tasks, runs, cls))
    assert metrics["cor3_deep_min_control_ratio"].values == ()
    assert metrics["cor3_deep_min_control_ratio"].dropped == 1


def test_fourier_sparsity_and_spectra():
    assert analysis.fourier_sparsity([1.0, 1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert analysis.fourier_sparsity([2.0, 0.0, 0.0, 0.0]) == pytest.approx(0.5)
    cls = analysis.classification_frame(*_classification())
    spectra = analysis.fourier_spectra(cls)
    assert spectra.groupby("run")["magnitude"].max().eq(1.0).all()
    table = analysis.fourier_sparsity_table(cls)
    assert table.columns.tolist() == ["Fourier sparsity index (mean over seeds)"]
    diff = analysis.fourier_metrics(cls)["cor3_conv_minus_fc_sparsity"]
    assert diff.test == "paired t" and diff.values == pytest.approx((0.5 - 1.0,))


def test_theorem3_frame_and_metrics():
    tasks = [{"seed": 0, "y": 1.0, "d": 8}, {"seed": 0, "y": -1.0, "d": 8}]
    runs = [
        {
            "lambda": 0.5,
            "error_v1": 1e-12,
            "error_v2": 3e-12,
            "sign_rule_holds": True,
            "norm_ratio": 1 + 2e-9,
            "s": [1.0],
        },
        {
            "lambda": 0.5,
            "error_v1": 2e-12,
            "error_v2": 1e-12,
            "sign_rule_holds": False,
            "norm_ratio": 1 - 1e-9,
            "s": [1.0],
        },
    ]
    thm3 = analysis.theorem3_frame(tasks, runs)
    assert list(analysis.theorem3_table(thm3).columns) == [
        "seed",
        "y",
        "lambda",
        "error_v1",
        "error_v2",
        "sign_rule_holds",
        "norm_ratio",
    ]
    metrics = analysis.theorem3_metrics(thm3)
    assert metrics["thm3_max_direction_error"].estimate == pytest.approx(3e-12)
    assert metrics["thm3_sign_rule_holds"] is False
    assert metrics["thm3_norm_ratio_deviation"].estimate == pytest.approx(2e-9, rel=1e-6)


def test_lemma4_frames():
    lemma4 = analysis.lemma4_frame(Ls=(2, 3))
    assert analysis.lemma4_table(lemma4).index.tolist() == [2, 3]
    assert analysis.lemma4_metrics(lemma4)["lemma4_max_abs_error_vs_ode"] < 1e-9
    curves = analysis.hl_curves(Ls=(2, 3), grid=np.array([-1e-3, 0.0, 1e-3, 2.0]))
    assert len(curves) == 8
    near0 = curves[curves["t"].abs() == 1e-3]
    np.testing.assert_allclose(near0["H_L"], 0.5e-6, rtol=1e-5)  # H_L ~ t^2 / 2 at 0
    assert len(analysis.hl_curves()) == 3 * 241


def _argument_runs():
    tasks, runs = [], []
    for arch, L, derived, printed in (
        ("diag", 2, 1e-3, 0.08),
        ("diag", 3, 3e-3, 0.2),
        ("conv", 2, 2e-3, 0.1),
    ):
        for f in (1.0, 0.5):
            tasks.append({"arch": arch, "L": L, "data_seed": 0, "rel_step": 0.02 * f})
            wrong = "error_thm5_printed" if arch == "diag" else "error_cor6_printed"
            runs.append(
                {
                    "status": "ok",
                    "loss": 1e-25,
                    "beta": [0.0],
                    "distance_l1": 0.1,
                    "error_derived": derived * 2 * f,
                    wrong: printed,
                }
            )
    return tasks, runs


def test_argument_frame_and_metrics():
    args = analysis.argument_frame(*_argument_runs(), rel_step=0.02)
    assert list(args["step knob"]) == ["h", "h/2"] * 3
    assert "distance_l1" not in args and "beta" not in args
    assert analysis.halving_ratio(args).tolist() == pytest.approx([2.0, 2.0, 2.0])
    conv = args["arch"] == "conv"
    args["error_cor6_printed_unnormalized"] = np.where(conv, 2.5e-3, np.nan)
    args["cor6_minimizer_diff"] = np.where(conv, 1e-14, np.nan)
    metrics = {k: v.estimate for k, v in analysis.argument_metrics(args).items()}
    assert metrics == pytest.approx(
        {
            "cor5_max_rel_error_half_step": 3e-3,
            "cor5_min_error_halving_ratio": 2.0,
            "cor5_max_error_halving_ratio": 2.0,
            "thm5_printed_min_rel_error": 0.08,
            "cor6_max_rel_error_derived": 2e-3,
            "cor6_min_error_halving_ratio": 2.0,
            "cor6_max_error_halving_ratio": 2.0,
            "cor6_min_rel_error_printed": 0.1,
            "cor6_max_rel_error_printed_unnormalized": 2.5e-3,
            "cor6_printed_unnormalized_vs_derived_max_rel_diff": 1e-14,
        }
    )
    bars = analysis.argument_errors(args)
    assert len(bars) == 7  # derived for each run, and the printed forms that apply
    assert set(bars["formula"]) == {
        "error_derived",
        "error_thm5_printed",
        "error_cor6_printed",
        "error_cor6_printed_unnormalized",
    }
    # one run whose error does not halve: the minimum stays in the band, the maximum leaves it
    args.loc[
        (args["arch"] == "diag") & (args["L"] == 3) & (args["step knob"] == "h"), "error_derived"
    ] *= 1.5
    metrics = analysis.argument_metrics(args)
    assert metrics["cor5_min_error_halving_ratio"].estimate == pytest.approx(2.0)
    assert metrics["cor5_max_error_halving_ratio"].estimate == pytest.approx(3.0)
    # a run stopped by the step cap leaves its pair out of every claim, counted
    args.loc[(args["arch"] == "diag") & (args["L"] == 3), "status"] = "unconverged"
    metrics = analysis.argument_metrics(args)
    assert metrics["cor5_max_error_halving_ratio"].estimate == pytest.approx(2.0)
    assert metrics["cor5_max_error_halving_ratio"].dropped == 2
    assert metrics["cor6_max_error_halving_ratio"].dropped == 0


def test_cor6_unnormalized_dft_reading_equals_the_derived_form():
    """On real (small) Cor 6 data: a GD limit equal to the derived minimizer is at distance ~0
    from the printed form read with sqrt(d) F, and the two minimizers agree to round-off; the
    unitary reading (the check's broken input) misses by more than 5%."""
    from implicit_bias.models import tensor_networks as tnm
    from implicit_bias.models import tensor_networks_theory as th

    tasks, runs = [], []
    for L in (2, 3):
        t = dict(arch="conv", L=L, n=4, d=10, data_seed=0, alpha=1.0, wbar="1", rel_step=0.02)
        X, y = tnm.regression_data(4, 10, 0, even=True)
        wbar = tnm.init_params("conv", 10, L, 1.0, 1, even=True)[0].numpy()
        z = th.q_limit(X, y, "conv", L, 1.0, wbar, "derived")
        unitary = th.q_limit(X, y, "conv", L, 1.0, wbar, "cor6_printed")
        assert np.linalg.norm(unitary - z) / np.linalg.norm(z) > 0.05
        tasks.append(t)
        runs.append({"status": "ok", "loss": 0.0, "error_derived": 0.0, "beta": z.tolist()})
    args = analysis.argument_frame(tasks, runs, rel_step=0.02)
    args = analysis.with_cor6_unnormalized(args, tasks, runs)
    assert args["error_cor6_printed_unnormalized"].max() < 1e-10
    assert args["cor6_minimizer_diff"].max() < 1e-10


def test_alpha_frames_and_metrics():
    cfg = {
        "reg_depths": [2, 3],
        "reg_n": 3,
        "reg_d": 6,
        "reg_seeds": [0],
        "theory_alphas": [0.01, 1.0, 100.0],
    }
    theory = analysis.alpha_theory(cfg)
    assert len(theory) == 6 and set(theory["L"]) == {2, 3}
    tasks = [{"L": L, "alpha": a} for L in (2, 3) for a in (1.0, 0.1)]
    runs = [
        {"distance_l1": a * L, "distance_l2": 0.1, "error_derived": 1e-3, "loss": 0.0}
        for L in (2, 3)
        for a in (1.0, 0.1)
    ]
    gd = analysis.alpha_gd_frame(tasks, runs)
    assert list(gd.columns) == [
        "L",
        "alpha",
        "status",
        "distance_l1",
        "distance_l2",
        "error_derived",
    ]
    metrics = {k: v.value for k, v in analysis.alpha_metrics(theory, gd).items()}
    small = theory[(theory["alpha"] == 0.01) & (theory["L"] == 3)]["distance_l1"].item()
    assert metrics["cor5_l1_distance_smallest_alpha_L3"] == small
    assert (
        metrics["cor5_l2_distance_largest_alpha"]
        == theory[theory["alpha"] == 100.0]["distance_l2"].max()
    )
    assert metrics["cor5_gd_l1_distance_decreases_with_alpha"] is True
    gd.loc[0, "distance_l1"] = 0.0  # L = 2: farther from l1 at the smaller alpha
    assert analysis.alpha_metrics(theory, gd)["cor5_gd_l1_distance_decreases_with_alpha"].value is (
        False
    )
    # ... unless that run stopped at the step cap: left out (L = 2 then has one point) and counted
    gd.loc[0, "status"] = "unconverged"
    grows = analysis.alpha_metrics(theory, gd)["cor5_gd_l1_distance_decreases_with_alpha"]
    assert grows.value is True and grows.dropped == 1
    assert analysis.alpha_depths_checked(gd) == [3]


def test_theorem6_frame_and_metrics():
    thm6 = analysis.theorem6_frame(
        [
            {
                "status": "ok",
                "m": 5,
                "k1": 5,
                "flow_error": 1e-15,
                "flow_error_printed": 0.5,
                "gd_error": 2e-3,
                "gd_error_half": 1e-3,
            },
            {
                "status": "ok",
                "m": 3,
                "k1": 5,
                "flow_error": 3e-15,
                "flow_error_printed": 0.4,
                "gd_error": 1.8e-3,
                "gd_error_half": 1e-3,
            },
        ],
        [{"seed": 0}, {"seed": 0}],
    )
    assert "status" not in analysis.theorem6_table(thm6)
    assert thm6["low_rank"].tolist() == [False, True]
    assert {k: v.estimate for k, v in analysis.theorem6_metrics(thm6).items()} == pytest.approx(
        {
            "thm6_flow_rel_error": 3e-15,
            "thm6_low_rank_flow_rel_error": 3e-15,
            "thm6_printed_flow_rel_error": 0.4,
            "thm6_gd_min_error_halving_ratio": 1.8,
            "thm6_gd_max_error_halving_ratio": 2.0,
        }
    )
    thm6.loc[0, "gd_error"] = 3e-3  # a ratio of 3: the maximum leaves the band
    assert analysis.theorem6_metrics(thm6)["thm6_gd_max_error_halving_ratio"].estimate == (
        pytest.approx(3)
    )
    no_low_rank = thm6[~thm6["low_rank"]]
    assert np.isnan(analysis.theorem6_metrics(no_low_rank)["thm6_low_rank_flow_rel_error"].estimate)
    thm6.loc[0, "status"] = "unconverged"  # GD's step cap: left out, counted
    metrics = analysis.theorem6_metrics(thm6)
    assert metrics["thm6_flow_rel_error"].values == (3e-15,)
    assert metrics["thm6_flow_rel_error"].dropped == 1
    assert isinstance(thm6, pd.DataFrame)
