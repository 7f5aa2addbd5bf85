"""Training the shared tokenizer of the offline world (a BPE model of Hugging Face ``tokenizers``).

Words are whitespace-delimited (``WhitespaceSplit`` pre-tokenizer), so every grammar word —
punctuation included, since the grammar writes "." and "?" as words — maps to one or more
tokens and ``BatchEncoding.word_ids()`` indexes ``text.split()``. Word-internal pieces carry
the ``##`` prefix (BERT style), so decoding a word's tokens gives the word back.

The merges are learned here, in Python, rather than by ``tokenizers.trainers.BpeTrainer``:
that trainer breaks ties between equally frequent pairs by hash order, so two runs on the
same texts give different vocabularies. Here ties go to the lexicographically smallest pair,
and the result is loaded into an ordinary ``tokenizers`` BPE model.

Special tokens, with fixed ids: ``<pad>`` 0, ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3, ``<mask>`` 4.
No post-processor is set: encoding never adds special tokens (callers add ``<bos>``/``<eos>``).
The vocabulary size of a model using the tokenizer is ``len(tokenizer)`` (≤ ``vocab_size``).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS, MASK = "<pad>", "<unk>", "<bos>", "<eos>", "<mask>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, BOS, EOS, MASK)
SUBWORD_PREFIX = "##"

Pair = tuple[str, str]


def _initial_symbols(word: str) -> list[str]:
    """A word as characters, all but the first carrying the continuation prefix."""
    return [word[0]] + [SUBWORD_PREFIX + char for char in word[1:]]


def _join(left: str, right: str) -> str:
    """The token produced by merging ``left`` and ``right``."""
    return left + right[len(SUBWORD_PREFIX) :]


def _merge_word(symbols: list[str], pair: Pair, merged: str) -> list[str]:
    """Replace every non-overlapping occurrence of ``pair`` (left to right) by ``merged``."""
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(merged)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def learn_bpe(word_counts: Mapping[str, int], max_new_tokens: int) -> tuple[list[str], list[Pair]]:
    """Learn BPE merges from word frequencies, deterministically.

    Returns ``(tokens, merges)``: the sorted character alphabet followed by the tokens created
    by merges (at most ``max_new_tokens`` of them, in merge order), and the merges in rank
    order. At each step the most frequent adjacent pair is merged; ties go to the
    lexicographically smallest pair.
    """
    vocabulary = sorted(word_counts)
    words = [_initial_symbols(word) for word in vocabulary]
    freqs = [word_counts[word] for word in vocabulary]
    tokens = sorted({symbol for symbols in words for symbol in symbols})
    known = set(tokens)

    pair_counts: Counter[Pair] = Counter()
    where: defaultdict[Pair, set[int]] = defaultdict(set)
    for i, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += freqs[i]
            where[pair].add(i)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[Pair] = []
    n_new = 0
    while heap and n_new < max_new_tokens:
        negative_count, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -negative_count:
            continue  # stale heap entry
        merged = _join(*pair)
        merges.append(pair)
        if merged not in known:
            known.add(merged)
            tokens.append(merged)
            n_new += 1
        changed: set[Pair] = set()
        for i in sorted(where.pop(pair)):
            old = words[i]
            new = _merge_word(old, pair, merged)
            if len(new) == len(old):
                continue  # stale index: the pair left this word in an earlier merge
            for old_pair in zip(old, old[1:]):
                pair_counts[old_pair] -= freqs[i]
                changed.add(old_pair)
            for new_pair in zip(new, new[1:]):
                pair_counts[new_pair] += freqs[i]
                where[new_pair].add(i)
                changed.add(new_pair)
            words[i] = new
        for changed_pair in sorted(changed):
            count = pair_counts[changed_pair]
            if count > 0:
                heapq.heappush(heap, (-count, changed_pair))
            else:
                del pair_counts[changed_pair]
    return tokens, merges


def train_tokenizer(texts: Iterable[str], vocab_size: int, seed: int = 0) -> PreTrainedTokenizerFast:
    """Train a BPE tokenizer of at most ``vocab_size`` entries on ``texts``.

    Deterministic for the same texts (their order does not matter either); ``seed`` is
    accepted for a uniform node signature and does not change the result. Raises
    ``ValueError`` when ``texts`` has no words or ``vocab_size`` cannot hold the special
    tokens and the character alphabet of the texts.
    """
    del seed  # BPE training as implemented here has no randomness.
    word_counts = Counter(word for text in texts for word in text.split())
    if not word_counts:
        raise ValueError("train_tokenizer needs at least one non-empty text")
    n_alphabet = len({symbol for word in word_counts for symbol in _initial_symbols(word)})
    n_fixed = len(SPECIAL_TOKENS) + n_alphabet
    if vocab_size < n_fixed:
        raise ValueError(
            f"vocab_size={vocab_size} is smaller than the {len(SPECIAL_TOKENS)} special tokens "
            f"plus the {n_alphabet}-symbol character alphabet of the texts; raise vocab_size"
        )
    tokens, merges = learn_bpe(word_counts, vocab_size - n_fixed)
    vocab = {token: i for i, token in enumerate(list(SPECIAL_TOKENS) + tokens)}

    model = models.BPE(vocab=vocab, merges=merges, unk_token=UNK, continuing_subword_prefix=SUBWORD_PREFIX)
    backend = Tokenizer(model)
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix=SUBWORD_PREFIX, cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        mask_token=MASK,
        clean_up_tokenization_spaces=False,
    )
