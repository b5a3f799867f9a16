"""Le & Jegelka (2022), "Training invariances and the low-rank phenomenon: beyond linear networks":
the numerics (torch and numpy only).

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

The chapter's experiments (the networks it trains, its data and task functions) are in
`implicit_bias.chapters.low_rank_invariants`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

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
    spec: Spec, params: Params, x: torch.Tensor, first_pre: torch.Tensor | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Network output (shape (n,)) and the pre-activations of every neuron group.

    Pre-activation keys: ``"{i}.out"`` (the output neurons of layer i) and ``"{i}.hidden"``
    (the hidden neurons of residual block i). ``first_pre``, if given, is the pre-activation of
    layer 0 (a dense layer), computed by the caller (:func:`run_gd`'s Gram form); ``params``
    then needs no ``"0.W"``.
    """
    pre: dict[str, torch.Tensor] = {}
    h = x
    for i, layer in enumerate(spec):
        act = layer.get("act", "linear")
        if i == 0 and first_pre is not None:
            if layer["type"] != "dense":
                raise ValueError("first_pre replaces a dense first layer only")
            z = first_pre
        elif layer["type"] == "dense":
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
    gram_first_layer: bool = False,
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

    ``gram_first_layer=True`` (a dense first layer, worthwhile when there are fewer examples
    than inputs) computes the same iterates in another basis: every gradient of the first
    layer's W_1 is dL/dz_1^T X (z_1 = X W_1^T), so W_1(t) = W_1(0) + A(t) X with A (units x n)
    updated by -lr dL/dz_1^T, and z_1 = X W_1(0)^T + (X X^T) A^T. A step then costs n^2 instead
    of n d per unit of the first layer (and no product with X in the backward pass); W_1 is
    formed only for the snapshots. The iterates agree with the direct form up to rounding.
    """
    record_set = set([0, steps] + list(record or []))
    gram_form = bool(gram_first_layer)
    first: Any = None
    coef: Any = None
    cand_coef: Any = None
    z1: Any = None
    if gram_form:
        if spec[0]["type"] != "dense":
            raise ValueError("gram_first_layer needs a dense first layer")
        x2 = x.reshape(x.shape[0], -1)
        w0 = params["0.W"].detach().clone()
        gram, z0 = x2 @ x2.T, x2 @ w0.T
        coef = torch.zeros(w0.shape[0], x2.shape[0], dtype=w0.dtype, device=w0.device)

        def first(c: torch.Tensor) -> torch.Tensor:  # z_1 as a leaf: its gradient moves A
            return (z0 + gram @ c.T).requires_grad_(True)

    p = {
        k: v.detach().clone().requires_grad_(True)
        for k, v in params.items()
        if not (gram_form and k == "0.W")
    }

    def snapshot() -> dict[str, torch.Tensor]:
        if not gram_form:
            return {k: v.detach().cpu().clone() for k, v in p.items()}
        w1 = (w0 + coef @ x2).detach()
        return {k: (w1 if k == "0.W" else p[k].detach()).cpu().clone() for k in params}

    always: dict[str, torch.Tensor] = {}
    snapshots, losses, rec_steps = [], [], []
    mult = 1.0
    step = 0
    # In normalized mode the accepted candidate's forward pass (with its autograd graph) is the
    # next step's forward pass: the same numbers, computed once.
    ahead: tuple[Any, ...] | None = None
    while True:
        if ahead is None:
            z1 = first(coef) if gram_form else None
            out, pre = forward(spec, p, x, first_pre=z1)
            loss = logistic_loss(out, y)
        else:
            out, pre, loss, z1 = ahead
        loss_value = float(loss.detach())
        for key, z in pre.items():
            act = (z.detach() > 0).all(dim=0)
            if z.dim() == 3:  # conv: a channel is active when all its positions are
                act = act.all(dim=-1)
            always[key] = act if key not in always else always[key] & act
        done = step == steps or loss_value < loss_floor
        if step in record_set or done:
            snapshots.append(snapshot())
            losses.append(loss_value)
            rec_steps.append(step)
        if done:
            break
        grads = torch.autograd.grad(loss, ([z1] if gram_form else []) + list(p.values()))
        if gram_form:
            grad_z1, grads = grads[0], grads[1:]
        ahead = None
        while True:
            lr = mult * eta / max(loss_value, 1e-300) if normalized else eta
            with torch.no_grad():
                cand = {k: v - lr * g for (k, v), g in zip(p.items(), grads)}
                if gram_form:
                    cand_coef = coef - lr * grad_z1.T
            if not normalized:
                break
            cand = {k: v.requires_grad_(True) for k, v in cand.items()}
            cand_z1 = first(cand_coef) if gram_form else None
            cand_out, cand_pre = forward(spec, cand, x, first_pre=cand_z1)
            cand_loss = logistic_loss(cand_out, y)
            if float(cand_loss.detach()) <= loss_value or mult < 1e-12:
                ahead = (cand_out, cand_pre, cand_loss, cand_z1)
                break
            mult *= 0.5  # backtrack: the step overshot
        mult = min(1.0, 1.25 * mult)
        p = {k: v.requires_grad_(True) for k, v in cand.items()}
        coef = cand_coef
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
    """Constants Delta_j (the constant D of Theorem 2, Eq. (13), per layer; not the paper's
    architecture factor D_j, which is 1 here) for a chain of fully connected layers.

    ``mats`` = [W_j, ..., W_L] (W_L the 1 x d output layer). With C_k = W_k W_k^T -
    W_{k+1}^T W_{k+1} (Theorem 1, case 1), Weyl's inequality gives ||W_j||_F^2 - ||W_j||_2^2
    <= sum_{k >= j} (tr C_k - lambda_min(C_k)) =: Delta_j, so evaluated at initialisation this
    bounds the gap along the whole gradient flow. Returns [Delta_j, ..., Delta_L = 0].
    """
    bounds = [0.0]
    for k in range(len(mats) - 2, -1, -1):
        c = _as_tensor(mats[k] @ mats[k].T - mats[k + 1].T @ mats[k + 1])
        eig = torch.linalg.eigvalsh((c + c.T) / 2)
        bounds.insert(0, bounds[0] + float(torch.trace(c) - eig[0]))
    return bounds


def frob_gap(m: torch.Tensor | np.ndarray) -> float:
    """||M||_F^2 - ||M||_2^2 (the left side of Theorem 2, Eq. (13), with N_j = 0, D_j = 1)."""
    s = singular_values(m)
    return float(np.sum(s[1:] ** 2))
