"""The chapter's experiments: the networks and data it trains, the three task functions its
sweeps map over (JSON task in, JSON result out) and the task lists of the notebook.

`lemma1_check`: Lemma 1 on one random ReLU network; `invariance_sweep`: gradient descent with
several step sizes over one flow time, and the drift of every invariant of Lemma 2, Lemma 3,
Theorem 1 and Lemma 4; `low_rank_run`: one Theorem 2 network trained on separable data until
the logistic loss reaches the float64 floor. The numerics are `implicit_bias.models.low_rank`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from implicit_bias.core.engine.tasks import task
from implicit_bias.models.low_rank import (
    Params,
    Spec,
    _as_tensor,
    alignment,
    build_graph,
    chain_gap_bound,
    enumerate_paths,
    forward,
    frob_gap,
    graph_forward,
    init_params,
    invariant_drifts,
    matrix_representation,
    path_enumeration,
    rank_one_ratio,
    run_gd,
    tree_forward,
    tree_network,
)
from implicit_bias.models.low_rank_lockstep import run_gd_lockstep


# The task functions pin one torch thread with `single_thread` rather than through their `@task`
# declaration: this decorator is part of the code whose fingerprint labels the committed
# results, so it stays as it was written.
def single_thread(fn):
    """Run ``fn`` with one torch thread (restored afterwards): these networks are tiny, and on
    a shared CPU extra threads only add contention."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper


# --------------------------------------------------------------------------------------------
# Networks and data of the experiments
# --------------------------------------------------------------------------------------------
def lemma1_architectures() -> dict[str, tuple[Spec, tuple[int, ...]]]:
    """Small random ReLU networks for the Lemma 1 check (a few hundred to a few thousand paths):
    fully connected, convolutional (two ReLU conv layers then a dense layer) and residual
    (one block of each kind of Definition 5)."""
    return {
        "fully connected": (
            [
                {"type": "dense", "out": 4, "act": "relu"},
                {"type": "dense", "out": 4, "act": "relu"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (3,),
        ),
        "convolutional": (
            [
                {"type": "conv", "out": 2, "kernel": 2, "act": "relu"},
                {"type": "conv", "out": 2, "kernel": 3, "act": "relu"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (2, 6),
        ),
        "residual": (
            [
                {"type": "dense", "out": 3, "act": "relu"},
                {"type": "res", "kind": "free", "hidden": 2, "act": "relu"},
                {"type": "res", "kind": "identity", "hidden": 2, "act": "relu"},
                {"type": "res", "kind": "diagonal", "hidden": 2, "act": "relu"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (3,),
        ),
    }


def invariance_architectures(width: int) -> dict[str, tuple[Spec, tuple[int, ...]]]:
    """Networks for the invariance experiments; together they cover Theorem 1's cases 1, 2, 3,
    4, 5 and 7, with ReLU and linear neurons, and a ResNetDiagonal block (not covered by the
    off-diagonal part of Theorem 1)."""
    w = int(width)
    return {
        "fully connected": (
            [
                {"type": "dense", "out": w, "act": "relu"},
                {"type": "dense", "out": w, "act": "relu"},
                {"type": "dense", "out": w, "act": "linear"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (6,),
        ),
        "convolutional": (
            [
                {"type": "conv", "out": 3, "kernel": 3, "act": "linear"},
                {"type": "conv", "out": 3, "kernel": 3, "act": "linear"},
                {"type": "dense", "out": 4, "act": "linear"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (2, 10),
        ),
        "residual": (
            [
                {"type": "dense", "out": w, "act": "relu"},
                {"type": "res", "kind": "free", "hidden": w // 2, "act": "relu"},
                {"type": "res", "kind": "free", "hidden": w // 2, "act": "linear"},
                {"type": "res", "kind": "diagonal", "hidden": w // 2, "act": "linear"},
                {"type": "dense", "out": 1, "act": "linear"},
            ],
            (6,),
        ),
    }


def low_rank_architecture(task: dict[str, Any]) -> tuple[Spec, tuple[int, ...]]:
    """The networks of the Theorem 2 experiments: a ReLU part (the arbitrary network of the
    theorem) followed by linear layers initialised ``init`` times smaller (a small constant D
    in Eq. (13)); ``kind`` is ``"fc"`` (linear fully connected layers), ``"resfree"`` (a linear
    ResNetFree block before the output) or ``"conv"`` (a linear conv layer, then linear dense
    layers)."""
    s, wr, wl = float(task["init"]), int(task["width_relu"]), int(task["width_lin"])
    lin = {"act": "linear", "init": s}
    if task["kind"] == "conv":
        shape = (2, int(task["length"]))
        return (
            [
                {"type": "conv", "out": 4, "kernel": 3, "act": "relu"},
                {"type": "conv", "out": 4, "kernel": 3, **lin},
                {"type": "dense", "out": wl, **lin},
                {"type": "dense", "out": 1, **lin},
            ],
            shape,
        )
    shape = (784,) if task["data"] == "mnist" else (int(task["dim"]),)
    body: Spec = [{"type": "dense", "out": wr, "act": "relu"}]
    body += [{"type": "dense", "out": wl, **lin} for _ in range(int(task["n_linear"]))]
    if task["kind"] == "resfree":
        body.append({"type": "res", "kind": "free", "hidden": wl // 2, **lin})
    return body + [{"type": "dense", "out": 1, **lin}], shape


def positive_data(n: int, shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x = 1 + 0.3 N(0, I) (so that some ReLU neurons stay active on every example, the
    situation of Definition 6), labels from a random linear teacher on x - 1."""
    gen = torch.Generator().manual_seed(int(seed))
    x = 1.0 + 0.3 * torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    teacher = torch.randn(int(np.prod(shape)), generator=gen, dtype=torch.float64)
    y = torch.sign((x - 1.0).reshape(n, -1) @ teacher)
    return x, torch.where(y == 0, torch.ones_like(y), y)


def separable_data(
    kind: str, n: int, seed: int, shape: tuple[int, ...] = (10,)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Linearly separable binary data: ``"synthetic"`` (Gaussian inputs of ``shape``, labels
    of a random linear teacher) or ``"mnist"`` (a seeded subset of MNIST train, digits 0-4 vs
    5-9; n = 2000 MNIST digits are linearly separable in 784 dimensions)."""
    if kind == "mnist":
        from implicit_bias.core.engine.data import binary_labels, load_mnist, seeded_subset

        xs, ys = load_mnist("train")
        idx = seeded_subset(len(ys), n, seed)
        return (
            torch.tensor(xs[idx], dtype=torch.float64),
            torch.tensor(binary_labels(ys[idx]), dtype=torch.float64),
        )
    gen = torch.Generator().manual_seed(int(seed))
    x = torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    teacher = torch.randn(int(np.prod(shape)), generator=gen, dtype=torch.float64)
    y = torch.sign(x.reshape(n, -1) @ teacher)
    return x, torch.where(y == 0, torch.ones_like(y), y)


# --------------------------------------------------------------------------------------------
# Task functions (sweeps cache their results under the fingerprint of this code)
# --------------------------------------------------------------------------------------------
@task(threads=None)  # single_thread pins one torch thread
@single_thread
def lemma1_check(task: dict[str, Any]) -> dict[str, Any]:
    """Lemma 1 on one random network: f(x) = T(h(x)) with T's weights in {-1, +1}.

    Also checks that T depends only on the weight signs: after multiplying every weight by a
    random positive factor, the tree T built from the *original* weights, fed the new network's
    path enumeration h', must still compute the new network (f' = T(h')); flipping the sign of
    one weight must change T.
    """
    spec, shape = lemma1_architectures()[task["arch"]]
    params = init_params(spec, shape, seed=task["seed"])
    gen = torch.Generator().manual_seed(task["seed"] + 1000)
    x = torch.randn(task["n"], *shape, generator=gen, dtype=torch.float64)
    f = forward(spec, params, x)[0].numpy()
    g = build_graph(spec, params, shape)
    paths = enumerate_paths(g)
    t = tree_network(g, paths)
    h = path_enumeration(g, paths, x.numpy())
    tree_out = tree_forward(t, h)
    # Relative to the largest output; a network whose ReLUs are all dead computes f = 0, and
    # then the error must be exactly 0 too (tiny avoids 0/0).
    tiny = np.finfo(np.float64).tiny
    scale = max(float(np.max(np.abs(f))), tiny)
    # Same signs, new magnitudes: the original T must compute the new network from its h.
    rescaled = {
        k: v * (0.5 + torch.rand(v.shape, generator=gen, dtype=v.dtype)) for k, v in params.items()
    }
    g2 = build_graph(spec, rescaled, shape)
    f2 = forward(spec, rescaled, x)[0].numpy()
    err2 = np.max(np.abs(f2 - tree_forward(t, path_enumeration(g2, paths, x.numpy()))))
    # One flipped sign: T must change.
    flipped = {k: v.clone() for k, v in params.items()}
    first = next(iter(flipped))
    flipped[first].view(-1)[0] *= -1
    t3 = tree_network(build_graph(spec, flipped, shape), paths)
    return {
        "arch": task["arch"],
        "n_paths": len(paths),
        "n_tree_nodes": len(t.acts),
        "tree_weights": sorted(set(t.weight) | set(t.leaf_sign)),
        "max_abs_err_graph": float(np.max(np.abs(f - graph_forward(g, x.numpy())))),
        "max_rel_err_tree": float(np.max(np.abs(f - tree_out)) / scale),
        "max_rel_err_same_tree_rescaled": float(err2 / max(float(np.max(np.abs(f2))), tiny)),
        "network_is_zero": bool(np.max(np.abs(f)) == 0.0),
        "tree_changed_by_sign_flip": t.signature() != t3.signature(),
        "f": f.tolist(),
        "tree": tree_out.tolist(),
    }


@task(threads=None, uses_device=True)  # single_thread pins one torch thread
@single_thread
def invariance_sweep(task: dict[str, Any]) -> dict[str, Any]:
    """Gradient descent from one initialisation with several step sizes over the same time
    horizon T (so eta * steps = T): the drift of every invariant of Lemma 2, Lemma 3 and
    Theorem 1. Gradient flow keeps them exactly, so GD's drift should be O(eta).

    The stably active neurons (Definition 6) are intersected over all step sizes, so every run
    is scored on the same submatrices.
    """
    spec, shape = invariance_architectures(task["width"])[task["arch"]]
    device = task.get("device", "cpu")
    x, y = positive_data(task["n"], shape, task["seed"])
    x, y = x.to(device), y.to(device)
    params = init_params(spec, shape, seed=task["seed"] + 1, device=device)
    # The step sizes run in lockstep, as one batched tensor program.
    step_counts = [int(s) for s in task["steps"]]
    runs = dict(
        zip(
            step_counts,
            run_gd_lockstep(
                spec,
                params,
                x,
                y,
                etas=[task["T"] / steps for steps in step_counts],
                steps=step_counts,
                records=[
                    list(range(0, steps + 1, max(1, steps // task["n_records"])))
                    for steps in step_counts
                ],
            ),
        )
    )
    masks = {}
    for run in runs.values():
        for key, m in run["always_active"].items():
            masks[key] = m if key not in masks else masks[key] & m
    rows = []
    for steps, run in runs.items():
        for row in invariant_drifts(spec, shape, run, masks):
            rows.append(
                dict(
                    row,
                    arch=task["arch"],
                    eta=task["T"] / steps,
                    steps=steps,
                    final_loss=run["losses"][-1],
                )
            )
    return {"rows": rows}


@task(threads=None, uses_device=True)  # single_thread pins one torch thread
@single_thread
def low_rank_run(task: dict[str, Any]) -> dict[str, Any]:
    """Train a Theorem 2 network with the logistic loss until the loss reaches ``loss_floor``
    (status ``"ok"``; stopped by the step limit ``steps`` first: ``"unconverged"``), and
    record, per layer, ||W||_F^2, ||W||_2^2 / ||W||_F^2, the gap ||W||_F^2 - ||W||_2^2 and the
    alignment of adjacent layers (Theorem 2, Eqs. (13)-(15)).

    Rows name the layer's representation: ``"{i}"`` for dense layer i, ``"{i}.VR"`` / ``"{i}.WR"``
    for the two representations of ResNetFree block i ([V R], [W; R]; Lemma 11), ``"{i}.K"``
    for a conv kernel flattened to c_out x (c_in k). ``n_resfree_after`` is N_j of Theorem 2.
    For fully connected chains, ``gap_bound`` is Delta_j of :func:`chain_gap_bound` at
    initialisation. ``sign_mismatch_final`` is the share of the layer's weights whose sign
    differs from their sign at the end of training (Assumption 1, the stable sign regime, asks
    for it to reach 0). For a conv layer followed by a dense layer F, ``predicted_ratio`` is the
    limit implied by Theorem 1, case 5 when F is rank one: the top-singular-value share of F's
    top right singular vector reshaped to channels x positions.
    """
    spec, shape = low_rank_architecture(task)
    device = task.get("device", "cpu")
    x, y = separable_data(task["data"], task["n"], task["seed"], shape)
    params = init_params(spec, shape, seed=task["seed"] + 1, device=device)
    steps = int(task["steps"])
    record = sorted(set(np.unique(np.geomspace(1, steps, task["n_records"]).astype(int))))
    run = run_gd(
        spec,
        params,
        x.to(device),
        y.to(device),
        eta=task["eta"],
        steps=steps,
        record=[int(r) for r in record],
        normalized=True,
        loss_floor=task["loss_floor"],
        # fewer examples than inputs (MNIST): the first layer's GD in its Gram form
        gram_first_layer=spec[0]["type"] == "dense" and x.shape[0] < int(np.prod(shape)),
    )

    def reps(p: Params) -> dict[str, torch.Tensor]:
        out = {}
        for i, layer in enumerate(spec):
            if layer["type"] == "dense":
                out[f"{i}"] = p[f"{i}.W"]
            elif layer["type"] == "conv":
                out[f"{i}.K"] = matrix_representation(spec, p, i)
            else:
                out[f"{i}.WR"] = matrix_representation(spec, p, i, "W")
                out[f"{i}.VR"] = matrix_representation(spec, p, i, "V")
        return out

    names = list(reps(run["snapshots"][0]))
    res_idx = [i for i, layer in enumerate(spec) if layer["type"] == "res"]
    layer_of = {name: int(name.split(".")[0]) for name in names}
    acts = {name: spec[layer_of[name]].get("act", "linear") for name in names}
    # Delta_j for the chain of linear dense layers that ends at the output (fc networks only).
    bounds: dict[str, float] = {}
    if task["kind"] == "fc":
        chain = [n for n in names if acts[n] == "linear"]
        mats0 = [reps(run["snapshots"][0])[n] for n in chain]
        bounds = dict(zip(chain, chain_gap_bound(mats0)))
    rows = []
    final_signs = {name: torch.sign(m) for name, m in reps(run["snapshots"][-1]).items()}
    for step, loss, snap in zip(run["steps"], run["losses"], run["snapshots"]):
        mats = reps(snap)
        for k, name in enumerate(names):
            m = mats[name].double().cpu()
            nxt = names[k + 1] if k + 1 < len(names) else None
            # Eq. (15) pairs a layer's output side with the next layer's input side: defined
            # for dense layers and [V R]; not for [W; R] (rows mix hidden and output neurons)
            # or conv kernels (rows are channels, the next layer's columns are positions).
            aligned = (
                nxt is not None
                and not name.endswith((".K", ".WR"))
                and not nxt.endswith(".K")
                and mats[nxt].shape[1] == m.shape[0]
            )
            row = {
                "step": step,
                "loss": loss,
                "layer": name,
                "act": acts[name],
                "frob_sq": float((m**2).sum()),
                "ratio": rank_one_ratio(m),
                "gap": frob_gap(m),
                "gap_bound": bounds.get(name, float("nan")),
                "n_resfree_after": sum(1 for i in res_idx if i > layer_of[name]),
                "alignment": (alignment(m, mats[nxt].double().cpu()) if aligned else float("nan")),
                "predicted_ratio": float("nan"),
                # Assumption 1 (stable signs): share of weights whose sign differs from the end
                "sign_mismatch_final": float((torch.sign(m) != final_signs[name]).double().mean()),
            }
            if name.endswith(".K") and nxt is not None and not nxt.endswith(".K"):
                _, _, vt = torch.linalg.svd(_as_tensor(mats[nxt]), full_matrices=False)
                b = vt[0].reshape(m.shape[0], -1)  # channels x positions
                row["predicted_ratio"] = rank_one_ratio(b)
            rows.append(row)
    final_loss = run["losses"][-1]
    return {
        "rows": rows,
        "final_loss": final_loss,
        "final_step": run["steps"][-1],
        # the end point is the loss floor; a run stopped by the step limit is unconverged
        "status": "ok" if final_loss < task["loss_floor"] else "unconverged",
    }


# --------------------------------------------------------------------------------------------
# Task lists of the notebook
# --------------------------------------------------------------------------------------------
def lemma1_tasks(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """One Lemma 1 check per architecture and seed of ``cfg["lemma1_seeds"]``."""
    return [
        {"arch": a, "seed": s, "n": cfg["lemma1_inputs"]}
        for a in lemma1_architectures()
        for s in cfg["lemma1_seeds"]
    ]


def invariance_tasks(cfg: dict[str, Any], device: str = "cpu") -> list[dict[str, Any]]:
    """One step-size sweep per invariance architecture and seed of ``cfg["inv_seeds"]``."""
    return [
        {
            "arch": a,
            "seed": s,
            "width": cfg["inv_width"],
            "n": cfg["inv_n"],
            "T": cfg["inv_time"],
            "steps": cfg["inv_steps"],
            "n_records": cfg["inv_records"],
            "device": str(device),
        }
        for a in invariance_architectures(cfg["inv_width"])
        for s in cfg["inv_seeds"]
    ]


def theorem2_tasks(cfg: dict[str, Any], device: str = "cpu") -> list[dict[str, Any]]:
    """The Theorem 2 runs of the chapter, per seed in ``cfg["lr_seeds"]``: ``synthetic`` and
    ``mnist`` (ReLU layer + linear dense layers; ``mnist_*`` keys), ``resfree`` (a linear
    ResNetFree block before the output) and ``conv`` (ReLU conv, linear conv, linear dense
    layers; ``conv_n`` points, ``conv_steps`` step limit); then
    ``synthetic_deep`` (``lr_deep_n_linear`` hidden linear layers at ``lr_deep_init``) and the
    synthetic run again at each step size of ``lr_small_etas`` (run ``"synthetic eta=<eta>"``,
    step limit scaled by ``lr_eta / eta``). ``cfg`` is the chapter's profile."""
    tasks = []
    for seed in cfg["lr_seeds"]:
        base = {
            "data": "synthetic",
            "kind": "fc",
            "n": cfg["lr_synthetic_n"],
            "seed": seed,
            "dim": cfg["lr_synthetic_dim"],
            "length": cfg["lr_conv_length"],
            "width_relu": cfg["lr_width_relu"],
            "width_lin": cfg["lr_width_lin"],
            "n_linear": cfg["lr_n_linear"],
            "init": cfg["lr_init"],
            "eta": cfg["lr_eta"],
            "steps": cfg["lr_steps"],
            "n_records": cfg["lr_records"],
            "loss_floor": cfg["lr_loss_floor"],
            "device": str(device),
        }
        mnist = {k: cfg[f"mnist_{k}"] for k in ("n", "width_relu", "width_lin", "init", "eta")}
        tasks += [
            dict(base, run="synthetic"),
            dict(base, run="mnist", data="mnist", steps=cfg["mnist_steps"], **mnist),
            dict(base, run="resfree", kind="resfree", n_linear=1),
            dict(base, run="conv", kind="conv", n=cfg["conv_n"], steps=cfg["conv_steps"]),
        ]
    for base in [t for t in tasks if t["run"] == "synthetic"]:
        tasks.append(
            dict(
                base,
                run="synthetic_deep",
                n_linear=cfg["lr_deep_n_linear"],
                init=cfg["lr_deep_init"],
            )
        )
        for eta in cfg["lr_small_etas"]:
            steps = int(round(cfg["lr_steps"] * cfg["lr_eta"] / eta))
            tasks.append(dict(base, run=f"synthetic eta={eta:g}", eta=eta, steps=steps))
    return tasks
