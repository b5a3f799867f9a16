"""Tests of the warped_imd chapter's tables and claim metrics (Azulay et al. 2021)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from implicit_bias.chapters.warped_imd import analysis, tasks
from implicit_bias.core.verdicts.evidence import Value
from implicit_bias.models import fully_connected as fc

torch.set_num_threads(1)


def test_theorem2_metrics_only_count_wrong_variants_that_differ():
    res = [
        {
            "cases": [
                {
                    "name": "c",
                    "delta": 1.0,
                    "sign_changed": False,
                    "gf_err": 1e-7,
                    "gd_err": [0.02, 0.01],
                    "newton_vs_closed_form": 1e-15,
                    "kkt_residual_gf": 1e-7,
                    "wrong_err": {"unit_w0": 0.3, "sigma_from_a0": 1e-7, "delta_zero": 0.2},
                    "wrong_differs": {"unit_w0": 0.3, "sigma_from_a0": 0.0, "delta_zero": 0.2},
                }
            ]
        }
    ]
    df = analysis.theorem2_table(res, [0], [0.8, 0.4])
    m = analysis.theorem2_metrics(df, [0.8, 0.4])
    assert np.isclose(m["thm2_wrong_variant_min_ratio"], 0.2 / 1e-7)  # sigma variant skipped
    assert np.isclose(m["thm2_gd_min_halving_ratio"], 2.0)
    assert m["thm2_gd_max_err_smallest_step"] == 0.01
    assert m["thm2_sign_change_observed"] is False
    shown = analysis.theorem2_display(df)
    assert not [c for c in shown if c.startswith("differs_")]
    assert {"gd_err_eta0.8", "gd_err_eta0.4", "wrong_unit_w0", "gf_err"} <= set(shown)


def test_regime_sweep_and_metrics_on_a_small_grid():
    pts = [[1e-3, 1.0], [1.0, 1.0], [1e3, 1.0]]
    res = tasks.task_regimes(
        {"n": 3, "d": 7, "seed": 0, "points": pts, "gf_eta": 0.5, "device": "cpu"}
    )
    shape = tasks.task_regimes(
        {"n": 3, "d": 7, "seed": 0, "points": [[1.0, 1e3]], "gf_eta": 0.5, "device": "cpu"}
    )
    df = pd.concat(
        [
            analysis.regimes_table([res], [0], "alpha"),
            analysis.regimes_table([shape], [0], "shape"),
            analysis.regimes_table([res], [0], "alpha_zero_output"),
        ],
        ignore_index=True,
    )
    m = analysis.regime_metrics(df)
    assert m["regime_gf_vs_q_max"] < 1e-4
    assert m["regime_dist_l2_smallest_alpha"] < 0.1 and m["regime_dist_ntk_largest_shape"] < 1e-4
    theory = analysis.closed_form_regimes(3, 7, 0, pts)
    np.testing.assert_allclose(theory["q_dist_l2"], df.loc[:2, "gf_dist_l2"], rtol=1e-3)
    # the notebook's frame of all sweeps is the same long table
    frame = analysis.regimes_frame(
        {"alpha": [res], "shape": [shape], "alpha_zero_output": [res]}, [0]
    )
    pd.testing.assert_frame_equal(frame, df)
    summary = analysis.regimes_summary(frame)
    assert summary.index.names == ["sweep", "alpha", "s"] and len(summary) == 7
    assert list(summary) == ["gf_dist_l2", "gf_dist_ntk", "gf_vs_q", "sign_changes"]
    assert (frame["integrator"] == "rk4").all()


def test_shapes_below_one_join_their_sweep():
    """'<sweep>_below_one' (implicit solver) joins its sweep; the figure keeps s >= 1."""
    below = tasks.task_regimes_implicit(
        {"n": 3, "d": 7, "seed": 0, "points": [[1.0, 0.5]], "in_null": False}
    )
    above = tasks.task_regimes(
        {"n": 3, "d": 7, "seed": 0, "points": [[1.0, 1.0]], "gf_eta": 0.5, "device": "cpu"}
    )
    frame = analysis.regimes_frame({"shape": [above], "shape_below_one": [below]}, [0])
    assert list(frame["sweep"]) == ["shape", "shape"] and list(frame["s"]) == [1.0, 0.5]
    assert list(frame["integrator"]) == ["rk4", "radau"]
    assert list(analysis.regimes_figure_frame(frame)["s"]) == [1.0]
    summary = analysis.regimes_summary(frame)
    assert summary.loc[("shape", 1.0, 0.5), "sign_changes"] == int(below["rows"][0]["sign_changed"])


def test_regime_theory_is_the_closed_form_on_dense_grids():
    theory = analysis.regime_theory(3, 7, 0)
    assert theory["sweep"].value_counts().to_dict() == {
        "alpha": 37,
        "alpha_zero_output": 37,
        "shape": 25,
    }
    alpha = theory[theory["sweep"] == "alpha"]
    np.testing.assert_allclose(alpha["alpha"], np.geomspace(1e-5, 1e4, 37))
    assert (alpha["s"] == 1.0).all()
    pts = alpha[["alpha", "s"]].to_numpy().tolist()[:3]
    expected = analysis.closed_form_regimes(3, 7, 0, pts)
    np.testing.assert_allclose(
        alpha[["q_dist_l2", "q_dist_ntk"]].to_numpy()[:3],
        expected[["q_dist_l2", "q_dist_ntk"]].to_numpy(),
    )


def test_hessian_map_tables_and_metrics():
    hm = tasks.task_hessian_map({"dim": 3, "deltas": [0.0], "n_points": 2, "seed": 0})
    m = analysis.hessian_map_metrics(hm["rows"])
    assert m["hessian_warped_max_asymmetry"] < 1e-12 < m["hessian_plain_min_asymmetry"]
    df = analysis.hessian_map_frame(hm)
    assert len(df) == 2 and {"delta", "point", "plain", "warped", "wrong_warp_a2"} <= set(df)
    summary = analysis.hessian_map_summary(df)
    assert list(summary.index) == [0.0]
    assert summary.loc[0.0, "plain"] == df["plain"].max()


def test_time_warp_metrics_and_tables():
    tw = tasks.task_time_warp(
        {"alpha": 0.5, "s": 2.0, "seed": 0, "end": 3.0, "dt": 5e-3, "n_plot": 20}
    )
    m = analysis.time_warp_metrics(tw)
    assert m == {
        "time_warp_same_tau_gap": tw["same_tau_gap_rel"],
        "time_warp_same_time_gap": tw["same_time_gap_rel"],
    }
    summary = analysis.time_warp_summary(tw)
    assert summary["abs_a_min"] <= summary["abs_a_max"] and len(summary) == 6
    frame = analysis.time_warp_frame(tw)
    assert len(frame) == len(tw["time"])
    np.testing.assert_allclose(frame["gf_beta2"], np.array(tw["gf_beta"])[:, 1])


def test_multi_neuron_tables_and_metrics():
    bal = [
        {
            "gf_err": 1e-7,
            "gd_err": [0.02, 0.01],
            "generic_err_vs_prop1": 0.3,
            "generic_identity_err": 1e-12,
        }
    ]
    anti = [{"eps": [0.1, 0.01], "dist_l2": [1e-2, 1e-3], "slope": 1.0}]
    m = analysis.multi_neuron_metrics(bal, anti, [0.8, 0.4])
    assert m["prop1_gd_min_halving_ratio"] == 2.0 and m["thm3_dist_l2_smallest_eps"] == 1e-3
    table = analysis.balanced_table(bal, [7])
    assert table.index.name == "seed" and list(table.index) == [7]
    frame = analysis.anti_ntk_frame(anti + anti, [0, 1])
    assert list(frame) == ["seed", "eps", "dist_l2"] and frame["seed"].tolist() == [0, 0, 1, 1]


def test_leaky_table_and_metrics():
    res = [
        {
            "rows": [
                {
                    "rho": 1.0,
                    "kkt_residual_gf": 1e-8,
                    "kkt_residual_gd": [0.01],
                    "gf_err": 1e-8,
                    "gd_err": [0.02],
                    "linear_label_err": 0.0,
                    "negative_preactivations": 0,
                },
                {
                    "rho": 0.5,
                    "kkt_residual_gf": 2e-8,
                    "kkt_residual_gd": [0.03],
                    "gf_err": 3e-8,
                    "gd_err": [0.04],
                    "linear_label_err": 0.2,
                    "negative_preactivations": 2,
                },
            ]
        }
    ]
    df = analysis.leaky_table(res, [0])
    assert "kkt_residual_gd0" in df and "gd_err" not in df  # lists spread or dropped
    m = analysis.leaky_metrics(df)
    assert m == {
        "thm4_max_kkt_residual": 2e-8,
        "thm4_max_gf_err": 3e-8,
        "thm4_min_linear_label_err": 0.2,
    }  # rho = 1 is a linear unit: not counted


def test_q_level_grids_and_frame():
    grids = analysis.q_level_grids(
        {"alphas": [0.01, 100.0], "shapes": [1.0], "n_grid": 5, "radius": 1.5}
    )
    assert [t for t, _ in grids] == [
        "$\\alpha$ = 1, s = 1",
        "s = 1, $\\alpha$ = 0.01",
        "s = 1, $\\alpha$ = 100",
    ]
    assert len(analysis.q_levels_frame(grids)) == 3 * 25
    one = [("a", fc.q_level_grid(1.0, 1.0, np.array([1.0, 0.0]), 9, 1.0))]
    frame = analysis.q_levels_frame(one)
    assert len(frame) == 81 and list(frame) == ["panel", "b1", "b2", "q", "quad"]


def test_leaky_branch_metrics_use_converged_runs_of_the_right_branch():
    neg = analysis.leaky_negative_table(
        [
            {
                "rows": [
                    {
                        "rho": 1.0,
                        "a_inf": -1.2,
                        "kkt_residual_gf": 1e-8,
                        "gf_err": 2e-8,
                        "converged": True,
                    },
                    {
                        "rho": 0.5,
                        "a_inf": -1.1,
                        "kkt_residual_gf": 0.3,
                        "gf_err": 0.3,
                        "converged": False,
                    },
                    {
                        "rho": 0.2,
                        "a_inf": 1.1,
                        "kkt_residual_gf": 0.2,
                        "gf_err": 0.2,
                        "converged": True,
                    },
                ]
            }
        ],
        [0],
    )
    relu = analysis.relu_table(
        [
            {"kkt_residual_active": 0.2, "converged": True, "status": "ok"},
            {"kkt_residual_active": 0.9, "converged": False, "status": "unconverged"},
        ],
        [0, 1],
    )
    assert list(relu["seed"]) == [0, 1] and "status" not in relu
    m = analysis.leaky_branch_metrics(neg, relu)
    assert m["thm4_neg_a_max_kkt_residual"] == Value(1e-8, dropped=1)
    assert m["thm4_neg_a_max_gf_err"] == Value(2e-8, dropped=1)
    assert m["thm4_relu_max_active_kkt_residual"] == Value(0.2, dropped=1)
    # nothing qualifies: NaN, so the claims fail
    neg["converged"] = False
    relu["converged"] = False
    m = analysis.leaky_branch_metrics(neg, relu)
    assert all(np.isnan(v.value) for v in m.values())
    assert [v.dropped for v in m.values()] == [3, 3, 2]


def _regime_rows(sweep, seed, alpha, s, l2, ntk, converged=True):
    return {
        "sweep": sweep,
        "seed": seed,
        "alpha": alpha,
        "s": s,
        "gf_dist_l2": l2,
        "gf_dist_ntk": ntk,
        "gf_vs_q": 1e-7,
        "converged": converged,
    }


def test_plateau_and_balanced_metrics():
    rows = [_regime_rows("alpha", 0, a, 1.0, 0.5, 0.5) for a in (1e-3, 1.0, 1e3)]
    rows += [_regime_rows("alpha_zero_output", 0, a, 1.0, 0.5, 0.5) for a in (1e-3, 1e3)]
    rows += [
        _regime_rows("shape", 0, 1.0, s, d, d) for s, d in ((1.0, 0.4), (3.0, 0.2), (10.0, 0.01))
    ]
    rows += [
        _regime_rows("plateau", 0, a, s, 1.0, d)
        for a in (1e3, 1e4)
        for s, d in ((1.0, 0.06), (100.0, 2e-5))
    ]
    df = pd.DataFrame(rows)
    m = analysis.regime_metrics(df)
    assert m["regime_plateau_max_dist_ntk"] == 0.06
    assert m["regime_plateau_dist_ntk_largest_shape"] == 2e-5
    assert m["regime_balanced_non_kernel_margin"].values == (0.4 - 0.2,)
    table = analysis.plateau_table(df)
    assert list(table.columns) == [1e3, 1e4] and list(table.index) == [1.0, 100.0]
    # the most non-kernel shape is not the balanced one: caught
    df.loc[(df["sweep"] == "shape") & (df["s"] == 3.0), ["gf_dist_l2", "gf_dist_ntk"]] = 0.9
    assert analysis.regime_metrics(df)["regime_balanced_non_kernel_margin"].values == (0.4 - 0.9,)
    # ... unless that problem has an unconverged run: left out (no value, the claim is missing)
    df.loc[(df["sweep"] == "shape") & (df["s"] == 3.0), "converged"] = False
    left = analysis.regime_metrics(df)["regime_balanced_non_kernel_margin"]
    assert left.values == () and left.dropped == 3
    # an unconverged plateau run does not count
    df.loc[(df["sweep"] == "plateau") & (df["s"] == 1.0), "converged"] = False
    assert analysis.regime_metrics(df)["regime_plateau_max_dist_ntk"] == 2e-5


def test_metrics_cover_shapes_below_one():
    """The checks run over the full shape range: a shape below 1 that is farther from both
    kernel predictors than s = 1 breaks 'balanced is best', and a large plateau below 1 counts
    in 'any fixed shape'."""
    rows = [_regime_rows("alpha", 0, a, 1.0, 0.5, 0.5) for a in (1e-3, 1.0, 1e3)]
    rows += [_regime_rows("alpha_zero_output", 0, a, 1.0, 0.5, 0.5) for a in (1e-3, 1e3)]
    shapes = ((0.3, 0.3), (1.0, 0.4), (3.0, 0.2), (10.0, 0.01))
    rows += [_regime_rows("shape", seed, 1.0, s, d, d) for seed in (0, 1) for s, d in shapes]
    rows += [
        _regime_rows("plateau", 0, a, s, 1.0, d)
        for a in (1e3, 1e4)
        for s, d in ((0.1, 0.003), (1.0, 0.06), (10.0, 0.002), (100.0, 2e-5))
    ]
    df = pd.DataFrame(rows)
    m = analysis.regime_metrics(df)
    margin = m["regime_balanced_non_kernel_margin"]
    assert margin.seeds == (0, 1) and np.allclose(margin.values, (0.1, 0.1))
    assert m["regime_plateau_max_dist_ntk"] == 0.06
    # broken: on one problem s = 0.3 is the least kernel (min(l2, ntk) = 0.5 > 0.4)
    at = (df["sweep"] == "shape") & (df["s"] == 0.3) & (df["seed"] == 1)
    df.loc[at, ["gf_dist_l2", "gf_dist_ntk"]] = 0.5
    margin = analysis.regime_metrics(df)["regime_balanced_non_kernel_margin"]
    assert np.allclose(margin.values, (0.1, 0.4 - 0.5))
    # broken: the largest plateau is below 1
    df.loc[(df["sweep"] == "plateau") & (df["s"] == 0.1), "gf_dist_ntk"] = 0.4
    assert analysis.regime_metrics(df)["regime_plateau_max_dist_ntk"] == 0.4
    table = analysis.non_kernel_by_shape(df)
    assert list(table.index) == [0.3, 1.0, 3.0, 10.0] and list(table.columns) == [0, 1]
    assert table.loc[0.3, 1] == 0.5 and table.loc[0.3, 0] == 0.3 and table.loc[10.0, 0] == 0.01
    assert list(analysis.plateau_table(df).index) == [0.1, 1.0, 10.0, 100.0]


def test_shape_mirror_table_pairs_s_with_one_over_s():
    rows = [
        _regime_rows("plateau", seed, a, s, l2, ntk)
        for seed, bump in ((0, 0.0), (1, 0.01))
        for a in (1e3, 1e4)
        for s, l2, ntk in ((0.1, 1.0, 0.02 + bump), (0.3, 1.0, 0.3), (10.0, 1.0, 0.002))
    ]
    rows += [
        _regime_rows("shape", 0, 1.0, s, l2, ntk)
        for s, l2, ntk in ((0.5, 1.1, 0.5), (2.0, 0.2, 0.3))
    ]
    rows += [_regime_rows("alpha", 0, 1e-3, 1.0, 0.1, 0.9)]  # not a shape sweep: ignored
    table = analysis.shape_mirror_table(pd.DataFrame(rows))
    # 0.3 has no mirror (3.33 not swept): left out
    assert list(zip(table["sweep"], table["alpha"], table["s"])) == [
        ("plateau", 1e3, 0.1),
        ("plateau", 1e4, 0.1),
        ("shape", 1.0, 0.5),
    ]
    first = table.iloc[0]
    assert first["dist_ntk_at_s"] == 0.03 and first["dist_ntk_at_1_over_s"] == 0.002  # worst seed
    assert first["non_kernel_at_s"] == 0.03 and first["non_kernel_at_1_over_s"] == 0.002
    last = table.iloc[-1]
    assert last["non_kernel_at_s"] == 0.5 and last["non_kernel_at_1_over_s"] == 0.2
    # no shape below 1: an empty table
    assert analysis.shape_mirror_table(pd.DataFrame([r for r in rows if r["s"] >= 1])).empty
