"""Rogue dimensions (Timkey & van Schijndel 2021): a few residual-stream dimensions whose variance across tokens
dwarfs the others' decide cosine similarity, CKA and Procrustes alike. No Kedro.

For a layer's rows X (n tokens × d dimensions) with column variances σ²ⱼ = (1/n) Σᵢ (Xᵢⱼ − X̄ⱼ)²:

- **variance share** of dimension j: sⱼ = σ²ⱼ / Σₖ σ²ₖ; :func:`variance_shares` returns them largest first, and
  :func:`top_share` the sum of the ``k`` largest. A layer is flagged when one dimension carries more than
  :data:`ROGUE_SHARE` (half) of the variance.
- **standardisation** (:func:`standardise_dimensions`): Xᵢⱼ → (Xᵢⱼ − X̄ⱼ) / σⱼ, every dimension of variance 1
  (a constant dimension becomes 0), the remedy Timkey & van Schijndel use;
- **top-dimension removal** (:func:`remove_top_dimensions`): the ``k`` dimensions of largest variance are
  dropped (the basis dimensions themselves, not principal components: rogue dimensions are individual
  coordinates of the residual stream).

Both are offered as preprocessing of every measure (:mod:`thinkalike.cka.measure_tables`).
"""

from __future__ import annotations

import numpy as np

ROGUE_SHARE = 0.5


def _matrix(x: np.ndarray) -> np.ndarray:
    matrix = np.asarray(x, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 2 or matrix.shape[1] < 1:
        raise ValueError(f"x: needs (tokens ≥ 2, dimensions ≥ 1) rows, got shape {matrix.shape}")
    return matrix


def variance_shares(x: np.ndarray) -> np.ndarray:
    """Every dimension's share of the total variance across tokens, largest first (NaN when all are constant)."""
    variances = _matrix(x).var(axis=0)
    total = variances.sum()
    if total <= 0:
        return np.full(variances.shape, np.nan)
    return np.sort(variances / total)[::-1]


def top_share(x: np.ndarray, k: int = 1) -> float:
    """The summed variance share of the ``k`` largest dimensions."""
    if k < 1:
        raise ValueError(f"k: {k} must be ≥ 1")
    return float(variance_shares(x)[:k].sum())


def top_dimensions(x: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` dimensions of largest variance, largest first (ties: the lower index)."""
    variances = _matrix(x).var(axis=0)
    return np.argsort(-variances, kind="stable")[:k]


def standardise_dimensions(x: np.ndarray) -> np.ndarray:
    """Every dimension centred and scaled to unit variance across tokens; constant dimensions become 0."""
    matrix = _matrix(x)
    deviations = matrix - matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    return np.divide(deviations, scale, out=np.zeros_like(deviations), where=scale > 0)


def remove_top_dimensions(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` without its ``k`` dimensions of largest variance (order of the others kept); ``k`` = 0: ``x``."""
    matrix = _matrix(x)
    if not 0 <= k < matrix.shape[1]:
        raise ValueError(f"k: {k} must be in [0, {matrix.shape[1]}) (the layer has {matrix.shape[1]} dimensions)")
    if k == 0:
        return matrix
    keep = np.setdiff1d(np.arange(matrix.shape[1]), top_dimensions(matrix, k))
    return matrix[:, keep]
