"""The two-hidden-layer classifiers of Sec. 3 (Fig. 1) trained together as one tensor program.

``train_classifier`` (in ``galu``) trains one ``DeepNet`` at a time; a Fig. 1 run trains the
four models of one (dataset, k, seed), which share their initialization seed and so their
initial linear weights and mini-batch order. At k <= 64 a step of one network costs mostly
per-operation overhead, so ``train_classifiers`` stacks the models' weights along a leading
axis and takes every model's step with one batched product per layer: each model gets the
same initialization, mini-batches, loss and Adam update as under ``train_classifier``, up to
the rounding of the batched products.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from implicit_bias.models.galu import DeepNet, gate_values

# the kind of each model's hidden factor: GaLU0 gate, none (linear), ReLU mask; readout-only
# ReLU is a ReLU whose hidden layers are frozen
KINDS = {"galu0": 0, "linear": 1, "relu": 2, "relu_readout": 3}


def _stacked_init(d_in: int, k: int, n_classes: int, models: Sequence[str], seed: int, like):
    """Each model's ``DeepNet`` initialization as ``train_classifier`` draws it (the global
    generator seeded with ``seed``), stacked: weights as (M, fan_in, fan_out), biases as
    (M, 1, fan_out), and the GaLU0 gate vectors (zeros for the other models)."""
    nets = []
    for model in models:
        torch.manual_seed(seed)
        nets.append(DeepNet(d_in, k, n_classes, model).to(like.device, like.dtype))

    def stack(get) -> torch.Tensor:
        return torch.stack([get(n).detach() for n in nets]).contiguous()

    params = [
        stack(lambda n: n.l1.weight.T),
        stack(lambda n: n.l1.bias[None]),
        stack(lambda n: n.l2.weight.T),
        stack(lambda n: n.l2.bias[None]),
        stack(lambda n: n.out.weight.T),
        stack(lambda n: n.out.bias[None]),
    ]
    zeros = torch.zeros(d_in, k, device=like.device, dtype=like.dtype)
    gates = [
        torch.stack([n.u1 if n.model == "galu0" else zeros for n in nets]),  # type: ignore[misc]  # u1 is a registered buffer
        torch.stack([n.u2 if n.model == "galu0" else zeros for n in nets]),  # type: ignore[misc]  # u2 is a registered buffer
    ]
    return params, gates


def train_classifiers(
    Xtr: torch.Tensor,
    ytr: torch.Tensor,
    Xte: torch.Tensor,
    yte: torch.Tensor,
    k: int,
    models: Sequence[str],
    seed: int,
    epochs: int,
    lr: float = 1e-3,
    batch_size: int = 128,
    gate: str = "sigmoid",
    test_logits: bool = False,
) -> dict[str, dict]:
    """``train_classifier`` for each of ``models`` (same ``seed``), trained side by side.

    Hidden layer i of every model is ``h = f * (h_prev W_i + b_i)``: ``f`` is the GaLU0 gate
    ``sigma(x u_i)`` (galu0), ``1[pre > 0]`` (relu: the ReLU, whose gradient is the same mask)
    or 1 (linear). The loss is the sum of the models' mean cross-entropies, so each model's
    gradient is its own, and one fused Adam step updates all of them. Readout-only ReLU's
    hidden layers are constants, as ``train_classifier`` leaves them: its last hidden layer on
    the training inputs is computed once, and each mini-batch takes its rows. Returns per model
    ``train_acc`` and ``test_acc`` (and, with ``test_logits``, the logits on ``Xte``).
    """
    for model in models:
        if model not in KINDS:
            raise ValueError(f"unknown model {model!r}; valid: {tuple(KINDS)}")
    # rows grouped by kind (gated, linear, ReLU, readout-only), so that each kind is one slice
    order = sorted(range(len(models)), key=lambda i: (KINDS[models[i]], i))
    names = [models[i] for i in order]
    n_g = sum(KINDS[m] == 0 for m in names)
    n_t = sum(m != "relu_readout" for m in names)  # rows whose hidden layers train
    n_r = sum(KINDS[m] == 2 for m in names)
    params, (U1, U2) = _stacked_init(Xtr.shape[1], k, int(ytr.max()) + 1, names, seed, Xtr)
    # trained (first n_t rows) and fixed (readout-only ReLU's hidden layers) parts; the
    # readout's weights are split the same way, so that no product of the step is wasted
    split = [(p[:n_t].clone().requires_grad_(), p[n_t:].clone()) for p in params]
    W1, b1, W2, b2, W3, b3 = (trained for trained, _ in split)
    W1f, b1f, W2f, b2f, W3f, b3f = (fixed for _, fixed in split)
    W3f.requires_grad_(), b3f.requires_grad_()
    # both layers' gates read the network input: one product for the two
    U = torch.cat([U1[:n_g], U2[:n_g]], 2)  # (n_g, d, 2k)
    # per row: 1 for ReLU rows (their factor is the mask 1[pre > 0]), else 0
    is_relu = [float(KINDS[m] == 2) for m in names[:n_t]]
    relu_rows = torch.tensor(is_relu, dtype=Xtr.dtype, device=Xtr.device)[:, None, None]
    opt = torch.optim.Adam([W1, b1, W2, b2, W3, b3, W3f, b3f], lr=lr, fused=True)
    const: dict[int, torch.Tensor] = {}

    def factors(x: torch.Tensor) -> list[torch.Tensor]:
        """Per hidden layer (n_t, n, k): the GaLU0 gates, then 1 (linear) and 0 (ReLU)."""
        n = len(x)
        if n not in const:  # the rows after the gated ones, per mini-batch size
            const[n] = torch.cat([x.new_ones(n_t - n_g - n_r, n, k), x.new_zeros(n_r, n, k)])
        gates = gate_values(x @ U, gate)
        return [torch.cat([gates[..., i * k : (i + 1) * k], const[n]]) for i in (0, 1)]

    def fixed(x: torch.Tensor) -> torch.Tensor:
        """Readout-only ReLU's last hidden layer (n_f, n, k): constants of the training."""
        h = torch.relu(torch.baddbmm(b1f, x.expand(len(W1f), -1, -1), W1f))
        return torch.relu(torch.baddbmm(b2f, h, W2f))

    def forward(x: torch.Tensor, fs: list[torch.Tensor], hf: torch.Tensor) -> torch.Tensor:
        """Logits (M, n, C) of every model on inputs ``x`` (n, d), given ``factors(x)`` and
        ``fixed(x)``. Hidden layer: ``pre * f``, ``f`` the gate (galu0), 1 (linear) or
        ``1[pre > 0]`` (relu; the product's gradient is then the ReLU's)."""
        h = x.expand(n_t, -1, -1)
        for (W, b), f in zip(((W1, b1), (W2, b2)), fs):
            pre = torch.baddbmm(b, h, W)
            with torch.no_grad():
                # 1[pre > 0] on the ReLU rows (sign: 1, 0 or -1), 0 elsewhere; plus f
                mask = torch.sign(pre).clamp_min_(0).mul_(relu_rows).add_(f)
            h = pre * mask
        out = torch.baddbmm(b3, h, W3)
        return torch.cat([out, torch.baddbmm(b3f, hf, W3f)]) if len(hf) else out

    with torch.no_grad():
        hf_train = fixed(Xtr)  # its mini-batches' rows are taken from here
    g = torch.Generator().manual_seed(seed + 10_000)
    n = Xtr.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g).to(Xtr.device)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad(set_to_none=True)
            x = Xtr.index_select(0, idx)
            with torch.no_grad():
                fs = factors(x)
            out = forward(x, fs, hf_train.index_select(1, idx))  # (M, b, C)
            yb = ytr.index_select(0, idx).repeat(len(names))
            # the sum over models of each one's mean over the mini-batch
            loss = torch.nn.functional.cross_entropy(
                out.reshape(-1, out.shape[-1]), yb, reduction="sum"
            )
            (loss / len(idx)).backward()
            opt.step()

    def logits(x: torch.Tensor) -> torch.Tensor:
        return forward(x, factors(x), fixed(x))

    def accuracy(X: torch.Tensor, y: torch.Tensor) -> list[float]:
        hits = sum(
            (logits(X[i : i + 8192]).argmax(2) == y[i : i + 8192]).double().sum(1)
            for i in range(0, len(y), 8192)
        )
        return (hits / len(y)).tolist()  # type: ignore[union-attr]  # a tensor: len(y) > 0

    with torch.no_grad():
        acc_tr, acc_te = accuracy(Xtr, ytr), accuracy(Xte, yte)
        res = {m: {"train_acc": a, "test_acc": b} for m, a, b in zip(names, acc_tr, acc_te)}
        if test_logits:
            for m, z in zip(names, logits(Xte)):
                res[m]["test_logits"] = z
    return {model: res[model] for model in models}
