"""The shared tokenizer: special tokens, word alignment, determinism, Hugging Face round trip."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerFast

from thinkalike.language.grammar import generate_sentences, lexicon_words
from thinkalike.language.tokenizer import SPECIAL_TOKENS, learn_bpe, train_tokenizer


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return generate_sentences(1500, seed=1)["text"].tolist()


@pytest.fixture(scope="module")
def tokenizer(texts) -> PreTrainedTokenizerFast:
    return train_tokenizer(texts, vocab_size=400)


def test_special_tokens(tokenizer):
    assert [
        tokenizer.pad_token,
        tokenizer.unk_token,
        tokenizer.bos_token,
        tokenizer.eos_token,
        tokenizer.mask_token,
    ] == list(SPECIAL_TOKENS)
    assert [
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.mask_token_id,
    ] == [0, 1, 2, 3, 4]
    ids = tokenizer("the dog runs .")["input_ids"]
    assert not set(ids) & set(range(len(SPECIAL_TOKENS)))  # nothing added automatically
    assert tokenizer.convert_tokens_to_ids("<bos>") == 2


def test_vocab_size_respected_and_lexicon_covered(texts, tokenizer):
    assert len(tokenizer) <= 400
    small = train_tokenizer(texts, vocab_size=80)
    assert len(small) <= 80
    # with 400 entries every grammar word is a single token, no <unk>
    words = sorted(lexicon_words() & {w for t in texts for w in t.split()})
    assert all(len(ids) == 1 for ids in tokenizer(words)["input_ids"])
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(texts, vocab_size=10)
    with pytest.raises(ValueError, match="non-empty"):
        train_tokenizer(["", "  "], vocab_size=100)


def test_word_ids_align_with_whitespace_words(texts):
    small = train_tokenizer(texts, vocab_size=80)  # words split into several pieces
    sentences = texts[:50] + ["xylophones play loudly ."]  # unseen characters -> <unk>
    encoding = small(sentences)
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        word_ids = encoding.word_ids(i)
        assert sorted(set(word_ids)) == list(range(len(words)))
        assert word_ids == sorted(word_ids)
        for w, word in enumerate(words):
            pieces = [t for t, wid in zip(encoding["input_ids"][i], word_ids) if wid == w]
            if small.unk_token_id not in pieces:
                assert small.decode(pieces) == word
    assert any(len(ids) > len(s.split()) for ids, s in zip(encoding["input_ids"], sentences))


def test_decode_round_trip(tokenizer, texts):
    for text in texts[:20]:
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_deterministic(texts, tokenizer):
    again = train_tokenizer(list(reversed(texts)), vocab_size=400)
    assert again.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    other = train_tokenizer(texts[:100], vocab_size=60)
    assert other.get_vocab() != tokenizer.get_vocab()


def test_save_and_load_round_trip(tmp_path, tokenizer, texts):
    tokenizer.save_pretrained(tmp_path)
    loaded = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    assert loaded.get_vocab() == tokenizer.get_vocab()
    assert loaded(texts[:10])["input_ids"] == tokenizer(texts[:10])["input_ids"]
    assert loaded.all_special_tokens == tokenizer.all_special_tokens
    special_ids = [loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id]
    assert special_ids + [loaded.mask_token_id] == [2, 3, 0, 4]
    assert loaded.decode(loaded(texts[0])["input_ids"]) == texts[0]


def test_learn_bpe_breaks_ties_lexicographically():
    tokens, merges = learn_bpe({"ab": 2, "cd": 2, "abcd": 1}, max_new_tokens=2)
    assert tokens[:5] == ["##b", "##c", "##d", "a", "c"]  # sorted alphabet first
    # ("a", "##b") count 3 first; then ("##c", "##d") 1 vs ("c", "##d") 2 -> ("c", "##d")
    assert merges == [("a", "##b"), ("c", "##d")]
    assert tokens[-2:] == ["ab", "cd"]
