"""Fig. 5's fits of one-hidden-layer GaLU / ReLU networks over a grid of widths, at each run's
own width (Fiat, Malach & Shalev-Shwartz, Sec. 5).

The same networks, initializations, optimizers and stopping rules as ``galu.acs`` and
``galu.train_one_hidden_converged``, computed with less work:

- ``train_widths_converged``: every run trains at its own width instead of at the grid's
  largest width with the other units masked. Masked units are exactly zero in the masked run
  (their readout starts at zero and gets zero gradient), so the two are the same maths and the
  results agree to round-off. The gradients are written out (the autograd graph cost more than
  the arithmetic at these sizes) and Adam updates all runs' weights as one flat vector.
- ``acs_widths``: alternate convex search building its normal matrix in one pass (the
  reference builds two (kd, kd) copies a round); the same solve.

The references stay in ``galu`` (the unit tests compare against them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from implicit_bias.models.galu import _psd_solve, galu_features, gate_values, least_squares


def acs_widths(
    X: torch.Tensor,
    Y: torch.Tensor,
    U: torch.Tensor,
    n_iter: int,
    gate: str = "step",
    seed: int = 0,
    tol: float = 1e-7,
) -> dict:
    """``galu.acs`` (same rounds, stopping rule and returns) with the W-step's normal matrix
    ``(V V^T kron 1_{d x d}) * (Phi^T Phi)`` built in one pass: ``Phi^T Phi`` viewed as
    (k, d, k, d) blocks times ``(V V^T)[j, l]`` broadcast over each block, the same products."""
    m, d = X.shape
    k = U.shape[1]
    g = torch.Generator().manual_seed(seed)
    V = (torch.randn(k, Y.shape[1], generator=g, dtype=X.dtype) / math.sqrt(k)).to(X.device)
    W = torch.zeros(d, k, dtype=X.dtype, device=X.device)
    Phi = galu_features(X, U, gate)
    PtP = (Phi.T @ Phi).view(k, d, k, d)
    PtY = (Phi.T @ Y).reshape(k, d, -1)  # (k, d, d')
    S = gate_values(X @ U, gate)  # the gates are fixed: the hidden layer is S * (X @ W)

    def mse(H, V):
        return float(((H @ V - Y) ** 2).mean())

    losses = [mse(S * (X @ W), V)]
    scale = float((Y**2).mean())  # the loss of the zero network: the tolerance's unit
    converged = False
    for _ in range(n_iter):
        A = (PtP * (V @ V.T)[:, None, :, None]).view(k * d, k * d)
        rhs = torch.einsum("jao,jo->ja", PtY, V).reshape(-1)
        W = _psd_solve(A, rhs).reshape(k, d).T
        H = S * (X @ W)
        losses.append(mse(H, V))
        V = least_squares(H, Y)[0]
        losses.append(mse(H, V))
        if len(losses) >= 5 and losses[-3] - losses[-1] < tol * scale:
            converged = True
            break
    rounds = (len(losses) - 1) // 2
    return {"losses": losses, "W": W, "V": V, "rounds": rounds, "converged": converged}


def train_widths_converged(
    X: torch.Tensor,
    Y: torch.Tensor,
    widths: Sequence[int],
    arch: str,
    seeds: Sequence[int],
    lr: float,
    window: int,
    tol: float,
    halvings: int,
    max_steps: int,
    gate: str = "step",
    U: Sequence[torch.Tensor] | None = None,
) -> dict:
    """``galu.train_one_hidden_converged`` on one data set (``X`` (m, d), ``Y`` (m, d')) with
    ``widths=widths`` and ``k = max(widths)``, each run trained at its own width.

    Run i starts from the first ``widths[i]`` units of the initialization the reference draws
    at width ``k`` from ``seeds[i]``; ``U[i]`` (d, widths[i]) are its GaLU gates (default: the
    reference's draw, cut to the width). Same Adam (beta 0.9, 0.999, eps 1e-8, a learning rate
    per run) and stopping rule; a converged run is frozen and no longer computed. Returns per
    run ``train_mse``, ``steps``, ``converged``, and its weights ``W`` (d, width) and ``V``
    (width, d') as lists.
    """
    if arch not in ("relu", "galu"):
        raise ValueError(f"unknown arch {arch!r}; valid: ('relu', 'galu')")
    m, d = X.shape
    dout = Y.shape[-1]
    widths = [int(w) for w in widths]
    B, k = len(widths), max(widths)
    # The reference's initialization, drawn at width k, then cut to each run's width.
    vscale = math.sqrt(k) / torch.tensor(widths, dtype=X.dtype).sqrt()
    sizes = [w * (d + dout) for w in widths]
    P = torch.empty(sum(sizes), dtype=X.dtype, device=X.device)  # every run's [W, V], flat
    grad = torch.zeros_like(P)
    rate_of = torch.empty_like(P)  # each weight's learning rate: its run's
    runs = []
    off = 0
    for i, (s, w) in enumerate(zip(seeds, widths)):
        g = torch.Generator().manual_seed(int(s))
        W0 = torch.randn(d, k, generator=g, dtype=X.dtype) / math.sqrt(d)
        V0 = torch.randn(k, dout, generator=g, dtype=X.dtype) / math.sqrt(k)
        U0 = torch.randn(d, k, generator=g, dtype=X.dtype)
        part = slice(off, off + sizes[i])
        Wv, Vv = P[part][: d * w].view(d, w), P[part][d * w :].view(w, dout)
        Wv.copy_(W0[:, :w])
        Vv.copy_(V0[:w] * vscale[i])
        gW, gV = grad[part][: d * w].view(d, w), grad[part][d * w :].view(w, dout)
        gates = None
        if arch == "galu":
            Ui = U0[:, :w] if U is None else U[i]
            gates = gate_values(X @ Ui.to(X.device, X.dtype), gate)
        runs.append((Wv, Vv, gW, gV, gates, part))
        rate_of[part] = lr
        off += sizes[i]
    Xt = X.T.contiguous()
    c = 2.0 / (m * dout)  # d/d(out) of the mean squared error

    def hidden(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        Wv, _, _, _, gates, _ = runs[i]
        pre = X @ Wv
        if gates is None:
            return pre.clamp_(min=0), pre > 0
        return pre.mul_(gates), gates

    def loss(i: int) -> float:
        H, _ = hidden(i)
        return float(((H @ runs[i][1] - Y) ** 2).mean())

    def gradient(i: int) -> None:
        _, Vv, gW, gV, _, _ = runs[i]
        H, slope = hidden(i)
        R = torch.addmm(Y, H, Vv, beta=-1).mul_(c)  # (out - Y) * 2 / (m d')
        torch.mm(H.T, R, out=gV)
        torch.mm(Xt, (R @ Vv.T).mul_(slope), out=gW)

    scale = float((Y**2).mean())
    b1, b2, eps = 0.9, 0.999, 1e-8
    m1, m2 = torch.zeros_like(P), torch.zeros_like(P)
    fails = [0] * B
    done = [False] * B
    steps = [max_steps] * B
    final = [math.nan] * B
    ref: list[float] | None = None
    for t in range(1, max_steps + 1):
        for i in range(B):
            if not done[i]:
                gradient(i)
        # Adam, written out as in the reference; a frozen run has rate 0 and does not move.
        m1.mul_(b1).add_(grad, alpha=1 - b1)
        m2.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        step = (m1 / (1 - b1**t)) / ((m2 / (1 - b2**t)).sqrt() + eps)
        P -= rate_of * step
        if t % window:
            continue
        with torch.no_grad():
            cur = [math.nan if done[i] else loss(i) for i in range(B)]
        for i in range(B):
            if done[i] or ref is None:
                continue
            if ref[i] - cur[i] < tol * scale:
                fails[i] += 1
                if fails[i] > halvings:
                    done[i], steps[i], final[i] = True, t, cur[i]
                    rate_of[runs[i][5]] = 0.0
                    grad[runs[i][5]] = 0.0
                else:
                    rate_of[runs[i][5]] = lr * 2.0 ** -fails[i]
        ref = cur
        if all(done):
            break
    return {
        "train_mse": [final[i] if done[i] else loss(i) for i in range(B)],
        "steps": steps,
        "converged": list(done),
        "W": [r[0].clone() for r in runs],
        "V": [r[1].clone() for r in runs],
    }
