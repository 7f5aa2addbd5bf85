"""Fixtures of the stitching tests (tiny models: see ``toys``)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.stitching.toys import (  # noqa: E402
    N_CTX,
    VOCAB,
    bridge_config,
    bridge_handle,
    permuted_state,
)


@pytest.fixture(scope="session")
def gelu32():
    """The brief's tiny GeLU bridge: 2 layers, d_model 32, 2 heads of 16, d_mlp 64 (random weights)."""
    return bridge_handle("gelu", bridge_config(32, "gelu"), sharpen=3.0)


@pytest.fixture(scope="session")
def solu32():
    return bridge_handle("solu", bridge_config(32, "solu_ln", seed=1), sharpen=3.0)


@pytest.fixture(scope="session")
def gelu32_permuted(gelu32):
    """``(g′, perm)``: ``gelu32`` with its residual-stream dimensions permuted by ``perm`` (same function)."""
    perm = torch.randperm(32, generator=torch.Generator().manual_seed(7))
    state = permuted_state(gelu32.module, perm)
    return bridge_handle("gelu-permuted", bridge_config(32, "gelu"), state), perm


@pytest.fixture(scope="session")
def random_tokens():
    """``(train, eval)`` uniform random token ids, disjoint (different rows)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (96, N_CTX), generator=generator).numpy()
    return ids[:64], ids[64:]


@pytest.fixture(scope="session")
def gelu32_data(gelu32):
    """``(train, eval)`` sequences sampled from ``gelu32`` itself (it is their true model), disjoint."""
    from tests.stitching.toys import sample_sequences

    ids = sample_sequences(gelu32, 320, seed=0)
    return ids[:256], ids[256:]


@pytest.fixture(scope="session")
def g8():
    """A tiny GeLU bridge of width 8 (72 affine stitch parameters): small enough to learn on few tokens."""
    return bridge_handle("g8", bridge_config(8, "gelu"), sharpen=3.0)


@pytest.fixture(scope="session")
def g8_permuted(g8):
    """``(g8′, perm)``: ``g8`` with its residual-stream dimensions permuted (same function)."""
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(7))
    return bridge_handle("g8-permuted", bridge_config(8, "gelu"), permuted_state(g8.module, perm)), perm


@pytest.fixture(scope="session")
def g8_data(g8):
    """``(train, eval)``: 16384 + 256 sequences sampled from ``g8`` (262k training tokens: a learned self-stitch's
    held-out penalty from finite-sample noise is about (parameters)/(2 tokens) ≈ 1e-4)."""
    from tests.stitching.toys import sample_sequences

    ids = sample_sequences(g8, 16384 + 256, seed=0)
    return ids[:16384], ids[16384:]


@pytest.fixture(scope="session")
def grammar_tokenizer():
    """The project's tokenizer trained on 300 grammar sentences (vocabulary ≤ 90; <pad> 0, <unk> 1, <bos> 2,
    <eos> 3, <mask> 4)."""
    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.tokenizer import train_tokenizer

    return train_tokenizer(generate_sentences(300, seed=7)["text"].tolist(), vocab_size=90)


@pytest.fixture(scope="session")
def packed_rows(grammar_tokenizer):
    """``(train, eval)`` rows of 16 tokens packed like the corpus's (``<bos> s₁ <eos> <bos> s₂ <eos> …``), from
    disjoint sentences; a few ``<unk>`` put into the evaluation rows (real text: always a target)."""
    from thinkalike.language.grammar import generate_sentences
    from thinkalike.language.packing import pack_training_sequences

    texts = generate_sentences(260, seed=11)["text"].tolist()
    train = pack_training_sequences(texts[:200], grammar_tokenizer, 16)
    evaluation = pack_training_sequences(texts[200:], grammar_tokenizer, 16).copy()
    evaluation[::3, 5] = grammar_tokenizer.unk_token_id
    return train, evaluation


@pytest.fixture(scope="session")
def tokenized_pair(grammar_tokenizer):
    """``(f, g)``: a SoLU and a GeLU bridge of width 32 on the grammar tokenizer (random weights, sharpened)."""
    vocab = len(grammar_tokenizer)
    configs = [bridge_config(32, act, seed=seed) for act, seed in (("solu_ln", 1), ("gelu", 0))]
    for config in configs:
        config["bridge_config"]["d_vocab"] = vocab
    return tuple(
        bridge_handle(name, config, sharpen=3.0, tokenizer=grammar_tokenizer)
        for name, config in zip(("solu_tok", "gelu_tok"), configs)
    )
