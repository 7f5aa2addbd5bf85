"""Part-of-speech coherence of top-k tokens (a stand-in for Dar et al. §3): token labels from a planted tokenizer
and the corpus tokenizer, the statistic against a plain-Python reference (sets, itertools.combinations), the exact
chance level against a brute-force enumeration of every k-subset, vectors built from one class's columns (coherence
1), Gaussian vectors through a random E (chance), a zoo bridge and a Mamba, and bad input."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
import torch

from tests.embedding.conftest import TOY_D as D
from tests.embedding.conftest import TOY_D_HEAD as D_HEAD
from tests.embedding.conftest import TOY_D_MLP as D_MLP
from tests.embedding.conftest import TOY_HEADS as HEADS
from tests.embedding.conftest import toy_parameters
from thinkalike.embedding import extract_parameters, vocabulary_embedding
from thinkalike.embedding.token_structure import (
    DEFAULT_GROUPS,
    POS_CLASSES,
    STRUCTURE_COLUMNS,
    UNLABELLED,
    chance_coherence,
    corpus_pos_lexicon,
    token_classes,
    token_structure,
)
from thinkalike.embedding.weights import ModelParameters

V = 40


class WordPieces:
    """A planted tokenizer: each word maps to fixed token ids."""

    all_special_ids = [0]

    def __init__(self, pieces: dict[str, list[int]]):
        self.pieces = pieces

    def __call__(self, words, add_special_tokens=False):
        return {"input_ids": [self.pieces[w] for w in words]}


def raw_vectors(params: dict[str, torch.Tensor], group: str) -> list[np.ndarray]:
    """The d-vectors of one group of one layer, read off the raw weights (not ModelParameters)."""
    if group == "FF_key":
        return [params["FF_in"][:, i].numpy() for i in range(params["FF_in"].shape[1])]
    if group == "FF_value":
        return [row.numpy() for row in params["FF_out"]]
    if group == "W_O":
        return [params["W_O"][h][j].numpy() for h in range(HEADS) for j in range(D_HEAD)]
    return [params[group][h][:, j].numpy() for h in range(HEADS) for j in range(D_HEAD)]


def reference_coherence(tokens: set[int], labels: list[int]) -> float | None:
    """The fraction of pairs of labelled tokens of ``tokens`` with one class; None with fewer than two."""
    labelled = sorted(t for t in tokens if labels[t] >= 0)
    pairs = list(combinations(labelled, 2))
    if not pairs:
        return None
    return sum(labels[a] == labels[b] for a, b in pairs) / len(pairs)


def reference_chance(labels: list[int]) -> float:
    """Over every pair of distinct labelled tokens, the fraction with one class."""
    pairs = list(combinations([t for t in range(len(labels)) if labels[t] >= 0], 2))
    return sum(labels[a] == labels[b] for a, b in pairs) / len(pairs)


@pytest.fixture(scope="module")
def embedding() -> torch.Tensor:
    return torch.randn(D, V, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


@pytest.fixture(scope="module")
def labels() -> list[int]:
    """Three classes of sizes 12, 8 and 4 and 16 unlabelled ids, shuffled."""
    values = [0] * 12 + [1] * 8 + [2] * 4 + [UNLABELLED] * 16
    order = np.random.default_rng(2).permutation(V)
    return [values[i] for i in order]


def test_token_labels_from_a_planted_tokenizer():
    tokenizer = WordPieces(
        {"dog": [3], "dogs": [3, 4], "runs": [5, 4], "ran": [6], "the": [7], "odd": [0, 8], "cat": [9]}
    )
    lexicon = {"dog": "NOUN", "dogs": "NOUN", "runs": "VERB", "ran": "VERB", "the": "DET", "odd": "ADJ"}
    labels, classes = token_classes(tokenizer, lexicon, 12)
    assert classes == ("ADJ", "DET", "NOUN", "VERB")
    named = {token: classes[label] for token, label in enumerate(labels) if label >= 0}
    # 4 is shared by a noun and a verb; 0 is special; 9 ("cat") and 10, 11 are used by no lexicon word
    assert named == {3: "NOUN", 5: "VERB", 6: "VERB", 7: "DET", 8: "ADJ"}
    assert labels.shape == (12,) and (labels[[0, 1, 2, 4, 9, 10, 11]] == UNLABELLED).all()


def test_corpus_lexicon_on_the_corpus_tokenizer():
    from thinkalike.language.grammar import generate_sentences, lexicon_words
    from thinkalike.language.tokenizer import train_tokenizer

    lexicon = corpus_pos_lexicon()
    assert set(lexicon.values()) == set(POS_CLASSES)
    assert set(lexicon) <= lexicon_words() and lexicon_words() - set(lexicon) == {
        "and",
        "are",
        "by",
        "is",
        "known",
        "seen",
        "was",
        "were",
    }
    assert (lexicon["dog"], lexicon["saw"], lexicon["does"], lexicon["the"], lexicon["?"]) == (
        "NOUN",
        "VERB",
        "AUX",
        "DET",
        "PUNCT",
    )
    tokenizer = train_tokenizer(generate_sentences(2000, seed=1)["text"].tolist(), vocab_size=400)
    labels, classes = token_classes(tokenizer, lexicon, len(tokenizer))
    vocab = tokenizer.get_vocab()
    for word in ("dog", "cats", "saw", "the", "near", "that", "happy", "did", "."):
        if word in vocab:
            assert classes[labels[vocab[word]]] == lexicon[word], word
    assert (labels[tokenizer.all_special_ids] == UNLABELLED).all()
    assert 100 < (labels >= 0).sum() < len(tokenizer)


def test_table_equals_the_plain_python_reference(embedding, labels):
    params, k = toy_parameters(), 6
    groups = ("FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O")
    table = token_structure(params, embedding, np.array(labels), k=k, groups=groups, n_random=0, dtype=torch.float64)
    assert list(table.columns) == STRUCTURE_COLUMNS and len(table) == 2 * len(groups)
    e = embedding.numpy()
    chance = reference_chance(labels)
    for row in table.itertuples():
        tops = [
            {int(i) for i in np.argsort(-(v @ e), kind="stable")[:k]}
            for v in raw_vectors(params.groups[row.layer], row.group)
        ]
        values = [reference_coherence(top, labels) for top in tops]
        measured = [value for value in values if value is not None]
        assert (row.n_vectors, row.n_skipped) == (len(measured), len(values) - len(measured))
        assert row.coherence_mean == pytest.approx(np.mean(measured), abs=1e-12)
        assert row.coherence_sd == pytest.approx(np.std(measured, ddof=1), abs=1e-12)
        labelled = [sum(labels[t] >= 0 for t in top) / k for top in tops]
        assert row.labelled_fraction == pytest.approx(np.mean(labelled), abs=1e-12)
        assert row.labelled_chance == pytest.approx(24 / V)
        assert row.chance == pytest.approx(chance, abs=1e-12)
        assert row.difference == pytest.approx(row.coherence_mean - chance)
        assert row.k == k and math.isnan(row.random_vector_mean)


@pytest.mark.parametrize("labels", [[0, 0, 0, 1, 1, 2, -1, -1], [0, 1, 1, -1, 2, 2, 2, 2], [0, -1, 1, -1, -1, 0, -1]])
def test_chance_equals_a_brute_force_enumeration(labels):
    """Every k-subset of a tiny vocabulary is equally likely: the mean coherence of those with ≥ 2 labelled tokens is
    the chance level, whatever k."""
    for k in range(2, len(labels) + 1):
        values = [reference_coherence(set(subset), labels) for subset in combinations(range(len(labels)), k)]
        measured = [value for value in values if value is not None]
        assert chance_coherence(np.array(labels)) == pytest.approx(np.mean(measured), abs=1e-12), k
    assert math.isnan(chance_coherence(np.array([0, -1, -1])))  # one labelled token: no pair


def test_vectors_of_one_class_have_coherence_one(labels):
    """FF values = the sum of the E columns of 4 tokens of one class (d = 256 ≫ k: their own columns dominate the
    logits): their top-4 tokens are those tokens, every pair one class."""
    d, k = 256, 4
    matrix = torch.randn(d, V, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    generator = np.random.default_rng(4)
    members = {c: [t for t in range(V) if labels[t] == c] for c in range(3)}
    chosen = [sorted(generator.choice(members[c], k, replace=False)) for c in (0, 1, 2, 0, 1, 2)]
    values = torch.stack([matrix[:, ids].sum(dim=1) for ids in chosen])
    params = ModelParameters("planted", (0,), ({"FF_in": values.T.clone(), "FF_out": values},))
    table = token_structure(params, matrix, np.array(labels), k=k, groups=["FF_key", "FF_value"], n_random=0)
    assert (table["coherence_mean"] == 1.0).all() and (table["n_vectors"] == 6).all()
    assert (table["n_skipped"] == 0).all() and (table["labelled_fraction"] == 1.0).all()
    assert (table["chance"] < 0.5).all() and (table["difference"] > 0.5).all()


def test_gaussian_vectors_on_a_random_embedding_are_at_chance():
    """3000 Gaussian FF keys and values per layer, E with unit-norm Gaussian columns (d = 64, V = 200, k = 10;
    classes of 60, 40, 20, 20): coherence_mean and random_vector_mean within 0.02 of the exact chance (0.301; over
    four seeds of E, labels and vectors every |difference| was at most 0.006)."""
    vocabulary, d = 200, 64
    matrix = torch.randn(d, vocabulary, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    matrix /= matrix.norm(dim=0, keepdim=True)
    values = [0] * 60 + [1] * 40 + [2] * 20 + [3] * 20 + [UNLABELLED] * 60
    labels = np.array(values)[np.random.default_rng(6).permutation(vocabulary)]
    params = toy_parameters(layers=2, seed=7, d=d, n_mlp=3000)
    table = token_structure(params, matrix, labels, k=10, groups=["FF_key", "FF_value"], n_random=3000, seed=1)
    chance = (60 * 59 + 40 * 39 + 2 * 20 * 19) / (140 * 139)
    assert table["chance"].iloc[0] == pytest.approx(chance)
    assert (table["difference"].abs() < 0.02).all(), table
    assert abs(table["random_vector_mean"].iloc[0] - chance) < 0.02
    assert table["labelled_fraction"].sub(0.7).abs().max() < 0.02


def test_zoo_bridge_and_mamba(zoo_model, tiny_mamba, caplog):
    matrix = vocabulary_embedding(zoo_model)
    labels = np.random.default_rng(0).integers(-1, 4, matrix.shape[1])
    table = token_structure(extract_parameters(zoo_model), matrix, labels, k=13, n_random=50)
    assert len(table) == zoo_model.n_layers * len(DEFAULT_GROUPS)
    numbers = table[STRUCTURE_COLUMNS[3:]].to_numpy(dtype=float)
    assert np.isfinite(numbers).all() and table["coherence_mean"].between(0, 1).all()
    again = token_structure(extract_parameters(zoo_model), matrix, labels, k=13, n_random=50)
    assert table.equals(again)  # seeded
    mamba_matrix = vocabulary_embedding(tiny_mamba)
    with caplog.at_level("WARNING"):
        mamba = token_structure(
            extract_parameters(tiny_mamba), mamba_matrix, np.zeros(mamba_matrix.shape[1], dtype=int), k=5, n_random=5
        )
    assert set(mamba["group"]) == {"FF_key", "FF_value"} and "no W_V" in caplog.text
    assert (mamba["coherence_mean"] == 1.0).all() and (mamba["chance"] == 1.0).all()  # one class: every pair agrees


def test_one_token_leaves_no_pair(embedding, labels):
    table = token_structure(toy_parameters(layers=1), embedding, np.array(labels), k=1, groups=["FF_key"], n_random=3)
    row = table.iloc[0]
    assert row["n_vectors"] == 0 and row["n_skipped"] == D_MLP
    assert math.isnan(row["coherence_mean"]) and math.isnan(row["chance"]) and math.isnan(row["random_vector_mean"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"k": V + 1}, rf"^k: k={V + 1} exceeds the vocabulary size V={V}$"),
        ({"k": 0}, r"^k: k must be a positive integer, got 0$"),
        ({"k": 5, "n_random": -1}, r"^n_random: a number of random vectors >= 0, got -1$"),
        ({"k": 5, "groups": ["W_VO"]}, r"^groups: unknown vector groups \['W_VO'\]"),
        ({"k": 5, "labels": np.zeros(V - 1, dtype=int)}, r"^labels: one class index per token id \(40\)"),
        ({"k": 5, "n_classes": 2}, r"^labels: class indices up to 2 but n_classes=2$"),
    ],
)
def test_bad_input_is_named(embedding, labels, arguments, message):
    arguments = {"labels": np.array(labels), **arguments}
    with pytest.raises(ValueError, match=message):
        token_structure(toy_parameters(layers=1), embedding, **arguments)
