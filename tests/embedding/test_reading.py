"""Reading parameters in vocabulary terms: tables against dense references, planted lookups, skipped groups,
bad input, and the real-model path on a locally saved Llama checkpoint."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch

from thinkalike.embedding import (
    EmbeddingSpaceError,
    extract_parameters,
    knowledge_lookup,
    read_head_interactions,
    read_vectors,
    readings_report,
    right_inverse,
    vocabulary_embedding,
)
from thinkalike.embedding.reading import lookup_query
from thinkalike.models.handle import NoUnembeddingError


def _dense_pairs(matrix: torch.Tensor, k: int):
    values, index = matrix.reshape(-1).topk(k)
    return list(zip((index // matrix.shape[1]).tolist(), (index % matrix.shape[1]).tolist())), values


@pytest.mark.parametrize("e_prime", ["transpose", "pinv"])
def test_head_pairs_equal_the_dense_vocabulary_matrices(zoo_model, e_prime):
    params = extract_parameters(zoo_model, layers=[1, 3])
    embedding = vocabulary_embedding(zoo_model).double()
    table = read_head_interactions(params, embedding, k=15, e_prime=e_prime, dtype=torch.float64, progress=False)
    assert len(table) == 2 * 2 * 2 * 15  # layers × groups × heads × k
    inverse = right_inverse(embedding, e_prime)
    raw = zoo_model.layer_parameters(3)  # independent of ModelParameters' bookkeeping
    head = 1
    dense = {
        "W_VO": inverse @ (raw["W_V"][head].double() @ raw["W_O"][head].double()) @ embedding,
        "W_QK": inverse @ (raw["W_Q"][head].double() @ raw["W_K"][head].double().T) @ inverse.T,
    }
    for group, matrix in dense.items():
        rows = table[(table.layer == 3) & (table["head"] == head) & (table.group == group)].sort_values("rank")
        pairs, values = _dense_pairs(matrix, 15)
        assert list(zip(rows.input_token_id, rows.output_token_id)) == pairs
        torch.testing.assert_close(torch.tensor(rows.score.to_numpy()), values, rtol=1e-9, atol=1e-9)
    assert set(table.input_token) >= {"#" + str(i) for i in table.input_token_id.head(3)}  # no tokenizer: "#id"


def test_excluding_same_token_pairs(zoo_model):
    params = extract_parameters(zoo_model, layers=[0])
    table = read_head_interactions(
        params,
        vocabulary_embedding(zoo_model),
        k=40,
        groups=["W_VO"],
        heads={0: [0]},
        exclude_same_token=True,
        progress=False,
    )
    assert len(table) == 40 and not (table.input_token_id == table.output_token_id).any()


def test_ff_vectors_read_as_top_tokens_of_both_signs(zoo_model):
    params = extract_parameters(zoo_model)
    embedding = vocabulary_embedding(zoo_model)
    table = read_vectors(params, embedding, k=8, neurons={2: [0, 5]})
    assert len(table) == 2 * 2 * 2 * 8  # neurons × groups × signs × k
    key = zoo_model.layer_parameters(2)["FF_in"][:, 5]
    logits = key @ embedding
    for sign, expected in (("+", logits.topk(8)), ("-", (-logits).topk(8))):
        rows = table[(table.group == "FF_key") & (table.neuron == 5) & (table.sign == sign)].sort_values("rank")
        assert rows.token_id.tolist() == expected.indices.tolist()
        torch.testing.assert_close(torch.tensor(rows.score.to_numpy()), expected.values.double())
    assert set(table.layer) == {2}


def test_knowledge_lookup_finds_a_planted_value(zoo_model):
    params = extract_parameters(zoo_model)
    embedding = vocabulary_embedding(zoo_model)
    seeds = [17, 42, 99]
    query = lookup_query(embedding, seeds)
    params.groups[2]["FF_out"] = params.groups[2]["FF_out"].clone()
    planted = params.groups[2]["FF_out"]
    planted[7] = 3.0 * planted.norm(dim=1).max() * query / query.norm()  # the most aligned vector, and longest
    table = knowledge_lookup(params, embedding, seeds, top=5)
    assert (table.iloc[0].layer, table.iloc[0].neuron, table.iloc[0]["rank"]) == (2, 7, 0)
    assert table.score.is_monotonic_decreasing and len(table) == 5
    # Reference: rank all values of all layers by v·q directly.
    everything = torch.cat([p["FF_out"] for p in params.groups]) @ query
    torch.testing.assert_close(torch.tensor(table.score.to_numpy()), everything.topk(5).values.double())


def test_report_lists_heads_neurons_and_lookup(zoo_model):
    params = extract_parameters(zoo_model, layers=[0])
    embedding = vocabulary_embedding(zoo_model)
    pairs = read_head_interactions(params, embedding, k=5, heads={0: [1]}, progress=False)
    vectors = read_vectors(params, embedding, k=4, neurons={0: [3]})
    lookup = knowledge_lookup(params, embedding, [1, 2], top=3)
    report = readings_report(vectors, pairs, lookup=lookup, title="tiny")
    assert report.startswith("# tiny")
    assert "### zoo-gelu — layer 0, head 1, W_VO" in report and "### zoo-gelu — layer 0, head 1, W_QK" in report
    assert "### zoo-gelu — layer 0, neuron 3" in report
    assert "| FF_key + | FF_key - | FF_value + | FF_value - |" in report
    first = pairs[(pairs.group == "W_VO")].sort_values("rank").iloc[0]
    assert f"| 0 | {first.input_token} | {first.output_token} |" in report
    assert "## Knowledge lookup" in report


def test_mamba_has_no_heads_a_note_not_a_crash(tiny_mamba, caplog):
    params = extract_parameters(tiny_mamba)
    assert set(params.skipped) == {"W_Q", "W_K", "W_V", "W_O"} and "Mamba has no attention" in params.skipped["W_Q"]
    embedding = vocabulary_embedding(tiny_mamba)
    with caplog.at_level("WARNING"):
        pairs = read_head_interactions(params, embedding, k=5, progress=False)
    assert pairs.empty and "no W_VO" in caplog.text and "Mamba has no attention" in caplog.text
    vectors = read_vectors(params, embedding, k=3)
    assert len(vectors) == 2 * 2 * 2 * tiny_mamba.layer_parameters(0)["FF_in"].shape[1] * 3


def test_model_without_unembedding_raises_clearly():
    from transformers import BertConfig, BertModel

    from thinkalike.models.hf import HFModelHandle

    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
        max_position_embeddings=16,
    )
    handle = HFModelHandle("encoder", "hf:encoder", BertModel(config))
    with pytest.raises(NoUnembeddingError, match="linear unembedding.*'encoder'.*no LM head"):
        vocabulary_embedding(handle)
    assert vocabulary_embedding(handle, allow_input_embedding=True).shape == (16, 50)  # tied family: W_Eᵀ


def test_bad_input(zoo_model):
    params = extract_parameters(zoo_model, layers=[0])
    embedding = vocabulary_embedding(zoo_model)
    with pytest.raises(EmbeddingSpaceError, match="k=257 exceeds the vocabulary size V=256"):
        read_vectors(params, embedding, k=257)
    with pytest.raises(EmbeddingSpaceError, match="unknown E′ kind 'inverse'"):
        read_head_interactions(params, embedding, e_prime="inverse", progress=False)
    with pytest.raises(IndexError, match="layers \\[2\\] were not extracted"):
        read_vectors(params, embedding, neurons={2: [0]})
    with pytest.raises(EmbeddingSpaceError, match="'dog' is not a token.*no tokenizer"):
        knowledge_lookup(params, embedding, ["dog"])


# ---------------------------------------------------------------------------------------- a Llama checkpoint


@pytest.fixture(scope="module")
def llama_directory(tmp_path_factory):
    """A tiny LlamaForCausalLM (GQA: 4 query heads, 2 kv heads; untied head) saved with a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from thinkalike.models.architectures import build_zoo_module, hf_zoo_config

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(61)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    config = hf_zoo_config(
        "tiny-llama",
        "llama",
        "causal",
        vocab_size=len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        max_position_embeddings=32,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    module = build_zoo_module(config, seed=3)
    directory = tmp_path_factory.mktemp("llama") / "tiny-llama"
    module.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def test_llama_checkpoint_extraction_and_reading(llama_directory):
    from safetensors.torch import load_file

    from thinkalike.models.sources import load_model

    handle = load_model(f"hf:{llama_directory}", name="tiny-llama", device="cpu")
    params = extract_parameters(handle)
    assert params.skipped == {} and params.layers == (0, 1)
    embedding = vocabulary_embedding(handle)
    weights = load_file(llama_directory / "model.safetensors")  # the saved file, not the loaded module
    torch.testing.assert_close(embedding, weights["lm_head.weight"].T)
    pairs = read_head_interactions(
        params, embedding, k=10, tokenizer=handle.tokenizer, dtype=torch.float64, progress=False
    )
    # Head 3 uses kv head 1 (GQA: 4 query heads share 2 kv heads); W_VO from the raw projections (x @ Wᵀ).
    e = embedding.double()
    w_v = weights["model.layers.1.self_attn.v_proj.weight"].double().T[:, 8:16]
    w_o = weights["model.layers.1.self_attn.o_proj.weight"].double().T[24:32]
    pairs_ref, values = _dense_pairs(e.T @ (w_v @ w_o) @ e, 10)
    head = pairs[(pairs.layer == 1) & (pairs["head"] == 3) & (pairs.group == "W_VO")].sort_values("rank")
    assert list(zip(head.input_token_id, head.output_token_id)) == pairs_ref
    torch.testing.assert_close(torch.tensor(head.score.to_numpy()), values, rtol=1e-9, atol=1e-9)
    assert head.input_token.str.fullmatch(r"w\d+|<unk>|<s>|</s>").all()  # the tokenizer's own pieces
    vectors = read_vectors(params, embedding, k=5, tokenizer=handle.tokenizer)
    up = weights["model.layers.0.mlp.up_proj.weight"][9]  # FF key 9 of layer 0 (gate omitted)
    first = vectors[(vectors.layer == 0) & (vectors.group == "FF_key") & (vectors.neuron == 9) & (vectors.sign == "+")]
    assert first.sort_values("rank").token_id.tolist() == (up @ embedding).topk(5).indices.tolist()
    lookup = knowledge_lookup(params, embedding, ["w3", "w4"], tokenizer=handle.tokenizer, top=4)
    assert len(lookup) == 4 and lookup.top_tokens.str.count(",").eq(9).all()


def test_embedding_pipeline_nodes_run_on_the_llama_checkpoint(llama_directory):
    """The nodes the ``embedding`` pipeline runs for an ``hf:`` model: readings, keep-k and self-alignment."""
    from thinkalike.pipelines.embedding.nodes import (
        align_pair,
        measure_keep_k,
        read_model,
    )
    from thinkalike.pipelines.embedding.schema import EmbeddingParameters
    from thinkalike.pipelines.schema import validate_section

    spec = f"hf:{llama_directory}"
    values = {
        "device": "cpu",
        "dtype": "float64",
        "threads": 1,
        "progress": False,
        "readings": {"k": 5, "pair_k": 5, "report_neurons": 1, "report_heads": 1},
        "lookup": {"token_sets": {"some_words": ["w3", "w4"]}, "top": 3, "k_tokens": 5},
        "keep_k": {
            "ks": [10, 64],
            "e_primes": ["transpose", "pinv"],
            "distributions": ["normal", "ff_values"],
            "n": 50,
            "seed": 0,
        },
        "alignment": {"groups": ["FF_key", "W_V"], "spaces": ["projected", "raw"]},
    }
    settings = validate_section(EmbeddingParameters, values, "embedding")
    vectors, pairs, lookup, report = read_model(settings=settings, model="llama", spec=spec)
    assert set(vectors["layer"]) == {0, 1} and set(pairs["group"]) == {"W_VO", "W_QK"}
    assert set(lookup["token_set"]) == {"some_words"} and "llama" in report
    (scores,) = measure_keep_k(None, settings=settings, model="llama", spec=spec)
    full = scores[(scores["k"] == 64) & (scores["e_prime"] == "pinv")]  # k = V with E⁺: exact
    assert np.allclose(full["score"], 1.0, atol=1e-6) and set(scores["distribution"]) == {"normal", "ff_values"}
    _, matches = align_pair(
        settings=settings, model_a="llama", spec_a=spec, model_b="llama_again", spec_b=spec, n_sources_a=0
    )
    assert len(matches) == 4 and (matches["diagonal_fraction"] == 1.0).all()  # with itself: the identity matching
