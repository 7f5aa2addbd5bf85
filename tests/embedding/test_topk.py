"""The factored top-k scan equals a dense top-k of the formed product."""

from __future__ import annotations

import pytest
import torch

from thinkalike.embedding.topk import top_k_of_product


def _factors(m: int, n: int, r: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, r, generator=g, dtype=torch.float64), torch.randn(r, n, generator=g, dtype=torch.float64))


def _dense(left, right, k, largest=True, exclude_diagonal=False):
    product = left @ right
    if exclude_diagonal:
        product.fill_diagonal_(-torch.inf if largest else torch.inf)
    values, index = product.reshape(-1).topk(k, largest=largest)
    return index // product.shape[1], index % product.shape[1], values


@pytest.mark.parametrize("block_rows", [1, 7, 60, 500])
@pytest.mark.parametrize("largest", [True, False])
def test_factored_top_k_equals_dense_top_k(block_rows, largest):
    left, right = _factors(60, 60, 5)
    top = top_k_of_product(left, right, 25, largest=largest, block_rows=block_rows)
    rows, columns, values = _dense(left, right, 25, largest)
    assert torch.equal(top.rows, rows) and torch.equal(top.columns, columns)
    torch.testing.assert_close(top.values, values, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(top.values, (left @ right)[top.rows, top.columns], rtol=1e-12, atol=1e-12)


def test_rectangular_product_excluding_the_diagonal():
    left, right = _factors(40, 70, 3, seed=1)
    top = top_k_of_product(left, right, 30, exclude_diagonal=True, block_rows=6)
    rows, columns, values = _dense(left, right, 30, exclude_diagonal=True)
    assert torch.equal(top.rows, rows) and torch.equal(top.columns, columns)
    assert not bool((top.rows == top.columns).any())
    torch.testing.assert_close(top.values, values)


def test_block_size_from_a_byte_budget_gives_the_same_answer():
    left, right = _factors(50, 80, 4, seed=2)
    small = top_k_of_product(left, right, 10, block_bytes=80 * 8 * 3)  # 3 rows per block
    assert torch.equal(small.rows, top_k_of_product(left, right, 10, block_rows=50).rows)


def test_rows_of_rising_magnitude_keep_replacing_the_running_top_k():
    left, right = _factors(90, 50, 3, seed=3)
    left = left * torch.linspace(0.1, 10, 90, dtype=torch.float64).unsqueeze(1)  # later blocks beat earlier ones
    top = top_k_of_product(left, right, 12, block_rows=4)
    rows, columns, _ = _dense(left, right, 12)
    assert torch.equal(top.rows, rows) and torch.equal(top.columns, columns)


def test_bad_input():
    left, right = _factors(5, 6, 2)
    with pytest.raises(ValueError, match="k=31 outside 1 … 30"):
        top_k_of_product(left, right, 31)
    with pytest.raises(ValueError, match="off the diagonal"):
        top_k_of_product(left, right, 30, exclude_diagonal=True)
    with pytest.raises(ValueError, match="do not multiply"):
        top_k_of_product(left, right.T, 3)
