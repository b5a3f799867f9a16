"""The sweeps of the gln_norm chapter (Lippl, Abbott & Chung, 2022): the task functions (JSON in,
JSON out, every seed of one configuration per task), the binary MNIST problems they solve, and
the task lists the notebook sweeps, built from the profile.

* `gd_task`: deep or shallow GLNs trained with the paper's SGD schedule, all seeds batched;
* `svm_task`: one convex program (SVM-GLN, SVM-L2, SVM-L2-eq23 or the shallow SVM) per seed;
* `relu_task`: ReLU networks and their FReLU (SVM-RC, SVM-LC, and SVM-RC with the authors' gates,
  `implicit_bias.models.gln_random_contexts`) and hidden-layer (SVM-HL) SVMs;
* `svm_l2_authors_task`: SVM-L2 as the authors' code solves it (`implicit_bias.models.gln_authors`).

The numerics are in `implicit_bias.models.gln` (contexts, models, training),
`implicit_bias.models.gln_svm` (the convex programs, cvxpy) and `implicit_bias.models.gln_solvers`
(the fast exact solvers).
"""

from __future__ import annotations

import functools
import itertools
import time

import numpy as np
import torch

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.gln import (
    KERNEL_FORM_MAX_RATIO,
    Schedule,
    assign_contexts,
    error_rate,
    inconsistency,
    init_deep_gln,
    init_relu,
    init_shallow_gln,
    pack_signs,
    pixel_features,
    predict_batched,
    predict_frelu,
    predict_gln,
    predict_shallow,
    preprocess_images,
    sample_hyperplanes,
    shallow_kernel_form,
    train_batched,
)
from implicit_bias.models.gln_authors import (
    authors_objective,
    svm_l2_authors,
    svm_l2_authors_cvxpy,
)
from implicit_bias.models.gln_random_contexts import gate_matrix, sample_orthogonal_gates
from implicit_bias.models.gln_svm import (
    SVMResult,
    _from_fast,
    solve_program,
    svm_frelu,
    svm_linear,
)

# -------------------------------------------------------------------------------------------
# Data: binary MNIST 0-4 vs 5-9 (Sec. 4.1), a seeded training subset, one validation split
# -------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _mnist_train() -> tuple[np.ndarray, np.ndarray]:
    from implicit_bias.core.engine.data import binary_labels, load_mnist

    images, labels = load_mnist("train")
    return preprocess_images(images), binary_labels(labels)


VAL_SEED = 20220  # one fixed validation split for every run, disjoint from all training sets


def binary_mnist(n_train: int, seed: int, n_val: int) -> dict[str, np.ndarray]:
    """The paper's binary MNIST task (Sec. 4.1): a seeded training subset of size `n_train` and a
    fixed validation split of `n_val` images (12,000 in the paper), disjoint, from MNIST train.
    """
    from implicit_bias.core.engine.data import seeded_subset

    X, y = _mnist_train()
    val = seeded_subset(len(X), n_val, VAL_SEED)
    train = seeded_subset(len(X), n_train, seed, exclude=val)
    return {"X": X[train], "y": y[train], "X_val": X[val], "y_val": y[val]}


def gln_problem(
    N: int, seed: int, n_val: int, n_units: int, n_contexts: int, median_init: bool
) -> dict[str, np.ndarray]:
    """One seed's data and contexts: the seed draws both the training subset and the
    hyperplanes (the paper's 'context seeds')."""
    data = binary_mnist(N, seed, n_val)
    planes = sample_hyperplanes(pixel_features(data["X"]), n_units, n_contexts, seed, median_init)
    data["ctx"] = assign_contexts(pixel_features(data["X"]), planes)
    data["ctx_val"] = assign_contexts(pixel_features(data["X_val"]), planes)
    return data


def _torch(a, dtype, device):
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def _task_device(task: dict) -> torch.device:
    """The task's device; on a CPU, one torch thread per process (on a shared or small CPU,
    more threads oversubscribe the cores: measured 3x slower on the 2-core machine)."""
    from implicit_bias.core.engine.device import resolve_device

    device = resolve_device(task["device"])  # `Chapter.sweep` gives every task its device
    if device.type == "cpu":
        torch.set_num_threads(task.get("cpu_threads", 1))
    return device


# -------------------------------------------------------------------------------------------
# Task functions (module-level, JSON in / JSON out, for `Chapter.sweep`)
# -------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _shallow_init_cached(seeds: tuple, n_contexts: int, dim: int, dtype, device) -> dict:
    return init_shallow_gln(list(seeds), n_contexts, dim, dtype, device)


def _shallow_init(seeds: tuple, n_contexts: int, dim: int, dtype, device) -> dict:
    """`init_shallow_gln`, kept for the next task of the same seeds and contexts: the 12
    shallow tasks of one C (N, median init, momentum) share it, and its QR is most of a large-C
    task's time (about 3 s per seed at 2^15 contexts). Copies, so training cannot alter it."""
    return {
        k: v.clone() for k, v in _shallow_init_cached(seeds, n_contexts, dim, dtype, device).items()
    }


def gd_code_path(task: dict) -> str:
    """Which trainer a `gd_task` (or, deep only, `authors_data_task`) runs
    (`gln.train_batched`): each has its own round-off."""
    if task.get("depth", "deep") == "shallow":
        kernel = shallow_kernel_form(task["N"], task["C"], 785)
        return "shallow, kernel form" if kernel else "shallow, row-lazy"
    kernel = task["N"] <= KERNEL_FORM_MAX_RATIO * 785  # D: 784 pixels and the constant
    return "deep, kernel form" if kernel else "deep, feature form"


@task(threads=None, uses_device=True, code_path=gd_code_path)
def gd_task(task: dict) -> dict:
    """Train a deep GLN (`depth="deep"`, H units, C contexts) or a shallow GLN (`"shallow"`,
    C = 2^k contexts, H ignored) for every seed of `task["seeds"]` in one batched program with the
    paper's schedule; return per-seed final train/validation errors and packed validation signs.
    A deep median-init network is also evaluated as the authors' comparison reloaded it
    (`*_redrawn_cutoffs`): the same weights and hyperplanes with random N(0, 9^2) cutoffs (the
    seed's no-median-init cutoffs) in place of the medians it was trained with, which their
    checkpoint did not save.
    """
    start = time.perf_counter()
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds, depth = list(task["seeds"]), task["depth"]
    H = task["H"] if depth == "deep" else 1
    probs = [
        gln_problem(task["N"], s, task["n_val"], H, task["C"], task["median_init"]) for s in seeds
    ]
    X = _torch(np.stack([p["X"] for p in probs]), dtype, device)
    y = _torch(np.stack([p["y"] for p in probs]), dtype, device)
    ctx = torch.as_tensor(np.stack([p["ctx"] for p in probs]), device=device)
    ctx_val = torch.as_tensor(np.stack([p["ctx_val"] for p in probs]), device=device)
    X_val = _torch(probs[0]["X_val"], dtype, device)
    if depth == "deep":
        params = init_deep_gln(seeds, H, task["C"], X.shape[-1], dtype, device)
    else:
        params = _shallow_init(tuple(seeds), task["C"], X.shape[-1], dtype, device)
        ctx, ctx_val = ctx[..., 0], ctx_val[..., 0]
    schedule = Schedule(
        n_steps=task["n_steps"], lr_drop_step=task["lr_drop_step"], momentum=task["momentum"]
    )
    params = train_batched(depth, params, X, y, ctx, schedule, seeds)
    f_train = predict_batched(depth, params, X, ctx).double().cpu().numpy()
    f_val = predict_batched(depth, params, X_val, ctx_val).double().cpu().numpy()
    y_val = probs[0]["y_val"]
    out = {
        "val_error": [error_rate(f, y_val) for f in f_val],
        "train_error": [error_rate(f, p["y"]) for f, p in zip(f_train, probs)],
        "pred_val": [pack_signs(f) for f in f_val],
    }
    if depth == "deep" and task["median_init"]:  # the network the authors' comparison reloads
        ctx_red = [gln_problem(task["N"], s, task["n_val"], H, task["C"], False) for s in seeds]
        ctx_red = torch.as_tensor(np.stack([p["ctx_val"] for p in ctx_red]), device=device)
        f_red = predict_batched(depth, params, X_val, ctx_red).double().cpu().numpy()
        out["val_error_redrawn_cutoffs"] = [error_rate(f, y_val) for f in f_red]
        out["pred_val_redrawn_cutoffs"] = [pack_signs(f) for f in f_red]
    return {**out, "seconds": time.perf_counter() - start}


@task(threads=None, uses_device=True)
def gd_longer_task(task: dict) -> dict:
    """Finite against infinite time (Discussion): the deep GLN of `gd_task` (same data, contexts,
    initialization and first `checkpoints[0]` steps with the paper's schedule) trained on at
    the final learning rate, momentum 0, with fresh mini-batch shuffles per segment; at every
    step count of `task["checkpoints"]`, per seed, the train and validation errors, the mean
    training loss and the packed validation signs (compared with the SVM-GLN's by the chapter).
    """
    if task["momentum"] != 0.0:
        raise ValueError("gd_longer_task continues SGD without momentum only (momentum = 0)")
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds = list(task["seeds"])
    probs = [gln_problem(task["N"], s, task["n_val"], task["H"], task["C"], True) for s in seeds]
    X = _torch(np.stack([p["X"] for p in probs]), dtype, device)
    y = _torch(np.stack([p["y"] for p in probs]), dtype, device)
    ctx = torch.as_tensor(np.stack([p["ctx"] for p in probs]), device=device)
    ctx_val = torch.as_tensor(np.stack([p["ctx_val"] for p in probs]), device=device)
    X_val = _torch(probs[0]["X_val"], dtype, device)
    params = init_deep_gln(seeds, task["H"], task["C"], X.shape[-1], dtype, device)
    out: dict = {"steps": [], "val_error": [], "train_error": [], "train_loss": [], "pred_val": []}
    done = 0
    for k, stop in enumerate(task["checkpoints"]):
        if k == 0:  # the paper's schedule, as gd_task
            schedule = Schedule(n_steps=stop, lr_drop_step=task["lr_drop_step"], momentum=0.0)
        else:  # on at the final rate (0.04 x 0.25), reshuffled by segment
            schedule = Schedule(n_steps=stop - done, lr_drop_step=0, momentum=0.0)
        params = train_batched("deep", params, X, y, ctx, schedule, [s + 1000 * k for s in seeds])
        done = stop
        f_train = predict_batched("deep", params, X, ctx).double().cpu().numpy()
        f_val = predict_batched("deep", params, X_val, ctx_val).double().cpu().numpy()
        margins = f_train * np.stack([p["y"] for p in probs])
        out["steps"].append(stop)
        out["val_error"].append([error_rate(f, probs[0]["y_val"]) for f in f_val])
        out["train_error"].append([error_rate(f, p["y"]) for f, p in zip(f_train, probs)])
        out["train_loss"].append(np.logaddexp(0.0, -margins).mean(1).tolist())
        out["pred_val"].append([pack_signs(f) for f in f_val])
    return out


@task(threads=None, uses_device=True)
def svm_task(task: dict) -> dict:
    """Solve one convex program (`method` in SVM_METHODS) for every seed of the task; return
    per-seed validation/train errors, objective, solver status, time, group sparsity (units with
    ||zeta_h|| > 1e-6 max_h ||zeta_h||) and packed validation signs. A failed solve is recorded
    with its status (errors None)."""
    out = {
        k: []
        for k in (
            "val_error",
            "train_error",
            "objective",
            "solver_status",
            "solve_seconds",
            "active_units",
            "pred_val",
            "duality_gap",
        )
    }
    method = task["method"]
    device = _task_device(task)
    for seed in task["seeds"]:
        H = task["H"] if method != "SVM-shallow" else 1
        p = gln_problem(task["N"], seed, task["n_val"], H, task["C"], task["median_init"])
        res = solve_program(
            method,
            p["X"],
            p["y"],
            p["ctx"],
            task["C"],
            task["solver"],
            task.get("max_iters"),
            device=str(device),
        )
        out["solver_status"].append(res.status)
        out["solve_seconds"].append(res.seconds)
        out["objective"].append(res.objective)
        out["duality_gap"].append(res.info.get("duality_gap"))
        if res.primal is None:
            for k in ("val_error", "train_error", "active_units", "pred_val"):
                out[k].append(None)
            continue
        predict = predict_shallow if method == "SVM-shallow" else predict_gln
        f_val = predict(res.primal, p["X_val"], p["ctx_val"])
        out["val_error"].append(error_rate(f_val, p["y_val"]))
        out["train_error"].append(error_rate(predict(res.primal, p["X"], p["ctx"]), p["y"]))
        norms = np.linalg.norm(res.primal.reshape(res.primal.shape[0], -1), axis=1)
        out["active_units"].append(int((norms > 1e-6 * norms.max()).sum()))
        out["pred_val"].append(pack_signs(f_val))
    worst = [s for s in out["solver_status"] if s != "optimal"]
    out["status"] = worst[0] if worst else "ok"
    return out


SVM_RC_AUTHORS = "SVM-RC (authors' construction)"
SVM_HL_NO_CONSTANT = "SVM-HL (no constant, as the authors)"


def _trained_relu(task: dict, output_bias: bool):
    """The ReLU networks of a `relu_task` (one per seed, batched) trained with the paper's
    schedule: (device, per-seed data, trained parameters, validation inputs as a tensor)."""
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds = list(task["seeds"])
    datas = [binary_mnist(task["N"], s, task["n_val"]) for s in seeds]
    X = _torch(np.stack([d["X"] for d in datas]), dtype, device)
    y = _torch(np.stack([d["y"] for d in datas]), dtype, device)
    schedule = Schedule(
        n_steps=task["n_steps"], lr_drop_step=task["lr_drop_step"], momentum=task["momentum"]
    )
    start = init_relu(seeds, task["H"], X.shape[-1], dtype, device, output_bias=output_bias)
    params = train_batched("relu", start, X, y, None, schedule, seeds)
    return device, datas, params, _torch(datas[0]["X_val"], dtype, device)


@task(threads=None, uses_device=True)
def relu_task(task: dict) -> dict:
    """Sec. 5.2: train ReLU networks (H units, one per seed, batched), then for every seed solve
    SVM-RC (Eq. 22 with random median-init hyperplane gates), SVM-LC (Eq. 22 with the trained
    network's gates [<w1_h, x> > 0]), SVM-HL (linear SVM on the hidden activations plus a
    constant), SVM-HL without the constant (SVM_HL_NO_CONSTANT, as the authors' code) and SVM-RC
    with the gates the authors' code builds (SVM_RC_AUTHORS:
    `gln_random_contexts`, H orthogonal hyperplanes on the 785 inputs cut at the median over
    every MNIST training image, plus one always-on gate; the seed draws the hyperplanes);
    return errors and inconsistencies with the GD-ReLU (and, for the authors' gates, the
    fewest open gates of a training sample)."""
    start = time.perf_counter()
    seeds, H, solver = list(task["seeds"]), task["H"], task["solver"]
    device, datas, params, X_val = _trained_relu(task, output_bias=True)
    f_gd = predict_batched("relu", params, X_val, None).double().cpu().numpy()
    out: dict = {"GD-ReLU": {"val_error": [error_rate(f, datas[0]["y_val"]) for f in f_gd]}}
    for name in ("SVM-RC", "SVM-LC", "SVM-HL", SVM_HL_NO_CONSTANT, SVM_RC_AUTHORS):
        out[name] = {
            k: [] for k in ("val_error", "inconsistency", "solver_status", "solve_seconds")
        }
    out[SVM_RC_AUTHORS]["min_open_gates"] = []
    w1 = params["w1"].double().cpu().numpy()
    all_images = _mnist_train()[0]
    for r, (seed, d) in enumerate(zip(seeds, datas)):
        planes = sample_hyperplanes(pixel_features(d["X"]), H, 2, seed, median_init=True)
        programs = {
            "SVM-RC": (
                assign_contexts(pixel_features(d["X"]), planes) == 1,
                assign_contexts(pixel_features(d["X_val"]), planes) == 1,
            ),
            "SVM-LC": (d["X"] @ w1[r].T > 0, d["X_val"] @ w1[r].T > 0),
        }
        for name, (g_tr, g_val) in programs.items():
            res = _frelu(d["X"], d["y"], g_tr, solver, str(device))
            f = None if res.primal is None else predict_frelu(res.primal, d["X_val"], g_val)
            _record(out[name], res, f, f_gd[r], d["y_val"])
        feats = np.hstack([np.maximum(d["X"] @ w1[r].T, 0), np.ones((len(d["X"]), 1))])
        feats_val = np.hstack([np.maximum(d["X_val"] @ w1[r].T, 0), np.ones((len(d["X_val"]), 1))])
        res = _linear(feats, d["y"], solver, str(device))
        _record(
            out["SVM-HL"],
            res,
            None if res.primal is None else feats_val @ res.primal,
            f_gd[r],
            d["y_val"],
        )
        res = _linear(feats[:, :-1], d["y"], solver, str(device))  # as the authors: no constant
        f = None if res.primal is None else feats_val[:, :-1] @ res.primal
        _record(out[SVM_HL_NO_CONSTANT], res, f, f_gd[r], d["y_val"])
        gates = sample_orthogonal_gates(all_images, H, seed)
        g_tr, g_val = gate_matrix(d["X"], gates), gate_matrix(d["X_val"], gates)
        out[SVM_RC_AUTHORS]["min_open_gates"].append(int(g_tr.sum(1).min()))
        res = _frelu(d["X"], d["y"], g_tr, solver, str(device))
        f = None if res.primal is None else predict_frelu(res.primal, d["X_val"], g_val)
        _record(out[SVM_RC_AUTHORS], res, f, f_gd[r], d["y_val"])
    out["seconds"] = time.perf_counter() - start
    return out


ONE_SUBSET = "one subset"  # every seed on the first seed's training subset (authors' runs)
ALL_IMAGES_MEDIAN = "median over all images"  # median-init cutoffs over all 60,000 images
DATA_PROTOCOLS = (ONE_SUBSET, ALL_IMAGES_MEDIAN)


def _authors_data(task: dict, seed: int) -> dict[str, np.ndarray]:
    """`gln_problem` for `seed` under the authors' data protocol `task["protocol"]`."""
    H, C, mi = task["H"], task["C"], task["median_init"]
    if task["protocol"] == ONE_SUBSET:
        data = binary_mnist(task["N"], task["seeds"][0], task["n_val"])
        gate_inputs = pixel_features(data["X"])
    elif task["protocol"] == ALL_IMAGES_MEDIAN:
        data = binary_mnist(task["N"], seed, task["n_val"])
        gate_inputs = pixel_features(_mnist_train()[0])  # their quantile init saw every image
    else:
        raise ValueError(f"unknown protocol {task['protocol']!r}; valid: {DATA_PROTOCOLS}")
    planes = sample_hyperplanes(gate_inputs, H, C, seed, mi)
    data["ctx"] = assign_contexts(pixel_features(data["X"]), planes)
    data["ctx_val"] = assign_contexts(pixel_features(data["X_val"]), planes)
    return data


@task(threads=None, uses_device=True, code_path=gd_code_path)
def authors_data_task(task: dict) -> dict:
    """A deep GLN configuration under one of the authors' data protocols (`protocol`):
    ONE_SUBSET, every seed trains on the first seed's training subset (their runs share one,
    data_seed 1) while the seed still draws the hyperplanes and the initialization; or
    ALL_IMAGES_MEDIAN, median-init cutoffs at the median over all 60,000 MNIST training images
    (their quantile init) instead of over the training subset. Per seed: the GD-GLN's
    validation error, the SVM-GLN's (`solve_program`) and their inconsistency."""
    start = time.perf_counter()
    device = _task_device(task)
    dtype = getattr(torch, task.get("dtype", "float32"))
    seeds, H, C = list(task["seeds"]), task["H"], task["C"]
    probs = [_authors_data(task, s) for s in seeds]
    X = _torch(np.stack([p["X"] for p in probs]), dtype, device)
    y = _torch(np.stack([p["y"] for p in probs]), dtype, device)
    ctx = torch.as_tensor(np.stack([p["ctx"] for p in probs]), device=device)
    ctx_val = torch.as_tensor(np.stack([p["ctx_val"] for p in probs]), device=device)
    schedule = Schedule(
        n_steps=task["n_steps"], lr_drop_step=task["lr_drop_step"], momentum=task["momentum"]
    )
    params = train_batched(
        "deep", init_deep_gln(seeds, H, C, X.shape[-1], dtype, device), X, y, ctx, schedule, seeds
    )
    X_val, y_val = _torch(probs[0]["X_val"], dtype, device), probs[0]["y_val"]
    f_gd = predict_batched("deep", params, X_val, ctx_val).double().cpu().numpy()
    out: dict = {
        "GD-GLN": {"val_error": [error_rate(f, y_val) for f in f_gd]},
        "SVM-GLN": {k: [] for k in ("val_error", "inconsistency", "solver_status")},
    }
    for r, p in enumerate(probs):
        res = solve_program(
            "SVM-GLN", p["X"], p["y"], p["ctx"], C, task["solver"], None, str(device)
        )
        slot = out["SVM-GLN"]
        slot["solver_status"].append(res.status)
        f = None if res.primal is None else predict_gln(res.primal, p["X_val"], p["ctx_val"])
        slot["val_error"].append(None if f is None else error_rate(f, y_val))
        slot["inconsistency"].append(None if f is None else inconsistency(f, f_gd[r]))
    out["seconds"] = time.perf_counter() - start
    return out


GD_RELU_NO_BIAS = "GD-ReLU (no output bias, as the authors)"


@task(threads=None, uses_device=True)
def relu_no_bias_task(task: dict) -> dict:
    """The ReLU network as the authors built it, without an output bias (ours has one): the
    same seeds, data, initial weights and schedule as `relu_task`, trained without b2; per seed
    its validation error (under "GD-ReLU", the network the SVM is compared with) and the
    authors' SVM-HL on its hidden layer (no constant feature, SVM_HL_NO_CONSTANT), with the
    inconsistency between the two."""
    start = time.perf_counter()
    device, datas, params, X_val = _trained_relu(task, output_bias=False)
    f_gd = predict_batched("relu", params, X_val, None).double().cpu().numpy()
    out: dict = {
        "GD-ReLU": {"val_error": [error_rate(f, datas[0]["y_val"]) for f in f_gd]},
        SVM_HL_NO_CONSTANT: {
            k: [] for k in ("val_error", "inconsistency", "solver_status", "solve_seconds")
        },
    }
    w1 = params["w1"].double().cpu().numpy()
    for r, d in enumerate(datas):
        res = _linear(np.maximum(d["X"] @ w1[r].T, 0), d["y"], task["solver"], str(device))
        f = None if res.primal is None else np.maximum(d["X_val"] @ w1[r].T, 0) @ res.primal
        _record(out[SVM_HL_NO_CONSTANT], res, f, f_gd[r], d["y_val"])
    out["seconds"] = time.perf_counter() - start
    return out


AUTHORS_L2 = "SVM-L2 (authors' program)"  # its minimum-norm minimizer, fast solver
AUTHORS_L2_SOLVER = "SVM-L2 (authors' program, OSQP)"  # the minimizer the authors' solver finds


@task(threads=None, uses_device=True)
def svm_l2_authors_task(task: dict) -> dict:
    """SVM-L2 as the authors' code solves it, for every seed of the task: with `solver` "fast"
    the minimum-norm minimizer of their objective (`gln_authors.svm_l2_authors`, ridge
    `task["ridge"]`), with a cvxpy solver the minimizer that solver finds on the full input
    dimension (`gln_authors.svm_l2_authors_cvxpy`, at most `max_iters` iterations). Returns the
    per-seed fields of `svm_task` plus ||zeta|| and the objective Q(zeta) of their program."""
    start = time.perf_counter()
    device = _task_device(task)
    keys = ("val_error", "train_error", "objective", "zeta_norm", "solver_status")
    out: dict = {k: [] for k in (*keys, "solve_seconds", "active_units", "pred_val")}
    out["duality_gap"] = []
    for seed in task["seeds"]:
        p = gln_problem(task["N"], seed, task["n_val"], task["H"], task["C"], task["median_init"])
        if task["solver"] == "fast":
            sol = svm_l2_authors(
                p["X"], p["y"], p["ctx"], task["C"], ridge=task["ridge"], device=str(device)
            )
            res = _from_fast(sol)
        else:
            res = svm_l2_authors_cvxpy(
                p["X"], p["y"], p["ctx"], task["C"], task["solver"], task.get("max_iters")
            )
        out["solver_status"].append(res.status)
        out["solve_seconds"].append(res.seconds)
        out["duality_gap"].append(res.info.get("duality_gap"))
        if res.primal is None:
            for k in ("val_error", "train_error", "objective", "zeta_norm", "active_units"):
                out[k].append(None)
            out["pred_val"].append(None)
            continue
        f_val = predict_gln(res.primal, p["X_val"], p["ctx_val"])
        out["val_error"].append(error_rate(f_val, p["y_val"]))
        out["train_error"].append(error_rate(predict_gln(res.primal, p["X"], p["ctx"]), p["y"]))
        out["objective"].append(authors_objective(res.primal))
        out["zeta_norm"].append(float(np.linalg.norm(res.primal)))
        norms = np.linalg.norm(res.primal.reshape(res.primal.shape[0], -1), axis=1)
        out["active_units"].append(int((norms > 1e-6 * norms.max()).sum()))
        out["pred_val"].append(pack_signs(f_val))
    worst = [s for s in out["solver_status"] if s not in ("optimal", "optimal_inaccurate")]
    out["status"] = worst[0] if worst else "ok"
    out["seconds"] = time.perf_counter() - start
    return out


def _frelu(X, y, gates, solver, device: str) -> SVMResult:
    if solver == "fast":
        from implicit_bias.models import gln_solvers

        return _from_fast(gln_solvers.svm_frelu(X, y, gates, device=device))
    return svm_frelu(X, y, gates, solver)


def _linear(F, y, solver, device: str) -> SVMResult:
    if solver == "fast":
        from implicit_bias.models import gln_solvers

        if F.shape[1] < F.shape[0]:  # feature space: D x D systems instead of N x N
            return _from_fast(gln_solvers.svm_linear_features(F, y, device=device))
        return _from_fast(gln_solvers.linear_svm(F, y, device=device))
    return svm_linear(F, y, solver)


def _record(
    slot: dict, res: SVMResult, f: np.ndarray | None, f_gd: np.ndarray, y_val: np.ndarray
) -> None:
    slot["solver_status"].append(res.status)
    slot["solve_seconds"].append(res.seconds)
    slot["val_error"].append(None if f is None else error_rate(f, y_val))
    slot["inconsistency"].append(None if f is None else inconsistency(f, f_gd))


# -------------------------------------------------------------------------------------------
# Task lists of a profile (grids are lists of blocks; each block is a product of lists)
# -------------------------------------------------------------------------------------------


def cost(task: dict) -> float:
    """A rough estimate of a task's compute seconds (one core of the 2-core CPU machine, paper
    profile), for `Chapter.sweep` to start the longest tasks first: deep training grows with
    H C, a shallow one with its QR initialization (C), convex programs with N^2, the authors'
    OSQP solves (full input dimension) are the longest of all; deep training in kernel form
    (N <= 1.5 D) costs about N / (2 D) of the feature form's."""
    N, H, C = task.get("N", 500), task.get("H", 1), task.get("C", 2)
    if task.get("solver") not in (None, "fast"):
        return 60.0 * N / 500
    if "method" in task or task.get("solver") == "fast":
        return (N / 1000) ** 2 * (2 + H * C / 50)
    if task.get("depth") == "shallow":
        return 1.7 + C / 4000
    steps = max(task.get("checkpoints", [task.get("n_steps", 3200)]))
    kernel_form = min(1.0, N / 1570)  # a kernel-form step costs about N / (2 D) of a feature one
    return (1 + H * C / 20 * kernel_form) * steps / 3200


def expand_blocks(blocks: list[dict]) -> list[dict]:
    """Each block is a dict of lists; return the product of every block, in order, deduplicated."""
    seen, out = set(), []
    for block in blocks:
        keys = list(block)
        for values in itertools.product(*(block[k] for k in keys)):
            cfg = dict(zip(keys, values))
            key = tuple(sorted(cfg.items()))
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


def seed_groups(cfg: dict, key: str) -> list[list[int]]:
    """The seed groups of a family: the profile's `key` (a list of seeds, or of seed groups),
    else its `seeds`. Each group is a task of its own, so that confirmatory seeds added later
    (data/seed_plans/gln_norm.yaml) run beside the committed tasks of the seeds before them
    instead of recomputing those, and a batched task stays a few seeds wide."""
    seeds = cfg.get(key, cfg["seeds"])
    groups = seeds if seeds and isinstance(seeds[0], list) else [seeds]
    flat = [s for g in groups for s in g]
    if len(set(flat)) != len(flat):
        raise ValueError(f"{key}: a seed appears in two groups: {groups}")
    return [list(g) for g in groups]


def _common(cfg: dict, device: str | None) -> dict:
    out = {
        "seeds": list(cfg["seeds"]),
        "n_val": cfg["n_val"],
        "n_steps": cfg["n_steps"],
        "lr_drop_step": cfg["lr_drop_step"],
        "dtype": cfg["dtype"],
    }
    return out if device is None else {**out, "device": device}


def gd_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """Deep GLN training tasks of a profile: one per (H, C, N, MI, momentum) and group of
    `gln_seeds` (the deep GLNs' seeds with the confirmatory ones; default `seeds`), its seeds
    batched."""
    return [
        {"depth": "deep", **c, **_common(cfg, device), "seeds": seeds}
        for seeds in seed_groups(cfg, "gln_seeds")
        for c in expand_blocks(cfg["gln_blocks"])
    ]


def gd_longer_tasks(cfg: dict) -> list[dict]:
    """`gd_longer_task` for every (H, C, N) of the profile's `finite_time` block (median init,
    momentum 0), trained to each of its `checkpoints`; the first is the paper's step count."""
    block = cfg["finite_time"]
    cells = expand_blocks([{k: block[k] for k in ("H", "C", "N")}])
    common = {k: v for k, v in _common(cfg, None).items() if k != "n_steps"}
    return [
        {
            **c,
            **common,
            "seeds": seeds,
            "median_init": True,
            "momentum": 0.0,
            "checkpoints": block["checkpoints"],
        }
        for seeds in seed_groups(cfg, "finite_time_seeds")
        for c in cells
    ]


def svm_tasks(cfg: dict) -> list[dict]:
    """Convex-program tasks: every method for every (H, C, N, MI) of the GLN blocks."""
    configs = expand_blocks(
        [{k: v for k, v in b.items() if k != "momentum"} for b in cfg["gln_blocks"]]
    )
    return [
        {
            "method": m,
            **c,
            "seeds": seeds,
            "n_val": cfg["n_val"],
            "solver": cfg["solver"],
        }
        for seeds in seed_groups(cfg, "gln_seeds")
        for c in configs
        for m in cfg["svm_methods"]
    ]


def shallow_gd_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """Shallow GLN training tasks (2^k contexts): one per configuration and group of
    `shallow_seeds` (default `seeds`)."""
    return [
        {
            "depth": "shallow",
            "H": 1,
            "C": 2 ** c.pop("k"),
            **c,
            **_common(cfg, device),
            "seeds": seeds,
        }
        for seeds in seed_groups(cfg, "shallow_seeds")
        for c in expand_blocks(cfg["shallow_blocks"])
    ]


def shallow_svm_tasks(cfg: dict) -> list[dict]:
    """Shallow per-context SVM tasks, up to 2^shallow_svm_max_k contexts."""
    blocks = [{k: v for k, v in b.items() if k != "momentum"} for b in cfg["shallow_blocks"]]
    return [
        {
            "method": "SVM-shallow",
            "H": 1,
            "C": 2 ** c["k"],
            "N": c["N"],
            "median_init": c["median_init"],
            "seeds": list(cfg["seeds"]),
            "n_val": cfg["n_val"],
            "solver": cfg["solver"],
        }
        for c in expand_blocks(blocks)
        if c["k"] <= cfg["shallow_svm_max_k"]
    ]


def relu_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """ReLU network tasks (GD-ReLU with its SVM-RC, SVM-LC and SVM-HL): one per configuration
    and group of `relu_seeds` (the ReLU networks' seeds with the confirmatory ones of their
    comparisons' seed plan; default `seeds`), about 190 task-s a seed at the paper profile."""
    return [
        {**c, **_common(cfg, device), "seeds": seeds, "solver": cfg["solver"]}
        for seeds in seed_groups(cfg, "relu_seeds")
        for c in expand_blocks(cfg["relu_blocks"])
    ]


def relu_variant_tasks(cfg: dict, method: str, device: str | None = None) -> list[dict]:
    """`relu_tasks` named by one of the SVM variants `relu_task` solves beside ours
    (SVM_RC_AUTHORS, SVM_HL_NO_CONSTANT), for `frames.relu_variant_frame` over its results."""
    return [{"method": method, **t} for t in relu_tasks(cfg, device)]


def authors_data_tasks(cfg: dict, protocol: str, device: str | None = None) -> list[dict]:
    """`authors_data_task` under `protocol` for every configuration of the profile's
    `authors_data_blocks`."""
    return [
        {**c, **_common(cfg, device), "solver": cfg["solver"], "protocol": protocol}
        for c in expand_blocks(cfg["authors_data_blocks"])
    ]


def relu_replacement_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """`relu_tasks` on the profile's `relu_replacement_seeds` alone (one group): the ReLU
    networks of the replacement seed plans (data/seed_plans/gln_norm.yaml); none where the
    profile has no such seeds."""
    seeds = cfg.get("relu_replacement_seeds") or []
    return relu_tasks({**cfg, "relu_seeds": seeds}, device) if seeds else []


def relu_no_bias_tasks(cfg: dict, device: str | None = None) -> list[dict]:
    """`relu_no_bias_task` for every configuration of `relu_tasks`, at the first group of
    `relu_seeds` only (method: the SVM it solves, for `frames.relu_variant_frame`): a check of
    the authors' construction against their three seeds a cell, it decides no claim, so the
    confirmatory seeds of later groups would buy nothing."""
    first = {**cfg, "relu_seeds": seed_groups(cfg, "relu_seeds")[0]}
    return relu_variant_tasks(first, SVM_HL_NO_CONSTANT, device)


def svm_l2_authors_tasks(cfg: dict) -> list[dict]:
    """The authors' SVM-L2 program, minimum-norm minimizer (fast solver), for every (H, C, N,
    MI) of the GLN blocks: the configurations of `svm_tasks`."""
    configs = expand_blocks(
        [{k: v for k, v in b.items() if k != "momentum"} for b in cfg["gln_blocks"]]
    )
    return [
        {
            "method": AUTHORS_L2,
            **c,
            "seeds": list(cfg["seeds"]),
            "n_val": cfg["n_val"],
            "solver": cfg["solver"],
            "ridge": cfg["authors_l2_ridge"],
        }
        for c in configs
    ]


def svm_l2_authors_solver_tasks(cfg: dict) -> list[dict]:
    """The authors' SVM-L2 program solved as they solved it (OSQP on the full input dimension,
    at most 10,000 iterations: cvxpy's default) for the configurations of
    `authors_l2_solver_blocks`."""
    return [
        {
            "method": AUTHORS_L2_SOLVER,
            **c,
            "seeds": list(cfg["seeds"]),
            "n_val": cfg["n_val"],
            "solver": "OSQP",
            "max_iters": 10000,
        }
        for c in expand_blocks(cfg["authors_l2_solver_blocks"])
    ]
