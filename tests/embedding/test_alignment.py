"""Layer alignment: the kernelized Pearson against explicit V-dimensional projections, identity matchings for
an exact copy and for a function-preserving residual permutation (projected only), and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.embedding.conftest import zoo_bridge_config
from tests.stitching.toys import bridge_handle
from thinkalike.embedding import (
    VECTOR_GROUPS,
    EmbeddingSpaceError,
    align_models,
    extract_parameters,
    kernelized_pearson,
    layer_similarity,
    match_layers,
    projection_kernel,
    raw_pearson,
    vocabulary_embedding,
)
from thinkalike.embedding.alignment import align_layers, diagonal_fraction


def _random(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_kernelized_pearson_equals_the_explicit_projection_pearson():
    e_a, e_b = _random(6, 40, seed=1), _random(9, 40, seed=2) + 0.3  # different widths, non-zero means
    x, y = _random(5, 6, seed=3), _random(7, 9, seed=4)
    explicit = np.corrcoef((x @ e_a).numpy(), (y @ e_b).numpy())[:5, 5:]  # V-dim projections, numpy
    np.testing.assert_allclose(
        kernelized_pearson(x, y, projection_kernel(e_a, e_b)).numpy(), explicit, rtol=1e-10, atol=1e-12
    )


def test_raw_pearson_and_layer_similarity_match_numpy():
    x, y = [_random(4, 12, seed=s) for s in (5, 6)], [_random(3, 12, seed=s) for s in (7, 8, 9)]
    np.testing.assert_allclose(
        raw_pearson(x[0], y[1]).numpy(), np.corrcoef(x[0].numpy(), y[1].numpy())[:4, 4:], atol=1e-12
    )
    e_a, e_b = _random(12, 30, seed=10), _random(12, 30, seed=11)
    projected = layer_similarity(x, y, projection_kernel(e_a, e_b))
    expected = [
        [np.abs(np.corrcoef((a @ e_a).numpy(), (b @ e_b).numpy())[: len(a), len(a) :]).mean() for b in y] for a in x
    ]
    np.testing.assert_allclose(projected, expected, rtol=1e-10)
    assert projected.shape == (2, 3) and layer_similarity(x, y, None).shape == (2, 3)


def test_matching_recovers_a_planted_assignment():
    similarity = np.full((4, 4), 0.1)
    similarity[[0, 1, 2, 3], [2, 0, 3, 1]] = 0.9
    similarity[0, 0] = 0.8  # greedy row 0 would be fine; the optimum still pairs 0 with 2
    match = match_layers(similarity)
    assert match.tolist() == [2, 0, 3, 1]
    assert diagonal_fraction(match, range(4), range(4)) == 0.0
    assert match_layers(np.eye(3)[:, :2]).tolist() == [0, 1, -1]  # A deeper than B: layer 2 left over


def test_an_exact_copy_aligns_on_the_diagonal(zoo_model):
    copy = bridge_handle("zoo-gelu-copy", zoo_bridge_config(), zoo_model.module.state_dict())
    similarities, matches = align_models(zoo_model, copy)
    assert set(matches.group) == set(VECTOR_GROUPS) and set(matches.space) == {"projected", "raw"}
    assert (matches.diagonal_fraction == 1.0).all()
    assert matches.matching.eq("0→0, 1→1, 2→2, 3→3").all()
    assert len(similarities) == 6 * 2 * 16 and similarities.matched.sum() == 6 * 2 * 4


def test_a_permuted_residual_basis_aligns_only_when_projected(zoo_model, zoo_permuted):
    permuted, _ = zoo_permuted
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    with torch.no_grad():  # the copy computes the same function (so the test's premise holds)
        torch.testing.assert_close(permuted.logits(ids, mask), zoo_model.logits(ids, mask), rtol=1e-5, atol=1e-5)
    similarities, matches = align_models(zoo_model, permuted)
    projected = matches[matches.space == "projected"]
    raw = matches[matches.space == "raw"]
    assert (projected.diagonal_fraction == 1.0).all()
    assert raw.diagonal_fraction.mean() <= 0.5 and (raw.diagonal_fraction < 1.0).sum() >= 4
    # Projection makes the permutation invisible: the projected similarities equal those of the model with itself.
    itself, _ = align_models(zoo_model, zoo_model, spaces=["projected"])
    mine = similarities[similarities.space == "projected"].reset_index(drop=True)
    np.testing.assert_allclose(mine.similarity, itself.similarity, rtol=1e-9)


def test_different_widths_skip_the_raw_baseline(zoo_model, caplog):
    wider = bridge_handle("zoo-wide", zoo_bridge_config("zoo-wide", d_model=48, n_layers=2, seed=3))
    with caplog.at_level("WARNING"):
        similarities, matches = align_models(zoo_model, wider, groups=["FF_key", "W_O"])
    assert set(matches.space) == {"projected"} and len(matches) == 2
    assert "no raw baseline for 'zoo-gelu' vs 'zoo-wide'" in caplog.text
    assert len(similarities) == 2 * 4 * 2 and matches.n_layers_b.eq(2).all()


def test_different_vocabularies_name_both_models(zoo_model):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    def tokenizer(prefix):
        words = {f"{prefix}{i}": i for i in range(256)}
        return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(words, unk_token=f"{prefix}0")))

    smaller = bridge_handle(
        "zoo-small-vocab",
        {**zoo_bridge_config(), "bridge_config": {**zoo_bridge_config()["bridge_config"], "d_vocab": 200}},
    )
    with pytest.raises(EmbeddingSpaceError, match="model 'zoo-gelu' and model 'zoo-small-vocab'.*V = 256 and 200"):
        align_models(zoo_model, smaller)
    a = bridge_handle("tok-a", zoo_bridge_config(), tokenizer=tokenizer("a"))
    b = bridge_handle("tok-b", zoo_bridge_config(), tokenizer=tokenizer("b"))
    with pytest.raises(EmbeddingSpaceError, match="model 'tok-a' and model 'tok-b' use different tokenizers"):
        align_models(a, b)
    align_models(a, bridge_handle("tok-a2", zoo_bridge_config(), tokenizer=tokenizer("a")), groups=["W_V"])


def test_mamba_alignment_skips_attention_groups(tiny_mamba, caplog):
    params = extract_parameters(tiny_mamba)
    embedding = vocabulary_embedding(tiny_mamba)
    with caplog.at_level("WARNING"):
        _, matches = align_layers(params, params, embedding, embedding)
    assert set(matches.group) == {"FF_key", "FF_value"} and "Mamba has no attention" in caplog.text
