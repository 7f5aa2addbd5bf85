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
