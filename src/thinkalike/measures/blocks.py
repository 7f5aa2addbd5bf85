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
:func:`layer_order_null` is the contrast's null for "blocks of *consecutive* layers": the best contrast of
``S[π][:, π]`` over random layer orders ``π`` (the same similarities, the order forgotten); the best contrast is
never below 0's neighbourhood by construction (a maximum over splits), so a claim of blocks is the observed
contrast against this null's mean, not against 0 or a fixed threshold.

Between two models (an ``n_a × n_b`` inter-model CKA matrix ``S``, Brown et al. fig. 3), blocks are **matched**:
model a's layers cut into ``k`` contiguous blocks ``A_1 … A_k``, model b's into ``B_1 … B_k``, block ``A_t`` paired
with ``B_t`` (in order: early with early). The contrast is the same ``W − B``, now over all ``n_a n_b`` cells:
``W`` the mean over the matched cells ``∪_t A_t × B_t``, ``B`` over the others. :func:`best_cosegmentations`
finds the best matched blocks for each ``k`` exactly by the same programme over pairs of prefixes (a state per
``(i, j, k, w)``, ``w`` matched cells; ``O(k n_a² n_b² · n_a n_b)`` operations: fine for tens of layers, the zoo's
9 in milliseconds); :func:`cosegment_blocks` chooses ``k`` as above and :func:`block_stability` bootstraps it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_MIN_CONTRAST = 0.1


@dataclass(frozen=True, kw_only=True)
class BlockContrast:
    """What every block split reports: the mean similarity ``within`` its blocks and ``between`` them, and whether
    the split is ``structured`` (False: the best contrast was below the threshold, so one block)."""

    within: float
    between: float
    structured: bool

    @property
    def contrast(self) -> float:
        """``within − between``."""
        return self.within - self.between


@dataclass(frozen=True)
class Segmentation(BlockContrast):
    """Contiguous blocks (``(first, last)`` layer pairs, inclusive) of one similarity matrix."""

    blocks: tuple[tuple[int, int], ...]

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The first layer of every block but the first."""
        return tuple(first for first, _ in self.blocks[1:])


@dataclass(frozen=True)
class CoSegmentation(BlockContrast):
    """Matched contiguous blocks of two models' layers: ``blocks_a[t]`` of model a with ``blocks_b[t]`` of model b
    (``(first, last)``, inclusive)."""

    blocks_a: tuple[tuple[int, int], ...]
    blocks_b: tuple[tuple[int, int], ...]

    @property
    def blocks(self) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
        """The matched pairs of blocks."""
        return tuple(zip(self.blocks_a, self.blocks_b))

    @property
    def boundaries(self) -> tuple[tuple[int, int], ...]:
        """Per matched block but the first: the first layer of its block in model a and in model b."""
        return tuple((a[0], b[0]) for a, b in self.blocks[1:])


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
    best: list[list[dict[int, float]]] = [[{} for _ in range(n + 1)] for _ in range(most + 1)]
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
        scored = [
            (within / w - (total - within) / (total_pairs - w), w, within)
            for w, within in best[k][n].items()
            if 0 < w < total_pairs
        ]
        if not scored:
            continue
        _, w, within = max(scored)
        blocks, end, pairs = [], n, w
        for level in range(k, 0, -1):
            start, pairs_before = back[(level, end, pairs)]
            blocks.append((start, end - 1))
            end, pairs = start, pairs_before
        found[k] = Segmentation(
            tuple(reversed(blocks)), within=within / w, between=(total - within) / (total_pairs - w), structured=True
        )
    return found


def segment_blocks(
    similarity: np.ndarray, max_blocks: int = 6, min_contrast: float = DEFAULT_MIN_CONTRAST
) -> Segmentation:
    """The block structure of ``similarity``: the segmentation of largest contrast over ``k = 2 … max_blocks``,
    or one block (``structured=False``) when that contrast is below ``min_contrast``."""
    if max_blocks < 2:
        raise ValueError(f"max_blocks must be at least 2, got {max_blocks}")
    matrix = _checked(similarity)
    candidates = best_segmentations(matrix, max_blocks)
    n = matrix.shape[0]
    off_diagonal = float(matrix[np.triu_indices(n, k=1)].mean())
    if not candidates:
        return Segmentation(((0, n - 1),), within=off_diagonal, between=float("nan"), structured=False)
    best = max(candidates.values(), key=lambda segmentation: segmentation.contrast)
    if best.contrast < min_contrast:
        return Segmentation(((0, n - 1),), within=off_diagonal, between=float("nan"), structured=False)
    return best


def best_contrast(similarity: np.ndarray, max_blocks: int = 6, *, matched: bool = False) -> float:
    """The largest block contrast ``within − between`` of ``similarity`` over ``k = 2 … max_blocks`` blocks (of one
    model's matrix, or matched blocks of two models' with ``matched``), whether or not it reaches a threshold: the
    continuous quantity that :func:`segment_blocks` / :func:`cosegment_blocks` compare with ``min_contrast``. NaN
    when no split leaves both within- and between-block pairs."""
    candidates = best_cosegmentations(similarity, max_blocks) if matched else best_segmentations(similarity, max_blocks)
    return max((c.contrast for c in candidates.values()), default=float("nan"))


def layer_order_null(similarity: np.ndarray, max_blocks: int, n_permutations: int, seed: int) -> np.ndarray:
    """``best_contrast(S[π][:, π], max_blocks)`` for ``n_permutations`` uniformly random layer orders ``π`` drawn
    with ``seed`` (rows and columns permuted together, so the values are the matrix's own): the contrast that the
    best split finds when consecutive layers are no more alike than any others."""
    matrix = _checked(similarity)
    if n_permutations < 1:
        raise ValueError(f"n_permutations: expected at least 1, got {n_permutations}")
    generator = np.random.default_rng(seed)
    null = np.empty(n_permutations)
    for index in range(n_permutations):
        order = generator.permutation(matrix.shape[0])
        null[index] = best_contrast(matrix[np.ix_(order, order)], max_blocks)
    return null


def _checked_rectangle(similarity: np.ndarray) -> np.ndarray:
    matrix = np.asarray(similarity, dtype=np.float64)
    if matrix.ndim != 2 or min(matrix.shape) < 2:
        raise ValueError(f"matched blocks need a matrix of at least 2 layers a side, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("matched blocks need a finite matrix (a NaN cell: a constant layer?)")
    return matrix


def best_cosegmentations(similarity: np.ndarray, max_blocks: int) -> dict[int, CoSegmentation]:
    """For each ``k`` in ``2 … max_blocks`` (at most the smaller model's layers) the matched blocks of largest
    contrast of the ``n_a × n_b`` matrix ``similarity`` (module docstring)."""
    matrix = _checked_rectangle(similarity)
    n_a, n_b = matrix.shape
    cells = n_a * n_b
    prefix = np.zeros((n_a + 1, n_b + 1))
    prefix[1:, 1:] = matrix.cumsum(0).cumsum(1)
    total = float(prefix[n_a, n_b])
    most = min(max_blocks, n_a, n_b)
    # best[k][i, j, w]: the largest matched sum over k matched blocks of a's layers 0 … i-1 and b's 0 … j-1 with w
    # matched cells (−inf: impossible); came_from[k][i, j, w]: the previous block ends (i', j')
    best = [np.full((n_a + 1, n_b + 1, cells + 1), -np.inf) for _ in range(most + 1)]
    came_from = [np.zeros((n_a + 1, n_b + 1, cells + 1, 2), dtype=np.int64) for _ in range(most + 1)]
    best[0][0, 0, 0] = 0.0
    for k in range(1, most + 1):
        for i in range(k, n_a + 1):
            for j in range(k, n_b + 1):
                target, back = best[k][i, j], came_from[k][i, j]
                for start_a in range(k - 1, i):
                    block_sums = prefix[i, j] - prefix[start_a, j] - prefix[i, k - 1 : j] + prefix[start_a, k - 1 : j]
                    for start_b, added in zip(range(k - 1, j), block_sums):
                        size = (i - start_a) * (j - start_b)
                        candidate = best[k - 1][start_a, start_b, : cells + 1 - size] + added
                        better = candidate > target[size:]
                        if better.any():
                            target[size:][better] = candidate[better]
                            back[size:][better] = (start_a, start_b)
    found: dict[int, CoSegmentation] = {}
    for k in range(2, most + 1):
        sums = best[k][n_a, n_b]
        matched = np.arange(cells + 1)
        usable = np.isfinite(sums) & (matched > 0) & (matched < cells)
        if not usable.any():
            continue
        contrast = np.where(
            usable, sums / np.maximum(matched, 1) - (total - sums) / np.maximum(cells - matched, 1), -np.inf
        )
        w = int(np.argmax(contrast))
        within = float(sums[w])
        blocks_a, blocks_b, end_a, end_b, left = [], [], n_a, n_b, w
        for level in range(k, 0, -1):
            start_a, start_b = (int(x) for x in came_from[level][end_a, end_b, left])
            blocks_a.append((start_a, end_a - 1))
            blocks_b.append((start_b, end_b - 1))
            left -= (end_a - start_a) * (end_b - start_b)
            end_a, end_b = start_a, start_b
        found[k] = CoSegmentation(
            tuple(reversed(blocks_a)),
            tuple(reversed(blocks_b)),
            within=within / w,
            between=(total - within) / (cells - w),
            structured=True,
        )
    return found


def cosegment_blocks(
    similarity: np.ndarray, max_blocks: int = 6, min_contrast: float = DEFAULT_MIN_CONTRAST
) -> CoSegmentation:
    """The matched block structure of an inter-model matrix: the matched blocks of largest contrast over
    ``k = 2 … max_blocks``, or one block each (``structured=False``) when that contrast is below ``min_contrast``."""
    if max_blocks < 2:
        raise ValueError(f"max_blocks must be at least 2, got {max_blocks}")
    matrix = _checked_rectangle(similarity)
    candidates = best_cosegmentations(matrix, max_blocks)
    n_a, n_b = matrix.shape
    best = max(candidates.values(), key=lambda segmentation: segmentation.contrast) if candidates else None
    if best is None or best.contrast < min_contrast:
        return CoSegmentation(
            ((0, n_a - 1),), ((0, n_b - 1),), within=float(matrix.mean()), between=float("nan"), structured=False
        )
    return best


@dataclass(frozen=True)
class Stability:
    """How often the full-data segmentation recurs over bootstrap resamples of the minibatches."""

    segmentation: Segmentation | CoSegmentation
    same_blocks: float  # fraction of resamples giving exactly the same blocks
    boundary_frequency: dict[Any, float]  # per boundary found in any resample: the fraction of resamples with it
    n_resamples: int


def block_stability(
    batch_matrices: Sequence[np.ndarray],
    n_resamples: int = 200,
    seed: int = 0,
    max_blocks: int = 6,
    min_contrast: float = DEFAULT_MIN_CONTRAST,
    *,
    matched: bool = False,
) -> Stability:
    """Segments the mean of ``batch_matrices`` (one similarity matrix per minibatch) and each of ``n_resamples``
    bootstrap means (minibatches drawn with replacement, ``seed``); ``matched``: the matrices are inter-model
    (``n_a × n_b``) and the blocks matched ones (:func:`cosegment_blocks`)."""
    stack = np.asarray(batch_matrices, dtype=np.float64)
    if stack.ndim != 3 or len(stack) < 2:
        raise ValueError(f"block_stability needs at least 2 minibatch matrices (batches, n_a, n_b), got {stack.shape}")
    segment = cosegment_blocks if matched else segment_blocks
    full = segment(stack.mean(axis=0), max_blocks, min_contrast)
    rng = np.random.default_rng(seed)
    same = 0
    counts: dict[Any, int] = {}  # a boundary: an int (Segmentation) or a pair of ints (CoSegmentation)
    for _ in range(n_resamples):
        sample = stack[rng.integers(0, len(stack), size=len(stack))].mean(axis=0)
        resampled = segment(sample, max_blocks, min_contrast)
        same += resampled.blocks == full.blocks
        for boundary in resampled.boundaries:
            counts[boundary] = counts.get(boundary, 0) + 1
    return Stability(full, same / n_resamples, {b: c / n_resamples for b, c in sorted(counts.items())}, n_resamples)
