"""MLEM stimuli from the grammar corpus: their linguistic features and their vectors in each layer.

**Levels.** ``word``: every word of the grammar's evaluation sentences, keyed by
``(sentence_id, word_index)``; its vector is the mean of its tokens' residual vectors (any
tokenizer: :func:`thinkalike.models.aligned_batches.pooled_rows` pools by the index table's
``word_index``). ``sentence``: every sentence, keyed by ``(sentence_id, 0)``; its vector is the
mean of its tokens (``mean``) or its last token (``last``), special tokens left out.

**Features** (categorical unless marked numeric; ``"none"`` = undefined for that stimulus, so
Δf = 0 for any pair that involves it):

* word level — :data:`WORD_FEATURES`: ``pos`` (DET, ADJ, NOUN, VERB, AUX, PREP, REL, PUNCT),
  ``word_role`` (subject, main_verb, aux, object, attractor, rc_noun, rc_verb, other),
  ``word_position`` (numeric, index in the sentence), ``number`` (sg/pl of a head noun, of a
  present-tense finite verb or auxiliary — the number it agrees with; ``none`` otherwise),
  ``tense`` (present/past of a finite verb or auxiliary; a question's main verb is a bare
  infinitive: ``none``), ``in_relative_clause`` (inside/outside: from "that" to the clause's
  last word); and the sentence's own features (:data:`SENTENCE_FEATURES` but ``tense``,
  which names the word's tense at this level).
* sentence level — :data:`SENTENCE_FEATURES`: ``subject_number``, ``object_number`` (``none``
  when intransitive), ``tense``, ``relative_clause`` (none/subject/object — "none" is a value
  here, not undefined), ``attractor_number`` and ``rc_noun_number`` (``none`` when absent),
  ``sentence_type``, ``n_words`` (numeric).

**Stimulus sets** (``mlem.stimuli``, :data:`STIMULUS_SOURCES`): ``corpus`` — the held-out grammar
sentences among the evaluation texts (``source == "grammar"``: the grammar's natural
co-occurrence of constructions, its whole lexicon); ``controlled`` — the controlled set
(``source == "controlled"``, :func:`thinkalike.language.grammar.controlled_sentences`, added to
the evaluation texts by ``corpus.controlled_stimuli``): a small lexicon, the chosen sentence
features fully crossed, one template per condition, as the paper's stimuli. Natural-text
documents have no features and are always left out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from thinkalike.language.grammar import NONE, PRESENT
from thinkalike.mlem.features import CATEGORICAL, NUMERIC, FeatureError
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.aligned_batches import pooled_rows, special_rows

LEVELS = ("word", "sentence")
#: ``mlem.stimuli`` → the evaluation texts' ``source`` it selects.
STIMULUS_SOURCES: dict[str, str] = {"corpus": "grammar", "controlled": "controlled"}
SENTENCE_POOLINGS = ("mean", "last")
KEY_COLUMNS = ("sentence_id", "word_index")

SENTENCE_FEATURES: dict[str, str] = {
    "subject_number": CATEGORICAL,
    "object_number": CATEGORICAL,
    "tense": CATEGORICAL,
    "relative_clause": CATEGORICAL,
    "attractor_number": CATEGORICAL,
    "rc_noun_number": CATEGORICAL,
    "sentence_type": CATEGORICAL,
    "n_words": NUMERIC,
}
WORD_FEATURES: dict[str, str] = {
    "pos": CATEGORICAL,
    "word_role": CATEGORICAL,
    "word_position": NUMERIC,
    "number": CATEGORICAL,
    "tense": CATEGORICAL,
    "in_relative_clause": CATEGORICAL,
    **{name: kind for name, kind in SENTENCE_FEATURES.items() if name != "tense"},
}
#: The features fitted when none are configured (the issue's lists).
DEFAULT_FEATURES: dict[str, tuple[str, ...]] = {
    "word": ("pos", "word_role", "word_position", "number", "tense", "in_relative_clause"),
    "sentence": ("subject_number", "object_number", "tense", "relative_clause", "attractor_number", "sentence_type"),
}
#: Values that mean "undefined for this stimulus".
UNDEFINED: dict[str, frozenset[str]] = {
    name: frozenset({NONE}) for name in ("number", "tense", "object_number", "attractor_number", "rc_noun_number")
}

logger = logging.getLogger(__name__)


def known_features(level: str) -> dict[str, str]:
    """``{feature: kind}`` available at ``level``."""
    check_level(level)
    return dict(WORD_FEATURES if level == "word" else SENTENCE_FEATURES)


def check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"mlem.level must be one of {LEVELS}, got {level!r}")


def resolve_features(level: str, names: Sequence[str] | None) -> dict[str, str]:
    """``{feature: kind}`` for the configured ``names`` (None: :data:`DEFAULT_FEATURES`); an unknown
    name raises :class:`FeatureError` listing the known ones."""
    known = known_features(level)
    chosen = list(DEFAULT_FEATURES[level] if names is None else names)
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise FeatureError(f"mlem.features: unknown {level}-level feature(s) {unknown}; known: {sorted(known)}")
    if not chosen:
        raise FeatureError("mlem.features: empty list; give at least one feature (or null for the defaults)")
    return {name: known[name] for name in chosen}


def _word_rows(sentence: pd.Series) -> list[dict[str, object]]:
    """One row per word of a grammar sentence with the word-level features (module docstring)."""
    roles, pos = list(sentence["word_role"]), list(sentence["pos"])
    tense, question = sentence["tense"], sentence["sentence_type"] == "question"
    head_number = {
        "subject": sentence["subject_number"],
        "object": sentence["object_number"],
        "attractor": sentence["attractor_number"],
        "rc_noun": sentence["rc_noun_number"],
    }
    # a subject RC's verb agrees with the head noun, an object RC's with the RC's own subject
    rc_subject = sentence["rc_noun_number"] if sentence["relative_clause"] == "object" else sentence["subject_number"]
    verb_subject = {"main_verb": sentence["subject_number"], "aux": sentence["subject_number"], "rc_verb": rc_subject}
    rc_start = pos.index("REL") if "REL" in pos else None
    rc_end = max(i for i, role in enumerate(roles) if role in ("rc_verb", "rc_noun")) if rc_start is not None else -1
    shared = {name: sentence[name] for name in SENTENCE_FEATURES if name != "tense"}
    rows = []
    for index, word in enumerate(sentence["words"]):
        role = roles[index]
        finite = role in ("aux", "rc_verb") or (role == "main_verb" and not question)
        number = NONE
        if role in head_number:
            number = head_number[role]
        elif finite and tense == PRESENT:
            number = verb_subject[role]
        rows.append(
            {
                "sentence_id": int(sentence["sentence_id"]),
                "word_index": index,
                "word": word,
                "pos": pos[index],
                "word_role": role,
                "word_position": int(sentence["word_position"][index]),
                "number": number,
                "tense": tense if finite else NONE,
                "in_relative_clause": "inside" if rc_start is not None and rc_start <= index <= rc_end else "outside",
                **shared,
            }
        )
    return rows


def stimulus_table(sentences: pd.DataFrame, level: str, stimuli: str = "corpus") -> pd.DataFrame:
    """The stimuli of ``level`` with every known feature, keyed by ``sentence_id``, ``word_index``
    (0 for sentences), from a grammar sentence table (``evaluation_texts``): the rows of the
    stimulus set ``stimuli`` (:data:`STIMULUS_SOURCES`; a table without a ``source`` column is
    taken whole). Other rows are left out (logged); raises :class:`FeatureError` when none is left."""
    check_level(level)
    if stimuli not in STIMULUS_SOURCES:
        raise ValueError(f"mlem.stimuli must be one of {sorted(STIMULUS_SOURCES)}, got {stimuli!r}")
    source = STIMULUS_SOURCES[stimuli]
    grammar = sentences[sentences["source"] == source] if "source" in sentences else sentences
    if len(grammar) < len(sentences):
        left = sentences.loc[sentences["source"] != source, "source"].value_counts().to_dict()
        logger.info("MLEM: stimuli %r are the %r sentences; left out: %s", stimuli, source, left)
    missing = [
        column for column in ("sentence_id", "words", "pos", "word_role", *SENTENCE_FEATURES) if column not in grammar
    ]
    if missing:
        raise FeatureError(
            f"the sentence table lacks the grammar columns {missing}: MLEM needs the grammar's "
            "labelled sentences (corpus pipeline)"
        )
    if grammar.empty:
        hint = (
            " (set corpus.controlled_stimuli.enabled: true, and rerun the corpus and activations pipelines)"
            if stimuli == "controlled"
            else ""
        )
        raise FeatureError(
            f"mlem.stimuli: {stimuli!r}: no {source!r} sentence among the evaluation texts: MLEM has "
            f"no stimulus with features{hint}"
        )
    if level == "sentence":
        table = grammar[["sentence_id", *SENTENCE_FEATURES]].copy()
        table.insert(1, "word_index", 0)
        return table.reset_index(drop=True)
    rows = [row for _, sentence in grammar.iterrows() for row in _word_rows(sentence)]
    return pd.DataFrame(rows)


def sample_stimuli(table: pd.DataFrame, max_stimuli: int | None, seed: int) -> pd.DataFrame:
    """At most ``max_stimuli`` rows of ``table``, drawn without replacement with ``seed`` (table order kept)."""
    if max_stimuli is None or len(table) <= max_stimuli:
        return table.reset_index(drop=True)
    chosen = np.sort(np.random.default_rng(seed).choice(len(table), size=max_stimuli, replace=False))
    return table.iloc[chosen].reset_index(drop=True)


@dataclass(frozen=True)
class StimulusVectors:
    """Vectors of the stimuli a store has: ``keys`` ``(n, 2)`` and ``vectors`` ``(stored layers, n, d)``."""

    keys: np.ndarray
    vectors: np.ndarray
    layers: list[int]


def _last_token_rows(index: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, keys)``: the stream position of each sentence's last non-special token, and its key."""
    ordered = index.sort_values(["sequence", "position"], kind="stable").reset_index(drop=True)
    real = ordered[~special_rows(ordered)]
    last = real.groupby("sentence_id", sort=False).tail(1)
    keys = np.stack([last["sentence_id"].to_numpy(np.int64), np.zeros(len(last), dtype=np.int64)], axis=1)
    return last.index.to_numpy(np.int64), keys


def _gather_rows(store: ActivationStore, rows: np.ndarray) -> np.ndarray:
    """``(layers, len(rows), d)``: the stored tokens at stream positions ``rows`` (sorted), shard by shard."""
    parts, offset = [], 0
    for batch in store:
        tokens = batch.tokens()
        inside = rows[(rows >= offset) & (rows < offset + tokens.shape[1])]
        if len(inside):
            parts.append(tokens[:, inside - offset])
        offset += tokens.shape[1]
    return np.concatenate(parts, axis=1)


def stimulus_vectors(
    store: ActivationStore,
    index: pd.DataFrame,
    level: str,
    sentence_pooling: str = "mean",
    keys: pd.MultiIndex | None = None,
) -> StimulusVectors:
    """Every stimulus vector the store holds (module docstring), optionally only ``keys``."""
    check_level(level)
    if sentence_pooling not in SENTENCE_POOLINGS:
        raise ValueError(f"mlem.sentence_pooling must be one of {SENTENCE_POOLINGS}, got {sentence_pooling!r}")
    if level == "sentence" and sentence_pooling == "last":
        rows, found = _last_token_rows(index)
        if keys is not None:
            wanted = pd.MultiIndex.from_arrays([found[:, 0], found[:, 1]]).isin(keys)
            rows, found = rows[wanted], found[wanted]
        order = np.argsort(rows)
        return StimulusVectors(found[order], _gather_rows(store, rows[order]), store.layers)
    pooling = "word" if level == "word" else "sequence"
    parts = list(pooled_rows(store, index, pooling, keys=keys))
    if not parts:
        return StimulusVectors(
            np.zeros((0, 2), dtype=np.int64), np.zeros((len(store.layers), 0, store.d_model)), store.layers
        )
    return StimulusVectors(
        np.concatenate([k for k, _ in parts]), np.concatenate([v for _, v in parts], axis=1), store.layers
    )


def align(stimuli: pd.DataFrame, found: StimulusVectors, what: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The stimuli that have vectors (in ``stimuli`` order) and their vectors ``(layers, n, d)``;
    the others are left out (logged). Raises :class:`FeatureError` when none has a vector."""
    position = {(int(a), int(b)): i for i, (a, b) in enumerate(found.keys)}
    rows = np.array(
        [position.get((int(s), int(w)), -1) for s, w in zip(stimuli["sentence_id"], stimuli["word_index"])],
        dtype=np.int64,
    )
    present = rows >= 0
    if not present.any():
        raise FeatureError(
            f"{what}: none of the {len(stimuli)} stimuli has a vector in the activation store "
            "(different evaluation texts?)"
        )
    if not present.all():
        logger.warning(
            "MLEM %s: %d of %d stimuli have no vector in the store and are left out",
            what,
            int((~present).sum()),
            len(stimuli),
        )
    return stimuli[present].reset_index(drop=True), found.vectors[:, rows[present]]
