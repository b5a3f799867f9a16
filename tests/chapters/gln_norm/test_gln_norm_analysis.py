"""Tests of the gln_norm chapter's tables and metrics (`implicit_bias.chapters.gln_norm.analysis`):
the frames of the sweeps' results, the authors' numbers, the theory sections, the numbers each
figure plots, and the metrics the claims name."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from implicit_bias.chapters.gln_norm import analysis, reference, tasks
from implicit_bias.core.engine.paths import project_root
from implicit_bias.models import gln, gln_svm, gln_theory


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny tensors: one thread avoids oversubscribing a small shared CPU (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SEEDS, N_VAL = [0, 1, 2], 40


def _signs(rng, error: float) -> np.ndarray:
    """Predicted signs with the given error rate (the validation labels are taken all +1)."""
    s = np.ones(N_VAL)
    s[rng.choice(N_VAL, int(round(error * N_VAL)), replace=False)] = -1
    return s


def _svm_result(rng, errors) -> dict:
    return {
        "val_error": errors,
        "train_error": [0.0] * len(errors),
        "solver_status": ["optimal"] * len(errors),
        "pred_val": [gln.pack_signs(_signs(rng, e)) for e in errors],
    }


def _runs(seed: int = 0):
    """Synthetic sweep results as the notebook frames them: deep GLNs (C = 2, 4, with and without
    median init) with their three SVMs, shallow GLNs with their SVMs, and ReLU networks with
    theirs (momentum 0 and 0.9). Every SVM-GLN is 2.5 points better than its GD-GLN."""
    rng = np.random.default_rng(seed)
    gd_t, gd_r, svm_t, svm_r = [], [], [], []
    for H, C, mi in itertools.product((10, 20), (2, 4), (True, False)):
        cell = {"H": H, "C": C, "N": 50, "median_init": mi}
        errors = [0.2 + 0.025 * int(rng.integers(0, 4)) for _ in SEEDS]
        gd_t.append({"depth": "deep", **cell, "momentum": 0.0, "seeds": SEEDS, "n_val": N_VAL})
        gd_r.append(
            {
                "val_error": errors,
                "train_error": [0.0] * 3,
                "pred_val": [gln.pack_signs(_signs(rng, e)) for e in errors],
            }
        )
        for method, shift in (("SVM-GLN", -0.025), ("SVM-L2", 0.05), ("SVM-L2-eq23", 0.075)):
            svm_t.append({"method": method, **cell, "seeds": SEEDS, "n_val": N_VAL})
            svm_r.append(_svm_result(rng, [e + shift for e in errors]))
    sh_t, sh_r, shs_t, shs_r = [], [], [], []
    for k in (0, 2):
        cell = {"H": 1, "C": 2**k, "N": 50, "median_init": True}
        errors = [0.3 - 0.025 * k for _ in SEEDS]
        sh_t.append({"depth": "shallow", **cell, "momentum": 0.0, "seeds": SEEDS, "n_val": N_VAL})
        sh_r.append(
            {
                "val_error": errors,
                "train_error": [0.0] * 3,
                "pred_val": [gln.pack_signs(_signs(rng, e)) for e in errors],
            }
        )
        shs_t.append({"method": "SVM-shallow", **cell, "seeds": SEEDS, "n_val": N_VAL})
        shs_r.append(_svm_result(rng, [e + 0.025 for e in errors]))
    relu_t, relu_r = [], []
    for H, momentum in itertools.product((10, 20, 50), (0.0, 0.9)):
        relu_t.append({"H": H, "N": 50, "momentum": momentum, "seeds": SEEDS})
        gd = [0.15 + 0.025 * int(rng.integers(0, 3)) for _ in SEEDS]
        result = {"GD-ReLU": {"val_error": gd}}
        for method, shift in (("SVM-RC", 0.05), ("SVM-LC", 0.025), ("SVM-HL", 0.0)):
            result[method] = {
                "val_error": [e + shift for e in gd],
                "inconsistency": [0.05 + shift] * 3,
                "solver_status": ["optimal"] * 3,
            }
        relu_r.append(result)
    frame = analysis.gln_frame(gd_t, gd_r, svm_t, svm_r)
    shallow = analysis.gln_frame(sh_t, sh_r, shs_t, shs_r)
    relu = analysis.relu_frame(relu_t, relu_r)
    return {"frame": frame, "shallow": shallow, "relu": relu, "sweeps": (gd_t, gd_r, svm_t, svm_r)}


# ---- moved from the model tests ----------------------------------------------------------


def test_gln_frame_pairs_svm_with_gd_and_metrics():
    n_val = 10
    y_val = np.ones(n_val)
    gd_sign = y_val.copy()
    gd_sign[:2] = -1  # GD error 0.2
    svm_sign = y_val.copy()
    svm_sign[1:2] = -1  # SVM error 0.1, disagrees with GD on 1 point
    gd_t = [
        {
            "depth": "deep",
            "H": 10,
            "C": 2,
            "N": 5,
            "median_init": True,
            "momentum": 0.0,
            "seeds": [0],
            "n_val": n_val,
        }
    ]
    gd_r = [{"val_error": [0.2], "train_error": [0.0], "pred_val": [gln.pack_signs(gd_sign)]}]
    svm_t = [
        {
            "method": "SVM-GLN",
            "H": 10,
            "C": 2,
            "N": 5,
            "median_init": True,
            "seeds": [0],
            "n_val": n_val,
        }
    ]
    svm_r = [
        {
            "val_error": [0.1],
            "train_error": [0.0],
            "solver_status": ["optimal"],
            "pred_val": [gln.pack_signs(svm_sign)],
        }
    ]
    frame = analysis.gln_frame(gd_t, gd_r, svm_t, svm_r)
    row = frame[frame["method"] == "SVM-GLN"].iloc[0]
    assert row["inconsistency"] == pytest.approx(0.1)
    assert row["svm_minus_gd"] == pytest.approx(-0.1)
    assert row["incons_uncorrelated"] == pytest.approx(0.32)
    summary = analysis.summarize(frame)
    assert set(summary["method"]) == {"GD-GLN", "SVM-GLN"}
    ref = pd.DataFrame(
        [
            {
                "method": "GD-GLN",
                "depth": "deep",
                "H": 10.0,
                "C": 2,
                "N": 5,
                "median_init": True,
                "momentum": 0.0,
                "n_files": 3,
                "val_error_mean": 0.25,
                "val_error_se": 0.01,
            }
        ]
    )
    cmp = reference.compare_with_reference(summary, ref)
    assert len(cmp) == 1 and cmp["difference"].iloc[0] == pytest.approx(-0.05)
    assert not cmp["within_tolerance"].iloc[0]


def test_reference_tables_load():
    ref = reference.load_reference()
    row = ref[
        (ref["method"] == "SVM-L2")
        & (ref["H"] == 10)
        & (ref["C"] == 2)
        & (ref["N"] == 2000)
        & ref["median_init"]
    ]
    assert row["val_error_mean"].iloc[0] == pytest.approx(0.34833)
    best = reference.reference_best()
    assert set(best["method"]) >= {"GD-shallow-GLN", "SVM-GLN", "SVM-L2"}
    shallow = ref[ref["depth"] == "shallow"]
    assert set(shallow["method"]) == {"GD-shallow-GLN", "SVM-shallow"}
    assert (shallow["H"] == 1).all()  # our convention, so shallow cells compare


def test_compare_with_reference_matches_shallow_and_deep_cells():
    ref = reference.load_reference()
    cells = ref[
        (
            (ref["method"] == "GD-shallow-GLN")
            & (ref["C"] == 16)
            & (ref["N"] == 500)
            & ref["median_init"]
            & (ref["momentum"] == 0.0)
        )
        | (
            (ref["method"] == "SVM-GLN")
            & (ref["H"] == 10)
            & (ref["C"] == 2)
            & (ref["N"] == 500)
            & ref["median_init"]
        )
    ]
    assert len(cells) == 2
    ours = cells[["method", "depth", "H", "C", "N", "median_init"]].copy()
    ours["momentum"] = 0.0
    offset = {"GD-shallow-GLN": 0.01, "SVM-GLN": -0.03}
    ours["val_error_mean"] = cells["val_error_mean"] + cells["method"].map(offset)
    ours["val_error_se"], ours["n_seeds"] = 0.0, 3
    cmp = reference.compare_with_reference(ours, ref).set_index("method")
    assert cmp.loc["GD-shallow-GLN", "difference"] == pytest.approx(0.01)
    assert bool(cmp.loc["GD-shallow-GLN", "within_tolerance"])
    assert cmp.loc["SVM-GLN", "difference"] == pytest.approx(-0.03)
    assert not bool(cmp.loc["SVM-GLN", "within_tolerance"])


def test_chapter_theory_sections_small():
    _, m = analysis.architecture_checks([[2, 2], [3, 2]])
    assert m["lemma_b7_rank_matches"] and m["equivariance_residual_trained"] < 1e-10
    assert m["equivariance_residual_unconstrained"] > 0.1
    _, m = analysis.norm_checks()
    assert m["eq21_over_eq20_squared"] == pytest.approx(2.0, rel=1e-6)
    assert m["a2_minus_m_max_abs"] > 1 and m["a2_minus_m_corrected_max_abs"] < 1e-12
    assert m["svm_l2_closed_vs_enumeration_rel"] < 1e-6
    _, _, _, traj, m = analysis.theorem_experiment(20, 2000, 0.5)
    assert m["theorem_distance_decreasing"]
    sep = traj.dropna(subset=["stationarity"])
    # on this problem the residual rises briefly just after separation, then decreases
    assert sep["stationarity"].iloc[-1] < sep["stationarity"].iloc[0]
    assert np.all(np.diff(sep["stationarity"].iloc[-6:]) < 0)
    assert len(traj) >= 10


def test_frames_show_failed_tasks_as_missing_rows():
    error = {"status": "error", "error": "MemoryError: out of memory"}
    gd_task = {
        "depth": "deep",
        "H": 2,
        "C": 2,
        "N": 100,
        "median_init": False,
        "momentum": 0.9,
        "seeds": [0, 1],
    }
    svm_task = {
        "method": "SVM-GLN",
        "H": 2,
        "C": 2,
        "N": 100,
        "median_init": False,
        "seeds": [0, 1],
    }
    frame = analysis.gln_frame([gd_task], [error], [svm_task], [error])
    assert len(frame) == 4 and not (frame["status"] == "ok").any()
    assert frame["val_error"].isna().all()
    relu = analysis.relu_frame([{"H": 2, "N": 100, "momentum": 0.9, "seeds": [0]}], [error])
    assert len(relu) == 4 and relu["val_error"].isna().all()


# ---- the numbers each figure plots ------------------------------------------------------


def test_deep_runs_and_reference_select_each_figures_cells():
    frame = _runs()["frame"]
    mi, no_mi = analysis.deep_runs(frame), analysis.deep_runs(frame, median_init=False)
    assert len(mi) and mi["median_init"].all() and (mi["momentum"] == 0.0).all()
    assert len(no_mi) and not no_mi["median_init"].any()
    assert len(mi) + len(no_mi) == len(frame)  # every row is deep and at momentum 0 here
    ref = reference.load_reference()
    for median_init in (True, False):
        cells = analysis.deep_reference(ref, median_init=median_init)
        assert len(cells) and (cells["depth"] == "deep").all() and (cells["H"] <= 100).all()
        assert (cells["median_init"] == median_init).all()


def test_pair_table_puts_each_svm_beside_its_network():
    frame = _runs()["frame"]
    table = analysis.pair_table(analysis.deep_runs(frame))
    assert set(table["method"]) == set(analysis.GLN_SVMS)
    assert len(table) == 3 * 4  # three SVMs in the four (H, C) cells
    gd = frame[(frame["method"] == "GD-GLN") & frame["median_init"]]
    first = table[(table["method"] == "SVM-GLN") & (table["H"] == 10) & (table["C"] == 2)]
    expected = gd[(gd["H"] == 10) & (gd["C"] == 2)]["val_error"].mean()
    assert first["gd_error"].iloc[0] == pytest.approx(expected)
    assert first["val_error"].iloc[0] == pytest.approx(expected - 0.025)
    assert {"inconsistency", "inconsistency_se", "gd_error_se"} <= set(table.columns)


def test_relu_tables_select_one_momentum():
    relu = _runs()["relu"]
    for momentum in (0.0, 0.9):
        table = analysis.relu_pair_table(relu, momentum=momentum)
        assert set(table["method"]) == set(analysis.RELU_SVMS) and len(table) == 3 * 3
        hl = table[table["method"] == "SVM-HL"]
        np.testing.assert_allclose(hl["val_error"], hl["gd_error"])  # SVM-HL = GD-ReLU here
    rs = analysis.relu_summary(relu)
    assert (rs["momentum"] == 0.0).all() and (rs["depth"] == "relu").all()
    assert set(rs["method"]) == set(analysis.RELU_METHODS)


def test_error_vs_h_lists_the_panels_points_in_order():
    summary = analysis.mi_summary(analysis.summarize(_runs()["frame"]))
    assert summary["median_init"].all() and (summary["momentum"] == 0.0).all()
    for C in (2, 4):
        data = analysis.error_vs_h(summary, analysis.GLN_METHODS, C=C)
        assert len(data) == 4 * 2 and (data["C"] == C).all() and (data["source"] == "ours").all()
        assert list(data["method"].drop_duplicates()) == analysis.GLN_METHODS
        assert list(data["H"]) == [10, 20] * 4
    assert analysis.error_vs_h(summary, analysis.GLN_METHODS, C=8).empty


def test_toy_predictors_are_the_four_region_predictors_of_each_solution():
    p = gln_theory.toy_problem(20, seed=2)
    svm = gln_svm.svm_gln(p["X"], p["y"], p["ctx"], 2)
    snap = gln_theory.train_full_batch_gln(p["X"], p["y"], p["ctx"], 2, 50, 0.5)[-1]
    data = analysis.toy_predictors(snap, svm)
    assert len(data) == 2 * 4 and list(data["model"].unique()) == list(
        analysis.toy_zetas(snap, svm)
    )
    row = data[
        (data["model"] == "SVM-GLN (Eq. 52)")
        & (data["context_unit1"] == 1)
        & (data["context_unit2"] == 0)
    ].iloc[0]
    beta = gln_theory.all_predictors(svm.primal / np.abs(svm.primal).max())
    np.testing.assert_allclose(row[["beta_0", "beta_1", "beta_2"]].to_numpy(float), beta[1, 0])


def test_pairing_table_shows_the_authors_inconsistency_beside_ours():
    gd_t, gd_r, svm_t, svm_r = _runs()["sweeps"]
    pairing = analysis.pairing_table(gd_t, gd_r, svm_t, svm_r, reference.load_reference())
    assert len(pairing) == 8  # one row per (H, C, MI) cell of the SVM-GLN
    assert "authors' (published)" in pairing.columns
    means = analysis.pairing_means(pairing)
    assert list(means.index) == [False, True]  # without and with median init
    assert means["cells"].tolist() == [4, 4]
    assert "same seed (definition)" in means.columns and "H" not in means.columns
    points = analysis.seed_pairing_points(gd_t, gd_r, svm_t, svm_r, reference.load_reference())
    assert len(points) == 8 * len(SEEDS)  # one row per cell and seed
    # the per-seed points average to the table's cells
    cell_means = points.groupby(["H", "C", "median_init"])["same seed (definition)"].mean()
    table = pairing.set_index(["H", "C", "median_init"])["same seed (definition)"]
    assert np.allclose(cell_means.sort_index(), table.sort_index())
    m = analysis.pairing_metrics(pairing, points)
    assert set(m) == {
        "incons_same_seed_mi",
        "incons_authors_mi",
        "incons_same_seed_no_mi",
        "incons_authors_no_mi",
        "incons_redrawn_cutoffs_mi",
        "incons_redrawn_minus_authors_mi",
        "triangle_breaks_redrawn_cutoffs",
    }
    assert "incons_redrawn_minus_authors_mi" not in analysis.pairing_metrics(pairing)


def test_the_authors_comparison_uses_the_redrawn_network_and_can_break_the_bound():
    """With median init the authors' comparison pairs the SVM with the GD network evaluated with
    redrawn cutoffs; without it, with the trained network (the definition). A redrawn network
    that disagrees with the SVM on every image breaks the triangle bound on every seed."""
    rng = np.random.default_rng(5)
    gd_t, gd_r, svm_t, svm_r = [], [], [], []
    for mi in (True, False):
        cell = {"H": 10, "C": 2, "N": 50, "median_init": mi}
        gd_t.append({"depth": "deep", **cell, "momentum": 0.0, "seeds": SEEDS, "n_val": N_VAL})
        svm = _svm_result(rng, [0.1] * 3)
        gd = {"val_error": [0.1] * 3, "pred_val": svm["pred_val"]}  # agrees with the SVM
        if mi:  # the redrawn network predicts the opposite of the SVM everywhere
            flip = [gln.pack_signs(-gln.unpack_signs(p, N_VAL)) for p in svm["pred_val"]]
            gd["pred_val_redrawn_cutoffs"] = flip
        gd_r.append(gd)
        svm_t.append({"method": "SVM-GLN", **cell, "seeds": SEEDS, "n_val": N_VAL})
        svm_r.append(svm)
    pairing = analysis.seed_pairing_inconsistency(gd_t, gd_r, svm_t, svm_r)
    by_mi = pairing.set_index("median_init")
    assert by_mi.loc[False, analysis.REDRAWN] == by_mi.loc[False, "same seed (definition)"] == 0
    assert (
        by_mi.loc[True, analysis.REDRAWN] == 1.0 and by_mi.loc[True, analysis.REDRAWN_BREAKS] == 3
    )
    assert by_mi.loc[False, analysis.REDRAWN_BREAKS] == 0
    pairing["authors' (published)"] = [0.5, 0.1]
    ref = pd.DataFrame(
        {"method": "SVM-GLN", "H": 10, "C": 2, "N": 50, "median_init": [True, False]}
    ).assign(inconsistency_mean=[0.5, 0.1])
    points = analysis.seed_pairing_points(gd_t, gd_r, svm_t, svm_r, ref)
    m = analysis.pairing_metrics(pairing, points)
    assert m["triangle_breaks_redrawn_cutoffs"] == 3 and m["incons_redrawn_cutoffs_mi"] == 1.0
    ev = m["incons_redrawn_minus_authors_mi"]  # per seed: 1.0 (redrawn) - 0.5 (theirs)
    assert ev.test == "paired t" and ev.values == pytest.approx((0.5, 0.5, 0.5))


def test_an_svm_pairs_with_the_gd_network_of_its_own_seed_group():
    """Seeds added later run in tasks of their own (seed groups): each SVM task pairs with the
    GD task of the same seeds, not with the last group's of its configuration."""
    rng = np.random.default_rng(6)
    cell = {"H": 10, "C": 2, "N": 50, "median_init": False}
    gd_t, gd_r, svm_t, svm_r = [], [], [], []
    for group, agree in (([0, 1, 2], True), ([3, 4, 5], False)):
        svm = _svm_result(rng, [0.1] * 3)
        signs = [gln.unpack_signs(p, N_VAL) for p in svm["pred_val"]]
        pred = [gln.pack_signs(s if agree else -s) for s in signs]
        gd_t.append({"depth": "deep", **cell, "momentum": 0.0, "seeds": group, "n_val": N_VAL})
        gd_r.append({"val_error": [0.1] * 3, "pred_val": pred})
        svm_t.append({"method": "SVM-GLN", **cell, "seeds": group, "n_val": N_VAL})
        svm_r.append(svm)
    points = analysis.seed_pairing_points(
        gd_t,
        gd_r,
        svm_t,
        svm_r,
        pd.DataFrame(
            {"method": [], "H": [], "C": [], "N": [], "median_init": [], "inconsistency_mean": []}
        ),
    )
    same = points.set_index("seed")["same seed (definition)"]
    assert list(same.loc[[0, 1, 2]]) == [0.0] * 3 and list(same.loc[[3, 4, 5]]) == [1.0] * 3


def _triangle_frame(rows):
    cols = ["method", "median_init", "val_error", "gd_val_error", "inconsistency"]
    return pd.DataFrame(rows, columns=cols)


def test_triangle_check_flags_a_pair_that_disagrees_more_than_its_errors_allow():
    ok = ("SVM-GLN", True, 0.10, 0.12, 0.20)  # 0.20 <= 0.22: possible
    edge = ("SVM-GLN", False, 0.10, 0.12, 0.22)  # exactly the bound: possible
    broken = ("SVM-L2", True, 0.10, 0.12, 0.25)  # 0.25 > 0.22: not on the same points
    table = analysis.triangle_table(_triangle_frame([ok, edge, broken]))
    assert table["break the bound"].tolist() == [0, 0, 1]
    assert table["smallest slack"].iloc[2] == pytest.approx(-0.03)
    m = analysis.triangle_metrics(_triangle_frame([ok, edge]), _triangle_frame([ok, broken]))
    assert m == {
        "triangle_breaks_ours": 0.0,
        "triangle_breaks_authors_mi": 1.0,
        "triangle_breaks_authors_no_mi": 0.0,
    }


def test_triangle_check_holds_for_every_pair_of_sign_vectors():
    """The bound itself, independently: random sign vectors never break it."""
    rng = np.random.default_rng(0)
    y = np.ones(200)
    rows = []
    for _ in range(50):
        a, b = rng.choice([-1.0, 1.0], 200), rng.choice([-1.0, 1.0], 200)
        rows.append(("SVM-GLN", True, np.mean(a != y), np.mean(b != y), np.mean(a != b)))
    assert not analysis.triangle_check(_triangle_frame(rows))["breaks"].any()


def test_authors_median_init_points_break_the_triangle_bound():
    """The authors' published per-seed data: 2 SVM-GLN and 4 SVM-L2 median-init points break it,
    none without median init (their reloaded GD network had other cutoffs)."""
    table = analysis.triangle_table(reference.reference_frame()).set_index(
        ["method", "median_init"]
    )
    assert table.loc[("SVM-GLN", True), "break the bound"] == 2
    assert table.loc[("SVM-L2", True), "break the bound"] == 4
    assert table.loc[("SVM-GLN", False), "break the bound"] == 0
    assert table.loc[("SVM-L2", False), "break the bound"] == 0
    relu = reference.relu_triangle(reference.load_relu_reference())
    assert relu["break the bound"].sum() == 0
    broken = reference.load_relu_reference().assign(inconsistency_mean=0.9)
    assert reference.relu_triangle(broken)["break the bound"].sum() > 0


# ---- per-seed evidence (the book's decision rule) ----------------------------------------


def test_paired_evidence_is_the_mean_per_seed_of_the_points():
    points = pd.DataFrame(
        {"H": [10, 20, 10, 20, 10, 20], "seed": [0, 0, 1, 1, 2, 2], "diff": [1, 3, 2, 4, 6, 8.0]}
    )
    ev = analysis.paired_evidence(points)
    assert ev.test == "paired t" and ev.values == (2.0, 3.0, 7.0)  # each seed's mean over H
    assert ev.estimate == pytest.approx(4.0)
    level = analysis.level_evidence(points, "diff")
    assert level.test == "one-sample t" and level.values == (2.0, 3.0, 7.0)


def test_a_difference_the_seeds_do_not_carry_is_inconclusive():
    from implicit_bias.core.verdicts import decision

    better = decision.region("<", 0.0)
    tie = pd.DataFrame({"seed": [0, 1, 2], "diff": [-0.02, 0.01, 0.005]})
    assert analysis.paired_evidence(tie).decide(better) == "inconclusive"
    clear = pd.DataFrame({"seed": [0, 1, 2], "diff": [-0.02, -0.018, -0.022]})
    assert analysis.paired_evidence(clear).decide(better) == "pass"
    assert analysis.paired_evidence(clear.assign(diff=-clear["diff"])).decide(better) == "fail"


def test_contrast_evidence_tests_growth_per_seed():
    rows = [(h, s, 0.01 * h / 10 + 0.001 * s) for h in (10, 50, 100) for s in range(3)]
    grows = pd.DataFrame(rows, columns=["H", "seed", "diff"])
    ev = analysis.contrast_evidence(grows, "H")  # largest minus smallest H: +0.09 every seed
    assert ev.values == pytest.approx((0.09, 0.09, 0.09))
    noisy = grows.assign(diff=[0.0, 0.05, -0.05, 0, 0, 0, 0.01, -0.04, 0.04])
    assert analysis.contrast_evidence(noisy, "H").values == pytest.approx((0.01, -0.09, 0.09))
    assert analysis.contrast_evidence(grows[grows["H"] == 10], "H").values == ()


def test_share_and_correlation_evidence_are_one_value_per_seed():
    points = pd.DataFrame(
        {
            "seed": [0] * 4 + [1] * 4,
            "diff": [-1, -1, -1, 1, -1, 1, 1, 1.0],
            "x": [1, 2, 3, 4, 1, 2, 3, 4.0],
            "y": [1, 2, 3, 4, 4, 3, 2, 1.0],
        }
    )
    share = analysis.share_evidence(points)
    assert share.values == (0.75, 0.25) and share.test == "one-sample t"
    corr = analysis.correlation_evidence(points, "x", "y")
    assert corr.values == pytest.approx((1.0, -1.0))
    # a seed with fewer than three points has no correlation
    assert analysis.correlation_evidence(points.iloc[:6], "x", "y").values == pytest.approx((1.0,))


def test_evidence_records_infeasible_runs_and_tables_show_its_mean():
    frame = pd.DataFrame(
        {
            "method": ["SVM-LC", "SVM-LC", "SVM-RC", "GD-ReLU"],
            "status": ["optimal", "infeasible"] + ["infeasible", "ok"],
        }
    )
    ev = analysis.paired_evidence(pd.DataFrame({"seed": [0, 1], "diff": [0.1, 0.3]}))
    assert analysis.with_dropped(ev, frame, ["SVM-LC"]).dropped == 1
    assert analysis.with_dropped(ev, frame, ["SVM-LC", "SVM-RC"]).dropped == 2
    # with seeds, the runs left out are named by seed: a verdict on seed 0 alone lost none
    seeded = frame.assign(seed=[0, 1, 0, 0]).set_axis([5, 5, 6, 6])  # a repeated index
    named = analysis.with_dropped(ev, seeded, ["SVM-LC", "SVM-RC"])
    assert named.dropped == 2 and sorted(named.dropped_seeds) == [0, 1]
    assert named.restricted([0]).dropped == 1 and named.restricted([1]).dropped == 1
    assert analysis.estimate(ev) == pytest.approx(0.2) and analysis.estimate(0.5) == 0.5
    table = analysis.evidence_table({"a": ev, "b": 0.5}, {"A": "a", "B": "b", "C": "c"})
    assert table.loc["A", "mean over seeds"] == pytest.approx(0.2)
    assert table.loc["A", "seeds"] == 2 and table.loc["A", "95% low"] < 0.2
    assert table.loc["B", "mean over seeds"] == 0.5 and np.isnan(table.loc["C", "seeds"])


# ---- best models, metrics, comparison with the authors ----------------------------------


def test_best_tables_label_every_model():
    runs = _runs()
    best = analysis.best_gln(runs["frame"], runs["shallow"])
    assert list(best["label"].drop_duplicates()) == list(analysis.BEST_LABELS.values())
    assert (best["N"] == 50).all()
    best3 = analysis.best_relu(runs["relu"], runs["frame"])
    assert list(best3["label"].drop_duplicates()) == list(analysis.RELU_BEST_LABELS.values())


def test_metrics_of_synthetic_runs():
    runs = _runs()
    frame, shallow, relu = runs["frame"], runs["shallow"], runs["relu"]
    m = {k: analysis.estimate(v) for k, v in analysis.gln_metrics(frame).items()}
    assert m["gap_gln_minus_gd"] == pytest.approx(-0.025)
    assert m["frac_gln_better_than_gd"] == 1.0
    assert m["gap_l2_minus_gd"] == pytest.approx(0.05)
    assert m["gap_l2eq23_minus_gd"] == pytest.approx(0.075)
    assert m["incons_l2_minus_gln"] == pytest.approx(m["incons_l2"] - m["incons_gln"])
    assert m["gap_l2_minus_gln_smallest_H"] == pytest.approx(0.075)
    assert m["gap_gln_minus_gd_nomi"] == pytest.approx(-0.025)
    assert m["share_configs_gln_below_gd"] == 1.0  # every C = 2 configuration, every seed
    ev = analysis.gln_metrics(frame)["gap_gln_minus_gd"]
    assert ev.test == "paired t" and ev.values == pytest.approx((-0.025,) * 3)  # one per seed
    b = analysis.best_metrics(frame, shallow)
    assert set(b) == {"best_shallow_minus_best_l2", "best_l2_minus_best_gln"}
    r = analysis.relu_metrics(relu, frame)
    assert r["error_lc_minus_rc"].estimate == pytest.approx(-0.025)
    assert r["error_lc_minus_rc"].values == pytest.approx((-0.025,) * 3)
    assert r["incons_hl_minus_lc"].estimate == pytest.approx(-0.025)
    assert r["frac_h_lc_better_than_rc"] == 1.0
    assert r["error_lc_minus_rc_least_favourable_h"].estimate == pytest.approx(-0.025)
    assert {"best_lc_minus_best_svm_gln", "best_rc_minus_best_svm_gln"} <= set(r)
    mom = analysis.momentum_metrics(relu)
    assert set(mom) >= {"gd_relu_error_m0_minus_m09", "incons_m0_minus_m09"}
    assert mom["incons_m0_minus_m09"].estimate == pytest.approx(0.0)  # same at both
    ours = analysis.gln_metrics(frame)
    beside = analysis.metrics_beside_authors(
        ours, analysis.gln_metrics(reference.reference_frame())
    )
    assert list(beside.columns) == ["ours", "authors' data, same statistic"]
    assert set(m) <= set(beside.index)  # and whatever the authors' grid adds (C = 4, H = 100)
    counts = analysis.run_counts(frame)
    assert counts.name == "runs" and counts.sum() == len(frame)


def test_agreement_table_and_metrics():
    cmp = pd.DataFrame(
        {
            "method": ["GD-GLN", "GD-GLN", "SVM-GLN", "SVM-shallow"],
            "within_tolerance": [True, False, True, True],
        }
    )
    agreement = analysis.agreement_table(cmp)
    assert list(agreement.columns) == ["share within 1.5 points", "cells"]
    assert agreement.loc["GD-GLN", "cells"] == 2
    m = analysis.agreement_metrics(agreement)
    assert m["frac_cells_within_1p5_gd_gln"] == 0.5
    assert m["frac_cells_within_1p5_svm_gln"] == 1.0
    assert m["frac_cells_within_1p5_svm_shallow"] == 1.0
    assert np.isnan(m["frac_cells_within_1p5_gd_shallow"])  # no cell: not a pass
    empty = analysis.agreement_metrics(analysis.agreement_table(cmp.iloc[:0]))
    assert all(np.isnan(v) for v in empty.values())


def test_this_run_comparison_covers_deep_and_shallow_cells():
    runs = _runs()
    cmp = reference.this_run_comparison(runs["frame"], runs["shallow"], reference.load_reference())
    assert cmp.empty or {"difference", "within_tolerance"} <= set(cmp.columns)


def test_committed_paper_comparison_reads_the_committed_table():
    committed = reference.committed_paper_comparison()
    table = project_root() / "results" / "paper" / "gln_norm" / reference.COMPARISON_FILE
    if not table.exists():
        assert committed is None
        return
    cmp, report = committed
    assert {"method", "within_tolerance", "difference"} <= set(cmp.columns)
    assert report["chapter"] == "gln_norm" and "counts" in report


def test_every_claim_metric_is_named_literally_in_analysis():
    """A reader finds a claim's metric by grepping its name in analysis.py."""
    claims = yaml.safe_load((project_root() / "data" / "claims" / "gln_norm.yaml").read_text())
    source = open(analysis.__file__).read()
    names = {c["metric"] for c in claims}
    missing = sorted(n for n in names if not re.search(rf'"{re.escape(n)}"', source))
    assert not missing, missing


def test_momentum_metrics_see_the_network_worse_without_momentum():
    rows = []
    for H, N, seed in itertools.product((10, 20), (50,), SEEDS):
        for momentum, err, inc in ((0.0, 0.12 + 0.001 * seed, 0.06), (0.9, 0.10, 0.04)):
            base = {"H": H, "N": N, "seed": seed, "momentum": momentum}
            rows.append({"method": "GD-ReLU", **base, "val_error": err})
            rows.append({"method": "SVM-LC", **base, "val_error": err, "inconsistency": inc})
    m = analysis.momentum_metrics(pd.DataFrame(rows))
    assert m["gd_relu_error_m0_minus_m09"].estimate == pytest.approx(0.021)
    assert m["gd_relu_error_m0_minus_m09"].values == pytest.approx((0.02, 0.021, 0.022))
    assert m["frac_gd_relu_worse_without_momentum"] == 1.0
    assert m["incons_m0_minus_m09"].values == pytest.approx((0.02,) * 3)
    flipped = pd.DataFrame(rows).assign(momentum=lambda f: 0.9 - f["momentum"])
    assert analysis.momentum_metrics(flipped)["gd_relu_error_m0_minus_m09"].estimate < 0


def test_group_sparsity_counts_units_with_zero_predictors():
    rows = [
        {
            "method": m,
            "depth": "deep",
            "H": 10,
            "C": 2,
            "N": 50,
            "median_init": True,
            "momentum": mom,
            "seed": s,
            "active_units": a,
        }
        for m, a in (("SVM-GLN", 6), ("SVM-L2", 10))
        for s in SEEDS
        for mom in (0.0, 0.9)  # gln_frame repeats an SVM row per momentum: counted once
    ]
    frame = pd.DataFrame(rows)
    frame.loc[(frame["method"] == "SVM-GLN") & (frame["seed"] == 2), "active_units"] = 5
    table = analysis.zero_unit_table(frame).set_index("method")
    assert table.loc["SVM-GLN", 10] == pytest.approx((0.4 + 0.4 + 0.5) / 3, abs=1e-4)
    assert table.loc["SVM-L2", 10] == 0.0
    m = analysis.sparsity_metrics(frame)
    assert m["zero_units_gln_minus_l2"].values == pytest.approx((0.4, 0.4, 0.5))
    dense = frame.assign(active_units=10)
    assert analysis.sparsity_metrics(dense)["zero_units_gln_minus_l2"].values == (0.0,) * 3


def test_relu_comparison_with_the_authors_flags_a_cell_off_by_two_points():
    ref = reference.load_relu_reference()
    assert set(ref["method"]) == {"GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL"}
    assert ref["H"].max() == 100
    cell = ref[(ref["method"] == "GD-ReLU") & (ref["H"] == 10) & (ref["N"] == 500)]
    ours = pd.DataFrame(
        {
            "method": "GD-ReLU",
            "depth": "relu",
            "H": 10,
            "C": 2,
            "N": 500,
            "median_init": True,
            "momentum": cell["momentum"].to_numpy(),
            "n_seeds": 3,
            "val_error_mean": cell["val_error_mean"].to_numpy() + np.array([0.0, 0.02]),
            "val_error_se": 0.001,
        }
    )
    cmp = reference.compare_relu(ours, ref)
    assert cmp["within_tolerance"].tolist() == [True, False]
    m = analysis.agreement_metrics(analysis.agreement_table(cmp))
    assert m["frac_cells_within_1p5_gd_relu"] == 0.5
    table = reference.authors_momentum(ref).set_index("method")
    assert table.loc["GD-ReLU", "cells with error worse at momentum 0"] == 2
    assert table.loc["GD-ReLU", "cells with both (error)"] == 12


# ---- SVM-L2 as the authors' code solves it ---------------------------------------------------


def _authors_program_rows(frame: pd.DataFrame, shift: float) -> pd.DataFrame:
    """Synthetic rows of the authors' SVM-L2 program: the GD-GLN's rows, `shift` worse, paired
    like an SVM (gd_val_error, svm_minus_gd, inconsistency as for our SVM-L2)."""
    l2 = frame[frame["method"] == "SVM-L2"].copy()
    gd = l2["gd_val_error"]
    return l2.assign(
        method=tasks.AUTHORS_L2, val_error=gd + shift, svm_minus_gd=shift, status="optimal"
    )


def test_authors_l2_metrics_put_the_authors_program_in_place_of_svm_l2():
    runs = _runs()
    frame, shallow = runs["frame"], runs["shallow"]
    auth = _authors_program_rows(frame, 0.15)  # ours: +0.05 over GD-GLN; authors' program +0.15
    m = analysis.authors_l2_metrics(frame, auth, shallow)
    assert m["gap_l2auth_minus_gd"].estimate == pytest.approx(0.15)
    assert m["gap_l2auth_minus_gln_smallest_H"].estimate == pytest.approx(0.175)
    ours = analysis.gln_metrics(frame)
    assert ours["gap_l2_minus_gd"].estimate == pytest.approx(0.05)  # our SVM-L2 untouched
    swapped_best = analysis.best_metrics(analysis.with_l2(frame, auth), shallow)
    assert m["best_l2auth_minus_best_gln"] == swapped_best["best_l2_minus_best_gln"]
    # broken input: variant rows under another name are not taken for the authors' program
    broken = analysis.authors_l2_metrics(frame, auth.assign(method="SVM-L2-eq23"), shallow)
    assert np.isnan(analysis.estimate(broken["gap_l2auth_minus_gd"]))
    table = analysis.l2_programs_beside({**ours, **m}, ours)
    assert table.loc["SVM-L2 minus GD-GLN error (Fig. 2a)", "authors' program"] == 0.15
    assert table.loc["SVM-L2 minus GD-GLN error (Fig. 2a)", "our SVM-L2"] == 0.05
    assert set(m) == {row[2] for row in analysis.L2_STATISTICS}


def test_authors_program_is_compared_with_the_authors_svm_l2():
    """Both minimizers of the authors' program are matched with the authors' SVM-L2 cell; the
    per-cell table puts them beside ours, each with its difference from the authors'."""
    ref = reference.load_reference()
    cell = ref[
        (ref["method"] == "SVM-L2")
        & (ref["H"] == 10)
        & (ref["C"] == 2)
        & (ref["N"] == 500)
        & ref["median_init"]
    ]
    assert len(cell) == 1
    theirs = float(cell["val_error_mean"].iloc[0])
    rows = []
    for method, offset in (
        ("SVM-L2", -0.14),
        (tasks.AUTHORS_L2, -0.04),
        (tasks.AUTHORS_L2_SOLVER, -0.01),
    ):
        rows.append(
            {
                "method": method,
                "depth": "deep",
                "H": 10,
                "C": 2,
                "N": 500,
                "median_init": True,
                "momentum": 0.0,
                "val_error_mean": theirs + offset,
                "val_error_se": 0.0,
                "n_seeds": 3,
            }
        )
    cmp = reference.compare_with_reference(pd.DataFrame(rows), ref).set_index("method")
    assert cmp.loc[tasks.AUTHORS_L2, "difference"] == pytest.approx(-0.04)
    assert bool(cmp.loc[tasks.AUTHORS_L2_SOLVER, "within_tolerance"])
    assert not bool(cmp.loc[tasks.AUTHORS_L2, "within_tolerance"])
    by_cell = reference.l2_programs_by_cell(cmp.reset_index())
    assert len(by_cell) == 1
    row = by_cell.iloc[0]
    assert row["authors' SVM-L2"] == pytest.approx(theirs)
    assert row[f"{tasks.AUTHORS_L2} minus authors'"] == pytest.approx(-0.04)
    assert row["SVM-L2 minus authors'"] == pytest.approx(-0.14)
    agreement = analysis.agreement_metrics(analysis.agreement_table(cmp.reset_index()))
    assert agreement["frac_cells_within_1p5_svm_l2_authors"] == 0.0
    assert agreement["frac_cells_within_1p5_svm_l2"] == 0.0
    assert reference.l2_programs_by_cell(cmp.reset_index().iloc[:0]).empty


def test_authors_rc_metrics_use_the_variant_in_svm_rcs_place():
    """The SVM-RC claims' metrics with the authors' construction: the variant's rows replace
    SVM-RC's (a variant 10 points worse and 5 points less consistent moves the statistics by
    that much); the per-cell table counts infeasible solves and flags agreement."""
    runs = _runs()
    relu, frame = runs["relu"], runs["frame"]
    rc = relu[relu["method"] == "SVM-RC"]
    variant = rc.assign(
        method=tasks.SVM_RC_AUTHORS,
        val_error=rc["val_error"] + 0.1,
        inconsistency=rc["inconsistency"] + 0.05,
    )
    ours = analysis.relu_metrics(relu, frame, 0.0)
    theirs = analysis.authors_rc_metrics(relu, variant, frame, 0.0)
    assert set(theirs) == {v for _, _, v in analysis.RC_STATISTICS}
    assert theirs["incons_rcauth"].estimate == pytest.approx(ours["incons_rc"].estimate + 0.05)
    same = analysis.authors_rc_metrics(
        relu,
        variant.assign(val_error=rc["val_error"], inconsistency=rc["inconsistency"]),
        frame,
        0.0,
    )
    assert same["incons_rcauth"] == ours["incons_rc"]
    assert same["error_lc_minus_rcauth"] == ours["error_lc_minus_rc"]
    beside = reference.rc_constructions_beside(ours, theirs)
    assert list(beside.columns) == ["our SVM-RC", "authors' construction"]
    broken = variant.assign(status=np.where(np.arange(len(variant)) == 0, "infeasible", "ok"))
    ref = reference.load_relu_reference()
    assert "cells" in reference.variant_agreement(reference.variants_by_cell(relu, broken, None))
    cells = reference.variants_by_cell(relu, broken, ref)
    agree = reference.variant_agreement(cells)
    assert agree.loc[tasks.SVM_RC_AUTHORS, "infeasible solves"] == 1
    assert agree.loc["SVM-RC", "infeasible solves"] == (relu["status"] == "infeasible").sum()


def _finite_time_inputs(shrink: bool):
    """Two seeds, one cell, three checkpoints: GD's validation signs move toward the SVM-GLN's
    (`shrink`) or away from them; the SVM of seed 1 failed in a second cell."""
    n, rng = 40, np.random.default_rng(3)
    svm_signs = {s: np.where(rng.random(n) < 0.5, 1.0, -1.0) for s in (0, 1)}
    longer_t = {"H": 10, "C": 2, "N": 50, "seeds": [0, 1], "n_val": n}
    flips = [8, 4, 2] if shrink else [2, 4, 8]
    result = {"steps": [100, 200, 400], "val_error": [], "train_error": [], "train_loss": []}
    result["pred_val"] = []
    for k, f in enumerate(flips):
        signs = []
        for s in (0, 1):
            g = svm_signs[s].copy()
            g[: f + s] *= -1  # seed 1 one disagreement more
            signs.append(gln.pack_signs(g))
        result["pred_val"].append(signs)
        result["val_error"].append([0.2 - 0.01 * k, 0.21 - 0.01 * k])
        result["train_error"].append([0.0, 0.0])
        result["train_loss"].append([0.1 / (k + 1)] * 2)
    svm_t = {"method": "SVM-GLN", "H": 10, "C": 2, "N": 50, "median_init": True, "seeds": [0, 1]}
    svm_r = {"pred_val": [gln.pack_signs(svm_signs[s]) for s in (0, 1)], "val_error": [0.15, 0.16]}
    other_t = {**svm_t, "method": "SVM-L2"}  # another method: ignored
    return [longer_t], [result], [other_t, svm_t], [svm_r, svm_r]


def test_finite_time_frame_compares_each_checkpoint_with_the_same_seeds_svm_gln():
    ft = analysis.finite_time_frame(*_finite_time_inputs(shrink=True))
    assert len(ft) == 6 and set(ft["steps"]) == {100, 200, 400}
    row = ft[(ft["seed"] == 1) & (ft["steps"] == 100)].iloc[0]
    assert row["inconsistency"] == pytest.approx(9 / 40) and row["svm_val_error"] == 0.16
    summary = analysis.finite_time_summary(ft)
    assert list(summary["inconsistency_mean"]) == pytest.approx([8.5 / 40, 4.5 / 40, 2.5 / 40])
    assert list(summary["inconsistency_se"]) == pytest.approx(
        [0.5 / 40 / np.sqrt(2) * np.sqrt(2)] * 3
    )
    m = analysis.finite_time_metrics(ft)
    # per seed, longest run minus the paper's step count: 6 fewer disagreements of 40
    assert m["finite_time_incons_change"].values == pytest.approx((-6 / 40, -6 / 40))
    assert m["finite_time_error_change"].values == pytest.approx((-0.02, -0.02))
    # broken input: GD moving away from the SVM-GLN makes the inconsistency claim fail
    away = analysis.finite_time_metrics(analysis.finite_time_frame(*_finite_time_inputs(False)))
    assert away["finite_time_incons_change"].estimate > 0


def test_finite_time_frame_without_the_svm_gln_is_missing_not_zero():
    lt, lr, st, sr = _finite_time_inputs(shrink=True)
    ft = analysis.finite_time_frame(lt, lr, st[:1], sr[:1])  # only the SVM-L2
    assert ft["inconsistency"].isna().all() and ft["svm_val_error"].isna().all()
