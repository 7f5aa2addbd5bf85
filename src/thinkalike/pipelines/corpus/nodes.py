"""Thin nodes of the ``corpus`` pipeline: grammar → splits → tokenizer → packed sequences.

Their settings are the ``corpus`` section parsed once by the pipeline's builder
(:class:`~thinkalike.pipelines.corpus.schema.CorpusParameters`, bound as ``settings``)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.language.grammar import controlled_sentences, generate_sentences
from thinkalike.language.natural_text import natural_text_table, read_natural_text
from thinkalike.language.packing import (
    pack_evaluation_sequences,
    pack_training_sequences,
    split_sentences,
    unigram_entropy_nats,
)
from thinkalike.language.tokenizer import train_tokenizer
from thinkalike.pipelines.corpus.schema import CorpusParameters

logger = logging.getLogger(__name__)


def generate_corpus(*, settings: CorpusParameters) -> pd.DataFrame:
    """The labelled sentence table of the grammar language (``corpus.n_sentences``, ``corpus.seed``,
    ``corpus.grammar``)."""
    return generate_sentences(settings.n_sentences, settings.seed, settings.grammar_config())


def split_corpus(sentences: pd.DataFrame, *, settings: CorpusParameters) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training and held-out sentences, disjoint (``corpus.heldout_fraction``, ``corpus.seed``)."""
    return split_sentences(sentences, settings.heldout_fraction, settings.seed)


def build_evaluation_texts(heldout_sentences: pd.DataFrame, *, settings: CorpusParameters) -> pd.DataFrame:
    """The texts whose activations are extracted: held-out grammar sentences and/or natural text, and the
    controlled stimuli when enabled.

    ``corpus.natural_text`` (:class:`~thinkalike.pipelines.corpus.schema.NaturalTextParameters`): ``path``
    (null = grammar only), ``mode`` (``lines`` | ``plain``), ``use`` (``join`` adds the documents to the grammar
    sentences, ``replace`` uses them alone). ``corpus.n_evaluation_sentences`` limits each source: the first that
    many held-out sentences, and the first that many natural-text documents (a cut is logged).
    ``corpus.controlled_stimuli`` (``enabled``, ``factors``, ``nouns``, ``verbs``): the controlled set
    (:func:`controlled_sentences`, ``source`` "controlled", all of it, whatever the limit) follows the
    other texts, with sentence ids after theirs.
    """
    natural = settings.natural_text
    limit = settings.n_evaluation_sentences
    grammar = heldout_sentences.head(limit)
    if not natural.path:
        return with_controlled_stimuli(grammar.reset_index(drop=True), heldout_sentences, settings)
    documents = read_natural_text(natural.path, natural.mode)
    if len(documents) > limit:
        logger.info(
            "natural text %s: using the first %d of its %d documents (corpus.n_evaluation_sentences)",
            natural.path,
            limit,
            len(documents),
        )
        documents = documents[:limit]
    table = natural_text_table(documents, first_id=int(heldout_sentences["sentence_id"].max()) + 1)
    if natural.use == "replace":
        return with_controlled_stimuli(table, heldout_sentences, settings)
    return with_controlled_stimuli(pd.concat([grammar, table], ignore_index=True), heldout_sentences, settings)


def with_controlled_stimuli(
    texts: pd.DataFrame, heldout_sentences: pd.DataFrame, settings: CorpusParameters
) -> pd.DataFrame:
    """``texts`` followed by the controlled stimuli when ``corpus.controlled_stimuli.enabled`` (ids after every
    held-out sentence's and every text's)."""
    if not settings.controlled_stimuli.enabled:
        return texts
    config = settings.controlled_stimuli.config()
    first_id = int(max(heldout_sentences["sentence_id"].max(), texts["sentence_id"].max() if len(texts) else -1)) + 1
    controlled = controlled_sentences(config, first_id=first_id)
    logger.info(
        "controlled stimuli: %d sentences (%d conditions x %d nouns x %d verbs) join the %d evaluation texts",
        len(controlled),
        len(config.conditions()),
        config.nouns,
        config.verbs,
        len(texts),
    )
    return pd.concat([texts, controlled], ignore_index=True)


def fit_tokenizer(train_sentences: pd.DataFrame, *, settings: CorpusParameters):
    """A tokenizer trained on the training sentences (``corpus.vocab_size``, ``corpus.seed``), shared by every zoo
    model."""
    return train_tokenizer(train_sentences["text"].tolist(), settings.vocab_size, settings.seed)


def pack_language_model_data(
    train_sentences: pd.DataFrame, heldout_sentences: pd.DataFrame, tokenizer, *, settings: CorpusParameters
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Fixed-length token sequences (``input_ids``, rows of ``corpus.n_ctx``) for training and held-out loss."""
    n_ctx = settings.n_ctx
    return (
        {"input_ids": pack_training_sequences(train_sentences["text"].tolist(), tokenizer, n_ctx)},
        {"input_ids": pack_training_sequences(heldout_sentences["text"].tolist(), tokenizer, n_ctx)},
    )


def pack_evaluation_data(
    evaluation_texts: pd.DataFrame, tokenizer, *, settings: CorpusParameters
) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Evaluation sequences of the zoo models (corpus tokenizer, ``corpus.n_ctx``) with their token index table.

    Only in the pipeline when a zoo model's activations are extracted; texts longer than a row
    are split at words (counted in the log). Always the ``packed`` layout (several texts per
    row); with ``activations.packing: sentence`` the zoo extraction re-lays these rows one text
    per row (:func:`thinkalike.language.packing.one_text_per_row`), so one parameter decides the
    layout of every model.
    """
    return pack_evaluation_sequences(evaluation_texts, tokenizer, settings.n_ctx)


def describe_corpus(
    sentences: pd.DataFrame,
    train_sequences: dict[str, np.ndarray],
    heldout_sequences: dict[str, np.ndarray],
    tokenizer,
    evaluation_texts: pd.DataFrame,
    evaluation_index: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Sizes and the unigram-entropy baseline (nats/token) that zoo models must beat.

    ``n_evaluation_tokens`` (corpus tokenizer) is reported only when the zoo's evaluation data
    is packed (``evaluation_index`` given).
    """
    baseline = unigram_entropy_nats(train_sequences["input_ids"], heldout_sequences["input_ids"], len(tokenizer))
    statistics = {
        "n_sentences": int(len(sentences)),
        "vocab_size": int(len(tokenizer)),
        "n_train_sequences": int(len(train_sequences["input_ids"])),
        "n_heldout_sequences": int(len(heldout_sequences["input_ids"])),
        "n_evaluation_texts": int(len(evaluation_texts)),
        "unigram_entropy_nats": float(baseline),
    }
    if evaluation_index is not None:
        statistics["n_evaluation_tokens"] = int(len(evaluation_index))
    return statistics
