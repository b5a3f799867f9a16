"""Fast exact solvers for the convex programs of Lippl, Abbott & Chung (gated linear networks).

The chapter `gln_norm` compares gradient-descent-trained networks with support vector machines
whose norms come from the paper's theory. cvxpy (ECOS, Clarabel, OSQP) solves them in the
reference path (`implicit_bias.models.gln_svm`); this module solves the same programs exactly but
exploits their structure, in torch (float64, CPU or CUDA, several problems at once), with the
interior-point machinery of `implicit_bias.models.gln_ipm`:

* **SVM-GLN** (Eq. 20 / Eq. 52): ``min_zeta sum_h ||zeta_h||_2`` (a group lasso over the
  ``(C, D)`` blocks ``zeta_h``) s.t. ``y_n (sum_h <zeta_{h, c_hn}, x_n> + b) >= 1``. Its
  Lagrange dual has only N variables (derivation in `svm_gln`):
  ``max sum(lam)`` s.t. ``lam >= 0``, ``lam^T Q_h lam <= 1`` for every unit h, with
  ``Q_h[n, m] = y_n y_m <x_n, x_m> [c_hn == c_hm]``, plus ``y^T lam = 0`` with a bias. We
  solve it with a primal-dual interior-point method (Mehrotra predictor-corrector; one N x N
  Cholesky factorization per iteration) and recover zeta from the KKT conditions.
* **FReLU SVMs** (Eq. 22, SVM-RC / SVM-LC): the same group lasso with one group per hidden
  unit that only the samples whose gate is on use (`svm_frelu`).
* **SVM-L2** (Sec. 4.1, Appendix A, Eq. 23-25): the minimum L2 norm of all ``C^H`` predictors
  ``beta_gamma = sum_h zeta_{h, gamma_h}`` under the architecture's constraints. Since
  ``||beta||^2 = C^(H-2) zeta^T M zeta`` (Eq. 24), it is a hard-margin kernel SVM whose kernel
  ``Phi^T M^+ Phi`` has a closed form (see `svm_l2`); a convex QP in N variables.
* **Shallow GLN SVM**: one hard-margin SVM per context, batched (`svm_shallow`).
* **SVM-HL** (Sec. 5.2): a hard-margin linear SVM on features (`svm_linear`).

Every solver returns an `SVMSolution` with the primal solution, a *certified* duality gap (the
recovered primal, scaled to be exactly feasible, minus the dual objective of a strictly
dual-feasible point), KKT residuals recomputed from the primal solution in input space, the
iteration count and a status: "optimal", "max_iter", "infeasible" (non-separable data: the dual
is unbounded) or "numerical_error". A failure is never hidden behind "optimal".
"""

from __future__ import annotations

import math
import time

import torch

from .gln_ipm import (
    _INFEASIBLE_DUAL,
    _NU0,
    _S0,
    _STEP_FRACTION,
    Array,
    SVMSolution,
    _balanced,
    _check_certificate,
    _check_labels,
    _device,
    _finish_kernel,
    _kernel_svm,
    _mark,
    _primal_svm_ipm,
    _shallow_groups,
    _step_to_boundary,
    _sync,
    _tensor,
    one_hot_contexts,
    predict_gln,
)
from .gln_ipm import svm_linear_features as svm_linear_features  # SVM-HL, feature space

# ----------------------------------------------------------------------------------------------
# the interior-point method for the group-lasso SVM dual (SVM-GLN, FReLU SVMs)


def _gl_newton(st: dict, r_h: torch.Tensor, r_n: torch.Tensor, bias: bool):
    """Newton direction of the group-lasso IPM for complementarity targets
    ``nu dw + w dnu = r_h`` and ``s dlam + lam ds = r_n``, after eliminating dw, dnu, ds
    (the reduced N x N system is factorized in ``st["L"]``)."""
    GL, nu, w, lam, s, y = st["GL"], st["nu"], st["w"], st["lam"], st["s"], st["y"]
    rhs = -st["rd"] - torch.einsum("bnh,bh->bn", GL, (r_h + nu * st["rq"]) / w) + r_n / lam
    if bias:  # Schur complement of the equality y^T lam = 0
        sol = torch.cholesky_solve(torch.stack([rhs, y], -1), st["L"])
        u, v = sol[..., 0], sol[..., 1]
        db = ((y * u).sum(1) + st["rp"]) / (y * v).sum(1)
        dlam = u - db[:, None] * v
    else:
        dlam = torch.cholesky_solve(rhs.unsqueeze(-1), st["L"])[..., 0]
        db = torch.zeros_like(st["rp"])
    gd = (GL * dlam.unsqueeze(-1)).sum(1)  # g_h^T dlam
    dw = -st["rq"] - gd
    dnu = (r_h - nu * dw) / w
    ds = (r_n - s * dlam) / lam
    return dlam, db, dnu, ds, dw


def _group_lasso_ipm(
    K: torch.Tensor,
    Z: torch.Tensor,
    gidx: torch.Tensor,
    y: torch.Tensor,
    bias: bool,
    tol: float,
    max_iter: int,
) -> dict:
    """Primal-dual IPM on ``max 1^T lam  s.t.  lam >= 0, (lam^T Q_h lam - 1) / 2 + w_h = 0,
    w >= 0 [, y^T lam = 0]``, batched over a leading dimension B.

    ``K`` (B, N, N): ``y_n y_m <x_n, x_m>`` (normalized); ``Z`` (B, N, G) one-hot group
    membership (G = H * C); ``gidx`` (B, N, H): the group of sample n in unit h, -1 if none.
    ``Q_h = K * (Z_h Z_h^T)``, so ``Q_h lam`` for all h is a gather from ``K @ (Z * lam)``.
    Multipliers: nu (B, H) of the quadratic constraints (nu_h = ||zeta_h||_2 at the optimum),
    s (B, N) of lam >= 0 (s_n = margin_n - 1), b (B,) of y^T lam = 0 (the primal bias). The
    explicit slacks w make every inequality linear, so Mehrotra's predictor-corrector applies
    unchanged and steps are never blocked by the curvature of the quadratic constraints (the
    equalities are driven to zero as residuals, like an infeasible-start method).
    """
    B, N, _ = K.shape
    H = gidx.shape[-1]
    G = Z.shape[-1]
    dev = K.device
    active = gidx >= 0
    gsafe = gidx.clamp_min(0)
    n_cons = N + H
    unit_of_group = (torch.arange(G, device=dev) // (G // H))[None].expand(B, -1)

    def unit_products(v: torch.Tensor) -> torch.Tensor:
        # (Q_h v)_n for all h: (B, N, H)
        return torch.gather(torch.bmm(K, Z * v.unsqueeze(-1)), 2, gsafe) * active

    # starting point: lam = alpha * 1 strictly inside every quadratic constraint (q_h <= 1/4)
    ones = torch.ones(B, N, dtype=K.dtype, device=dev)
    G1 = unit_products(ones)
    q1 = (G1 * ones.unsqueeze(-1)).sum(1)
    alpha = 0.5 / q1.amax(1).clamp_min(1e-300).sqrt()
    lam = alpha[:, None] * ones
    GL = alpha[:, None, None] * G1  # (Q_h lam)_n, kept up to date incrementally (it is linear)
    q = alpha[:, None] ** 2 * q1  # lam^T Q_h lam
    w = (1.0 - q) / 2
    nu = torch.full((B, H), _NU0, dtype=K.dtype, device=dev)
    s = torch.full((B, N), _S0, dtype=K.dtype, device=dev)
    b = torch.zeros(B, dtype=K.dtype, device=dev)
    eye = torch.eye(N, dtype=K.dtype, device=dev).expand(B, N, N)

    status = ["max_iter"] * B
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    iters = [0] * B
    best = {"lam": lam, "nu": nu, "b": b[:, None]}
    best_gap = torch.full((B,), math.inf, dtype=K.dtype, device=dev)

    for it in range(max_iter + 1):
        # certified gap: zeta_h = nu_h G_h scaled to feasibility vs. lam scaled to feasibility
        margin = torch.einsum("bnh,bh->bn", GL, nu) + y * b[:, None]
        mmin = margin.amin(1)
        primal = (nu * q.clamp_min(0).sqrt()).sum(1)
        pscale = torch.where(mmin > 0, 1.0 / mmin.clamp(max=1.0), torch.full_like(mmin, math.inf))
        dscale = 1.0 / q.amax(1).clamp_min(1.0).sqrt()
        dual = lam.sum(1) * dscale
        rel_gap = (primal * pscale - dual) / dual.clamp_min(1e-300)
        # with a bias the dual point must also satisfy y^T lam = 0 (certified again at the end)
        rel_eq = (
            (y * lam).sum(1).abs() / lam.sum(1).clamp_min(1e-300)
            if bias
            else torch.zeros_like(rel_gap)
        )
        mu = ((nu * w).sum(1) + (s * lam).sum(1)) / n_cons
        improved = (rel_gap + rel_eq < best_gap) & ~done
        if bool(improved.any()):
            sel = improved[:, None]
            best_gap = torch.where(improved, rel_gap + rel_eq, best_gap)
            for key, val in (("lam", lam), ("nu", nu), ("b", b[:, None])):
                best[key] = torch.where(sel, val, best[key])
        finite = torch.isfinite(lam).all(1) & torch.isfinite(nu).all(1)
        _mark(
            status,
            done,
            iters,
            it,
            [
                (~finite, "numerical_error"),
                ((rel_gap <= tol) & (rel_eq <= tol), "optimal"),
                (dual > _INFEASIBLE_DUAL, "infeasible"),
                (mu < 1e-18, "numerical_error"),  # nothing left to gain: the iterates stalled
            ],
        )
        if bool(done.all()) or it == max_iter:
            break
        rd = margin - 1.0 - s  # dual residual (stationarity in lam)
        rq = (q - 1.0) / 2 + w  # residual of the quadratic equalities
        rp = (y * lam).sum(1) if bias else torch.zeros_like(b)

        nuG = torch.gather(nu, 1, unit_of_group)
        # sum_h nu_h Q_h + sum_h nu_h / w_h g_h g_h^T + diag(s / lam), built in place
        Mat = torch.bmm(Z * nuG[:, None, :], Z.transpose(1, 2)).mul_(K)
        Mat.baddbmm_(GL * (nu / w)[:, None, :], GL.transpose(1, 2))
        Mat.diagonal(dim1=1, dim2=2).add_(s / lam)
        if bool(done.any()):
            Mat = torch.where(done[:, None, None], eye, Mat)
        L, info = torch.linalg.cholesky_ex(Mat)
        bad = (info > 0) & ~done
        if bool(bad.any()):  # regularize once, then give up on that problem honestly
            jitter = 1e-12 * Mat.diagonal(dim1=1, dim2=2).amax(1)
            L2, info2 = torch.linalg.cholesky_ex(Mat + jitter[:, None, None] * eye)
            L = torch.where(bad[:, None, None], L2, L)
            _mark(status, done, iters, it, [(bad & (info2 > 0), "numerical_error")])

        state = {
            "L": L,
            "rd": rd,
            "rq": rq,
            "rp": rp,
            "GL": GL,
            "nu": nu,
            "w": w,
            "lam": lam,
            "s": s,
            "y": y,
        }
        # predictor (affine scaling) step
        dlam, db, dnu, ds, dw = _gl_newton(state, -nu * w, -s * lam, bias)
        pairs = ((lam, dlam), (s, ds), (nu, dnu), (w, dw))
        a_aff = _step_to_boundary(pairs).clamp(max=1.0)[:, None]
        mu_aff = (
            ((nu + a_aff * dnu) * (w + a_aff * dw)).sum(1)
            + ((s + a_aff * ds) * (lam + a_aff * dlam)).sum(1)
        ) / n_cons
        sigma = ((mu_aff / mu).clamp(0, 1)) ** 3
        # never aim the products below what the tolerance needs: overshooting complementarity
        # while the (bilinear) dual residual lags makes the Newton systems needlessly singular
        target = torch.maximum(sigma * mu, 0.1 * tol * lam.sum(1) / n_cons)[:, None]
        # corrector: centering plus the second-order terms of the complementarity products
        r_h = target - nu * w - dnu * dw
        r_n = target - s * lam - ds * dlam
        dlam, db, dnu, ds, dw = _gl_newton(state, r_h, r_n, bias)
        frac = torch.clamp(1.0 - mu, min=_STEP_FRACTION)  # bolder near the optimum
        pairs = ((lam, dlam), (s, ds), (nu, dnu), (w, dw))
        step = (frac * _step_to_boundary(pairs)).clamp(max=1.0)
        step = torch.where(done, torch.zeros_like(step), step)
        GD = unit_products(dlam)
        quad = (GD * dlam.unsqueeze(-1)).sum(1)  # dlam^T Q_h dlam
        gd = (GL * dlam.unsqueeze(-1)).sum(1)
        st = step[:, None]
        lam = lam + st * dlam
        s = s + st * ds
        nu = nu + st * dnu
        w = w + st * dw
        b = b + step * db
        GL = GL + step[:, None, None] * GD
        q = q + 2 * st * gd + st**2 * quad
    iters = [n if st != "max_iter" else it for n, st in zip(iters, status)]
    # a failed or unfinished problem returns its best iterate (its status says what happened)
    return {
        "status": status,
        "iterations": iters,
        "lam": best["lam"],
        "nu": best["nu"],
        "b": best["b"][:, 0],
        "best_gap": best_gap,
    }


def _group_lasso_solutions(
    kind: str,
    X: torch.Tensor,
    y: torch.Tensor,
    contexts: torch.Tensor,
    n_contexts: int,
    bias: bool,
    tol: float,
    max_iter: int,
) -> list[SVMSolution]:
    """Solve a batch of group-lasso SVMs (shared N, H, C); X (B, N, D), contexts (B, N, H)."""
    dev = X.device
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    B, N, D = X.shape
    H = contexts.shape[-1]
    Z = one_hot_contexts(contexts, n_contexts)
    # normalize the kernel to unit mean diagonal (scale-free tolerances and starting point)
    kappa = (X**2).sum(-1).mean(-1).clamp_min(1e-300)  # (B,)
    Xn = X / kappa.sqrt()[:, None, None]
    K = torch.bmm(Xn, Xn.transpose(1, 2)) * (y[:, :, None] * y[:, None, :])
    pre_infeasible = ~(contexts >= 0).any(-1).all(-1)  # a sample no unit sees has margin 0
    offsets = torch.arange(H, device=dev) * n_contexts
    gidx = torch.where(contexts >= 0, contexts.long() + offsets, -1)
    out = _group_lasso_ipm(K, Z, gidx, y, bias, tol, max_iter)
    _sync(dev)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    sols = []
    for i in range(B):
        status, message = out["status"][i], ""
        if bool(pre_infeasible[i]):
            status, message = "infeasible", "a sample has no active unit (its margin is 0)"
        elif status != "optimal":
            status, message = _feasibility_check(X[i], y[i], Z[i], bias, status)
        lam_n = out["lam"][i]
        # back to input units (X = sqrt(kappa) X_n): lam = lam_n / sqrt(kappa) and
        # zeta_h = nu_h G_h(lam) / sqrt(kappa), with G_h(lam) = G_h^normalized(lam_n)
        lam = lam_n / kappa[i].sqrt()
        G = (Z[i] * (lam * y[i])[:, None]).T @ X[i]  # (G, D): sum_{n in S_hc} lam_n y_n x_n
        nu = out["nu"][i]
        zeta = G.reshape(H, n_contexts, D) * (nu / kappa[i].sqrt())[:, None, None]
        b = float(out["b"][i]) if bias else 0.0
        sol = _finish_group_lasso(
            kind,
            status,
            zeta,
            b,
            lam,
            Z[i],
            X[i],
            y[i],
            contexts[i],
            bias,
            out["iterations"][i],
            elapsed / B,
            cpu / B,
            message,
        )
        sols.append(_check_certificate(sol, tol))
    return sols


def _feasibility_check(
    X: torch.Tensor, y: torch.Tensor, Z: torch.Tensor, bias: bool, status: str
) -> tuple[str, str]:
    """Tell an infeasible group-lasso SVM from a solver failure.

    Feasibility depends only on the margin constraints, not on the norm, so we solve the same
    constraints with the ridge norm ``sum_h ||zeta_h||^2`` (a kernel SVM with kernel
    ``<x_n, x_m> (Z Z^T)_nm``), whose QP interior-point method detects a diverging dual
    quickly. Called only when the group-lasso IPM did not converge.
    """
    Kx = (X @ X.T) * (Z @ Z.T)
    mask = torch.ones(1, len(y), dtype=torch.bool, device=X.device)
    check = _kernel_svm(Kx[None], y[None], mask, bias, 1e-8, 200)["status"][0]
    if check == "infeasible":
        return "infeasible", "the margin constraints cannot be met (ridge feasibility check)"
    return status, f"the constraints are feasible (ridge check: {check}) but the IPM stopped"


def _finish_group_lasso(
    kind, status, zeta, b, lam, Z, X, y, contexts, bias, iters, elapsed, cpu, message
) -> SVMSolution:
    """Certificate and KKT residuals of a group-lasso SVM, recomputed in input space.

    Certified gap: the primal zeta scaled by ``1 / min(1, min margin)`` is feasible; the dual
    point (balanced to ``y^T lam = 0`` with a bias) scaled by ``1 / max(1, max_h ||G_h||)`` is
    feasible; the difference of their objectives bounds the suboptimality of both."""
    H, C, D = zeta.shape

    def group_sums(v: torch.Tensor) -> torch.Tensor:  # G_h(v), (H, C, D)
        return ((Z * (v * y)[:, None]).T @ X).reshape(H, C, D)

    margins = y * (predict_gln(zeta, X, contexts) + b)
    mmin = float(margins.min())
    norms = zeta.flatten(1).norm(dim=1)
    primal = float(norms.sum())
    gnorm = group_sums(lam).flatten(1).norm(dim=1)  # ||G_h||: dual feasibility needs <= 1
    lam_c = _balanced(lam, y) if bias else lam
    gnorm_c = group_sums(lam_c).flatten(1).norm(dim=1) if bias else gnorm
    dual = float(lam_c.sum()) / max(1.0, float(gnorm_c.max()))
    feasible_primal = primal / min(1.0, mmin) if mmin > 0 else math.inf
    gap = feasible_primal - dual
    big = norms > 1e-6 * max(float(norms.max()), 1e-300)
    station = float((1 - gnorm[big]).abs().max()) if bool(big.any()) else 0.0
    station = max(station, float((gnorm - 1).clamp_min(0).max()))
    lsum = max(float(lam.sum()), 1e-300)
    if bias:
        station = max(station, float((lam * y).sum().abs()) / lsum)
    compl = float((lam * (margins - 1).abs()).sum()) / lsum
    if status == "infeasible":
        zeta_out, gap, primal = None, math.inf, math.inf
        message = message or (
            "dual objective diverges: the data are not separable by this architecture"
        )
    else:
        zeta_out = zeta
    return SVMSolution(
        kind,
        status,
        zeta_out,
        b,
        lam,
        primal,
        dual,
        gap,
        gap / max(abs(dual), 1e-300),
        max(0.0, 1 - mmin),
        station,
        compl,
        iters,
        elapsed,
        cpu,
        message,
    )


# ----------------------------------------------------------------------------------------------
# public solvers: group lasso


def svm_gln(
    X: Array,
    y: Array,
    contexts: Array,
    n_contexts: int | None = None,
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """SVM-GLN, Eq. (20) / (52) of Lippl et al.: ``min_zeta sum_h ||zeta_h||_2`` s.t.
    ``y_n (sum_h <zeta_{h, c_hn}, x_n> + b) >= 1`` (``b = 0`` unless `bias`).

    ``X`` (N, D) (append the constant feature yourself), ``y`` (N,) in {-1, +1}, ``contexts``
    (N, H) int in range(C). Returns zeta (H, C, D); `objective` is ``sum_h ||zeta_h||_2``.

    Dual (derived from the Lagrangian ``sum_h ||zeta_h|| - sum_n lam_n (margin_n - 1)``; the
    infimum over zeta_h is 0 if ``||G_h||_F <= 1`` and -inf otherwise, where
    ``G_{hc} = sum_{n: c_hn = c} lam_n y_n x_n``): ``max sum(lam)`` s.t. ``lam >= 0`` and
    ``||G_h||_F^2 = lam^T Q_h lam <= 1`` for every h (``y^T lam = 0`` with a bias). With the
    constraints written as ``(lam^T Q_h lam - 1) / 2 <= 0`` and multipliers nu_h, stationarity
    gives ``sum_h nu_h (Q_h lam)_n = 1 + s_n`` = the margin of ``zeta_h = nu_h G_h``, and
    ``||zeta_h|| = nu_h`` on active constraints, so primal and dual objectives coincide
    (``sum_h nu_h = sum_n lam_n``): the constant is exactly 1 with this scaling.
    """
    return svm_gln_batch([X], [y], [contexts], n_contexts, bias, tol, max_iter, device)[0]


def svm_gln_batch(
    Xs,
    ys,
    contexts_list,
    n_contexts: int | None = None,
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> list[SVMSolution]:
    """`svm_gln` for several problems of the same (N, D, H) in one batched tensor program
    (e.g. the 3 context seeds of a configuration; pays on a GPU)."""
    dev = _device(device, *Xs)
    X = torch.stack([_tensor(x, dev) for x in Xs])
    y = torch.stack([_tensor(v, dev) for v in ys])
    ctx = torch.stack([_tensor(c, dev, torch.long) for c in contexts_list])
    _check_labels(y)
    if ctx.dim() != 3:
        raise ValueError("contexts must be (N, H) per problem")
    C = int(n_contexts if n_contexts is not None else int(ctx.max()) + 1)
    return _group_lasso_solutions("svm_gln", X, y, ctx, C, bias, tol, max_iter)


def svm_frelu(
    X: Array,
    y: Array,
    gates: Array,
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """FReLU SVM, Eq. (22) of Lippl et al. (SVM-RC with random gates, SVM-LC with the gates of a
    trained ReLU network): ``min sum_h ||zeta_h||_2`` s.t.
    ``y_n (sum_{h: gate_hn = 1} <zeta_h, x_n> + b) >= 1``; ``gates`` (N, H) boolean.

    The group lasso of `svm_gln` with one group per unit, used only by the samples whose gate
    is on. A sample with no open gate makes the problem infeasible (status "infeasible"),
    the paper's "constraints could not be satisfied" (footnote 8). Returns zeta (H, D).
    """
    dev = _device(device, X)
    g = _tensor(gates, dev, torch.bool)
    ctx = torch.where(g, 0, -1).long()
    sol = _group_lasso_solutions(
        "svm_frelu", _tensor(X, dev)[None], _tensor(y, dev)[None], ctx[None], 1, bias, tol, max_iter
    )[0]
    if sol.weights is not None:
        sol.weights = sol.weights[:, 0, :]
    return sol


# ----------------------------------------------------------------------------------------------
# public solvers: hard-margin kernel SVMs (the interior-point methods are in gln_ipm)


def context_kernel(contexts: torch.Tensor, n_contexts: int, variant: str = "exact") -> torch.Tensor:
    """The context part of the SVM-L2 kernel ``Phi^T N^+ Phi`` (the full kernel multiplies it
    elementwise by ``<x_n, x_m>``), from ``S_nm`` = number of units where n and m share their
    context.

    ``variant="exact"``: ``N = M`` of Eq. (24), whose eigenvalues are C (zero sum within each
    unit) and C H (constant), so ``||beta||_2^2 = C^(H-2) zeta^T M zeta`` over all C^H
    predictors and the kernel is ``(S_nm - (H - 1) / C) / C``. ``variant="eq23"``: ``N = A^2``
    with A as printed in Eq. (23)/(25), eigenvalues C^2 and 1, not those of M (Eq. 25's claim
    ``A^2 = M`` does not hold), so ``||A zeta||^2`` is a different norm of beta; kernel
    ``(S_nm - H / C) / C^2 + H / C``.
    """
    H = contexts.shape[-1]
    C = n_contexts
    Z = one_hot_contexts(contexts, C)
    S = Z @ Z.transpose(-1, -2)
    if variant == "exact":
        return (S - (H - 1) / C) / C
    if variant == "eq23":
        return (S - H / C) / C**2 + H / C
    raise ValueError(f"unknown variant {variant!r}; valid: 'exact', 'eq23'")


def svm_l2_batch(
    Xs,
    ys,
    contexts_list,
    n_contexts: int | None = None,
    variant: str = "exact",
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> list[SVMSolution]:
    """`svm_l2` for several problems of the same (N, D, H) at once."""
    dev = _device(device, *Xs)
    X = torch.stack([_tensor(x, dev) for x in Xs])
    y = torch.stack([_tensor(v, dev) for v in ys])
    ctx = torch.stack([_tensor(c, dev, torch.long) for c in contexts_list])
    _check_labels(y)
    B, N, D = X.shape
    H = ctx.shape[-1]
    C = int(n_contexts if n_contexts is not None else int(ctx.max()) + 1)
    if bool((ctx < 0).any()):
        raise ValueError("svm_l2 needs every unit's context in range(C)")
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    Kx = torch.bmm(X, X.transpose(1, 2)) * context_kernel(ctx, C, variant)
    mask = torch.ones(B, N, dtype=torch.bool, device=dev)
    out = _kernel_svm(Kx, y, mask, bias, tol, max_iter)
    Z = one_hot_contexts(ctx, C)
    _sync(dev)
    elapsed, cpu = (time.perf_counter() - t0) / B, (time.process_time() - c0) / B
    # zeta = N^+ Phi lam = a G_hc + (b'/C - a/C) w0 with N^+ = a P_within + b' P_const
    a, bc = (1 / C, 1 / (C * H)) if variant == "exact" else (1 / C**2, 1.0)
    # reported objective, as in `implicit_bias.models.gln_svm.svm_l2`: ||beta||^2 / C^(H-1)
    # = zeta^T M zeta / C ("exact"), ||A zeta||^2 / C^2 ("eq23")
    scale = 1 / C if variant == "exact" else 1 / C**2
    sols = []
    for i in range(B):
        lam = out["lam"][i]
        G = ((Z[i] * (lam * y[i])[:, None]).T @ X[i]).reshape(H, C, D)
        w0 = (lam * y[i]) @ X[i]  # sum_n lam_n y_n x_n
        zeta = a * G + (bc / C - a / C) * w0
        sol = _finish_kernel(
            "svm_l2",
            out["status"][i],
            lam,
            float(out["b"][i]),
            Kx[i],
            y[i],
            mask[i],
            bias,
            out["iterations"][i],
            elapsed,
            cpu,
            zeta,
            objective_scale=scale,
            extra={"variant": variant},
        )
        sol = _check_certificate(sol, tol)
        if sol.weights is not None:  # cross-check the closed-form zeta against the kernel margins
            direct = y[i] * (predict_gln(zeta, X[i], ctx[i]) + sol.bias)
            sol.extra["zeta_margin_mismatch"] = float(
                (direct - y[i] * (Kx[i] @ (lam * y[i]) + sol.bias)).abs().max()
            )
        sols.append(sol)
    return sols


def svm_l2(
    X: Array,
    y: Array,
    contexts: Array,
    n_contexts: int | None = None,
    variant: str = "exact",
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
    norm: str | None = None,
) -> SVMSolution:
    """SVM-L2 of Lippl et al. (Sec. 4.1, Appendix A): the deep GLN's architectural constraints
    with the L2 norm of all C^H predictors, ``min zeta^T N zeta`` s.t.
    ``y_n (sum_h <zeta_{h, c_hn}, x_n> + b) >= 1``, with ``N = M`` (Eq. 24,
    `variant="exact"`: ``zeta^T M zeta = ||beta||_2^2 / C^(H-2)``, never enumerating the C^H
    predictors) or ``N = A^2`` (`variant="eq23"`, the paper's ``||A zeta||_2^2``, which Eq. 25
    wrongly equates with M; see `context_kernel`).

    Solved through its dual, a hard-margin kernel SVM with kernel ``<x_n, x_m> k_ctx(n, m)``
    (`context_kernel`); zeta is recovered in closed form as ``N^+ Phi lam`` (the minimum-norm
    zeta of the optimal beta). `objective` follows `implicit_bias.models.gln_svm.svm_l2`:
    ``||beta||^2 / C^(H-1)`` for "exact", ``||A zeta||^2 / C^2`` for "eq23". (`norm` is an
    older name of `variant`, kept for callers written against it.)
    """
    variant = norm if norm is not None else variant
    return svm_l2_batch([X], [y], [contexts], n_contexts, variant, bias, tol, max_iter, device)[0]


def svm_linear(
    F: Array,
    y: Array,
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """Hard-margin linear SVM ``min ||w||_2^2`` s.t. ``y_n (<w, f_n> + b) >= 1`` (SVM-HL of
    Sec. 5.2 with F the ReLU network's hidden-layer activations). Returns w (D,);
    `objective` is ``||w||_2^2``."""
    dev = _device(device, F)
    F = _tensor(F, dev)
    y = _tensor(y, dev)
    _check_labels(y)
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    Kx = (F @ F.T)[None]
    mask = torch.ones(1, len(y), dtype=torch.bool, device=dev)
    out = _kernel_svm(Kx, y[None], mask, bias, tol, max_iter)
    _sync(dev)
    lam = out["lam"][0]
    w = (lam * y) @ F
    sol = _finish_kernel(
        "svm_linear",
        out["status"][0],
        lam,
        float(out["b"][0]),
        Kx[0],
        y,
        mask[0],
        bias,
        out["iterations"][0],
        time.perf_counter() - t0,
        time.process_time() - c0,
        w,
    )
    return _check_certificate(sol, tol)


def svm_shallow(
    X: Array,
    y: Array,
    context: Array,
    n_contexts: int,
    bias: bool = False,
    tol: float = 1e-10,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> SVMSolution:
    """The shallow GLN's SVM (Sec. 4.1, Fig. 2c): one hard-margin SVM per context,
    ``min sum_c ||beta_c||_2^2`` s.t. ``y_n (<beta_{c_n}, x_n> + b_{c_n}) >= 1``.

    ``context`` (N,) (or (N, 1)) in range(n_contexts). The per-context problems are
    independent; we batch them in groups of similar size (`_shallow_groups`: samples padded to
    the group's largest context, at most twice a context's own size, where padding everything
    to the largest context cost up to 100x the work with unbalanced contexts). A
    context without samples gets beta_c = 0 (its points are predicted as 0, i.e. undecided);
    with `bias`, a context with a single class gets beta_c = 0 and b_c = its label (the
    minimum-norm solution). Returns beta (C, D); the per-context biases are in
    ``extra["biases"]`` and ``bias`` is 0. `objective` is ``sum_c ||beta_c||_2^2``.
    Without `bias`, a context with more samples than features is solved in feature space
    (`_primal_svm_ipm`) from the start: its kernel has rank <= D, so the kernel form's Newton
    systems turn singular and it stalled at `max_iter` (measured: 121 iterations, 9 s, for the
    2,000 samples of one context, against 20 in feature space); contexts whose kernel-form IPM
    stalls all the same (barely separable data, round-off) are solved again in feature space.
    The certificate below is recomputed from the final beta and multipliers either way.
    """
    dev = _device(device, X)
    X = _tensor(X, dev)
    y = _tensor(y, dev)
    _check_labels(y)
    ctx = _tensor(context, dev, torch.long).reshape(-1)
    C = int(n_contexts)
    N, D = X.shape
    _sync(dev)
    t0, c0 = time.perf_counter(), time.process_time()
    order = torch.argsort(ctx, stable=True)
    counts = torch.bincount(ctx, minlength=C)
    pos_counts = torch.bincount(ctx[y > 0], minlength=C)
    solve_ctx = counts > 0
    if bias:
        solve_ctx &= (pos_counts > 0) & (pos_counts < counts)
    ids = torch.nonzero(solve_ctx).flatten()
    beta = torch.zeros(C, D, dtype=torch.float64, device=dev)
    biases = (
        torch.where(pos_counts > 0, 1.0, -1.0).to(torch.float64)
        if bias
        else torch.zeros(C, dtype=torch.float64, device=dev)
    )
    biases = torch.where(counts > 0, biases, torch.zeros_like(biases))
    lam_all = torch.zeros(N, dtype=torch.float64, device=dev)
    statuses: list[str] = []
    iters = 0
    starts = torch.cumsum(counts, 0) - counts
    for group, primal in _shallow_groups(counts[ids], D, bias):
        gids = ids[group]
        m = int(counts[gids].max())
        slot = torch.arange(m, device=dev)[None, :]
        mask = slot < counts[gids][:, None]
        index = (starts[gids][:, None] + slot).clamp(max=N - 1)
        sample = torch.where(mask, order[index], torch.zeros_like(index))
        Xb = X[sample] * mask[..., None]
        yb = torch.where(mask, y[sample], torch.ones_like(y[sample]))
        if primal:
            out = _primal_svm_ipm(Xb, yb, mask, tol, max_iter)
            lam = out["lam"]
            beta[gids] = out["w"]
        else:
            out = _kernel_svm(torch.bmm(Xb, Xb.transpose(1, 2)), yb, mask, bias, tol, max_iter)
            lam = out["lam"] * mask
            beta[gids] = torch.einsum("bm,bmd->bd", lam * yb, Xb)
            stalled = [i for i, st in enumerate(out["status"]) if st == "max_iter"]
            if stalled and not bias:
                # a barely separable context stalls the kernel form in round-off; the
                # feature-space form is well conditioned there (its certificate decides)
                sel = torch.tensor(stalled, device=dev)
                redo = _primal_svm_ipm(Xb[sel], yb[sel], mask[sel], tol, max_iter)
                beta[gids[sel]] = redo["w"]
                lam[sel] = redo["lam"]
                for j, i in enumerate(stalled):
                    out["status"][i] = redo["status"][j]
                    out["iterations"][i] += redo["iterations"][j]
            if bias:
                biases[gids] = out["b"]
        lam_all[sample[mask]] = lam[mask]
        statuses += out["status"]
        iters = max(iters, *out["iterations"])
    _sync(dev)
    bad = [st for st in statuses if st != "optimal"]
    status = "optimal" if not bad else ("infeasible" if "infeasible" in bad else bad[0])
    # certificate over all contexts at once: the problems separate, so sums of gaps are a gap
    scores = (X * beta[ctx]).sum(1) + biases[ctx]
    margins = y * scores
    mmin = float(margins.min())
    wsq = float((beta**2).sum())
    lam_c = _balanced(lam_all, y, ctx) if bias else lam_all
    beta_c = torch.zeros_like(beta).index_add_(0, ctx, (lam_c * y)[:, None] * X)
    dual = 2 * float(lam_c.sum()) - float((beta_c**2).sum())
    # each context's primal is scaled to feasibility separately
    cmin = torch.full((C,), math.inf, dtype=X.dtype, device=dev).scatter_reduce(
        0, ctx, margins, "amin"
    )
    per_ctx = (beta**2).sum(1) / cmin.clamp(max=1.0) ** 2
    feas = float(per_ctx[solve_ctx].sum()) if bool((cmin[solve_ctx] > 0).all()) else math.inf
    gap = feas - dual
    lsum = max(float(lam_all.sum()), 1e-300)
    compl = float((lam_all * (margins - 1).abs()).sum()) / lsum
    station = 0.0
    if bias:
        eq = torch.zeros(C, dtype=X.dtype, device=dev).index_add_(0, ctx, lam_all * y)
        station = float(eq.abs().max()) / lsum
    msg = ""
    if bad:
        msg = f"{len(bad)} of {len(statuses)} per-context SVMs not optimal: {sorted(set(bad))}"
    single = int(((pos_counts == 0) | (pos_counts == counts)).sum() - (counts == 0).sum())
    extra = {
        "biases": biases,
        "empty_contexts": int((counts == 0).sum()),
        "single_class_contexts": single,
        "n_contexts_solved": int(len(ids)),
    }
    sol = SVMSolution(
        "svm_shallow",
        status,
        beta if status != "infeasible" else None,
        0.0,
        lam_all,
        wsq,
        dual,
        gap,
        gap / max(abs(dual), 1e-300),
        max(0.0, 1 - mmin),
        station,
        compl,
        iters,
        time.perf_counter() - t0,
        time.process_time() - c0,
        msg,
        extra,
    )
    return _check_certificate(sol, tol)


def predict_shallow(
    beta: torch.Tensor, X: Array, context: Array, biases: torch.Tensor | None = None
) -> torch.Tensor:
    """Output of the shallow GLN's SVM: ``<beta_{c(x)}, x> (+ b_{c(x)})``."""
    X = _tensor(X, beta.device)
    ctx = _tensor(context, beta.device, torch.long).reshape(-1)
    out = (X * beta[ctx]).sum(1)
    return out + biases[ctx] if biases is not None else out


# older names, kept for callers written against them
shallow_svm = svm_shallow
linear_svm = svm_linear
