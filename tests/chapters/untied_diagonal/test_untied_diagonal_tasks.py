"""The task functions of the untied_diagonal chapter (Azulay et al. 2021) at small size, and the
task lists the notebook sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from implicit_bias.chapters.untied_diagonal import analysis
from implicit_bias.chapters.untied_diagonal import tasks as tk
from implicit_bias.core.chapter import load_profile
from implicit_bias.core.engine.paths import project_root
from implicit_bias.core.engine.sweep import task_hash
from implicit_bias.core.engine.tasks import spec_of
from implicit_bias.models import diagonal as dg


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny float64 problems: extra threads only add overhead on a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_scale_shape_task_small():
    task = {
        "n": 12,
        "d": 30,
        "r_star": 2,
        "noise_var": 0.01,
        "seed": 0,
        "points": [[1e-2, 1.0], [1e-2, 1e4], [10.0, 1.0]],
        "rel_step": 0.5,
        "beta_bound": 1.0,
        "tol": 1e-9,
        "max_steps": 20_000,
        "extra_m": [1e-12],
    }
    out = tk.scale_shape_task(task)
    assert all(out["converged"])
    assert max(out["gd_vs_q"]) < 1e-2
    assert out["dist_l2"][1] < 1e-2 and out["dist_l2"][2] < 1e-2  # NTK points
    assert out["dist_l1"][0] < out["dist_l1"][1]  # balanced is richer
    assert out["pop_error_gd"][0] < out["pop_error_gd"][1]
    assert out["extra_m_dist_l1"][0] < out["dist_l1"][0]


def test_theorem1_task_small():
    task = {
        "n": 5,
        "d": 12,
        "seed": 0,
        "rel_steps": [0.4, 0.2],
        "tol": 1e-11,
        "max_steps": 60_000,
        "gradient_flow": True,
        "gf_tol": 1e-9,
        "device": "cpu",
    }
    out = tk.theorem1_task(task)
    assert out["status"] == "ok" and all(out["gf_converged"]) and out["tied_converged"]
    frame = analysis.theorem1_frame([out], [0])
    met = analysis.metrics_table(analysis.theorem1_metrics(frame, [out]))["value"]
    assert list(frame["init"]) == list(dg.THEOREM1_INITS)
    assert met["thm1_gf_max_rel_error"] < 1e-6
    assert met["thm1_gd_max_rel_error"] < 1e-2
    assert 0.8 < met["thm1_step_slope_min"] <= met["thm1_step_slope_max"] < 1.2
    assert met["thm1_wrong_scale_min_ratio"] > 10
    assert met["thm1_ntk_weighted_over_plain_l2"] < 0.1


def test_rich_limit_task_distance_shrinks():
    task = {
        "n": 12,
        "d": 30,
        "r_star": 2,
        "noise_var": 0.01,
        "seed": 0,
        "m_values": [1e-4, 1e-12, 1e-30],
    }
    out = tk.rich_limit_task(task)
    rows = out["rows"]
    dists = [r["dist_l1"] for r in rows]
    assert dists[0] > dists[1] > dists[2]
    assert all(r["kkt"] < 1e-10 and r["residual"] < 1e-10 and r["converged"] for r in rows)
    assert len(out["slack"]) == 30 and min(out["slack"]) >= 0
    assert out["dual_objective"] == pytest.approx(out["l1_norm"], rel=1e-6)  # LP duality
    assert np.array(out["log10_abs_beta"]).shape == (3, 30)


def test_task_declarations():
    for fn in (tk.theorem1_task, tk.scale_shape_task):
        assert spec_of(fn).threads == 1 and spec_of(fn).uses_device
    assert spec_of(tk.rich_limit_task).threads == 1 and not spec_of(tk.rich_limit_task).uses_device


def test_log_grid():
    assert np.allclose(tk.log_grid([-2, 2, 5]), [1e-2, 1e-1, 1.0, 1e1, 1e2])
    assert len(tk.log_grid([0, 10, 21.0])) == 21


def test_task_lists_from_the_smoke_profile():
    cfg = load_profile("untied_diagonal", "smoke")
    t1 = tk.theorem1_tasks(cfg)
    assert [t["seed"] for t in t1] == cfg["theorem1"]["seeds"]
    assert all("seeds" not in t and t["rel_steps"] == cfg["theorem1"]["rel_steps"] for t in t1)
    balanced, unbalanced = tk.regimes_points(cfg)
    assert all(s == 1.0 for _, s in balanced) and len(balanced) == cfg["regimes_log10_alpha"][2]
    assert all(a == cfg["regimes_tiny_alpha"] for a, _ in unbalanced)
    (reg,) = tk.regimes_tasks(cfg)
    assert reg["points"] == balanced + unbalanced and reg["extra_m"] == [cfg["qmin_tiny_m"]]
    assert reg["rel_step"] == cfg["gd"]["rel_step"] and reg["d"] == cfg["data"]["d"]
    (f71,) = tk.fig71_tasks(cfg)
    assert len(f71["points"]) == cfg["fig71_log10_alpha"][2] * cfg["fig71_log10_shape"][2]
    mirrored = tk.fig71_points({**cfg, "fig71_mirror": True})
    assert min(s for _, s in mirrored) == 1.0
    assert len(mirrored) == cfg["fig71_log10_alpha"][2] * (cfg["fig71_log10_shape"][2] // 2 + 1)
    (rich,) = tk.rich_limit_tasks(cfg)
    assert rich["m_values"] == tk.RICH_LIMIT_M_VALUES and "seeds" not in rich


def test_paper_task_lists_are_those_of_the_committed_results():
    """The notebook's task lists at the paper profile (CPU) are the tasks the committed paper
    results were computed for: same dicts, so the same cache entries."""
    folder = project_root() / "results" / "paper" / "untied_diagonal"
    if not folder.exists():
        pytest.skip("no committed paper-profile results")
    cfg = load_profile("untied_diagonal", "paper")
    for sweep, built in (
        ("theorem1", tk.theorem1_tasks(cfg)),
        ("regimes", tk.regimes_tasks(cfg)),
        ("fig71", tk.fig71_tasks(cfg)),
        ("rich_limit", tk.rich_limit_tasks(cfg)),
    ):
        for task in built:
            key = task_hash({**task, "device": "cpu"})
            assert (folder / sweep / f"{key}.json").exists(), (sweep, task["seed"])
