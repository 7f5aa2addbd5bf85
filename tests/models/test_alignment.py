"""Aligned minibatches across two activation stores: re-batching, pooling, errors."""

import logging

import numpy as np
import pandas as pd
import pytest

from thinkalike.models.activation_store import ActivationBatch, write_activation_store
from thinkalike.models.aligned_batches import AlignmentError, aligned_minibatches, pooled_rows


def make_corpus(lengths, seed=0):
    """Sequences of given real lengths with an index table; words are runs of 2 tokens."""
    rng = np.random.default_rng(seed)
    rows = []
    for sequence, length in enumerate(lengths):
        for position in range(length):
            special = position in (0, length - 1)
            rows.append(
                {
                    "sequence": sequence,
                    "position": position,
                    "token_id": int(rng.integers(5, 50)),
                    "sentence_id": sequence,
                    "word_index": -1 if special else (position - 1) // 2,
                    "is_special": special,
                }
            )
    return pd.DataFrame(rows)


def make_store(path, lengths, batch_size, layers=2, width=3, n_ctx=8, seed=0, model="m"):
    rng = np.random.default_rng(seed)
    residual = rng.standard_normal((layers, len(lengths), n_ctx, width)).astype(np.float32)
    mask = (np.arange(n_ctx)[None] < np.array(lengths)[:, None]).astype(np.int64)
    batches = [
        ActivationBatch.from_padded(residual[:, s : s + batch_size], mask[s : s + batch_size], s)
        for s in range(0, len(lengths), batch_size)
    ]
    return write_activation_store(path, batches, model=model), residual, mask


LENGTHS = [6, 8, 5, 7, 8, 3, 6]


def test_token_minibatches_rebatch_across_different_shard_sizes(tmp_path):
    index = make_corpus(LENGTHS)
    store_a, res_a, mask = make_store(tmp_path / "a", LENGTHS, batch_size=2, seed=1, model="a")
    store_b, res_b, _ = make_store(tmp_path / "b", LENGTHS, batch_size=3, width=5, seed=2, model="b")
    batches = list(
        aligned_minibatches(
            store_a, index, store_b, index, pooling="token", batch_tokens=10, exclude_special_tokens=False
        )
    )
    flat_a = res_a.reshape(2, -1, 3)[:, mask.reshape(-1).astype(bool)]
    flat_b = res_b.reshape(2, -1, 5)[:, mask.reshape(-1).astype(bool)]
    assert [b[0].shape[1] for b in batches] == [10, 10, 10, 13]  # the remainder (3) joins the last batch
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches], axis=1), flat_a)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches], axis=1), flat_b)


def test_fewer_rows_than_a_batch_give_one_batch(tmp_path):
    index = make_corpus(LENGTHS)
    store, _, _ = make_store(tmp_path / "a", LENGTHS, batch_size=4)
    batches = list(
        aligned_minibatches(
            store, index, store, index, pooling="token", batch_tokens=1000, exclude_special_tokens=False
        )
    )
    assert len(batches) == 1 and batches[0][0].shape[1] == sum(LENGTHS)


def test_word_pooling_is_the_mean_of_each_words_tokens(tmp_path):
    index = make_corpus(LENGTHS)
    store, residual, _ = make_store(tmp_path / "a", LENGTHS, batch_size=3)
    keys, pooled = next(pooled_rows(store, index, "word"))
    # sequence 0 has length 6: tokens 1..4 are words 0,0,1,1
    np.testing.assert_array_equal(keys[:2], [[0, 0], [0, 1]])
    np.testing.assert_allclose(pooled[:, 0], residual[:, 0, 1:3].mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(pooled[:, 1], residual[:, 0, 3:5].mean(axis=1), rtol=1e-6)


def test_word_pooling_aligns_models_with_different_tokenizers(tmp_path):
    index_a = make_corpus(LENGTHS)
    # model b tokenizes differently: one token per word, plus bos/eos
    lengths_b = [int(index_a[index_a.sentence_id == s].word_index.max()) + 3 for s in range(len(LENGTHS))]
    index_b = make_corpus(lengths_b, seed=5)
    index_b["word_index"] = np.where(index_b["is_special"], -1, index_b["position"] - 1)
    store_a, _, _ = make_store(tmp_path / "a", LENGTHS, batch_size=2, model="a")
    store_b, _, _ = make_store(tmp_path / "b", lengths_b, batch_size=4, model="b")
    with pytest.raises(AlignmentError, match="pooling to 'word' or 'sequence'|set pooling"):
        list(aligned_minibatches(store_a, index_a, store_b, index_b, pooling="token", batch_tokens=4))
    words = list(aligned_minibatches(store_a, index_a, store_b, index_b, pooling="word", batch_tokens=4))
    n_words = sum(int(index_a[index_a.sentence_id == s].word_index.max()) + 1 for s in range(len(LENGTHS)))
    assert sum(b[0].shape[1] for b in words) == n_words
    sentences = list(aligned_minibatches(store_a, index_a, store_b, index_b, pooling="sequence", batch_tokens=4))
    assert sum(b[0].shape[1] for b in sentences) == len(LENGTHS)


def test_index_that_does_not_match_the_store_is_named(tmp_path):
    index = make_corpus(LENGTHS)
    store, _, _ = make_store(tmp_path / "a", LENGTHS, batch_size=3, model="gelu")
    with pytest.raises(AlignmentError, match="'gelu'.*index table"):
        list(pooled_rows(store, index.iloc[:-1], "token"))
    with pytest.raises(ValueError, match="pooling"):
        list(pooled_rows(store, index, "paragraph"))
    with pytest.raises(ValueError, match="at least 4"):
        list(aligned_minibatches(store, index, store, index, pooling="token", batch_tokens=3))


def test_word_one_tokenizer_drops_is_left_out_of_both_sides_with_a_count(tmp_path, caplog):
    index_a = make_corpus(LENGTHS)
    store_a, res_a, mask_a = make_store(tmp_path / "a", LENGTHS, batch_size=2, model="a")
    # model b has no token for word 1 of sentence 0 (say a zero-width space its normaliser deletes); here
    # those tokens belong to no word (word_index -1) in b's index, so the key (0, 1) exists on a's side only
    index_b = index_a.copy()
    dropped = (index_b["sentence_id"] == 0) & (index_b["word_index"] == 1)
    index_b.loc[dropped, "word_index"] = -1
    store_b, res_b, _ = make_store(tmp_path / "b", LENGTHS, batch_size=3, width=5, seed=4, model="b")
    with caplog.at_level(logging.WARNING, logger="thinkalike.models.aligned_batches"):
        batches = list(aligned_minibatches(store_a, index_a, store_b, index_b, pooling="word", batch_tokens=4))
    assert "left out of both sides 1 word(s) that only 'a' has and 0 that only 'b' has" in caplog.text
    n_words = len(index_a[index_a.word_index >= 0].groupby(["sentence_id", "word_index"]))
    acts_a = np.concatenate([b[0] for b in batches], axis=1)
    acts_b = np.concatenate([b[1] for b in batches], axis=1)
    assert acts_a.shape[1] == acts_b.shape[1] == n_words - 1
    # sentence 0 (length 6): words 0 (tokens 1, 2) and 1 (tokens 3, 4); word 1 is gone, the next row is word 0
    # of sentence 1 (tokens 1, 2 of sequence 1)
    np.testing.assert_allclose(acts_a[:, 0], res_a[:, 0, 1:3].mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(acts_a[:, 1], res_a[:, 1, 1:3].mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(acts_b[:, 1], res_b[:, 1, 1:3].mean(axis=1), rtol=1e-6)


def test_groups_continuing_into_the_next_shard_are_pooled_once(tmp_path):
    lengths = [8, 6, 5]
    index = make_corpus(lengths)
    # sentence 0 was split into two pieces: sequences 0 and 1, its words running on in sequence 1
    second = index["sequence"] == 1
    index.loc[second, "sentence_id"] = 0
    index.loc[second & ~index["is_special"], "word_index"] += 4
    index.loc[index["sequence"] == 2, "sentence_id"] = 1
    store, residual, _ = make_store(tmp_path / "a", lengths, batch_size=1)  # one sequence per shard
    keys, pooled = zip(*pooled_rows(store, index, "sequence"))
    keys, pooled = np.concatenate(keys), np.concatenate(pooled, axis=1)
    np.testing.assert_array_equal(keys, [[0, 0], [1, 0]])
    expected = np.concatenate([residual[:, 0, 1:7], residual[:, 1, 1:5]], axis=1).mean(axis=1)
    np.testing.assert_allclose(pooled[:, 0], expected, rtol=1e-6)
    np.testing.assert_allclose(pooled[:, 1], residual[:, 2, 1:4].mean(axis=1), rtol=1e-6)


def test_models_that_share_no_word_are_an_error(tmp_path):
    index_a = make_corpus(LENGTHS)
    index_b = index_a.copy()
    index_b["sentence_id"] += 100
    store, _, _ = make_store(tmp_path / "a", LENGTHS, batch_size=3)
    with pytest.raises(AlignmentError, match="share no word"):
        list(aligned_minibatches(store, index_a, store, index_b, pooling="word", batch_tokens=4))
