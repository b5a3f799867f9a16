"""The interior-point machinery of the fast GLN solvers (`implicit_bias.models.gln_solvers`).

The solution record with its certificate (`SVMSolution`), tensor helpers, the step rules of
Mehrotra's predictor-corrector, the certificate checks, and the interior-point methods for
hard-margin kernel SVM duals: `_qp_ipm` in kernel form (N x N Newton systems) and
`_primal_svm_ipm` in feature space (D x D systems), with `_kernel_svm` normalizing a kernel
before solving and `_finish_kernel` certifying the result. float64 torch, CPU or CUDA, batched
over a leading dimension.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

Array = np.ndarray | torch.Tensor

# The dual objective (normalized units) beyond which we declare the primal infeasible: the
# normalized kernel has unit mean diagonal, so this is a geometric margin below ~1e-10 of the
# data's scale, i.e. non-separable for all numerical purposes.
_INFEASIBLE_DUAL = 1e10
_NU0, _S0 = 1.0, 1.0  # starting multipliers (normalized units; robust across our tests)
_STEP_FRACTION = 0.99  # fraction-to-the-boundary rule of interior-point methods


@dataclass
class SVMSolution:
    """The solution of one convex program, with its certificate of optimality.

    `weights` holds the primal variable: zeta ``(H, C, D)`` for SVM-GLN and SVM-L2, ``(H, D)``
    for the FReLU SVMs, ``(C, D)`` (one predictor per context) for the shallow SVM, ``(D,)``
    for the linear SVM. `dual` holds the N dual variables lambda (support-vector weights).
    `objective` is the primal objective in the convention stated by each solver's docstring;
    `duality_gap` is certified: ``objective_feasible - dual_objective >= 0``, where the primal
    point is scaled to satisfy every margin constraint exactly (``gap_relative`` divides by
    the dual objective). The residuals are recomputed from `weights` in input space.
    """

    kind: str
    status: str
    weights: torch.Tensor | None
    bias: float
    dual: torch.Tensor | None
    objective: float
    dual_objective: float
    duality_gap: float
    gap_relative: float
    primal_infeasibility: float
    stationarity: float
    complementarity: float
    iterations: int
    solve_time: float
    cpu_time: float
    message: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "optimal"

    @property
    def primal(self) -> np.ndarray | None:
        """`weights` as a NumPy array (the field name of `gln_svm.SVMResult`)."""
        return None if self.weights is None else self.weights.detach().cpu().numpy()

    @property
    def seconds(self) -> float:
        return self.solve_time

    @property
    def solver(self) -> str:
        return "gln_solvers.ipm"

    @property
    def zeta(self) -> torch.Tensor | None:
        """Alias of `weights` (the paper's zeta for SVM-GLN, SVM-L2 and the FReLU SVMs)."""
        return self.weights

    def summary(self) -> dict:
        """JSON-serializable scalars (no arrays): what a sweep stores for this solve."""
        out = {
            "kind": self.kind,
            "status": self.status,
            "objective": self.objective,
            "dual_objective": self.dual_objective,
            "duality_gap": self.duality_gap,
            "gap_relative": self.gap_relative,
            "primal_infeasibility": self.primal_infeasibility,
            "stationarity": self.stationarity,
            "complementarity": self.complementarity,
            "iterations": self.iterations,
            "solve_time": self.solve_time,
            "cpu_time": self.cpu_time,
            "bias": self.bias,
            "message": self.message,
        }
        out.update({k: v for k, v in self.extra.items() if isinstance(v, (int, float, str))})
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in out.items()
        }


# ----------------------------------------------------------------------------------------------
# helpers


def _tensor(x: Array, device: torch.device | str | None, dtype=torch.float64) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(device=device or x.device, dtype=dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def _device(device: torch.device | str | None, *arrays: Array) -> torch.device:
    if device is not None:
        return torch.device(device)
    for a in arrays:
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _check_labels(y: torch.Tensor) -> None:
    if not bool(torch.all((y == 1) | (y == -1))):
        raise ValueError("labels y must be in {-1, +1}")


def one_hot_contexts(contexts: torch.Tensor, n_contexts: int) -> torch.Tensor:
    """``(..., N, H)`` context indices (``-1`` = unit unused) -> ``(..., N, H * C)`` one-hot.

    Column ``h * C + c`` is 1 for the samples that use unit h's predictor of context c.
    """
    contexts = contexts.long()
    if contexts.numel() and int(contexts.max()) >= n_contexts:
        raise ValueError(f"context index {int(contexts.max())} >= n_contexts={n_contexts}")
    *batch, n, h = contexts.shape
    out = torch.zeros(*batch, n, h * n_contexts, dtype=torch.float64, device=contexts.device)
    offs = torch.arange(h, device=contexts.device) * n_contexts
    # an unused unit (-1) adds 0 to its own first column (scatter_add: never overwrites a 1)
    idx = contexts.clamp_min(0) + offs
    out.scatter_add_(-1, idx, (contexts >= 0).to(torch.float64))
    return out


# ----------------------------------------------------------------------------------------------
# steps, stopping and certificates


def _max_step(x: torch.Tensor, dx: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Largest a with x + a dx >= 0 (per problem; inf if dx >= 0)."""
    neg = dx < 0 if mask is None else (dx < 0) & mask
    return torch.where(neg, -x / dx, torch.full_like(x, math.inf)).amin(1)


def _step_to_boundary(pairs) -> torch.Tensor:
    return torch.stack([_max_step(x, dx) for x, dx in pairs], 0).amin(0)


def _mark(status: list[str], done: torch.Tensor, iters: list[int], it: int, cases) -> None:
    """Finish the problems that meet a condition, in priority order (vectorized: the shallow
    SVM batches thousands of contexts). Unfinished problems keep status "max_iter"."""
    for mask, name in cases:
        new = mask & ~done
        if bool(new.any()):
            for i in torch.nonzero(new).flatten().tolist():
                status[i], iters[i] = name, it
            done |= new


def _check_certificate(sol: SVMSolution, tol: float) -> SVMSolution:
    """Downgrade "optimal" when the certificate recomputed in input space disagrees with the
    IPM's own stopping test (round-off): the status never claims more than the gap shows."""
    bound = max(100 * tol, 1e-8)
    if sol.status == "optimal" and not sol.gap_relative <= bound:
        sol.status = "numerical_error"
        sol.message = (
            f"stopping test met, but the certified relative gap is "
            f"{sol.gap_relative:.1e} > {bound:.0e}"
        )
    return sol


def _balanced(
    lam: torch.Tensor, y: torch.Tensor, groups: torch.Tensor | None = None
) -> torch.Tensor:
    """lam with the heavier class scaled down so that ``y^T lam = 0`` (per group if given): a
    point that satisfies the bias's dual equality exactly, for the certificate."""
    if groups is None:
        groups = torch.zeros_like(y, dtype=torch.long)
    n = int(groups.max()) + 1 if groups.numel() else 1
    pos = torch.zeros(n, dtype=lam.dtype, device=lam.device).index_add_(0, groups, lam * (y > 0))
    neg = torch.zeros(n, dtype=lam.dtype, device=lam.device).index_add_(0, groups, lam * (y < 0))
    ratio_pos = torch.where(pos > neg, neg / pos.clamp_min(1e-300), torch.ones_like(pos))
    ratio_neg = torch.where(neg > pos, pos / neg.clamp_min(1e-300), torch.ones_like(neg))
    return lam * torch.where(y > 0, ratio_pos[groups], ratio_neg[groups])


def predict_gln(zeta: torch.Tensor, X: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
    """Network output without bias, ``sum_h <zeta_{h, c_h(x)}, x>`` (Eq. 15 with Eq. 17).

    ``zeta`` (H, C, D) with ``contexts`` (N, H) in range(C) (-1: unit off, as in a FReLU), or
    ``zeta`` (H, D) with ``contexts`` (N, H) boolean gates / {0, 1} (FReLU, Eq. 22).
    """
    X = X.to(zeta.dtype)
    if zeta.dim() == 2:  # FReLU: unit h contributes <zeta_h, x> when its gate is on
        return ((X @ zeta.T) * contexts.to(zeta.dtype)).sum(1)
    H, C, _ = zeta.shape
    proj = torch.einsum("nd,hcd->nhc", X, zeta)
    ctx = contexts.long()
    picked = torch.gather(proj, 2, ctx.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    return (picked * (ctx >= 0)).sum(1)


# ----------------------------------------------------------------------------------------------
# the interior-point method for hard-margin kernel SVM duals (SVM-L2, shallow, linear)


def _qp_newton(st: dict, r_n: torch.Tensor, bias: bool):
    """Newton direction of the QP IPM for the target ``s dlam + lam ds = r_n``."""
    y, m, lam1, L = st["y"], st["m"], st["lam1"], st["L"]
    rhs = (-st["rd"] + r_n / lam1) * m
    if bias:
        sol = torch.cholesky_solve(torch.stack([rhs, y * m], -1), L)
        u, v = sol[..., 0], sol[..., 1]
        db = ((y * u).sum(1) + st["rp"]) / (y * v * m).sum(1).clamp_min(1e-300)
        dlam = (u - db[:, None] * v) * m
    else:
        dlam = torch.cholesky_solve(rhs.unsqueeze(-1), L)[..., 0] * m
        db = torch.zeros_like(st["rp"])
    ds = (r_n - st["s"] * dlam) / lam1 * m
    return dlam, db, ds


def _qp_ipm(
    K: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, bias: bool, tol: float, max_iter: int
) -> dict:
    """Mehrotra predictor-corrector on ``min 1/2 lam^T K lam - 1^T lam`` s.t. ``lam >= 0``
    (``y^T lam = 0`` with a bias), batched: K (B, N, N) with ``K = y y^T * kernel``; samples
    with ``mask`` False are padding (lam fixed at 0). Margins are ``K lam + y b = 1 + s``.
    """
    B, N, _ = K.shape
    dev = K.device
    m = mask.to(K.dtype)
    n_cons = m.sum(1).clamp_min(1)
    eye = torch.eye(N, dtype=K.dtype, device=dev).expand(B, N, N)
    K = K * m[:, :, None] * m[:, None, :]
    rowmean = (K @ m.unsqueeze(-1)).squeeze(-1).sum(1) / n_cons**2
    lam = m / rowmean.clamp_min(1e-3)[:, None].sqrt() * 0.5
    s = m.clone()
    b = torch.zeros(B, dtype=K.dtype, device=dev)
    one = lambda t: torch.where(mask, t, torch.ones_like(t))  # noqa: E731
    status = ["max_iter"] * B
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    iters = [0] * B
    for it in range(max_iter + 1):
        Kl = (K @ lam.unsqueeze(-1)).squeeze(-1)
        margin = Kl + y * b[:, None]
        quad = (lam * Kl).sum(1)
        dual = lam.sum(1) - quad / 2
        mmin = torch.where(mask, margin, torch.full_like(margin, math.inf)).amin(1)
        scale = torch.where(mmin < 1, mmin.clamp_min(1e-300) ** 2, torch.ones_like(mmin))
        primal = quad / 2 / scale
        primal = torch.where(mmin > 0, primal, torch.full_like(primal, math.inf))
        rel_gap = (primal - dual) / dual.abs().clamp_min(1e-300)
        _mark(
            status,
            done,
            iters,
            it,
            [
                (~torch.isfinite(lam).all(1), "numerical_error"),
                ((rel_gap <= tol) | ((dual == 0) & (primal == 0)), "optimal"),
                (lam.sum(1) > _INFEASIBLE_DUAL, "infeasible"),
            ],
        )
        if bool(done.all()) or it == max_iter:
            break
        rd = (margin - 1 - s) * m
        rp = (y * lam).sum(1) if bias else torch.zeros_like(b)
        mu = (s * lam).sum(1) / n_cons
        Mat = K.clone()
        Mat.diagonal(dim1=1, dim2=2).add_(torch.where(mask, s / one(lam), torch.ones_like(s)))
        if bool(done.any()):
            Mat = torch.where(done[:, None, None], eye, Mat)
        L, info = torch.linalg.cholesky_ex(Mat)
        _mark(status, done, iters, it, [(info > 0, "numerical_error")])
        if bool(done.all()):
            break

        state = {"L": L, "rd": rd, "rp": rp, "lam1": one(lam), "s": s, "y": y, "m": m}
        dlam, db, ds = _qp_newton(state, -s * lam, bias)
        a_aff = torch.minimum(_max_step(lam, dlam, mask), _max_step(s, ds, mask)).clamp(max=1.0)
        mu_aff = ((s + a_aff[:, None] * ds) * (lam + a_aff[:, None] * dlam)).sum(1) / n_cons
        sigma = (mu_aff / mu.clamp_min(1e-300)).clamp(0, 1) ** 3
        r_n = ((sigma * mu)[:, None] - s * lam - ds * dlam) * m
        dlam, db, ds = _qp_newton(state, r_n, bias)
        a_max = torch.minimum(_max_step(lam, dlam, mask), _max_step(s, ds, mask))
        step = (_STEP_FRACTION * a_max).clamp(max=1.0)
        step = torch.where(done, torch.zeros_like(step), step)
        lam = lam + step[:, None] * dlam
        s = s + step[:, None] * ds
        b = b + step * db
    iters = [n if st != "max_iter" else it for n, st in zip(iters, status)]
    return {"status": status, "iterations": iters, "lam": lam, "s": s, "b": b}


def _primal_newton(st: dict, r_c: torch.Tensor):
    """Newton direction of the primal SVM IPM for the target ``s dlam + lam ds = r_c``."""
    X, y, mk, lam, s = st["X"], st["y"], st["mk"], st["lam"], st["s"]
    rhs = -st["r_w"] + torch.einsum("bmd,bm->bd", X, y * (r_c - lam * st["r_p"]) / s * mk)
    dw = torch.cholesky_solve(rhs.unsqueeze(-1), st["L"])[..., 0]
    ds = (y * torch.einsum("bmd,bd->bm", X, dw) + st["r_p"]) * mk
    dlam = (r_c - lam * ds) / s * mk
    return dw, ds, dlam


def _primal_svm_ipm(
    X: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, tol: float, max_iter: int
) -> dict:
    """Mehrotra predictor-corrector on the primal ``min 1/2 ||w||^2`` s.t.
    ``y_n <w, x_n> - 1 = s_n >= 0`` in feature space, batched: X (B, m, D), y (B, m), samples
    with ``mask`` False are padding. Each Newton step solves the D x D system
    ``(I + X^T diag(lam / s) X) dw = ...``, positive definite (eigenvalues >= 1) where the kernel
    form's N x N system turns singular (rank <= D < N: barely separable data stall it in
    round-off); when lam / s spans ~1e14 at the end, a relative jitter keeps the factorization."""
    B, m, D = X.shape
    dev, dt = X.device, X.dtype
    mk = mask.to(dt)
    n_cons = mk.sum(1).clamp_min(1)
    X = X * mk[..., None]
    w = torch.zeros(B, D, dtype=dt, device=dev)
    lam, s = mk.clone(), torch.ones_like(mk)
    eye = torch.eye(D, dtype=dt, device=dev).expand(B, D, D)
    status, iters = ["max_iter"] * B, [0] * B
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    for it in range(max_iter + 1):
        Xw = torch.einsum("bmd,bd->bm", X, w)
        g = torch.einsum("bmd,bm->bd", X, lam * y)  # X^T (y lam)
        dual = lam.sum(1) - (g * g).sum(1) / 2
        margins = torch.where(mask, y * Xw, torch.full_like(Xw, math.inf))
        mmin = margins.amin(1)
        wsq = (w * w).sum(1)
        primal = torch.where(
            mmin > 0, wsq / 2 / mmin.clamp(max=1.0) ** 2, torch.full_like(wsq, math.inf)
        )
        rel_gap = (primal - dual) / dual.abs().clamp_min(1e-300)
        _mark(
            status,
            done,
            iters,
            it,
            [
                (~torch.isfinite(w).all(1), "numerical_error"),
                (rel_gap <= tol, "optimal"),
                (lam.sum(1) > _INFEASIBLE_DUAL, "infeasible"),
            ],
        )
        if bool(done.all()) or it == max_iter:
            break
        r_w = w - g
        r_p = (y * Xw - 1 - s) * mk
        mu = (s * lam).sum(1) / n_cons
        d = lam / s * mk
        M = eye + torch.einsum("bmd,bm,bme->bde", X, d, X)
        L, info = torch.linalg.cholesky_ex(M)
        if bool((info > 0).any()):  # near the end D spans 1e14: a relative jitter restores it
            jitter = 1e-13 * M.diagonal(dim1=1, dim2=2).amax(1)
            L, info = torch.linalg.cholesky_ex(M + jitter[:, None, None] * eye)
        _mark(status, done, iters, it, [(info > 0, "numerical_error")])

        state = {"X": X, "y": y, "mk": mk, "lam": lam, "s": s, "r_w": r_w, "r_p": r_p, "L": L}
        dw, ds, dlam = _primal_newton(state, -s * lam)
        a = torch.minimum(_max_step(lam, dlam, mask), _max_step(s, ds, mask)).clamp(max=1.0)
        mu_aff = ((s + a[:, None] * ds) * (lam + a[:, None] * dlam) * mk).sum(1) / n_cons
        sigma = (mu_aff / mu.clamp_min(1e-300)).clamp(0, 1) ** 3
        # never aim the products below what the tolerance needs (as `_qp_ipm`)
        target = torch.maximum(sigma * mu, 0.1 * tol * lam.sum(1) / n_cons)
        dw, ds, dlam = _primal_newton(state, (target[:, None] - s * lam - ds * dlam) * mk)
        a_max = torch.minimum(_max_step(lam, dlam, mask), _max_step(s, ds, mask))
        step = (_STEP_FRACTION * a_max).clamp(max=1.0)
        step = torch.where(done, torch.zeros_like(step), step)
        w = w + step[:, None] * dw
        s = torch.where(mask, s + step[:, None] * ds, torch.ones_like(s))
        lam = lam + step[:, None] * dlam
    return {"status": status, "iterations": iters, "w": w, "lam": lam * mk}


def _kernel_svm(
    Kx: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, bias: bool, tol: float, max_iter: int
) -> dict:
    """Normalize ``Kx`` (B, N, N) (a PSD kernel, without labels) and run `_qp_ipm`; returns the
    duals in input units: margins are ``y * (Kx @ (lam * y) + b)``."""
    diag = (Kx.diagonal(dim1=1, dim2=2) * mask).sum(1) / mask.sum(1).clamp_min(1)
    kappa = diag.clamp_min(1e-300)
    K = Kx / kappa[:, None, None] * (y[:, :, None] * y[:, None, :])
    out = _qp_ipm(K, y, mask, bias, tol, max_iter)
    # normalized problem: min 1/2 lam'^T K' lam' - 1^T lam' with K' = K / kappa -> lam = lam'/kappa
    out["lam"] = out["lam"] / kappa[:, None]
    out["kappa"] = kappa
    return out


def _finish_kernel(
    kind,
    status,
    lam,
    b,
    Kx,
    y,
    mask,
    bias,
    iters,
    elapsed,
    cpu,
    weights,
    objective_scale=1.0,
    message="",
    extra=None,
) -> SVMSolution:
    """Certificate and residuals of a kernel SVM ``min 1/2 w^T w`` (objective = ``||w||^2``
    times `objective_scale`), from the dual lam (input units) and the kernel."""
    ly = lam * y
    Kly = Kx @ ly
    margins = y * (Kly + b)
    mm = margins[mask]
    mmin = float(mm.min()) if mm.numel() else math.inf
    wsq = float(ly @ Kly)
    lam_c = _balanced(lam, y) if bias else lam  # the dual point must satisfy y^T lam = 0
    lyc = lam_c * y
    dual = float(lam_c.sum()) - float(lyc @ (Kx @ lyc)) / 2
    feas = wsq / 2 / min(1.0, mmin) ** 2 if mmin > 0 else math.inf
    gap = feas - dual
    station = float((ly.sum()).abs()) / max(float(lam.sum()), 1e-300) if bias else 0.0
    compl = float((lam * (margins - 1).abs())[mask].sum()) / max(float(lam.sum()), 1e-300)
    if status == "infeasible":
        weights, gap = None, math.inf
        message = message or "dual objective diverges: the data are not separable"
    return SVMSolution(
        kind,
        status,
        weights,
        b,
        lam,
        objective_scale * wsq,
        objective_scale * 2 * dual,
        objective_scale * 2 * gap,
        gap / max(abs(dual), 1e-300),
        max(0.0, 1 - mmin) if mm.numel() else 0.0,
        station,
        compl,
        iters,
        elapsed,
        cpu,
        message,
        extra or {},
    )


def _shallow_groups(sizes: torch.Tensor, dim: int, bias: bool) -> list[tuple[torch.Tensor, bool]]:
    """Contexts (positions in `sizes`, their sample counts) batched together by `svm_shallow`:
    without `bias`, those with more samples than `dim` features in one feature-space batch
    (True); the others by size class (counts in (2^(j-1), 2^j]), one kernel-form batch each."""
    groups = []
    primal = (sizes > dim) if not bias else torch.zeros_like(sizes, dtype=torch.bool)
    if bool(primal.any()):
        groups.append((torch.nonzero(primal).flatten(), True))
    size_class = torch.ceil(torch.log2(sizes.to(torch.float64))).to(torch.long)
    for j in torch.unique(size_class[~primal]).tolist():
        groups.append((torch.nonzero((size_class == j) & ~primal).flatten(), False))
    return groups


def _finish_linear(status, w, lam, F, y, iters, elapsed, cpu) -> SVMSolution:
    """`_finish_kernel`'s certificate of a linear SVM without bias in feature space: margins and
    ``||w||^2`` from the primal w, the dual objective from lam (input units)."""
    margins = y * (F @ w)
    mmin = float(margins.min())
    wsq = float(w @ w)
    g = F.T @ (lam * y)
    dual = float(lam.sum()) - float(g @ g) / 2
    feas = wsq / 2 / min(1.0, mmin) ** 2 if mmin > 0 else math.inf
    gap = feas - dual
    compl = float((lam * (margins - 1).abs()).sum()) / max(float(lam.sum()), 1e-300)
    message = ""
    if status == "infeasible":
        w, gap = None, math.inf
        message = "dual objective diverges: the data are not separable"
    return SVMSolution(
        "svm_linear",
        status,
        w,
        0.0,
        lam,
        wsq,
        2 * dual,
        2 * gap,
        gap / max(abs(dual), 1e-300),
        max(0.0, 1 - mmin),
        0.0,
        compl,
        iters,
        elapsed,
        cpu,
        message,
    )


def svm_linear_features(
    F: Array,
    y: Array,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """`gln_solvers.svm_linear` without bias, solved in feature space (D x D Newton systems of
    `_primal_svm_ipm` instead of N x N ones: far cheaper for fewer features than samples). F is
    scaled as `_kernel_svm` scales the kernel (unit mean squared norm), so the infeasibility
    threshold means the same in both forms; the certificate comes from w and lambda."""
    dev = _device(device, F)
    Ft, yt = _tensor(F, dev), _tensor(y, dev)
    _check_labels(yt)
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    root_kappa = (Ft * Ft).sum(1).mean().clamp_min(1e-300).sqrt()
    mask = torch.ones(1, len(yt), dtype=torch.bool, device=dev)
    out = _primal_svm_ipm((Ft / root_kappa)[None], yt[None], mask, tol, max_iter)
    _sync(dev)
    # back to input units: w = w' / sqrt(kappa), lam = lam' / kappa (as `_kernel_svm`)
    w, lam = out["w"][0] / root_kappa, out["lam"][0] / root_kappa**2
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    sol = _finish_linear(out["status"][0], w, lam, Ft, yt, out["iterations"][0], elapsed, cpu)
    return _check_certificate(sol, tol)
