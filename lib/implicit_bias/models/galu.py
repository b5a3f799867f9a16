"""GaLU networks: Fiat, Malach & Shalev-Shwartz, "Decoupling gating from linearity" (2019).

A GaLU neuron is ``g_{w,u}(x) = sigma(x^T u) * (x^T w)`` (Eq. (1) of the paper for the 0-1 gate
``sigma = 1[. > 0]``; Sec. 2 for a general gate): the gate weights ``u`` are drawn at random and
never trained, only the linear weights ``w`` are. A one-hidden-layer GaLU network is therefore a
linear model ``Phi_u(x)^T w`` over the fixed random feature map ``Phi_u`` of Sec. 4, so its best
fit is a least-squares problem with a closed form. This module holds:

- gates, the feature map ``Phi_u`` and the closed-form (minimum-norm) least-squares fit;
- Algorithm 1 (random replacement of gates, Sec. 4.1.1) and alternate convex search for outputs
  in R^{d'} (Sec. 5), both in closed form per step;
- one-hidden-layer ReLU / GaLU networks trained by a gradient method (batched over seeds), and
  the two-hidden-layer GaLU0 / ReLU / linear classifiers of Sec. 3 (Fig. 1);
- the data models of Sec. 4 (random regression, the cluster model) and small numpy helpers
  (PCA, a least-squares line, the first width below a threshold).

Theorem 1 and Lemma 1 with their Monte Carlo checks are in `implicit_bias.models.galu_theory`.
The chapter ``galu_expressivity`` (its tasks, tables, metrics and figures) is in
``implicit_bias.chapters.galu_expressivity``.

All torch code takes a ``device`` and works on CPU and CUDA; theory checks run in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

GATES = ("step", "sigmoid")
DEEP_MODELS = ("galu0", "relu", "linear", "relu_readout")

# ---- Gates, the feature map and the closed-form fit (Sec. 4) -------------------------------


def gate_values(z: torch.Tensor, gate: str = "step") -> torch.Tensor:
    """Gate ``sigma(z)``: the 0-1 gate ``1[z > 0]`` of Eq. (1) or the logistic sigmoid (Sec. 3)."""
    if gate == "step":
        return (z > 0).to(z.dtype)
    if gate == "sigmoid":
        return torch.sigmoid(z)
    raise ValueError(f"unknown gate {gate!r}; valid: {GATES}")


def galu_features(X: torch.Tensor, U: torch.Tensor, gate: str = "step") -> torch.Tensor:
    """Feature map ``Phi_u(x) = [sigma(x^T u_1) x; ...; sigma(x^T u_k) x]`` of Sec. 4.

    ``X``: (..., m, d) inputs, ``U``: (..., d, k) gate vectors as columns. Returns the matrix
    ``X_bar`` of Theorem 1, shape (..., m, k*d), block j holding ``sigma(x^T u_j) x``.
    """
    S = gate_values(X @ U, gate)  # (..., m, k)
    return (S.unsqueeze(-1) * X.unsqueeze(-2)).flatten(-2)


def galu_predict(X: torch.Tensor, U: torch.Tensor, w: torch.Tensor, gate: str = "step"):
    """One-hidden-layer GaLU network ``N(x) = sum_j sigma(x^T u_j) x^T w_j = Phi_u(x)^T w``."""
    return galu_features(X, U, gate) @ w


def _svd_rank(s: torch.Tensor, shape: tuple[int, ...]) -> int:
    """Numerical rank with numpy's default tolerance ``max(shape) * eps * s_max``."""
    if s.numel() == 0:
        return 0
    tol = max(shape) * torch.finfo(s.dtype).eps * s.max()
    return int((s > tol).sum())


def least_squares(Phi: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Minimum-norm least-squares fit ``w = X_bar^+ y`` (Sec. 4.1), by an SVD.

    ``Phi``: (m, p), ``Y``: (m,) or (m, c). Returns ``(w, train_mse, rank)`` where ``train_mse``
    is ``(1/m) ||X_bar w - y||^2`` (per column if ``Y`` is a matrix). An SVD rather than
    ``lstsq`` so that rank-deficient problems get the pseudo-inverse on CUDA too.
    """
    return least_squares_many(Phi, [Y])[0]


def least_squares_many(
    Phi: torch.Tensor, Ys: Sequence[torch.Tensor]
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """``least_squares(Phi, Y)`` for each ``Y`` of ``Ys``, with one SVD of ``Phi``.

    The fits of several targets on the same features (the noise levels of Fig. 3 and 4) share
    the factorization; each result is the one ``least_squares`` returns for that target alone.
    """
    m, p = Phi.shape
    Uf, s, Vh = torch.linalg.svd(Phi, full_matrices=False)
    r = _svd_rank(s, (m, p))
    Ur, sr, Vr = Uf[:, :r], s[:r], Vh[:r].T
    fits = []
    for Y in Ys:
        coef = Ur.T @ Y
        w = Vr @ (coef / (sr if Y.ndim == 1 else sr[:, None]))
        resid = Y - Phi @ w
        fits.append((w, (resid**2).mean(dim=0), r))
    return fits


def feature_rank(Phi: torch.Tensor) -> int:
    """Numerical rank of ``X_bar`` (numpy's tolerance)."""
    return _svd_rank(torch.linalg.svdvals(Phi), tuple(Phi.shape))


# ---- Algorithm 1: improving the gates by random replacement (Sec. 4.1.1) -------------------


def improve_gates(
    X: torch.Tensor, y: torch.Tensor, k: int, n_steps: int, gate: str = "step", seed: int = 0
) -> dict:
    """Algorithm 1 of the paper: replace a random gate by a fresh random one when that helps.

    Start with ``u_1..u_k ~ N(0, I_d)`` and the optimal ``w``; at each step pick ``j`` uniformly,
    draw a new ``u_j ~ N(0, I_d)``, solve the least-squares problem with it, and keep it only if
    the optimal training MSE decreases, so the loss never increases. A candidate is scored
    exactly in ``O(m k d^2 + (kd)^2 d)`` instead of a fresh ``O(m (kd)^2)`` solve: with
    ``H = G^{-1}`` (``G = X_bar^T X_bar``), the inverse Gram matrix of the other blocks is the
    Schur complement ``M = H_oo - H_oj H_jj^{-1} H_jo`` and the optimal loss with the new block
    ``B`` is ``(||y||^2 - b_o^T M b_o - r^T S^{-1} r) / m``, ``r = B^T y - c^T M b_o``,
    ``S = B^T B - c^T M c``, ``c = X_o^T B``. ``H`` is recomputed from ``G`` (Cholesky) at each
    accepted step: updating it by the block formula instead is unstable (errors grew tenfold
    per accepted step in our tests). Needs ``k d < m``; otherwise the initial fit already
    interpolates and nothing can improve.

    Returns ``{"losses": current MSE after each step (length n_steps + 1), "U": final gates,
    "accepted": number of accepted replacements}``.
    """
    m, d = X.shape
    y = y.reshape(m)
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(d, k, generator=g, dtype=X.dtype).to(X.device)
    Phi = galu_features(X, U, gate)
    if k * d >= m:
        # rank(X_bar) = m in general position: the fit interpolates and nothing can improve.
        loss = float(least_squares(Phi, y)[1])
        return {"losses": [loss] * (n_steps + 1), "U": U, "accepted": 0}
    yy = float(y @ y)
    G = Phi.T @ Phi
    b = Phi.T @ y
    H = torch.cholesky_inverse(torch.linalg.cholesky(G))
    loss = (yy - float(b @ H @ b)) / m
    losses, accepted = [loss], 0
    blocks = torch.arange(k * d, device=X.device) // d
    for _ in range(n_steps):
        j = int(torch.randint(k, (1,), generator=g))
        u_new = torch.randn(d, generator=g, dtype=X.dtype).to(X.device)
        jj, oo = (blocks == j).nonzero()[:, 0], (blocks != j).nonzero()[:, 0]
        B = gate_values(X @ u_new, gate)[:, None] * X  # candidate block, (m, d)
        cb = torch.cat([Phi.T @ B, b[:, None]], 1)  # [c, b] padded to all kd rows
        cb[jj] = 0  # so that (H cb)[oo] = H_oo [c, b_o] and (H cb)[jj] = H_jo [c, b_o]
        Hcb = H @ cb
        Mcb = Hcb[oo] - H[:, jj][oo] @ torch.linalg.solve(H[jj][:, jj], Hcb[jj])
        c_o, b_o = cb[oo, :d], cb[oo, d]
        Mc, t = Mcb[:, :d], Mcb[:, d]
        r = B.T @ y - c_o.T @ t
        S = B.T @ B - c_o.T @ Mc
        cand = (yy - float(b_o @ t) - float(r @ torch.linalg.solve(S, r))) / m
        if cand < loss:
            accepted += 1
            U[:, j] = u_new
            Phi[:, jj] = B
            cfull = Phi.T @ B
            G[:, jj] = cfull
            G[jj, :] = cfull.T
            b[jj] = B.T @ y
            H = torch.cholesky_inverse(torch.linalg.cholesky(G))
            loss = cand
        losses.append(loss)
    return {"losses": losses, "U": U, "accepted": accepted}


# ---- Alternate convex search for outputs in R^{d'} (Sec. 5) --------------------------------


def _psd_solve(G: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Minimum-norm solution of ``G z = b`` for symmetric PSD ``G``.

    Cholesky when ``G`` is numerically positive definite (the usual case, and 5-10x faster),
    otherwise the pseudo-inverse by an eigendecomposition.
    """
    L, info = torch.linalg.cholesky_ex(G)
    if int(info) == 0:
        z = torch.cholesky_solve(b.reshape(G.shape[0], -1), L).reshape(b.shape)
        # Guard against a numerically singular G that Cholesky still accepted.
        if torch.linalg.norm(G @ z - b) <= 1e-8 * torch.linalg.norm(b):
            return z
    evals, evecs = torch.linalg.eigh(G)
    tol = G.shape[0] * torch.finfo(G.dtype).eps * evals.abs().max()
    inv = torch.where(evals > tol, 1.0 / evals.clamp_min(tol), torch.zeros_like(evals))
    coef = evecs.T @ b
    return evecs @ (inv * coef if b.ndim == 1 else inv[:, None] * coef)


def galu_hidden(X: torch.Tensor, U: torch.Tensor, W: torch.Tensor, gate: str = "step"):
    """Hidden layer of a GaLU network: ``h_j(x) = sigma(x^T u_j) x^T w_j``, shape (m, k)."""
    return gate_values(X @ U, gate) * (X @ W)


def acs(
    X: torch.Tensor,
    Y: torch.Tensor,
    U: torch.Tensor,
    n_iter: int,
    gate: str = "step",
    seed: int = 0,
    tol: float = 1e-7,
) -> dict:
    """Alternate convex search for ``N(x) = V^T h(x)``, ``h_j = sigma(x^T u_j) x^T w_j`` (Sec. 5).

    With ``V`` (k x d') fixed the MSE is a least-squares problem in ``W`` (d x k) whose normal
    matrix is ``(V V^T kron 1_{d x d}) * (Phi^T Phi)`` (Hadamard product, ``Phi = X_bar``); with
    ``W`` fixed it is a least-squares problem in ``V``. Each step is solved exactly, so the loss
    never increases. ``V`` starts at N(0, 1/k). Stopping rule: a round (both half-steps) that
    lowers the loss by less than ``tol`` times the mean squared target (the loss of the zero
    network; a relative rule would never stop near an interpolating fit) ends it as
    converged; ``n_iter`` rounds without that end it as unconverged (a cap). Returns
    ``{"losses": MSE after each half-step (first entry: initial), "W", "V",
    "rounds", "converged"}``; the MSE is averaged over samples and outputs.
    """
    m, d = X.shape
    k = U.shape[1]
    g = torch.Generator().manual_seed(seed)
    V = (torch.randn(k, Y.shape[1], generator=g, dtype=X.dtype) / math.sqrt(k)).to(X.device)
    W = torch.zeros(d, k, dtype=X.dtype, device=X.device)
    Phi = galu_features(X, U, gate)
    PtP = Phi.T @ Phi  # (kd, kd)
    PtY = (Phi.T @ Y).reshape(k, d, -1)  # (k, d, d')

    S = gate_values(X @ U, gate)  # the gates are fixed: galu_hidden(X, U, W) = S * (X @ W)

    def mse(H, V):
        return float(((H @ V - Y) ** 2).mean())

    losses = [mse(S * (X @ W), V)]
    scale = float((Y**2).mean())  # the loss of the zero network: the tolerance's unit
    converged = False
    for _ in range(n_iter):
        Gv = (V @ V.T).repeat_interleave(d, 0).repeat_interleave(d, 1)
        rhs = torch.einsum("jao,jo->ja", PtY, V).reshape(-1)
        W = _psd_solve(Gv * PtP, rhs).reshape(k, d).T
        H = S * (X @ W)  # one hidden layer per W: the loss before and after the V step
        losses.append(mse(H, V))
        V = least_squares(H, Y)[0]
        losses.append(mse(H, V))
        if len(losses) >= 5 and losses[-3] - losses[-1] < tol * scale:
            converged = True
            break
    rounds = (len(losses) - 1) // 2
    return {"losses": losses, "W": W, "V": V, "rounds": rounds, "converged": converged}


# ---- One-hidden-layer networks trained by a gradient method (Sec. 4.1.1, 4.2, 5) -----------


def train_one_hidden(
    X: torch.Tensor,
    Y: torch.Tensor,
    k: int,
    arch: str,
    seeds: Sequence[int],
    steps: int,
    lr: float,
    gate: str = "step",
    X_test: torch.Tensor | None = None,
    Y_test: torch.Tensor | None = None,
    widths: Sequence[int] | None = None,
) -> dict:
    """Train ``N(x) = V^T act(x)`` with k hidden neurons by full-batch Adam on the MSE.

    ``arch``: ``"relu"`` (``act_j = max(x^T w_j, 0)``) or ``"galu"`` (``act_j = sigma(x^T u_j)
    x^T w_j`` with fixed random ``u_j ~ N(0, I_d)``). Both layers are trained, no biases, as in
    the networks of Sec. 4. Batched over runs: ``X`` (B, m, d), ``Y`` (B, m, d'), one seed per
    run (its initialization); runs are independent because the summed loss separates and Adam
    is coordinate-wise. ``widths`` (one per run, each <= k) trains narrower networks in the
    same batch by masking hidden units beyond the run's width (batching over widths, Fig. 2 and
    5). The learning rate follows a cosine decay to 0 over ``steps``. Returns per-run final
    ``train_mse`` (and ``test_mse`` and test predictions when ``X_test`` given).
    """
    if arch not in ("relu", "galu"):
        raise ValueError(f"unknown arch {arch!r}; valid: ('relu', 'galu')")
    B, m, d = X.shape
    dout = Y.shape[-1]
    Ws, Vs, Us = [], [], []
    for s in seeds:
        g = torch.Generator().manual_seed(int(s))
        Ws.append(torch.randn(d, k, generator=g, dtype=X.dtype) / math.sqrt(d))
        Vs.append(torch.randn(k, dout, generator=g, dtype=X.dtype) / math.sqrt(k))
        Us.append(torch.randn(d, k, generator=g, dtype=X.dtype))
    widths = [k] * B if widths is None else [int(w) for w in widths]
    mask = (torch.arange(k)[None, :] < torch.tensor(widths)[:, None]).to(X.dtype)  # (B, k)
    # V ~ N(0, 1/width) on each run's active units.
    vscale = mask * math.sqrt(k) / torch.tensor(widths, dtype=X.dtype).sqrt()[:, None]
    W = torch.stack(Ws).to(X.device).requires_grad_()
    V = (torch.stack(Vs) * vscale[:, :, None]).to(X.device).requires_grad_()
    U = torch.stack(Us).to(X.device)
    mask = mask[:, None, :].to(X.device)
    # The gates of the fixed u_j do not change during training: computed once per input set.
    gates = {}
    if arch == "galu":
        gates["train"] = gate_values(X @ U, gate)
        if X_test is not None:
            gates["test"] = gate_values(X_test @ U, gate)

    masked = min(widths) < k  # at full width the mask is all ones: skip the product

    def forward(Xb: torch.Tensor, inputs: str = "train") -> torch.Tensor:
        pre = Xb @ W
        h = torch.relu(pre) if arch == "relu" else gates[inputs] * pre
        return (h * mask if masked else h) @ V

    opt = torch.optim.Adam([W, V], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = ((forward(X) - Y) ** 2).mean(dim=(1, 2)).sum()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        out = {"train_mse": ((forward(X) - Y) ** 2).mean(dim=(1, 2)).tolist()}
        if X_test is not None:
            pred = forward(X_test, "test")
            out["test_pred"] = pred  # type: ignore[assignment]  # out mixes lists and tensors
            if Y_test is not None:
                out["test_mse"] = ((pred - Y_test) ** 2).mean(dim=(1, 2)).tolist()
            out["train_pred"] = forward(X)  # type: ignore[assignment]  # out mixes lists and tensors
    return out


def train_one_hidden_converged(
    X: torch.Tensor,
    Y: torch.Tensor,
    k: int,
    arch: str,
    seeds: Sequence[int],
    lr: float,
    window: int,
    tol: float,
    halvings: int,
    max_steps: int,
    gate: str = "step",
    widths: Sequence[int] | None = None,
    U: torch.Tensor | None = None,
) -> dict:
    """``train_one_hidden`` (same networks, initialization and width masks) run to convergence.

    Full-batch Adam on the MSE with a stopping rule on the loss, per run: every ``window``
    steps the run's loss is compared with its loss ``window`` steps earlier; a window that
    lowers it by less than ``tol`` times the run's mean squared target (the loss of the zero
    network), or raises it, halves the run's learning rate,
    and the run has converged when a window fails after ``halvings`` halvings (the loss no
    longer falls even with steps ``2^halvings`` times smaller). A converged run is frozen, so
    its result does not depend on the other runs of the batch. Runs still improving after
    ``max_steps`` are unconverged (a cap). ``U`` (B, d, k): the GaLU gates of each run
    (default: drawn from the run's seed as in ``train_one_hidden``). Adam is written out so that
    each run has its own learning rate (beta 0.9, 0.999, eps 1e-8, as ``torch.optim.Adam``).
    Returns per run ``train_mse`` (at convergence or at the cap), ``steps``, ``converged``, and
    the weights ``W`` (B, d, k) and ``V`` (B, k, d') as tensors.
    """
    if arch not in ("relu", "galu"):
        raise ValueError(f"unknown arch {arch!r}; valid: ('relu', 'galu')")
    B, m, d = X.shape
    dout = Y.shape[-1]
    Ws, Vs, Us = [], [], []
    for s in seeds:
        g = torch.Generator().manual_seed(int(s))
        Ws.append(torch.randn(d, k, generator=g, dtype=X.dtype) / math.sqrt(d))
        Vs.append(torch.randn(k, dout, generator=g, dtype=X.dtype) / math.sqrt(k))
        Us.append(torch.randn(d, k, generator=g, dtype=X.dtype))
    widths = [k] * B if widths is None else [int(w) for w in widths]
    mask = (torch.arange(k)[None, :] < torch.tensor(widths)[:, None]).to(X.dtype)
    vscale = mask * math.sqrt(k) / torch.tensor(widths, dtype=X.dtype).sqrt()[:, None]
    W = torch.stack(Ws).to(X.device).requires_grad_()
    V = (torch.stack(Vs) * vscale[:, :, None]).to(X.device).requires_grad_()
    gates = None
    if arch == "galu":
        Ug = torch.stack(Us).to(X.device) if U is None else U.to(X.device, X.dtype)
        gates = gate_values(X @ Ug, gate)
    mask = mask[:, None, :].to(X.device)
    masked = min(widths) < k  # at full width the mask is all ones: skip the product

    def run_losses() -> torch.Tensor:
        pre = X @ W
        h = torch.relu(pre) if gates is None else gates * pre
        return (((h * mask if masked else h) @ V - Y) ** 2).mean(dim=(1, 2))

    scale = (Y**2).mean(dim=(1, 2)).tolist()
    b1, b2, eps = 0.9, 0.999, 1e-8
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in (W, V)]
    rate = torch.full((B,), float(lr), dtype=X.dtype, device=X.device)
    fails = [0] * B
    done = [False] * B
    steps = [max_steps] * B
    final = [math.nan] * B
    ref: dict[int, float] | None = None
    # Row r of the batch trains run active[r]. A converged run leaves the batch (its weights
    # are kept in W_out, V_out): each run's products are computed on their own, so the others'
    # arithmetic does not change; the batch keeps two rows, as a batch of one takes another
    # kernel path.
    active = list(range(B))
    W_out, V_out = W.detach().clone(), V.detach().clone()
    for t in range(1, max_steps + 1):
        losses = run_losses()
        grads = torch.autograd.grad(losses.sum(), (W, V))
        with torch.no_grad():
            for p, gr, (m1, m2) in zip((W, V), grads, moments):
                m1.mul_(b1).add_(gr, alpha=1 - b1)
                m2.mul_(b2).addcmul_(gr, gr, value=1 - b2)
                step = (m1 / (1 - b1**t)) / ((m2 / (1 - b2**t)).sqrt() + eps)
                p -= rate[:, None, None] * step
        if t % window:
            continue
        with torch.no_grad():
            cur = run_losses().tolist()
        for r, i in enumerate(active):
            if done[i] or ref is None:
                continue
            if ref[i] - cur[r] < tol * scale[i]:
                fails[i] += 1
                if fails[i] > halvings:
                    done[i], steps[i], final[i] = True, t, cur[r]
                    rate[r] = 0.0
                else:
                    rate[r] = lr * 2.0 ** -fails[i]
        ref = {i: cur[r] for r, i in enumerate(active)}
        if all(done):
            break
        keep = [r for r, i in enumerate(active) if not done[i]]
        if len(keep) == 1 < len(active):
            keep = sorted(keep + [next(r for r in range(len(active)) if r not in keep)])
        if len(keep) < len(active):
            for r, i in enumerate(active):
                W_out[i], V_out[i] = W[r].detach(), V[r].detach()
            rows = torch.tensor(keep, device=X.device)
            X, Y, mask, rate = X[rows], Y[rows], mask[rows], rate[rows]
            gates = None if gates is None else gates[rows]
            W = W.detach()[rows].requires_grad_()
            V = V.detach()[rows].requires_grad_()
            moments = [(m1[rows], m2[rows]) for m1, m2 in moments]
            active = [active[r] for r in keep]
    with torch.no_grad():
        last = dict(zip(active, run_losses().tolist()))
    for r, i in enumerate(active):
        W_out[i], V_out[i] = W[r].detach(), V[r].detach()
    return {
        "train_mse": [final[i] if done[i] else last[i] for i in range(B)],
        "steps": steps,
        "converged": list(done),
        "W": W_out,
        "V": V_out,
    }


def smallest_width(loss_at: Callable[[int], float], threshold: float, k_max: int) -> int | None:
    """Smallest k in [1, k_max] with ``loss_at(k) < threshold`` (Fig. 5).

    Doubling then bisection, assuming the loss decreases with k (true in expectation; a
    non-monotone draw can move the answer by a few neurons). ``None`` if ``k_max`` fails.
    """
    cache: dict[int, float] = {}

    def ok(k: int) -> bool:
        if k not in cache:
            cache[k] = loss_at(k)
        return cache[k] < threshold

    hi = 1
    while not ok(hi):
        if hi >= k_max:
            return None
        hi = min(2 * hi, k_max)
    lo = hi // 2  # ok(lo) is False (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ---- Two-hidden-layer classifiers of Sec. 3 (Fig. 1) ---------------------------------------


class DeepNet(torch.nn.Module):
    """Two hidden layers of k neurons and a linear readout (Sec. 3, Fig. 1).

    ``model``: ``"galu0"`` — GaLU0 neurons ``sigma(x^(0)T u) (x^(i-1)T w + b)`` whose gates read
    the network input (Sec. 2) with untrained ``u ~ N(0, I/d_in)``; ``"relu"``; ``"linear"``
    (identity activations); ``"relu_readout"`` — the ReLU network with only its readout trained.
    """

    def __init__(self, d_in: int, k: int, n_classes: int, model: str, gate: str = "sigmoid"):
        super().__init__()
        if model not in DEEP_MODELS:
            raise ValueError(f"unknown model {model!r}; valid: {DEEP_MODELS}")
        self.model, self.gate = model, gate
        self.l1 = torch.nn.Linear(d_in, k)
        self.l2 = torch.nn.Linear(k, k)
        self.out = torch.nn.Linear(k, n_classes)
        if model == "galu0":
            # Gate weights are buffers: never trained. Scale 1/sqrt(d_in) gives unit-variance
            # gate pre-activations on inputs normalized to E||x||^2 = d_in.
            self.register_buffer("u1", torch.randn(d_in, k) / math.sqrt(d_in))
            self.register_buffer("u2", torch.randn(d_in, k) / math.sqrt(d_in))
        if model == "relu_readout":
            for p in (*self.l1.parameters(), *self.l2.parameters()):
                p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.model == "galu0":
            h = gate_values(x @ self.u1, self.gate) * self.l1(x)  # type: ignore[operator]  # u1 is a registered buffer (a Tensor)
            h = gate_values(x @ self.u2, self.gate) * self.l2(h)  # type: ignore[operator]  # u2 is a registered buffer (a Tensor)
        elif self.model == "linear":
            h = self.l2(self.l1(x))
        else:
            h = torch.relu(self.l2(torch.relu(self.l1(x))))
        return self.out(h)


def train_classifier(
    Xtr: torch.Tensor,
    ytr: torch.Tensor,
    Xte: torch.Tensor,
    yte: torch.Tensor,
    k: int,
    model: str,
    seed: int,
    epochs: int,
    lr: float = 1e-3,
    batch_size: int = 128,
) -> dict:
    """Train a ``DeepNet`` with Adam on the cross-entropy (mini-batches); final accuracies."""
    torch.manual_seed(seed)  # initialization of weights and gates
    net = DeepNet(Xtr.shape[1], k, int(ytr.max()) + 1, model).to(Xtr.device, Xtr.dtype)
    # fused: one kernel for all parameters' update, 0.22 against 0.47 ms a step at k = 16
    # (0.96 against 1.13 at k = 256) on one Zen 5 core; the same update up to rounding
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=lr, fused=True)
    g = torch.Generator().manual_seed(seed + 10_000)
    n = Xtr.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g).to(Xtr.device)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad(set_to_none=True)
            # index_select: the same rows as Xtr[idx], without advanced indexing's overhead
            out = net(Xtr.index_select(0, idx))
            torch.nn.functional.cross_entropy(out, ytr.index_select(0, idx)).backward()
            opt.step()
    with torch.no_grad():
        acc_tr = float((net(Xtr).argmax(1) == ytr).double().mean())
        acc_te = float((net(Xte).argmax(1) == yte).double().mean())
    return {"train_acc": acc_tr, "test_acc": acc_te}


def pca_project(Xtr: np.ndarray, Xte: np.ndarray, n_components: int) -> tuple[np.ndarray, ...]:
    """PCA fitted on the training inputs (Sec. 3: 64 components), then a global rescaling.

    Both sets are centred with the training mean and projected on the top principal axes,
    then divided by one scalar so that the training inputs have ``E ||x||^2 = n_components``
    (unit variance per coordinate on average; relative variances are kept).
    """
    mean = Xtr.mean(0)
    C = np.cov(Xtr - mean, rowvar=False)
    evals, evecs = np.linalg.eigh(C)
    P = evecs[:, ::-1][:, :n_components]
    Ztr, Zte = (Xtr - mean) @ P, (Xte - mean) @ P
    scale = np.sqrt((Ztr**2).sum(1).mean() / n_components)
    return Ztr / scale, Zte / scale


# ---- Data models of Sec. 4 -----------------------------------------------------------------


def random_regression(
    m: int, d: int, d_out: int, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The random sample of Sec. 4.1: x ~ N(0, I_d), y ~ N(0, I_{d'}), independent (float64)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(m, d, generator=g, dtype=torch.float64)
    Y = torch.randn(m, d_out, generator=g, dtype=torch.float64)
    return X.to(device), Y.to(device)


def cluster_model(
    m: int,
    m_test: int,
    d: int,
    n_clusters: int,
    sigma_x: float,
    task: str,
    noise: float,
    seed: int,
    device: str = "cpu",
) -> tuple[torch.Tensor, ...]:
    """The cluster model of Sec. 4.2: x = c_i + xi, xi ~ N(0, sigma_x^2 I), y a noisy b_i.

    Centres ``c_i ~ N(0, I_d)``; regression: ``b_i ~ N(0, 1)``, ``y = b_i + eps``, ``eps ~
    N(0, sigma_y^2)`` (``noise = sigma_y``); classification: ``b_i ~ Ber(1/2)``, ``y = b_i xor
    eps``, ``eps ~ Ber(p)`` (``noise = p``), returned as +-1. Train and test sets share the
    centres and labels and are drawn independently. Returns ``Xtr, ytr, Xte, yte`` (float64).
    """
    Xtr, ytr, Xte, yte = cluster_model_levels(
        m, m_test, d, n_clusters, sigma_x, task, [noise], seed, device
    )
    return Xtr, ytr[0], Xte, yte[0]


def cluster_model_levels(
    m: int,
    m_test: int,
    d: int,
    n_clusters: int,
    sigma_x: float,
    task: str,
    noises: Sequence[float],
    seed: int,
    device: str = "cpu",
) -> tuple[torch.Tensor, ...]:
    """``cluster_model`` at several noise levels from one draw (Sec. 4.2, Fig. 3).

    The random numbers ``cluster_model`` draws do not depend on the noise level (the level
    scales a standard normal or thresholds a uniform), so its sets at every level of one seed
    share the centres, labels and inputs. Returns ``Xtr`` (m, d), ``Ytr`` (L, m), ``Xte``
    (m_test, d), ``Yte`` (L, m_test): row l of the labels is what ``cluster_model`` returns at
    ``noises[l]``.
    """
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    C = torch.randn(n_clusters, d, generator=g, dtype=dt)
    if task == "regression":
        b = torch.randn(n_clusters, generator=g, dtype=dt)
    elif task == "classification":
        b = (torch.rand(n_clusters, generator=g, dtype=dt) < 0.5).to(dt)
    else:
        raise ValueError(f"unknown task {task!r}; valid: ('regression', 'classification')")

    def sample(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        i = torch.randint(n_clusters, (n,), generator=g)
        x = C[i] + sigma_x * torch.randn(n, d, generator=g, dtype=dt)
        if task == "regression":
            eps = torch.randn(n, generator=g, dtype=dt)
            ys = [b[i] + noise * eps for noise in noises]
        else:
            u = torch.rand(n, generator=g, dtype=dt)
            ys = [2 * ((b[i] + (u < noise).to(dt)) % 2) - 1 for noise in noises]
        return x.to(device), torch.stack(ys).to(device)

    Xtr, ytr = sample(m)
    Xte, yte = sample(m_test)
    return Xtr, ytr, Xte, yte


def linear_fit(x: np.ndarray, y: np.ndarray) -> dict:
    """Least-squares line ``y = a x + b`` and its R^2 (Fig. 4's 'linear relation')."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    A = np.stack([x, np.ones_like(x)], 1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    ss_res = float(((y - A @ np.array([a, b])) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return {"slope": float(a), "intercept": float(b), "r2": 1 - ss_res / ss_tot}


def first_below(ks: Sequence[int], losses: Sequence[float], threshold: float) -> int | None:
    """Smallest ``k`` of a grid whose loss is below ``threshold`` (Fig. 5); None if none is."""
    for k, loss in sorted(zip(ks, losses)):
        if loss < threshold:
            return int(k)
    return None
