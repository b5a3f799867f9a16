"""__title__

The task functions: one unit of work each, cached by `Chapter.sweep` under the
fingerprint of its code."""

from __future__ import annotations

import numpy as np

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.__chapter__ import gradient_descent, min_norm_interpolator, random_problem


@task
def min_norm_task(task: dict) -> dict:
    """Gradient descent from zero on one random problem, against the minimum-norm interpolator.
    A run stopped by the step cap is reported with status "unconverged"."""
    X, y = random_problem(task["n"], task["d"], task["seed"])
    run = gradient_descent(X, y, task["max_steps"], task["tol"])
    w_star = min_norm_interpolator(X, y)
    return {
        "status": "ok" if run.converged else "unconverged",
        "steps": run.steps,
        "rel_distance": float(np.linalg.norm(run.w - w_star) / np.linalg.norm(w_star)),
        "residual": float(np.linalg.norm(X @ run.w - y)),
    }
