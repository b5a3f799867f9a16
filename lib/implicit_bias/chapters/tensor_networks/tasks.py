"""The task functions of the tensor-networks chapter: each takes a task (a dict of JSON values)
and returns a dict of JSON values; the notebook sweeps them through `Chapter.sweep`. Below them,
the task lists each sweep runs, built from the profile.

The numerics live in `implicit_bias.models.tensor_networks` (networks, training) and
`implicit_bias.models.tensor_networks_theory` (what the theorems predict).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.convex import min_l1_interpolator, min_l2_interpolator
from implicit_bias.models.tensor_networks import (
    cosine,
    dft_matrix,
    init_params,
    regression_data,
    separable_data,
    singular_vector_residual,
    train_exponential,
    train_square,
)
from implicit_bias.models.tensor_networks_theory import (
    _reference_direction,
    _two_layer_flow,
    _two_layer_gd,
    low_rank_point_setup,
    lp_stationary_point,
    max_margin_with_duals,
    q_limit_solution,
    single_point_setup,
    theorem3_limit,
    theorem6_limit,
    two_layer_svd,
)


@task(uses_device=True)
def classification_task(task: dict) -> dict:
    """One exponential-loss run on separable data (Thm 1, Cor 1-3): trains, then measures
    Thm 1's singular-vector residual (u_inf from the reference problem's multipliers, and
    from the late-phase average u_avg), the cosine to the predicted direction along the run,
    and the Fourier spectrum."""
    device = torch.device(task.get("device", "cpu"))
    X, y = separable_data(task["n"], task["d"], task["sparsity"], task["data_seed"])
    params = init_params(
        task["arch"], task["d"], task["L"], task["alpha"], task["init_seed"], device=device
    )
    out = train_exponential(
        task["arch"],
        X,
        y,
        params,
        task["steps"],
        task["rel_step"],
        record=task["record"],
        decay=task["decay"],
    )
    beta = out["beta"]
    name, ref, nu, solved = _reference_direction(task["arch"], task["L"], X, y, beta)
    # Thm 1 with u_inf from the reference's multipliers: -u_inf ~ X^T (y * nu)
    x_kkt = torch.as_tensor(
        X.T @ (y * nu), dtype=out["params"][0].dtype, device=out["params"][0].device
    )
    margins = y * (X @ beta)
    F = dft_matrix(task["d"])
    return {
        "reference": name,
        # how the reference's solver ended: "optimal" (convex programs) or "converged" (IRL1)
        "reference_status": solved["status"],
        "reference_last_change": solved["last_change"],
        "reference_z": ref.tolist(),
        "beta": beta.tolist(),
        "steps": [h["step"] for h in out["history"]],
        "log_inv_loss": [h["log_inv_loss"] for h in out["history"]],
        "cosine_gap": [1 - cosine(h["beta"], ref) for h in out["history"]],
        "final_cosine_gap": 1 - cosine(beta, ref),
        "thm1_kkt_residual": singular_vector_residual(task["arch"], x_kkt, out["params"]),
        "thm1_kkt_residual_path": [
            singular_vector_residual(task["arch"], x_kkt, h["params"]) for h in out["history"]
        ],
        "dual_weights": nu.tolist(),
        "thm1_uavg_residual": singular_vector_residual(task["arch"], -out["u_avg"], out["params"]),
        "normalized_margins": (margins / margins.min()).tolist(),
        "fourier_magnitudes": np.abs(F @ beta).tolist(),
    }


@task(uses_device=True)
def regression_task(task: dict) -> dict:
    """One square-loss run from w_l(0) = alpha wbar (l < L), w_L(0) = 0 (Thm 5, Cor 5, Cor 6),
    with the GD limit compared to the Q-minimizers (derived and as printed) and to the
    min-l1 / weighted min-l2 interpolators (the alpha -> 0 / alpha -> inf ends)."""
    device = torch.device(task.get("device", "cpu"))
    arch, L, d, alpha = task["arch"], task["L"], task["d"], task["alpha"]
    even = arch == "conv"
    X, y = regression_data(task["n"], d, task["data_seed"], even=even)
    if task["wbar"] == "ones":
        wbar = np.zeros(d) if even else np.ones(d)
        if even:
            wbar[0] = 1.0
    else:
        params0 = init_params(arch, d, L, 1.0, int(task["wbar"]), even=even)
        wbar = params0[0].numpy()
    params = [torch.as_tensor(alpha * wbar, device=device) for _ in range(L - 1)]
    params.append(torch.zeros(d, dtype=torch.float64, device=device))
    out = train_square(arch, X, y, params, task["steps"], task["rel_step"], task["stability"])
    beta = out["beta"]

    def rel(z):
        return float(np.linalg.norm(beta - z) / np.linalg.norm(z))

    result = {"beta": beta.tolist(), "loss": out["loss"], "steps_used": out["steps"]}
    # train_square's target decides, as the loop saw it (not the re-evaluated final loss)
    newton_ok = True
    variants = ["derived", "thm5_printed"] if arch == "diag" else ["derived", "cor6_printed"]
    for v in variants:
        sol = q_limit_solution(X, y, arch, L, alpha, wbar, v)
        newton_ok = newton_ok and sol["converged"]
        result[f"error_{v}"] = rel(sol["z"])
    result["gd_converged"], result["newton_converged"] = out["converged"], newton_ok
    if not (out["converged"] and newton_ok):  # the step cap (or Newton's) ended a run
        result["status"] = "unconverged"
    if arch == "diag":
        l1 = min_l1_interpolator(X, y).x
        l2 = min_l2_interpolator(X, y, weights=np.abs(wbar) ** (2 * L - 2)).x
        result["distance_l1"], result["distance_l2"] = rel(l1), rel(l2)
    return result


@task
def irl1_control_task(task: dict) -> dict:
    """The control of the L >= 3 stationarity check (Cor 2 / Cor 3): iteratively reweighted l1
    for min ||T z||_{2/L} started from directions GD did not produce, the l2 SVM (dense) and
    the L = 2 reference (the l1 LP, or the Fourier-l1 SOCP for conv). Returns, per start, the
    stationary point reached and how far IRL1 carried the start (1 - cos): the yardstick for
    the small distance IRL1 moves GD's own direction."""
    X, y = separable_data(task["n"], task["d"], task["sparsity"], task["data_seed"])
    fourier = task["arch"] == "conv"
    starts = {
        "l2_svm": max_margin_with_duals(X, y, "l2")[0],
        "l2_reference": max_margin_with_duals(X, y, "fourier_l1" if fourier else "l1")[0],
    }
    result: dict = {}
    for name, z0 in starts.items():
        st = lp_stationary_point(X, y, task["L"], z0, fourier=fourier)
        result[f"moved_from_{name}"] = 1 - cosine(st["z"], z0)
        result[f"stationary_from_{name}"] = st["z"].tolist()
        result[f"last_change_from_{name}"] = st["last_change"]
        result[f"converged_from_{name}"] = st["converged"]
    if not all(result[f"converged_from_{name}"] for name in starts):  # IRL1's step cap
        result["status"] = "unconverged"
    return result


@task
def theorem3_task(task: dict) -> dict:
    """Thm 3: a 2-layer tensor network on one point (x, y) with the exponential loss; GD with
    fraction-of-norm steps (for one point the normalized update is linear in Theta, so any
    step keeps the flow's limit direction: the top singular pair of M(x)), compared with the
    closed-form limit. Returns the direction errors 1 - |cos| of v_1 and v_2, whether the
    relative sign follows sign(eta_1) = sign(y) sign(eta_2), and ||v_1|| / ||v_2||."""
    setup = single_point_setup(task["d"], task["k1"], task["seed"])
    y = float(task["y"])
    k1, d = task["k1"], task["d"]
    params = [
        torch.as_tensor(task["alpha"] * setup["v1bar"]),
        torch.as_tensor(task["alpha"] * setup["v2bar"]),
    ]
    # train_exponential runs the conv net with filters (k1, d) on the single point
    out = train_exponential(
        "conv",
        setup["x"][None],
        np.array([y]),
        params,
        task["steps"],
        task["rel_step"],
        renormalize=task.get("renormalize", False),
    )
    v1, v2 = (p.cpu().numpy() for p in out["params"])
    p1, p2 = theorem3_limit(setup["M"], y)
    sign_ok = bool(np.sign(v1 @ p1) == np.sign(v2 @ p2))
    assert v1.shape == (k1,) and v2.shape == (d,)
    return {
        "lambda": setup["lambda"],
        "s": setup["s"].tolist(),
        "error_v1": 1 - abs(cosine(v1, p1)),
        "error_v2": 1 - abs(cosine(v2, p2)),
        "sign_rule_holds": sign_ok,
        "norm_ratio": float(np.linalg.norm(v1) / np.linalg.norm(v2)),
        "log_inv_loss": out["log_inv_loss"],
    }


@task
def theorem6_task(task: dict) -> dict:
    """Thm 6: 2-layer tensor network, one point, square loss, from alpha (v1bar, v2bar).
    Gradient flow (DOP853, tight tolerances) and GD at step sizes lr and lr/2, each against the
    closed form (corrected v_2) and the slide's printed v_2. Relative errors on (v_1, v_2).

    With `bandwidth` the point is band-limited (`low_rank_point_setup`): M(x) has rank
    m < k1, U_1 and U_2 are not square and the closed form's out-of-range terms
    alpha (I - U_l U_l^T) vbar_l are nonzero; their relative sizes in the limit are returned
    (`out_of_range_v1`, `out_of_range_v2`), with m."""
    if task.get("bandwidth") is None:
        setup = single_point_setup(task["d"], task["k1"], task["seed"])
    else:
        setup = low_rank_point_setup(task["d"], task["k1"], task["seed"], task["bandwidth"])
    M, y, alpha = setup["M"], float(task["y"]), task["alpha"]
    v1_0, v2_0 = alpha * setup["v1bar"], alpha * setup["v2bar"]
    c1, c2, nu = theorem6_limit(M, y, setup["v1bar"], setup["v2bar"], alpha)
    p1, p2, _ = theorem6_limit(M, y, setup["v1bar"], setup["v2bar"], alpha, as_printed=True)
    closed = np.concatenate([c1, c2])
    printed = np.concatenate([p1, p2])

    def err(a, b, ref):
        return float(np.linalg.norm(np.concatenate([a, b]) - ref) / np.linalg.norm(ref))

    # the loss decays like exp(-2 kappa t) with kappa = ||grad f||^2 at the limit
    kappa = float(np.linalg.norm(M @ c2) ** 2 + np.linalg.norm(M.T @ c1) ** 2)
    f1, f2 = _two_layer_flow(M, y, v1_0, v2_0, t_end=40.0 / kappa)
    U1, s, U2 = two_layer_svd(M, tol=1e-9)
    out1 = alpha * (setup["v1bar"] - U1 @ (U1.T @ setup["v1bar"]))
    out2 = alpha * (setup["v2bar"] - U2 @ (U2.T @ setup["v2bar"]))
    result = {
        "lambda": setup["lambda"],
        "m": len(s),
        "k1": task["k1"],
        "out_of_range_v1": float(np.linalg.norm(out1) / np.linalg.norm(c1)),
        "out_of_range_v2": float(np.linalg.norm(out2) / np.linalg.norm(c2)),
        "nu": nu,
        "flow_error": err(f1, f2, closed),
        "flow_error_printed": err(f1, f2, printed),
        "flow_residual": float(abs(f1 @ M @ f2 - y)),
    }
    lr = task["lr_factor"] / kappa
    for name, step in (("gd_error", lr), ("gd_error_half", lr / 2)):
        g1, g2, used = _two_layer_gd(M, y, v1_0, v2_0, step)
        result[name] = err(g1, g2, closed)
        result[name + "_steps"] = used
    if any(math.isnan(result[k]) for k in ("gd_error_steps", "gd_error_half_steps")):
        result["status"] = "unconverged"
    return result


# ----------------------------------------------------------------------------------------------
# The task lists of the chapter's sweeps, from the profile's parameters (`cfg`). The sweep adds
# the run's device to every task.


def classification_tasks(cfg: dict) -> list[dict]:
    """Sweep `classification` (Thm 1, Cor 1-3): every architecture and depth, per seed, each
    recording 25 log-spaced checkpoints; then the diagonal L = 2 runs again at the step
    fractions `cls_step_factors` x `cls_rel_step` (the spread of Cor 2's gap over step sizes)."""
    record = sorted({1, *map(int, np.geomspace(1, cfg["cls_steps"], 25).astype(int))})
    base = [
        dict(
            arch=arch,
            L=L,
            n=cfg["cls_n"],
            d=cfg["cls_d"],
            sparsity=cfg["cls_sparsity"],
            data_seed=seed,
            init_seed=seed,
            alpha=cfg["cls_alpha"],
            steps=cfg["cls_steps"],
            rel_step=cfg["cls_rel_step"],
            decay=cfg["cls_decay"],
            record=record,
        )
        for seed in cfg["cls_seeds"]
        for arch in ("diag", "conv", "fc")
        for L in cfg["cls_depths"]
    ]
    variants = [
        dict(t, rel_step=cfg["cls_rel_step"] * f)
        for f in cfg["cls_step_factors"]
        for t in base
        if t["arch"] == "diag" and t["L"] == 2
    ]
    return base + variants


def irl1_control_tasks(cfg: dict) -> list[dict]:
    """Sweep `irl1_control`: the classification problems of the diagonal and convolutional
    runs with L >= 3, per seed."""
    return [
        dict(
            arch=arch,
            L=L,
            n=cfg["cls_n"],
            d=cfg["cls_d"],
            sparsity=cfg["cls_sparsity"],
            data_seed=seed,
        )
        for seed in cfg["cls_seeds"]
        for arch in ("diag", "conv")
        for L in cfg["cls_depths"]
        if L >= 3
    ]


def theorem3_tasks(cfg: dict) -> list[dict]:
    """Sweep `theorem3`: one point, labels +1 and -1, per seed."""
    return [
        dict(
            d=cfg["single_d"],
            k1=cfg["single_k1"],
            seed=s,
            y=y,
            alpha=0.5,
            steps=cfg["thm3_steps"],
            rel_step=cfg["thm3_rel_step"],
            renormalize=True,
        )
        for s in cfg["single_seeds"]
        for y in (1.0, -1.0)
    ]


def argument_tasks(cfg: dict) -> list[dict]:
    """Sweep `regression_argument` (Thm 5 / Cor 5 / Cor 6): diagonal nets at every depth and
    full-length convolutional nets (even data) at depths up to 3, random wbar, each at the
    step knobs h and h/2."""
    tasks = []
    for arch, n, d, alpha, depths in (
        ("diag", cfg["reg_n"], cfg["reg_d"], cfg["reg_check_alpha"], cfg["reg_depths"]),
        (
            "conv",
            cfg["conv_reg_n"],
            cfg["conv_reg_d"],
            cfg["conv_reg_alpha"],
            [L for L in cfg["reg_depths"] if L <= 3],
        ),
    ):
        tasks += [
            dict(
                arch=arch,
                L=L,
                n=n,
                d=d,
                data_seed=s,
                alpha=alpha,
                wbar=str(s + 1),
                steps=cfg["reg_steps"],
                rel_step=cfg["reg_rel_step"] * f,
                stability=cfg["reg_stability"] * f,
            )
            for s in cfg["reg_seeds"]
            for L in depths
            for f in (1.0, 0.5)
        ]
    return tasks


def alpha_sweep_tasks(cfg: dict) -> list[dict]:
    """Sweep `alpha_sweep` (Cor 5): diagonal nets from wbar = 1 along the profile's alphas."""
    return [
        dict(
            arch="diag",
            L=L,
            n=cfg["reg_n"],
            d=cfg["reg_d"],
            data_seed=cfg["reg_seeds"][0],
            alpha=a,
            wbar="ones",
            steps=cfg["reg_steps"],
            rel_step=cfg["reg_rel_step"],
            stability=cfg["reg_stability"],
        )
        for L in cfg["reg_depths"]
        for a in cfg["reg_alphas"]
    ]


def theorem6_tasks(cfg: dict) -> list[dict]:
    """Sweep `theorem6`: one point, square loss, per seed: a generic point (M(x) of full rank
    k1, U_1 square) and a band-limited one (`thm6_bandwidth`: rank < k1, both out-of-range
    terms of the closed form nonzero)."""
    return [
        dict(
            d=cfg["single_d"],
            k1=cfg["single_k1"],
            seed=s,
            y=cfg["thm6_y"],
            alpha=cfg["thm6_alpha"],
            lr_factor=cfg["thm6_lr_factor"],
            bandwidth=band,
        )
        for s in cfg["single_seeds"]
        for band in (None, cfg["thm6_bandwidth"])
    ]
