"""The task functions of the separable_max_margin chapter (Soudry et al. 2018): one task trains
every seed's data set with gradient descent and momentum (and Adam where asked) in one float64
tensor program, and computes the independent references (the SVM's quadratic program, the
residual limit w_tilde) for each. Cached by `Chapter.sweep` under the fingerprint of its code."""

from __future__ import annotations

import numpy as np

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.separable_max_margin import (
    adam,
    hard_margin_svm,
    heavy_ball,
    log_checkpoints,
    loss_value,
    residual_decay_exponent,
    residual_limit,
    separable_dataset,
    support_indices,
    validation_set,
)


def trajectory_tasks(cfg: dict) -> list[dict]:
    """The chapter's four experiments: the paper's Figure 1 data (logistic loss), the book's
    generic data with the logistic and the exponential loss (Theorem 3 and its rates, and the
    validation loss of Sec. 3), and Figure 1's data with x2 multiplied by 20, where Adam runs
    beside GD and GDMO."""
    common = {
        "seeds": list(cfg["seeds"]),
        "steps": cfg["steps"],
        "per_decade": cfg["per_decade"],
        "gammas": [0.0, cfg["momentum"]],
        "n_random": cfg["n_random"],
        "gap": cfg["gap"],
        "box": cfg["box"],
        "n_val": cfg["n_val"],
        "flip": cfg["flip"],
        "min_rate": cfg["min_rate"],
    }
    return [
        {**common, "kind": "figure1", "loss": "logistic", "x2_scale": 1.0, "adam_lr": None},
        {**common, "kind": "generic", "loss": "logistic", "x2_scale": 1.0, "adam_lr": None},
        {**common, "kind": "generic", "loss": "exp", "x2_scale": 1.0, "adam_lr": None},
        {
            **common,
            "kind": "figure1",
            "loss": "logistic",
            "x2_scale": cfg["adam_x2_scale"],
            "steps": cfg["adam_steps"],
            "adam_lr": cfg["adam_lr"],
        },
    ]


def _run_record(w, t, Z, Xv, yv, loss, steps) -> dict:
    """One run's checkpoints. Its status: "ok" when every value is finite and the run has
    separated the training data from steps / 100 on (the asymptotic regime Theorem 3 speaks
    of); "diverged" for non-finite values; "unconverged" otherwise."""
    margins = (w @ Z.T).min(axis=1) / np.linalg.norm(w, axis=1)
    late = np.asarray(t) >= steps // 100
    if not np.all(np.isfinite(w)):
        status = "diverged"
    elif np.all(margins[late] > 0):
        status = "ok"
    else:
        status = "unconverged"
    u_val = w @ (yv[:, None] * Xv).T
    with np.errstate(invalid="ignore"):  # a diverged run's losses are NaN, as they should be
        train_loss, val_loss = loss_value(Z, w, loss), loss_value(yv[:, None] * Xv, w, loss)
    return {
        "status": status,
        "t": list(t),
        "w": w.tolist(),
        "train_loss": train_loss.tolist(),
        "min_margin": margins.tolist(),
        # mean loss and error over the held-out points (Sec. 3's validation loss)
        "val_loss": (val_loss / len(yv)).tolist(),
        "val_error": (u_val <= 0).mean(axis=1).tolist(),
    }


@task
def trajectory_task(task: dict) -> dict:
    """Every seed's data set trained from w(0) = 0 with step eta = 1 / sigma_max(X)^2 (below
    Theorem 3's bound 2 beta^-1 sigma_max^-2(X) for both losses), by GD and heavy-ball momentum
    (and Adam when `adam_lr` is set), to `steps` steps with `per_decade` log-spaced
    checkpoints; with each seed's hard-margin SVM (a QP, no gradient descent), its support
    vectors, the predicted residual limit w_tilde for each run's effective step eta / (1 -
    gamma) and the predicted decay exponent of rho(t) - w_tilde."""
    checkpoints = log_checkpoints(task["steps"], task["per_decade"])
    data = [
        separable_dataset(
            seed,
            task["kind"],
            task["n_random"],
            task["gap"],
            task["box"],
            task["x2_scale"],
            task["min_rate"],
        )
        for seed in task["seeds"]
    ]
    etas = [1.0 / np.linalg.norm(d.X, 2) ** 2 for d in data]
    Z = np.stack([d.Z for d in data])
    gammas = task["gammas"]
    W = heavy_ball(Z, task["loss"], etas, gammas, checkpoints)
    W_adam = adam(Z, task["loss"], task["adam_lr"], checkpoints) if task["adam_lr"] else None
    seeds = []
    for i, (seed, d) in enumerate(zip(task["seeds"], data)):
        svm = hard_margin_svm(d.Z)
        Xv, yv = validation_set(
            seed,
            svm.w if svm.w is not None else np.ones(2),
            task["n_val"],
            task["flip"],
            task["box"],
            task["x2_scale"],
        )
        runs = []
        for j, gamma in enumerate(gammas):
            record = _run_record(
                W[i * len(gammas) + j], checkpoints, d.Z, Xv, yv, task["loss"], task["steps"]
            )
            runs.append({"optimizer": "GD" if gamma == 0 else "GDMO", "gamma": gamma, **record})
        if W_adam is not None:
            record = _run_record(W_adam[i], checkpoints, d.Z, Xv, yv, task["loss"], task["steps"])
            runs.append({"optimizer": "Adam", "gamma": None, **record})
        ref: dict = {"svm_status": svm.status, "w_hat": None, "n_support": None}
        if svm.w is not None:
            S = support_indices(d.Z, svm.w)
            spans = np.linalg.matrix_rank(d.Z[S]) == d.Z.shape[1]
            ref = {
                "svm_status": svm.status,
                "w_hat": svm.w.tolist(),
                "n_support": len(S),
                "construction_error": (
                    float(np.linalg.norm(svm.w - d.w_hat)) if d.w_hat is not None else None
                ),
                "decay_exponent": residual_decay_exponent(d.Z, svm.w, svm.alpha) if spans else None,
            }
            for run in runs:
                if spans and run["gamma"] is not None:
                    w_tilde = residual_limit(d.Z, svm.w, etas[i] / (1 - run["gamma"]))
                    run["w_tilde"] = w_tilde.tolist()
                    run["support_min_z_w_tilde"] = float((d.Z[S] @ w_tilde).min())
                else:
                    run["w_tilde"] = None
                    run["support_min_z_w_tilde"] = None
        seeds.append({"seed": seed, "eta": etas[i], **ref, "runs": runs})
    # the task itself always completes; each run carries its own status (see _run_record)
    return {"status": "ok", "seeds": seeds}
