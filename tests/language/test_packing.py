"""Splitting and packing sentences into token sequences, with the token index table."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from thinkalike.language.grammar import generate_sentences
from thinkalike.language.natural_text import natural_text_table
from thinkalike.language.packing import (
    INDEX_COLUMNS,
    check_packable,
    pack_evaluation_sequences,
    pack_training_sequences,
    split_sentences,
    text_wrapping,
)
from thinkalike.language.tokenizer import train_tokenizer

N_CTX = 48


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return generate_sentences(400, seed=11)


@pytest.fixture(scope="module")
def tokenizer(table):
    # a small vocabulary, so that many words are split into several tokens
    return train_tokenizer(table["text"], vocab_size=120)


@pytest.fixture(scope="module")
def packed(table, tokenizer):
    natural = natural_text_table(["Natural text, with unseen words!", "and more"], first_id=10_000)
    mixed = pd.concat([table, natural], ignore_index=True)
    arrays, index = pack_evaluation_sequences(mixed, tokenizer, N_CTX)
    return mixed, arrays, index


def test_split_is_disjoint_deterministic_and_complete(table):
    train, heldout = split_sentences(table, 0.2, seed=0)
    assert len(heldout) == 80 and len(train) == 320
    assert not set(train["sentence_id"]) & set(heldout["sentence_id"])
    assert sorted(pd.concat([train, heldout])["sentence_id"]) == list(range(400))
    assert train["sentence_id"].is_monotonic_increasing
    again_train, again_heldout = split_sentences(table, 0.2, seed=0)
    pd.testing.assert_frame_equal(heldout, again_heldout)
    assert set(split_sentences(table, 0.2, seed=1)[1]["sentence_id"]) != set(heldout["sentence_id"])


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 0.0001, 0.9999])
def test_split_errors(table, fraction):
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_sentences(table, fraction, seed=0)


def test_training_sequences(table, tokenizer):
    texts = table["text"].tolist()
    sequences = pack_training_sequences(texts, tokenizer, N_CTX)
    stream = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        stream += [tokenizer.bos_token_id, *ids, tokenizer.eos_token_id]
    assert sequences.dtype == np.int64
    assert sequences.shape == (len(stream) // N_CTX, N_CTX)
    assert sequences.ravel().tolist() == stream[: sequences.size]
    assert sequences[0, 0] == tokenizer.bos_token_id
    with pytest.raises(ValueError, match="n_ctx=10000"):
        pack_training_sequences(texts[:3], tokenizer, 10_000)


def test_evaluation_shapes_and_mask(packed):
    _, arrays, index = packed
    input_ids, mask = arrays["input_ids"], arrays["attention_mask"]
    assert input_ids.dtype == mask.dtype == np.int64
    assert input_ids.shape == mask.shape and input_ids.shape[1] == N_CTX
    assert list(index.columns) == list(INDEX_COLUMNS)
    assert len(index) == mask.sum()
    assert (mask[index["sequence"], index["position"]] == 1).all()
    assert (input_ids[index["sequence"], index["position"]] == index["token_id"]).all()
    assert (input_ids[mask == 0] == 0).all()  # <pad>
    assert (input_ids[:, 0] == 2).all()  # every sequence starts with <bos>
    # padding is only at the right end of a row
    assert (np.diff(mask, axis=1) <= 0).all()


def test_no_sentence_is_split_and_greedy(packed):
    mixed, _, index = packed
    per_sentence = index.groupby("sentence_id")
    assert (per_sentence["sequence"].nunique() == 1).all()
    assert sorted(index["sentence_id"].unique()) == sorted(mixed["sentence_id"])
    # greedy: the next sentence did not fit in the remaining room of the previous sequence
    starts = per_sentence.agg(sequence=("sequence", "first"), length=("position", "size"))
    starts = starts.loc[mixed["sentence_id"]]
    used = index.groupby("sequence")["position"].size()
    following = starts[["sequence", "length"]].to_numpy()[1:]
    for prev_seq, (seq, length) in zip(starts["sequence"], following):
        if seq != prev_seq:
            assert used[prev_seq] + length > N_CTX


def test_tokens_decode_to_words(packed, tokenizer):
    mixed, _, index = packed
    words_by_sentence = dict(zip(mixed["sentence_id"], mixed["text"].str.split()))
    real = index[~index["is_special"]]
    assert (index.loc[index["is_special"], "word_index"] == -1).all()
    assert set(index.loc[index["is_special"], "token"]) == {"<bos>", "<eos>"}
    assert (real["word_index"] >= 0).all()
    assert (index["token"] == tokenizer.convert_ids_to_tokens(index["token_id"].tolist())).all()
    for (sentence_id, word_index), group in real.groupby(["sentence_id", "word_index"]):
        word = words_by_sentence[sentence_id][word_index]
        ids = group.sort_values("position")["token_id"].tolist()
        if tokenizer.unk_token_id in ids:
            assert mixed.set_index("sentence_id").loc[sentence_id, "source"] == "natural"
        else:
            assert tokenizer.decode(ids) == word
    n_words = real.groupby("sentence_id")["word_index"].nunique()
    expected = {sentence_id: len(words) for sentence_id, words in words_by_sentence.items()}
    assert n_words.to_dict() == expected


def test_sources_and_ids(packed):
    _, _, index = packed
    natural = index[index["source"] == "natural"]
    assert set(natural["sentence_id"]) == {10_000, 10_001}
    assert set(index.loc[index["source"] == "grammar", "sentence_id"]) == set(range(400))


def test_evaluation_errors(table, tokenizer):
    duplicated = pd.concat([table.head(2), table.head(1)])
    with pytest.raises(ValueError, match="unique"):
        pack_evaluation_sequences(duplicated, tokenizer, N_CTX)
    with pytest.raises(ValueError, match="empty"):
        pack_evaluation_sequences(table.head(0), tokenizer, N_CTX)


def test_long_texts_are_split_at_words_with_a_count(table, tokenizer, caplog):
    long_rows = table.nlargest(3, "n_words")
    with caplog.at_level(logging.WARNING, logger="thinkalike.language.packing"):
        arrays, index = pack_evaluation_sequences(long_rows, tokenizer, 12)
    assert "3 text(s) longer than a row (n_ctx=12" in caplog.text
    assert arrays["input_ids"].shape[1] == 12 and len(index) == arrays["attention_mask"].sum()
    for sentence_id, text in zip(long_rows["sentence_id"], long_rows["text"]):
        rows = index[index["sentence_id"] == sentence_id]
        real = rows[~rows["is_special"]]
        # every word is there, once, in order, and no word is cut between two rows
        assert real["word_index"].drop_duplicates().tolist() == list(range(len(text.split())))
        assert (real.groupby("word_index")["sequence"].nunique() == 1).all()
        pieces = rows.groupby("sequence")
        assert pieces.ngroups > 1
        for _, piece in pieces:  # each piece is wrapped <bos> ... <eos>
            assert piece["token"].iloc[0] == "<bos>" and piece["token"].iloc[-1] == "<eos>"


def test_a_word_longer_than_a_row_skips_its_text_with_a_count(tokenizer, caplog):
    texts = natural_text_table(["short one", "a " + "x" * 40 + " b", "another short"], first_id=0)
    with caplog.at_level(logging.WARNING, logger="thinkalike.language.packing"):
        _, index = pack_evaluation_sequences(texts, tokenizer, 8)
    assert "1 text(s) skipped" in caplog.text and "[1]" in caplog.text
    assert sorted(index["sentence_id"].unique()) == [0, 2]
    with pytest.raises(ValueError, match="no text of the 1 could be packed"):
        pack_evaluation_sequences(texts.iloc[[1]], tokenizer, 8)


def _encoder_tokenizer(template: str | None, bos_eos: bool):
    """A fast word-level tokenizer whose post-processor is ``template`` (None: none)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>", "the", "cat", "sat", "."]
    vocab = {w: i for i, w in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template is not None:
        backend.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[(t, vocab[t]) for t in ("[CLS]", "[SEP]", "<s>") if t in template]
        )
    extra = {"bos_token": "<s>", "eos_token": "</s>"} if bos_eos else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", **extra
    )


@pytest.mark.parametrize(
    ("template", "bos_eos", "prefix", "suffix", "convention"),
    [
        ("[CLS] $A [SEP]", False, ["[CLS]"], ["[SEP]"], "tokenizer"),  # BERT-style, no bos/eos
        ("<s> $A", True, ["<s>"], [], "tokenizer"),  # Llama-style: bos only, though eos exists
        (None, True, ["<s>"], ["</s>"], "bos/eos"),  # adds nothing: bos/eos separate texts
        (None, False, [], [], "none"),  # nothing marks a boundary: one text per row
    ],
)
def test_each_tokenizer_wraps_texts_its_own_way(template, bos_eos, prefix, suffix, convention):
    tok = _encoder_tokenizer(template, bos_eos)
    wrapping = text_wrapping(tok)
    assert wrapping.convention == convention
    assert tok.convert_ids_to_tokens(list(wrapping.prefix)) == prefix
    assert tok.convert_ids_to_tokens(list(wrapping.suffix)) == suffix
    texts = natural_text_table(["the cat sat .", "the cat", "sat ."], first_id=0)
    arrays, index = pack_evaluation_sequences(texts, tok, 16)
    for sentence_id, text in zip(texts["sentence_id"], texts["text"]):
        rows = index[index["sentence_id"] == sentence_id]
        assert rows["token"].tolist() == prefix + text.split() + suffix
        assert rows["is_special"].tolist() == [True] * len(prefix) + [False] * len(text.split()) + [True] * len(suffix)
    assert arrays["input_ids"].shape[0] == (3 if convention == "none" else 1)
    assert (arrays["input_ids"][arrays["attention_mask"] == 0] == tok.pad_token_id).all()
    if convention == "none":
        with pytest.raises(ValueError, match="no special tokens"):
            pack_training_sequences(texts["text"].tolist(), tok, 4)


def test_check_packable_names_the_tokenizer_and_n_ctx():
    tok = _encoder_tokenizer("[CLS] $A [SEP]", False)
    assert check_packable(tok, 3, what="activations.models.enc").n_special == 2
    with pytest.raises(ValueError, match=r"activations.models.enc: n_ctx=2 cannot hold"):
        check_packable(tok, 2, what="activations.models.enc")
