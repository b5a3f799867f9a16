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

from implicit_bias.chapters.gln_norm import analysis, reference
from implicit_bias.core.paths import project_root
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
    assert list(means.columns) == ["mean"]
    assert "same seed (definition)" in means.index and "H" not in means.index


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
    m = analysis.gln_metrics(frame)
    assert m["gap_gln_minus_gd"] == pytest.approx(-0.025)
    assert m["frac_gln_better_than_gd"] == 1.0
    assert m["gap_l2_minus_gd"] == pytest.approx(0.05)
    assert m["gap_l2eq23_minus_gd"] == pytest.approx(0.075)
    assert m["incons_l2_minus_gln"] == pytest.approx(m["incons_l2"] - m["incons_gln"])
    assert m["gap_l2_minus_gln_smallest_H"] == pytest.approx(0.075)
    assert m["gap_gln_minus_gd_nomi"] == pytest.approx(-0.025)
    b = analysis.best_metrics(frame, shallow)
    assert set(b) == {"best_shallow_minus_best_l2", "best_l2_minus_best_gln"}
    r = analysis.relu_metrics(relu, frame)
    assert r["error_lc_minus_rc"] == pytest.approx(-0.025)
    assert r["incons_hl_minus_lc"] == pytest.approx(-0.025)
    assert r["frac_h_lc_better_than_rc"] == 1.0
    beside = analysis.metrics_beside_authors(m, analysis.gln_metrics(reference.reference_frame()))
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
