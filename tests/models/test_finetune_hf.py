"""Fine-tuning a real (transformers) encoder as a classifier, issue 58's first step: a tiny random BERT stands for
all-MiniLM-L6-v2 (the same BertModel family) so the test needs no checkpoint."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch

from thinkalike.models.architectures import build_zoo_module, hf_zoo_config
from thinkalike.models.finetune import FinetuneConfig, finetune_classifier, predict_labels
from thinkalike.models.sources import load_classifier

VOCAB, LAYERS = 50, 2


@pytest.fixture(scope="module")
def encoder():
    config = hf_zoo_config(
        "tiny_bert",
        "bert",
        "masked",
        hidden_size=32,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=32,
    )
    config["seed"] = 0
    return build_zoo_module(config, seed=0).state_dict(), config


def pairs(n=48, seq=10, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    half = (VOCAB - 5) // 2  # a "yes" sequence draws its tokens from the upper half of the vocabulary
    ids = 5 + rng.integers(0, half, size=(n, seq)) + half * labels[:, None]
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "labels": labels}


def tune(encoder, head_seed=1, data_seed=2, steps=30):
    weights, config = encoder
    settings = FinetuneConfig(
        steps=steps, batch_size=16, learning_rate=3e-3, warmup_steps=3, head_seed=head_seed, data_seed=data_seed
    )
    return finetune_classifier(weights, config, pairs(), "copy", ["no", "yes"], settings, "cpu", progress=False)


def test_a_bert_copy_learns_with_its_lm_head_dropped_and_no_dropout(encoder):
    weights, config, curve = tune(encoder)
    assert not any(key.startswith("cls.") for key in weights)  # BERT's MLM head is not the classifier's
    assert weights["classifier.weight"].shape == (2, 32)
    hf = config["hf_config"]
    assert hf["architectures"] == ["BertForTokenClassification"] and hf["hidden_dropout_prob"] == 0.0
    assert curve["train_loss"].iloc[-1] < curve["train_loss"].iloc[0]
    handle = load_classifier(weights, config, device="cpu")
    data = pairs(seed=1)
    accuracy = float(np.mean(predict_labels(handle, data["input_ids"], data["attention_mask"]) == data["labels"]))
    assert accuracy > 0.7


def test_same_seeds_give_the_same_weights_and_another_head_seed_others(encoder):
    first, _, _ = tune(encoder, steps=4)
    again, _, _ = tune(encoder, steps=4)
    other, _, _ = tune(encoder, head_seed=7, steps=4)
    assert all(torch.equal(first[key], again[key]) for key in first)
    assert not torch.equal(first["classifier.weight"], other["classifier.weight"])


def test_the_classifier_runs_from_any_layer_as_the_whole_model_does(encoder):
    """Identity stitching's contract: a copy's logits from layer ℓ fed its own residual stream at ℓ are its
    logits (pooled class logits, every layer including the last, which enters the class head)."""
    weights, config, _ = tune(encoder, steps=4)
    handle = load_classifier(weights, config, device="cpu")
    data = pairs(n=6, seed=3)
    ids, mask = torch.tensor(data["input_ids"]), torch.tensor(data["attention_mask"])
    with torch.no_grad():
        streams = handle.residual_streams(ids, mask)
        whole = handle.logits(ids, mask)
        assert whole.shape == (6, 2)
        for layer in range(LAYERS + 1):
            torch.testing.assert_close(handle.logits_from_layer(streams[layer], layer, ids, mask), whole)


def test_a_checkpoint_laid_out_as_minilm_imports_as_an_encoder_the_copies_fine_tune(tmp_path):
    """A BertModel saved with save_pretrained beside a WordPiece tokenizer (all-MiniLM-L6-v2's layout: no LM head, a
    pooler): imported, its weights are the base model's under ``bert.`` without the pooler, and a copy fine-tuned
    from it starts from exactly them."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from thinkalike.models.encoder_import import import_encoder

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "cat", "sees", "runs", "a", "bird"]
    tokenizer = BertTokenizerFast(vocab={word: index for index, word in enumerate(words)})
    bert = BertModel(
        BertConfig(
            vocab_size=len(words),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
        )
    )
    bert.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    weights, config, loaded_tokenizer = import_encoder(f"hf:{tmp_path}", "tiny_minilm")
    assert config["family"] == "hf" and config["hf_config"]["model_type"] == "bert"
    assert config["source"] == f"hf:{tmp_path}" and loaded_tokenizer is not None
    saved = bert.state_dict()
    assert set(weights) == {f"bert.{key}" for key in saved if not key.startswith("pooler.")}
    assert all(torch.equal(weights[f"bert.{key}"], saved[key]) for key in saved if not key.startswith("pooler."))
    encoded = loaded_tokenizer(["the dog sees a cat", "a bird runs"] * 8, padding=True, return_tensors="np")
    data = {
        "input_ids": encoded["input_ids"],
        "attention_mask": encoded["attention_mask"],
        "labels": np.array([0, 1] * 8),
    }
    settings = FinetuneConfig(steps=2, batch_size=8, learning_rate=1e-4, warmup_steps=0, head_init_std=0.02)
    copy_weights, copy_config, _ = finetune_classifier(
        weights, config, data, "copy", ["no", "yes"], settings, "cpu", progress=False
    )
    assert copy_config["classifier"]["base_model"] == "tiny_minilm"
    assert set(copy_weights) == set(weights) | {"classifier.weight", "classifier.bias"}
    assert any(not torch.equal(copy_weights[key], weights[key]) for key in weights)  # the body trains too
