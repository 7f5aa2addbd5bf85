"""Zero-shot stitching x_A = x_B E_B E_A⁺: identity for one model, and it undoes a function-preserving
residual permutation exactly (the permuted model's states map onto the original's)."""

from __future__ import annotations

import pytest
import torch

from thinkalike.embedding import (
    EmbeddingSpaceError,
    vocabulary_embedding,
    zero_shot_map,
    zero_shot_stitch,
)


def test_one_model_maps_to_itself():
    e = torch.randn(8, 40, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(zero_shot_map(e, e), torch.eye(8, dtype=torch.float64), atol=1e-10, rtol=0)


def test_the_map_undoes_a_residual_permutation(zoo_model, zoo_permuted):
    permuted, perm = zoo_permuted
    e_a, e_b = vocabulary_embedding(zoo_model), vocabulary_embedding(permuted)
    expected = torch.zeros(len(perm), len(perm))
    expected[torch.arange(len(perm)), perm] = 1.0  # row i of the copy's space is dimension perm[i] of A's
    torch.testing.assert_close(zero_shot_map(e_b, e_a), expected, atol=1e-5, rtol=0)
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        states_b = permuted.residual_streams(ids, torch.ones_like(ids))
        states_a = zoo_model.residual_streams(ids, torch.ones_like(ids))
    torch.testing.assert_close(zero_shot_stitch(states_b, e_b, e_a), states_a, atol=1e-4, rtol=1e-4)


def test_bad_input():
    e_a, e_b = torch.randn(8, 40), torch.randn(6, 30)
    with pytest.raises(EmbeddingSpaceError, match="different vocabularies \\(V = 30 and 40\\)"):
        zero_shot_map(e_b, e_a)
    with pytest.raises(EmbeddingSpaceError, match="width 5 do not match E_B \\(d_B = 6\\)"):
        zero_shot_stitch(torch.randn(3, 5), e_b, torch.randn(8, 30))
