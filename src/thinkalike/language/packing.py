"""Splitting sentence tables and packing them into fixed-length token sequences.

Two packings, one convention: every sentence (or natural-text document) is wrapped as
``<bos> tokens <eos>``.

* Training (:func:`pack_training_sequences`): the wrapped texts are concatenated into one
  stream and cut into rows of ``n_ctx`` tokens; sentences may straddle rows.
* Evaluation (:func:`pack_evaluation_sequences`): whole sentences are packed greedily, in table
  order, into rows of ``n_ctx`` tokens and never split; the rest of a row is ``<pad>`` with
  attention mask 0. Every row therefore starts with ``<bos>``. The returned index table has one
  row per real token, so activations can be pooled by word or sentence without re-tokenizing.

Words are whitespace words (``text.split()``): a token's ``word_index`` is found from its
character offsets, so any fast tokenizer works, not only the one of
:mod:`thinkalike.language.tokenizer`.

Grammar and natural text share the index: ``sentence_id`` is unique within a table (natural
text tables start their ids at a caller-chosen ``first_id``) and the ``source`` column
("grammar" / "natural", copied from the table, "grammar" when the table has none) tells
them apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from transformers import PreTrainedTokenizerBase

from thinkalike.language.baselines import unigram_entropy_nats

__all__ = [
    "INDEX_COLUMNS",
    "pack_evaluation_sequences",
    "pack_training_sequences",
    "split_sentences",
    "unigram_entropy_nats",  # re-exported from baselines: the loss that packed data must beat
]

INDEX_COLUMNS: tuple[str, ...] = (
    "sequence", "position", "token_id", "token",
    "sentence_id", "word_index", "is_special", "source",
)


def split_sentences(
    table: pd.DataFrame, heldout_fraction: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Randomly split ``table`` into (train, heldout) by sentence, deterministically from ``seed``.

    ``round(heldout_fraction * len(table))`` sentences are held out; both parts keep the
    table's row order and get a fresh 0-based index. Raises ``ValueError`` when the fraction is
    not in (0, 1), when either part would be empty, or when ``sentence_id`` is not unique.
    """
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    if not table["sentence_id"].is_unique:
        raise ValueError("sentence_id must be unique to split a table by sentence")
    n = len(table)
    n_heldout = int(round(heldout_fraction * n))
    if n_heldout == 0 or n_heldout == n:
        raise ValueError(
            f"heldout_fraction={heldout_fraction} of {n} sentences leaves an empty "
            f"{'held-out' if n_heldout == 0 else 'training'} split"
        )
    is_heldout = np.zeros(n, dtype=bool)
    is_heldout[np.random.default_rng(seed).permutation(n)[:n_heldout]] = True
    train = table.loc[~is_heldout].reset_index(drop=True)
    heldout = table.loc[is_heldout].reset_index(drop=True)
    return train, heldout


def _special_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[int, int, int]:
    """(bos, eos, pad) ids; pad falls back to eos for tokenizers without a pad token."""
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    if bos is None or eos is None:
        raise ValueError("the tokenizer needs a bos_token and an eos_token to pack sentences")
    return int(bos), int(eos), int(eos if pad is None else pad)


def pack_training_sequences(
    texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, n_ctx: int
) -> np.ndarray:
    """Concatenate ``<bos> text <eos>`` for every text and cut the stream into ``n_ctx`` rows.

    Returns int64 ``(n_sequences, n_ctx)``; the ragged tail is dropped. Raises ``ValueError``
    (naming ``n_ctx``) when there are fewer than ``n_ctx`` tokens.
    """
    if n_ctx < 1:
        raise ValueError(f"n_ctx must be >= 1, got {n_ctx}")
    bos, eos, _ = _special_ids(tokenizer)
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if len(texts) else []
    stream = np.fromiter(
        (token for ids in encoded for token in (bos, *ids, eos)), dtype=np.int64
    )
    n_sequences = stream.size // n_ctx
    if n_sequences == 0:
        raise ValueError(
            f"n_ctx={n_ctx} is larger than the {stream.size} tokens of the {len(texts)} texts; "
            "lower n_ctx or add text"
        )
    return stream[: n_sequences * n_ctx].reshape(n_sequences, n_ctx)


def _word_indices(text: str, offsets: Sequence[tuple[int, int]]) -> np.ndarray:
    """Whitespace-word index of each token, from the token's character offsets (-1: none)."""
    char_word = np.full(len(text) + 1, -1, dtype=np.int64)
    position = 0
    for index, word in enumerate(text.split()):
        start = text.index(word, position)
        position = start + len(word)
        char_word[start:position] = index
    ends = np.array([end for _, end in offsets], dtype=np.int64)
    starts = np.array([start for start, _ in offsets], dtype=np.int64)
    return np.where(ends > starts, char_word[np.maximum(ends - 1, 0)], -1)


def pack_evaluation_sequences(
    table: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, n_ctx: int
) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Pack whole sentences of ``table`` (columns ``sentence_id``, ``text``) into ``n_ctx`` rows.

    Returns ``({"input_ids", "attention_mask"}, index)``: two int64 ``(n_sequences, n_ctx)``
    arrays, and an index table with one row per real token (columns :data:`INDEX_COLUMNS`):
    ``sequence``, ``position``, ``token_id``, ``token``, ``sentence_id`` (``<bos>``/``<eos>``
    belong to their sentence, so no row has -1), ``word_index`` (index into ``text.split()``,
    -1 for the ``<bos>``/``<eos>`` added here), ``is_special`` (true exactly for those added
    tokens; an ``<unk>`` inside a word is not special), ``source``. Raises ``ValueError`` when
    a wrapped sentence is longer than ``n_ctx`` (naming the sentence id and ``n_ctx``), when
    ``sentence_id`` is not unique, or when the table is empty. Requires a fast tokenizer
    (character offsets).
    """
    if n_ctx < 2:
        raise ValueError(f"n_ctx must be >= 2 to hold <bos> and <eos>, got {n_ctx}")
    if len(table) == 0:
        raise ValueError("cannot pack an empty table")
    if not table["sentence_id"].is_unique:
        raise ValueError("sentence_id must be unique within the table to index tokens")
    bos, eos, pad = _special_ids(tokenizer)
    texts = [str(text) for text in table["text"]]
    sentence_ids = table["sentence_id"].to_numpy(dtype=np.int64)
    if "source" in table:
        sources = table["source"].astype(str).to_numpy()
    else:
        sources = np.full(len(table), "grammar")
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)

    pieces: dict[str, list[np.ndarray]] = {
        name: [] for name in ("sequence", "position", "token_id", "word_index", "is_special")
    }
    n_tokens = np.empty(len(texts), dtype=np.int64)
    sequence, used = 0, 0
    for i, text in enumerate(texts):
        ids = np.asarray(encoded["input_ids"][i], dtype=np.int64)
        length = ids.size + 2
        if length > n_ctx:
            raise ValueError(
                f"sentence {sentence_ids[i]} needs {length} tokens with <bos>/<eos>, "
                f"more than n_ctx={n_ctx}"
            )
        if used + length > n_ctx:
            sequence, used = sequence + 1, 0
        words = _word_indices(text, encoded["offset_mapping"][i])
        pieces["sequence"].append(np.full(length, sequence, dtype=np.int64))
        pieces["position"].append(np.arange(used, used + length, dtype=np.int64))
        pieces["token_id"].append(np.concatenate(([bos], ids, [eos])))
        pieces["word_index"].append(np.concatenate(([-1], words, [-1])))
        added = np.zeros(length, dtype=bool)
        added[[0, -1]] = True
        pieces["is_special"].append(added)
        n_tokens[i] = length
        used += length

    columns = {name: np.concatenate(parts) for name, parts in pieces.items()}
    input_ids = np.full((sequence + 1, n_ctx), pad, dtype=np.int64)
    attention_mask = np.zeros((sequence + 1, n_ctx), dtype=np.int64)
    input_ids[columns["sequence"], columns["position"]] = columns["token_id"]
    attention_mask[columns["sequence"], columns["position"]] = 1

    all_ids = list(range(len(tokenizer)))
    token_strings = np.array(tokenizer.convert_ids_to_tokens(all_ids), dtype=object)
    index = pd.DataFrame(
        {
            "sequence": columns["sequence"],
            "position": columns["position"],
            "token_id": columns["token_id"],
            "token": token_strings[columns["token_id"]],
            "sentence_id": np.repeat(sentence_ids, n_tokens),
            "word_index": columns["word_index"],
            "is_special": columns["is_special"],
            "source": np.repeat(sources, n_tokens),
        },
        columns=list(INDEX_COLUMNS),
    )
    return {"input_ids": input_ids, "attention_mask": attention_mask}, index
