"""Block structure: planted blocks are recovered exactly, the dynamic programme equals an exhaustive search, a
matrix without blocks is one block, and the bootstrap sees stable blocks as stable — within one model's matrix and,
as matched blocks, in a rectangular inter-model matrix."""

import itertools

import numpy as np
import pytest

from thinkalike.measures.blocks import (
    best_contrast,
    best_cosegmentations,
    best_segmentations,
    block_stability,
    cosegment_blocks,
    layer_order_null,
    segment_blocks,
)


def planted(sizes, within=0.9, between=0.3, noise=0.02, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    matrix = np.where(labels[:, None] == labels[None, :], within, between) + rng.normal(0, noise, (len(labels),) * 2)
    matrix = (matrix + matrix.T) / 2
    np.fill_diagonal(matrix, 1.0)
    return matrix


@pytest.mark.parametrize("sizes", [[3, 4, 2], [2, 2], [5, 1, 3, 3], [4, 4, 4, 4]])
def test_planted_blocks_are_recovered_exactly(sizes):
    found = segment_blocks(planted(sizes))
    ends = np.cumsum(sizes)
    assert found.structured
    assert found.blocks == tuple((int(end - size), int(end - 1)) for size, end in zip(sizes, ends))
    assert found.within == pytest.approx(0.9, abs=0.02) and found.between == pytest.approx(0.3, abs=0.02)


def contrast(matrix, blocks):
    labels = np.concatenate([[index] * (last - first + 1) for index, (first, last) in enumerate(blocks)])
    i, j = np.triu_indices(len(matrix), k=1)
    same = labels[i] == labels[j]
    return matrix[i, j][same].mean() - matrix[i, j][~same].mean()


def test_the_programme_finds_the_best_segmentation_of_an_exhaustive_search():
    rng = np.random.default_rng(3)
    matrix = rng.uniform(0, 1, (8, 8))
    matrix = (matrix + matrix.T) / 2
    for k, found in best_segmentations(matrix, 5).items():
        candidates = []
        for cuts in itertools.combinations(range(1, 8), k - 1):
            edges = (0, *cuts, 8)
            blocks = tuple((edges[b], edges[b + 1] - 1) for b in range(k))
            if any(last > first for first, last in blocks):  # some within-block pair
                candidates.append((contrast(matrix, blocks), blocks))
        best_value, best_blocks = max(candidates)
        assert found.contrast == pytest.approx(best_value, abs=1e-12), k
        assert found.blocks == best_blocks, k


def test_a_matrix_without_blocks_is_one_block():
    rng = np.random.default_rng(1)
    matrix = 0.8 + rng.normal(0, 0.02, (10, 10))
    matrix = (matrix + matrix.T) / 2
    found = segment_blocks(matrix)
    assert not found.structured and found.blocks == ((0, 9),)
    assert found.within == pytest.approx(0.8, abs=0.01)


def test_bootstrap_over_minibatches_finds_planted_blocks_stable_and_noise_unstable():
    batches = [planted([3, 4, 3], noise=0.05, seed=seed) for seed in range(12)]
    stable = block_stability(batches, n_resamples=50)
    assert stable.segmentation.blocks == ((0, 2), (3, 6), (7, 9))
    assert stable.same_blocks >= 0.9 and stable.boundary_frequency[3] >= 0.9 and stable.boundary_frequency[7] >= 0.9
    rng = np.random.default_rng(5)
    noise = [0.5 + rng.normal(0, 0.15, (10, 10)) for _ in range(12)]
    unstable = block_stability([(m + m.T) / 2 for m in noise], n_resamples=50, min_contrast=0.0)
    assert unstable.same_blocks < 0.5


@pytest.mark.parametrize("matrix", [np.ones((3, 4)), np.ones((1, 1)), np.array([[1.0, np.nan], [np.nan, 1.0]])])
def test_unusable_matrices_are_refused(matrix):
    with pytest.raises(ValueError, match="block structure needs"):
        segment_blocks(matrix)


def planted_between(sizes_a, sizes_b, within=0.85, between=0.25, noise=0.02, seed=0):
    """Model a's blocks of ``sizes_a`` layers matched in order with model b's of ``sizes_b``."""
    rng = np.random.default_rng(seed)
    labels_a, labels_b = np.repeat(np.arange(len(sizes_a)), sizes_a), np.repeat(np.arange(len(sizes_b)), sizes_b)
    return np.where(labels_a[:, None] == labels_b[None, :], within, between) + rng.normal(
        0, noise, (len(labels_a), len(labels_b))
    )


def blocks_of(sizes):
    ends = np.cumsum(sizes)
    return tuple((int(end - size), int(end - 1)) for size, end in zip(sizes, ends))


@pytest.mark.parametrize(
    ("sizes_a", "sizes_b"), [([2, 2, 2], [3, 4, 2]), ([3, 3], [1, 5]), ([1, 2, 3, 3], [3, 2, 2, 2]), ([4, 5], [4, 5])]
)
def test_planted_matched_blocks_between_two_models_are_recovered_exactly(sizes_a, sizes_b):
    found = cosegment_blocks(planted_between(sizes_a, sizes_b))
    assert found.structured
    assert found.blocks_a == blocks_of(sizes_a) and found.blocks_b == blocks_of(sizes_b)
    assert found.within == pytest.approx(0.85, abs=0.02) and found.between == pytest.approx(0.25, abs=0.02)
    assert found.boundaries == tuple(zip((a for a, _ in found.blocks_a[1:]), (b for b, _ in found.blocks_b[1:])))


def matched_contrast(matrix, blocks_a, blocks_b):
    labels_a = np.concatenate([[t] * (last - first + 1) for t, (first, last) in enumerate(blocks_a)])
    labels_b = np.concatenate([[t] * (last - first + 1) for t, (first, last) in enumerate(blocks_b)])
    same = labels_a[:, None] == labels_b[None, :]
    return matrix[same].mean() - matrix[~same].mean()


def test_the_matched_programme_finds_the_best_of_an_exhaustive_search():
    rng = np.random.default_rng(4)
    matrix = rng.uniform(0, 1, (5, 7))
    for k, found in best_cosegmentations(matrix, 4).items():
        candidates = []
        for cuts_a in itertools.combinations(range(1, 5), k - 1):
            for cuts_b in itertools.combinations(range(1, 7), k - 1):
                edges_a, edges_b = (0, *cuts_a, 5), (0, *cuts_b, 7)
                blocks_a = tuple((edges_a[t], edges_a[t + 1] - 1) for t in range(k))
                blocks_b = tuple((edges_b[t], edges_b[t + 1] - 1) for t in range(k))
                candidates.append((matched_contrast(matrix, blocks_a, blocks_b), blocks_a, blocks_b))
        best_value, best_a, best_b = max(candidates)
        assert found.contrast == pytest.approx(best_value, abs=1e-12), k
        assert (found.blocks_a, found.blocks_b) == (best_a, best_b), k


def test_an_inter_model_matrix_without_blocks_is_one_block_and_its_bootstrap_is_unstable():
    rng = np.random.default_rng(2)
    flat = 0.6 + rng.normal(0, 0.02, (6, 9))
    found = cosegment_blocks(flat)
    assert not found.structured and found.blocks == (((0, 5), (0, 8)),)
    assert found.within == pytest.approx(0.6, abs=0.01)
    stable = block_stability(
        [planted_between([2, 4], [3, 6], noise=0.05, seed=s) for s in range(10)], n_resamples=30, matched=True
    )
    assert stable.segmentation.blocks == (((0, 1), (0, 2)), ((2, 5), (3, 8)))
    assert stable.same_blocks >= 0.9 and stable.boundary_frequency[(2, 3)] >= 0.9
    noise = [0.5 + rng.normal(0, 0.15, (6, 9)) for _ in range(10)]
    assert block_stability(noise, n_resamples=30, min_contrast=0.0, matched=True).same_blocks < 0.5


@pytest.mark.parametrize("matrix", [np.ones((1, 4)), np.array([[1.0, np.nan], [0.5, 1.0]])])
def test_unusable_inter_model_matrices_are_refused(matrix):
    with pytest.raises(ValueError, match="matched blocks need"):
        cosegment_blocks(matrix)


def test_the_layer_order_null_sees_consecutive_blocks_and_not_a_shuffled_order():
    """Planted consecutive blocks: the best contrast far above its layer-order null's mean. The same matrix with its
    layers shuffled has the same null (the null forgets the order) but an observed contrast inside it. An
    exchangeable matrix (every off-diagonal cell equal) has contrast 0 under every order."""
    matrix = planted([3, 3, 3])
    null = layer_order_null(matrix, 4, 200, seed=0)
    assert null.shape == (200,) and best_contrast(matrix, 4) > null.mean() + 0.3
    assert np.mean(null >= best_contrast(matrix, 4) - 1e-12) < 0.05  # some orders keep the blocks whole: rarely
    order = np.random.default_rng(1).permutation(9)
    shuffled = matrix[np.ix_(order, order)]
    assert layer_order_null(shuffled, 4, 200, seed=0).mean() == pytest.approx(null.mean(), abs=0.03)
    shuffled_null = layer_order_null(shuffled, 4, 500, seed=2)
    assert np.mean(shuffled_null >= best_contrast(shuffled, 4)) > 0.01  # the shuffled order is no outlier
    flat = np.full((6, 6), 0.5)
    np.fill_diagonal(flat, 1.0)
    assert np.allclose(layer_order_null(flat, 4, 20, seed=0), 0.0)
    with pytest.raises(ValueError, match="n_permutations"):
        layer_order_null(matrix, 4, 0, seed=0)
