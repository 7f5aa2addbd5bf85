"""Aligned minibatches of two models' activations, streamed from their activation stores.

Which tokens are rows (``exclude_special_tokens``, default true; ``cka.exclude_special_tokens``):
special tokens — the ``is_special`` rows of the index tables (bos, eos, pad, cls, sep, mask;
never ``<unk>``: see :mod:`thinkalike.language.packing`) — are left out before pooling. They
are few but can decide CKA: a packed row's first token is ``<bos>``, an attention sink whose
residual norm is orders of magnitude above the median (25,102 vs a median of 140 at layer 12
of a Llama), and a handful of such shared outliers make any two layers look alike. With
``exclude_special_tokens=False`` they are kept. Index tables have always had the
``is_special`` column; one without it is an error (:class:`AlignmentError`), not a silent
"no special tokens". Tables packed before special ids inside a text were marked flag only the
tokens put around texts (the ones that matter: a literal ``<bos>`` in a text is rare), and are
used as they are.

Pooling (``pooling``):

* ``token`` — every real token. Requires identical token streams: both index tables must list
  the same token ids for the same sentences. A token is left out when either table marks it
  special, so the two sides keep exactly the same rows.
* ``word`` — mean of the residual vectors of each word's tokens, keyed by
  ``(sentence_id, word_index)``. The special tokens put around texts belong to no word
  (``word_index`` -1), so they are never pooled; a special id inside a word (a literal
  ``<bos>`` in a text) is left out of its word unless ``exclude_special_tokens=False``.
  Works across tokenizers.
* ``sequence`` — mean over each evaluation text's (sentence's) tokens, keyed by
  ``sentence_id``; its special tokens are included only with ``exclude_special_tokens=False``.
  Works across tokenizers.

For ``word`` and ``sequence`` pooling only the keys present in *both* index tables are
compared: a word that one tokenizer drops entirely (a lone zero-width space, which BERT's
normaliser deletes) or a text one model skipped while packing is left out of both sides, and
the counts are logged. A word or text whose tokens continue into the next shard (a text split
across rows) is pooled over all its tokens.

Rows are grouped into minibatches of ``batch_tokens`` rows; a ragged remainder joins the last
full minibatch (so every minibatch has between ``batch_tokens`` and ``2·batch_tokens − 1``
rows, or all rows when there are fewer than ``batch_tokens``). Memory: one shard of each store
plus one minibatch.

Activations may be numpy arrays (a store, or a stream copied to the host) or torch tensors (a stream kept on its
model's device, :meth:`thinkalike.models.activation_store.ActivationStream.kept_on_device`): the rows are selected,
pooled and joined on the activations' own device, and nothing is copied to the host (the keys are numpy, from the
index tables).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pandas as pd
import torch

from thinkalike.models.activation_store import ActivationStore

POOLINGS = ("token", "word", "sequence")

logger = logging.getLogger(__name__)


class AlignmentError(ValueError):
    """Two models' activations cannot be put row against row."""


def check_pooling(pooling: str) -> None:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


def check_token_streams_match(index_a: pd.DataFrame, index_b: pd.DataFrame, model_a: str, model_b: str) -> None:
    """Token-level comparison needs the same tokens in the same order; otherwise say how to pool."""
    same = (
        len(index_a) == len(index_b)
        and np.array_equal(index_a["token_id"].to_numpy(), index_b["token_id"].to_numpy())
        and np.array_equal(index_a["sentence_id"].to_numpy(), index_b["sentence_id"].to_numpy())
    )
    if not same:
        raise AlignmentError(
            f"{model_a!r} and {model_b!r} do not share a token stream ({len(index_a)} vs {len(index_b)} tokens, "
            f"different tokenizers?): token-level comparison is impossible; set pooling to 'word' or 'sequence'"
        )


def _shard_bounds(index: pd.DataFrame, sequence_start: int, n_sequences: int) -> tuple[int, int]:
    """Row range of an index table (sorted by sequence) that covers a shard's sequences."""
    sequences = index["sequence"].to_numpy()
    lo = np.searchsorted(sequences, sequence_start, side="left")
    hi = np.searchsorted(sequences, sequence_start + n_sequences, side="left")
    return int(lo), int(hi)


def special_rows(index: pd.DataFrame, model: str = "the model") -> np.ndarray:
    """The ``is_special`` column of an index table as booleans; :class:`AlignmentError` when it has none."""
    if "is_special" not in index:
        raise AlignmentError(
            f"the index table of {model!r} has no is_special column, so its special tokens cannot "
            "be told apart; extract its activations again"
        )
    return index["is_special"].to_numpy(bool)


def pooling_keys(
    index: pd.DataFrame, pooling: str, exclude_special_tokens: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``(keep, keys)`` of an index table for ``word`` / ``sequence`` pooling: which rows are pooled
    (non-special unless ``exclude_special_tokens`` is false; for words, inside a word) and each
    row's ``(sentence_id, word_index or 0)`` key."""
    keep = ~special_rows(index) if exclude_special_tokens else np.ones(len(index), dtype=bool)
    sentence = index["sentence_id"].to_numpy(np.int64)
    if pooling == "word":
        word = index["word_index"].to_numpy(np.int64)
        keep &= word >= 0
    else:
        word = np.zeros_like(sentence)
    return keep, np.stack([sentence, word], axis=1)


def _key_set(index: pd.DataFrame, pooling: str, exclude_special_tokens: bool) -> pd.MultiIndex:
    keep, keys = pooling_keys(index, pooling, exclude_special_tokens)
    return pd.MultiIndex.from_arrays([keys[keep, 0], keys[keep, 1]]).unique()


def shared_keys(
    index_a: pd.DataFrame,
    index_b: pd.DataFrame,
    pooling: str,
    model_a: str = "a",
    model_b: str = "b",
    exclude_special_tokens: bool = True,
) -> pd.MultiIndex:
    """The ``word`` / ``sequence`` keys both index tables have; the others are logged with counts.

    Raises :class:`AlignmentError` when the two share none.
    """
    keys_a = _key_set(index_a, pooling, exclude_special_tokens)
    keys_b = _key_set(index_b, pooling, exclude_special_tokens)
    common = keys_a.intersection(keys_b)
    only_a, only_b = len(keys_a) - len(common), len(keys_b) - len(common)
    if only_a or only_b:
        examples = list(keys_a.difference(common)[:3]) + list(keys_b.difference(common)[:3])
        logger.warning(
            "%s pooling of %r and %r: left out of both sides %d %s(s) that only %r has and %d that only "
            "%r has (a tokenizer gave them no token, e.g. a zero-width space, or packing skipped the "
            "text); e.g. keys %s",
            pooling,
            model_a,
            model_b,
            only_a,
            pooling,
            model_a,
            only_b,
            model_b,
            [tuple(int(v) for v in key) for key in examples],
        )
    if len(common) == 0:
        raise AlignmentError(f"{model_a!r} and {model_b!r} share no {pooling}: the evaluation texts differ")
    return common


Rows = np.ndarray | torch.Tensor  # (layers, n, d): numpy, or a torch tensor on its model's device


def _selected(tokens: Rows, keep: np.ndarray) -> Rows:
    """``tokens[:, keep]`` on the tokens' own device."""
    if isinstance(tokens, torch.Tensor):
        return tokens[:, torch.from_numpy(keep).to(tokens.device)]
    return tokens[:, keep]


def _joined(parts: list[Rows]) -> Rows:
    """The parts' rows one after the other (axis 1)."""
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts, dim=1)  # type: ignore[arg-type]
    return np.concatenate(parts, axis=1)


def _means(sums: Rows, counts: np.ndarray, dtype: np.dtype | torch.dtype) -> Rows:
    """``sums (layers, n, d) / counts (n,)`` as ``dtype`` (the activations')."""
    if isinstance(sums, torch.Tensor) and isinstance(dtype, torch.dtype):
        return (sums / torch.from_numpy(counts).to(sums.device)[None, :, None]).to(dtype)
    if isinstance(sums, np.ndarray) and isinstance(dtype, np.dtype):
        return (sums / counts[None, :, None]).astype(dtype)
    raise TypeError(f"pooled sums and their dtype come from one kind of array; got {type(sums)} and {dtype!r}")


def _group_sums(keys: np.ndarray, tokens: Rows) -> tuple[np.ndarray, Rows, np.ndarray]:
    """Unique ``keys`` in stream order with the float64 sums ``(layers, n, d)`` (on the tokens' device) and
    counts of their rows."""
    unique, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # keep the stream's order, not sorted key order
    inverse = np.argsort(order)[inverse.reshape(-1)]
    counts = np.bincount(inverse, minlength=len(unique))
    shape = (tokens.shape[0], len(unique), tokens.shape[2])
    if isinstance(tokens, torch.Tensor):
        sums: Rows = torch.zeros(shape, dtype=torch.float64, device=tokens.device).index_add_(
            1, torch.from_numpy(inverse).to(tokens.device), tokens.to(torch.float64)
        )
    else:
        sums = np.zeros(shape, dtype=np.float64)
        # numpy's stub types ufunc.at's indices as integer arrays only; a tuple index (slice, array) is valid numpy
        np.add.at(sums, (slice(None), inverse), tokens.astype(np.float64))  # type: ignore[arg-type]
    return unique[order].astype(np.int64), sums, counts


def pooled_rows(
    store: ActivationStore,
    index: pd.DataFrame,
    pooling: str,
    keys: pd.MultiIndex | None = None,
    exclude_special_tokens: bool = True,
) -> Iterator[tuple[np.ndarray, Rows]]:
    """Per shard: (keys ``(n, 2)`` int64, activations ``(stored layers, n, d_model)``) after pooling.

    ``token`` pooling: keys are ``(sentence_id, token_id)``, one row per token, the
    ``is_special`` ones left out when ``exclude_special_tokens``. ``keys`` (``word`` /
    ``sequence`` pooling): pool only these keys (see :func:`shared_keys`). The last group of a
    shard is held back until the next shard shows whether it continues there, so a group is
    pooled over all its tokens and yielded once. Shards left without rows yield nothing.
    """
    check_pooling(pooling)
    index = index.sort_values(["sequence", "position"], kind="stable")
    if pooling == "token":
        keep_all = ~special_rows(index, store.model) if exclude_special_tokens else np.ones(len(index), dtype=bool)
    else:
        keep_all, keys_all = pooling_keys(index, pooling, exclude_special_tokens)
        if keys is not None:
            keep_all &= pd.MultiIndex.from_arrays([keys_all[:, 0], keys_all[:, 1]]).isin(keys)
    held: tuple[np.ndarray, Rows, int, np.dtype | torch.dtype] | None = None  # key, sums (layers, d), count, dtype
    for batch in store:
        tokens = batch.tokens()
        lo, hi = _shard_bounds(index, batch.sequence_start, batch.attention_mask.shape[0])
        rows = index.iloc[lo:hi]
        if len(rows) != tokens.shape[1]:
            raise AlignmentError(
                f"activations of {store.model!r} (shard at sequence {batch.sequence_start}) hold "
                f"{tokens.shape[1]} tokens but the index table lists {len(rows)}"
            )
        keep = keep_all[lo:hi]
        if pooling == "token":
            keys_ = np.stack([rows["sentence_id"].to_numpy(), rows["token_id"].to_numpy()], axis=1)
            if keep.all():
                yield keys_.astype(np.int64), tokens
            elif keep.any():
                yield keys_[keep].astype(np.int64), _selected(tokens, keep)
            continue
        if not keep.any():
            continue
        group_keys, sums, counts = _group_sums(keys_all[lo:hi][keep], _selected(tokens, keep))
        if held is not None and np.array_equal(group_keys[0], held[0]):
            sums[:, 0] += held[1]  # type: ignore[assignment]  # held[1] is of sums' own kind (one stream)
            counts[0] += held[2]
        elif held is not None:
            yield held[0][None], _means(held[1][:, None], np.array([held[2]]), held[3])
        held = (group_keys[-1], sums[:, -1], int(counts[-1]), tokens.dtype)
        if len(group_keys) > 1:
            yield group_keys[:-1], _means(sums[:, :-1], counts[:-1], tokens.dtype)
    if held is not None:
        yield held[0][None], _means(held[1][:, None], np.array([held[2]]), held[3])


def _union_of_special_tokens(
    index_a: pd.DataFrame, index_b: pd.DataFrame, model_a: str, model_b: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both (matching) token streams with ``is_special`` set where either table marks the token special."""
    either = special_rows(index_a, model_a) | special_rows(index_b, model_b)
    return index_a.assign(is_special=either), index_b.assign(is_special=either)


def aligned_minibatches(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    *,
    pooling: str,
    batch_tokens: int,
    exclude_special_tokens: bool = True,
) -> Iterator[tuple[Rows, Rows]]:
    """Minibatches ``(acts_a (La, n, da), acts_b (Lb, n, db))`` whose rows are the same tokens/words/texts.

    ``exclude_special_tokens``: leave special tokens out of the rows (module docstring); for
    ``token`` pooling a token either table marks special is left out of both.
    ``word`` / ``sequence``: only the keys both models have (:func:`shared_keys`, counts logged).
    """
    check_pooling(pooling)
    if batch_tokens < 4:
        raise ValueError(f"batch_tokens must be at least 4 (the unbiased HSIC needs n >= 4), got {batch_tokens}")
    if pooling == "token":
        check_token_streams_match(index_a, index_b, store_a.model, store_b.model)
        if exclude_special_tokens:
            index_a, index_b = _union_of_special_tokens(index_a, index_b, store_a.model, store_b.model)
        keys = None
    else:
        keys = shared_keys(index_a, index_b, pooling, store_a.model, store_b.model, exclude_special_tokens)
    stream_a = pooled_rows(store_a, index_a, pooling, keys, exclude_special_tokens)
    stream_b = pooled_rows(store_b, index_b, pooling, keys, exclude_special_tokens)
    buffer_a: list[tuple[np.ndarray, Rows]] = []
    buffer_b: list[tuple[np.ndarray, Rows]] = []
    pending: tuple[list[Rows], list[Rows]] = ([], [])
    held: tuple[Rows, Rows] | None = None
    pending_rows = 0

    def take(buffer, stream, need) -> tuple[np.ndarray, Rows] | None:
        while not buffer:
            try:
                buffer.append(next(stream))
            except StopIteration:
                return None
        keys, acts = buffer.pop(0)
        if len(keys) > need:
            buffer.insert(0, (keys[need:], acts[:, need:]))
            keys, acts = keys[:need], acts[:, :need]
        return keys, acts

    while True:
        need = batch_tokens - pending_rows
        part_a = take(buffer_a, stream_a, need)
        part_b = take(buffer_b, stream_b, need if part_a is None else len(part_a[0]))
        if part_a is None or part_b is None:
            if (part_a is None) != (part_b is None):
                longer = store_a.model if part_a is not None else store_b.model
                raise AlignmentError(
                    f"{longer!r} has more {pooling}s than the other model: the evaluation texts differ"
                )
            break
        if len(part_b[0]) < len(part_a[0]):  # b's shard ended first: give back a's surplus
            surplus = len(part_a[0]) - len(part_b[0])
            buffer_a.insert(0, (part_a[0][-surplus:], part_a[1][:, -surplus:]))
            part_a = (part_a[0][:-surplus], part_a[1][:, :-surplus])
        if not np.array_equal(part_a[0], part_b[0]):
            row = int(np.argmax(np.any(part_a[0] != part_b[0], axis=1)))
            raise AlignmentError(
                f"{store_a.model!r} and {store_b.model!r} disagree at {pooling} key "
                f"{tuple(part_a[0][row])} vs {tuple(part_b[0][row])}"
            )
        pending[0].append(part_a[1])
        pending[1].append(part_b[1])
        pending_rows += len(part_a[0])
        if pending_rows == batch_tokens:
            if held is not None:
                yield held
            held = (_joined(pending[0]), _joined(pending[1]))
            pending, pending_rows = ([], []), 0
    if pending_rows:
        rest = (_joined(pending[0]), _joined(pending[1]))
        held = rest if held is None else (_joined([held[0], rest[0]]), _joined([held[1], rest[1]]))
    if held is not None:
        yield held
