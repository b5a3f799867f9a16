"""Tests of the gln_norm chapter's task functions and task lists
(`implicit_bias.chapters.gln_norm.tasks`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.gln_norm import analysis, tasks
from implicit_bias.core.engine.tasks import spec_of


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tiny tensors: one thread avoids oversubscribing a small shared CPU (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# two seeds, 200 validation images, 20 SGD steps in float64: the tiny runs of these tests
TINY_RUN = {"seeds": [0, 1], "n_val": 200, "n_steps": 20, "lr_drop_step": 10, "dtype": "float64"}


def test_task_functions_are_declared_and_read_the_device():
    for fn in (tasks.gd_task, tasks.svm_task, tasks.relu_task, tasks.svm_l2_authors_task):
        spec = spec_of(fn)
        assert spec is not None and spec.name == fn.__name__
        # the tasks pin their own threads on a CPU (`_task_device`), so the declaration
        # leaves them as they are
        assert spec.uses_device and spec.threads is None


def test_expand_blocks_and_task_lists():
    cfg = {
        "gln_blocks": [
            {"H": [10, 20], "C": [2], "N": [5], "median_init": [True], "momentum": [0.0, 0.9]},
            {"H": [10], "C": [2], "N": [5], "median_init": [True], "momentum": [0.0]},
        ],
        "seeds": [0],
        "n_val": 4,
        "n_steps": 2,
        "lr_drop_step": 1,
        "dtype": "float32",
        "solver": "fast",
        "svm_methods": ["SVM-GLN", "SVM-L2"],
        "shallow_blocks": [{"k": [0, 3], "N": [5], "median_init": [True], "momentum": [0.0]}],
        "shallow_svm_max_k": 2,
        "relu_blocks": [{"H": [10], "N": [5], "momentum": [0.0]}],
        "authors_l2_ridge": 1e-7,
        "authors_l2_solver_blocks": [{"H": [10], "C": [2, 4], "N": [5], "median_init": [True]}],
    }
    assert len(tasks.gd_tasks(cfg)) == 4  # the duplicate of block 2 is dropped
    assert len(tasks.svm_tasks(cfg)) == 4  # 2 (H) x 2 methods, momentum-free
    assert [t["C"] for t in tasks.shallow_gd_tasks(cfg)] == [1, 8]
    assert [t["C"] for t in tasks.shallow_svm_tasks(cfg)] == [1]
    assert len(tasks.relu_tasks(cfg)) == 1
    # the ReLU networks take relu_seeds where a profile has them (confirmatory seeds of their
    # comparisons alone), the context seeds otherwise; the other families keep the seeds
    assert tasks.relu_tasks(cfg)[0]["seeds"] == [0]
    more = {**cfg, "relu_seeds": [0, 1, 2]}
    assert tasks.relu_tasks(more)[0]["seeds"] == [0, 1, 2]
    assert tasks.relu_no_bias_tasks(more)[0]["seeds"] == [0, 1, 2]
    assert {tuple(t["seeds"]) for t in tasks.gd_tasks(more)} == {(0,)}
    # seed groups: each group is a task of its own, the earlier groups' tasks unchanged (so
    # confirmatory seeds run beside the committed tasks instead of recomputing them)
    grouped = {**cfg, "gln_seeds": [[0], [3, 4]], "relu_seeds": [[0, 1], [5]]}
    assert [t["seeds"] for t in tasks.gd_tasks(grouped)] == [[0]] * 4 + [[3, 4]] * 4
    assert tasks.gd_tasks(grouped)[:4] == tasks.gd_tasks(cfg)
    assert tasks.svm_tasks(grouped)[:4] == tasks.svm_tasks(cfg)
    assert [t["seeds"] for t in tasks.relu_tasks(grouped)] == [[0, 1], [5]]
    assert [t["seeds"] for t in tasks.relu_no_bias_tasks(grouped)] == [[0, 1]]  # first group
    # the replacement plans' networks: one group of their own seeds, none where there are none
    assert tasks.relu_replacement_tasks(grouped) == []
    replaced = {**grouped, "relu_replacement_seeds": [23, 24]}
    assert [t["seeds"] for t in tasks.relu_replacement_tasks(replaced)] == [[23, 24]]
    assert tasks.relu_tasks(replaced) == tasks.relu_tasks(grouped)  # the others keep theirs
    assert {tuple(t["seeds"]) for t in tasks.shallow_gd_tasks(grouped)} == {(0,)}
    with pytest.raises(ValueError, match="two groups"):
        tasks.gd_tasks({**cfg, "gln_seeds": [[0, 1], [1, 2]]})
    auth = tasks.svm_l2_authors_tasks(cfg)
    assert [t["H"] for t in auth] == [10, 20] and {t["ridge"] for t in auth} == {1e-7}
    osqp = tasks.svm_l2_authors_solver_tasks(cfg)
    assert [(t["C"], t["solver"], t["max_iters"]) for t in osqp] == [
        (2, "OSQP", 10000),
        (4, "OSQP", 10000),
    ]


def test_mnist_tasks_end_to_end_tiny():
    pytest.importorskip("implicit_bias.models.gln_solvers")
    from implicit_bias.core.engine.data import DataError

    common = {
        **TINY_RUN,
        "device": "cpu",
    }
    gd_t = {
        "depth": "deep",
        "H": 3,
        "C": 2,
        "N": 40,
        "median_init": True,
        "momentum": 0.9,
        **common,
    }
    try:
        gd_r = tasks.gd_task(gd_t)
    except DataError:
        pytest.skip("MNIST not available (make data)")
    assert len(gd_r["val_error"]) == 2 and all(0 <= e <= 1 for e in gd_r["val_error"])
    svm_t = {
        "method": "SVM-GLN",
        "H": 3,
        "C": 2,
        "N": 40,
        "median_init": True,
        "seeds": [0, 1],
        "n_val": 200,
        "solver": "fast",
        "device": "cpu",
    }
    svm_r = tasks.svm_task(svm_t)
    assert svm_r["status"] == "ok" and svm_r["train_error"] == [0.0, 0.0]
    frame = analysis.gln_frame([gd_t], [gd_r], [svm_t], [svm_r])
    assert frame["inconsistency"].notna().sum() == 2
    relu_r = tasks.relu_task({"H": 4, "N": 40, "momentum": 0.0, "solver": "fast", **common})
    assert set(relu_r) >= {"GD-ReLU", "SVM-RC", "SVM-LC", "SVM-HL"}
    table, m = analysis.kkt_experiment(40, 200, "CLARABEL", H=3)
    assert m["svm_gln_kkt_max"] < 1e-6 and m["svm_gln_fast_vs_ecos_objective_rel"] < 1e-6


def test_authors_l2_task_tiny():
    """The authors' SVM-L2 program on a tiny MNIST problem: the fast solver's minimum-norm
    minimizer and cvxpy's (Clarabel) reach the same objective, the fast one with no larger zeta."""
    from implicit_bias.core.engine.data import DataError

    t = {
        "method": tasks.AUTHORS_L2,
        "H": 3,
        "C": 2,
        "N": 40,
        "median_init": True,
        "seeds": [0, 1],
        "n_val": 200,
        "device": "cpu",
    }
    try:
        fast = tasks.svm_l2_authors_task({**t, "solver": "fast", "ridge": 1e-7})
    except DataError:
        pytest.skip("MNIST not available (make data)")
    ref = tasks.svm_l2_authors_task({**t, "solver": "CLARABEL"})
    assert fast["status"] == "ok" and ref["status"] == "ok"
    assert fast["train_error"] == [0.0, 0.0]
    for a, b, na, nb in zip(
        fast["objective"], ref["objective"], fast["zeta_norm"], ref["zeta_norm"]
    ):
        assert a == pytest.approx(b, rel=1e-5)
        assert na <= nb * (1 + 1e-6)
    assert fast["seconds"] > 0 and len(fast["pred_val"]) == 2


def test_relu_task_solves_the_authors_svm_rc():
    """SVM-RC with the authors' gates, solved by `relu_task` for the same networks: every
    training sample has an open gate (the always-on one), the solves are optimal, the
    inconsistency is against the task's own GD-ReLU, and the variant's frame rows carry its
    name."""
    from implicit_bias.core.engine.data import DataError

    t = {
        "H": 32,  # 33 features separate 40 points, with or without the constant
        "N": 40,
        "momentum": 0.0,
        "solver": "fast",
        **TINY_RUN,
        "device": "cpu",
    }
    try:
        r = tasks.relu_task(t)
    except DataError:
        pytest.skip("MNIST not available (make data)")
    slot = r[tasks.SVM_RC_AUTHORS]
    assert slot["solver_status"] == ["optimal", "optimal"]
    assert min(slot["min_open_gates"]) >= 1
    assert all(0 <= v <= 1 for v in slot["inconsistency"])
    named = tasks.relu_variant_tasks(
        {
            "relu_blocks": [{"H": [32], "N": [40], "momentum": [0.0]}],
            **{k: t[k] for k in ("seeds", "n_val", "n_steps", "lr_drop_step", "dtype")},
            "solver": "fast",
        },
        tasks.SVM_RC_AUTHORS,
    )
    assert named[0]["method"] == tasks.SVM_RC_AUTHORS
    rows = analysis.relu_variant_frame(named, [r])
    assert list(rows["method"].unique()) == [tasks.SVM_RC_AUTHORS] and len(rows) == 2
    assert list(rows["gd_val_error"]) == r["GD-ReLU"]["val_error"]
    assert list(rows["inconsistency"]) == slot["inconsistency"]
    plain, no_constant = r["SVM-HL"], r[tasks.SVM_HL_NO_CONSTANT]
    assert plain["solver_status"] == no_constant["solver_status"] == ["optimal", "optimal"]
    assert plain["val_error"] != no_constant["val_error"]  # the constant feature matters


def test_relu_no_bias_task_trains_the_authors_network():
    """The network without output bias starts from `relu_task`'s weights and ends elsewhere; its
    SVM-HL (no constant) is compared with it; the frames name the variant and keep the numbers."""
    from implicit_bias.chapters.gln_norm import reference
    from implicit_bias.core.engine.data import DataError

    cfg = {
        "relu_blocks": [{"H": [32], "N": [40], "momentum": [0.9]}],
        **TINY_RUN,
        "solver": "fast",
    }
    (t,) = tasks.relu_no_bias_tasks(cfg, "cpu")
    try:
        r = tasks.relu_no_bias_task(t)
    except DataError:
        pytest.skip("MNIST not available (make data)")
    with_bias = tasks.relu_task({k: v for k, v in t.items() if k != "method"})
    slot = r[tasks.SVM_HL_NO_CONSTANT]
    assert slot["solver_status"] == ["optimal", "optimal"]
    # same SVM on a different network: the bias changed the trained hidden layer
    assert slot["val_error"] != with_bias[tasks.SVM_HL_NO_CONSTANT]["val_error"]
    assert r["GD-ReLU"]["val_error"] != with_bias["GD-ReLU"]["val_error"]
    gd, hl = reference.no_bias_frames([t], [r])
    assert list(gd["method"].unique()) == [tasks.GD_RELU_NO_BIAS]
    assert list(gd["val_error"]) == r["GD-ReLU"]["val_error"]
    assert list(hl["inconsistency"]) == slot["inconsistency"]
    relu = analysis.relu_frame([t], [with_bias])
    cells = reference.no_bias_by_cell(relu, gd, hl, None)
    assert cells.loc[0, f"{tasks.GD_RELU_NO_BIAS}: mean error"] == pytest.approx(
        np.mean(r["GD-ReLU"]["val_error"])
    )
    assert not [c for c in cells.columns if c.endswith("infeasible")]  # trainings, not solves
    agreement = reference.no_bias_agreement(cells)
    assert list(agreement.index) == ["GD-ReLU", tasks.GD_RELU_NO_BIAS]
    assert "infeasible solves" not in agreement.columns


def test_gd_longer_task_starts_as_gd_task_and_keeps_training():
    """The first checkpoint is `gd_task`'s run exactly (same data, contexts, init, schedule and
    shuffles); later ones continue it: the training loss keeps falling at the final rate."""
    from implicit_bias.core.engine.data import DataError

    common = {k: v for k, v in TINY_RUN.items() if k != "n_steps"}
    cell = {"H": 3, "C": 2, "N": 40, "median_init": True, "momentum": 0.0, "device": "cpu"}
    longer = {**common, **cell, "checkpoints": [20, 60, 200]}
    try:
        out = tasks.gd_longer_task(longer)
    except DataError:
        pytest.skip("MNIST not available (make data)")
    ref = tasks.gd_task({**common, **cell, "depth": "deep", "n_steps": 20})
    assert out["steps"] == [20, 60, 200]
    assert out["val_error"][0] == ref["val_error"] and out["pred_val"][0] == ref["pred_val"]
    assert out["train_error"][0] == ref["train_error"]
    loss = np.array(out["train_loss"])  # (checkpoints, seeds)
    assert np.all(np.diff(loss, axis=0) < 0)
    assert out["pred_val"][2] != out["pred_val"][0]  # training went on
    with pytest.raises(ValueError, match="momentum = 0"):
        tasks.gd_longer_task({**longer, "momentum": 0.9})


def test_gd_longer_tasks_from_the_profile():
    cfg = {
        "seeds": [0, 1, 2],
        "n_val": 100,
        "n_steps": 800,
        "lr_drop_step": 400,
        "dtype": "float32",
        "finite_time": {"H": [10, 20], "C": [2], "N": [300], "checkpoints": [800, 1600]},
    }
    t = tasks.gd_longer_tasks(cfg)
    assert [(x["H"], x["C"], x["N"]) for x in t] == [(10, 2, 300), (20, 2, 300)]
    assert all(x["median_init"] and x["momentum"] == 0.0 and "n_steps" not in x for x in t)
    assert t[0]["checkpoints"] == [800, 1600]


def test_gd_code_path_follows_the_trainer():
    assert tasks.gd_code_path({"depth": "shallow", "N": 500, "C": 2}) == "shallow, kernel form"
    assert tasks.gd_code_path({"depth": "shallow", "N": 1000, "C": 2}) == "shallow, row-lazy"
    assert tasks.gd_code_path({"depth": "shallow", "N": 1000, "C": 1024}) == "shallow, kernel form"
    assert tasks.gd_code_path({"depth": "shallow", "N": 2000, "C": 2**15}) == "shallow, row-lazy"
    assert tasks.gd_code_path({"depth": "deep", "N": 1000}) == "deep, kernel form"
    assert tasks.gd_code_path({"depth": "deep", "N": 2000}) == "deep, feature form"


def test_authors_data_task_under_both_protocols():
    """One subset: every seed trains on the first seed's subset, so the first seed's GD-GLN and
    SVM-GLN are `gd_task`'s and `svm_task`'s and the second's differ. Median over all images:
    the same subsets, other cutoffs, so the first seed's results differ too. The summary
    tables keep the numbers."""
    from implicit_bias.chapters.gln_norm import reference
    from implicit_bias.core.engine.data import DataError

    cfg = {
        "authors_data_blocks": [
            {"H": [3], "C": [2], "N": [40], "median_init": [True], "momentum": [0.0]}
        ],
        **TINY_RUN,
        "solver": "fast",
    }
    (one,) = tasks.authors_data_tasks(cfg, tasks.ONE_SUBSET, "cpu")
    (median,) = tasks.authors_data_tasks(cfg, tasks.ALL_IMAGES_MEDIAN, "cpu")
    try:
        r_one, r_median = tasks.authors_data_task(one), tasks.authors_data_task(median)
    except DataError:
        pytest.skip("MNIST not available (make data)")
    with pytest.raises(ValueError, match="unknown protocol"):
        tasks.authors_data_task({**one, "protocol": "other"})
    gd_t = {k: v for k, v in one.items() if k not in ("solver", "protocol")}
    gd = tasks.gd_task({**gd_t, "depth": "deep"})
    svm_t = {
        k: one[k] for k in ("H", "C", "N", "median_init", "seeds", "n_val", "solver", "device")
    }
    svm = tasks.svm_task({**svm_t, "method": "SVM-GLN"})
    assert r_one["GD-GLN"]["val_error"][0] == gd["val_error"][0]
    assert r_one["SVM-GLN"]["val_error"][0] == svm["val_error"][0]
    assert r_one["SVM-GLN"]["val_error"][1] != svm["val_error"][1]  # another subset
    assert r_median["SVM-GLN"]["val_error"][0] != svm["val_error"][0]  # other cutoffs
    assert r_one["SVM-GLN"]["solver_status"] == ["optimal", "optimal"]
    frame = analysis.gln_frame(
        [{**gd_t, "depth": "deep"}], [gd], [{**svm_t, "method": "SVM-GLN"}], [svm]
    )
    cells = reference.data_protocols_by_cell(frame, [one, median], [r_one, r_median], None)
    row = cells[cells["method"] == "GD-GLN"].iloc[0]
    assert row[f"{tasks.ONE_SUBSET}: mean"] == pytest.approx(np.mean(r_one["GD-GLN"]["val_error"]))
    assert row[f"{reference.OURS_DATA}: mean"] == pytest.approx(np.mean(gd["val_error"]))
    summary = reference.data_protocols_summary(cells)
    assert summary.loc[("SVM-GLN", tasks.ALL_IMAGES_MEDIAN), "cells"] == 1


def test_seeds_in_keeps_the_rows_of_the_seeds_named():
    import pandas as pd

    frame = pd.DataFrame({"seed": [0, 1, 2, 3, 7], "x": range(5)})
    assert list(analysis.seeds_in([0, 1, 2])(frame)["x"]) == [0, 1, 2]
    assert analysis.seeds_in([9])(frame).empty


@pytest.mark.parametrize("n", [300, 20])
def test_svm_hl_uses_feature_space_with_fewer_features_than_samples(n):
    # fewer features than samples: the feature-space solve, equal to the kernel form (the
    # reference) to 1e-9 relative in ||w||^2 and 1e-6 in w; otherwise the kernel form itself
    from implicit_bias.models import gln_solvers

    rng = np.random.default_rng(5)
    F = np.maximum(rng.normal(size=(n, 8)) @ rng.normal(size=(8, 40)), 0)
    y = np.sign(F @ rng.normal(size=40) + 0.1)
    res = tasks._linear(F, y, "fast", "cpu")
    ref = gln_solvers.svm_linear(F, y, device="cpu")
    same_path = gln_solvers.svm_linear_features if n > 40 else gln_solvers.svm_linear
    assert res.status == ref.status == "optimal"
    assert res.primal.tolist() == same_path(F, y, device="cpu").primal.tolist()
    assert abs(res.objective - ref.objective) <= 1e-9 * ref.objective
    w_ref = ref.primal
    assert np.linalg.norm(res.primal - w_ref) <= 1e-6 * np.linalg.norm(w_ref)
