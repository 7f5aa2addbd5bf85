"""Block structure of a layer-by-layer similarity matrix (Brown et al. 2023 §5: runs of consecutive layers with
high mutual CKA), and how stable it is over minibatches (no Kedro).

A segmentation of layers ``0 … n − 1`` into ``k`` contiguous blocks ``B_1 … B_k`` is scored by its **contrast**

    C = W − B,   W = mean_{i<j, same block} S_ij,   B = mean_{i<j, different blocks} S_ij,

over the off-diagonal pairs of the symmetric matrix ``S`` (intra-model CKA). For each ``k`` the segmentation of
largest contrast is found exactly: for a fixed number ``w`` of within-block pairs, ``W`` and ``B`` depend on the
segmentation only through the within-block sum ``Σ_w`` (``B = (T − Σ_w) / (P − w)``, ``T`` the sum over all ``P``
pairs), and the largest ``Σ_w`` for every ``(prefix, k, w)`` is a dynamic programme over block ends (block sums
from 2-D prefix sums). Written here because no maintained library segments a similarity matrix into contiguous
blocks by this criterion (ruptures segments signals by a cost per segment, with no between-segment term).

The number of blocks is the ``k`` in ``2 … max_blocks`` of largest contrast; when that contrast is below
``min_contrast`` the matrix has **no block structure** (one block). :func:`block_stability` repeats the
segmentation on bootstrap resamples of the minibatches' matrices and reports how often each boundary recurs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_MIN_CONTRAST = 0.1


@dataclass(frozen=True)
class Segmentation:
    """Contiguous blocks (``(first, last)`` layer pairs, inclusive) with their contrast ``within − between``;
    ``structured`` is False when the best contrast is below the threshold (then one block)."""

    blocks: tuple[tuple[int, int], ...]
    within: float
    between: float
    structured: bool

    @property
    def contrast(self) -> float:
        return self.within - self.between

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The first layer of every block but the first."""
        return tuple(first for first, _ in self.blocks[1:])


def _checked(similarity: np.ndarray) -> np.ndarray:
    matrix = np.asarray(similarity, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"block structure needs a square matrix of at least 2 layers, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("block structure needs a finite matrix (a NaN cell: a constant layer?)")
    return (matrix + matrix.T) / 2


def best_segmentations(similarity: np.ndarray, max_blocks: int) -> dict[int, Segmentation]:
    """For each ``k`` in ``2 … max_blocks`` (at most the number of layers) the segmentation of largest contrast
    (module docstring); segmentations whose blocks leave no within- or no between-block pair are not scored."""
    matrix = _checked(similarity)
    n = matrix.shape[0]
    upper = np.triu(matrix, k=1)
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = upper.cumsum(0).cumsum(1)

    def block_sum(start: int, end: int) -> float:  # layers start … end - 1
        return float(prefix[end, end] - prefix[start, end] - prefix[end, start] + prefix[start, start])

    total_pairs = n * (n - 1) // 2
    total = float(upper.sum())
    most = min(max_blocks, n)
    # best[k][end][w]: the largest within sum over segmentations of layers 0 … end-1 into k blocks with w pairs
    best = [[dict() for _ in range(n + 1)] for _ in range(most + 1)]
    back: dict[tuple[int, int, int], tuple[int, int]] = {}
    best[0][0][0] = 0.0
    for k in range(1, most + 1):
        for end in range(k, n + 1):
            cell = best[k][end]
            for start in range(k - 1, end):
                size = end - start
                pairs, added = size * (size - 1) // 2, block_sum(start, end)
                for w, value in best[k - 1][start].items():
                    candidate = value + added
                    if candidate > cell.get(w + pairs, -np.inf):
                        cell[w + pairs] = candidate
                        back[(k, end, w + pairs)] = (start, w)
    found: dict[int, Segmentation] = {}
    for k in range(2, most + 1):
        scored = [(within / w - (total - within) / (total_pairs - w), w, within)
                  for w, within in best[k][n].items() if 0 < w < total_pairs]
        if not scored:
            continue
        _, w, within = max(scored)
        blocks, end, pairs = [], n, w
        for level in range(k, 0, -1):
            start, pairs_before = back[(level, end, pairs)]
            blocks.append((start, end - 1))
            end, pairs = start, pairs_before
        found[k] = Segmentation(tuple(reversed(blocks)), within / w, (total - within) / (total_pairs - w), True)
    return found


def segment_blocks(similarity: np.ndarray, max_blocks: int = 6,
                   min_contrast: float = DEFAULT_MIN_CONTRAST) -> Segmentation:
    """The block structure of ``similarity``: the segmentation of largest contrast over ``k = 2 … max_blocks``,
    or one block (``structured=False``) when that contrast is below ``min_contrast``."""
    if max_blocks < 2:
        raise ValueError(f"max_blocks must be at least 2, got {max_blocks}")
    matrix = _checked(similarity)
    candidates = best_segmentations(matrix, max_blocks)
    n = matrix.shape[0]
    off_diagonal = float(matrix[np.triu_indices(n, k=1)].mean())
    if not candidates:
        return Segmentation(((0, n - 1),), off_diagonal, float("nan"), False)
    best = max(candidates.values(), key=lambda segmentation: segmentation.contrast)
    if best.contrast < min_contrast:
        return Segmentation(((0, n - 1),), off_diagonal, float("nan"), False)
    return best


@dataclass(frozen=True)
class Stability:
    """How often the full-data segmentation recurs over bootstrap resamples of the minibatches."""

    segmentation: Segmentation
    same_blocks: float  # fraction of resamples giving exactly the same blocks
    boundary_frequency: dict[int, float]  # per boundary found in any resample: the fraction of resamples with it
    n_resamples: int


def block_stability(batch_matrices: Sequence[np.ndarray], n_resamples: int = 200, seed: int = 0,
                    max_blocks: int = 6, min_contrast: float = DEFAULT_MIN_CONTRAST) -> Stability:
    """Segments the mean of ``batch_matrices`` (one similarity matrix per minibatch) and each of ``n_resamples``
    bootstrap means (minibatches drawn with replacement, ``seed``)."""
    stack = np.asarray(batch_matrices, dtype=np.float64)
    if stack.ndim != 3 or len(stack) < 2:
        raise ValueError(f"block_stability needs at least 2 minibatch matrices (batches, n, n), got {stack.shape}")
    full = segment_blocks(stack.mean(axis=0), max_blocks, min_contrast)
    rng = np.random.default_rng(seed)
    same, counts = 0, {}
    for _ in range(n_resamples):
        sample = stack[rng.integers(0, len(stack), size=len(stack))].mean(axis=0)
        resampled = segment_blocks(sample, max_blocks, min_contrast)
        same += resampled.blocks == full.blocks
        for boundary in resampled.boundaries:
            counts[boundary] = counts.get(boundary, 0) + 1
    return Stability(full, same / n_resamples, {b: c / n_resamples for b, c in sorted(counts.items())}, n_resamples)
