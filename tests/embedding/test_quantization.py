"""GGML round trips (values on a Q4_1 / Q8_0 grid come back exactly, others within half a step), the refusal of a
width not a multiple of 32, the Jaccard overlap by hand, and the float-vs-quantised comparisons' shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.embedding.quantization import (
    jaccard,
    keep_k_comparison,
    keep_k_gaps,
    q4_1_roundtrip,
    q8_0_roundtrip,
    reading_overlap,
    relative_frobenius_error,
    roundtrip,
)

FP16_EPS = 2.0**-11  # float16's relative rounding (10-bit mantissa)


def _on_q4_1_grid(blocks: int, seed: int = 0) -> np.ndarray:
    """Blocks of 32 values m + d·q (q in 0 … 15, both 0 and 15 present), d and m exact in float16 and the sums
    exact in float32: Q4_1 finds this m and d and stores them without rounding."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(blocks):
        d = rng.integers(1, 64) * 2.0**-8
        m = rng.integers(-256, 256) * 2.0**-6
        q = rng.integers(0, 16, size=32)
        q[:2] = (0, 15)
        rows.append(m + d * rng.permutation(q))
    return np.asarray(rows, dtype=np.float32).reshape(-1, 64)


def test_values_on_the_q4_1_grid_come_back_exactly():
    grid = _on_q4_1_grid(8)
    assert np.array_equal(q4_1_roundtrip(grid), grid)
    assert np.array_equal(q4_1_roundtrip(q4_1_roundtrip(grid)), grid)


def test_values_on_the_q8_0_grid_come_back_exactly():
    rng = np.random.default_rng(1)
    d = rng.integers(1, 64, size=(6, 1)) * 2.0**-10
    q = rng.integers(-127, 128, size=(6, 32))
    q[:, 0] = 127
    grid = (d * q).astype(np.float32)
    assert np.array_equal(q8_0_roundtrip(grid), grid)


def test_q4_1_error_is_at_most_half_a_step_per_block():
    x = np.random.default_rng(2).normal(size=(16, 96)).astype(np.float32)
    blocks = x.reshape(-1, 32)
    d = (blocks.max(axis=1) - blocks.min(axis=1)) / 15
    slack = FP16_EPS * (np.abs(blocks.min(axis=1)) + 15 * d) + 1e-6
    error = np.abs(q4_1_roundtrip(x).reshape(-1, 32) - blocks).max(axis=1)
    assert np.all(error <= d / 2 + slack)
    assert np.all(error > 0)  # random values are not on the grid
    assert 0 < relative_frobenius_error(x, q4_1_roundtrip(x)) < 0.15


def test_the_round_trip_keeps_shape_and_accepts_tensors():
    x = torch.randn(3, 4, 64, generator=torch.Generator().manual_seed(0))
    out = roundtrip(x, "Q8_0")
    assert out.shape == (3, 4, 64) and out.dtype == np.float32
    assert relative_frobenius_error(x, out) < 0.01


@pytest.mark.parametrize("shape", [(4, 48), (33,), (2, 31)])
def test_a_width_not_a_multiple_of_32_is_refused(shape):
    with pytest.raises(ValueError, match="blocks of 32"):
        q4_1_roundtrip(np.zeros(shape, dtype=np.float32))


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown block format"):
        roundtrip(np.zeros((1, 32)), "Q2_K")


def test_jaccard_against_a_hand_computation():
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4]])
    b = np.array([[4, 3, 2, 1], [9, 10, 11, 12], [1, 2, 9, 10]])
    # identical sets in another order; disjoint; {1, 2} shared of {1, 2, 3, 4, 9, 10}
    assert jaccard(a, b).tolist() == [1.0, 0.0, 2 / 6]
    with pytest.raises(ValueError, match="same shape"):
        jaccard(a, b[:2])


def test_the_comparisons_of_a_matrix_with_itself_agree_fully():
    g = torch.Generator().manual_seed(0)
    e = torch.randn(32, 200, generator=g)
    table = keep_k_comparison(e, e.clone(), ks=(10, 50), n=20)
    assert len(table) == 2 * 2 * 2  # variants × E′ kinds × k
    assert np.allclose(table["difference"], 0.0)
    gaps = keep_k_gaps(table)
    assert np.allclose(gaps["float_gap"], gaps["quantised_gap"]) and len(gaps) == 4
    vectors = torch.randn(5, 32, generator=g)
    overlap = reading_overlap({"random": (vectors, vectors)}, e, e.clone(), ks=(3,))
    assert set(overlap["condition"]) == {"E", "E and vectors"} and len(overlap) == 4
    assert (overlap["mean_jaccard"] == 1.0).all() and (overlap["identical_share"] == 1.0).all()


def test_a_quantised_embedding_moves_readings_a_little():
    g = torch.Generator().manual_seed(3)
    e = torch.randn(64, 512, generator=g)
    e_q = torch.from_numpy(q4_1_roundtrip(e.T.contiguous())).T
    vectors = torch.randn(40, 64, generator=g)
    overlap = reading_overlap({"random": (vectors, vectors)}, e, e_q, ks=(10,))
    assert (overlap["mean_jaccard"] < 1.0).all() and (overlap["mean_jaccard"] > 0.3).all()
