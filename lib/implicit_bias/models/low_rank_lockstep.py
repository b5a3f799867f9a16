"""Gradient descent with several step sizes in lockstep (low_rank_invariants' invariance sweep):
the networks of `implicit_bias.models.low_rank` with a leading run axis on every parameter, so
that the runs of one initialisation form one batched tensor program."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .low_rank import Params, Spec, _act


def batched_forward(
    spec: Spec, params: Params, x: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """:func:`forward` for R networks of the same spec at once: every parameter has a leading
    run axis (shape (R, ...)), ``x`` (shared by the runs) does not. Returns the outputs (R, n)
    and the pre-activations (R, n, ...), under the keys of :func:`forward`.

    A conv layer is a matrix product with the unfolded input (im2col): z[r, i, o, p] =
    sum_{c, j} K[r, o, c, j] h[r, i, c, p + j].
    """
    pre: dict[str, torch.Tensor] = {}
    runs = next(iter(params.values())).shape[0]
    n = x.shape[0]
    h = x.expand(runs, *x.shape)
    for i, layer in enumerate(spec):
        act = layer.get("act", "linear")
        if layer["type"] == "dense" and i == 0:  # one product for the shared input
            w = params[f"{i}.W"]
            z = (x.reshape(n, -1) @ w.reshape(-1, w.shape[2]).T).reshape(n, runs, -1)
            z = z.transpose(0, 1)
        elif layer["type"] == "dense":
            z = h.reshape(runs, n, -1) @ params[f"{i}.W"].transpose(1, 2)
        elif layer["type"] == "conv":
            k = params[f"{i}.K"]  # (R, out, c_in, kernel)
            cols = h.unfold(-1, k.shape[-1], 1)  # (R, n, c_in, l_out, kernel)
            cols = cols.permute(0, 1, 3, 2, 4).reshape(runs, -1, k.shape[2] * k.shape[3])
            z = cols @ k.reshape(runs, k.shape[1], -1).transpose(1, 2)  # (R, n l_out, out)
            z = z.reshape(runs, n, -1, k.shape[1]).transpose(2, 3)
        else:
            zh = h @ params[f"{i}.W"].transpose(1, 2)
            pre[f"{i}.hidden"] = zh
            v = params[f"{i}.V"]
            if layer["kind"] == "identity":
                skip = h
            elif layer["kind"] == "diagonal":
                skip = h * params[f"{i}.D"][:, None, :]
            else:
                skip = h @ params[f"{i}.R"].transpose(1, 2)
            z = _act(act, zh) @ v.transpose(1, 2) + skip
        pre[f"{i}.out"] = z
        h = _act(act, z)
    return h.reshape(runs, -1), pre


def run_gd_lockstep(
    spec: Spec,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    etas: list[float],
    steps: list[int],
    records: list[list[int]],
    loss_floor: float = 1e-250,
) -> list[dict[str, Any]]:
    """Plain gradient descent (:func:`run_gd` with ``normalized=False``) from the same
    ``params`` with several step sizes, in lockstep: run r takes ``steps[r]`` steps of size
    ``etas[r]`` and records the snapshots ``records[r]``; the runs form one batched tensor
    program (:func:`batched_forward`) and a run leaves the batch when its steps are done (or
    its loss falls below ``loss_floor``, as in :func:`run_gd`).
    The runs are independent (the summed loss has per-run gradients), so each result is what
    :func:`run_gd` computes for that run, up to the rounding of the batched products. Returns
    one :func:`run_gd`-style dict per run.
    """
    n_runs = len(etas)
    if not (len(steps) == len(records) == n_runs):
        raise ValueError("etas, steps and records need one entry per run")
    record_sets = [set([0, s] + list(r)) for s, r in zip(steps, records)]
    p = {k: v.detach().expand(n_runs, *v.shape).clone() for k, v in params.items()}
    eta = torch.tensor(etas, dtype=x.dtype, device=x.device)
    active = list(range(n_runs))  # run of each batch row
    always: dict[str, torch.Tensor] = {}  # per batch row, as in run_gd
    final_always: list[dict[str, torch.Tensor]] = [{} for _ in range(n_runs)]
    results: list[dict[str, Any]] = [
        {"snapshots": [], "losses": [], "steps": []} for _ in range(n_runs)
    ]
    step = 0
    while active:
        p = {k: v.requires_grad_(True) for k, v in p.items()}
        out, pre = batched_forward(spec, p, x)
        losses = F.softplus(-y * out).mean(dim=1)
        values = losses.detach().cpu().tolist()
        for key, z in pre.items():
            act = (z.detach() > 0).all(dim=1)
            if z.dim() == 4:  # conv: a channel is active when all its positions are
                act = act.all(dim=-1)
            always[key] = act if key not in always else always[key] & act
        keep = []
        for row, r in enumerate(active):
            done = step == steps[r] or values[row] < loss_floor
            if step in record_sets[r] or done:
                results[r]["snapshots"].append(
                    {k: v[row].detach().cpu().clone() for k, v in p.items()}
                )
                results[r]["losses"].append(values[row])
                results[r]["steps"].append(step)
            if not done:
                keep.append(row)
        for row, r in enumerate(active):
            if row not in keep:
                final_always[r] = {k: v[row].cpu() for k, v in always.items()}
        if not keep:
            break
        grads = torch.autograd.grad(losses.sum(), list(p.values()))
        with torch.no_grad():
            lr = eta[active]
            p = {
                k: v - lr.reshape(-1, *([1] * (v.dim() - 1))) * g
                for (k, v), g in zip(p.items(), grads)
            }
            if len(keep) < len(active):
                idx = torch.tensor(keep, device=x.device)
                p = {k: v[idx] for k, v in p.items()}
                always = {k: v[idx] for k, v in always.items()}
                active = [active[row] for row in keep]
        step += 1
    for r in range(n_runs):
        results[r]["always_active"] = final_always[r]
    return results
