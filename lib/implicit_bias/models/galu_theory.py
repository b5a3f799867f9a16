"""GaLU networks' theory checks: Theorem 1 (the expected optimal training loss of a GaLU network
over random labels is ``1 - rank(X_bar)/m``), the rank of ``X_bar`` and a bound on it that holds
for every draw, and Lemma 1 (Rosset & Tibshirani's expected train and test loss of least
squares), each with its Monte Carlo check in batches (Fiat, Malach & Shalev-Shwartz, Sec. 4).

The models themselves (gates, the feature map ``Phi_u``, the closed-form fit) are in
`implicit_bias.models.galu`.
"""

from __future__ import annotations

import math

import torch

from .galu import feature_rank, galu_features, gate_values

MC_BATCHES = 20  # Monte Carlo batches per case (``batch_means``)


def theorem1_monte_carlo(
    X: torch.Tensor,
    U: torch.Tensor,
    gate: str,
    n_labels: int,
    generator: torch.Generator,
    confirmatory_batches: int = 0,
) -> dict:
    """Monte Carlo of Theorem 1: ``E_y[min_w L_S(w)] = 1 - rank(X_bar)/m`` for ``y ~ N(0, I_m)``.

    The two sides are computed independently: the optimal training loss of each of the
    ``n_labels`` label vectors by least squares on the explicit features (LAPACK ``gelsd`` on
    CPU; ``gels`` on CUDA, where it needs full column rank), the residual
    ``||X_bar w - y||^2 / m`` evaluated from the fitted ``w``; the formula from the numerical
    rank of ``X_bar`` by its singular values. An error in either (a wrong rank, a wrong fit)
    moves one side only. ``mc_se`` is the formula's own standard error
    ``sqrt(2 (m - r)) / m / sqrt(n_labels)`` (``m * min L_S ~ chi^2_{m - r}``).

    ``confirmatory_batches`` more batches of the same size (a seed plan's new "seeds") are
    drawn after the ``n_labels`` label vectors and appended to ``mc_batch_means``; the first
    ``MC_BATCHES`` batches and every other output are the same with or without them.
    """
    Phi = galu_features(X, U, gate)
    m = Phi.shape[0]
    r = feature_rank(Phi)
    Y = torch.randn(m, n_labels, generator=generator, dtype=Phi.dtype).to(Phi.device)
    # gelsd (SVD-based) on CPU: torch's gelsy and gels return wrong fits for wide X_bar (kd > m)
    # with one thread (a residual of 0.87 where it is 0), so they cannot be the check's reference
    driver = "gelsd" if Phi.device.type == "cpu" else None

    def optimal_losses(Y: torch.Tensor) -> torch.Tensor:
        w = torch.linalg.lstsq(Phi, Y, driver=driver).solution
        return ((Phi @ w - Y) ** 2).sum(0) / m

    losses = optimal_losses(Y)
    means = batch_means(losses)
    if confirmatory_batches:
        size = n_labels // MC_BATCHES
        Y_new = torch.randn(m, confirmatory_batches * size, generator=generator, dtype=Phi.dtype)
        means += batch_means(optimal_losses(Y_new.to(Phi.device)), confirmatory_batches)
    return {
        "mc_mean": float(losses.mean()),
        "formula": 1.0 - r / m,
        "rank": r,
        "min_m_kd": min(m, Phi.shape[1]),
        "mc_se": math.sqrt(2 * (m - r)) / m / math.sqrt(n_labels),
        "mc_batch_means": means,
    }


def batch_means(values: torch.Tensor, n_batches: int = MC_BATCHES) -> list[float]:
    """Means of ``n_batches`` consecutive, equal-as-possible blocks of a Monte Carlo sample:
    independent estimates of its mean, from which a t interval of the mean is formed (the
    claims' decision rule, ``core.verdicts.decision``)."""
    return [float(b.mean()) for b in torch.tensor_split(values, min(n_batches, len(values)))]


def rank_upper_bound(X: torch.Tensor, U: torch.Tensor) -> int:
    """An upper bound on ``rank(X_bar)`` for 0-1 gates that holds for every draw (Sec. 4.1).

    Row i of ``X_bar`` is ``s_i kron x_i`` with ``s_i in {0,1}^k`` the gate pattern of ``x_i``.
    Rows sharing a pattern ``s`` lie in ``{s kron z}``, of dimension ``d``, so together they
    span at most ``min(d, n_s)`` dimensions (``0`` for the all-closed pattern); and every row
    lies in ``rowspace(S) kron R^d``. Hence ``rank(X_bar) <= min(m, kd, sum_s min(d, n_s),
    d rank(S))``. The paper's ``min(m, kd)`` is the first two terms; the third bites when many
    points have all gates closed (few gates) or share patterns (low dimension), the fourth when
    the gate patterns span fewer than ``k`` dimensions (low dimension).
    """
    m, d = X.shape
    k = U.shape[1]
    S = gate_values(X @ U, "step")
    patterns, counts = torch.unique(S, dim=0, return_counts=True)
    open_ = patterns.sum(1) > 0
    by_pattern = int(torch.clamp(counts[open_], max=d).sum())
    by_span = d * feature_rank(S)
    return min(m, k * d, by_pattern, by_span)


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
    confirmatory_batches: int = 0,
) -> dict:
    """Monte Carlo of Lemma 1 on ``D_{sigma,beta}``: x ~ N(0, I_d), y = x^T beta + sigma eps.

    Batched over ``n_rep`` training sets. The test loss of ``w`` is exact, not sampled:
    ``L_D(w) = sigma^2 + ||w - beta||^2`` for Gaussian x. Returns means, standard errors and
    medians of the train and test losses (the test loss has infinite variance for m < d + 4,
    so its standard error is not meaningful there). ``confirmatory_batches``: as in
    `theorem1_monte_carlo`, batches of ``n_rep / MC_BATCHES`` more training sets, drawn after
    the ``n_rep`` and appended to the batch means only.
    """
    g = torch.Generator().manual_seed(seed)
    dt = torch.float64
    beta = torch.randn(d, generator=g, dtype=dt)
    beta = (beta / beta.norm() * beta_norm).to(device)

    def losses(n_sets: int) -> tuple[torch.Tensor, torch.Tensor]:
        trains, tests = [], []
        for start in range(0, n_sets, chunk):  # chunks bound the memory of (n, m, d) batches
            n = min(chunk, n_sets - start)
            X = torch.randn(n, m, d, generator=g, dtype=dt).to(device)
            eps = torch.randn(n, m, 1, generator=g, dtype=dt).to(device)
            y = X @ beta[:, None] + sigma * eps
            # m > d + 1: X has full column rank a.s., so the normal equations are well posed.
            w = torch.linalg.solve(X.mT @ X, X.mT @ y)
            trains.append(((X @ w - y) ** 2).mean(dim=(1, 2)))
            tests.append(sigma**2 + ((w[..., 0] - beta) ** 2).sum(-1))
        return torch.cat(trains), torch.cat(tests)

    train, test = losses(n_rep)
    train_means, test_means = batch_means(train), batch_means(test)
    if confirmatory_batches:
        new_train, new_test = losses(confirmatory_batches * (n_rep // MC_BATCHES))
        train_means += batch_means(new_train, confirmatory_batches)
        test_means += batch_means(new_test, confirmatory_batches)
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
        "train_batch_means": train_means,
        "test_batch_means": test_means,
    }
