"""Which tokens are special, and the two evaluation layouts (``packed`` / ``sentence``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.models.conftest import ENCODER_WORDS, make_encoder_tokenizer
from thinkalike.language.grammar import generate_sentences
from thinkalike.language.packing import (
    PACKINGS,
    one_text_per_row,
    pack_evaluation_sequences,
    special_token_ids,
    text_wrapping,
)
from thinkalike.language.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def grammar_table() -> pd.DataFrame:
    return generate_sentences(120, seed=3)


@pytest.fixture(scope="module")
def grammar_tokenizer(grammar_table):
    return train_tokenizer(grammar_table["text"], vocab_size=120)


def encoder_texts(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` texts of 2–9 words of the encoder tokenizer's vocabulary (each word one token)."""
    rng = np.random.default_rng(seed)
    words = [w for w in ENCODER_WORDS if w.isalpha()]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(2, 10)))) for _ in range(n)]
    return pd.DataFrame({"sentence_id": np.arange(n) + 100, "text": texts})


def gpt2_style_tokenizer():
    """A fast tokenizer whose single special token ``<|endoftext|>`` is unk, bos, eos at once (as GPT-2's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, **{w: i + 1 for i, w in enumerate(["the", "cat", "sat"])}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<|endoftext|>", bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )


def test_special_ids_are_the_tokenizers_special_tokens_without_unk(grammar_tokenizer):
    vocab = grammar_tokenizer.get_vocab()
    assert special_token_ids(grammar_tokenizer) == {vocab[t] for t in ("<pad>", "<bos>", "<eos>", "<mask>")}
    encoder = make_encoder_tokenizer()
    assert special_token_ids(encoder) == {
        encoder.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")
    }
    # GPT-2's <|endoftext|> is unk too, but as bos/eos it is special
    assert special_token_ids(gpt2_style_tokenizer()) == {0}


def test_a_special_id_inside_a_text_is_marked_but_unk_is_not(grammar_tokenizer):
    table = pd.DataFrame({"sentence_id": [7], "text": ["the <bos> dog \u20ac"]})  # € is not in the vocabulary
    _, index = pack_evaluation_sequences(table, grammar_tokenizer, 32)
    tokens = index["token"].tolist()
    assert tokens[0] == "<bos>" and tokens[-1] == "<eos>" and "<unk>" in tokens
    inside = index.iloc[1:-1]
    marked = inside[inside["is_special"]]
    assert marked["token"].tolist() == ["<bos>"] and marked["word_index"].tolist() == [1]
    assert not index.loc[index["token"] == "<unk>", "is_special"].any()


@pytest.mark.parametrize("make", ["encoder", "grammar"])
def test_sentence_packing_puts_each_text_alone_in_a_row(make, grammar_table, grammar_tokenizer):
    tokenizer = make_encoder_tokenizer() if make == "encoder" else grammar_tokenizer
    table = encoder_texts(40) if make == "encoder" else grammar_table.head(40)
    n_ctx = 32 if make == "encoder" else 128  # no text is split
    packed_arrays, packed_index = pack_evaluation_sequences(table, tokenizer, n_ctx, packing="packed")
    arrays, index = pack_evaluation_sequences(table, tokenizer, n_ctx, packing="sentence")
    assert packed_arrays["input_ids"].shape[0] < len(table) // 2  # packed: several texts per row
    assert arrays["input_ids"].shape[0] == len(table)
    assert (index.groupby("sequence")["sentence_id"].nunique() == 1).all()
    lengths = arrays["attention_mask"].sum(axis=1)
    assert arrays["input_ids"].shape[1] == lengths.max() < n_ctx  # padded to the longest row
    wrapping = text_wrapping(tokenizer)
    for row, text in enumerate(table["text"]):
        own = list(wrapping.prefix) + tokenizer(text, add_special_tokens=False)["input_ids"] + list(wrapping.suffix)
        assert arrays["input_ids"][row, : lengths[row]].tolist() == own
        assert (arrays["attention_mask"][row, : lengths[row]] == 1).all()
        assert (arrays["input_ids"][row, lengths[row] :] == wrapping.pad).all()
    # the same tokens in the same order, only the rows differ
    for column in ("token_id", "sentence_id", "word_index", "is_special"):
        np.testing.assert_array_equal(index[column], packed_index[column])


def test_one_text_per_row_of_a_packed_index_equals_sentence_packing(grammar_table, grammar_tokenizer):
    long_text = pd.DataFrame({"sentence_id": [10_000], "text": [" ".join(grammar_table["text"].head(6))]})
    table = pd.concat([grammar_table.head(30), long_text], ignore_index=True)  # the long one is split into pieces
    _, packed_index = pack_evaluation_sequences(table, grammar_tokenizer, 24)
    assert packed_index.loc[packed_index["sentence_id"] == 10_000, "sequence"].nunique() > 1
    expected_arrays, expected_index = pack_evaluation_sequences(table, grammar_tokenizer, 24, packing="sentence")
    arrays, index = one_text_per_row(packed_index, text_wrapping(grammar_tokenizer).pad)
    pd.testing.assert_frame_equal(index, expected_index)
    for name in ("input_ids", "attention_mask"):
        np.testing.assert_array_equal(arrays[name], expected_arrays[name])


def test_unknown_packing_is_named(grammar_table, grammar_tokenizer):
    assert PACKINGS == ("packed", "sentence")
    with pytest.raises(ValueError, match="activations.packing"):
        pack_evaluation_sequences(grammar_table.head(3), grammar_tokenizer, 32, packing="rows")
