"""GaLU networks: Fiat, Malach & Shalev-Shwartz, "Decoupling gating from linearity" (2019).

A GaLU neuron is ``g_{w,u}(x) = sigma(x^T u) * (x^T w)`` (Eq. (1) of the paper for the 0-1 gate
``sigma = 1[. > 0]``; Sec. 2 for a general gate): the gate weights ``u`` are drawn at random and
never trained, only the linear weights ``w`` are. A one-hidden-layer GaLU network is therefore a
linear model ``Phi_u(x)^T w`` over the fixed random feature map ``Phi_u`` of Sec. 4, so its best
fit is a least-squares problem with a closed form. This module holds:

- gates, the feature map ``Phi_u`` and the closed-form (minimum-norm) least-squares fit;
- Theorem 1 (expected optimal training loss ``1 - rank(X_bar)/m``) and Lemma 1 (Rosset &
  Tibshirani's train/test loss of least squares) with their Monte Carlo checks;
- Algorithm 1 (random replacement of gates, Sec. 4.1.1) and alternate convex search for outputs
  in R^{d'} (Sec. 5), both in closed form per step;
- one-hidden-layer ReLU / GaLU networks trained by a gradient method (batched over seeds), and
  the two-hidden-layer GaLU0 / ReLU / linear classifiers of Sec. 3 (Fig. 1);
- the sweep tasks of the chapter ``galu_expressivity`` (``*_task`` functions, dict -> dict).

All torch code takes a ``device`` and works on CPU and CUDA; theory checks run in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

GATES = ("step", "sigmoid")
DEEP_MODELS = ("galu0", "relu", "linear", "relu_readout")

# ----------------------------------------------------------------------------------------------
# Gates, the feature map and the closed-form fit (Sec. 4)
# ----------------------------------------------------------------------------------------------


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


def _svd_rank(s: torch.Tensor, shape: tuple[int, int]) -> int:
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
    m, p = Phi.shape
    Uf, s, Vh = torch.linalg.svd(Phi, full_matrices=False)
    r = _svd_rank(s, (m, p))
    Ur, sr, Vr = Uf[:, :r], s[:r], Vh[:r].T
    coef = Ur.T @ Y
    w = Vr @ (coef / (sr if Y.ndim == 1 else sr[:, None]))
    resid = Y - Phi @ w
    return w, (resid**2).mean(dim=0), r


def feature_rank(Phi: torch.Tensor) -> int:
    """Numerical rank of ``X_bar`` (numpy's tolerance)."""
    return _svd_rank(torch.linalg.svdvals(Phi), tuple(Phi.shape))


# ----------------------------------------------------------------------------------------------
# Theorem 1 and Lemma 1
# ----------------------------------------------------------------------------------------------


def theorem1_monte_carlo(
    X: torch.Tensor, U: torch.Tensor, gate: str, n_labels: int, generator: torch.Generator
) -> dict:
    """Monte Carlo of Theorem 1: ``E_y[min_w L_S(w)] = 1 - rank(X_bar)/m`` for ``y ~ N(0, I_m)``.

    The optimal training loss is ``||b||^2/m`` with ``b`` the part of ``y`` orthogonal to the
    column span of ``X_bar`` (the paper's proof); we draw ``n_labels`` label vectors at once and
    compute it from an orthonormal basis of that span. ``mc_se`` is the formula's own standard
    error ``sqrt(2 (m - r)) / m / sqrt(n_labels)`` (``m * min L_S ~ chi^2_{m - r}``).
    """
    Phi = galu_features(X, U, gate)
    m = Phi.shape[0]
    Uf, s, _ = torch.linalg.svd(Phi, full_matrices=False)
    r = _svd_rank(s, tuple(Phi.shape))
    Y = torch.randn(m, n_labels, generator=generator, dtype=Phi.dtype).to(Phi.device)
    proj = Uf[:, :r].T @ Y
    losses = ((Y**2).sum(0) - (proj**2).sum(0)) / m
    return {
        "mc_mean": float(losses.mean()),
        "formula": 1.0 - r / m,
        "rank": r,
        "min_m_kd": min(m, Phi.shape[1]),
        "mc_se": math.sqrt(2 * (m - r)) / m / math.sqrt(n_labels),
    }


def lemma1_formulas(sigma: float, d: int, m: int) -> tuple[float, float]:
    """Lemma 1 (Corollary 2 of Rosset & Tibshirani): expected train and test loss of least squares.

    ``E L_S = sigma^2 (1 - d/m)`` and ``E L_D = sigma^2 (1 + d/m + d/m (d+1)/(m-d-1))`` for
    ``m > d + 1``; the latter equals ``sigma^2 (1 + d/(m-d-1))``.
    """
    if m <= d + 1:
        raise ValueError(f"Lemma 1 needs m > d + 1, got m={m}, d={d}")
    train = sigma**2 * (1 - d / m)
    test = sigma**2 * (1 + d / m + d / m * (d + 1) / (m - d - 1))
    return train, test


def lemma1_monte_carlo(
    d: int,
    m: int,
    sigma: float,
    beta_norm: float,
    n_rep: int,
    seed: int,
    device: str = "cpu",
    chunk: int = 50_000,
) -> dict:
    """Monte Carlo of Lemma 1 on ``D_{sigma,beta}``: x ~ N(0, I_d), y = x^T beta + sigma eps.

    Batched over ``n_rep`` training sets. The test loss of ``w`` is exact, not sampled:
    ``L_D(w) = sigma^2 + ||w - beta||^2`` for Gaussian x. Returns means, standard errors and
    medians of the train and test losses (the test loss has infinite variance for m < d + 4,
    so its standard error is not meaningful there).
    """
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    beta = torch.randn(d, generator=g, dtype=dt)
    beta = (beta / beta.norm() * beta_norm).to(device)
    trains, tests = [], []
    for start in range(0, n_rep, chunk):  # chunks bound the memory of (n, m, d) batches
        n = min(chunk, n_rep - start)
        X = torch.randn(n, m, d, generator=g, dtype=dt).to(device)
        eps = torch.randn(n, m, 1, generator=g, dtype=dt).to(device)
        y = X @ beta[:, None] + sigma * eps
        # m > d + 1: X has full column rank a.s., so the normal equations are well posed.
        w = torch.linalg.solve(X.mT @ X, X.mT @ y)
        trains.append(((X @ w - y) ** 2).mean(dim=(1, 2)))
        tests.append(sigma**2 + ((w[..., 0] - beta) ** 2).sum(-1))
    train, test = torch.cat(trains), torch.cat(tests)
    f_train, f_test = lemma1_formulas(sigma, d, m)
    return {
        "train_mean": float(train.mean()),
        "train_se": float(train.std() / math.sqrt(n_rep)),
        "train_median": float(train.median()),
        "test_mean": float(test.mean()),
        "test_se": float(test.std() / math.sqrt(n_rep)),
        "test_median": float(test.median()),
        "formula_train": f_train,
        "formula_test": f_test,
    }


# ----------------------------------------------------------------------------------------------
# Algorithm 1: improving the gates by random replacement (Sec. 4.1.1)
# ----------------------------------------------------------------------------------------------


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
        Mcb = Hcb[oo] - H[oo][:, jj] @ torch.linalg.solve(H[jj][:, jj], Hcb[jj])
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


# ----------------------------------------------------------------------------------------------
# Alternate convex search for outputs in R^{d'} (Sec. 5)
# ----------------------------------------------------------------------------------------------


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
    never increases. ``V`` starts at N(0, 1/k). Stops after ``n_iter`` rounds or when a round
    lowers the loss by less than ``tol`` (relative). Returns ``{"losses": MSE after each
    half-step (first entry: initial), "W", "V"}``; the MSE is averaged over samples and outputs.
    """
    m, d = X.shape
    k = U.shape[1]
    g = torch.Generator().manual_seed(seed)
    V = (torch.randn(k, Y.shape[1], generator=g, dtype=X.dtype) / math.sqrt(k)).to(X.device)
    W = torch.zeros(d, k, dtype=X.dtype, device=X.device)
    Phi = galu_features(X, U, gate)
    PtP = Phi.T @ Phi  # (kd, kd)
    PtY = (Phi.T @ Y).reshape(k, d, -1)  # (k, d, d')

    def mse(W, V):
        return float(((galu_hidden(X, U, W, gate) @ V - Y) ** 2).mean())

    losses = [mse(W, V)]
    for _ in range(n_iter):
        Gv = (V @ V.T).repeat_interleave(d, 0).repeat_interleave(d, 1)
        rhs = torch.einsum("jao,jo->ja", PtY, V).reshape(-1)
        W = _psd_solve(Gv * PtP, rhs).reshape(k, d).T
        losses.append(mse(W, V))
        H = galu_hidden(X, U, W, gate)
        V = least_squares(H, Y)[0]
        losses.append(mse(W, V))
        if len(losses) >= 5 and losses[-3] - losses[-1] < tol * losses[-3]:
            break
    return {"losses": losses, "W": W, "V": V}


# ----------------------------------------------------------------------------------------------
# One-hidden-layer networks trained by a gradient method (Sec. 4.1.1, 4.2, 5)
# ----------------------------------------------------------------------------------------------


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
    vscale = (mask * math.sqrt(k) / torch.tensor(widths, dtype=X.dtype).sqrt()[:, None])
    W = torch.stack(Ws).to(X.device).requires_grad_()
    V = (torch.stack(Vs) * vscale[:, :, None]).to(X.device).requires_grad_()
    U = torch.stack(Us).to(X.device)
    mask = mask[:, None, :].to(X.device)

    def forward(Xb: torch.Tensor) -> torch.Tensor:
        pre = Xb @ W
        h = torch.relu(pre) if arch == "relu" else gate_values(Xb @ U, gate) * pre
        return (h * mask) @ V

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
            pred = forward(X_test)
            out["test_pred"] = pred
            if Y_test is not None:
                out["test_mse"] = ((pred - Y_test) ** 2).mean(dim=(1, 2)).tolist()
            out["train_pred"] = forward(X)
    return out


def smallest_width(loss_at: callable, threshold: float, k_max: int) -> int | None:
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


# ----------------------------------------------------------------------------------------------
# Two-hidden-layer classifiers of Sec. 3 (Fig. 1)
# ----------------------------------------------------------------------------------------------


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
            h = gate_values(x @ self.u1, self.gate) * self.l1(x)
            h = gate_values(x @ self.u2, self.gate) * self.l2(h)
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
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=lr)
    g = torch.Generator().manual_seed(seed + 10_000)
    n = Xtr.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g).to(Xtr.device)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(net(Xtr[idx]), ytr[idx]).backward()
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


# ----------------------------------------------------------------------------------------------
# Data models of Sec. 4
# ----------------------------------------------------------------------------------------------


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
            y = b[i] + noise * torch.randn(n, generator=g, dtype=dt)
        else:
            flip = (torch.rand(n, generator=g, dtype=dt) < noise).to(dt)
            y = 2 * ((b[i] + flip) % 2) - 1
        return x.to(device), y.to(device)

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


# ----------------------------------------------------------------------------------------------
# Sweep tasks of the chapter (dict -> dict, JSON values only)
# ----------------------------------------------------------------------------------------------


def _device(task: dict) -> torch.device:
    return torch.device(task.get("device", "cpu"))


def theorem1_task(task: dict) -> dict:
    """Theorem 1 for one draw of x, u ~ N(0, I_d): Monte Carlo over labels vs the formula."""
    g = torch.Generator().manual_seed(task["seed"])
    m, d, k = task["m"], task["d"], task["k"]
    X = torch.randn(m, d, generator=g, dtype=torch.float64).to(_device(task))
    U = torch.randn(d, k, generator=g, dtype=torch.float64).to(_device(task))
    out = theorem1_monte_carlo(X, U, task["gate"], task["n_labels"], g)
    # Points whose k gates are all closed have Phi(x) = 0 (0-1 gates only): they bound the rank.
    out["m_active"] = int((gate_values(X @ U, task["gate"]).sum(1) > 0).sum())
    return out


def lemma1_task(task: dict) -> dict:
    """Lemma 1 Monte Carlo at one (d, m, sigma)."""
    return lemma1_monte_carlo(
        task["d"], task["m"], task["sigma"], task["beta_norm"], task["n_rep"], task["seed"],
        task.get("device", "cpu"),
    )


def fig2_task(task: dict) -> dict:
    """Fig. 2 for one seed: memorizing N(0,1) labels with one hidden layer of k neurons.

    GaLU: closed form at each k and 2k, and after ``alg1_steps`` steps of Algorithm 1;
    ReLU: both layers trained by full-batch Adam (batched over the k grid with masks).
    """
    dev = _device(task)
    X, Y = random_regression(task["m"], task["d"], 1, task["seed"], dev)
    ks = [int(k) for k in task["k_grid"]]
    g = torch.Generator().manual_seed(task["seed"] + 1)
    galu = {}
    for k in sorted(set(ks) | {2 * k for k in ks}):
        U = torch.randn(task["d"], k, generator=g, dtype=torch.float64).to(dev)
        galu[k] = float(least_squares(galu_features(X, U, task["gate"]), Y[:, 0])[1])
    alg1 = [
        improve_gates(X, Y[:, 0], k, task["alg1_steps"], task["gate"], task["seed"] + 2)["losses"]
        for k in ks
    ]
    relu = train_one_hidden(
        X.expand(len(ks), -1, -1), Y.expand(len(ks), -1, -1), max(ks), "relu",
        [task["seed"] + 3] * len(ks), task["relu_steps"], task["relu_lr"], widths=ks,
    )["train_mse"]
    return {
        "k": ks,
        "galu": [galu[k] for k in ks],
        "galu_2k": [galu[2 * k] for k in ks],
        "galu_alg1": [a[-1] for a in alg1],
        "alg1_nonincreasing": all(b <= a for a1 in alg1 for a, b in zip(a1, a1[1:])),
        "relu": relu,
    }


def fig3_task(task: dict) -> dict:
    """Fig. 3 / Fig. 4 for one seed: the cluster model at several noise levels.

    GaLU (0-1 gates, k random filters) is fitted in closed form on the MSE (the global optimum
    over the linear weights, i.e. the limit of long training) and, like ReLU, by full-batch Adam
    on both layers for ``relu_steps`` steps (batched over noise levels). Classification uses
    +-1 targets and the sign of the output. Errors: MSE (regression) or 0-1 error
    (classification) on the noisy labels of the train and test
    sets. Also returns the GaLU solution's squared l1 and l2 norms (Fig. 4).
    """
    dev = _device(task)
    reg = task["task"] == "regression"
    sets = [
        cluster_model(
            task["m"], task["m_test"], task["d"], task["n_clusters"], task["sigma_x"],
            task["task"], noise, task["seed"], dev,
        )
        for noise in task["noise"]
    ]

    def err(pred: torch.Tensor, y: torch.Tensor) -> float:
        if reg:
            return float(((pred - y) ** 2).mean())
        return float((torch.sign(pred) != y).double().mean())

    g = torch.Generator().manual_seed(task["seed"] + 1)
    U = torch.randn(task["d"], task["k"], generator=g, dtype=torch.float64).to(dev)
    out = {"noise": list(task["noise"])}
    rows = []
    for Xtr, ytr, Xte, yte in sets:
        w, _, _ = least_squares(galu_features(Xtr, U, "step"), ytr)
        rows.append(
            (
                err(galu_predict(Xtr, U, w), ytr),
                err(galu_predict(Xte, U, w), yte),
                float(w.abs().sum() ** 2),
                float((w**2).sum()),
                float(((galu_predict(Xtr, U, w) - ytr) ** 2).mean()),
                float(((galu_predict(Xte, U, w) - yte) ** 2).mean()),
            )
        )
    keys = ["galu_train", "galu_test", "galu_l1_sq", "galu_l2_sq", "galu_train_mse",
            "galu_test_mse"]
    out.update({key: [r[i] for r in rows] for i, key in enumerate(keys)})
    if task.get("relu_steps", 0) > 0:
        Xtr = torch.stack([s[0] for s in sets])
        ytr = torch.stack([s[1] for s in sets])[..., None]
        Xte = torch.stack([s[2] for s in sets])
        yte = torch.stack([s[3] for s in sets])[..., None]
        for arch in ("relu", "galu"):
            res = train_one_hidden(
                Xtr, ytr, task["k"], arch, [task["seed"] + 2] * len(sets), task["relu_steps"],
                task["relu_lr"], X_test=Xte, Y_test=yte,
            )
            name = "relu" if arch == "relu" else "galu_adam"
            out[f"{name}_train"] = [err(res["train_pred"][i], ytr[i]) for i in range(len(sets))]
            out[f"{name}_test"] = [err(res["test_pred"][i], yte[i]) for i in range(len(sets))]
    return out


def fig5_task(task: dict) -> dict:
    """Fig. 5 for one (d', seed): training MSE against k on N(0,1) targets in R^{d'}.

    GaLU by alternate convex search (``acs_iters`` rounds) and by Adam (both layers), ReLU by
    Adam (batched over the k grid with masks). The smallest k with MSE < threshold is read off
    these curves with ``first_below``.
    """
    dev = _device(task)
    X, Y = random_regression(task["m"], task["d"], task["d_out"], task["seed"], dev)
    ks = [int(k) for k in task["k_grid"]]
    g = torch.Generator().manual_seed(task["seed"] + 1)
    acs_losses = []
    for k in ks:
        U = torch.randn(task["d"], k, generator=g, dtype=torch.float64).to(dev)
        acs_losses.append(acs(X, Y, U, task["acs_iters"], "step", task["seed"] + 2)["losses"])
    B = len(ks)
    common = (X.expand(B, -1, -1), Y.expand(B, -1, -1), max(ks))
    adam = {
        arch: train_one_hidden(
            *common, arch, [task["seed"] + 3] * B, task["relu_steps"], task["relu_lr"], widths=ks
        )["train_mse"]
        for arch in ("relu", "galu")
    }
    return {
        "k": ks,
        "galu_acs": [a[-1] for a in acs_losses],
        "acs_nonincreasing": all(b <= a + 1e-12 for a1 in acs_losses for a, b in zip(a1, a1[1:])),
        "acs_last_round_change": max(a[-3] - a[-1] for a in acs_losses),
        "acs_rounds": [(len(a) - 1) // 2 for a in acs_losses],
        "galu_adam": adam["galu"],
        "relu": adam["relu"],
    }


@lru_cache(maxsize=4)
def _pca_data(dataset: str, n_train: int, n_test: int, seed: int, n_components: int):
    from ..core import data  # the foundation's loaders (data/raw, SHA-256 verified)

    load = {"mnist": data.load_mnist, "fashion_mnist": data.load_fashion_mnist}[dataset]
    Xtr, ytr = load("train")
    Xte, yte = load("test")
    itr = data.seeded_subset(len(ytr), n_train, seed) if n_train < len(ytr) else np.arange(len(ytr))
    ite = data.seeded_subset(len(yte), n_test, seed) if n_test < len(yte) else np.arange(len(yte))
    Ztr, Zte = pca_project(Xtr[itr].astype(np.float64), Xte[ite].astype(np.float64), n_components)
    return Ztr.astype(np.float32), ytr[itr], Zte.astype(np.float32), yte[ite]


def fig1_task(task: dict) -> dict:
    """Fig. 1 for one (dataset, k, seed): the four two-hidden-layer models' test accuracy."""
    dev = _device(task)
    Ztr, ytr, Zte, yte = _pca_data(
        task["dataset"], task["n_train"], task["n_test"], task.get("data_seed", 0),
        task["pca_dim"],
    )
    tens = [torch.as_tensor(a).to(dev) for a in (Ztr, ytr, Zte, yte)]
    out = {}
    for model in task["models"]:
        r = train_classifier(*tens, task["k"], model, task["seed"], task["epochs"], task["lr"],
                             task["batch_size"])
        out[f"{model}_test_acc"] = r["test_acc"]
        out[f"{model}_train_acc"] = r["train_acc"]
    return out


# ----------------------------------------------------------------------------------------------
# Chapter helpers: task lists from a profile, tables, metrics and figures
# ----------------------------------------------------------------------------------------------

MODEL_LABELS = {
    "galu0": "GaLU0 (sigmoid gates)",
    "relu": "ReLU",
    "linear": "linear",
    "relu_readout": "ReLU, readout only",
}


def fig1_tasks(cfg: dict, device: str) -> list[dict]:
    return [
        {"dataset": ds, "k": k, "seed": s, "n_train": cfg["fig1_n_train"],
         "n_test": cfg["fig1_n_test"], "pca_dim": cfg["pca_dim"], "epochs": cfg["fig1_epochs"],
         "lr": cfg["fig1_lr"], "batch_size": cfg["fig1_batch_size"], "models": list(DEEP_MODELS),
         "device": device}
        for ds in cfg["fig1_datasets"] for k in cfg["fig1_k"] for s in cfg["fig1_seeds"]
    ]


def fig1_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    rows = [
        {"dataset": t["dataset"], "k": t["k"], "seed": t["seed"], "model": model,
         "test_acc": r[f"{model}_test_acc"], "train_acc": r[f"{model}_train_acc"]}
        for t, r in zip(tasks, results) for model in t["models"]
    ]
    return pd.DataFrame(rows)


def fig1_metrics(df) -> dict:
    """Fig. 1 claims: GaLU0 ~ ReLU, both above linear, readout-only far below (seed means)."""
    acc = df.groupby(["dataset", "k", "model"])["test_acc"].mean().unstack("model")
    gap_rg = (acc["relu"] - acc["galu0"]).abs().groupby("dataset").mean()
    gap_ro = (acc["relu"] - acc["relu_readout"]).groupby("dataset").mean()
    return {
        "fig1_max_mean_abs_gap_relu_galu0": float(gap_rg.max()),
        "fig1_min_gap_galu0_minus_linear": float((acc["galu0"] - acc["linear"]).min()),
        "fig1_min_gap_relu_minus_linear": float((acc["relu"] - acc["linear"]).min()),
        "fig1_min_mean_gap_relu_minus_readout": float(gap_ro.min()),
    }


def _plotting():
    from ..core.plotting import PALETTE, figure

    return figure, PALETTE


def plot_fig1(df):
    figure, PALETTE = _plotting()
    datasets = list(dict.fromkeys(df["dataset"]))
    fig, axes = figure(1, len(datasets), width=3.6 * len(datasets), height=3.0)
    names = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}
    for ax, ds in zip(axes[0], datasets):
        for i, model in enumerate(DEEP_MODELS):
            sub = df[(df.dataset == ds) & (df.model == model)].groupby("k")["test_acc"]
            mean, std = sub.mean(), sub.std().fillna(0)
            ax.errorbar(mean.index, 100 * mean, yerr=100 * std, marker="o", ms=3,
                        color=PALETTE[i], ls="--" if model == "relu_readout" else "-",
                        label=MODEL_LABELS[model], capsize=2)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("neurons per hidden layer k")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"Fig. 1: {names.get(ds, ds)}, PCA to 64")
    axes[0][0].legend(fontsize=7)
    return fig


def theorem1_tasks(cfg: dict, device: str) -> list[dict]:
    mc = [
        {"m": m, "d": d, "k": k, "gate": gate, "seed": s, "n_labels": cfg["thm1_n_labels"],
         "device": device, "kind": "mc"}
        for (m, d, k, gate) in cfg["thm1_cases"] for s in cfg["thm1_seeds"]
    ]
    rank = [
        {"m": m, "d": d, "k": k, "gate": gate, "seed": s, "n_labels": 1, "device": device,
         "kind": kind}
        for kind, cases in (("rank", cfg["thm1_rank_cases"]), ("few", cfg["thm1_few_gate_cases"]))
        for (m, d, k) in cases for gate in (("step", "sigmoid") if kind == "rank" else ("step",))
        for s in range(cfg["thm1_rank_draws"])
    ]
    return mc + rank


def theorem1_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    keys = ("kind", "m", "d", "k", "gate", "seed")
    return pd.DataFrame([{**{k: t[k] for k in keys}, **{k: r[k] for k in (
        "mc_mean", "formula", "mc_se", "rank", "min_m_kd", "m_active")}}
        for t, r in zip(tasks, results)])


def theorem1_metrics(df) -> dict:
    mc = df[df.kind == "mc"]
    z = [abs(r.mc_mean - r.formula) / r.mc_se if r.mc_se > 0 else (0.0 if r.mc_mean < 1e-12
         else math.inf) for r in mc.itertuples()]
    rank, few = df[df.kind == "rank"], df[df.kind == "few"]
    return {
        "thm1_max_abs_z": float(max(z)),
        "thm1_rank_full_fraction": float((rank["rank"] == rank["min_m_kd"]).mean()),
        "thm1_rank_full_fraction_few_gates": float((few["rank"] == few["min_m_kd"]).mean()),
        # our refinement for 0-1 gates: rank = min(kd, #points with at least one open gate)
        "thm1_rank_equals_min_kd_active_fraction": float(
            (few["rank"] == np.minimum(few["k"] * few["d"], few["m_active"])).mean()),
    }


def plot_theorem1(df):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 2, width=7.2, height=3.0)
    ax = axes[0][0]
    mc = df[df.kind == "mc"]
    for i, gate in enumerate(GATES):
        sub = mc[mc.gate == gate]
        ax.errorbar(sub.formula, sub.mc_mean, yerr=2 * sub.mc_se, fmt="o", ms=4,
                    color=PALETTE[i], label=f"{gate} gates (MC, 2 s.e.)")
    ax.plot([0, 1], [0, 1], color="grey", lw=1, label="y = x")
    ax.set_xlabel("1 - rank(X_bar)/m (Theorem 1)")
    ax.set_ylabel("Monte Carlo E[min L_S]")
    ax.set_title("Theorem 1: formula vs Monte Carlo")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    few = df[df.kind == "few"].groupby(["m", "d", "k"])[["min_m_kd", "rank", "m_active"]]
    few = few.mean().reset_index()
    x = np.arange(len(few))
    bars = (("min_m_kd", "min(m, kd) (paper)"), ("rank", "rank(X_bar), observed"),
            ("m_active", "points with an open gate"))
    for i, (col, label) in enumerate(bars):
        ax.bar(x + (i - 1) * 0.27, few[col], width=0.27, color=PALETTE[i], label=label)
    ax.set_xticks(x, [f"m={r.m}, d={r.d}\nk={r.k}" for r in few.itertuples()])
    ax.set_ylabel("count (mean over draws)")
    ax.set_title("Rank statement, few 0-1 gates")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def fig2_tasks(cfg: dict, device: str) -> list[dict]:
    return [
        {"m": cfg["fig2_m"], "d": cfg["fig2_d"], "k_grid": cfg["fig2_k"], "seed": s,
         "gate": "step", "alg1_steps": cfg["fig2_alg1_steps"], "relu_steps": cfg["relu_steps"],
         "relu_lr": cfg["relu_lr"], "device": device}
        for s in cfg["fig2_seeds"]
    ]


def fig2_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    cols = ("galu", "galu_2k", "galu_alg1", "relu")
    return pd.DataFrame([{"seed": t["seed"], "k": k, **{c: r[c][i] for c in cols}}
                         for t, r in zip(tasks, results) for i, k in enumerate(r["k"])])


def fig2_metrics(df, results: list[dict], m: int, d: int) -> dict:
    mean = df.groupby("k")[["galu", "galu_2k", "galu_alg1", "relu"]].mean()
    under = mean[mean.index * d < m]  # kd >= m: both fits reach 0, nothing to compare
    gap = under["galu"] - under["relu"]
    # ratio of summed gaps: a per-k ratio blows up where GaLU and ReLU nearly coincide
    closed = (under["galu"] - under["galu_alg1"]).sum() / gap.sum()
    return {
        "fig2_min_gap_galu_minus_relu": float(gap.min()),
        "fig2_min_gap_relu_minus_galu_2k": float((mean["relu"] - mean["galu_2k"]).min()),
        "fig2_alg1_nonincreasing": all(r["alg1_nonincreasing"] for r in results),
        "fig2_fraction_of_gap_closed_by_alg1": float(closed),
    }


def plot_fig2(df, m: int, d: int):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 1, width=4.6, height=3.2)
    ax = axes
    mean = df.groupby("k").mean()
    ks = np.array(mean.index)
    lines = [("galu", "GaLU(k), closed form", "o-"), ("galu_alg1", "GaLU(512), Algorithm 1",
             "s-"), ("relu", "ReLU(k), Adam", "^-"), ("galu_2k", "GaLU(2k), closed form", "v:")]
    for i, (col, label, style) in enumerate(lines):
        ax.plot(ks, mean[col], style, color=PALETTE[i], ms=4, label=label)
    kk = np.linspace(ks.min(), ks.max(), 200)
    ax.plot(kk, 1 - np.minimum(m, kk * d) / m, color="grey", lw=1,
            label="1 - min(m, kd)/m (Thm. 1)")
    ax.set_xlabel("neurons k")
    ax.set_ylabel("training MSE")
    ax.set_title(f"Fig. 2: memorizing N(0,1) labels (m={m}, d={d})")
    ax.legend(fontsize=7)
    return fig


def fig3_tasks(cfg: dict, device: str) -> list[dict]:
    base = {k: cfg[f"fig3_{k}"] for k in ("m", "m_test", "d", "n_clusters", "k", "sigma_x")}
    return [
        {**base, "task": task, "noise": cfg["fig3_sigma_y" if task == "regression" else "fig3_p"],
         "seed": s, "relu_steps": cfg["relu_steps"], "relu_lr": cfg["relu_lr"],
         "device": device}
        for task in ("regression", "classification") for s in cfg["fig3_seeds"]
    ]


def fig3_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    rows = []
    for t, r in zip(tasks, results):
        for model in ("galu", "galu_adam", "relu"):
            for i, noise in enumerate(r["noise"]):
                rows.append({"task": t["task"], "seed": t["seed"], "model": model,
                             "noise": noise, "train": r[f"{model}_train"][i],
                             "test": r[f"{model}_test"][i]})
    return pd.DataFrame(rows)


def fig3_metrics(df) -> dict:
    from scipy.stats import spearmanr

    mean = df.groupby(["task", "model", "noise"])[["train", "test"]].mean().reset_index()
    rhos, ratios = [], []
    for _, sub in mean.groupby(["task", "model"]):
        rhos.append(spearmanr(sub["noise"], sub["test"]).statistic)
        noisy = sub[sub.noise > 0]
        ratios.extend(noisy["train"] / noisy["test"])
    return {"fig3_min_spearman_test_vs_noise": float(min(rhos)),
            "fig3_max_train_over_test": float(max(ratios))}


FIG3_LABELS = {"galu": "GaLU, closed form", "galu_adam": "GaLU, Adam", "relu": "ReLU, Adam"}


def plot_fig3(df):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 2, width=7.4, height=3.1)
    mean = df.groupby(["task", "model", "noise"])[["train", "test"]].mean().reset_index()
    for ax, task in zip(axes[0], ("regression", "classification")):
        for i, model in enumerate(FIG3_LABELS):
            sub = mean[(mean.task == task) & (mean.model == model)]
            ax.plot(sub.noise, sub.test, "o-", color=PALETTE[i], ms=4,
                    label=f"{FIG3_LABELS[model]}: test")
            ax.plot(sub.noise, sub.train, "x--", color=PALETTE[i], ms=4,
                    label=f"{FIG3_LABELS[model]}: train")
        if task == "regression":
            ax.set_yscale("symlog", linthresh=0.01)
            ax.set_xlabel("label noise sigma_y")
            ax.set_ylabel("MSE")
        else:
            ax.set_xlabel("label flip probability p")
            ax.set_ylabel("0-1 error")
        ax.set_title(f"Fig. 3: cluster model, {task}")
    axes[0][1].legend(fontsize=6)
    return fig


def fig4_tasks(cfg: dict, device: str) -> list[dict]:
    base = {k: cfg[f"fig3_{k}"] for k in ("m", "m_test", "d", "n_clusters", "k", "sigma_x")}
    return [{**base, "task": "regression", "noise": cfg["fig4_sigma_y"], "seed": s,
             "relu_steps": 0, "relu_lr": 0.0, "device": device} for s in cfg["fig4_seeds"]]


def fig4_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    return pd.DataFrame([
        {"seed": t["seed"], "sigma_y": r["noise"][i],
         "gap": r["galu_test_mse"][i] - r["galu_train_mse"][i],
         "l2_sq": r["galu_l2_sq"][i], "l1_sq": r["galu_l1_sq"][i]}
        for t, r in zip(tasks, results) for i in range(len(r["noise"]))
    ])


def fig4_metrics(df) -> dict:
    return {f"fig4_r2_gap_vs_{p}_sq": linear_fit(df[f"{p}_sq"], df["gap"])["r2"]
            for p in ("l2", "l1")}


def plot_fig4(df):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 2, width=7.2, height=3.0)
    for ax, p, name in zip(axes[0], ("l2", "l1"), ("||w||_2^2", "||w||_1^2")):
        fit = linear_fit(df[f"{p}_sq"], df["gap"])
        xx = np.linspace(0, df[f"{p}_sq"].max(), 50)
        ax.plot(xx, fit["slope"] * xx + fit["intercept"], color=PALETTE[3], lw=1,
                label=f"least-squares line, R^2 = {fit['r2']:.4f}")
        ax.scatter(df[f"{p}_sq"], df["gap"], s=14, c=df["sigma_y"], cmap="viridis",
                   zorder=3, label="closed-form GaLU fits")
        ax.set_xlabel(f"{name} (colour: sigma_y)")
        ax.set_ylabel("test MSE - train MSE")
        ax.set_title(f"Fig. 4: gap vs {name}")
        ax.legend(fontsize=7)
    return fig


def lemma1_tasks(cfg: dict, device: str) -> list[dict]:
    d = cfg["lemma1_d"]
    tasks = []
    for m in (d + int(off) for off in cfg["lemma1_m_minus_d"]):
        n_rep = cfg["lemma1_n_rep_d_plus_2"] if m == d + 2 else cfg["lemma1_n_rep"]
        for dist, sigma, beta in (("D_1,0", 1.0, 0.0),
                                  ("D_sigma,beta", cfg["lemma1_sigma_small"], 1.0)):
            tasks.append({"d": d, "m": m, "sigma": sigma, "beta_norm": beta, "n_rep": n_rep,
                          "seed": cfg["lemma1_seed"], "dist": dist, "device": device})
    return tasks


def lemma1_frame(tasks: list[dict], results: list[dict]):
    import pandas as pd

    # Wall-clock seconds are dropped: the frame is a regression-tested figure table.
    return pd.DataFrame([{"dist": t["dist"], "d": t["d"], "m": t["m"], "sigma": t["sigma"],
                          "n_rep": t["n_rep"], **{k: v for k, v in r.items() if k != "seconds"}}
                         for t, r in zip(tasks, results)])


def lemma1_metrics(df) -> dict:
    d = int(df["d"].iloc[0])
    z_train = ((df.train_mean - df.formula_train).abs() / df.train_se).max()
    finite = df[df.m >= d + 4]
    z_test = ((finite.test_mean - finite.formula_test).abs() / finite.test_se).max()
    edge = df[(df.m == d + 2) & (df.dist == "D_1,0")].iloc[0]
    small = df[(df.m == d + 2) & (df.dist == "D_sigma,beta")].iloc[0]
    bounds = (small.test_mean <= (3 + d) * small.sigma**2) and (edge.test_mean >= 1)
    return {
        "lemma1_max_abs_z_train": float(z_train),
        "lemma1_max_abs_z_test": float(z_test),
        "lemma1_rel_err_test_m_d_plus_2": float(abs(edge.test_mean / edge.formula_test - 1)),
        "lemma1_m_d_plus_2_bounds_hold": bool(bounds),
    }


def plot_lemma1(df):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 2, width=7.4, height=3.1)
    ax = axes[0][0]
    sub = df[df.dist == "D_1,0"].sort_values("m")
    mm = np.linspace(sub.m.min(), sub.m.max(), 200)
    d = int(sub.d.iloc[0])
    ax.plot(sub.m, sub.train_mean, "o", color=PALETTE[0], label="train (MC)")
    ax.plot(mm, 1 - d / mm, color=PALETTE[0], lw=1, label="sigma^2 (1 - d/m)")
    ax.plot(sub.m, sub.test_mean, "s", color=PALETTE[3], label="test (MC mean)")
    ax.plot(sub.m, sub.test_median, "x", color=PALETTE[4], label="test (MC median)")
    mm2 = mm[mm > d + 1.5]
    ax.plot(mm2, 1 + d / (mm2 - d - 1), color=PALETTE[3], lw=1, label="Lemma 1 test formula")
    ax.set_yscale("log")
    ax.set_xlabel("training set size m")
    ax.set_ylabel("loss")
    ax.set_title(f"Lemma 1 on D_1,0 (d = {d})")
    ax.legend(fontsize=6)
    ax = axes[0][1]
    edge = df[df.m == d + 2]
    x = np.arange(len(edge))
    for i, (col, label) in enumerate((("train_mean", "train"), ("test_mean", "test (mean)"),
                                      ("test_median", "test (median)"))):
        ax.bar(x + (i - 1) * 0.25, edge[col], width=0.25, color=PALETTE[i], label=label)
    ax.scatter(x + 0.0, edge.formula_test, marker="_", s=300, color="black",
               label="Lemma 1 (test)", zorder=3)
    ax.set_xticks(x, [f"{r.dist}\n(sigma = {r.sigma:g})" for r in edge.itertuples()])
    ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.set_title(f"m = d + 2 = {d + 2}")
    ax.legend(fontsize=6)
    return fig


def fig5_tasks(cfg: dict, device: str) -> list[dict]:
    return [
        {"m": cfg["fig5_m"], "d": cfg["fig5_d"], "d_out": int(dout), "k_grid": ks, "seed": s,
         "acs_iters": cfg["fig5_acs_iters"], "relu_steps": cfg["relu_steps"],
         "relu_lr": cfg["relu_lr"], "device": device}
        for dout, ks in zip(cfg["fig5_dout"], cfg["fig5_k"]) for s in cfg["fig5_seeds"]
    ]


FIG5_LABELS = {"galu_acs": "GaLU, alternate convex search", "galu_adam": "GaLU, Adam",
               "relu": "ReLU, Adam"}


def fig5_frames(tasks: list[dict], results: list[dict], threshold: float):
    import pandas as pd

    curves = pd.DataFrame([{"d_out": t["d_out"], "seed": t["seed"], "k": k,
                            **{c: r[c][i] for c in FIG5_LABELS}}
                           for t, r in zip(tasks, results) for i, k in enumerate(r["k"])])
    mins = pd.DataFrame([{"d_out": t["d_out"], "seed": t["seed"],
                          **{c: first_below(r["k"], r[c], threshold) for c in FIG5_LABELS}}
                         for t, r in zip(tasks, results)])
    return curves, mins


def fig5_metrics(mins, results: list[dict]) -> dict:
    k = mins.groupby("d_out")[list(FIG5_LABELS)].mean()
    if k.isna().any().any():  # a width grid did not reach the threshold: the metric is missing
        return {"fig5_acs_nonincreasing": all(r["acs_nonincreasing"] for r in results)}
    top = k.index.max()
    return {
        "fig5_k_galu_minus_relu_dout1": float(k.loc[1, "galu_acs"] - k.loc[1, "relu"]),
        "fig5_rel_diff_largest_dout": float(abs(k.loc[top, "galu_acs"] - k.loc[top, "relu"])
                                            / k.loc[top, "relu"]),
        "fig5_k_nondecreasing_in_dout": bool(all((k[c].diff().dropna() >= 0).all()
                                                 for c in ("galu_acs", "relu"))),
        "fig5_acs_nonincreasing": all(r["acs_nonincreasing"] for r in results),
    }


def plot_fig5(curves, mins, threshold: float, m: int, d: int):
    figure, PALETTE = _plotting()
    fig, axes = figure(1, 2, width=7.4, height=3.1)
    ax = axes[0][0]
    k = mins.groupby("d_out")[list(FIG5_LABELS)].mean()
    for i, (col, label) in enumerate(FIG5_LABELS.items()):
        # markers and dashes keep coinciding curves visible
        ax.plot(k.index, k[col], ("o-", "s--", "^:")[i], color=PALETTE[i], ms=(7, 5, 4)[i],
                mfc="none" if i == 0 else PALETTE[i], label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("output dimension d'")
    ax.set_ylabel(f"smallest k with MSE < {threshold}")
    ax.set_title(f"Fig. 5 (m = {m}, d = {d})")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    mean = curves.groupby(["d_out", "k"]).mean().reset_index()
    for j, dout in enumerate(sorted(mean.d_out.unique())):
        sub = mean[mean.d_out == dout]
        ax.plot(sub.k, sub.galu_acs, "-", color=PALETTE[j], label=f"d'={dout}: GaLU (ACS)")
        ax.plot(sub.k, sub.relu, "--", color=PALETTE[j], label=f"d'={dout}: ReLU")
    ax.axhline(threshold, color="grey", lw=1)
    ax.set_xlabel("neurons k")
    ax.set_ylabel("training MSE")
    ax.set_title("Training MSE against width")
    ax.legend(fontsize=6, ncol=2)
    return fig
