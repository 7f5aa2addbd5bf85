"""Fine-tuned classifier copies: seeds, determinism, saving and loading, pooled logits, stitching, bad input."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch

from thinkalike.language.nli import LABELS, PairsConfig, encode_pairs, generate_pairs
from thinkalike.models.finetune import (
    FinetuneConfig,
    SequenceClassifierHandle,
    build_classifier,
    classifier_config,
    copy_seeds,
    finetune_classifier,
    predict_labels,
)
from thinkalike.models.handle import ModelSourceError
from thinkalike.models.sources import load_classifier

SETTINGS = FinetuneConfig(steps=6, batch_size=8, learning_rate=3e-3, warmup_steps=2, head_seed=1, data_seed=2)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small run ~10x faster on one thread than on two (and far faster on a shared CPU)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def tokenizer():
    from thinkalike.language.tokenizer import train_tokenizer

    table = generate_pairs(PairsConfig(n_train=60, n_test=20, n_ood_per_subcase=4))
    return train_tokenizer(list(table.premise) + list(table.hypothesis), vocab_size=200)


@pytest.fixture(scope="module")
def encoder(tokenizer):
    """A small masked bridge encoder (random weights stand in for pretrained ones): (weights, config)."""
    from thinkalike.models.architectures import build_zoo_module
    from thinkalike.models.zoo import state_dict_for_saving, zoo_config

    entry = {
        "family": "bridge",
        "objective": "masked",
        "seed": 0,
        "architecture": {
            "n_layers": 2,
            "d_model": 16,
            "n_heads": 2,
            "d_head": 8,
            "d_mlp": 32,
            "positional_embedding_type": "rotary",
        },
    }
    config = zoo_config("enc_tiny", entry, tokenizer, 64)
    return state_dict_for_saving(build_zoo_module(config, seed=0)), config


@pytest.fixture(scope="module")
def data(tokenizer):
    table = generate_pairs(PairsConfig(n_train=48, n_test=16, n_ood_per_subcase=4, seed=1))
    return {split: encode_pairs(table[table.split == split], tokenizer, n_ctx=64) for split in ("train", "test")}


@pytest.fixture(scope="module")
def trained(encoder, data):
    weights, config = encoder
    return finetune_classifier(
        weights, config, data["train"], "copy", LABELS, SETTINGS, "cpu", progress=False, log_every=3
    )


@pytest.fixture(scope="module")
def reseeded(encoder, data):
    """The same fine-tuning with one seed changed: ``{"head_seed": …, "data_seed": …}`` → (weights, config, curve)."""
    weights, config = encoder
    return {
        key: finetune_classifier(
            weights,
            config,
            data["train"],
            f"copy_{key}",
            LABELS,
            FinetuneConfig(**{**SETTINGS.__dict__, key: 7}),
            "cpu",
            progress=False,
        )
        for key in ("head_seed", "data_seed")
    }


def _equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_seeds_give_identical_weights(encoder, data, trained):
    weights, config = encoder
    again = finetune_classifier(weights, config, data["train"], "copy", LABELS, SETTINGS, "cpu", progress=False)
    assert _equal(trained[0], again[0])
    assert trained[1] == again[1]
    assert not torch.equal(trained[0]["blocks.0.attn.q.weight"], weights["blocks.0.attn.q.weight"])


def test_copies_differ_only_in_the_two_seeds(encoder, trained, reseeded):
    weights, config = encoder
    # before training: the body is the encoder's for every head seed; only the head depends on it
    first, _ = build_classifier(weights, config, "a", LABELS, SETTINGS)
    second, _ = build_classifier(weights, config, "b", LABELS, FinetuneConfig(head_seed=9))
    a, b = first.state_dict(), second.state_dict()
    for key in a:
        if key.startswith("unembed."):
            continue
        assert torch.equal(a[key], b[key]) and torch.equal(a[key], weights[key]), key
    assert a["unembed.weight"].shape == (len(LABELS), 16) and not torch.equal(a["unembed.weight"], b["unembed.weight"])
    assert torch.equal(a["unembed.bias"], torch.zeros(len(LABELS)))
    # after training: changing either seed alone changes the weights, and the config records both
    for key, (changed, changed_config, _) in reseeded.items():
        assert not torch.equal(changed["blocks.0.attn.q.weight"], trained[0]["blocks.0.attn.q.weight"]), key
        assert changed_config["classifier"]["finetune"] == {**SETTINGS.__dict__, key: 7}


def test_copy_seeds_are_distinct_and_reproducible():
    seeds = copy_seeds(12, seed=3)
    assert seeds == copy_seeds(12, seed=3) and seeds != copy_seeds(12, seed=4)
    flat = [s for pair in seeds for s in pair]
    assert len(set(flat)) == 24 and all(0 <= s < 2**31 for s in flat)
    with pytest.raises(ValueError, match="n_copies"):
        copy_seeds(0)


def test_curve_and_config(trained):
    weights, config, curve = trained
    assert curve.step.tolist() == [3, 6] and curve.model.unique().tolist() == ["copy"]
    assert np.isfinite(curve.train_loss).all() and (curve.seconds > 0).all()
    assert config["bridge_config"]["d_vocab_out"] == len(LABELS)
    assert config["classifier"]["labels"] == list(LABELS) and config["classifier"]["base_model"] == "enc_tiny"
    assert all(t.is_contiguous() and t.device.type == "cpu" for t in weights.values())


def test_saved_and_loaded_back_the_handle_gives_pooled_class_logits(tmp_path, tokenizer, data, trained):
    from safetensors.torch import load_file, save_file

    weights, config, _ = trained
    save_file(weights, tmp_path / "copy.safetensors")
    (tmp_path / "copy.json").write_text(json.dumps(config))
    handle = load_classifier(
        load_file(tmp_path / "copy.safetensors"),
        json.loads((tmp_path / "copy.json").read_text()),
        tokenizer,
        device="cpu",
    )
    assert isinstance(handle, SequenceClassifierHandle) and handle.n_layers == 2 and not handle.is_causal
    ids = torch.as_tensor(data["test"]["input_ids"])
    mask = torch.as_tensor(data["test"]["attention_mask"])
    with torch.no_grad():
        logits = handle.logits(ids, mask)
        # z = (1/|T|) Σ_{t∈T} W · LN_f(h_t), from the residual stream and the saved head
        last = handle.residual_streams(ids, mask)[-1]
        per_token = handle.final_norm_output(last) @ weights["unembed.weight"].T
        m = mask.unsqueeze(-1).float()
        expected = (per_token * m).sum(1) / m.sum(1)
        torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
        assert logits.shape == (len(ids), len(LABELS))
        streams = handle.residual_streams(ids, mask)
        for layer in range(handle.n_layers + 1):
            torch.testing.assert_close(
                handle.logits_from_layer(streams[layer], layer, ids, mask), logits, rtol=1e-4, atol=1e-5
            )
    assert (predict_labels(handle, ids.numpy(), mask.numpy(), batch_size=5) == logits.argmax(-1).numpy()).all()


def test_identity_stitching_with_the_label_objective(tokenizer, data, trained, reseeded):
    from thinkalike.stitching import StitchSettings, stitch

    f = load_classifier(trained[0], trained[1], tokenizer, device="cpu")
    g = load_classifier(*reseeded["head_seed"][:2], tokenizer, device="cpu")
    train, test = data["train"], data["test"]
    settings = StitchSettings(steps=1, warmup_steps=0, eval_batch_size=16, n_bootstrap=20)
    kwargs = {
        "train_mask": train["attention_mask"],
        "eval_mask": test["attention_mask"],
        "train_labels": train["labels"],
        "eval_labels": test["labels"],
        "progress": False,
    }
    own = stitch(f, f, 1, 1, "identity", train["input_ids"], test["input_ids"], settings, **kwargs)
    assert own.objective == "label" and abs(own.penalty) <= 1e-6
    across = stitch(f, g, 1, 1, "identity", train["input_ids"], test["input_ids"], settings, **kwargs)
    assert np.isfinite(across.penalty) and abs(across.penalty) > 1e-6  # g's tail on f's features is another model
    with torch.no_grad():
        ids, mask = torch.as_tensor(test["input_ids"]), torch.as_tensor(test["attention_mask"])
        expected = torch.nn.functional.cross_entropy(g.logits(ids, mask), torch.as_tensor(test["labels"]))
    assert across.g_loss == pytest.approx(float(expected), abs=1e-5)


def test_bad_input(encoder, data, tokenizer):
    weights, config = encoder
    with pytest.raises(ValueError, match="FinetuneConfig.pooling must be one of"):
        FinetuneConfig(pooling="max")
    with pytest.raises(ValueError, match="warmup_steps"):
        FinetuneConfig(steps=5, warmup_steps=5)
    bad = {**data["train"], "labels": np.full(len(data["train"]["labels"]), 2)}
    with pytest.raises(ValueError, match="label id in 0..1"):
        finetune_classifier(weights, config, bad, "x", LABELS, SETTINGS, "cpu", progress=False)
    with pytest.raises(ModelSourceError, match="no masked-LM class for model_type"):
        classifier_config({"name": "neox", "family": "hf", "hf_config": {}}, "x", LABELS, SETTINGS)
    with pytest.raises(ModelSourceError, match="needs a 'bridge' or 'hf' zoo encoder"):
        classifier_config({"name": "m", "family": "mamba"}, "x", LABELS, SETTINGS)
    with pytest.raises(ValueError, match="two distinct labels"):
        classifier_config(config, "x", ["yes"], SETTINGS)
    with pytest.raises(ModelSourceError, match="not a classifier"):
        load_classifier(weights, config, tokenizer, device="cpu")


def test_zoo_source_loads_a_classifier_config_as_a_classifier_handle(tokenizer, data, trained, encoder):
    from thinkalike.models.bridge import BridgeHandle
    from thinkalike.models.sources import load_model

    weights, config, _ = trained
    handle = load_model("zoo:copy", zoo_artifacts={"copy": (config, weights)}, tokenizer=tokenizer, device="cpu")
    assert isinstance(handle, SequenceClassifierHandle) and handle.labels == tuple(LABELS)
    ids = torch.as_tensor(data["test"]["input_ids"][:4])
    mask = torch.as_tensor(data["test"]["attention_mask"][:4])
    with torch.no_grad():
        assert handle.logits(ids, mask).shape == (4, len(LABELS))
    plain = load_model(
        "zoo:enc_tiny", zoo_artifacts={"enc_tiny": (encoder[1], encoder[0])}, tokenizer=tokenizer, device="cpu"
    )
    assert type(plain) is BridgeHandle  # an encoder without a classifier entry stays a plain handle


def test_a_token_sees_later_tokens_and_never_the_padding(encoder, data):
    """The masked encoder attends both ways (position 0's logits move when the last real token changes) and
    padding is invisible: extra pad columns, or other ids under mask 0, leave the real positions' logits unchanged."""
    from thinkalike.models.bridge import bridge_logits

    weights, config = encoder
    module, _ = build_classifier(weights, config, "probe", LABELS, SETTINGS)
    module.eval()
    ids = torch.as_tensor(data["test"]["input_ids"][:4])
    mask = torch.as_tensor(data["test"]["attention_mask"][:4])
    last = int(mask[0].sum()) - 2  # the hypothesis's "." (before its closing special token)
    changed = ids.clone()
    changed[0, last] = int(ids[0, 2])
    padded_ids = torch.cat([ids, torch.full((4, 5), 7)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(4, 5, dtype=mask.dtype)], dim=1)
    with torch.no_grad():
        base = bridge_logits(module, ids, mask)
        assert (base[0, 0] - bridge_logits(module, changed, mask)[0, 0]).abs().max() > 1e-4
        padded = bridge_logits(module, padded_ids, padded_mask)[:, : ids.shape[1]]
        real = mask.bool()
        torch.testing.assert_close(padded[real], base[real], rtol=1e-5, atol=1e-6)
        alone = bridge_logits(module, ids[3:4, : int(mask[3].sum())], mask[3:4, : int(mask[3].sum())])
        torch.testing.assert_close(alone[0], base[3, : int(mask[3].sum())], rtol=1e-5, atol=1e-6)


def test_fine_tuning_learns_a_token_presence_task_with_labels_kept_with_their_rows(encoder, tokenizer):
    """Labels travel with their rows through the per-epoch shuffle: a task readable from one token (label = the
    pair contains a given token) is learnt from a random encoder, from about ln 2 at the start."""
    weights, config = encoder
    table = generate_pairs(PairsConfig(n_train=160, n_test=8, n_ood_per_subcase=1, seed=3))
    encoded = encode_pairs(table[table.split == "train"], tokenizer, n_ctx=64)
    ids = encoded["input_ids"]
    presence = {int(t): (ids == t).any(axis=1).mean() for t in np.unique(ids)}
    marker = min(presence, key=lambda t: abs(presence[t] - 0.3))  # a token in about 30 % of the pairs
    labels = (ids == marker).any(axis=1).astype(np.int64)
    assert 0.15 < labels.mean() < 0.45
    task = {**encoded, "labels": labels}
    settings = FinetuneConfig(steps=60, batch_size=16, learning_rate=1e-2, warmup_steps=5, head_seed=1, data_seed=2)
    trained, trained_config, curve = finetune_classifier(
        weights, config, task, "presence", LABELS, settings, "cpu", progress=False, log_every=5
    )
    assert curve.train_loss.iloc[0] < 0.8  # ≈ the chance-level cross-entropy of a small head
    handle = load_classifier(trained, trained_config, tokenizer, device="cpu")
    predicted = predict_labels(handle, task["input_ids"], task["attention_mask"])
    assert (predicted == labels).mean() > 0.9
