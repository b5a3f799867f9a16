"""The untied regimes benchmark's sharing designs (regimes reading the fig71 runs; one task over
both grids) against today's two tasks, on a tiny profile built by the chapter's task lists:
today's outputs to round-off, the step counts and every non-GD value exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmark_modules import load
from implicit_bias.chapters.untied_diagonal.tasks import (
    fig71_tasks,
    regimes_tasks,
    scale_shape_task,
)
from implicit_bias.core.chapter import load_profile

ROOT = Path(__file__).resolve().parents[2]
# a point's GD result depends on the batch it ran in at round-off level (3e-15 seen)
GD_ATOL = 1e-12
GD_OUTPUTS = ("pop_error_gd", "gd_vs_q", "dist_l1", "dist_l2")


def _bench():
    return load("bench_untied_regimes")


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def tiny():
    """Today's fig71 and regimes tasks and results on a tiny problem whose grids share points
    on both regimes lines (and (1e-3, 1) twice within regimes, as in the paper profile)."""
    cfg = load_profile("untied_diagonal", "smoke")
    cfg = {
        **cfg,
        "data": {**cfg["data"], "n": 12, "d": 30, "r_star": 2},
        "gd": {**cfg["gd"], "max_steps": 20000},
        "fig71_log10_alpha": [-3, 0, 4],
        "fig71_log10_shape": [-2, 2, 5],
        "fig71_mirror": True,
        "regimes_log10_alpha": [-4, 1, 6],
        "regimes_tiny_alpha": 1e-3,
        "regimes_log10_shape": [0, 3, 4],
    }
    fig71, reg = fig71_tasks(cfg)[0], regimes_tasks(cfg)[0]
    return fig71, reg, scale_shape_task(fig71), scale_shape_task(reg)


def _assert_matches_today(new: dict, old: dict, bench) -> None:
    assert set(new) | {"status"} == set(old) | {"status"}
    for key in bench.PER_POINT + bench.PER_TASK:
        if key in GD_OUTPUTS:
            np.testing.assert_allclose(new[key], old[key], rtol=0, atol=GD_ATOL, err_msg=key)
        else:
            assert new[key] == old[key], key


def test_shared_points_are_the_ones_both_grids_hold(bench, tiny):
    fig71, reg, _, _ = tiny
    mask = bench.shared_mask(reg["points"], fig71["points"])
    # balanced line at alpha 1e-3..1 (4 points), tiny scale at s = 1, 10, 100 (s = 1000 is
    # beyond the mirrored fig71 grid)
    expected = [[a, 1.0] for a in 10.0 ** np.arange(-3, 1)] + [[1e-3, s] for s in (1, 10, 100)]
    assert [p for p, s in zip(reg["points"], mask) if s] == expected
    paper = load_profile("untied_diagonal", "paper")
    f, r = fig71_tasks(paper)[0], regimes_tasks(paper)[0]
    assert int(bench.shared_mask(r["points"], f["points"]).sum()) == 24  # of 42


def test_regimes_reading_fig71_is_todays_regimes_to_round_off(bench, tiny):
    fig71, reg, fig71_result, reg_result = tiny
    _assert_matches_today(bench.design_a(reg, fig71, fig71_result), reg_result, bench)


def test_one_task_is_todays_two_to_round_off(bench, tiny):
    fig71, reg, fig71_result, reg_result = tiny
    new_fig71, new_reg = bench.design_b(reg, fig71)
    _assert_matches_today(new_fig71, fig71_result, bench)
    _assert_matches_today(new_reg, reg_result, bench)


def test_differences_counts_bits_and_sizes(bench):
    old = {"a": [1.0, 2.0, 3.0], "s": "ok"}
    new = {"a": [1.0, 2.0 + 2**-51, 3.5], "s": "ok"}
    d = bench.differences(new, old, ("a", "s"))
    assert d["a"]["differ"] == 2 and d["a"]["of"] == 3
    assert d["a"]["max_abs"] == 0.5 and d["a"]["max_rel"] == pytest.approx(0.5 / 3)
    assert d["s"] == {"differ": 0, "of": 1}
