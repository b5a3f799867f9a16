"""Theory helpers for Lippl, Abbott & Chung (2022): the GLN norm and the architecture's
constraints (Sec. 4, Lemmas B.6 and B.7, Eq. 16-25), the KKT conditions of the SVM-GLN (Eq. 56),
and Theorem 3.1 on Fig. 1's toy problem (full-batch gradient descent and the approximate KKT
residuals of Eq. 7). Small problems, float64, numpy and cvxpy. Data convention:
`implicit_bias.models.gln`.
"""

from __future__ import annotations

import itertools
import math

import cvxpy as cp
import numpy as np

from .gln import one_hot_contexts, predict_gln
from .gln_svm import SVMResult, dual_directions

# -------------------------------------------------------------------------------------------
# The GLN norm and the architecture's constraints (Sec. 4, Lemmas B.6/B.7, Eq. 16-25, Eq. 56)
# -------------------------------------------------------------------------------------------


def zeta_from_weights(w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """zeta_hc = w2_h w1_hc (Eq. 17); w1 (H, C, D), w2 (H,)."""
    return w2[:, None, None] * w1


def all_predictors(zeta: np.ndarray) -> np.ndarray:
    """Every global context's predictor beta_gamma = sum_h zeta[h, gamma_h] (Eq. 15), as an
    array of shape (C,)*H + (D,). Enumerates C^H predictors: small H and C only."""
    H, C, D = zeta.shape
    beta = np.zeros((C,) * H + (D,))
    for h in range(H):
        shape = [1] * H + [D]
        shape[h] = C
        beta = beta + zeta[h].reshape(shape)
    return beta


def equivariance_residual(beta: np.ndarray) -> float:
    """Largest violation of Lemma B.6 / Eq. (16): for every unit h, the difference between two
    predictors that differ only in unit h's context is the same whatever the other contexts.
    `beta` as returned by `all_predictors`. Zero for any GLN."""
    H = beta.ndim - 1
    worst = 0.0
    for h in range(H):
        diff = np.diff(beta, axis=h)  # beta[.., c+1, ..] - beta[.., c, ..] along unit h
        ref = diff[tuple([0] * h + [slice(None)] + [0] * (H - h - 1))]  # others at context 0
        worst = max(
            worst,
            float(np.abs(diff - np.expand_dims(ref, tuple(i for i in range(H) if i != h))).max()),
        )
    return worst


def predictor_map_rank(n_units: int, n_contexts: int) -> int:
    """Rank of the linear map zeta -> (beta_gamma)_gamma for D = 1 (Lemma B.7: the number of
    freely choosable predictors, (C-1)H + 1)."""
    H, C = n_units, n_contexts
    rows = [
        np.concatenate([np.eye(C)[g] for g in gamma])
        for gamma in itertools.product(range(C), repeat=H)
    ]
    return int(np.linalg.matrix_rank(np.array(rows)))


def m_matrix(n_units: int, n_contexts: int) -> np.ndarray:
    """M of Eq. (24) on the (h, c) indices (the d index is a Kronecker identity):
    M = C delta_hh' delta_cc' + (1 - delta_hh')."""
    H, C = n_units, n_contexts
    same_h = np.kron(np.eye(H), np.ones((C, C)))
    return C * np.eye(H * C) + (1.0 - same_h)


def a_matrix(n_units: int, n_contexts: int, corrected: bool = False) -> np.ndarray:
    """A of the ansatz below Eq. (24): alpha + beta delta_hh' + gamma delta_cc' + kappa
    delta_hh' delta_cc'. `corrected=False`: Eq. (25) as printed (1/(HC), -1, 0, C).
    `corrected=True`: the coefficients that do solve A^2 = M, (1/sqrt(HC), -1/sqrt(C), 0,
    sqrt(C)) (derived in the chapter)."""
    H, C = n_units, n_contexts
    if corrected:
        a, b, k = 1 / math.sqrt(H * C), -1 / math.sqrt(C), math.sqrt(C)
    else:
        a, b, k = 1 / (H * C), -1.0, float(C)
    same_h = np.kron(np.eye(H), np.ones((C, C)))
    return a * np.ones((H * C, H * C)) + b * same_h + k * np.eye(H * C)


def a_squared_minus_m(n_units: int, n_contexts: int, corrected: bool = False) -> float:
    """max |A^2 - M|: zero iff Eq. (25)'s claim A^2 = M holds."""
    A = a_matrix(n_units, n_contexts, corrected)
    return float(np.abs(A @ A - m_matrix(n_units, n_contexts)).max())


def beta_norm_sq_closed_form(zeta: np.ndarray) -> float:
    """sum_gamma ||beta_gamma||^2 = C^(H-1) (C ||sum_h m_h||^2 + sum_hc ||r_hc||^2) (exact)."""
    H, C, _ = zeta.shape
    m = zeta.mean(1)
    r = zeta - m[:, None]
    return C ** (H - 1) * (C * float((m.sum(0) ** 2).sum()) + float((r**2).sum()))


def beta_norm_sq_eq24(zeta: np.ndarray) -> float:
    """C^(H-2) zeta^T M zeta, the paper's intermediate result below Eq. (24)."""
    H, C, D = zeta.shape
    z = zeta.reshape(H * C, D)
    return C ** (H - 2) * float(np.einsum("id,ij,jd->", z, m_matrix(H, C), z))


def a_zeta_norm_sq(zeta: np.ndarray, corrected: bool = False) -> float:
    """||A zeta||^2 with A from Eq. (23)/(25) (or the corrected A)."""
    H, C, D = zeta.shape
    Az = a_matrix(H, C, corrected) @ zeta.reshape(H * C, D)
    return float((Az**2).sum())


def gln_norm(beta: np.ndarray, solver: str = "CLARABEL") -> float:
    """||beta||_GLN by Eq. (20): min sum_h ||zeta_h||_F s.t. beta_gamma = sum_h zeta[h, gamma_h]
    for all C^H global contexts; `beta` as from `all_predictors` (small H, C)."""
    H = beta.ndim - 1
    C, D = beta.shape[0], beta.shape[-1]
    zeta = [cp.Variable((C, D)) for _ in range(H)]
    cons = [
        sum(zeta[h][g[h]] for h in range(H)) == beta[g]
        for g in itertools.product(range(C), repeat=H)
    ]
    problem = cp.Problem(cp.Minimize(sum(cp.norm(z, "fro") for z in zeta)), cons)
    problem.solve(solver=solver)
    return float(problem.value)


def gln_norm_eq21(beta: np.ndarray) -> float:
    """The closed form printed as Eq. (21) for H = C = 2, beta (2, 2, D):
    sqrt(||beta||^2 + 1/2 sum_ij ||beta_ij - beta_{i'j}|| ||beta_ij - beta_{ij'}||)."""
    total: float | np.floating = float((beta**2).sum())
    for i, j in itertools.product(range(2), repeat=2):
        total += 0.5 * (
            np.linalg.norm(beta[i, j] - beta[1 - i, j])
            * np.linalg.norm(beta[i, j] - beta[i, 1 - j])
        )
    return math.sqrt(total)


def svm_gln_kkt(
    res: SVMResult, X: np.ndarray, y: np.ndarray, contexts: np.ndarray, n_contexts: int
) -> dict[str, float]:
    """KKT residuals of Eq. (52) at (zeta, lambda) from a solver: primal feasibility
    max(0, 1 - margin), dual feasibility (lambda >= 0 and ||g_h|| <= 1), complementary slackness
    max lambda_n |margin_n - 1|, stationarity of Eq. (56) max_h ||zeta_h - ||zeta_h|| g_h|| /
    max_h ||zeta_h||, and the duality gap |sum_h ||zeta_h|| - sum_n lambda_n| / objective.
    """
    zeta, lam = res.primal, res.dual
    assert zeta is not None and lam is not None
    margin = y * predict_gln(zeta, X, contexts)
    g = dual_directions(X, y, contexts, n_contexts, lam)
    H = zeta.shape[0]
    zn = np.linalg.norm(zeta.reshape(H, -1), axis=1)
    gn = np.linalg.norm(g.reshape(H, -1), axis=1)
    stat = np.linalg.norm((zeta - zn[:, None, None] * g).reshape(H, -1), axis=1)
    return {
        "primal_feasibility": float(np.maximum(0.0, 1.0 - margin).max()),
        "dual_feasibility": float(max(np.maximum(0.0, -lam).max(), np.maximum(0, gn - 1).max())),
        "complementary_slackness": float(np.max(lam * np.abs(margin - 1.0))),
        "stationarity": float(stat.max() / zn.max()),
        "duality_gap": float(abs(zn.sum() - lam.sum()) / zn.sum()),
    }


# -------------------------------------------------------------------------------------------
# Theorem 3.1 on a small separable problem (Fig. 1's two-dimensional GLN with H = C = 2)
# -------------------------------------------------------------------------------------------


def toy_problem(n_points: int = 40, seed: int = 0, min_margin: float = 0.1) -> dict:
    """Fig. 1's setting: x in [-1, 1]^2 with a constant feature (D = 3); unit 0's context is
    [x1 > 0], unit 1's is [x2 > 0] (H = C = 2); labels from a random teacher GLN, keeping only
    points with teacher margin >= `min_margin` (relative), so the data are GLN-separable."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(2, 2, 3))
    pts: list[tuple[np.ndarray, np.ndarray, float]]
    pts, X, ctx = [], None, None
    while len(pts) < n_points:
        x = rng.uniform(-1, 1, size=2)
        xf = np.array([x[0], x[1], 1.0])
        c = np.array([[int(x[0] > 0), int(x[1] > 0)]])
        f = predict_gln(teacher, xf[None], c)[0]
        if abs(f) >= min_margin * np.abs(teacher).sum() / 4:
            pts.append((xf, c[0], np.sign(f)))
    X = np.array([p[0] for p in pts])
    ctx = np.array([p[1] for p in pts], dtype=np.int64)
    y = np.array([p[2] for p in pts])
    return {"X": X, "y": y, "ctx": ctx, "teacher": teacher}


def toy_contexts(X: np.ndarray) -> np.ndarray:
    """The toy's contexts: unit 0 looks at the sign of x1, unit 1 at the sign of x2."""
    return np.stack([X[:, 0] > 0, X[:, 1] > 0], 1).astype(np.int64)


def gln_margins(
    w1: np.ndarray, w2: np.ndarray, X: np.ndarray, y: np.ndarray, ctx: np.ndarray
) -> np.ndarray:
    """y_n f_w(x_n) for the bias-free (homogeneous) deep GLN."""
    return y * predict_gln(zeta_from_weights(w1, w2), X, ctx)


def train_full_batch_gln(
    X: np.ndarray,
    y: np.ndarray,
    ctx: np.ndarray,
    n_contexts: int,
    n_steps: int,
    lr: float,
    init_scale: float = 0.1,
    seed: int = 0,
    loss: str = "logistic",
    record: list[int] | None = None,
    normalized: bool = False,
) -> list[dict]:
    """Full-batch gradient descent on the homogeneous deep GLN (no output bias, as Theorem 3.1
    assumes) with the logistic or exponential loss (mean over samples), float64, hand-written
    gradients (numpy; a tiny problem trained for many steps). With `normalized`, the step size is
    lr / loss (gradient descent on log L, which only speeds up the approach to the same limit
    direction; Nacson et al., 2019). Returns snapshots (step, w1, w2, loss) at `record` steps."""
    rng = np.random.default_rng(seed)
    N, D = X.shape
    H: int = ctx.shape[1]
    w1 = init_scale * rng.normal(size=(H, n_contexts, D))
    w2 = init_scale * rng.normal(size=H)
    gates = one_hot_contexts(ctx, n_contexts)  # (N, H, C)
    record = sorted(set(record or [n_steps]))
    snaps: list[dict] = []
    for step in range(n_steps + 1):
        # per-unit outputs u[n, h] = <w1[h, c_nh], x_n>
        u = np.einsum("nhc,hcd,nd->nh", gates, w1, X)
        margin = y * (u @ w2)
        # log of each sample's loss and of d loss / d margin, in log space so that the
        # normalized steps survive losses far below the float64 range
        if loss == "logistic":
            log_ell = np.where(margin > 30, -margin, np.log(np.logaddexp(0, -margin)))
            log_slope = -np.logaddexp(0, margin)  # log sigmoid(-m)
        elif loss == "exponential":
            log_ell = log_slope = -margin
        else:
            raise ValueError(f"unknown loss {loss!r}; valid: 'logistic', 'exponential'")
        log_value = float(np.logaddexp.reduce(log_ell) - math.log(N))
        value = math.exp(log_value)
        log_eta = math.log(lr) - (log_value if normalized else 0.0)
        dmargin = -np.exp(log_slope + log_eta) / N  # step size folded in
        if step == record[len(snaps)]:
            snaps.append(
                {
                    "step": step,
                    "w1": w1.copy(),
                    "w2": w2.copy(),
                    "loss": value,
                    "log_loss": log_value,
                }
            )
            if len(snaps) == len(record):
                break
        g = dmargin * y  # dL/df_n
        grad_w2 = g @ u
        grad_w1 = np.einsum("n,nhc,nd->hcd", g, gates, X) * w2[:, None, None]
        w1 -= grad_w1
        w2 -= grad_w2
    return snaps


def kkt_residual_eq7(
    w1: np.ndarray,
    w2: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    ctx: np.ndarray,
    lam: np.ndarray | None = None,
) -> dict[str, float]:
    """How far w is from a KKT point of Eq. (6)/(7) (Theorem 3.1), with the multipliers the
    proof uses: lambda_n proportional to the loss-gradient weights exp(-margin_n) (the exponential
    tail of the logistic and exponential losses). After rescaling w so its smallest margin is 1
    (degree-2 homogeneity):

    * stationarity: min_{c > 0} ||w - c sum_n lambda_n y_n grad_w f_w(x_n)|| / ||w||, i.e. the
      sine of the angle between w and the negative loss gradient (Lyu & Li's approximate KKT);
    * complementary slackness: sum_n lambda_n (margin_n - 1) / sum_n lambda_n.

    Both tend to 0 as gradient descent converges in direction; they need no guess of the
    support set. Given multipliers `lam` (e.g. the SVM-GLN's), those are used instead."""
    H, C, D = w1.shape
    raw = gln_margins(w1, w2, X, y, ctx)
    if raw.min() <= 0:  # not yet separating: no KKT point to be near
        return {"stationarity": float("nan"), "complementary_slackness": float("nan")}
    if lam is None:
        lam = np.exp(-(raw - raw.min()))  # proportional to exp(-margin), overflow-safe
    margin = raw / raw.min()
    gates = one_hot_contexts(ctx, C)
    u = np.einsum("nhc,hcd,nd->nh", gates, w1, X)
    ly = lam * y
    direction = np.concatenate(
        [(np.einsum("n,nhc,nd->hcd", ly, gates, X) * w2[:, None, None]).ravel(), ly @ u]
    )
    w = np.concatenate([w1.ravel(), w2])
    cos = float(w @ direction / np.linalg.norm(w) / np.linalg.norm(direction))
    return {
        "stationarity": math.sqrt(max(0.0, 1.0 - cos**2)) if cos > 0 else 1.0,
        "complementary_slackness": float(lam @ (margin - 1) / lam.sum()),
    }


def theorem_trajectory(problem: dict, snaps: list[dict], svm: SVMResult) -> list[dict]:
    """Per snapshot: cosine between the GD-GLN's zeta (Eq. 17) and the SVM-GLN solution, the
    cosine of the C^H predictors beta, the normalized margin min_n y_n f(x_n) / sum_h ||zeta_h||
    relative to the SVM-GLN's 1 / objective, and the Eq. (7) KKT residuals."""
    X, y, ctx = problem["X"], problem["y"], problem["ctx"]
    z_star = svm.primal
    assert z_star is not None
    b_star = all_predictors(z_star).ravel()
    rows = []
    for s in snaps:
        z = zeta_from_weights(s["w1"], s["w2"])
        b = all_predictors(z).ravel()
        H = z.shape[0]
        group = np.linalg.norm(z.reshape(H, -1), axis=1).sum()
        margin = (y * predict_gln(z, X, ctx)).min()
        rows.append(
            {
                "step": s["step"],
                "log10_loss": s["log_loss"] / math.log(10),
                "cos_zeta": float(
                    z.ravel() @ z_star.ravel() / np.linalg.norm(z) / np.linalg.norm(z_star)
                ),
                "cos_beta": float(b @ b_star / np.linalg.norm(b) / np.linalg.norm(b_star)),
                "margin_ratio": float(margin / group * svm.objective),
                **kkt_residual_eq7(s["w1"], s["w2"], X, y, ctx),
            }
        )
    return rows
