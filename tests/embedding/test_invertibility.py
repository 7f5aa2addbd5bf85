"""keep-k robust invertibility: the paper's protocol against a reference written from the formula, the exact
(k = V) value, E′ = E⁺ giving 1, orthonormal E, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.embedding import (
    EmbeddingSpaceError,
    condition_number,
    default_k_grid,
    exact_score,
    ff_value_pool,
    keep_k,
    keep_k_score,
    keep_k_scores,
    paper_k,
    residual_pool,
    vocabulary_embedding,
)


def _random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _reference_keep_k(z: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros_like(z)
    for i, row in enumerate(z):
        keep = np.argsort(-np.abs(row), kind="stable")[:k]
        out[i, keep] = row[keep]
    return out


def _reference_score(x: np.ndarray, y: np.ndarray, e: np.ndarray, e_prime: np.ndarray, k: int) -> float:
    """cos(vec X Yᵀ, vec keep_k(X E) keep_k(Y E′ᵀ)ᵀ), written from appendix A."""
    g = x @ y.T
    g_hat = _reference_keep_k(x @ e, k) @ _reference_keep_k(y @ e_prime.T, k).T
    return float(np.sum(g * g_hat) / np.sqrt(np.sum(g * g) * np.sum(g_hat * g_hat)))


def test_keep_k_keeps_the_largest_magnitudes_with_their_signs():
    z = _random(6, 20)
    torch.testing.assert_close(keep_k(z, 5), torch.from_numpy(_reference_keep_k(z.numpy(), 5)))
    assert int((keep_k(z, 5) != 0).sum(dim=1).max()) == 5


@pytest.mark.parametrize("e_prime", ["transpose", "pinv"])
def test_scores_match_the_reference(e_prime):
    e, x, y = _random(8, 50, seed=1), _random(30, 8, seed=2), _random(30, 8, seed=3)
    inverse = (e.T if e_prime == "transpose" else torch.linalg.pinv(e)).numpy()
    for k in (3, 10, 25):
        one = keep_k_score(x, e, k, e_prime)
        two = keep_k_score(x, e, k, e_prime, y=y)
        assert one == pytest.approx(_reference_score(x.numpy(), x.numpy(), e.numpy(), inverse, k), abs=1e-12)
        assert two == pytest.approx(_reference_score(x.numpy(), y.numpy(), e.numpy(), inverse, k), abs=1e-12)


def test_k_equal_to_v_is_the_exact_value_and_pinv_gives_one():
    e, x, y = _random(8, 50, seed=4), _random(40, 8, seed=5), _random(40, 8, seed=6)
    for e_prime in ("transpose", "pinv"):
        assert keep_k_score(x, e, 50, e_prime) == pytest.approx(exact_score(x, e, e_prime), abs=1e-12)
        assert keep_k_score(x, e, 50, e_prime, y=y) == pytest.approx(exact_score(x, e, e_prime, y=y), abs=1e-12)
    assert keep_k_score(x, e, 50, "pinv") == pytest.approx(1.0, abs=1e-12)
    assert keep_k_score(x, e, 50, "pinv", y=y) == pytest.approx(1.0, abs=1e-12)
    assert exact_score(x, e, "transpose") < 0.99  # a random E is not orthonormal: Eᵀ is not its inverse


def test_orthonormal_rows_make_transpose_and_pinv_the_same():
    q, _ = torch.linalg.qr(_random(40, 40, seed=7))
    e = q[:6]  # E Eᵀ = I: Eᵀ = E⁺
    x = _random(25, 6, seed=8)
    for k in (2, 7, 40):
        assert keep_k_score(x, e, k, "transpose") == pytest.approx(keep_k_score(x, e, k, "pinv"), abs=1e-10)
    assert condition_number(e) == pytest.approx(1.0)


def test_score_table_on_a_zoo_model(zoo_model):
    embedding = vocabulary_embedding(zoo_model)
    ids = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        streams = zoo_model.residual_streams(ids, torch.ones_like(ids))[1:]  # every block's output
    values = ff_value_pool([zoo_model.layer_parameters(i)["FF_out"] for i in range(4)])
    pools = {"normal": None, "ff_values": values, "residual": residual_pool(streams.numpy())}
    table = keep_k_scores(embedding, pools, n=100, dtype=torch.float64)
    grid = default_k_grid(256)
    assert grid == [5, 10, 50, 100, 200, 256]  # 5: round(0.02 · 256), the paper's share of V
    assert paper_k(394) == 8 and paper_k(50_257) == 1005
    assert len(table) == 3 * 2 * 2 * len(grid)
    assert set(table.variant) == {"one_sample", "two_sample"} and set(table.e_prime) == {"transpose", "pinv"}
    full = table[table.k == 256]
    assert np.allclose(full[full.e_prime == "pinv"].score, 1.0, atol=1e-9)
    assert table.score.between(-1 - 1e-9, 1 + 1e-9).all()
    assert table.condition_number.nunique() == 1
    assert table.condition_number.iloc[0] == pytest.approx(float(torch.linalg.cond(embedding.double())))
    assert (table[table.distribution == "ff_values"].n == 100).all()


def test_bad_input():
    e, x = _random(8, 50), _random(10, 8)
    with pytest.raises(EmbeddingSpaceError, match="k=51 exceeds the vocabulary size V=50"):
        keep_k_score(x, e, 51)
    with pytest.raises(EmbeddingSpaceError, match="ks: k=60 exceeds"):
        keep_k_scores(e, {"normal": None}, ks=[10, 60])
    with pytest.raises(EmbeddingSpaceError, match="e_primes: unknown E′ kind 'inverse'"):
        keep_k_scores(e, {"normal": None}, e_primes=["inverse"])
    with pytest.raises(ValueError, match="pool's vectors have 7 dimensions, E has d = 8"):
        keep_k_scores(e, {"residual": _random(20, 7)})
