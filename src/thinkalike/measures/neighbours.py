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

Preparation, once per input and k (:func:`prepare_neighbours`, shared by the three measures):
the cosine similarities, the k-NN sets as a boolean n × n mask and as the sorted flat indices
i·n + j of its n·k entries, and the similarities there. Comparison: the entries of N_k^X found
in N_k^Y's mask give the mutual pairs M, so the overlaps are counts per row; CKNNA's masked
matrices have at most n·k non-zero entries, and h(A, B) is evaluated on those alone (the trace
term pairs entry (i, j) with (j, i) by a sorted search; h(Mᴷ∘K, Mᴷ∘K) is kept with the input).
Row permutations (the calibration null): ``PreparedNeighbours.permuted(π)`` is the preparation of
X[π] without the similarities: the neighbour mask with rows and columns permuted, the similarities
looked up at the new entries (O(n² + n·k·log(n·k))). The lower-index-first rule for ties depends on
the token order, so an input with a tie at some row's k-th neighbour (``tied``) is prepared again
instead (None).
Cost: O(n²·d) time per input for the similarities and O(n²) memory (a few n × n arrays
while preparing, one n × n boolean mask kept) — subsample tokens for large n
(:func:`thinkalike.measures.registry.subsample_tokens`); O(n·k·log(n·k)) per pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

import numpy as np

from thinkalike.measures.hsic import unbiased_hsic
from thinkalike.measures.inputs import check_same_tokens, checked_matrix, paired_activations, undefined
from thinkalike.measures.measure import (
    COSINE_INVARIANCES,
    QUADRATIC_MAX_TOKENS,
    Measure,
    MeasureOptions,
    integer_at_least,
    option_check,
)

DEFAULT_K = 10  # Huh et al.'s default topk and ReSi's default k
CKNNA_MIN_K = 2  # with k = 1 the masked matrices of CKNNA have too few entries
CKNNA_MIN_TOKENS = 4  # the unbiased HSIC divides by n − 3


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
    return _mask_and_ties(similarities, k)[0]


def _mask_and_ties(similarities: np.ndarray, k: int) -> tuple[np.ndarray, bool]:
    """:func:`neighbour_mask`, and whether some row had more tokens at its k-th similarity than places left."""
    s = similarities.copy()
    np.fill_diagonal(s, -np.inf)
    n = s.shape[0]
    kth = np.partition(s, n - k, axis=1)[:, n - k, None]
    above = s > kth
    at = s == kth
    still_needed = k - above.sum(axis=1, keepdims=True)
    tied = bool(np.any(at.sum(axis=1, keepdims=True) > still_needed))
    return above | (at & (np.cumsum(at, axis=1) <= still_needed)), tied


def _sparse_hsic(n: int, keys: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Huh et al.'s ``hsic_unbiased`` of n × n matrices A, B that are zero outside the sorted flat
    indices ``keys`` (diagonal excluded), where they hold ``a`` and ``b`` (module docstring)."""
    rows, cols = np.divmod(keys, n)
    transposed = cols * n + rows
    position = np.minimum(np.searchsorted(keys, transposed), keys.size - 1)
    found = keys[position] == transposed  # (j, i) is an entry too: Aᵢⱼ·Bⱼᵢ counts in tr(AB)
    trace_ab = float(np.dot(a[found], b[position[found]]))
    ones_ab_ones = float(np.bincount(cols, a, minlength=n) @ np.bincount(rows, b, minlength=n))
    return unbiased_hsic(trace_ab, float(a.sum()) * float(b.sum()), ones_ab_ones, n)


@dataclass(frozen=True, eq=False)
class PreparedNeighbours:
    """One input prepared for the k-NN measures at one k (:func:`prepare_neighbours`)."""

    n_tokens: int
    k: int
    mask: np.ndarray | None  # (n, n) bool, row i = N_k(i); None when undefined
    keys: np.ndarray | None  # sorted flat indices i·n + j of the mask's n·k entries
    similarities: np.ndarray | None  # the cosine similarities at ``keys``
    problem: str | None  # why the measures are undefined, with ``{name}`` for the input's name
    tied: bool = False  # a tie at some row's k-th neighbour: the mask depends on the token order

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``mask``, ``keys`` and ``similarities`` of a defined preparation (``problem`` is None)."""
        if self.mask is None or self.keys is None or self.similarities is None:
            raise ValueError(f"the k-NN sets are undefined: {self.problem}")
        return self.mask, self.keys, self.similarities

    def permuted(self, permutation: np.ndarray) -> PreparedNeighbours | None:
        """The preparation of X[π] from this one (module docstring); None when ``tied`` (prepare X[π] again)."""
        if self.problem is not None:
            return self
        if self.tied:
            return None
        n = self.n_tokens
        own_mask, own_keys, own_similarities = self.arrays()
        mask = own_mask[np.ix_(permutation, permutation)]
        keys = np.flatnonzero(mask)
        rows, cols = np.divmod(keys, n)
        similarities = own_similarities[np.searchsorted(own_keys, permutation[rows] * n + permutation[cols])]
        return PreparedNeighbours(n, self.k, mask, keys, similarities, None, False)

    @cached_property
    def self_hsic(self) -> float:
        """h(Mᴷ∘K, Mᴷ∘K), CKNNA's normalisation term of this input."""
        _, keys, similarities = self.arrays()
        return _sparse_hsic(self.n_tokens, keys, similarities, similarities)


def prepare_neighbours(x: Any, k: int = DEFAULT_K, *, name: str = "x") -> PreparedNeighbours:
    """The k-NN sets of ``x``'s tokens by cosine similarity (and the similarities there), once."""
    matrix = checked_matrix(x, name, measure="the k-NN measures", min_tokens=2)
    n = matrix.shape[0]
    k = _check_k(k, n)
    zero_rows = int(np.sum(~matrix.any(axis=1)))
    if zero_rows:
        problem = f"{zero_rows} token(s) of {{name}} are all-zero rows, which have no cosine similarity"
        return PreparedNeighbours(n, k, None, None, None, problem)
    similarities = cosine_similarities(matrix)
    mask, tied = _mask_and_ties(similarities, k)
    keys = np.flatnonzero(mask)
    return PreparedNeighbours(n, k, mask, keys, similarities.ravel()[keys], None, tied)


def _mutual(px: PreparedNeighbours, py: PreparedNeighbours, measure: str) -> np.ndarray | None:
    """Positions in ``px.keys`` of the mutual neighbour pairs, or None (after a warning) if undefined."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    if px.k != py.k:
        raise ValueError(f"k: x was prepared with k = {px.k}, y with k = {py.k}")
    for name, prepared in (("x", px), ("y", py)):
        if prepared.problem is not None:
            undefined(measure, prepared.problem.format(name=name))
            return None
    return np.flatnonzero(py.arrays()[0].ravel()[px.arrays()[1]])


def _shared_counts(px: PreparedNeighbours, py: PreparedNeighbours, measure: str) -> np.ndarray | None:
    """|N_k^X(i) ∩ N_k^Y(i)| for every token i."""
    mutual = _mutual(px, py, measure)
    return None if mutual is None else np.bincount(px.arrays()[1][mutual] // px.n_tokens, minlength=px.n_tokens)


def mutual_knn_prepared(px: PreparedNeighbours, py: PreparedNeighbours) -> float:
    """:func:`mutual_knn` of two inputs prepared with the same k."""
    shared = _shared_counts(px, py, "mutual_knn")
    return float("nan") if shared is None else float(np.mean(shared) / px.k)


def knn_jaccard_prepared(px: PreparedNeighbours, py: PreparedNeighbours) -> float:
    """:func:`knn_jaccard` of two inputs prepared with the same k."""
    shared = _shared_counts(px, py, "knn_jaccard")
    return float("nan") if shared is None else float(np.mean(shared / (2 * px.k - shared)))


def cknna_prepared(px: PreparedNeighbours, py: PreparedNeighbours) -> float:
    """:func:`cknna` of two inputs prepared with the same k (≥ 2, on ≥ 4 tokens)."""
    if px.n_tokens < CKNNA_MIN_TOKENS:
        raise ValueError(f"n: cknna needs at least {CKNNA_MIN_TOKENS} tokens; got n = {px.n_tokens}")
    _check_k(px.k, px.n_tokens, CKNNA_MIN_K)
    mutual = _mutual(px, py, "cknna")
    if mutual is None:
        return float("nan")
    _, x_keys, x_similarities = px.arrays()
    _, y_keys, y_similarities = py.arrays()
    keys = x_keys[mutual]
    cross = _sparse_hsic(px.n_tokens, keys, x_similarities[mutual], y_similarities[np.searchsorted(y_keys, keys)])
    denominator = px.self_hsic * py.self_hsic
    if not denominator > 0.0:
        return undefined("cknna", f"its normalisation h(K,K)·h(L,L) = {denominator:.3g} is not positive")
    return cross / math.sqrt(denominator)


def mutual_knn(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """(1/n) Σᵢ |N_k^X(i) ∩ N_k^Y(i)| / k (Huh et al. 2024)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="mutual_knn", min_tokens=2)
    _check_k(k, x_matrix.shape[0])
    return mutual_knn_prepared(prepare_neighbours(x_matrix, k), prepare_neighbours(y_matrix, k, name="y"))


def knn_jaccard(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """(1/n) Σᵢ |N ∩ N′| / |N ∪ N′| with |N ∪ N′| = 2k − |N ∩ N′| (ReSi's k-NN Jaccard)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="knn_jaccard", min_tokens=2)
    _check_k(k, x_matrix.shape[0])
    return knn_jaccard_prepared(prepare_neighbours(x_matrix, k), prepare_neighbours(y_matrix, k, name="y"))


def cknna(x: Any, y: Any, k: int = DEFAULT_K) -> float:
    """h(M∘K, M∘L) / sqrt(h(Mᴷ∘K, Mᴷ∘K)·h(Mᴸ∘L, Mᴸ∘L)) on mutual-neighbour pairs (Huh et al. 2024)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="cknna", min_tokens=CKNNA_MIN_TOKENS)
    _check_k(k, x_matrix.shape[0], CKNNA_MIN_K)
    return cknna_prepared(prepare_neighbours(x_matrix, k), prepare_neighbours(y_matrix, k, name="y"))


#: The fewest rows of mutual k-NN and k-NN Jaccard: a row and one neighbour.
KNN_MIN_TOKENS = 2


class NeighbourOptions(MeasureOptions):
    """Mutual k-NN's and k-NN Jaccard's options."""

    k: Annotated[int, option_check(integer_at_least(1))] = DEFAULT_K  # neighbours per row


class CKNNAOptions(MeasureOptions):
    """CKNNA's options (k ≥ 2: with k = 1 its masked matrices have too few entries)."""

    k: Annotated[int, option_check(integer_at_least(CKNNA_MIN_K))] = DEFAULT_K


MEASURES = (
    Measure(
        "mutual_knn",
        mutual_knn,
        "similarity",
        False,
        COSINE_INVARIANCES,
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_neighbours,
        compare=mutual_knn_prepared,
        options=NeighbourOptions,
        min_tokens=KNN_MIN_TOKENS,
        order=80,
    ),
    Measure(
        "cknna",
        cknna,
        "similarity",
        False,
        COSINE_INVARIANCES,
        "n²·d",
        False,
        QUADRATIC_MAX_TOKENS,  # ≈ symmetric
        prepare=prepare_neighbours,
        compare=cknna_prepared,
        options=CKNNAOptions,
        min_tokens=CKNNA_MIN_TOKENS,
        order=90,
    ),
    Measure(
        "knn_jaccard",
        knn_jaccard,
        "similarity",
        False,
        COSINE_INVARIANCES,
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_neighbours,
        compare=knn_jaccard_prepared,
        options=NeighbourOptions,
        min_tokens=KNN_MIN_TOKENS,
        order=100,
    ),
)
