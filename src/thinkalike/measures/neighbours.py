r"""Nearest-neighbour measures: mutual k-NN and CKNNA (Huh et al. 2024), k-NN Jaccard (ReSi).

Inputs X (n × d₁), Y (n × d₂), rows = the same n tokens; computed in float64.

Neighbours. As in both reference implementations, tokens are compared by the cosine
similarity of their (uncentred) rows: S = X̂X̂ᵀ with X̂ the rows scaled to unit norm (Huh et
al.'s ``measure_alignment.compute_score`` normalises features before ``metrics.py``; ReSi's
``top_k_neighbors`` uses ``NearestNeighbors(metric="cosine")``). N_k^X(i) is the set of the k
tokens j ≠ i with the largest Sᵢⱼ (a token is never its own neighbour). Ties: among tokens
with equal similarity the lower token index comes first (deterministic; the references leave
tie order to their sort routines).

- **Mutual k-NN** (Huh et al., ``AlignmentMetrics.mutual_knn``):
  (1/n) Σᵢ |N_k^X(i) ∩ N_k^Y(i)| / k ∈ [0, 1].
- **k-NN Jaccard** (Klabunde et al., ReSi ``jaccard_similarity``):
  (1/n) Σᵢ |N_k^X(i) ∩ N_k^Y(i)| / |N_k^X(i) ∪ N_k^Y(i)| ∈ [0, 1].
- **CKNNA** (Huh et al., ``AlignmentMetrics.cknna`` with its defaults ``unbiased=True``,
  ``distance_agnostic=False``): with K = X̂X̂ᵀ, L = ŶŶᵀ, the 0/1 neighbour masks
  Mᴷᵢⱼ = [j ∈ N_k^X(i)], Mᴸ likewise (zero diagonal), and
  h(A, B) = [Σᵢⱼ AᵢⱼBⱼᵢ + (1ᵀA1)(1ᵀB1)/((n−1)(n−2)) − (2/(n−2))·1ᵀAB1] / (n(n−3))
  (their ``hsic_unbiased``; A, B need not be symmetric)::

      CKNNA = h(M∘K, M∘L) / sqrt(h(Mᴷ∘K, Mᴷ∘K) · h(Mᴸ∘L, Mᴸ∘L)),   M = Mᴷ∘Mᴸ (mutual neighbours)

  — CKA restricted to the pairs that are neighbours in both. Their code adds 1e-6 to the
  denominator; it is left out here (it makes the value depend on the scale of K), and a
  non-positive denominator gives NaN with a warning instead. Not exactly symmetric: the
  k-NN relation is not, so the masked matrices are not symmetric and 1ᵀAB1 ≠ 1ᵀBA1;
  CKNNA(X, Y) and CKNNA(Y, X) differ by about 1e-3 on random data (n = 60…100, k = 10).

Invariances (all three): orthogonal maps, isotropic scaling (any positive per-token scaling),
permutation of features; not translation or general linear maps (cosine of uncentred rows).
Mutual k-NN and Jaccard are symmetric. A token whose row is all zeros has no cosine: NaN with
a RuntimeWarning.

Cost: O(n²·d) time for the similarities and O(n²) memory (a few n × n arrays) — subsample
tokens for large n (:func:`thinkalike.measures.registry.subsample_tokens`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thinkalike.measures.inputs import paired_activations, undefined

DEFAULT_K = 10  # Huh et al.'s default topk and ReSi's default k


def _check_k(k: int, n: int, minimum: int = 1) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < minimum:
        raise ValueError(f"k: {k!r} must be an integer ≥ {minimum}")
    if k >= n:
        raise ValueError(f"k: {k} must be < n = {n} tokens (a token is not its own neighbour)")
    return int(k)


def cosine_similarities(matrix: np.ndarray) -> np.ndarray:
    """S = X̂X̂ᵀ for rows scaled to unit norm (rows must be non-zero)."""
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit @ unit.T


def neighbour_mask(similarities: np.ndarray, k: int) -> np.ndarray:
    """Boolean (n, n) mask, row i marking the k tokens j ≠ i of largest similarity (ties: lower j first).

    ``np.partition`` finds each row's k-th largest value t; the mask takes every j with
    Sᵢⱼ > t and then the lowest indices among Sᵢⱼ = t until k are taken (O(n²), no full sort).
    """
    s = similarities.copy()
    np.fill_diagonal(s, -np.inf)
    n = s.shape[0]
    kth = np.partition(s, n - k, axis=1)[:, n - k, None]
    above = s > kth
    at = s == kth
    still_needed = k - above.sum(axis=1, keepdims=True)
    return above | (at & (np.cumsum(at, axis=1) <= still_needed))


def _masks(
    x: Any, y: Any, k: int, measure: str, min_tokens: int, min_k: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(K, L, Mᴷ, Mᴸ) for checked inputs, or None after a warning if a token's row is zero."""
    x_matrix, y_matrix = paired_activations(x, y, measure=measure, min_tokens=min_tokens)
    k = _check_k(k, x_matrix.shape[0], min_k)
    for name, matrix in (("x", x_matrix), ("y", y_matrix)):
        zero_rows = int(np.sum(~matrix.any(axis=1)))
        if zero_rows:
            undefined(measure, f"{zero_rows} token(s) of {name} are all-zero rows, which have no cosine similarity")
            return None
    k_sim, l_sim = cosine_similarities(x_matrix), cosine_similarities(y_matrix)
    return k_sim, l_sim, neighbour_mask(k_sim, k), neighbour_mask(l_sim, k)


def _shared_counts(x: Any, y: Any, k: int, measure: str) -> np.ndarray | None:
    """|N_k^X(i) ∩ N_k^Y(i)| for every token i."""
    masks = _masks(x, y, k, measure, min_tokens=2)
    if masks is None:
        return None
    return np.sum(masks[2] & masks[3], axis=1)


def mutual_knn(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """(1/n) Σᵢ |N_k^X(i) ∩ N_k^Y(i)| / k (Huh et al. 2024)."""
    shared = _shared_counts(x, y, k, "mutual_knn")
    return float("nan") if shared is None else float(np.mean(shared) / k)


def knn_jaccard(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """(1/n) Σᵢ |N ∩ N′| / |N ∪ N′| with |N ∪ N′| = 2k − |N ∩ N′| (ReSi's k-NN Jaccard)."""
    shared = _shared_counts(x, y, k, "knn_jaccard")
    return float("nan") if shared is None else float(np.mean(shared / (2 * k - shared)))


def _hsic_unbiased(a: np.ndarray, b: np.ndarray) -> float:
    """Huh et al.'s ``hsic_unbiased`` for matrices with zero diagonals (module docstring)."""
    n = a.shape[0]
    trace_ab = float(np.sum(a * b.T))
    sums = float(a.sum()) * float(b.sum()) / ((n - 1) * (n - 2))
    ones_ab_ones = float(a.sum(axis=0) @ b.sum(axis=1))
    return (trace_ab + sums - 2.0 * ones_ab_ones / (n - 2)) / (n * (n - 3))


def cknna(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """h(M∘K, M∘L) / sqrt(h(Mᴷ∘K, Mᴷ∘K)·h(Mᴸ∘L, Mᴸ∘L)) on mutual-neighbour pairs (Huh et al. 2024)."""
    masks = _masks(x, y, k, "cknna", min_tokens=4, min_k=2)
    if masks is None:
        return float("nan")
    k_sim, l_sim, mask_k, mask_l = masks
    mutual = mask_k & mask_l
    cross = _hsic_unbiased(np.where(mutual, k_sim, 0.0), np.where(mutual, l_sim, 0.0))
    masked_k, masked_l = np.where(mask_k, k_sim, 0.0), np.where(mask_l, l_sim, 0.0)
    denominator = _hsic_unbiased(masked_k, masked_k) * _hsic_unbiased(masked_l, masked_l)
    if not denominator > 0.0:
        return undefined("cknna", f"its normalisation h(K,K)·h(L,L) = {denominator:.3g} is not positive")
    return cross / math.sqrt(denominator)
