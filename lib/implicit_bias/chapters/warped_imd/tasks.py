"""The sweeps of the warped_imd chapter (Azulay et al. 2021): one task function per unit of work
(JSON in, JSON out), the training loops they run on the run's device, and the task lists the
notebook sweeps, built from the profile.

The numerics (Theorem 2's regularizer and its minimizers, the Hessian-map test, the vector fields
and the integrator, the time-warping paths) are in `implicit_bias.models.fully_connected`.
"""

from __future__ import annotations

import numpy as np
import torch

from implicit_bias.core.engine.device import resolve_device
from implicit_bias.core.engine.tasks import task
from implicit_bias.models.fully_connected import (
    DTYPE,
    Array,
    _curvature_scale,
    _integrate,
    _loss_tol,
    _multi_neuron_field,
    _orientation,
    _rel,
    _single_neuron_field,
    _unit,
    grad_q_single_neuron,
    gradient_flow_implicit,
    gradient_flow_path,
    hess_q_single_neuron,
    hessian_map_asymmetry,
    init_from_scale_shape,
    kkt_residual,
    kkt_residual_active,
    leaky_relu_inverse,
    mahalanobis_predictor,
    null_projector,
    path_length,
    predictor_metric,
    q_min_balanced,
    q_min_leaky,
    q_min_numeric,
    q_min_single_neuron,
    q_single_neuron,
    random_regression,
    relu_teacher_regression,
    warped_mirror_flow_path,
)


# ----------------------------------------------------------------------------------------------
# Training: batches of networks on the run's device (gradient descent or gradient flow)
# ----------------------------------------------------------------------------------------------
def train_single_neuron(
    X: Array,
    y: Array,
    a0: Array,
    w0: Array,
    eta: float | Array,
    method: str = "euler",
    rho: float | Array | None = None,
    beta_scale: Array | None = None,
    max_steps: int = 200_000,
    rtol: float = 1e-11,
    device: str | torch.device = "cpu",
) -> dict:
    """Train a batch of single neurons (a0 (B,), w0 (B, d)) to zero loss; float64.

    The step is eta / (lambda_max(X X^T) sqrt(delta^2 + 4 R^2)), R = max(||beta0||, beta_scale):
    since a^2 + ||w||^2 = sqrt(delta^2 + 4 ||beta||^2), eta < 2 is then stable near the limit and
    one eta means the same discretization for every initialization. `method="euler"` is gradient
    descent, `"rk4"` integrates gradient flow. rho: None (linear) or the leaky-ReLU slope(s).
    Stops when every run's residual is below rtol times the problem's scale (see `_loss_tol`).
    """
    dev = resolve_device(device)
    a0 = np.atleast_1d(np.asarray(a0, dtype=float))
    w0 = np.atleast_2d(np.asarray(w0, dtype=float))
    delta = a0**2 - (w0**2).sum(1)
    r = np.linalg.norm(a0[:, None] * w0, axis=1)
    if beta_scale is not None:
        r = np.maximum(r, np.asarray(beta_scale, dtype=float))
    step = np.asarray(eta, dtype=float) / _curvature_scale(X, np.sqrt(delta**2 + 4 * r**2))
    t = lambda v: torch.as_tensor(v, dtype=DTYPE, device=dev)  # noqa: E731
    rho_t = None if rho is None else t(np.broadcast_to(rho, a0.shape)[:, None].copy())
    field = _single_neuron_field(t(X), t(y), rho_t)
    tol = t(_loss_tol(X, y, r, rtol))
    (a, w), loss, steps, flipped = _integrate(
        field, (t(a0), t(w0)), t(step), method, max_steps, tol
    )
    a, w = a.cpu().numpy(), w.cpu().numpy()
    return {
        "a": a,
        "w": w,
        "beta": a[:, None] * w,
        "loss": loss.cpu().numpy(),
        "steps": steps,
        "sign_changed": flipped.cpu().numpy(),
        "delta": delta,
        "step": step,
        "converged": (loss < tol).cpu().numpy(),  # False: stopped by max_steps
    }


def train_multi_neuron(
    X: Array,
    y: Array,
    a0: Array,
    W0: Array,
    eta: float | Array,
    method: str = "euler",
    beta_scale: Array | None = None,
    max_steps: int = 200_000,
    rtol: float = 1e-11,
    device: str | torch.device = "cpu",
) -> dict:
    """Train a batch of k-neuron networks f = a^T W x (a0 (B, k), W0 (B, k, d)); float64.

    Step eta / (lambda_max(X X^T) (||a0||^2 + ||W0||_F^2 + 2 R)), R = max(||beta0||, beta_scale).
    """
    dev = resolve_device(device)
    a0 = np.atleast_2d(np.asarray(a0, dtype=float))
    W0 = np.asarray(W0, dtype=float).reshape(a0.shape + (-1,))
    r = np.linalg.norm(np.einsum("bk,bkd->bd", a0, W0), axis=1)
    if beta_scale is not None:
        r = np.maximum(r, np.asarray(beta_scale, dtype=float))
    step = np.asarray(eta, dtype=float) / _curvature_scale(
        X, (a0**2).sum(1) + (W0**2).sum((1, 2)) + 2 * r
    )
    t = lambda v: torch.as_tensor(v, dtype=DTYPE, device=dev)  # noqa: E731
    field = _multi_neuron_field(t(X), t(y))
    tol = t(_loss_tol(X, y, r, rtol))
    (a, W), loss, steps, _ = _integrate(field, (t(a0), t(W0)), t(step), method, max_steps, tol)
    a, W = a.cpu().numpy(), W.cpu().numpy()
    return {
        "a": a,
        "W": W,
        "beta": np.einsum("bk,bkd->bd", a, W),
        "loss": loss.cpu().numpy(),
        "steps": steps,
        "step": step,
        "converged": (loss < tol).cpu().numpy(),  # False: stopped by max_steps
    }


# ----------------------------------------------------------------------------------------------
# Task functions: one per unit of work, JSON in, JSON out
# ----------------------------------------------------------------------------------------------
@task
def task_hessian_map(task: dict) -> dict:
    """Eq. (6) at random points: asymmetry of d M for plain, warped and wrongly warped metrics.

    task: dim, deltas, n_points, seed. Also compares the warped metric with the Hessian of
    Theorem 2's Q (it must be equal, App. B.1) and the autograd test with finite differences.
    """
    rng = np.random.default_rng(task["seed"])
    rows = []
    for delta in task["deltas"]:
        for point in range(task["n_points"]):
            beta = rng.standard_normal(task["dim"])
            asym = {
                p: hessian_map_asymmetry(lambda b, p=p, dl=delta: predictor_metric(b, dl, p), beta)
                for p in (0.0, 1.0, 2.0)
            }
            warped = predictor_metric(torch.as_tensor(beta), delta, 1.0).numpy()
            hess = hess_q_single_neuron(beta, delta)
            rows.append(
                {
                    "delta": delta,
                    "point": point,
                    "plain": asym[0.0],
                    "warped": asym[1.0],
                    "wrong_warp_a2": asym[2.0],
                    "warped_fd": hessian_map_asymmetry(
                        lambda b, dl=delta: predictor_metric(b, dl, 1.0), beta, method="fd"
                    ),
                    "warped_vs_hess_q": float(np.abs(warped - hess).max() / np.abs(hess).max()),
                }
            )
    return {"rows": rows}


@task
def task_time_warp(task: dict) -> dict:
    """Sec. 5 on a 2-d problem: gradient flow and the mirror flow of Q in beta-space.

    Compares, on the same grid, (i) gradient flow run in warped time tau with the mirror flow
    at the same tau (must agree: same points), (ii) gradient flow in ordinary time t with the
    mirror flow at tau = t (differ: different speeds). task: alpha, s, seed, end, dt, n_plot.
    """
    X, y = random_regression(1, 2, task["seed"])
    X, y = X / np.linalg.norm(X), y / np.linalg.norm(X)  # unit-norm row: times of order one
    u = _orientation(X, y, task["seed"])
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u)
    delta = a0**2 - w0 @ w0
    end, dt = task["end"], task["dt"]
    gf_t = gradient_flow_path(X, y, a0, w0, end, dt, clock="t")
    gf_tau = gradient_flow_path(X, y, a0, w0, end, dt, clock="tau")
    mf = warped_mirror_flow_path(X, y, a0 * w0, delta, end, dt)
    limit = q_min_single_neuron(X, y, w0, delta, float(np.sign(a0))).beta
    length = path_length(gf_t["beta"])
    gap = lambda p, q: float(np.linalg.norm(p - q, axis=1).max() / length)  # noqa: E731
    idx = np.unique(np.geomspace(1, len(gf_t["t"]), task["n_plot"]).astype(int) - 1)
    return {
        "same_tau_gap_rel": gap(gf_tau["beta"], mf["beta"]),
        "same_time_gap_rel": gap(gf_t["beta"], mf["beta"]),
        "gf_end_err": _rel(gf_t["beta"][-1], limit),
        "mf_end_err": _rel(mf["beta"][-1], limit),
        "abs_a_min": float(np.abs(gf_t["a"]).min()),
        "abs_a_max": float(np.abs(gf_t["a"]).max()),
        "X": X.tolist(),
        "y": y.tolist(),
        "limit": limit.tolist(),
        "time": gf_t["t"][idx].tolist(),
        "tau_of_t": gf_t["tau"][idx].tolist(),
        "a_of_t": gf_t["a"][idx].tolist(),
        "gf_beta": gf_t["beta"][idx].tolist(),
        "mf_beta": mf["beta"][idx].tolist(),
        "gf_tau_beta": gf_tau["beta"][idx].tolist(),
    }


@task(uses_device=True)
def task_theorem2(task: dict) -> dict:
    """Theorem 2 on one problem, all initialization cases in one batch: gradient descent (each
    step size) and gradient flow against the closed-form Q-min, a Newton cross-check, and
    deliberately wrong variants of Q.

    task: n, d, seed, cases ([{name, alpha, s, anti_aligned}, ...]), etas, gf_eta, device.
    Returns {"cases": [one dict per case]}.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    etas = np.asarray(task["etas"], dtype=float)
    inits = []
    for case in task["cases"]:
        u = _orientation(X, y, task["seed"], anti_aligned=case["anti_aligned"])
        a0, w0 = init_from_scale_shape(case["alpha"], case["s"], u)
        delta = a0**2 - w0 @ w0
        size = max(np.linalg.norm(q_min_single_neuron(X, y, w0, delta, sg).beta) for sg in (1, -1))
        inits.append((a0, w0, delta, size))
    a0s = np.array([i[0] for i in inits])
    w0s = np.array([i[1] for i in inits])
    sizes = np.array([i[3] for i in inits])
    m = len(etas)  # GD batch: case-major, one run per (case, eta)
    gd = train_single_neuron(
        X,
        y,
        np.repeat(a0s, m),
        np.repeat(w0s, m, axis=0),
        np.tile(etas, len(inits)),
        beta_scale=np.repeat(sizes, m),
        device=task["device"],
    )
    gf = train_single_neuron(
        X, y, a0s, w0s, task["gf_eta"], method="rk4", beta_scale=sizes, device=task["device"]
    )
    out = []
    for c, (case, (a0, w0, delta, _)) in enumerate(zip(task["cases"], inits)):
        sigma = float(np.sign(gf["a"][c]))
        theory = q_min_single_neuron(X, y, w0, delta, sigma)
        newton = q_min_numeric(
            X,
            y,
            lambda b: q_single_neuron(b, w0, delta, sigma),  # noqa: B023
            lambda b: grad_q_single_neuron(b, w0, delta, sigma),  # noqa: B023
            lambda b: hess_q_single_neuron(b, delta),  # noqa: B023
        )
        beta_gf = gf["beta"][c]
        wrong = {
            "unit_w0": q_min_single_neuron(X, y, _unit(w0), delta, sigma).beta,
            "sigma_from_a0": q_min_single_neuron(X, y, w0, delta, float(np.sign(a0))).beta,
            "delta_zero": q_min_single_neuron(X, y, w0, 0.0, sigma).beta,
        }
        out.append(
            {
                "name": case["name"],
                "delta": float(delta),
                "a0": a0,
                "a_inf": float(gf["a"][c]),
                "sign_changed": bool(gf["sign_changed"][c]),
                "gd_err": [_rel(b, theory.beta) for b in gd["beta"][c * m : (c + 1) * m]],
                "gd_loss": gd["loss"][c * m : (c + 1) * m].tolist(),
                "gf_err": _rel(beta_gf, theory.beta),
                "gf_loss": float(gf["loss"][c]),
                "a_abs_err": abs(abs(gf["a"][c]) - theory.a_abs) / theory.a_abs,
                "newton_vs_closed_form": _rel(newton, theory.beta),
                "kkt_residual_gf": kkt_residual(beta_gf, X, w0, delta, sigma),
                "wrong_err": {k: _rel(beta_gf, v) for k, v in wrong.items()},
                "wrong_differs": {k: _rel(v, theory.beta) for k, v in wrong.items()},
            }
        )
    return {
        "cases": out,
        "gd_steps": gd["steps"],
        "gf_steps": gf["steps"],
        **_run_status(gd=gd, gf=gf),
    }


@task(uses_device=True)
def task_balanced(task: dict) -> dict:
    """Prop. 1: k neurons from a strictly balanced W0 = a0 u0^T, against the closed form; the
    same formula applied to a generic (unbalanced) initialization of equal size must miss; and
    the exact identity beta_inf = X^+ y + P_perp W0^T a_inf (App. D) for the generic one.

    task: n, d, k, seed, scale, etas, gf_eta, device.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    rng = np.random.default_rng(task["seed"] + 2000)
    k, d = task["k"], task["d"]
    a0 = task["scale"] * rng.standard_normal(k)
    u0 = _unit(rng.standard_normal(d))
    W0 = np.outer(a0, u0)
    theory = q_min_balanced(X, y, a0, u0)
    size = np.linalg.norm(theory.beta)
    etas = np.asarray(task["etas"], dtype=float)
    m = len(etas)
    gd = train_multi_neuron(
        X,
        y,
        np.tile(a0, (m, 1)),
        np.tile(W0, (m, 1, 1)),
        etas,
        beta_scale=np.full(m, size),
        device=task["device"],
    )
    gf = train_multi_neuron(
        X, y, [a0], W0[None], task["gf_eta"], method="rk4", beta_scale=[size], device=task["device"]
    )
    # generic initialization of the same Frobenius size: Prop. 1 does not apply
    W_gen = rng.standard_normal((k, d))
    W_gen *= np.linalg.norm(W0) / np.linalg.norm(W_gen)
    gen = train_multi_neuron(
        X,
        y,
        [a0],
        W_gen[None],
        task["gf_eta"],
        method="rk4",
        beta_scale=[size],
        device=task["device"],
    )
    beta0_gen = W_gen.T @ a0
    prop1_on_generic = q_min_balanced(X, y, a0, _unit(beta0_gen)).beta
    identity = np.linalg.pinv(X) @ y + null_projector(X) @ (W_gen.T @ gen["a"][0])
    return {
        "gd_err": [_rel(b, theory.beta) for b in gd["beta"]],
        "gd_steps": gd["steps"],
        "gf_err": _rel(gf["beta"][0], theory.beta),
        "gf_steps": gf["steps"],
        "gf_loss": float(gf["loss"][0]),
        "generic_err_vs_prop1": _rel(gen["beta"][0], prop1_on_generic),
        "generic_identity_err": _rel(gen["beta"][0], identity),
        "balance_drift": float(
            np.abs(np.outer(gf["a"][0], gf["a"][0]) - gf["W"][0] @ gf["W"][0].T).max()
        ),
        **_run_status(gd=gd, gf=gf, generic=gen),
    }


@task(uses_device=True)
def task_anti_ntk(task: dict) -> dict:
    """Thm 3: a generic k-neuron initialization scaled by eps; distance of the gradient-flow
    limit to the min-L2 interpolator X^+ y (batched over eps). task: n, d, k, seed, eps,
    gf_eta, device."""
    X, y = random_regression(task["n"], task["d"], task["seed"])
    rng = np.random.default_rng(task["seed"] + 3000)
    k, d = task["k"], task["d"]
    a_dir, W_dir = rng.standard_normal(k), rng.standard_normal((k, d)) / np.sqrt(d)
    eps = np.asarray(task["eps"], dtype=float)
    beta_l2 = np.linalg.pinv(X) @ y
    gf = train_multi_neuron(
        X,
        y,
        eps[:, None] * a_dir,
        eps[:, None, None] * W_dir,
        np.full(len(eps), task["gf_eta"]),
        method="rk4",
        beta_scale=np.full(len(eps), np.linalg.norm(beta_l2)),
        device=task["device"],
    )
    dist = [_rel(b, beta_l2) for b in gf["beta"]]
    slope = np.polyfit(np.log(eps), np.log(dist), 1)[0]
    return {
        "eps": eps.tolist(),
        "dist_l2": dist,
        "slope": float(slope),
        "loss": gf["loss"].tolist(),
        "steps": gf["steps"],
        **_run_status(gf=gf),
    }


@task(uses_device=True)
def task_leaky(task: dict) -> dict:
    """Thm 4: leaky-ReLU neurons (one per slope rho, batched): the limit's KKT residual for
    Theorem 2's Q under the affine constraints <beta, x_i> = s sigma^{-1}(s y_i), its distance
    to that Q-min, and to the (wrong) Q-min under the raw labels (a linear unit's).

    task: n, d, seed, rhos, alpha, s, etas, gf_eta, device. Returns {"rows": one per rho}.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"] + 7)
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u)
    delta = a0**2 - w0 @ w0
    rhos = np.asarray(task["rhos"], dtype=float)
    etas = np.asarray(task["etas"], dtype=float)
    k, m = len(rhos), len(etas)
    size = np.array(
        [2 * np.linalg.norm(np.linalg.pinv(X) @ leaky_relu_inverse(y, r)) + 1 for r in rhos]
    )
    gd = train_single_neuron(
        X,
        y,
        np.full(k * m, a0),
        np.tile(w0, (k * m, 1)),
        np.tile(etas, k),
        rho=np.repeat(rhos, m),
        beta_scale=np.repeat(size, m),
        device=task["device"],
    )
    gf = train_single_neuron(
        X,
        y,
        np.full(k, a0),
        np.tile(w0, (k, 1)),
        task["gf_eta"],
        method="rk4",
        rho=rhos,
        beta_scale=size,
        device=task["device"],
    )
    rows = []
    for i, rho in enumerate(rhos):
        s_inf = float(np.sign(gf["a"][i]))
        beta = gf["beta"][i]
        theory = q_min_leaky(X, y, w0, delta, s_inf, rho).beta
        gd_beta, gd_a = gd["beta"][i * m : (i + 1) * m], gd["a"][i * m : (i + 1) * m]
        rows.append(
            {
                "rho": float(rho),
                "kkt_residual_gf": kkt_residual(beta, X, w0, delta, s_inf),
                "kkt_residual_gd": [
                    kkt_residual(b, X, w0, delta, float(np.sign(a))) for b, a in zip(gd_beta, gd_a)
                ],
                "gf_err": _rel(beta, theory),
                "gd_err": [_rel(b, theory) for b in gd_beta],
                "linear_label_err": _rel(beta, q_min_single_neuron(X, y, w0, delta, s_inf).beta),
                "negative_preactivations": int(np.sum(s_inf * (X @ beta) < 0)),
                "gf_loss": float(gf["loss"][i]),
                "sign_changed": bool(gf["sign_changed"][i]),
            }
        )
    return {
        "rows": rows,
        "gf_steps": gf["steps"],
        "gd_steps": gd["steps"],
        **_run_status(gd=gd, gf=gf),
    }


def _run_status(**batches: dict) -> dict:
    """Whether every run of the named training batches met its loss tolerance: `status` is
    `unconverged` if any was stopped by the step cap, and `converged` says which, per batch."""
    converged = {name: [bool(c) for c in batch["converged"]] for name, batch in batches.items()}
    done = all(all(flags) for flags in converged.values())
    return {"converged": converged, "status": "ok" if done else "unconverged"}


@task(uses_device=True)
def task_leaky_negative(task: dict) -> dict:
    """Thm 4's branch a < 0: leaky-ReLU neurons started with a0 < 0 (one per slope rho,
    batched; gradient flow), against Theorem 2's Q under the affine constraints
    <beta, x_i> = s sigma^{-1}(s y_i) with s = sign(a_inf).

    task: n, d, seed, rhos, alpha, s, gf_eta, device. Returns {"rows": one per rho}.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"] + 7)
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u, sign=-1.0)
    delta = a0**2 - w0 @ w0
    rhos = np.asarray(task["rhos"], dtype=float)
    size = np.array(
        [2 * np.linalg.norm(np.linalg.pinv(X) @ leaky_relu_inverse(y, r)) + 1 for r in rhos]
    )
    k = len(rhos)
    gf = train_single_neuron(
        X,
        y,
        np.full(k, a0),
        np.tile(w0, (k, 1)),
        task["gf_eta"],
        method="rk4",
        rho=rhos,
        beta_scale=size,
        device=task["device"],
    )
    done = [bool(c) for c in gf["converged"]]
    rows = []
    for i, rho in enumerate(rhos):
        s_inf = float(np.sign(gf["a"][i]))
        beta = gf["beta"][i]
        rows.append(
            {
                "rho": float(rho),
                "a_inf": float(gf["a"][i]),
                "kkt_residual_gf": kkt_residual(beta, X, w0, delta, s_inf),
                "gf_err": _rel(beta, q_min_leaky(X, y, w0, delta, s_inf, rho).beta),
                "negative_preactivations": int(np.sum(s_inf * (X @ beta) < 0)),
                "gf_loss": float(gf["loss"][i]),
                "converged": done[i],
            }
        )
    status = "ok" if all(done) else "unconverged"
    return {"rows": rows, "gf_steps": gf["steps"], "status": status}


@task(uses_device=True)
def task_relu(task: dict) -> dict:
    """The case Theorem 4 excludes, rho = 0 (a plain ReLU neuron), on a ReLU-teacher regression
    (`relu_teacher_regression`, about half the labels 0), gradient flow from a0 > 0 with w0
    pointing near the teacher. At the limit, the KKT residual of Theorem 2's Q with only the
    samples of non-negative pre-activation as constraints (a sample with negative
    pre-activation has Clarke sub-differential {0}), beside the residual with every sample
    (w - w0 stays in span{x_i}) and the samples that started active and ended inactive.

    task: n, d, seed, alpha, s, max_steps, gf_eta, device.
    """
    X, y, w_star = relu_teacher_regression(task["n"], task["d"], task["seed"])
    rng = np.random.default_rng(task["seed"] + 6000)
    u = _unit(w_star + rng.standard_normal(task["d"]) / np.sqrt(task["d"]))
    a0, w0 = init_from_scale_shape(task["alpha"], task["s"], u)
    delta = a0**2 - w0 @ w0
    size = np.array([2 * np.linalg.norm(np.linalg.pinv(X) @ y) + 1])
    gf = train_single_neuron(
        X,
        y,
        [a0],
        w0[None],
        task["gf_eta"],
        method="rk4",
        rho=np.array([0.0]),
        beta_scale=size,
        max_steps=task["max_steps"],
        device=task["device"],
    )
    beta, a, w = gf["beta"][0], float(gf["a"][0]), gf["w"][0]
    sigma = float(np.sign(a))
    z0, z = X @ w0, X @ w
    floor = 1e-9 * float(np.abs(z).max())
    active = z > -floor
    done = bool(gf["converged"][0])
    return {
        "a_inf": a,
        "gf_loss": float(gf["loss"][0]),
        "converged": done,
        "zero_labels": int(np.sum(y == 0)),
        "inactive_at_end": int(np.sum(~active)),
        "switched_off": int(np.sum((z0 > floor) & ~active)),
        "kkt_residual_active": kkt_residual_active(beta, X, w0, delta, sigma, active),
        "kkt_residual_all_samples": kkt_residual(beta, X, w0, delta, sigma),
        "steps": gf["steps"],
        "status": "ok" if done else "unconverged",
    }


@task(uses_device=True)
def task_regimes(task: dict) -> dict:
    """Sec. 7.2 / App. F: gradient-flow limits over a list of (alpha, s), distances to the min-L2
    interpolator and to the Mahalanobis (NTK) predictor, beside the closed-form Q-min.

    task: n, d, seed, points ([[alpha, s], ...]), in_null (zero initial output), gf_eta, device.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"], in_null=task.get("in_null", False))
    inits = [init_from_scale_shape(al, s, u) for al, s in task["points"]]
    a0 = np.array([a for a, _ in inits])
    w0 = np.array([w for _, w in inits])
    deltas = a0**2 - (w0**2).sum(1)
    sizes = [
        max(np.linalg.norm(q_min_single_neuron(X, y, w, dl, sg).beta) for sg in (1, -1))
        for w, dl in zip(w0, deltas)
    ]
    gf = train_single_neuron(
        X,
        y,
        a0,
        w0,
        np.full(len(a0), task["gf_eta"]),
        method="rk4",
        beta_scale=np.array(sizes),
        device=task["device"],
    )
    done = [bool(c) for c in gf["converged"]]
    rows = [
        _regime_row(
            X,
            y,
            point,
            a0[i],
            w0[i],
            deltas[i],
            {k: gf[k][i] for k in ("a", "beta", "loss", "sign_changed")} | {"converged": done[i]},
        )
        for i, point in enumerate(task["points"])
    ]
    status = "ok" if all(done) else "unconverged"
    return {"rows": rows, "steps": gf["steps"], "status": status}


@task
def task_regimes_implicit(task: dict) -> dict:
    """`task_regimes` for shapes s < 1 (delta < 0), where explicit RK4 is too stiff: each run
    by the implicit Radau solver `gradient_flow_implicit`, to the same loss tolerance (the
    residual below 1e-11 times the problem's scale, `_loss_tol`); a run still above it at the
    step cap is unconverged. task: n, d, seed, points ([[alpha, s], ...]), in_null.
    """
    X, y = random_regression(task["n"], task["d"], task["seed"])
    u = _orientation(X, y, task["seed"], in_null=task.get("in_null", False))
    rows, steps = [], []
    for alpha, s in task["points"]:
        a0, w0 = init_from_scale_shape(alpha, s, u)
        delta = a0**2 - w0 @ w0
        size = max(np.linalg.norm(q_min_single_neuron(X, y, w0, delta, sg).beta) for sg in (1, -1))
        scale = max(np.linalg.norm(a0 * w0), size)  # as `train_single_neuron`'s R
        run = gradient_flow_implicit(X, y, a0, w0, float(_loss_tol(X, y, scale, 1e-11)))
        rows.append(_regime_row(X, y, (alpha, s), a0, w0, delta, run))
        steps.append(run["steps"])
    status = "ok" if all(r["converged"] for r in rows) else "unconverged"
    return {"rows": rows, "steps": steps, "integrator": "radau", "status": status}


def _regime_row(X: Array, y: Array, point, a0: float, w0: Array, delta: float, run: dict) -> dict:
    """One row of the regime sweeps: a gradient-flow limit (`run`: a, beta, loss, converged,
    sign_changed) against min-L2, the Mahalanobis (NTK) predictor and the closed-form Q-min
    with sigma = sign(a_inf)."""
    alpha, s = point
    beta_l2 = np.linalg.pinv(X) @ y
    theory = q_min_single_neuron(X, y, w0, delta, float(np.sign(run["a"]))).beta
    ntk = mahalanobis_predictor(X, y, a0, w0)
    beta0 = a0 * w0
    return {
        "alpha": alpha,
        "s": s,
        "delta": float(delta),
        "gf_dist_l2": _rel(run["beta"], beta_l2),
        "gf_dist_ntk": _rel(run["beta"], ntk, ntk - beta0),
        "q_dist_l2": _rel(theory, beta_l2),
        "q_dist_ntk": _rel(theory, ntk, ntk - beta0),
        "gf_vs_q": _rel(run["beta"], theory),
        "loss": float(run["loss"]),
        "converged": bool(run["converged"]),
        "sign_changed": bool(run["sign_changed"]),
    }


# ----------------------------------------------------------------------------------------------
# Task lists of the notebook's sweeps, built from the profile (the sweep adds the run's device)
# ----------------------------------------------------------------------------------------------
def theorem2_tasks(cfg: dict) -> list[dict]:
    """One task of `task_theorem2` per problem seed, all initialization cases in each."""
    return [
        {
            "n": cfg["n"],
            "d": cfg["d"],
            "seed": s,
            "cases": cfg["theorem2_cases"],
            "etas": cfg["gd_etas"],
            "gf_eta": cfg["gf_eta"],
        }
        for s in cfg["seeds"]
    ]


def balanced_tasks(cfg: dict) -> list[dict]:
    """One task of `task_balanced` (Prop. 1) per problem seed."""
    return [
        {
            "n": cfg["n"],
            "d": cfg["d"],
            "k": cfg["k_neurons"],
            "gf_eta": cfg["gf_eta"],
            "seed": s,
            "scale": cfg["balanced_scale"],
            "etas": cfg["gd_etas"],
        }
        for s in cfg["seeds"]
    ]


def anti_ntk_tasks(cfg: dict) -> list[dict]:
    """One task of `task_anti_ntk` (Theorem 3) per problem seed, all scales eps in each."""
    return [
        {
            "n": cfg["n"],
            "d": cfg["d"],
            "k": cfg["k_neurons"],
            "gf_eta": cfg["gf_eta"],
            "seed": s,
            "eps": cfg["anti_ntk_eps"],
        }
        for s in cfg["seeds"]
    ]


def leaky_tasks(cfg: dict) -> list[dict]:
    """One task of `task_leaky` (Theorem 4) per problem seed, all slopes rho in each."""
    return [
        {"n": cfg["n"], "d": cfg["d"], **cfg["leaky"], "seed": s, "gf_eta": cfg["gf_eta"]}
        for s in cfg["seeds"]
    ]


def regime_tasks(cfg: dict) -> dict[str, tuple]:
    """The sweeps of Sec. 7.2, by name, each as (task function, tasks): the scale alpha at s = 1,
    the shape s at alpha = 1, the scale again with the orientation in null(X) (zero initial
    output), and the large-scale plateau (the profile's `regime_plateau` alphas by shapes);
    one task per problem seed in each. Shapes s >= 1 run by RK4 (`task_regimes`); shapes
    s < 1 (delta < 0, stiff) by the implicit solver (`task_regimes_implicit`), in the sweeps
    'shape_below_one' and 'plateau_below_one' (left out when the profile has no such shape)."""
    alphas, shapes = cfg["regime_alphas"], cfg["regime_shapes"]
    plateau = cfg["regime_plateau"]
    grid = [[a, s] for a in plateau["alphas"] for s in plateau["shapes"]]
    sweeps = {
        "alpha": ([[a, 1.0] for a in alphas], False),
        "shape": ([[1.0, s] for s in shapes if s >= 1], False),
        "alpha_zero_output": ([[a, 1.0] for a in alphas], True),
        "plateau": ([p for p in grid if p[1] >= 1], False),
        "shape_below_one": ([[1.0, s] for s in shapes if s < 1], False),
        "plateau_below_one": ([p for p in grid if p[1] < 1], False),
    }
    out = {}
    for name, (points, in_null) in sweeps.items():
        if not points:
            continue
        implicit = name.endswith("_below_one")
        common = {"n": cfg["n"], "d": cfg["d"], "points": points, "in_null": in_null}
        todo = [
            {**common, "seed": s} if implicit else {**common, "seed": s, "gf_eta": cfg["gf_eta"]}
            for s in cfg["seeds"]
        ]
        out[name] = (task_regimes_implicit if implicit else task_regimes, todo)
    return out


def leaky_negative_tasks(cfg: dict) -> list[dict]:
    """One task of `task_leaky_negative` (Theorem 4 with a0 < 0) per problem seed, with the
    profile's `leaky` scale, shape and slopes (gradient flow only)."""
    lk = cfg["leaky"]
    return [
        {
            "n": cfg["n"],
            "d": cfg["d"],
            "seed": s,
            "alpha": lk["alpha"],
            "s": lk["s"],
            "rhos": lk["rhos"],
            "gf_eta": cfg["gf_eta"],
        }
        for s in cfg["seeds"]
    ]


def relu_tasks(cfg: dict) -> list[dict]:
    """One task of `task_relu` (rho = 0) per seed of the profile's `relu` section."""
    relu = cfg["relu"]
    return [
        {**{k: v for k, v in relu.items() if k != "seeds"}, "seed": s, "gf_eta": cfg["gf_eta"]}
        for s in relu["seeds"]
    ]
