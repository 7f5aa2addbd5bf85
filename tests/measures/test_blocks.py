"""Block structure: planted blocks are recovered exactly, the dynamic programme equals an exhaustive search, a
matrix without blocks is one block, and the bootstrap sees stable blocks as stable."""

import itertools

import numpy as np
import pytest

from thinkalike.measures.blocks import best_segmentations, block_stability, segment_blocks


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
