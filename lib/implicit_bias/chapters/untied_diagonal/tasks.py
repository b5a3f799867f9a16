"""The task functions of the chapter's sweeps (one JSON task in, one JSON result out) and the
task lists the notebook sweeps them over, built from the profile.

`theorem1_task` checks Theorem 1 (and App. A) on small random regressions, `scale_shape_task`
runs gradient descent over a grid of (scale, shape) initializations on Sec. 9's sparse
regression (the regimes of Sec. 7.1 and Fig. 7.1), `rich_limit_task` follows Theorem 1's
minimizer to scales beyond gradient descent's reach. The numerics are in
`implicit_bias.models.diagonal`.
"""

from __future__ import annotations

import numpy as np
import torch

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.convex import min_l1_interpolator, min_l2_interpolator
from implicit_bias.models.diagonal import (
    THEOREM1_INITS,
    curvature_bound,
    grad_regularizer_q,
    gradient_descent,
    gradient_flow,
    kkt_residual,
    l1_dual,
    m_from_scale_shape,
    population_error,
    q_minimizer,
    relative_distance,
    scale_shape_init,
    sparse_regression_data,
    stable_steps,
    theorem1_inits,
    tied_gradient_descent,
)

# ----------------------------------------------------------------------------------------------
# Task functions
# ----------------------------------------------------------------------------------------------


@task(uses_device=True)
def theorem1_task(task: dict) -> dict:
    """Theorem 1 (and App. A) on a random regression (X, y ~ N(0, 1), n < d): distance of the
    GD limit (several step sizes) and of the gradient-flow limit to the Q-minimizer, of the
    Q-minimizers with a wrong scale (m/2, 2m, the control), and the tied (Woodworth) model.

    task: n, d, seed, rel_steps (decreasing), tol, max_steps, gradient_flow (bool), gf_tol,
    device. Each run reports whether it converged (GD: residual below tol within max_steps;
    gradient flow: both optimality conditions below gf_tol); the status is "unconverged" if
    any run did not.
    """
    rng = np.random.default_rng(task["seed"])
    n, d = task["n"], task["d"]
    X = rng.standard_normal((n, d))
    y = rng.standard_normal(n)
    device = torch.device(task.get("device", "cpu"))
    Xt = torch.tensor(X, device=device)
    yt = torch.tensor(y, device=device)
    params = theorem1_inits(d, rng)
    k, beta0 = (t.cpu().numpy() for t in params.effective_scale())
    qmins = [q_minimizer(X, y, k[b], beta0[b]) for b in range(len(THEOREM1_INITS))]
    q_beta = np.array([q.beta for q in qmins])
    beta_bound = 3 * float(np.abs(np.linalg.pinv(X) @ y).max())
    out: dict = {
        "inits": list(THEOREM1_INITS),
        "rel_steps": task["rel_steps"],
        "qmin_kkt": [
            kkt_residual(X, np.arcsinh(q.beta / k[b]) - np.arcsinh(beta0[b] / k[b]))
            for b, q in enumerate(qmins)
        ],
        "qmin_residual": [q.residual for q in qmins],
        "gd_error": [],
        "gd_steps": [],
        "gd_converged": [],
    }
    for rel in task["rel_steps"]:
        steps = stable_steps(Xt, params.to(device), beta_bound, rel)
        res = gradient_descent(
            Xt, yt, params.to(device), steps, tol=task["tol"], max_steps=task["max_steps"]
        )
        beta = res.beta.cpu().numpy()
        out["gd_error"].append(relative_distance(beta, q_beta).tolist())
        out["gd_steps"].append(res.steps.cpu().tolist())
        out["gd_converged"].append(res.converged.cpu().tolist())
    # Kernel regime (Sec. 7.1, App. E): for m_i >> |beta_i| the limit is the RKHS-norm
    # interpolator of the tangent kernel 2 x^T diag(m) x', i.e. min-L2 weighted by m (an
    # unweighted min-L2 is the wrong kernel when m varies across coordinates).
    plain = min_l2_interpolator(X, y).x
    out["dist_weighted_l2"] = [
        float(relative_distance(beta[b], min_l2_interpolator(X, y, weights=k[b]).x))
        for b in range(len(k))
    ]
    out["dist_plain_l2"] = [float(relative_distance(beta[b], plain)) for b in range(len(k))]
    # Control: the same program with the scale off by 2 either way must miss the GD limit.
    for name, factor in (("wrong_half", 0.5), ("wrong_double", 2.0)):
        out[name] = [
            float(relative_distance(beta[b], q_minimizer(X, y, factor * k[b], beta0[b]).beta))
            for b in range(len(THEOREM1_INITS))
        ]
    if task.get("gradient_flow", True):
        flow = gradient_flow(X, y, params, tol=task["gf_tol"], kkt_tol=task["gf_tol"])
        out["gf_error"] = relative_distance(flow.beta.numpy(), q_beta).tolist()
        out["gf_residual"] = flow.residual.tolist()
        out["gf_converged"] = flow.converged.tolist()
    # Woodworth et al.'s tied model, trained in its own parametrization: m = 2 alpha_w^2.
    alpha_w = torch.tensor(rng.uniform(0.05, 0.5, (1, d)), dtype=torch.float64)
    eta = task["rel_steps"][-1] / (
        curvature_bound(Xt) * 4 * (float(alpha_w.max()) ** 2 + beta_bound)
    )
    tied = tied_gradient_descent(
        Xt, yt, alpha_w.to(device), eta, tol=task["tol"], max_steps=task["max_steps"]
    )
    tied_q = q_minimizer(X, y, 2 * alpha_w[0].numpy() ** 2).beta
    out["tied_error"] = float(relative_distance(tied[0].cpu().numpy(), tied_q))
    out["tied_converged"] = bool(relative_distance(tied[0].cpu().numpy() @ X.T, y) <= task["tol"])
    runs_ok = [all(c) for c in out["gd_converged"]] + [all(out.get("gf_converged", [True]))]
    runs_ok.append(out["tied_converged"])
    out["status"] = "ok" if all(runs_ok) else "unconverged"
    return out


@task(uses_device=True)
def scale_shape_task(task: dict) -> dict:
    """Gradient descent from uniform unbiased initializations at the (alpha, s) points of the
    task, on Woodworth et al.'s sparse regression (Sec. 9), batched in one tensor program.

    Returns per point: population error of the GD limit and of Theorem 1's Q-minimizer
    (m = alpha (s + 1/s)), relative distances GD-to-Q, GD-to-min-L1, GD-to-min-L2, steps and
    convergence; plus the population errors of the min-L1 and min-L2 interpolators.
    task: n, d, r_star, noise_var, seed, points [[alpha, s], ...], rel_step, beta_bound, tol,
    max_steps, device, and optionally extra_m (Q-minimizers only, their distances to min-L1/L2).
    """
    X, y, beta_star = sparse_regression_data(
        task["n"], task["d"], task["r_star"], task["noise_var"], task["seed"]
    )
    device = torch.device(task.get("device", "cpu"))
    Xt = torch.tensor(X, device=device)
    yt = torch.tensor(y, device=device)
    pts = np.array(task["points"], dtype=float)
    alpha = torch.tensor(pts[:, 0], dtype=torch.float64, device=device)
    shape = torch.tensor(pts[:, 1], dtype=torch.float64, device=device)
    params = scale_shape_init(alpha, shape, task["d"])
    steps = stable_steps(Xt, params, task["beta_bound"], task["rel_step"])
    res = gradient_descent(
        Xt, yt, params, steps, tol=task["tol"], max_steps=task["max_steps"], check_every=200
    )
    beta = res.beta.cpu().numpy()
    m = m_from_scale_shape(pts[:, 0], pts[:, 1])
    q_beta = np.array([q_minimizer(X, y, mi).beta for mi in m])
    l1 = min_l1_interpolator(X, y)
    l2 = min_l2_interpolator(X, y)
    # Theorem 1's prediction at scales m far beyond gradient descent's reach (optional).
    extra = [q_minimizer(X, y, mi).beta for mi in task.get("extra_m", [])]
    return {
        "extra_m": task.get("extra_m", []),
        "extra_m_dist_l1": [float(relative_distance(b, l1.x)) for b in extra],
        "extra_m_dist_l2": [float(relative_distance(b, l2.x)) for b in extra],
        "alpha": pts[:, 0].tolist(),
        "shape": pts[:, 1].tolist(),
        "m": m.tolist(),
        "pop_error_gd": population_error(beta, beta_star).tolist(),
        "pop_error_q": population_error(q_beta, beta_star).tolist(),
        "gd_vs_q": relative_distance(beta, q_beta).tolist(),
        "dist_l1": relative_distance(beta, l1.x).tolist(),
        "dist_l2": relative_distance(beta, l2.x).tolist(),
        "steps": res.steps.cpu().tolist(),
        "converged": res.converged.cpu().tolist(),
        "pop_error_l1": float(population_error(l1.x, beta_star)),
        "l1_status": l1.status,
        "pop_error_l2": float(population_error(l2.x, beta_star)),
    }


@task
def rich_limit_task(task: dict) -> dict:
    """Theorem 1's minimizer at tiny m on the Sec. 9 data, beside the linear program of the rich
    limit (min-L1): relative distance to min-L1, and per coordinate log10 |beta_j| with the LP
    dual's slacks 1 - |X^T nu|_j (off the support |beta_j| ~ C_j (m/2)^{slack_j}, see
    `l1_dual`). task: n, d, r_star, noise_var, seed, m_values."""
    X, y, _ = sparse_regression_data(
        task["n"], task["d"], task["r_star"], task["noise_var"], task["seed"]
    )
    l1 = min_l1_interpolator(X, y).x
    nu, slack = l1_dual(X, y)
    rows, log10_abs_beta = [], []
    for m in task["m_values"]:
        q = q_minimizer(X, y, m)
        dist = float(relative_distance(q.beta, l1))
        log10_abs_beta.append(np.log10(np.abs(q.beta)).tolist())
        rows.append(
            {
                "m": m,
                "dist_l1": dist,
                "dist_times_log_1_over_m": dist * np.log(1 / m),
                "kkt": kkt_residual(X, grad_regularizer_q(q.beta, m)),
                "residual": q.residual,
                "converged": bool(q.converged),
            }
        )
    return {
        "rows": rows,
        "slack": slack.tolist(),
        "dual_objective": float(y @ nu),
        "l1_norm": float(np.abs(l1).sum()),
        "log10_abs_beta": log10_abs_beta,
    }


# ----------------------------------------------------------------------------------------------
# Task lists (what the notebook sweeps, from the profile)
# ----------------------------------------------------------------------------------------------

# Theorem 1's minimizer at these m (far below gradient descent's reach) for the rich limit.
RICH_LIMIT_M_VALUES = [1e-5, 1e-8, 1e-12, 1e-20, 1e-30]


def log_grid(spec) -> np.ndarray:
    """10 ** linspace(start, stop, num) from a profile's [start, stop, num]."""
    start, stop, num = spec
    return 10.0 ** np.linspace(start, stop, int(num))


def theorem1_tasks(cfg: dict) -> list[dict]:
    """One `theorem1_task` per seed of the profile's `theorem1` section."""
    t1 = cfg["theorem1"]
    return [{**{k: v for k, v in t1.items() if k != "seeds"}, "seed": s} for s in t1["seeds"]]


def _gd_base(cfg: dict) -> dict:
    """What every `scale_shape_task` shares: the data (less its seeds) and the GD settings."""
    return {**{k: v for k, v in cfg["data"].items() if k != "seeds"}, **cfg["gd"]}


def regimes_points(cfg: dict) -> tuple[list[list[float]], list[list[float]]]:
    """Sec. 7.1's two lines of (alpha, s) points: the balanced line s = 1 over the profile's
    alpha grid, and the tiny scale `regimes_tiny_alpha` over its shape grid."""
    balanced = [[a, 1.0] for a in log_grid(cfg["regimes_log10_alpha"])]
    unbalanced = [[cfg["regimes_tiny_alpha"], s] for s in log_grid(cfg["regimes_log10_shape"])]
    return balanced, unbalanced


def regimes_tasks(cfg: dict) -> list[dict]:
    """One `scale_shape_task` per data seed over both lines of `regimes_points` (balanced
    first), with Theorem 1's minimizer at `qmin_tiny_m` as an extra."""
    balanced, unbalanced = regimes_points(cfg)
    return [
        {
            **_gd_base(cfg),
            "seed": s,
            "points": balanced + unbalanced,
            "extra_m": [cfg["qmin_tiny_m"]],
        }
        for s in cfg["data"]["seeds"]
    ]


def fig71_points(cfg: dict) -> list[list[float]]:
    """Fig. 7.1's (alpha, s) grid; with `fig71_mirror` only s >= 1 (the runs at s < 1 are
    exact mirrors of those at 1/s, see `analysis.mirror_shapes`)."""
    shapes = log_grid(cfg["fig71_log10_shape"])
    if cfg["fig71_mirror"]:
        shapes = shapes[shapes >= 1]
    return [[a, s] for a in log_grid(cfg["fig71_log10_alpha"]) for s in shapes]


def fig71_tasks(cfg: dict) -> list[dict]:
    """One `scale_shape_task` per data seed over the whole Fig. 7.1 grid."""
    points = fig71_points(cfg)
    return [{**_gd_base(cfg), "seed": s, "points": points} for s in cfg["data"]["seeds"]]


def rich_limit_tasks(cfg: dict) -> list[dict]:
    """One `rich_limit_task` per data seed at the m of RICH_LIMIT_M_VALUES."""
    data = cfg["data"]
    return [
        {
            **{k: v for k, v in data.items() if k != "seeds"},
            "seed": s,
            "m_values": list(RICH_LIMIT_M_VALUES),
        }
        for s in data["seeds"]
    ]
