"""Feature encoding, Δf, the grammar's word and sentence features, and stimulus vectors from a store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from thinkalike.language.grammar import generate_sentences
from thinkalike.mlem.features import (
    FeatureError,
    correlated_features,
    encode_features,
    feature_tensors,
    pair_differences,
)
from thinkalike.mlem.stimuli import (
    DEFAULT_FEATURES,
    UNDEFINED,
    align,
    resolve_features,
    sample_stimuli,
    stimulus_table,
    stimulus_vectors,
)
from thinkalike.models.activation_store import (
    ActivationBatch,
    ActivationStore,
    write_activation_store,
)


def test_pair_differences_follow_the_definition():
    frame = pd.DataFrame(
        {"pos": ["NOUN", "VERB", "NOUN", "DET"], "number": ["sg", "pl", "none", "sg"], "position": [0, 2, 4, 8]}
    )
    table = encode_features(
        frame, {"pos": "categorical", "number": "categorical", "position": "numeric"}, {"number": {"none"}}
    )
    values, categorical = feature_tensors(table, dtype=torch.float64)
    first, second = torch.tensor([0, 0, 1, 2, 3]), torch.tensor([1, 2, 3, 3, 3])
    expected = [
        [1, 1, 0.25],  # NOUN/VERB, sg/pl, |0-2|/8
        [0, 0, 0.5],  # NOUN/NOUN, number undefined for 2
        [1, 1, 0.75],
        [1, 0, 0.5],  # number undefined for 2
        [0, 0, 0.0],
    ]  # a stimulus with itself
    np.testing.assert_allclose(pair_differences(values, categorical, first, second).numpy(), expected)


def test_missing_values_and_unknown_names_are_errors():
    frame = pd.DataFrame({"pos": ["NOUN", None], "position": [0, 1]})
    with pytest.raises(FeatureError, match=r"gelu_2l: feature 'pos' has 1 missing value"):
        encode_features(frame, {"pos": "categorical"}, what="gelu_2l")
    with pytest.raises(FeatureError, match=r"unknown feature\(s\) \['case'\]; known: \['pos', 'position'\]"):
        encode_features(frame, {"case": "categorical"})
    with pytest.raises(FeatureError, match=r"unknown word-level feature\(s\) \['case'\]; known: \[.*'pos'"):
        resolve_features("word", ["pos", "case"])


def test_correlated_features_are_found():
    rng = np.random.default_rng(0)
    a = rng.random(500)
    differences = np.column_stack([a, a + 0.1 * rng.random(500), rng.random(500)])
    found = correlated_features(differences, ["a", "a_copy", "other"], 0.5)
    assert [(x, y) for x, y, _ in found] == [("a", "a_copy")]


def test_word_features_of_an_object_relative_clause():
    sentence = pd.DataFrame(
        [
            {
                "sentence_id": 7,
                "text": "the dog that the cats see runs .",
                "source": "grammar",
                "words": ["the", "dog", "that", "the", "cats", "see", "runs", "."],
                "pos": ["DET", "NOUN", "REL", "DET", "NOUN", "VERB", "VERB", "PUNCT"],
                "word_position": list(range(8)),
                "word_role": ["other", "subject", "other", "other", "rc_noun", "rc_verb", "main_verb", "other"],
                "subject_number": "sg",
                "object_number": "none",
                "tense": "present",
                "relative_clause": "object",
                "attractor_number": "none",
                "rc_noun_number": "pl",
                "sentence_type": "declarative",
                "n_words": 8,
            }
        ]
    )
    words = stimulus_table(sentence, "word").set_index("word_index")
    assert words["number"].tolist() == ["none", "sg", "none", "none", "pl", "pl", "sg", "none"]
    assert words["tense"].tolist() == ["none"] * 5 + ["present", "present", "none"]
    assert words["in_relative_clause"].tolist() == ["outside", "outside"] + ["inside"] * 4 + ["outside"] * 2
    assert (words["sentence_id"] == 7).all() and words["relative_clause"].eq("object").all()


def test_grammar_word_table_is_consistent():
    sentences = generate_sentences(60, seed=3)
    words = stimulus_table(sentences, "word")
    assert len(words) == sentences["n_words"].sum()
    nouns = words[words["pos"] == "NOUN"]
    assert nouns["number"].isin(["sg", "pl"]).all()
    assert (words.loc[words["pos"].isin(["DET", "ADJ", "PREP", "PUNCT"]), "tense"] == "none").all()
    questions = words[(words["sentence_type"] == "question") & (words["word_role"] == "main_verb")]
    assert (questions["tense"] == "none").all() and (questions["number"] == "none").all()
    without_rc = words[words["relative_clause"] == "none"]
    assert (without_rc["in_relative_clause"] == "outside").all()
    table = encode_features(words, resolve_features("word", None), UNDEFINED)
    assert table.names == DEFAULT_FEATURES["word"]
    sentence_level = stimulus_table(sentences, "sentence")
    assert len(sentence_level) == 60 and (sentence_level["word_index"] == 0).all()


def test_natural_text_is_left_out_and_sampling_is_seeded():
    sentences = generate_sentences(20, seed=1)
    natural = pd.DataFrame([{"sentence_id": 99, "text": "plain text", "source": "natural"}])
    table = stimulus_table(pd.concat([sentences, natural], ignore_index=True), "sentence")
    assert 99 not in table["sentence_id"].tolist()
    a, b = sample_stimuli(table, 5, seed=0), sample_stimuli(table, 5, seed=0)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 5 and a["sentence_id"].is_monotonic_increasing


@pytest.fixture
def tiny_store(tmp_path):
    """Two sentences, tokens: <bos> w0a w0b w1 <eos> | <bos> w0 w1 <eos>; 2 layers, d = 2."""
    index = pd.DataFrame(
        {
            "sequence": [0] * 9,
            "position": list(range(9)),
            "token_id": [1, 5, 6, 7, 2, 1, 8, 9, 2],
            "token": list("bxyzebuve"),
            "sentence_id": [0, 0, 0, 0, 0, 1, 1, 1, 1],
            "word_index": [-1, 0, 0, 1, -1, -1, 0, 1, -1],
            "is_special": [1, 0, 0, 0, 1, 1, 0, 0, 1],
            "source": "grammar",
        }
    ).astype({"is_special": bool})
    tokens = np.arange(2 * 9 * 2, dtype=np.float32).reshape(2, 9, 2)
    path = tmp_path / "store"
    write_activation_store(path, [ActivationBatch(tokens, np.ones((1, 9), dtype=np.int64), 0)], "toy")
    return ActivationStore(path), index, tokens


def test_word_vectors_are_token_means_and_last_token_is_the_last_real_one(tiny_store):
    store, index, tokens = tiny_store
    words = stimulus_vectors(store, index, "word")
    assert words.keys.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    np.testing.assert_allclose(words.vectors[:, 0], tokens[:, 1:3].mean(axis=1))
    np.testing.assert_allclose(words.vectors[:, 3], tokens[:, 7])
    last = stimulus_vectors(store, index, "sentence", "last")
    assert last.keys.tolist() == [[0, 0], [1, 0]]
    np.testing.assert_allclose(last.vectors[:, 0], tokens[:, 3])
    np.testing.assert_allclose(last.vectors[:, 1], tokens[:, 7])
    mean = stimulus_vectors(store, index, "sentence", "mean")
    np.testing.assert_allclose(mean.vectors[:, 1], tokens[:, 6:8].mean(axis=1))
    stimuli = pd.DataFrame({"sentence_id": [1, 0, 5], "word_index": [1, 0, 0]})
    kept, vectors = align(stimuli, words, "toy")
    assert kept["sentence_id"].tolist() == [1, 0]
    np.testing.assert_allclose(vectors[:, 0], tokens[:, 7])
