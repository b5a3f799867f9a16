"""Tests of the deep_matrix_factorization chapter's tasks, analysis and figures on small runs,
including inputs broken on purpose so that each metric shows it can fail."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from implicit_bias.chapters.deep_matrix_factorization import analysis, figures, tasks
from implicit_bias.core.verdicts import decision

matplotlib.use("Agg")
torch.set_num_threads(1)

BASE = {"n": 12, "rank": 1, "lr_factor": 1.0, "max_steps": 4000, "tol": 1e-6}
COUNTS = [50, 70]
SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def runs():
    fig1 = [
        {**BASE, "seed": s, "depth": d, "scale": 1e-3, "counts": COUNTS}
        for d in (2, 3, 4)
        for s in SEEDS
    ]
    frame = analysis.completion_frame(fig1, [tasks.completion_task(t) for t in fig1])
    nuc = [
        {
            "n": 12,
            "rank": 1,
            "seed": s,
            "count": m,
            "solver": "SCS",
            "solver_eps": 1e-9,
            "solver_max_iters": 100_000,
        }
        for s in SEEDS
        for m in COUNTS
    ]
    nuclear = analysis.nuclear_frame(nuc, [tasks.nuclear_task(t) for t in nuc])
    return frame, nuclear


def test_completion_task_reports_every_count(runs):
    frame, nuclear = runs
    assert len(frame) == 3 * len(SEEDS) * len(COUNTS)
    assert set(frame["status"]) <= {"ok", "unconverged"}
    assert (nuclear["status"] == "optimal").all() and (nuclear["max_violation"] < 1e-5).all()


def test_a_step_cap_makes_runs_unconverged_and_they_are_dropped(runs):
    capped = {**BASE, "seed": 0, "depth": 3, "scale": 1e-3, "counts": COUNTS, "max_steps": 2}
    frame, nuclear = runs
    bad = analysis.completion_frame([capped], [tasks.completion_task(capped)])
    assert (bad["status"] == "unconverged").all()
    mixed = pd.concat([frame[~((frame["depth"] == 3) & (frame["seed"] == 0))], bad])
    m = analysis.recovery_metrics(mixed, nuclear, 1e-3)
    ev = m["fig1_error_depth3_minus_depth2"]
    assert ev.dropped == len(COUNTS) and len(ev.values) == len(SEEDS) - 1


def test_recovery_metrics_are_per_seed_evidence(runs):
    frame, nuclear = runs
    m = analysis.recovery_metrics(frame, nuclear, 1e-3)
    for key in (
        "fig1_error_depth3_minus_depth2",
        "fig1_error_depth4_minus_depth2",
        "fig1_error_depth3_minus_nuclear",
        "tail_share_depth3_minus_depth2",
        "tail_share_depth4_minus_depth3",
    ):
        assert isinstance(m[key], decision.Evidence) and m[key].test == "paired t"
    # the difference is computed against an independent frame: swapping the depths flips it
    swapped = frame.assign(depth=frame["depth"].map({2: 3, 3: 2, 4: 4}))
    flipped = analysis.recovery_metrics(swapped, nuclear, 1e-3)
    assert np.allclose(
        flipped["fig1_error_depth3_minus_depth2"].values,
        [-v for v in m["fig1_error_depth3_minus_depth2"].values],
    )


def test_init_metrics_can_fail():
    """A frame in which the smaller initialization has the smaller nuclear norm gives a
    negative difference: the claim '> 0' would fail."""
    rows = [
        {
            "depth": d,
            "scale": a,
            "seed": s,
            "count": c,
            "status": "ok",
            "nuclear_norm": 10 + (a if c == 20 else 0) + 0.01 * s,
            "rel_error": 0.1 + a,
        }
        for a in (1e-1, 1e-3)
        for s in SEEDS
        for c in (20, 40)
        for d in (2, 3, 4)
    ]
    nuclear = pd.DataFrame(
        [
            {"seed": s, "count": c, "status": "optimal", "nuclear_norm": 10.0}
            for s in SEEDS
            for c in (20, 40)
        ]
    )
    ratios = analysis.ratio_frame(pd.DataFrame(rows), nuclear)
    m = analysis.init_metrics(ratios, 20, 40)
    au = analysis.authors_init_metrics(ratios, 20)
    assert m["fig2_few_ratio_small_minus_large_init"].estimate < 0
    assert m["fig2_few_error_small_minus_large_init"].estimate < 0
    fewer = analysis.fewer_init_metrics(ratios, 20)
    assert fewer["fig2_fewer_ratio_small_minus_large_init"].estimate < 0
    assert fewer["fig2_fewer_error_small_minus_large_init"].estimate < 0
    # at the count where the smaller start has the larger nuclear norm (40 here) it passes
    rising = analysis.ratio_frame(
        pd.DataFrame(rows).assign(nuclear_norm=lambda f: 10 + 1e-3 / f["scale"]), nuclear
    )
    rise = analysis.fewer_init_metrics(rising, 40)["fig2_fewer_ratio_small_minus_large_init"]
    assert rise.estimate > 0
    for key in (
        "authors_fig2_few_ratio_small_minus_large_init",
        "fig2_few_ratio_small_minus_large_init_depth3",
        "fig2_few_ratio_small_minus_large_init_depth4",
    ):
        assert au[key].estimate < 0
    assert np.allclose(m["fig2_many_ratio_minus_one"].values, [0.0, 0.001, 0.002])


def test_dynamics_task_metrics_and_figures(runs):
    dyn_tasks = [
        {
            "n": 8,
            "rank": 2,
            "count": 44,
            "seed": 0,
            "depth": d,
            "scale": 1e-3,
            "lr_factor": c,
            "horizon": 150.0,
            "records": 20,
        }
        for d in (2, 3)
        for c in (0.1, 0.05)
    ]
    results = [tasks.dynamics_task(t) for t in dyn_tasks]
    dyn = analysis.dynamics_frame(dyn_tasks, results)
    m = analysis.dynamics_metrics(dyn)
    assert m["thm3_deviation_at_smallest_step_max"].value < 0.01
    assert 0.8 < m["thm3_deviation_slope_min"].value <= m["thm3_deviation_slope_max"].value < 1.2
    assert abs(m["thm3_rate_exponent_depth3"].value - 2 / 3) < 0.02
    assert np.isnan(m["thm3_rate_exponent_depth4"].value)  # no depth-4 run: no value, never a pass
    traj = analysis.trajectories_frame(dyn_tasks, results)
    assert isinstance(figures.singular_values(traj, dyn), Figure)
    frame, nuclear = runs
    assert isinstance(figures.recovery(analysis.recovery_table(frame, nuclear, 1e-3)), Figure)
    ratios = analysis.ratio_frame(frame, nuclear)
    assert isinstance(figures.init_scale(ratios), Figure)


def test_a_step_that_does_not_shrink_breaks_the_slope():
    """Deviations that do not shrink with the step give slope 0, outside [0.8, 1.2]."""
    dyn = pd.DataFrame(
        {
            "depth": [2, 2],
            "lr_factor": [0.1, 0.05],
            "lr": [0.1, 0.05],
            "deviation": [0.01, 0.01],
            "exponent": [0.5, 0.5],
        }
    )
    assert abs(analysis.dynamics_metrics(dyn)["thm3_deviation_slope_max"].value) < 1e-12


def test_recovery_table_counts_unconverged(runs):
    frame, nuclear = runs
    before = analysis.recovery_table(frame, nuclear, 1e-3)["unconverged"].sum()
    broken = frame.copy()
    first_ok = broken.index[broken["status"] == "ok"][0]
    broken.loc[first_ok, "status"] = "unconverged"
    table = analysis.recovery_table(broken, nuclear, 1e-3)
    assert table["unconverged"].sum() == before + 1


def test_authors_task_and_the_protocols_table(runs):
    frame, nuclear = runs
    au = [
        {
            "n": 12,
            "rank": 1,
            "seed": s,
            "depth": d,
            "cells": [[m, 1e-3] for m in COUNTS],
            "lr": 1e-2,
            "tol": 1e-6,
            "max_steps": 5000,
        }
        for d in (2, 3, 4)
        for s in SEEDS
    ]
    authors = analysis.authors_frame(au, [tasks.authors_task(t) for t in au])
    assert len(authors) == len(frame) and set(authors["status"]) <= {"ok", "unconverged"}
    table = analysis.protocols_table(frame, authors, nuclear, 1e-3)
    converged = (authors["status"] == "ok").groupby([authors["depth"], authors["count"]]).sum()
    assert len(table) == 3 * len(COUNTS)
    assert table.set_index(["depth", "count"])["runs_authors"].fillna(0).eq(converged).all()
    # the two protocols' errors are independent computations: they differ
    assert not np.allclose(table["rel_error_book"], table["rel_error_authors"], rtol=1e-6)
    m = analysis.authors_recovery_metrics(authors, nuclear, 1e-3)
    assert m["authors_fig1_error_depth3_minus_depth2"].test == "paired t"
    assert 1.0 <= authors["effective_rank"].min() <= authors["effective_rank"].max() <= 12


def test_authors_task_batches_scales_and_a_cap_is_unconverged():
    t = {
        "n": 12,
        "rank": 1,
        "seed": 0,
        "depth": 2,
        "cells": [[50, 1e-2], [50, 1e-4]],
        "lr": 1e-2,
        "tol": 1e-6,
        "max_steps": 5,
    }
    r = tasks.authors_task(t)
    assert [x["scale"] for x in r["runs"]] == [1e-2, 1e-4]
    assert all(x["status"] == "unconverged" and x["steps"] == 5 for x in r["runs"])


def test_step_scan_labels_and_table():
    cfg = {
        "n": 12,
        "rank": 1,
        "seeds": [0, 1],
        "confirmatory_seeds": [],
        "deep_confirmatory_seeds": [],
        "authors_confirmatory_seeds": [],
        "authors_confirmatory_depths": [],
        "depths": [2, 3],
        "counts": [50],
        "init_scale": 1e-3,
        "lr_factor": 1.0,
        "max_steps": 40000,
        "tol": 1e-6,
        "step_scan_depths": [2],
        "step_scan_lr_factors": [1.0, 0.1],
        "step_scan_adaptive_counts": [50],
        "step_scan_adaptive_seeds": [0],
        "authors_lr": 1e-2,
        "authors_max_steps": 40000,
    }
    scan_tasks = tasks.step_scan_tasks(cfg)
    # the profile's own step (1.0) is Fig. 1's: the scan adds step 0.1 on both seeds and the
    # adaptive path on seed 0
    assert len(scan_tasks) == 2 + 1 and all(t["depth"] == 2 for t in scan_tasks)
    own = [t for t in tasks.completion_tasks(cfg) if t["depth"] == 2]
    every = scan_tasks + own
    scan = analysis.step_scan_frame(every, [tasks.completion_task(t) for t in every])
    table = analysis.step_scan_table(scan, 1e-3)
    assert sorted(table["optimizer"]) == ["adaptive", "step 0.1", "step 1"]
    steps = table.set_index("optimizer")["steps"]
    assert steps["step 0.1"] > 5 * steps["step 1"]


def test_confirmatory_seeds_run_only_where_the_seed_plan_needs_them():
    cfg = {
        "n": 12,
        "rank": 1,
        "seeds": [0, 1],
        "confirmatory_seeds": [2],
        "deep_confirmatory_seeds": [3, 4],
        "authors_confirmatory_seeds": [1, 5],
        "authors_confirmatory_depths": [3],
        "depths": [2, 3, 4],
        "counts": [50],
        "init_scale": 1e-3,
        "lr_factor": 1.0,
        "max_steps": 10,
        "tol": 1e-6,
        "fig2_depths": [2],
        "fig2_counts": [50, 100],
        "fig2_scales": [1e-3, 1e-6],
        "fig2_fewer_count": 40,
        "fig2_fewer_confirmatory_seeds": [],
        "step_scan_depths": [2, 4],
        "step_scan_lr_factors": [1.0, 0.1],
        "step_scan_adaptive_counts": [50],
        "step_scan_adaptive_seeds": [0],
        "authors_lr": 1e-2,
        "authors_max_steps": 10,
        "authors_counts": [50],
        "authors_fig2_depths": [3],
        "authors_fig2_counts": [50],
        "authors_fig2_scales": [1e-3, 1e-6],
        "solver": "SCS",
        "solver_eps": 1e-6,
        "solver_max_iters": 100,
    }

    def seeds(task_list: list[dict], **where) -> list[int]:
        return sorted({t["seed"] for t in task_list if all(t[k] == v for k, v in where.items())})

    fig1 = tasks.completion_tasks(cfg)
    assert seeds(fig1, depth=2) == [0, 1, 2]
    assert seeds(fig1, depth=3) == seeds(fig1, depth=4) == [0, 1, 2, 3, 4]
    assert seeds(tasks.init_scale_tasks(cfg)) == [0, 1, 2]
    nuclear = tasks.nuclear_tasks(cfg)
    assert seeds(nuclear, count=50) == [0, 1, 2, 5] and seeds(nuclear, count=100) == [0, 1, 2]
    # the scan decides no confirmatory claim: exploratory seeds only
    assert seeds(tasks.step_scan_tasks(cfg)) == [0, 1]
    # the authors' protocol: its confirmatory seed (5; 1 is exploratory) runs Fig. 2's ends
    # at depth 3 alone
    authors = tasks.authors_tasks(cfg)
    assert seeds(authors, depth=2) == seeds(authors, depth=4) == [0, 1]
    assert seeds(authors, depth=3) == [0, 1, 5]
    assert [t["cells"] for t in authors if t["seed"] == 5] == [[[50, 1e-3], [50, 1e-6]]]


def test_fewer_entries_tasks_run_depth_2_at_one_count_and_the_ends_on_further_seeds():
    cfg = {
        "n": 12,
        "rank": 1,
        "seeds": [0, 1],
        "confirmatory_seeds": [2],
        "fig2_fewer_confirmatory_seeds": [1, 7],
        "authors_confirmatory_seeds": [],
        "authors_fig2_counts": [50],
        "counts": [50],
        "fig2_counts": [50, 100],
        "fig2_fewer_count": 40,
        "fig2_scales": [1e-3, 1e-4, 1e-6],
        "lr_factor": 1.0,
        "max_steps": 10,
        "tol": 1e-6,
        "solver": "SCS",
        "solver_eps": 1e-6,
        "solver_max_iters": 100,
    }
    fewer = tasks.fewer_init_scale_tasks(cfg)
    assert {t["depth"] for t in fewer} == {2} and {tuple(t["counts"]) for t in fewer} == {(40,)}
    cells = sorted((t["seed"], t["scale"]) for t in fewer)
    # the exploratory seeds at every scale; the further seed (7) at the ends only
    assert cells == sorted(
        [(s, a) for s in (0, 1) for a in (1e-3, 1e-4, 1e-6)] + [(7, 1e-3), (7, 1e-6)]
    )
    nuclear = sorted((t["seed"], t["count"]) for t in tasks.nuclear_tasks(cfg))
    assert nuclear == sorted([(s, m) for s in (0, 1, 2) for m in (40, 50, 100)] + [(7, 40)])


def test_dropped_runs_are_counted_on_the_seeds_a_verdict_rests_on():
    def runs(depth: int, capped: set) -> pd.DataFrame:
        return pd.DataFrame(
            [
                {
                    "depth": depth,
                    "scale": 1e-3,
                    "seed": s,
                    "count": 50,
                    "status": "unconverged" if s in capped else "ok",
                    "rel_error": 0.1 * depth + 0.01 * s,
                    "tail_share": 0.0,
                    "effective_rank": 1.0,
                }
                for s in range(6)
            ]
        )

    frame = pd.concat([runs(3, {4}), runs(4, {5})])
    nuclear = pd.DataFrame(columns=["seed", "count", "status", "rel_error"])
    ev = analysis.recovery_metrics(frame, nuclear, 1e-3)["tail_share_depth4_minus_depth3"]
    assert ev.dropped == 2 and sorted(ev.dropped_seeds) == [4, 5]
    assert ev.restricted([0, 1, 2, 3]).dropped == 0
    assert ev.restricted([3, 4]).dropped == 1


def test_authors_tasks_put_the_inner_scales_in_tasks_of_their_own():
    cfg = {
        "n": 12,
        "rank": 1,
        "seeds": [0, 1],
        "depths": [2, 3],
        "init_scale": 1e-3,
        "tol": 1e-6,
        "authors_lr": 1e-2,
        "authors_max_steps": 100,
        "authors_counts": [50],
        "authors_fig2_depths": [3],
        "authors_fig2_counts": [50],
        "authors_fig2_scales": [1e-3, 1e-6],
        "authors_confirmatory_seeds": [],
        "authors_confirmatory_depths": [],
    }
    ends = tasks.authors_tasks(cfg)
    assert [t["cells"] for t in ends if t["depth"] == 2] == [[[50, 1e-3]]] * 2
    assert [t["cells"] for t in ends if t["depth"] == 3] == [[[50, 1e-3], [50, 1e-6]]] * 2
    every = tasks.authors_tasks({**cfg, "authors_fig2_scales": [1e-3, 1e-4, 1e-5, 1e-6]})
    # the claims' tasks (the ends) are unchanged: adding the inner scales recomputes none
    assert [t for t in every if t in ends] == ends
    inner = [t["cells"] for t in every if t not in ends]
    assert inner == [[[50, 1e-4], [50, 1e-5]]] * 2
    # Fig. 1's further counts come in tasks of their own, one per depth and seed
    more = tasks.authors_tasks({**cfg, "authors_more_counts": [60, 70]})
    assert [t for t in more if t in ends] == ends
    assert [t["cells"] for t in more if t not in ends] == [[[60, 1e-3], [70, 1e-3]]] * 4
    # the inner scales at the ends would change the claims' tasks
    assert tasks.authors_tasks({**cfg, "authors_fig2_scales": [1e-2, 1e-6]}) != ends
