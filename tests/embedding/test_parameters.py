"""Parameter vectors per family: rows of each group against the raw weights of the module, and groups an
architecture lacks (attention-only bridge: no MLP) recorded as skipped."""

from __future__ import annotations

import pytest
import torch

from tests.embedding.conftest import zoo_bridge_config
from tests.stitching.toys import bridge_handle, hf_handle
from thinkalike.embedding import (
    extract_parameters,
    read_head_interactions,
    read_vectors,
    vocabulary_embedding,
)


def test_gpt2_vectors_are_the_raw_columns_and_rows():
    handle = hf_handle("gpt2")
    params = extract_parameters(handle, layers=[2])
    block = handle.module.transformer.h[2]
    d, dh = 32, 8
    c_attn = block.attn.c_attn.weight  # Conv1D (d, 3d): x @ W; q | k | v
    for offset, group in enumerate(("W_Q", "W_K", "W_V")):
        torch.testing.assert_close(params.vectors(group, 0), c_attn[:, offset * d : (offset + 1) * d].T)
    torch.testing.assert_close(params.vectors("W_O", 0), block.attn.c_proj.weight)  # rows h·d_head + j
    torch.testing.assert_close(params.vectors("FF_key", 0), block.mlp.c_fc.weight.T)
    torch.testing.assert_close(params.vectors("FF_value", 0), block.mlp.c_proj.weight)
    first, second = params.interaction_factors("W_VO", 0)
    torch.testing.assert_close(
        first[1] @ second[1], c_attn[:, 2 * d + dh : 2 * d + 2 * dh] @ block.attn.c_proj.weight[dh : 2 * dh]
    )


@pytest.mark.parametrize("model_type", ["gpt_neox", "bert", "llama"])
def test_other_families_give_every_group(model_type):
    handle = hf_handle(model_type)
    params = extract_parameters(handle)
    assert params.skipped == {} and params.layers == (0, 1, 2)
    for group in ("FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"):
        assert params.vectors(group, 1).shape[1] == 32
    assert params.vectors("W_Q", 0).shape[0] == 32  # n_heads · d_head


def test_attention_only_bridge_skips_the_ff_groups(caplog):
    config = zoo_bridge_config("attn-only", n_layers=2)
    config["bridge_config"]["attn_only"] = True
    handle = bridge_handle("attn-only", config)
    params = extract_parameters(handle)
    assert set(params.skipped) == {"FF_in", "FF_out"} and "attention-only" in params.skipped["FF_in"]
    embedding = vocabulary_embedding(handle)
    with caplog.at_level("WARNING"):
        assert read_vectors(params, embedding, k=3).empty
    assert "no FF_key" in caplog.text
    assert len(read_head_interactions(params, embedding, k=3, progress=False)) == 2 * 2 * 2 * 3


def test_layers_outside_the_model_raise(zoo_model):
    with pytest.raises(IndexError, match="layer 4 outside 0 … 3 of model 'zoo-gelu'"):
        extract_parameters(zoo_model, layers=[4])
