"""The task functions of the deep matrix factorization chapter (Arora et al., 2019): one unit of
work each, cached by `Chapter.sweep` under the fingerprint of its code."""

from __future__ import annotations

import numpy as np

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.deep_matrix_factorization import (
    effective_rank,
    ground_truth,
    min_nuclear_norm_completion,
    observation_masks,
    ode_integrated,
    rate_exponent,
    singular_value_dynamics,
    tail_share,
    train_completion,
    train_completion_authors,
)


def base_step(target: np.ndarray, depth: int) -> float:
    """The step scale n^2 / (N ||W*||_2^(2 - 2/N)): near a solution of spectral norm ||W*||_2,
    the loss sum_Omega (W - W*)^2 / (2m) seen through the depth-N product has curvature of about
    N ||W*||_2^(2 - 2/N) / n^2 along the top singular direction (observations cover m / n^2 of
    it), so steps below this scale are stable at the end of training for every depth."""
    n = target.shape[0]
    return n * n / (depth * np.linalg.norm(target, 2) ** (2 - 2 / depth))


def _solution(w: np.ndarray, target: np.ndarray, rank: int) -> dict:
    """What Fig. 1 and 2 measure of one solution W."""
    return {
        "rel_error": float(np.linalg.norm(w - target) / np.linalg.norm(target)),
        "nuclear_norm": float(np.linalg.norm(w, "nuc")),
        "tail_share": tail_share(w, rank),
        "effective_rank": effective_rank(w),
    }


@task
def completion_task(task: dict) -> dict:
    """Gradient descent on a depth-N factorization (Sec. 2.2, Fig. 1 and 2) for every
    observation count of one seed's ground truth, batched; plain gradient descent with step
    lr_factor x `base_step`, from a balanced initialization whose end-to-end singular values
    are all `scale`. With `adaptive_lr` set, the model's adaptive path instead: every step
    along the negative gradient, of length adaptive_lr / (root of a running mean of the
    squared gradient norm), the authors' GroupRMSprop rule from the same balanced start, in
    float64. A run stopped by the step cap is "unconverged"."""
    target = ground_truth(task["n"], task["rank"], task["seed"])
    masks = observation_masks(task["n"], task["counts"], task["seed"])
    adaptive = task.get("adaptive_lr") is not None
    lr = task["adaptive_lr"] if adaptive else task["lr_factor"] * base_step(target, task["depth"])
    run = train_completion(
        target,
        masks,
        task["depth"],
        task["scale"],
        lr,
        task["max_steps"],
        task["tol"],
        seed=1000 * task["seed"] + task["depth"],
        adaptive=adaptive,
    )
    runs = [
        {
            "count": count,
            "status": "ok" if run.converged[k] else "unconverged",
            "steps": int(run.steps[k]),
            "train_mse": float(run.train_mse[k]),
            **_solution(run.w[k].astype(np.float64), target, task["rank"]),
        }
        for k, count in enumerate(task["counts"])
    ]
    return {"status": "ok", "lr": lr, "runs": runs}


@task
def authors_task(task: dict) -> dict:
    """The authors' protocol (their `main.py` and `opt.py`; `train_completion_authors`) on one
    seed's ground truth and observed entries (the same as the book's protocol), for every
    (observation count, initialization scale) cell of the task, batched: Gaussian factors,
    GroupRMSprop at `lr`, float32, stop at training loss 1e-6 (`tol`) or the step cap
    (unconverged). The measures are taken in float64 of the float32 solution."""
    target = ground_truth(task["n"], task["rank"], task["seed"])
    counts = sorted({m for m, _ in task["cells"]})
    masks = dict(zip(counts, observation_masks(task["n"], counts, task["seed"])))
    run = train_completion_authors(
        np.broadcast_to(target, (len(task["cells"]),) + target.shape).copy(),
        np.stack([masks[m] for m, _ in task["cells"]]),
        task["depth"],
        [a for _, a in task["cells"]],
        seed=1000 * task["seed"] + task["depth"],
        lr=task["lr"],
        tol=task["tol"],
        max_steps=task["max_steps"],
    )
    runs = [
        {
            "count": m,
            "scale": a,
            "status": "ok" if run.converged[k] else "unconverged",
            "steps": int(run.steps[k]),
            "train_mse": float(run.train_mse[k]),
            **_solution(run.w[k].astype(np.float64), target, task["rank"]),
        }
        for k, (m, a) in enumerate(task["cells"])
    ]
    return {"status": "ok", "runs": runs}


@task
def nuclear_task(task: dict) -> dict:
    """The minimum nuclear-norm completion of one seed's observations (cvxpy), the comparison
    of Fig. 1 and the denominator of Fig. 2's nuclear-norm ratio. The solver's status is the
    result's status."""
    target = ground_truth(task["n"], task["rank"], task["seed"])
    mask = observation_masks(task["n"], [task["count"]], task["seed"])[0]
    x, status = min_nuclear_norm_completion(
        target, mask, task["solver"], task["solver_eps"], task["solver_max_iters"]
    )
    if x is None:
        return {"status": status}
    return {
        "status": status,
        "rel_error": float(np.linalg.norm(x - target) / np.linalg.norm(target)),
        "nuclear_norm": float(np.linalg.norm(x, "nuc")),
        "tail_share": tail_share(x, task["rank"]),
        "max_violation": float(np.abs(x - target)[mask].max()),
    }


@task
def dynamics_task(task: dict) -> dict:
    """Plain gradient descent with step lr_factor x `base_step` up to the flow time horizon x
    `base_step` (Theorem 3, Sec. 3): the measured top singular values against Theorem 3's
    equation integrated along the run, and the fitted exponent of the rate's dependence on
    sigma_r. The trajectories come back subsampled to `records` points."""
    target = ground_truth(task["n"], task["rank"], task["seed"])
    mask = observation_masks(task["n"], [task["count"]], task["seed"])[0]
    base = base_step(target, task["depth"])
    lr = task["lr_factor"] * base
    run = singular_value_dynamics(
        target,
        mask,
        task["depth"],
        task["scale"],
        lr,
        task["horizon"] * base,
        task["rank"],
        seed=task["seed"],
        init=task.get("init", "balanced"),
    )
    integrated = ode_integrated(run.sigma, run.ode_rate, lr)
    exponent, points = rate_exponent(run.sigma, run.inner, lr, 10 * task["scale"])
    pick = np.unique(np.linspace(0, len(run.times) - 1, task["records"]).round().astype(int))
    return {
        "status": "ok",
        "lr": lr,
        "steps": run.steps,
        "deviation": float(np.abs(integrated - run.sigma).max() / run.sigma[-1, 0]),
        "exponent": exponent,
        "exponent_points": points,
        "times": run.times[pick].tolist(),
        "sigma": run.sigma[pick].tolist(),
        "sigma_ode": integrated[pick].tolist(),
        "sigma_target": np.linalg.svd(target, compute_uv=False)[: task["rank"]].tolist(),
    }


# ---- the task lists of the notebook's sweeps, from the profile's parameters ----


def book_seeds(cfg: dict) -> list[int]:
    """The seeds of the book's protocol: the exploratory seeds, then `confirmatory_seeds`, the
    confirmatory seeds of the registered seed plan (Fig. 1 at every depth, the nuclear-norm
    solves, Fig. 2)."""
    return _joined(cfg["seeds"], cfg["confirmatory_seeds"])


def fig1_seeds(cfg: dict, depth: int) -> list[int]:
    """The seeds of Fig. 1 at `depth`: `book_seeds`, and at depths 3 and more also
    `deep_confirmatory_seeds` (the plan of the comparison of depth 4 with depth 3 needs the
    most)."""
    deep = cfg["deep_confirmatory_seeds"] if depth >= 3 else []
    return _joined(book_seeds(cfg), deep)


def _joined(first: list[int], more: list[int]) -> list[int]:
    return first + [s for s in more if s not in first]


def completion_tasks(cfg: dict) -> list[dict]:
    """Fig. 1: one task per depth and seed (`fig1_seeds`), all counts of the seed in one
    batch."""
    return [
        {
            "n": cfg["n"],
            "rank": cfg["rank"],
            "seed": s,
            "depth": d,
            "scale": cfg["init_scale"],
            "counts": cfg["counts"],
            "lr_factor": cfg["lr_factor"],
            "max_steps": cfg["max_steps"],
            "tol": cfg["tol"],
        }
        for d in cfg["depths"]
        for s in fig1_seeds(cfg, d)
    ]


def init_scale_tasks(cfg: dict) -> list[dict]:
    """Fig. 2: one task per depth, initialization scale and seed, at Fig. 2's two counts."""
    return [
        {
            "n": cfg["n"],
            "rank": cfg["rank"],
            "seed": s,
            "depth": d,
            "scale": a,
            "counts": cfg["fig2_counts"],
            "lr_factor": cfg["lr_factor"],
            "max_steps": cfg["max_steps"],
            "tol": cfg["tol"],
        }
        for d in cfg["fig2_depths"]
        for a in cfg["fig2_scales"]
        for s in book_seeds(cfg)
    ]


def fewer_init_scale_tasks(cfg: dict) -> list[dict]:
    """Fig. 2 at `fig2_fewer_count`, the book's setting where the nuclear-norm ratio has room
    to rise (W*'s own nuclear norm is well above the minimum there): depth 2, one task per
    initialization scale and exploratory seed (one count per task, so the runs of Fig. 2's
    own counts are not recomputed); the confirmatory seeds (`fig2_fewer_confirmatory_seeds`)
    run the two ends of the range alone, which decide the claims."""
    ends = [min(cfg["fig2_scales"]), max(cfg["fig2_scales"])]
    more = [s for s in cfg["fig2_fewer_confirmatory_seeds"] if s not in cfg["seeds"]]
    cells = [(s, a) for a in cfg["fig2_scales"] for s in cfg["seeds"]]
    cells += [(s, a) for a in cfg["fig2_scales"] if a in ends for s in more]
    return [
        {
            "n": cfg["n"],
            "rank": cfg["rank"],
            "seed": s,
            "depth": 2,
            "scale": a,
            "counts": [cfg["fig2_fewer_count"]],
            "lr_factor": cfg["lr_factor"],
            "max_steps": cfg["max_steps"],
            "tol": cfg["tol"],
        }
        for s, a in cells
    ]


def step_scan_tasks(cfg: dict) -> list[dict]:
    """The book's protocol at the scan's step factors other than the profile's own (whose runs
    are Fig. 1's), at all counts, and the model's adaptive path at the scan's counts and seeds,
    for the scan's depths, on the exploratory seeds (the scan chooses the protocol; it decides
    no claim)."""
    scan = [
        t
        for t in completion_tasks(cfg)
        if t["depth"] in cfg["step_scan_depths"] and t["seed"] in cfg["seeds"]
    ]
    plain = [
        {**t, "lr_factor": c}
        for c in cfg["step_scan_lr_factors"]
        if c != cfg["lr_factor"]
        for t in scan
    ]
    adaptive = [
        {
            **t,
            "counts": cfg["step_scan_adaptive_counts"],
            # the step factor does not enter the adaptive path: one fixed value keeps one task
            # (one cache entry) per run whatever the profile's own factor
            "lr_factor": 1.0,
            "adaptive_lr": cfg["authors_lr"],
            "max_steps": cfg["authors_max_steps"],
        }
        for t in scan
        if t["seed"] in cfg["step_scan_adaptive_seeds"]
    ]
    return plain + adaptive


def authors_tasks(cfg: dict) -> list[dict]:
    """The authors' protocol, per depth and exploratory seed: one task of Fig. 1's cells (the
    authors' counts at the chapter's init scale) and, at the authors' Fig. 2 depths, of Fig.
    2's cells at the two ends of its range (its counts at the largest and smallest of
    authors_fig2_scales), which decide the Fig. 2 claims; and one task of the scales between
    the ends, which only Fig. 2's table draws: a task of its own, so that adding or dropping
    them recomputes none of the claims' runs (it draws its Gaussian factors from the same seed:
    the directions of the ends' cells at other scales). Fig. 1's further counts
    (authors_more_counts, where the profile has them) run in a third task, for the same
    reason. Each cell once. At `authors_confirmatory_depths`, each confirmatory seed adds the
    ends' task alone (the seed plan's seeds of the Fig. 2 claims there)."""
    scales = cfg["authors_fig2_scales"]
    ends = _ends(cfg)
    inner = [a for a in scales if a not in ends]

    def task(s: int, d: int, cells: list) -> dict:
        return {
            "n": cfg["n"],
            "rank": cfg["rank"],
            "seed": s,
            "depth": d,
            "cells": cells,
            "lr": cfg["authors_lr"],
            "tol": cfg["tol"],
            "max_steps": cfg["authors_max_steps"],
        }

    tasks = []
    for d in cfg["depths"]:
        for s in cfg["seeds"]:
            cells = [[m, cfg["init_scale"]] for m in cfg["authors_counts"]]
            if d in cfg["authors_fig2_depths"]:
                cells += [
                    [m, a] for m in cfg["authors_fig2_counts"] for a in ends if [m, a] not in cells
                ]
            tasks.append(task(s, d, cells))
            if d in cfg["authors_fig2_depths"] and inner:
                tasks.append(
                    task(s, d, [[m, a] for m in cfg["authors_fig2_counts"] for a in inner])
                )
            if cfg.get("authors_more_counts"):
                tasks.append(
                    task(s, d, [[m, cfg["init_scale"]] for m in cfg["authors_more_counts"]])
                )
    # the confirmatory seeds of the Fig. 2 claims of depths 3 and 4: the ends' task only
    for d in cfg["authors_confirmatory_depths"]:
        for s in authors_confirmatory_seeds(cfg):
            tasks.append(task(s, d, [[m, a] for m in cfg["authors_fig2_counts"] for a in ends]))
    return tasks


def _ends(cfg: dict) -> list[float]:
    scales = cfg["authors_fig2_scales"]
    return [a for a in scales if a in (min(scales), max(scales))]


def authors_confirmatory_seeds(cfg: dict) -> list[int]:
    """The confirmatory seeds of the authors' protocol (Fig. 2's ends at
    `authors_confirmatory_depths`), those not among the exploratory seeds."""
    return [s for s in cfg["authors_confirmatory_seeds"] if s not in cfg["seeds"]]


def nuclear_tasks(cfg: dict) -> list[dict]:
    """The minimum nuclear-norm completions of every seed of the book's protocol at every count
    of Fig. 1 and 2 (and `fig2_fewer_count`), of the authors' protocol's further confirmatory
    seeds at its Fig. 2 counts, and of the further seeds of Fig. 2 at `fig2_fewer_count`
    (each the denominator of its runs' nuclear-norm ratio)."""
    counts = sorted(set(cfg["counts"]) | set(cfg["fig2_counts"]) | {cfg["fig2_fewer_count"]})
    book = book_seeds(cfg)
    cells = [(s, m) for s in book for m in counts]
    cells += [
        (s, m)
        for s in authors_confirmatory_seeds(cfg)
        if s not in book
        for m in cfg["authors_fig2_counts"]
    ]
    cells += [
        (s, cfg["fig2_fewer_count"])
        for s in sorted({t["seed"] for t in fewer_init_scale_tasks(cfg)})
        if s not in book and (s, cfg["fig2_fewer_count"]) not in cells
    ]
    return [
        {
            "n": cfg["n"],
            "rank": cfg["rank"],
            "seed": s,
            "count": m,
            "solver": cfg["solver"],
            "solver_eps": cfg["solver_eps"],
            "solver_max_iters": cfg["solver_max_iters"],
        }
        for s, m in cells
    ]


def dynamics_tasks(cfg: dict) -> list[dict]:
    """Theorem 3: one run per depth and step size, on one small problem (seed 0)."""
    return [
        {
            "n": cfg["dyn_n"],
            "rank": cfg["dyn_rank"],
            "count": cfg["dyn_count"],
            "seed": 0,
            "depth": d,
            "scale": cfg["dyn_scale"],
            "lr_factor": c,
            "horizon": cfg["dyn_horizon"],
            "records": cfg["dyn_records"],
        }
        for d in cfg["depths"]
        for c in cfg["dyn_lr_factors"]
    ]
