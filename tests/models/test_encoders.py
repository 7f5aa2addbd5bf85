"""Checkpoints as researchers use them: sentence encoders without an LM head, and checkpoints that
lack weights. Nothing random is ever computed with: the base model is loaded when the head is
absent, and missing weights a view needs are an error naming them."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from tests.models.conftest import make_tokenizer, save_masked_lm, save_sentence_encoder  # noqa: E402
from thinkalike.language.packing import check_packable  # noqa: E402
from thinkalike.models.handle import MissingWeightsError, ModelSourceError, NoUnembeddingError  # noqa: E402
from thinkalike.models.sources import load_model, load_spec_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def encoder(sentence_encoder_dir):
    return load_model(f"hf:{sentence_encoder_dir}", name="enc", device="cpu")


def test_sentence_encoder_loads_as_its_base_model_with_the_checkpoint_weights(encoder, sentence_encoder_dir):
    from transformers import BertModel

    assert type(encoder.module) is BertModel  # not BertLMHeadModel / BertForMaskedLM with a random head
    assert not encoder.has_unembedding and not encoder.is_causal and encoder.missing_weights == ()
    saved = load_file(sentence_encoder_dir / "model.safetensors")
    state = encoder.module.state_dict()
    assert set(saved) <= set(state)
    for key, value in saved.items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)


def test_sentence_encoder_residual_streams_are_its_hidden_states(encoder):
    ids = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 13, 14, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        residual = encoder.residual_streams(ids, mask)
        hidden = encoder.module(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    assert residual.shape == (3, 2, 6, 32)
    for layer, expected in enumerate(hidden):
        torch.testing.assert_close(residual[layer], expected)
    assert encoder.layer_parameters(1)["W_Q"].shape == (4, 32, 8)


def test_sentence_encoder_has_no_unembedding_and_says_so(encoder):
    for call in (encoder.unembedding_matrix, encoder.unembedding_bias):
        with pytest.raises(NoUnembeddingError, match=r"'enc'.*no LM head"):
            call()
    with pytest.raises(NoUnembeddingError, match="no LM head"):
        encoder.final_norm(torch.zeros(1, 32))  # BERT's final transform belongs to the absent head
    ids = torch.tensor([[2, 10, 3]])
    with pytest.raises(NoUnembeddingError, match="logits"):
        encoder.logits_from_layer(torch.zeros(1, 3, 32), 1, ids)
    with pytest.raises(NoUnembeddingError, match="allow_input_embedding"):
        encoder.vocabulary_matrix()
    # BERT ties its MLM decoder to the input embedding, so W_E^T is the documented stand-in for E
    assert encoder.ties_input_embedding
    torch.testing.assert_close(encoder.vocabulary_matrix(allow_input_embedding=True), encoder.embedding_matrix().T)


def test_masked_lm_checkpoint_keeps_its_head(tmp_path):
    handle = load_model(f"hf:{save_masked_lm(tmp_path / 'mlm')}", device="cpu")
    assert handle.has_unembedding and handle.missing_weights == ()
    assert handle.unembedding_matrix().shape == (32, handle.dims.d_vocab)
    torch.testing.assert_close(handle.vocabulary_matrix(), handle.unembedding_matrix())


def test_masked_lm_without_any_head_weights_loads_the_base_model(tmp_path, caplog):
    head = (
        "cls.predictions.bias",
        "cls.predictions.transform.LayerNorm.bias",
        "cls.predictions.transform.LayerNorm.weight",
        "cls.predictions.transform.dense.bias",
        "cls.predictions.transform.dense.weight",
    )
    directory = save_masked_lm(tmp_path / "mlm", drop=head)
    with caplog.at_level(logging.WARNING, logger="thinkalike.models.sources"):
        handle = load_model(f"hf:{directory}", device="cpu")
    assert type(handle.module).__name__ == "BertModel" and not handle.has_unembedding
    assert "no weights for the LM head" in caplog.text and "cls.predictions.transform.dense.weight" in caplog.text
    saved = load_file(directory / "model.safetensors")
    torch.testing.assert_close(handle.embedding_matrix(), saved["bert.embeddings.word_embeddings.weight"])


def test_missing_block_weight_is_an_error_naming_it(tmp_path):
    directory = save_sentence_encoder(tmp_path / "enc", drop=("encoder.layer.1.attention.self.query.weight",))
    for view in ("residual_streams", "all"):
        with pytest.raises(MissingWeightsError, match=r"encoder\.layer\.1\.attention\.self\.query\.weight") as info:
            load_model(f"hf:{directory}", device="cpu", view=view)
        assert str(directory) in str(info.value) and "randomly" in str(info.value)


def test_missing_weights_outside_the_view_load_but_are_never_used(tmp_path):
    head_transform = ("cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias")
    spec = f"hf:{save_masked_lm(tmp_path / 'mlm', drop=head_transform)}"
    with pytest.raises(MissingWeightsError, match=r"cls\.predictions\.transform\.dense\.weight"):
        load_model(spec, device="cpu")  # view "all" needs the head
    handle = load_model(spec, device="cpu", view="residual_streams")
    assert set(handle.missing_weights) == set(head_transform)
    with torch.no_grad():
        residual = handle.residual_streams(torch.tensor([[2, 10, 3]]))
    assert torch.isfinite(residual).all()
    with pytest.raises(MissingWeightsError, match=r"final norm.*cls\.predictions\.transform\.dense\.bias"):
        handle.final_norm(residual[-1])
    with pytest.raises(MissingWeightsError, match="logits"):
        handle.logits_from_layer(residual[1], 1, torch.tensor([[2, 10, 3]]))
    handle.unembedding_matrix()  # the decoder is tied to the (present) input embedding


def test_missing_pooler_is_not_needed_for_residual_streams(tmp_path):
    directory = save_sentence_encoder(tmp_path / "enc", drop=("pooler.dense.weight", "pooler.dense.bias"))
    handle = load_model(f"hf:{directory}", device="cpu", view="residual_streams")
    assert set(handle.missing_weights) == {"pooler.dense.weight", "pooler.dense.bias"}
    handle.check_view("all")  # no method computes with the pooler
    with torch.no_grad():
        assert handle.residual_streams(torch.tensor([[2, 10, 3]])).shape == (3, 1, 3, 32)


def test_unknown_view_is_refused(sentence_encoder_dir):
    with pytest.raises(ValueError, match="unknown view 'logitz'"):
        load_model(f"hf:{sentence_encoder_dir}", view="logitz")


def test_spec_tokenizer_loads_without_weights(sentence_encoder_dir, tiny_llama_gguf, tmp_path):
    tokenizer = load_spec_tokenizer(f"hf:{sentence_encoder_dir}")
    assert tokenizer.cls_token == "[CLS]" and tokenizer.bos_token is None and tokenizer.eos_token is None
    wrapping = check_packable(tokenizer, 16, what="activations.models.enc")
    assert (wrapping.prefix, wrapping.suffix) == ((2,), (3,)) and wrapping.convention == "tokenizer"
    gguf_path, _ = tiny_llama_gguf
    llama = load_spec_tokenizer(f"gguf:{gguf_path}")
    assert check_packable(llama, 16).prefix == (llama.bos_token_id,)
    assert load_spec_tokenizer("zoo:gelu_1l") is None
    bare = tmp_path / "no_tokenizer"
    save_sentence_encoder(bare)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink()
    with pytest.raises(ModelSourceError, match="tokenizer"):
        load_spec_tokenizer(f"hf:{bare}")
    with pytest.raises(ValueError, match=r"activations.models.enc: n_ctx=2 cannot hold the 2 special"):
        check_packable(tokenizer, 2, what="activations.models.enc")
    assert check_packable(make_tokenizer(), 4).convention == "none"  # no post-processor, no bos/eos


def test_causal_checkpoint_without_its_untied_head_loads_the_base_model(tmp_path, build_tiny, batch):
    from safetensors.torch import save_file

    module = build_tiny("llama")  # tie_word_embeddings=False: lm_head.weight is the head's own weight
    directory = tmp_path / "llama"
    module.save_pretrained(directory, safe_serialization=True)
    make_tokenizer().save_pretrained(directory)
    weights = load_file(directory / "model.safetensors")
    del weights["lm_head.weight"]
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    handle = load_model(f"hf:{directory}", device="cpu")
    assert type(handle.module).__name__ == "LlamaModel" and handle.missing_weights == ()
    with pytest.raises(NoUnembeddingError, match="no LM head"):
        handle.unembedding_matrix()
    with pytest.raises(NoUnembeddingError, match="not tied"):
        handle.vocabulary_matrix(allow_input_embedding=True)  # W_E is no stand-in for an untied head
    ids, mask = batch
    with torch.no_grad():
        residual = handle.residual_streams(ids, mask)
        expected = module.model(input_ids=ids, attention_mask=mask).last_hidden_state
        # a pre-LN base model keeps its final norm: final_norm(last residual) is its last hidden state
        torch.testing.assert_close(handle.final_norm(residual[-1]), expected, rtol=1e-5, atol=1e-5)
