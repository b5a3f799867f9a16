"""Tests of the __chapter__ chapter's tasks, analysis and figures."""

import torch
from matplotlib.figure import Figure

from implicit_bias.chapters.__chapter__ import analysis, figures, tasks

torch.set_num_threads(1)  # called directly, task functions are not pinned by the runner


def test_task_metrics_and_figure():
    runs = [{"n": 8, "d": d, "seed": 0, "max_steps": 50_000, "tol": 1e-11} for d in (16, 24)]
    results = [tasks.min_norm_task(t) for t in runs]
    frame = analysis.runs_frame(runs, results)
    metrics = analysis.min_norm_metrics(frame)
    assert metrics["unconverged_runs"] == 0
    assert metrics["max_rel_distance_to_min_norm"] < 1e-6
    assert isinstance(figures.distance_to_min_norm(frame), Figure)


def test_unconverged_runs_are_counted_and_not_used():
    runs = [{"n": 8, "d": 16, "seed": 0, "max_steps": 2, "tol": 1e-11}]
    results = [tasks.min_norm_task(t) for t in runs]
    assert results[0]["status"] == "unconverged"
    assert analysis.min_norm_metrics(analysis.runs_frame(runs, results))["unconverged_runs"] == 1
