"""Splitting sentence tables and packing them into fixed-length token sequences.

Every text (a grammar sentence or a natural-text document) is wrapped in its tokenizer's own
special tokens, :func:`text_wrapping`:

1. what ``tokenizer(text)`` adds around the text (``[CLS] … [SEP]`` for BERT-style encoders,
   ``<s> …`` for Llama), when it adds anything;
2. otherwise ``<bos> … <eos>`` when the tokenizer defines both (the project's grammar
   tokenizer, GPT-2's ``<|endoftext|>``), the separators such models are trained with;
3. otherwise nothing: each text then gets a row of its own, so that texts never run together.

:func:`check_packable` makes the checks packing needs without packing anything (a pipeline's
validation calls it with each model's tokenizer).

* Training (:func:`pack_training_sequences`): the wrapped texts are concatenated into one
  stream and cut into rows of ``n_ctx`` tokens; sentences may straddle rows.
* Evaluation (:func:`pack_evaluation_sequences`): whole texts are laid out in rows in one of
  two layouts (:data:`PACKINGS`, the ``activations.packing`` parameter); the rest of a row is
  padding with attention mask 0. A text longer than a row is split at word boundaries into
  pieces that each fit a row (each piece wrapped like a text; the pieces are consecutive in
  the stream and share the text's ``sentence_id``, with ``word_index`` running on); a text
  with a single word longer than a row, or without any token, is skipped. Both are counted in
  the log, never an error. The returned index table has one row per real token, so
  activations can be pooled by word or sentence without re-tokenizing.

Layouts, and what each token attends to (no block-diagonal mask is ever built: a row is one
forward pass with a 0/1 padding mask):

* ``packed`` (default): texts are packed greedily, in table order, into rows of ``n_ctx``
  tokens, so a row holds several consecutive texts of the table, each with its own special
  tokens (``<bos> s₁ <eos> <bos> s₂ <eos> …``). In a causal model every token attends to all
  earlier tokens of its row: the earlier texts of the row and their special tokens included.
  The row's first token (its first text's ``<bos>`` / ``[CLS]``) is visible to every later
  token and is the attention sink of most LMs (a residual norm orders of magnitude above the
  median), which is why CKA leaves special tokens out by default
  (``cka.exclude_special_tokens``). In a bidirectional encoder every token attends to every
  real token of its row, later texts included. Cheapest: rows are full.
* ``sentence``: one text (or one piece of a split text) per row, right-padded to the longest
  row of the table (at most ``n_ctx``). A text's tokens attend only to the text itself and its
  own special tokens: in a causal model (right padding, positions from 0) its residual streams
  are those of the text run alone; in an encoder the padding is masked out. Each row's first
  token is its own text's ``<bos>`` (special, so left out of CKA by default) — with a
  tokenizer that marks no boundary (convention ``none``, always one text per row) it is the
  text's first word, which is not special. Costs one forward row per text.

:func:`one_text_per_row` turns a ``packed`` layout into the ``sentence`` one from its index
table alone (the zoo's evaluation data is packed once, by the corpus pipeline).

Special tokens (``is_special``): the tokens put around each text, and any token of a text
whose id is one of the tokenizer's special ids (:func:`special_token_ids`: ``bos``, ``eos``,
``pad``, ``cls``, ``sep``, ``mask`` and additional special tokens — a literal ``<bos>`` in a
text encodes to the special id and is marked), but never ``<unk>``, which stands for real text.

Words are whitespace words (``text.split()``): a token's ``word_index`` is found from its
character offsets, so any fast tokenizer works, not only the one of
:mod:`thinkalike.language.tokenizer`.

Grammar and natural text share the index: ``sentence_id`` is unique within a table (natural
text tables start their ids at a caller-chosen ``first_id``) and the ``source`` column
("grammar" / "natural", copied from the table, "grammar" when the table has none) tells
them apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from transformers import PreTrainedTokenizerBase

from thinkalike.language.baselines import unigram_entropy_nats

__all__ = [
    "INDEX_COLUMNS",
    "PACKINGS",
    "TextWrapping",
    "check_packable",
    "check_packing",
    "one_text_per_row",
    "pack_evaluation_sequences",
    "pack_training_sequences",
    "special_token_ids",
    "split_sentences",
    "text_wrapping",
    "unigram_entropy_nats",  # re-exported from baselines: the loss that packed data must beat
]

logger = logging.getLogger(__name__)

INDEX_COLUMNS: tuple[str, ...] = (
    "sequence",
    "position",
    "token_id",
    "token",
    "sentence_id",
    "word_index",
    "is_special",
    "source",
)

#: Evaluation layouts (module docstring): several texts per row, or one text per row.
PACKINGS: tuple[str, ...] = ("packed", "sentence")

#: Texts used to find which special tokens ``tokenizer(text)`` adds around a text.
_PROBE_TEXTS: tuple[str, ...] = ("hello world", "a", "x y z")


def split_sentences(table: pd.DataFrame, heldout_fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
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


@dataclass(frozen=True)
class TextWrapping:
    """The special tokens put around every packed text and the id that fills a row's padding.

    ``convention``: ``"tokenizer"`` (what ``tokenizer(text)`` adds), ``"bos/eos"`` (the
    tokenizer adds nothing but defines both) or ``"none"`` (no boundary tokens at all: one
    text per row). ``special_ids``: the ids marked ``is_special`` wherever they occur
    (:func:`special_token_ids`).
    """

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    pad: int
    convention: str
    special_ids: frozenset[int] = frozenset()

    @property
    def n_special(self) -> int:
        """Number of special tokens around each text."""
        return len(self.prefix) + len(self.suffix)

    @property
    def one_text_per_row(self) -> bool:
        """True when nothing marks where a text ends, so texts must not share a row."""
        return self.n_special == 0


def _find(haystack: list[int], needle: list[int]) -> int:
    """Start of the first occurrence of ``needle`` in ``haystack``, -1 when absent."""
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start : start + len(needle)] == needle:
            return start
    return -1


def added_special_tokens(tokenizer: PreTrainedTokenizerBase) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(prefix, suffix)``: the ids ``tokenizer(text)`` adds before and after a text's own tokens.

    Found by encoding probe texts with and without special tokens. Raises ``ValueError`` when
    the tokens of the text are not a contiguous part of the encoding with special tokens, or
    when different texts get different tokens added.
    """
    found: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for probe in _PROBE_TEXTS:
        plain = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
        wrapped = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
        if not plain:
            continue
        start = _find(wrapped, plain)
        if start < 0:
            raise ValueError(
                f"{type(tokenizer).__name__}: cannot tell which special tokens tokenizer(text) adds "
                f"(the tokens of {probe!r}, {plain}, are not inside its encoding {wrapped})"
            )
        found.add((tuple(wrapped[:start]), tuple(wrapped[start + len(plain) :])))
    if len(found) > 1:
        raise ValueError(
            f"{type(tokenizer).__name__}: tokenizer(text) adds different special tokens to different "
            f"texts ({sorted(found)}); cannot pack texts with it"
        )
    if not found:
        raise ValueError(f"{type(tokenizer).__name__}: encodes none of the probe texts {_PROBE_TEXTS} to any token")
    return found.pop()


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id that fills padding (masked out): pad, else eos, else unk, else 0."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def special_token_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """The ids that are special tokens of ``tokenizer``: its ``all_special_ids`` (``bos``, ``eos``,
    ``pad``, ``cls``, ``sep``, ``mask`` and any additional special tokens) without ``<unk>``,
    which stands for real text — unless ``<unk>`` is also one of those roles (GPT-2's
    ``<|endoftext|>`` is unk, bos and eos at once)."""
    roles = {getattr(tokenizer, f"{role}_token_id", None) for role in ("bos", "eos", "pad", "cls", "sep", "mask")}
    unk = tokenizer.unk_token_id
    return frozenset(int(i) for i in tokenizer.all_special_ids if i is not None and (i != unk or i in roles))


def text_wrapping(tokenizer: PreTrainedTokenizerBase) -> TextWrapping:
    """The tokenizer's own way of marking a text's boundaries (see the module docstring)."""
    prefix, suffix = added_special_tokens(tokenizer)
    pad = _pad_id(tokenizer)
    special = special_token_ids(tokenizer)
    if prefix or suffix:
        return TextWrapping(prefix, suffix, pad, "tokenizer", special)
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is not None and eos is not None:
        return TextWrapping((int(bos),), (int(eos),), pad, "bos/eos", special)
    return TextWrapping((), (), pad, "none", special)


def check_packing(packing: str) -> None:
    """Raises ``ValueError`` naming ``activations.packing`` for a layout not in :data:`PACKINGS`."""
    if packing not in PACKINGS:
        raise ValueError(f"activations.packing must be one of {PACKINGS}, got {packing!r}")


def check_packable(tokenizer: PreTrainedTokenizerBase, n_ctx: int, what: str = "the tokenizer") -> TextWrapping:
    """Everything :func:`pack_evaluation_sequences` needs of ``tokenizer``, checked without packing.

    A fast tokenizer (character offsets map tokens to words), a consistent special-token
    convention (:func:`text_wrapping`) and ``n_ctx`` room for the special tokens plus at least
    one token. ``what`` names the tokenizer in errors (e.g. ``"activations.models.enc (hf:/m)"``).
    Returns the wrapping; raises ``ValueError``.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"{what}: packing needs a fast tokenizer (character offsets map tokens to words); "
            f"got {type(tokenizer).__name__}"
        )
    try:
        wrapping = text_wrapping(tokenizer)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc
    if n_ctx < wrapping.n_special + 1:
        raise ValueError(
            f"{what}: n_ctx={n_ctx} cannot hold the {wrapping.n_special} special token(s) put around "
            "every text plus one token of text; raise n_ctx"
        )
    return wrapping


def pack_training_sequences(texts: Sequence[str], tokenizer: PreTrainedTokenizerBase, n_ctx: int) -> np.ndarray:
    """Concatenate every wrapped text (:func:`text_wrapping`; ``<bos> text <eos>`` for the
    grammar tokenizer) and cut the stream into ``n_ctx`` rows.

    Returns int64 ``(n_sequences, n_ctx)``; the ragged tail is dropped. Raises ``ValueError``
    (naming ``n_ctx``) when there are fewer than ``n_ctx`` tokens, and when the tokenizer marks
    no text boundary (the stream would run texts together).
    """
    if n_ctx < 1:
        raise ValueError(f"n_ctx must be >= 1, got {n_ctx}")
    wrapping = text_wrapping(tokenizer)
    if wrapping.one_text_per_row:
        raise ValueError(
            f"{type(tokenizer).__name__} adds no special tokens and has no bos/eos: a training "
            "stream needs a token between texts"
        )
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if len(texts) else []
    stream = np.fromiter(
        (token for ids in encoded for token in (*wrapping.prefix, *ids, *wrapping.suffix)), dtype=np.int64
    )
    n_sequences = stream.size // n_ctx
    if n_sequences == 0:
        raise ValueError(
            f"n_ctx={n_ctx} is larger than the {stream.size} tokens of the {len(texts)} texts; lower n_ctx or add text"
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


def split_at_words(words: np.ndarray, budget: int) -> list[tuple[int, int]] | None:
    """``[(start, end), ...]`` token ranges of at most ``budget`` tokens covering a text, cut only
    between words (``words``: each token's word index, -1 for a token of no word).

    Greedy: each piece takes as many whole words as fit. ``None`` when one word alone has more
    than ``budget`` tokens (the text cannot be split at words).
    """
    pieces: list[tuple[int, int]] = []
    start, n = 0, len(words)
    while n - start > budget:
        end = start + budget
        while end > start and words[end] >= 0 and words[end] == words[end - 1]:
            end -= 1  # would cut inside a word
        if end == start:
            return None
        pieces.append((start, end))
        start = end
    pieces.append((start, n))
    return pieces


@dataclass
class _Packer:
    """Places wrapped pieces greedily into rows of ``n_ctx`` tokens (one piece per row when
    ``one_per_row``) and records the index columns."""

    wrapping: TextWrapping
    n_ctx: int
    one_per_row: bool = False
    sequence: int = 0
    used: int = 0

    def __post_init__(self) -> None:
        self.columns: dict[str, list[np.ndarray]] = {
            name: [] for name in ("sequence", "position", "token_id", "word_index", "is_special", "row")
        }

    def add(self, ids: np.ndarray, words: np.ndarray, row: int) -> None:
        """Add one piece (``ids`` with their word indices) of table row ``row``."""
        prefix, suffix = self.wrapping.prefix, self.wrapping.suffix
        length = ids.size + self.wrapping.n_special
        starts_row = self.used == 0
        if not starts_row and (self.used + length > self.n_ctx or self.one_per_row):
            self.sequence, self.used = self.sequence + 1, 0
        token_ids = np.concatenate((prefix, ids, suffix)).astype(np.int64)
        self.columns["sequence"].append(np.full(length, self.sequence, dtype=np.int64))
        self.columns["position"].append(np.arange(self.used, self.used + length, dtype=np.int64))
        self.columns["token_id"].append(token_ids)
        self.columns["word_index"].append(
            np.concatenate((np.full(len(prefix), -1), words, np.full(len(suffix), -1))).astype(np.int64)
        )
        special = np.isin(token_ids, np.fromiter(self.wrapping.special_ids, dtype=np.int64))
        special[: len(prefix)] = True
        special[length - len(suffix) :] = True
        self.columns["is_special"].append(special)
        self.columns["row"].append(np.full(length, row, dtype=np.int64))
        self.used += length

    def arrays(self) -> dict[str, np.ndarray]:
        """The concatenated columns."""
        return {name: np.concatenate(parts) for name, parts in self.columns.items()}


def _log_packing(
    n_ctx: int, wrapping: TextWrapping, split: list[int], n_pieces: int, too_long: list[int], empty: list[int]
) -> None:
    """Counts of split and skipped texts, in the log (first ids named)."""
    if split:
        logger.warning(
            "packing: %d text(s) longer than a row (n_ctx=%d, %d special token(s) each) were split at "
            "word boundaries into %d pieces (sentence ids %s%s)",
            len(split),
            n_ctx,
            wrapping.n_special,
            n_pieces,
            split[:5],
            "…" if len(split) > 5 else "",
        )
    if too_long:
        logger.warning(
            "packing: %d text(s) skipped because one of their words alone needs more than a row "
            "(n_ctx=%d) (sentence ids %s%s)",
            len(too_long),
            n_ctx,
            too_long[:5],
            "…" if len(too_long) > 5 else "",
        )
    if empty:
        logger.warning(
            "packing: %d text(s) skipped because the tokenizer gives them no token (sentence ids %s%s)",
            len(empty),
            empty[:5],
            "…" if len(empty) > 5 else "",
        )


def _token_strings(tokenizer: PreTrainedTokenizerBase, token_ids: np.ndarray) -> np.ndarray:
    """The token string of every id (each distinct id converted once)."""
    unique, inverse = np.unique(token_ids, return_inverse=True)
    strings = np.array(tokenizer.convert_ids_to_tokens(unique.tolist()), dtype=object)
    return strings[inverse.reshape(-1)]


def _rows_from_index(index: pd.DataFrame, pad: int, width: int) -> dict[str, np.ndarray]:
    """``{"input_ids", "attention_mask"}`` int64 ``(n_sequences, width)`` holding the index's tokens at
    their ``(sequence, position)``; the rest is ``pad`` with mask 0."""
    sequence = index["sequence"].to_numpy(np.int64)
    position = index["position"].to_numpy(np.int64)
    n_sequences = int(sequence.max()) + 1
    input_ids = np.full((n_sequences, width), pad, dtype=np.int64)
    attention_mask = np.zeros((n_sequences, width), dtype=np.int64)
    input_ids[sequence, position] = index["token_id"].to_numpy(np.int64)
    attention_mask[sequence, position] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def pack_evaluation_sequences(
    table: pd.DataFrame, tokenizer: PreTrainedTokenizerBase, n_ctx: int, packing: str = "packed"
) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Lay the texts of ``table`` (columns ``sentence_id``, ``text``) out in rows of at most ``n_ctx`` tokens.

    ``packing`` (:data:`PACKINGS`, see the module docstring): ``"packed"``, several texts per
    row, rows of ``n_ctx``; ``"sentence"``, one text (or piece of a split text) per row, rows as
    long as the longest one.

    Returns ``({"input_ids", "attention_mask"}, index)``: two int64 ``(n_sequences, width)``
    arrays, and an index table with one row per real token (columns :data:`INDEX_COLUMNS`):
    ``sequence``, ``position``, ``token_id``, ``token``, ``sentence_id`` (the special tokens
    around a text belong to it, so no row has -1), ``word_index`` (index into ``text.split()``,
    -1 for the special tokens added here), ``is_special`` (the tokens added around each text,
    and tokens of the text with a special id, :func:`special_token_ids`; an ``<unk>`` inside a
    word is not special), ``source``. Texts longer than a row are split at word boundaries;
    texts that cannot be split so, or have no token, are skipped; both are counted in the log
    (see the module docstring). Raises ``ValueError`` when ``sentence_id`` is not unique, the
    table is empty, every text is skipped, ``packing`` is unknown, or :func:`check_packable`
    fails. Requires a fast tokenizer (character offsets).
    """
    check_packing(packing)
    if len(table) == 0:
        raise ValueError("cannot pack an empty table")
    if not table["sentence_id"].is_unique:
        raise ValueError("sentence_id must be unique within the table to index tokens")
    wrapping = check_packable(tokenizer, n_ctx, what=type(tokenizer).__name__)
    budget = n_ctx - wrapping.n_special
    texts = [str(text) for text in table["text"]]
    sentence_ids = table["sentence_id"].to_numpy(dtype=np.int64)
    if "source" in table:
        sources = table["source"].astype(str).to_numpy()
    else:
        sources = np.full(len(table), "grammar")
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)

    packer = _Packer(wrapping, n_ctx, one_per_row=wrapping.one_text_per_row or packing == "sentence")
    split, too_long, empty, n_pieces = [], [], [], 0
    for i, text in enumerate(texts):
        ids = np.asarray(encoded["input_ids"][i], dtype=np.int64)
        if ids.size == 0:
            empty.append(int(sentence_ids[i]))
            continue
        words = _word_indices(text, encoded["offset_mapping"][i])
        pieces = split_at_words(words, budget)
        if pieces is None:
            too_long.append(int(sentence_ids[i]))
            continue
        if len(pieces) > 1:
            split.append(int(sentence_ids[i]))
            n_pieces += len(pieces)
        for start, end in pieces:
            packer.add(ids[start:end], words[start:end], i)
    _log_packing(n_ctx, wrapping, split, n_pieces, too_long, empty)
    if packer.used == 0:
        raise ValueError(
            f"no text of the {len(texts)} could be packed into rows of n_ctx={n_ctx} "
            f"({len(too_long)} have a word longer than a row, {len(empty)} have no token)"
        )

    columns = packer.arrays()
    index = pd.DataFrame(
        {
            "sequence": columns["sequence"],
            "position": columns["position"],
            "token_id": columns["token_id"],
            "token": _token_strings(tokenizer, columns["token_id"]),
            "sentence_id": sentence_ids[columns["row"]],
            "word_index": columns["word_index"],
            "is_special": columns["is_special"],
            "source": sources[columns["row"]],
        },
        columns=list(INDEX_COLUMNS),
    )
    width = n_ctx if packing == "packed" else int(index["position"].max()) + 1
    return _rows_from_index(index, wrapping.pad, width), index


def one_text_per_row(index: pd.DataFrame, pad: int) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """The ``sentence`` layout of a ``packed`` index table: each wrapped text (or piece) in a row of its own.

    A wrapped piece is a run of consecutive index rows with the same ``(sequence,
    sentence_id)`` (two pieces of one split text never share a row: consecutive pieces hold
    more tokens together than a row has room for, see :func:`split_at_words`). Returns the
    arrays (rows as long as the longest piece, padded with ``pad``) and a copy of ``index``
    with ``sequence`` and ``position`` renumbered; every other column, and the order of the
    tokens, is unchanged — so this equals :func:`pack_evaluation_sequences` with
    ``packing="sentence"`` on the same texts and tokenizer.
    """
    ordered = index.sort_values(["sequence", "position"], kind="stable").reset_index(drop=True)
    if ordered.empty:
        raise ValueError("cannot lay out an empty index table")
    sequence = ordered["sequence"].to_numpy(np.int64)
    sentence = ordered["sentence_id"].to_numpy(np.int64)
    starts = np.ones(len(ordered), dtype=bool)
    starts[1:] = (sequence[1:] != sequence[:-1]) | (sentence[1:] != sentence[:-1])
    piece = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    relaid = ordered.copy()
    relaid["sequence"] = piece.astype(np.int64)
    relaid["position"] = (np.arange(len(ordered)) - first[piece]).astype(np.int64)
    return _rows_from_index(relaid, pad, int(relaid["position"].max()) + 1), relaid
