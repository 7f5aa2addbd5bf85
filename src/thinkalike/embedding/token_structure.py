"""Part-of-speech coherence of a parameter vector's top tokens (a measurable stand-in for Dar et al. 2022 §3).

Dar et al. read FF keys and values in the vocabulary (the top-k tokens of ``v·E``) and show by examples that a
vector's tokens share a topic. On the grammar the tokens have a known structure: every lexicon word has one part of
speech (:data:`POS_CLASSES`, the grammar's own tags). A token id is **labelled** with class ``c`` when every lexicon
word whose tokenisation uses it (each word tokenised alone, no special tokens: the corpus tokenizer splits on
whitespace) has POS ``c``; a token used by words of several classes, by no lexicon word, or special, is unlabelled
(:func:`token_classes`). With ``T`` the k tokens of largest ``+v·E`` and ``m`` of them labelled, ``m_c`` with
class ``c``::

    coherence(v) = Σ_c m_c (m_c − 1) / (m (m − 1))        (the fraction of pairs of labelled tokens that share a class)

defined for ``m ≥ 2`` (vectors with fewer labelled top tokens are skipped and counted in ``n_skipped``).
``coherence_mean`` is its mean over the vectors of one group and layer (:mod:`~thinkalike.embedding.weights`:
``FF_key``, ``FF_value``, ``W_V``, ``W_O`` by default; ``W_Q``, ``W_K`` on request).

Chance level — exact, not sampled. For k tokens drawn uniformly without replacement from the V ids, given that
``m ≥ 2`` of them are labelled, the labelled ones are a uniform m-subset of the L labelled tokens (n_c of class c),
so every pair among them is a uniform pair of distinct labelled tokens and::

    chance = E[coherence | m ≥ 2] = Σ_c n_c (n_c − 1) / (L (L − 1))

whatever k and m (hypergeometric conditioning drops out); NaN when fewer than two tokens are labelled or k < 2
(no vector could be measured). ``difference = coherence_mean − chance``. Beside it, ``labelled_fraction`` (mean
``m / k``) against ``labelled_chance = L / V`` tells whether the top tokens are lexicon tokens more often than
random ones.

A second baseline, for the parameters against the embedding's own geometry: ``random_vector_mean`` is the mean
coherence of ``n_random`` isotropic Gaussian d-vectors (seeded) read through the same ``E`` (one value per model).
On a random ``E`` it sits at ``chance``; on a trained ``E`` tokens of one class have similar columns, so any vector's
top tokens cluster and it sits above ``chance`` (on the zoo's trained models, most of the way to the parameters').
``difference_random_vectors = coherence_mean − random_vector_mean`` is the part the parameters add.

Top-k sets come from :func:`~thinkalike.embedding.reading.top_tokens` (row blocks of at most ``block_bytes`` of
logits, the compute dtype; ties broken by ``torch.topk``); the class counts of a block are one ``(n, C)``
scatter-add. No Kedro here; the pipeline node is :func:`thinkalike.pipelines.embedding.nodes.token_structure`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.embedding.reading import available_groups, top_tokens
from thinkalike.embedding.space import check_k
from thinkalike.embedding.topk import DEFAULT_BLOCK_BYTES
from thinkalike.embedding.weights import VECTOR_GROUPS, ModelParameters
from thinkalike.language import grammar

logger = logging.getLogger(__name__)

#: The grammar's part-of-speech tags (those :func:`thinkalike.language.grammar.generate_sentences` writes).
POS_CLASSES: tuple[str, ...] = ("DET", "ADJ", "NOUN", "VERB", "AUX", "PREP", "REL", "PUNCT")
#: Vector groups measured by default (the FF keys and values of §3, and the OV circuit's W_V columns and W_O rows).
DEFAULT_GROUPS: tuple[str, ...] = ("FF_key", "FF_value", "W_V", "W_O")
UNLABELLED = -1
STRUCTURE_COLUMNS = [
    "model",
    "layer",
    "group",
    "k",
    "n_vectors",
    "n_skipped",
    "labelled_fraction",
    "labelled_chance",
    "coherence_mean",
    "coherence_sd",
    "chance",
    "difference",
    "random_vector_mean",
    "difference_random_vectors",
]


def corpus_pos_lexicon() -> dict[str, str]:
    """``{word: POS}`` of every word :func:`~thinkalike.language.grammar.generate_sentences` can write (the corpus
    the tokenizer and the zoo were trained on). The NLI-only words (passive forms, "by", "and") are left out: the
    corpus tokenizer never saw them and splits them into pieces of corpus words ("and" → "a" "##nd"), which would
    unlabel those words' tokens."""
    _verbs = grammar.TRANSITIVE_VERBS + grammar.INTRANSITIVE_VERBS
    classes: dict[str, set[str]] = {
        "DET": {"the", "an", *(d for dets in grammar.DETERMINERS.values() for d in dets)},
        "ADJ": set(grammar.ADJECTIVES),
        "NOUN": {form for noun in grammar.NOUNS for form in (noun.singular, noun.plural)},
        "VERB": {form for verb in _verbs for form in (verb.singular, verb.plural, verb.past)},
        "AUX": set(grammar.AUXILIARIES.values()),
        "PREP": set(grammar.PREPOSITIONS),
        "REL": {grammar.RELATIVE_PRONOUN},
        "PUNCT": set(grammar.PUNCTUATION.values()),
    }
    lexicon: dict[str, str] = {}
    for pos, words in classes.items():
        for word in sorted(words):
            if lexicon.setdefault(word, pos) != pos:
                raise ValueError(f"grammar: {word!r} is both {lexicon[word]} and {pos}")
    return lexicon


def token_classes(
    tokenizer: Any, lexicon: Mapping[str, str], vocabulary_size: int
) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(labels, classes)``: ``labels[t]`` (length ``vocabulary_size``, int64) is the index in ``classes`` of token
    t's one POS (module docstring), :data:`UNLABELLED` (−1) otherwise; ``classes`` the sorted POS of ``lexicon``.
    Each word is tokenised alone without special tokens; special ids and ids ≥ ``vocabulary_size`` stay
    unlabelled."""
    classes = tuple(sorted(set(lexicon.values())))
    index = {pos: i for i, pos in enumerate(classes)}
    words = sorted(lexicon)
    encoded = tokenizer(words, add_special_tokens=False)["input_ids"] if words else []
    users: dict[int, set[str]] = {}
    for word, ids in zip(words, encoded):
        for token in ids:
            users.setdefault(int(token), set()).add(lexicon[word])
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    labels = np.full(vocabulary_size, UNLABELLED, dtype=np.int64)
    for token, kinds in users.items():
        if len(kinds) == 1 and token not in special and 0 <= token < vocabulary_size:
            labels[token] = index[next(iter(kinds))]
    return labels, classes


def chance_coherence(labels: np.ndarray | torch.Tensor, n_classes: int | None = None) -> float:
    """``Σ_c n_c (n_c − 1) / (L (L − 1))`` over the class sizes ``n_c`` of the labelled entries (≥ 0) of ``labels``
    (exact: module docstring); NaN when fewer than two tokens are labelled."""
    values = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
    values = values[values >= 0]
    sizes = torch.bincount(values, minlength=n_classes or 0).double()
    total = float(sizes.sum())
    if total < 2:
        return float("nan")
    return float((sizes * (sizes - 1)).sum()) / (total * (total - 1))


def coherence(top_ids: torch.Tensor, labels: torch.Tensor, n_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(coherence, m)`` of each row of ``top_ids`` ``(n, k)`` (token ids): the fraction of pairs of its labelled
    tokens (``labels[id] ≥ 0``) that share a class (NaN where ``m < 2``) and ``m``, both ``(n,)`` float64."""
    classes = labels.to(top_ids.device)[top_ids]  # (n, k)
    labelled = classes >= 0
    counts = torch.zeros(top_ids.shape[0], max(1, n_classes), dtype=torch.float64, device=top_ids.device)
    counts.scatter_add_(1, classes.clamp(min=0), labelled.double())
    m = counts.sum(dim=1)
    same = (counts * (counts - 1)).sum(dim=1)
    pairs = m * (m - 1)
    return torch.where(m >= 2, same / pairs.clamp(min=1), torch.full_like(m, float("nan"))), m


def token_structure(
    parameters: ModelParameters,
    embedding: torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    *,
    k: int,
    n_classes: int | None = None,
    groups: Sequence[str] = DEFAULT_GROUPS,
    n_random: int = 1000,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> pd.DataFrame:
    """One row per extracted layer and vector group (:data:`STRUCTURE_COLUMNS`): the POS coherence of each vector's
    top-k tokens of ``+v·E`` (``labels``: per token id, its class index or −1, :func:`token_classes`), its mean
    and standard deviation over the ``n_vectors`` vectors with ≥ 2 labelled top tokens (``n_skipped`` the others),
    the exact ``chance`` (:func:`chance_coherence`) and ``difference``; ``random_vector_mean``, the mean coherence
    of ``n_random`` Gaussian vectors drawn with ``seed`` (NaN with ``n_random = 0``), and ``coherence_mean`` minus
    it. Groups the model lacks (Mamba's attention) are skipped with a logged note. Raises ``ValueError`` naming the
    argument for ``k`` outside ``1 … V``, labels not of length V, a negative ``n_random`` or an unknown group."""
    unknown = [group for group in groups if group not in VECTOR_GROUPS]
    if unknown:
        raise ValueError(f"groups: unknown vector groups {unknown} (known: {list(VECTOR_GROUPS)})")
    vocabulary = embedding.shape[1]
    check_k(k, vocabulary)
    label_tensor = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
    if label_tensor.shape != (vocabulary,):
        raise ValueError(f"labels: one class index per token id ({vocabulary}), got shape {tuple(label_tensor.shape)}")
    n_classes = int(label_tensor.max()) + 1 if n_classes is None else n_classes
    if int(label_tensor.max()) >= n_classes:
        raise ValueError(f"labels: class indices up to {int(label_tensor.max())} but n_classes={n_classes}")
    if isinstance(n_random, bool) or not isinstance(n_random, int) or n_random < 0:
        raise ValueError(f"n_random: a number of random vectors >= 0, got {n_random!r}")
    chance = chance_coherence(label_tensor, n_classes) if k >= 2 else float("nan")
    labelled_chance = float((label_tensor >= 0).double().mean())
    embedding = embedding.detach().to(dtype)
    label_tensor = label_tensor.to(embedding.device)
    random_mean = float("nan")
    if n_random:
        drawn = torch.randn(n_random, embedding.shape[0], generator=torch.Generator().manual_seed(seed), dtype=dtype)
        ids = top_tokens(drawn.to(embedding.device), embedding, k, block_bytes=block_bytes)[1]
        random_values = coherence(ids, label_tensor, n_classes)[0]
        random_values = random_values[~random_values.isnan()]
        random_mean = float(random_values.mean()) if len(random_values) else float("nan")
    present = available_groups(parameters, groups)
    records = []
    for position, layer in enumerate(parameters.layers):
        for group in present:
            vectors = parameters.vectors(group, position).to(device=embedding.device, dtype=dtype)
            ids = top_tokens(vectors, embedding, k, block_bytes=block_bytes)[1]
            values, m = coherence(ids, label_tensor, n_classes)
            measured = values[~values.isnan()]
            mean = float(measured.mean()) if len(measured) else float("nan")
            records.append(
                {
                    "model": parameters.model,
                    "layer": layer,
                    "group": group,
                    "k": k,
                    "n_vectors": len(measured),
                    "n_skipped": len(values) - len(measured),
                    "labelled_fraction": float(m.mean() / k) if len(m) else float("nan"),
                    "labelled_chance": labelled_chance,
                    "coherence_mean": mean,
                    "coherence_sd": float(measured.std()) if len(measured) > 1 else float("nan"),
                    "chance": chance,
                    "difference": mean - chance,
                    "random_vector_mean": random_mean,
                    "difference_random_vectors": mean - random_mean,
                }
            )
    return pd.DataFrame.from_records(records, columns=STRUCTURE_COLUMNS)
