"""Le & Jegelka (2022), "Training invariances and the low-rank phenomenon: beyond linear networks".

Bias-free feedforward networks built from fully connected layers, 1-D convolutions and the three
residual blocks of Definition 5 (ResNetIdentity, ResNetDiagonal, ResNetFree), with ReLU or linear
activations; the path enumeration function (Definition 4) and the sign-determined tree network of
Lemma 1; full-batch gradient descent in float64; and the quantities of Lemma 2, Lemma 3,
Theorem 1, Lemma 4 (matrix invariants A A^T - B^T B and their drift) and Theorem 2
(||W||_2^2 / ||W||_F^2, alignment of adjacent layers' singular vectors).

A network is a *spec*: a JSON list of layer dicts, e.g.
``[{"type": "dense", "out": 8, "act": "relu"}, {"type": "res", "kind": "free", "hidden": 4,
"act": "linear"}, {"type": "conv", "out": 2, "kernel": 3, "act": "linear"},
{"type": "dense", "out": 1, "act": "linear"}]``. Inputs have shape ``(d,)`` or ``(C, L)``
(channels, length; a dense layer after a conv layer flattens channel-major, as torch does).
A residual block maps ``x -> act(V act(W x) + S x)`` with ``S`` the identity, a learnable
diagonal ``diag(D)`` or a learnable matrix ``R`` (Definition 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from matplotlib.ticker import NullLocator

ACTIVATIONS = ("relu", "linear")
LAYER_TYPES = ("dense", "conv", "res")
RES_KINDS = ("identity", "diagonal", "free")

Spec = list[dict[str, Any]]
Params = dict[str, torch.Tensor]


# --------------------------------------------------------------------------------------------
# Networks
# --------------------------------------------------------------------------------------------
def _act(name: str, z: torch.Tensor) -> torch.Tensor:
    if name == "relu":
        return torch.relu(z)
    if name == "linear":
        return z
    raise ValueError(f"unknown activation {name!r}; valid: {ACTIVATIONS}")


def validate_spec(spec: Spec, in_shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Check a spec and return the shape after each layer (``shapes[0]`` is the input shape)."""
    shapes = [tuple(in_shape)]
    for i, layer in enumerate(spec):
        kind = layer.get("type")
        if kind not in LAYER_TYPES:
            raise ValueError(f"layer {i}: unknown type {kind!r}; valid: {LAYER_TYPES}")
        if layer.get("act", "linear") not in ACTIVATIONS:
            raise ValueError(f"layer {i}: unknown act {layer.get('act')!r}; valid: {ACTIVATIONS}")
        cur = shapes[-1]
        if kind == "dense":
            shapes.append((int(layer["out"]),))
        elif kind == "conv":
            if len(cur) != 2:
                raise ValueError(f"layer {i}: conv needs a (C, L) input, got {cur}")
            length = cur[1] - int(layer["kernel"]) + 1
            if length < 1:
                raise ValueError(f"layer {i}: kernel longer than the signal")
            shapes.append((int(layer["out"]), length))
        else:
            if len(cur) != 1:
                raise ValueError(f"layer {i}: residual blocks need a vector input, got {cur}")
            if layer.get("kind") not in RES_KINDS:
                raise ValueError(f"layer {i}: unknown residual kind; valid: {RES_KINDS}")
            shapes.append(cur)
    if shapes[-1] != (1,):
        raise ValueError("the network must end with a scalar output (dense layer with out=1)")
    return shapes


def init_params(
    spec: Spec,
    in_shape: tuple[int, ...],
    *,
    scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> Params:
    """Gaussian weights with standard deviation ``scale * init / sqrt(fan_in)`` (bias-free),
    ``init`` an optional per-layer factor in the spec (default 1).

    Parameter names: ``"{i}.W"`` (dense, out x in), ``"{i}.K"`` (conv, out x in x kernel),
    and for residual block ``i``: ``"{i}.W"`` (hidden x a), ``"{i}.V"`` (a x hidden),
    ``"{i}.D"`` (diagonal skip, a) or ``"{i}.R"`` (free skip, a x a).
    """
    shapes = validate_spec(spec, in_shape)
    gen = torch.Generator().manual_seed(int(seed))

    params: Params = {}
    for i, layer in enumerate(spec):
        cur = shapes[i]
        factor = float(layer.get("init", 1.0))

        def gauss(*shape: int, fan_in: int, f: float = factor) -> torch.Tensor:
            w = torch.randn(*shape, generator=gen, dtype=torch.float64)
            return (w * (scale * f / math.sqrt(fan_in))).to(dtype=dtype, device=device)

        if layer["type"] == "dense":
            fan = int(np.prod(cur))
            params[f"{i}.W"] = gauss(int(layer["out"]), fan, fan_in=fan)
        elif layer["type"] == "conv":
            k = int(layer["kernel"])
            params[f"{i}.K"] = gauss(int(layer["out"]), cur[0], k, fan_in=cur[0] * k)
        else:
            a, b = cur[0], int(layer["hidden"])
            params[f"{i}.W"] = gauss(b, a, fan_in=a)
            params[f"{i}.V"] = gauss(a, b, fan_in=b)
            if layer["kind"] == "diagonal":
                params[f"{i}.D"] = gauss(a, fan_in=1)
            elif layer["kind"] == "free":
                params[f"{i}.R"] = gauss(a, a, fan_in=a)
    return params


def skip_matrix(layer: dict[str, Any], params: Params, i: int, a: int) -> torch.Tensor:
    """The skip connection S of residual block ``i`` as an a x a matrix (Definition 5)."""
    ref = params[f"{i}.V"]
    if layer["kind"] == "identity":
        return torch.eye(a, dtype=ref.dtype, device=ref.device)
    if layer["kind"] == "diagonal":
        return torch.diag(params[f"{i}.D"])
    return params[f"{i}.R"]


def forward(
    spec: Spec, params: Params, x: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Network output (shape (n,)) and the pre-activations of every neuron group.

    Pre-activation keys: ``"{i}.out"`` (the output neurons of layer i) and ``"{i}.hidden"``
    (the hidden neurons of residual block i).
    """
    pre: dict[str, torch.Tensor] = {}
    h = x
    for i, layer in enumerate(spec):
        act = layer.get("act", "linear")
        if layer["type"] == "dense":
            z = h.reshape(h.shape[0], -1) @ params[f"{i}.W"].T
        elif layer["type"] == "conv":
            z = F.conv1d(h, params[f"{i}.K"])
        else:
            zh = h @ params[f"{i}.W"].T
            pre[f"{i}.hidden"] = zh
            s = skip_matrix(layer, params, i, h.shape[1])
            z = _act(act, zh) @ params[f"{i}.V"].T + h @ s.T
        pre[f"{i}.out"] = z
        h = _act(act, z)
    return h.reshape(-1), pre


# --------------------------------------------------------------------------------------------
# Lemma 1: computation graph, path enumeration function, sign-determined tree network
# --------------------------------------------------------------------------------------------
@dataclass
class Graph:
    """Computation graph of a network: neurons and weighted edges (Section 2)."""

    n_inputs: int
    acts: list[str]  # activation of each node; nodes 0 .. n_inputs-1 are the inputs
    edges: list[tuple[int, int, float]] = field(default_factory=list)  # (src, dst, weight)
    output: int = -1

    def in_edges(self) -> list[list[int]]:
        """For each node, the indices of its in-edges."""
        lists: list[list[int]] = [[] for _ in self.acts]
        for k, (_, dst, _) in enumerate(self.edges):
            lists[dst].append(k)
        return lists


def build_graph(spec: Spec, params: Params, in_shape: tuple[int, ...]) -> Graph:
    """The computation graph of ``spec`` (one node per neuron, one edge per weight use)."""
    shapes = validate_spec(spec, in_shape)
    n_in = int(np.prod(in_shape))
    g = Graph(n_inputs=n_in, acts=["linear"] * n_in)
    cur = list(range(n_in))  # node ids of the current layer, flattened channel-major

    def new_nodes(count: int, act: str) -> list[int]:
        start = len(g.acts)
        g.acts.extend([act] * count)
        return list(range(start, start + count))

    for i, layer in enumerate(spec):
        act = layer.get("act", "linear")
        if layer["type"] == "dense":
            w = params[f"{i}.W"].detach().cpu().numpy()
            out = new_nodes(w.shape[0], act)
            g.edges += [
                (cur[c], out[r], float(w[r, c]))
                for r in range(w.shape[0])
                for c in range(w.shape[1])
            ]
        elif layer["type"] == "conv":
            k = params[f"{i}.K"].detach().cpu().numpy()
            c_in, length = shapes[i]
            c_out, l_out = shapes[i + 1]
            out = new_nodes(c_out * l_out, act)
            for o in range(c_out):
                for p in range(l_out):
                    for c in range(c_in):
                        for j in range(k.shape[2]):  # shared weight K[o, c, j]
                            g.edges.append(
                                (cur[c * length + p + j], out[o * l_out + p], float(k[o, c, j]))
                            )
        else:
            w = params[f"{i}.W"].detach().cpu().numpy()
            v = params[f"{i}.V"].detach().cpu().numpy()
            s = skip_matrix(layer, params, i, len(cur)).detach().cpu().numpy()
            hid = new_nodes(w.shape[0], act)
            out = new_nodes(len(cur), act)
            g.edges += [
                (cur[c], hid[r], float(w[r, c]))
                for r in range(w.shape[0])
                for c in range(w.shape[1])
            ]
            g.edges += [
                (hid[c], out[r], float(v[r, c]))
                for r in range(v.shape[0])
                for c in range(v.shape[1])
            ]
            g.edges += [
                (cur[c], out[r], float(s[r, c]))
                for r in range(len(cur))
                for c in range(len(cur))
                if layer["kind"] == "free" or r == c
            ]
        cur = out
    g.output = cur[0]
    return g


def graph_forward(g: Graph, x: np.ndarray) -> np.ndarray:
    """Evaluate the computation graph node by node (independent of :func:`forward`).

    ``x``: (n, n_inputs). Nodes are created in topological order by :func:`build_graph`.
    """
    x = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
    val = np.zeros((x.shape[0], len(g.acts)))
    val[:, : g.n_inputs] = x
    ins = g.in_edges()
    for node in range(g.n_inputs, len(g.acts)):
        z = sum(g.edges[k][2] * val[:, g.edges[k][0]] for k in ins[node])
        val[:, node] = np.maximum(z, 0.0) if g.acts[node] == "relu" else z
    return val[:, g.output]


def enumerate_paths(g: Graph) -> list[tuple[int, ...]]:
    """All maximal paths (input node -> output node) as tuples of edge indices, input first."""
    ins = g.in_edges()
    paths: list[tuple[int, ...]] = []

    def walk(node: int, suffix: tuple[int, ...]) -> None:
        if node < g.n_inputs:
            paths.append(suffix)
            return
        for k in ins[node]:
            walk(g.edges[k][0], (k,) + suffix)

    walk(g.output, ())
    return paths


def path_enumeration(g: Graph, paths: list[tuple[int, ...]], x: np.ndarray) -> np.ndarray:
    """Path enumeration function h(x)_p = x_{in(p)} prod_{e in p} w_e (Definition 4); (n, P)."""
    x = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
    w = np.array([e[2] for e in g.edges])
    start = np.array([g.edges[p[0]][0] for p in paths])
    prod = np.array([np.prod(w[list(p)]) for p in paths])
    return x[:, start] * prod


@dataclass
class TreeNetwork:
    """The tree network T of Lemma 1: every weight is +1, -1 (or 0 for a zero weight).

    Node 0 is the output. ``parent[k]`` and ``weight[k]`` give the edge from node k to its
    parent; ``leaf_path[k]`` is the index of the path whose coordinate of h feeds leaf k (-1 for
    inner nodes); a leaf first multiplies h_p by ``leaf_sign[k]`` (the subdivided input edge of
    the proof of Lemma 1, which removes the absolute value of Lemma 5).
    """

    acts: list[str]
    parent: list[int]
    weight: list[float]
    leaf_path: list[int]
    leaf_sign: list[float]

    def signature(self) -> tuple:
        """Everything that defines T, for equality tests."""
        return (
            tuple(self.acts),
            tuple(self.parent),
            tuple(self.weight),
            tuple(self.leaf_path),
            tuple(self.leaf_sign),
        )


def tree_network(g: Graph, paths: list[tuple[int, ...]]) -> TreeNetwork:
    """Build T of Lemma 1 (unrolling, Lemma 6, then weight pull-back, Lemma 7).

    Tree nodes are the suffixes of paths (a vertex v and its path to the output); the edge from
    suffix (u -> v, q) to (v, q) carries sign(w_uv). Only the signs of the weights are read.
    """
    index = {p: k for k, p in enumerate(paths)}
    ins = g.in_edges()
    sign = [float(np.sign(e[2])) for e in g.edges]
    t = TreeNetwork(acts=[], parent=[], weight=[], leaf_path=[], leaf_sign=[])

    def add(node: int, suffix: tuple[int, ...], parent: int, w: float) -> None:
        me = len(t.acts)
        leaf = node < g.n_inputs
        t.acts.append("linear" if leaf else g.acts[node])
        t.parent.append(parent)
        t.weight.append(w)
        t.leaf_path.append(index[suffix] if leaf else -1)
        t.leaf_sign.append(float(np.prod([sign[k] for k in suffix])) if leaf else 1.0)
        if not leaf:
            for k in ins[node]:
                add(g.edges[k][0], (k,) + suffix, me, sign[k])

    add(g.output, (), -1, 1.0)
    return t


def tree_forward(t: TreeNetwork, h: np.ndarray) -> np.ndarray:
    """Evaluate T on path-enumeration inputs ``h`` (n, P); children have larger indices."""
    n_nodes = len(t.acts)
    acc = np.zeros((h.shape[0], n_nodes))
    for k in range(n_nodes - 1, -1, -1):
        if t.leaf_path[k] >= 0:
            val = t.leaf_sign[k] * h[:, t.leaf_path[k]]
        else:
            val = np.maximum(acc[:, k], 0.0) if t.acts[k] == "relu" else acc[:, k]
        if k == 0:
            return val
        acc[:, t.parent[k]] += t.weight[k] * val
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
def logistic_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss log(1 + exp(-y f(x)))."""
    return F.softplus(-y * out).mean()


def run_gd(
    spec: Spec,
    params: Params,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eta: float,
    steps: int,
    record: list[int] | None = None,
    normalized: bool = False,
    loss_floor: float = 1e-250,
) -> dict[str, Any]:
    """Full-batch gradient descent on the logistic loss (the Euler discretisation of the
    gradient flow of Section 2).

    ``normalized=True`` takes the step ``m * eta / L(theta)`` and backtracks (halves ``m``, then
    lets it grow back to 1) whenever a step would increase the loss. Up to a time change this
    follows the same gradient-flow path (invariants of gradient flow do not depend on the time
    parametrisation), and it lets the weight norms diverge within a CPU budget (the loss-based
    schedule of Lyu & Li, 2020). Training stops early once the loss falls below ``loss_floor``
    (float64 underflow of the logistic loss near 1e-308).

    Returns ``snapshots`` (CPU copies of the parameters at the ``record`` steps, step 0
    included, and at the last step), ``losses`` and ``steps`` at those snapshots, and
    ``always_active``: for every pre-activation key, a boolean mask of the neurons with positive
    pre-activation on every example at every step.
    """
    record_set = set([0, steps] + list(record or []))
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    always: dict[str, torch.Tensor] = {}
    snapshots, losses, rec_steps = [], [], []
    mult = 1.0
    step = 0
    while True:
        out, pre = forward(spec, p, x)
        loss = logistic_loss(out, y)
        loss_value = float(loss.detach())
        for key, z in pre.items():
            act = (z.detach() > 0).all(dim=0)
            if z.dim() == 3:  # conv: a channel is active when all its positions are
                act = act.all(dim=-1)
            always[key] = act if key not in always else always[key] & act
        done = step == steps or loss_value < loss_floor
        if step in record_set or done:
            snapshots.append({k: v.detach().cpu().clone() for k, v in p.items()})
            losses.append(loss_value)
            rec_steps.append(step)
        if done:
            break
        grads = torch.autograd.grad(loss, list(p.values()))
        with torch.no_grad():
            while True:
                lr = mult * eta / max(loss_value, 1e-300) if normalized else eta
                cand = {k: v - lr * g for (k, v), g in zip(p.items(), grads)}
                if (
                    not normalized
                    or float(logistic_loss(forward(spec, cand, x)[0], y)) <= loss_value
                    or mult < 1e-12
                ):
                    break
                mult *= 0.5  # backtrack: the step overshot
            mult = min(1.0, 1.25 * mult)
        p = {k: v.requires_grad_(True) for k, v in cand.items()}
        step += 1
    return {
        "snapshots": snapshots,
        "losses": losses,
        "steps": rec_steps,
        "always_active": {k: v.cpu() for k, v in always.items()},
    }


# --------------------------------------------------------------------------------------------
# Lemma 2, Lemma 3, Theorem 1, Lemma 4: invariants
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interface:
    """A set of neurons between two weight layers, with the Theorem 1 case it instantiates.

    ``matrix_ok``: Theorem 1 covers the off-diagonal entries (all neurons share in- and
    out-vertices and all incident edges are learnable); ``vertex_ok``: Lemma 2, Eq. (4) covers
    the diagonal (all incident edges learnable).
    """

    name: str
    key: str  # pre-activation key of these neurons (for the stable-activity mask)
    case: str
    layer_in: int
    part_in: str  # which matrix representation feeds the neurons
    layer_out: int
    part_out: str
    vertex_ok: bool
    matrix_ok: bool


def interfaces(spec: Spec, in_shape: tuple[int, ...]) -> list[Interface]:
    """All neuron interfaces of the network (Theorem 1's cases 1-5 and 7; conv -> residual,
    case 6, is not built by this library)."""
    validate_spec(spec, in_shape)
    result = []
    for i, layer in enumerate(spec):
        if layer["type"] == "res":
            result.append(
                Interface(
                    f"{i}.hidden", f"{i}.hidden", "3 (within block)", i, "W", i, "V", True, True
                )
            )
        if i + 1 == len(spec):
            break
        nxt = spec[i + 1]
        t_in, t_out = layer["type"], nxt["type"]
        if t_in == "conv" and t_out == "res":
            continue
        kind_in = layer.get("kind") if t_in == "res" else None
        kind_out = nxt.get("kind") if t_out == "res" else None
        vertex_ok = kind_in != "identity" and kind_out != "identity"
        matrix_ok = kind_in in (None, "free") and kind_out in (None, "free")
        case = {
            ("dense", "dense"): "1 (fully connected)",
            ("conv", "conv"): "2 (conv-conv)",
            ("conv", "dense"): "5 (conv-fully connected)",
            ("res", "res"): "4 (between blocks)",
        }.get((t_in, t_out), "7 (block-dense)")
        result.append(
            Interface(f"{i}.out", f"{i}.out", case, i, "out", i + 1, "in", vertex_ok, matrix_ok)
        )
    return result


def in_matrix(spec: Spec, params: Params, i: int, part: str) -> torch.Tensor:
    """Matrix of the in-edges of a neuron group (rows = the neurons).

    ``part="out"``: the output neurons of layer i (dense W; conv K flattened to
    c_out x (c_in k); residual block [V S]); ``part="W"``: hidden neurons of block i.
    """
    layer = spec[i]
    if part == "W":
        return params[f"{i}.W"]
    if layer["type"] == "dense":
        return params[f"{i}.W"]
    if layer["type"] == "conv":
        k = params[f"{i}.K"]
        return k.reshape(k.shape[0], -1)
    v = params[f"{i}.V"]
    return torch.cat([v, skip_matrix(layer, params, i, v.shape[0])], dim=1)


def out_matrix(spec: Spec, params: Params, i: int, part: str, n_in: int) -> torch.Tensor:
    """Matrix of the out-edges of a neuron group feeding layer i (columns = the ``n_in`` neurons).

    Dense layer: W, or, after a conv layer, W rearranged to (out L) x C (Theorem 1, case 5);
    conv: K rearranged to (c_out k) x c_in (case 2); residual block: [W; S]; ``part="V"``: V.
    """
    layer = spec[i]
    if part == "V":
        return params[f"{i}.V"]
    if layer["type"] == "dense":
        w = params[f"{i}.W"]
        if w.shape[1] != n_in:  # flattened (C, L) input: group the L positions of each channel
            length = w.shape[1] // n_in
            return w.reshape(w.shape[0], n_in, length).permute(0, 2, 1).reshape(-1, n_in)
        return w
    if layer["type"] == "conv":
        k = params[f"{i}.K"]
        return k.permute(0, 2, 1).reshape(-1, k.shape[1])
    w = params[f"{i}.W"]
    return torch.cat([w, skip_matrix(layer, params, i, w.shape[1])], dim=0)


def invariant_matrix(spec: Spec, params: Params, iface: Interface) -> torch.Tensor:
    """Q = A A^T - B^T B for the neurons of ``iface`` (Theorem 1, Eq. (6); diagonal = Lemma 2,
    Eq. (4); off-diagonal = Lemma 2, Eq. (5))."""
    a = in_matrix(spec, params, iface.layer_in, iface.part_in)
    b = out_matrix(spec, params, iface.layer_out, iface.part_out, a.shape[0])
    return a @ a.T - b.T @ b


def layer_sq_norms(spec: Spec, params: Params) -> dict[str, float]:
    """Squared norm of every layer in the sense of Definition 7 (Lemma 3).

    Dense and conv layers are layers; a ResNetDiagonal / ResNetFree block holds two layers,
    {W, S} and {V, S}. ResNetIdentity blocks are skipped: their skip edges are not learnable.
    """
    out: dict[str, float] = {}
    for i, layer in enumerate(spec):
        if layer["type"] in ("dense", "conv"):
            key = f"{i}.W" if layer["type"] == "dense" else f"{i}.K"
            out[f"{i}"] = float((params[key] ** 2).sum())
        elif layer["kind"] != "identity":
            s = params[f"{i}.D"] if layer["kind"] == "diagonal" else params[f"{i}.R"]
            ss = float((s**2).sum())
            out[f"{i}.WS"] = float((params[f"{i}.W"] ** 2).sum()) + ss
            out[f"{i}.VS"] = float((params[f"{i}.V"] ** 2).sum()) + ss
    return out


def invariant_drifts(
    spec: Spec,
    in_shape: tuple[int, ...],
    run: dict[str, Any],
    masks: dict[str, torch.Tensor] | None = None,
) -> list[dict[str, Any]]:
    """Largest drift from t = 0, over the recorded snapshots, of every invariant.

    For each interface: ``vertex`` = max |diag Q(t) - diag Q(0)| (Lemma 2, Eq. (4));
    ``active`` = ||Q_S(t) - Q_S(0)||_F on the neurons S active on every example at every step
    (Theorem 1 via Definition 6); ``full`` = ||Q(t) - Q(0)||_F (Lemma 4); ``mixed`` = the
    largest |Q_jk(t) - Q_jk(0)| over pairs (j, k) of distinct neurons that are not both stably
    active (Lemma 4). Also one row per Lemma 3 layer pair (``kind="layer"``).
    ``masks`` overrides ``run["always_active"]`` (e.g. an intersection across runs).
    """
    masks = masks if masks is not None else run["always_active"]
    snaps = run["snapshots"]
    rows = []
    for iface in interfaces(spec, in_shape):
        acts = [spec[iface.layer_in].get("act", "linear")]
        q0 = invariant_matrix(spec, snaps[0], iface)
        n = q0.shape[0]
        act_name = acts[0]
        mask = masks[iface.key].bool() if act_name == "relu" else torch.ones(n, dtype=torch.bool)
        pair_stable = mask[:, None] & mask[None, :]
        off = ~torch.eye(n, dtype=torch.bool)
        vertex = active = full = mixed = 0.0
        for snap in snaps[1:]:
            d = invariant_matrix(spec, snap, iface) - q0
            vertex = max(vertex, float(d.diagonal().abs().max()))
            full = max(full, float(torch.linalg.norm(d)))
            if pair_stable.any():
                active = max(active, float(torch.linalg.norm(d[pair_stable])))
            if (off & ~pair_stable).any():
                mixed = max(mixed, float(d[off & ~pair_stable].abs().max()))
        rows.append(
            {
                "kind": "interface",
                "name": iface.name,
                "case": iface.case,
                "act": act_name,
                "n_neurons": n,
                "n_stable": int(mask.sum()),
                "vertex_ok": iface.vertex_ok,
                "matrix_ok": iface.matrix_ok,
                "scale": float(torch.linalg.norm(q0)) + 1e-300,
                "vertex": vertex,
                "active": active,
                "full": full,
                "mixed": mixed,
            }
        )
    norms0 = layer_sq_norms(spec, snaps[0])
    names = list(norms0)
    for a, b in zip(names[:-1], names[1:]):
        drift = 0.0
        for snap in snaps[1:]:
            nt = layer_sq_norms(spec, snap)
            drift = max(drift, abs((nt[a] - nt[b]) - (norms0[a] - norms0[b])))
        rows.append({"kind": "layer", "name": f"{a}|{b}", "case": "Lemma 3", "drift": drift})
    return rows


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(np.polyfit(lx, ly, 1)[0])


# --------------------------------------------------------------------------------------------
# Theorem 2: low rank and alignment
# --------------------------------------------------------------------------------------------
def _as_tensor(m: torch.Tensor | np.ndarray) -> torch.Tensor:
    # torch's SVD honours torch.set_num_threads; numpy's BLAS may spawn threads on a busy CPU.
    return torch.as_tensor(m).detach().to(device="cpu", dtype=torch.float64)


def singular_values(m: torch.Tensor | np.ndarray) -> np.ndarray:
    """Singular values of m in decreasing order (float64)."""
    return torch.linalg.svdvals(_as_tensor(m)).numpy()


def rank_one_ratio(m: torch.Tensor | np.ndarray) -> float:
    """||M||_2^2 / ||M||_F^2 (Theorem 2, Eq. (14)); 1 iff M has rank one."""
    s = singular_values(m)
    return float(s[0] ** 2 / np.sum(s**2))


def alignment(w_j: torch.Tensor | np.ndarray, w_next: torch.Tensor | np.ndarray) -> float:
    """|<v_{j+1}, u_j>|: top left singular vector of W_j against the top right singular vector
    of the next layer W_{j+1} (Theorem 2, Eq. (15))."""
    u, _, _ = torch.linalg.svd(_as_tensor(w_j), full_matrices=False)
    _, _, vt = torch.linalg.svd(_as_tensor(w_next), full_matrices=False)
    return float(abs(u[:, 0] @ vt[0]))


def matrix_representation(spec: Spec, params: Params, i: int, which: str = "V") -> torch.Tensor:
    """Matrix representation of layer i (Definition 8): dense W; conv K flattened to
    c_out x (c_in k); ResNetFree block [V R] (``which="V"``, the side of the next layer) or
    [W; R] (``which="W"``, the side of the previous layer)."""
    layer = spec[i]
    if layer["type"] == "res" and which == "W":
        w = params[f"{i}.W"]
        return torch.cat([w, skip_matrix(layer, params, i, w.shape[1])], dim=0)
    return in_matrix(spec, params, i, "out")


def chain_gap_bound(mats: list[torch.Tensor]) -> list[float]:
    """Constants D_j of Theorem 2, Eq. (13), for a chain of fully connected layers.

    ``mats`` = [W_j, ..., W_L] (W_L the 1 x d output layer). With C_k = W_k W_k^T -
    W_{k+1}^T W_{k+1} (Theorem 1, case 1), Weyl's inequality gives ||W_j||_F^2 - ||W_j||_2^2
    <= sum_{k >= j} (tr C_k - lambda_min(C_k)) =: D_j, so evaluated at initialisation this
    bounds the gap along the whole gradient flow. Returns [D_j, ..., D_L = 0].
    """
    bounds = [0.0]
    for k in range(len(mats) - 2, -1, -1):
        c = _as_tensor(mats[k] @ mats[k].T - mats[k + 1].T @ mats[k + 1])
        eig = torch.linalg.eigvalsh((c + c.T) / 2)
        bounds.insert(0, bounds[0] + float(torch.trace(c) - eig[0]))
    return bounds


def frob_gap(m: torch.Tensor | np.ndarray) -> float:
    """||M||_F^2 - ||M||_2^2 (the left side of Theorem 2, Eq. (13), with D_j = 1)."""
    s = singular_values(m)
    return float(np.sum(s[1:] ** 2))


# --------------------------------------------------------------------------------------------
# Chapter experiments (sweep task functions: JSON task in, JSON result out)
# --------------------------------------------------------------------------------------------
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


@single_thread
def lemma1_check(task: dict[str, Any]) -> dict[str, Any]:
    """Lemma 1 on one random network: f(x) = T(h(x)) with T's weights in {-1, +1}.

    Also checks that T depends only on the weight signs: multiplying every weight by a random
    positive factor leaves T unchanged (and f = T(h) still holds with the new h), while
    flipping the sign of one weight changes T.
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
    # Same signs, new magnitudes: T must not change.
    rescaled = {
        k: v * (0.5 + torch.rand(v.shape, generator=gen, dtype=v.dtype)) for k, v in params.items()
    }
    g2 = build_graph(spec, rescaled, shape)
    t2 = tree_network(g2, paths)
    f2 = forward(spec, rescaled, x)[0].numpy()
    err2 = np.max(np.abs(f2 - tree_forward(t2, path_enumeration(g2, paths, x.numpy()))))
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
        "max_rel_err_tree_rescaled": float(err2 / max(float(np.max(np.abs(f2))), tiny)),
        "network_is_zero": bool(np.max(np.abs(f)) == 0.0),
        "tree_unchanged_by_magnitudes": t.signature() == t2.signature(),
        "tree_changed_by_sign_flip": t.signature() != t3.signature(),
        "f": f.tolist(),
        "tree": tree_out.tolist(),
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


def positive_data(n: int, shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x = 1 + 0.3 N(0, I) (so that some ReLU neurons stay active on every example, the
    situation of Definition 6), labels from a random linear teacher on x - 1."""
    gen = torch.Generator().manual_seed(int(seed))
    x = 1.0 + 0.3 * torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    teacher = torch.randn(int(np.prod(shape)), generator=gen, dtype=torch.float64)
    y = torch.sign((x - 1.0).reshape(n, -1) @ teacher)
    return x, torch.where(y == 0, torch.ones_like(y), y)


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
    runs = {}
    for steps in task["steps"]:
        every = max(1, steps // task["n_records"])
        runs[steps] = run_gd(
            spec,
            params,
            x,
            y,
            eta=task["T"] / steps,
            steps=steps,
            record=list(range(0, steps + 1, every)),
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


def separable_data(
    kind: str, n: int, seed: int, shape: tuple[int, ...] = (10,)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Linearly separable binary data: ``"synthetic"`` (Gaussian inputs of ``shape``, labels
    of a random linear teacher) or ``"mnist"`` (a seeded subset of MNIST train, digits 0-4 vs
    5-9; n = 2000 MNIST digits are linearly separable in 784 dimensions)."""
    if kind == "mnist":
        from ..core.data import binary_labels, load_mnist, seeded_subset

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


@single_thread
def low_rank_run(task: dict[str, Any]) -> dict[str, Any]:
    """Train a Theorem 2 network with the logistic loss until the loss reaches ``loss_floor``
    (or ``steps``), and record, per layer, ||W||_F^2, ||W||_2^2 / ||W||_F^2, the gap
    ||W||_F^2 - ||W||_2^2 and the alignment of adjacent layers (Theorem 2, Eqs. (13)-(15)).

    Rows name the layer's representation: ``"{i}"`` for dense layer i, ``"{i}.VR"`` / ``"{i}.WR"``
    for the two representations of ResNetFree block i ([V R], [W; R]; Lemma 11), ``"{i}.K"``
    for a conv kernel flattened to c_out x (c_in k). ``n_resfree_after`` is N_j of Theorem 2.
    For fully connected chains, ``gap_bound`` is D_j of :func:`chain_gap_bound` at
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
    # D_j for the chain of linear dense layers that ends at the output (fc networks only).
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
    return {"rows": rows, "final_loss": run["losses"][-1], "final_step": run["steps"][-1]}


# --------------------------------------------------------------------------------------------
# Summaries for the chapter
# --------------------------------------------------------------------------------------------
DRIFT_GROUPS = {
    "lemma2": "Lemma 2, Eq. (4): vertex (diagonal) invariants, ReLU and linear",
    "theorem1_linear": "Theorem 1: whole matrices, linear neurons",
    "theorem1_active": "Theorem 1: submatrices of stably active ReLU neurons",
    "lemma3": "Lemma 3: layer norms",
    "lemma4": "Lemma 4: whole Gram matrices, ReLU neurons",
    "not_covered": "ResNetDiagonal off-diagonal entries (outside Theorem 1)",
}


def theorem2_tasks(cfg: dict[str, Any], device: str = "cpu") -> list[dict[str, Any]]:
    """The Theorem 2 runs of the chapter, per seed in ``cfg["lr_seeds"]``: ``synthetic`` and
    ``mnist`` (ReLU layer + linear dense layers), ``resfree`` (a linear ResNetFree block before
    the output) and ``conv`` (ReLU conv, linear conv, linear dense layers). ``cfg`` is the
    chapter's profile."""
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
            dict(base, run="conv", kind="conv"),
        ]
    return tasks


DRIFT_LABELS = {
    "lemma2": "Lemma 2 (vertices)",
    "theorem1_linear": "Thm 1, linear",
    "theorem1_active": "Thm 1, stable ReLU",
    "lemma3": "Lemma 3 (layers)",
    "lemma4": "ReLU Gram (Lemma 4)",
    "not_covered": "ResNetDiagonal off-diag.",
}


def drift_summary(rows: list[dict[str, Any]]):
    """One row per (architecture, seed, invariant, group): the drift at the largest and the
    smallest step size and the log-log slope of drift against eta (1 for an invariant of
    gradient flow, 0 for a quantity whose gradient-flow drift is not zero)."""
    df = pd.DataFrame(rows)
    items = []
    for (arch, seed, name), grp in df.groupby(["arch", "seed", "name"], sort=False):
        first = grp.iloc[0]
        picks: list[tuple[str, str]] = []
        if first["kind"] == "layer":
            picks.append(("lemma3", "drift"))
        else:
            if first["vertex_ok"]:
                picks.append(("lemma2", "vertex"))
            if first["act"] == "linear":
                picks.append(("theorem1_linear" if first["matrix_ok"] else "not_covered", "full"))
            elif first["matrix_ok"]:
                if first["n_stable"] >= 2:
                    picks.append(("theorem1_active", "active"))
                picks.append(("lemma4", "full"))
        grp = grp.sort_values("eta")
        for group, col in picks:
            vals = grp[col].to_numpy(float)
            items.append(
                {
                    "arch": arch,
                    "seed": seed,
                    "invariant": name,
                    "case": first["case"],
                    "act": first["act"],
                    "group": group,
                    "quantity": col,
                    "n_stable": first.get("n_stable"),
                    "drift_small_eta": vals[0],
                    "drift_large_eta": vals[-1],
                    "ratio_small_to_large": vals[0] / vals[-1],
                    "slope": loglog_slope(grp["eta"], vals) if np.all(vals > 0) else float("nan"),
                }
            )
    return pd.DataFrame(items)


def sign_settling(traj: pd.DataFrame) -> pd.DataFrame:
    """Per Theorem 2 run, the largest share (over layers) of weights whose sign still differs
    from its final sign, at the snapshot nearest half the run and at the last snapshot before
    the end, for ReLU and linear layers apart (Assumption 1 asks for it to reach 0)."""
    items = []
    for (run, seed), g in traj.groupby(["run", "seed"], sort=False):
        steps = np.sort(g["step"].unique())
        last = int(steps[-1])
        half = int(steps[np.argmin(np.abs(steps - last / 2))])
        before = int(steps[-2])
        item = {
            "run": run,
            "seed": seed,
            "last_step": last,
            "half_step": half,
            "penultimate_step": before,
        }
        for act in ("relu", "linear"):
            part = g[g["act"] == act]
            share = part.groupby("step")["sign_mismatch_final"].max()
            item[f"{act}_share_at_half"] = float(share.get(half, np.nan))
            item[f"{act}_share_at_penultimate"] = float(share.get(before, np.nan))
        items.append(item)
    return pd.DataFrame(items)


def low_rank_final(rows: list[dict[str, Any]]):
    """The last snapshot of each run of :func:`low_rank_run` (rows carrying ``run``/``seed``),
    with the gap over its bound, the whole-trajectory maximum of that quantity and the
    Theorem 2 lower bound 1 / 8^{N_j}."""
    df = pd.DataFrame(rows)
    df["gap_over_bound"] = df["gap"] / df["gap_bound"]
    worst = (
        df.groupby(["run", "seed", "layer"])["gap_over_bound"].max().rename("gap_over_bound_max")
    )
    last = df[df["step"] == df.groupby(["run", "seed"])["step"].transform("max")]
    last = last.join(worst, on=["run", "seed", "layer"])
    last["theorem2_lower_bound"] = 8.0 ** (-last["n_resfree_after"].astype(float))
    return last.reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Figures (the chapter's plotting code; each returns the DataFrame it plots)
# --------------------------------------------------------------------------------------------
def plot_lemma1(ax, results: list[dict[str, Any]]):
    """f(x) against T(h(x)) for every Lemma 1 network and input."""
    df = pd.DataFrame(
        [
            {"arch": r["arch"], "seed": s, "network": f, "tree_of_paths": t}
            for s, r in enumerate(results)
            for f, t in zip(r["f"], r["tree"])
        ]
    )
    for arch, grp in df.groupby("arch", sort=False):
        ax.plot(grp["network"], grp["tree_of_paths"], "o", ms=3, label=arch, alpha=0.7)
    lim = float(np.abs(df[["network", "tree_of_paths"]].to_numpy()).max()) * 1.05
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8, label="y = x")
    ax.set(
        xlabel="network output f(x)",
        ylabel="tree network T(h(x))",
        title=r"Lemma 1: $f = T \circ h$",
    )
    ax.legend()
    return df


def plot_drifts(axes, rows: list[dict[str, Any]], summary):
    """Drift against step size, log-log: invariants (left), Lemma 4 and ResNetDiagonal
    off-diagonals (right); a dotted slope-1 guide on both."""
    axes = np.ravel(axes)
    df = pd.DataFrame(rows)
    series = []
    for _, s in summary.iterrows():
        sel = df[
            (df["arch"] == s["arch"]) & (df["seed"] == s["seed"]) & (df["name"] == s["invariant"])
        ].sort_values("eta")
        series.append(
            pd.DataFrame(
                {
                    "group": s["group"],
                    "arch": s["arch"],
                    "seed": s["seed"],
                    "invariant": s["invariant"],
                    "eta": sel["eta"],
                    "drift": sel[s["quantity"]],
                }
            )
        )
    data = pd.concat(series, ignore_index=True)
    palette = dict(
        zip(DRIFT_GROUPS, ["#0072B2", "#009E73", "#E69F00", "#CC79A7", "#D55E00", "#56B4E9"])
    )
    panels = [("lemma2", "theorem1_linear", "theorem1_active", "lemma3"), ("lemma4", "not_covered")]
    for ax, groups in zip(axes, panels):
        for group in groups:
            part = data[data["group"] == group]
            for k, (_, line) in enumerate(part.groupby(["arch", "seed", "invariant"])):
                ax.plot(
                    line["eta"],
                    line["drift"],
                    "-o",
                    ms=2.5,
                    lw=0.9,
                    alpha=0.8,
                    color=palette[group],
                    label=DRIFT_LABELS[group] if k == 0 else None,
                )
        etas = np.sort(data["eta"].unique())
        top = data[data["group"].isin(groups)]["drift"].max()
        ax.plot(etas, top * etas / etas[-1], "k:", lw=1.2, label="slope 1 (drift ~ eta)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="step size eta (flow time T fixed)",
            ylabel="max drift from t = 0",
        )
        ax.set_xticks(etas, [f"{e:g}" for e in etas], minor=False)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.legend(fontsize=6, loc="lower right")
    axes[0].set_title("Invariants: drift ~ eta", fontsize=8)
    axes[1].set_title("Not invariant: drift stays as eta -> 0", fontsize=8)
    return data


def plot_rank_one(axes, df, runs: tuple[str, ...] = ("synthetic", "mnist")):
    """Left: 1 - ||W||_2^2/||W||_F^2 against ||W||_F^2 with the bound D_j / ||W||_F^2 of
    Eq. (13) (dashed). Right: 1 - alignment of adjacent layers against ||W_j||_F^2."""
    axes = np.ravel(axes)
    part = df[df["run"].isin(runs) & (df["act"] == "linear") & df["gap_bound"].gt(0)].copy()
    relu = df[df["run"].isin(runs) & (df["act"] == "relu")].copy()
    part["one_minus_ratio"] = 1.0 - part["ratio"]
    part["bound"] = part["gap_bound"] / part["frob_sq"]
    relu["one_minus_ratio"] = 1.0 - relu["ratio"]
    # one colour per (data set, layer); seeds share it and only the first seed is labelled
    keys = sorted({(r, la) for r, la in zip(part["run"], part["layer"])})
    colors = {key: f"C{k % 8}" for k, key in enumerate(keys)}
    first_seed = part["seed"].min() if len(part) else 0
    for (run, seed, layer), g in part.groupby(["run", "seed", "layer"]):
        color = colors[(run, layer)]
        lab = f"{run}, layer {layer}" if seed == first_seed else None
        axes[0].plot(g["frob_sq"], g["one_minus_ratio"], "-o", ms=2.5, color=color, label=lab)
        axes[0].plot(g["frob_sq"], g["bound"], "--", color=color, lw=0.8)
    for k, (_, g) in enumerate(relu.groupby(["run", "seed", "layer"])):
        axes[0].plot(
            g["frob_sq"],
            g["one_minus_ratio"],
            ":",
            color="grey",
            lw=1.0,
            label="ReLU layers (not covered)" if k == 0 else None,
        )
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel=r"$\|W_j\|_F^2$",
        ylabel=r"$1 - \|W_j\|_2^2 / \|W_j\|_F^2$",
        title=r"Eq. (13): rank one; dashed: $D_j / \|W_j\|_F^2$",
    )
    axes[0].legend(fontsize=6)
    al = df[df["run"].isin(runs) & (df["act"] == "linear") & df["alignment"].notna()].copy()
    al["one_minus_alignment"] = (1.0 - al["alignment"]).clip(lower=1e-16)
    for (run, seed, layer), g in al.groupby(["run", "seed", "layer"]):
        axes[1].plot(
            g["frob_sq"],
            g["one_minus_alignment"],
            "-o",
            ms=2.5,
            color=colors.get((run, layer), "grey"),
            label=f"{run}: layers {layer}, {int(layer) + 1}" if seed == first_seed else None,
        )
    axes[1].set(
        xscale="log",
        yscale="log",
        xlabel=r"$\|W_j\|_F^2$",
        ylabel=r"$1 - |\langle v_{j+1}, u_j \rangle|$",
        title="Eq. (15): adjacent layers align",
    )
    axes[1].legend(fontsize=6)
    return {
        "rank_one": part[["run", "seed", "layer", "step", "frob_sq", "one_minus_ratio", "bound"]],
        "alignment": al[["run", "seed", "layer", "step", "frob_sq", "alignment"]],
    }


def _rep_label(layer: str) -> str:
    if layer.endswith(".VR"):
        return "block [V R]"
    if layer.endswith(".WR"):
        return "block [W; R]"
    return f"dense {layer}"


def plot_reduced_alignment(axes, df):
    """Left: ResNetFree run, ratio of each linear representation with the 1/8^{N_j} bound.
    Right: the linear conv layer's ratio with its predicted limit (reduced alignment)."""
    axes = np.ravel(axes)
    res = df[(df["run"] == "resfree") & (df["act"] == "linear")]
    layers = sorted(set(res["layer"]))
    first = res["seed"].min() if len(res) else 0
    for (seed, layer), g in res.groupby(["seed", "layer"]):
        if g["frob_sq"].iloc[0] > 0 and not (g["ratio"] == 1.0).all():
            n = int(g["n_resfree_after"].iloc[0])
            axes[0].plot(
                g["step"].clip(lower=1),
                g["ratio"],
                "-o",
                ms=2.5,
                color=f"C{layers.index(layer) % 8}",
                label=_rep_label(layer) + f" ($N_j$ = {n})" if seed == first else None,
            )
    axes[0].axhline(1 / 8, color="k", ls="--", lw=0.8, label="bound 1/8 ($N_j$ = 1)")
    axes[0].set(
        xscale="log",
        ylim=(0, 1.02),
        xlabel="GD step",
        ylabel=r"$\|W\|_2^2 / \|W\|_F^2$",
        title="Linear ResNetFree block",
    )
    axes[0].legend(fontsize=6.5)
    conv = df[(df["run"] == "conv")]
    for (seed, layer), g in conv.groupby(["seed", "layer"]):
        if layer.endswith(".K") and g["act"].iloc[0] == "linear":
            first_conv = seed == conv["seed"].min()
            axes[1].plot(
                g["step"].clip(lower=1),
                g["ratio"],
                "-o",
                ms=2.5,
                color="C0",
                label=f"conv {layer}" if first_conv else None,
            )
            axes[1].plot(
                g["step"].clip(lower=1),
                g["predicted_ratio"],
                "--",
                color="C3",
                lw=0.9,
                label="limit predicted from the next layer" if first_conv else None,
            )
        elif g["act"].iloc[0] == "linear" and layer != conv["layer"].iloc[-1]:
            axes[1].plot(
                g["step"].clip(lower=1),
                g["ratio"],
                ":",
                color="grey",
                label=f"dense {layer}" if seed == conv["seed"].min() else None,
            )
    axes[1].set(
        xscale="log",
        ylim=(0, 1.02),
        xlabel="GD step",
        ylabel=r"$\|W\|_2^2 / \|W\|_F^2$",
        title="Reduced alignment: linear conv layer",
    )
    axes[1].legend(fontsize=6.5)
    return {
        "resfree": res[["seed", "layer", "step", "ratio", "n_resfree_after"]],
        "conv": conv[["seed", "layer", "step", "ratio", "predicted_ratio"]],
    }
