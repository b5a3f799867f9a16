"""Tests of the separable_max_margin chapter's tasks, analysis and figures."""

import copy

import numpy as np
import pytest
from matplotlib.figure import Figure

from implicit_bias.chapters.separable_max_margin import analysis, figures, tasks
from implicit_bias.core.verdicts.decision import Evidence
from implicit_bias.core.verdicts.evidence import Value
from implicit_bias.models.separable_max_margin import separable_dataset

CFG = {
    "seeds": [0, 1],
    "steps": 10_000,
    "per_decade": 5,
    "momentum": 0.9,
    "n_random": 12,
    "gap": 0.5,
    "box": 3.0,
    "n_val": 200,
    "flip": 0.1,
    "min_rate": 0.2,
    "adam_x2_scale": 20.0,
    "adam_steps": 10_000,
    "adam_lr": 1e-3,
}


@pytest.fixture(scope="module")
def computed():
    runs = tasks.trajectory_tasks(CFG)
    results = [tasks.trajectory_task(t) for t in runs]
    return runs, results


def test_tasks_return_every_run_with_its_references(computed):
    runs, results = computed
    assert [analysis.experiment_name(t) for t in runs] == [
        "figure1_logistic",
        "generic_logistic",
        "generic_exp",
        "figure1_x2_scaled_logistic",
    ]
    for task, result in zip(runs, results):
        for s in result["seeds"]:
            assert s["svm_status"] == "optimal"
            optimizers = [r["optimizer"] for r in s["runs"]]
            assert optimizers == (["GD", "GDMO", "Adam"] if task["adam_lr"] else ["GD", "GDMO"])
            assert all(r["status"] == "ok" for r in s["runs"])
            assert len(s["runs"][0]["t"]) == len(s["runs"][0]["w"])


def test_metrics_are_per_seed_evidence_and_the_svm_check_a_value(computed):
    runs, results = computed
    ends = analysis.endpoints(analysis.trajectory_frame(runs, results))
    metrics = {
        **analysis.figure1_metrics(ends),
        **analysis.theorem3_metrics(ends),
        **analysis.optimizer_metrics(ends),
    }
    assert all(isinstance(v, Evidence) and len(v.values) == 2 for v in metrics.values())
    svm = analysis.svm_metrics(results)["svm_construction_error"]
    assert isinstance(svm, Value) and svm.value < 1e-6
    # Theorem 3 already at 10^4 steps: ||w|| grows like ||w_hat|| log t, loss like 1/t
    assert 0.8 < np.mean(metrics["gd_norm_slope_over_svm_norm"].values) < 1.1
    assert 0.9 < np.mean(metrics["gd_loss_rate_constant_ratio"].values) < 1.1
    assert np.mean(metrics["adam_minus_gd_direction_gap"].values) > 0


def test_unconverged_runs_are_left_out_and_counted(computed):
    runs, results = computed
    broken = copy.deepcopy(results)
    broken[1]["seeds"][0]["runs"][0]["status"] = "unconverged"
    ends = analysis.endpoints(analysis.trajectory_frame(runs, broken))
    evidence = analysis.theorem3_metrics(ends)["gd_norm_slope_over_svm_norm"]
    assert evidence.dropped == 1 and len(evidence.values) == 1


def test_a_run_that_has_not_separated_its_data_is_unconverged():
    data = separable_dataset(0, "figure1")
    t = [1, 10, 100]
    w = np.array([[1.0, -1.0], [1.0, -1.0], [1.0, 1.0]])  # misclassifies at t = 1 and 10
    Xv, yv = data.X[:4], data.y[:4]
    assert tasks._run_record(w, t, data.Z, Xv, yv, "logistic", 100)["status"] == "unconverged"
    assert tasks._run_record(w, t, data.Z, Xv, yv, "logistic", 10_000)["status"] == "ok"
    w[2, 0] = np.nan
    assert tasks._run_record(w, t, data.Z, Xv, yv, "logistic", 100)["status"] == "diverged"


def test_the_rate_constant_check_can_fail(computed):
    """A residual limit computed with a wrong step (a broken input) moves the constants."""
    runs, results = computed
    broken = copy.deepcopy(results)
    for s in broken[1]["seeds"]:
        w_hat = np.asarray(s["w_hat"])
        across = np.array([-w_hat[1], w_hat[0]]) / np.linalg.norm(w_hat)  # orthogonal to w_hat
        s["runs"][0]["w_tilde"] = (np.asarray(s["runs"][0]["w_tilde"]) + 0.5 * across).tolist()
    good = analysis.endpoints(analysis.trajectory_frame(runs, results))
    bad = analysis.endpoints(analysis.trajectory_frame(runs, broken))
    key = "gd_direction_rate_constant_ratio"
    assert abs(np.mean(analysis.theorem3_metrics(bad)[key].values) - 1) > 2 * abs(
        np.mean(analysis.theorem3_metrics(good)[key].values) - 1
    )


def test_figures_draw_from_their_tables(computed):
    runs, results = computed
    frame = analysis.trajectory_frame(runs, results)
    data = separable_dataset(0, "figure1")
    fig1 = figures.figure1(figures.figure1_data(frame, 0), data.X, data.y, data.w_hat)
    assert isinstance(fig1, Figure)
    assert "e+" not in fig1.axes[0].get_title() and "10" in fig1.axes[0].get_title()
    rates = figures.rates(figures.rates_data(frame))
    assert isinstance(rates, Figure)
    # the legends of panel (A) and of the first rate lie under their panels, off the data
    for fig in (fig1, rates):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        legend = fig.axes[0].get_legend().get_window_extent(renderer)
        assert legend.y1 < fig.axes[0].get_window_extent(renderer).y0
    assert isinstance(figures.validation(figures.validation_data(frame)), Figure)
    assert isinstance(figures.optimizers(figures.optimizers_data(frame)), Figure)
    table = analysis.endpoint_table(analysis.endpoints(frame))
    assert set(table["converged"]) == {2}
