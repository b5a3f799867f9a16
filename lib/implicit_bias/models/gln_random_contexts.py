"""SVM-RC's random gates as the authors built them (Lippl, Abbott & Chung, 2022; their
`scripts/train_convex_relu.py`, commit 002054c), beside the chapter's SVM-RC gates.

The paper (Sec. 5.2) calls SVM-RC a FReLU "using random contexts". The authors' code draws, for
a network of H hidden units,

* H hyperplanes with random ORTHOGONAL directions (torch's orthogonal init of an H x D matrix:
  orthonormal rows, D = 785 inputs including the constant feature);
* cutoffs at the median of each projection over the cutoff data (theirs: every image of the
  binary MNIST training set, 60,000; torch's median, the lower of the two middle values for an
  even count); a gate is open where the projection is >= its cutoff;
* one ALWAYS-ON context appended: H + 1 gates in all.

The chapter's SVM-RC (`gln.sample_hyperplanes`) draws H normal hyperplanes on the pixels with
median cutoffs on the training subset and no always-on context. Without it, a sample whose H
gates are all closed has output 0 whatever the predictor, and the margin constraint y f >= 1
cannot hold: the program is infeasible (with median cutoffs, about N / 2^H such samples are
expected). The always-on gate is open for every sample, so that cause is gone; the program is
then feasible whenever the gated features g_nh x_n (dimension (H + 1) D) separate the data,
which holds for every solve of the chapter's grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class OrthogonalGates:
    """H gates [<w_h, x> >= b_h] with orthonormal rows w_h, plus one always-on gate."""

    weights: np.ndarray  # (H, D), orthonormal rows
    cutoffs: np.ndarray  # (H,)

    @property
    def n_gates(self) -> int:
        return self.weights.shape[0] + 1


def orthogonal_directions(n_units: int, dim: int, seed: int) -> np.ndarray:
    """(n_units, dim) with orthonormal rows (n_units <= dim), drawn as an orthogonal init (QR of
    a standard normal matrix, signs fixed by R's diagonal)."""
    if n_units > dim:
        raise ValueError(f"at most {dim} orthonormal rows in dimension {dim}, got {n_units}")
    a = np.random.default_rng(seed).standard_normal((dim, n_units))
    q, r = np.linalg.qr(a)
    return (q * np.sign(np.diag(r))).T


def lower_median(values: np.ndarray) -> np.ndarray:
    """Column-wise lower median (torch.median's convention): the ceil(n/2)-th smallest."""
    values = np.asarray(values)
    return np.sort(values, axis=0)[(len(values) - 1) // 2]


def sample_orthogonal_gates(X_cutoff: np.ndarray, n_units: int, seed: int) -> OrthogonalGates:
    """The authors' SVM-RC gates: `n_units` orthonormal directions in the dimension of
    `X_cutoff` (the inputs the gates see), cutoffs the lower median of each projection over
    `X_cutoff` (at least half of those rows open each gate)."""
    weights = orthogonal_directions(n_units, X_cutoff.shape[1], seed)
    return OrthogonalGates(weights, lower_median(X_cutoff @ weights.T))


def gate_matrix(X: np.ndarray, gates: OrthogonalGates) -> np.ndarray:
    """(N, H + 1) bool: the H hyperplane gates of every sample, then the always-on gate."""
    open_ = X @ gates.weights.T >= gates.cutoffs[None]
    return np.hstack([open_, np.ones((len(X), 1), dtype=bool)])
