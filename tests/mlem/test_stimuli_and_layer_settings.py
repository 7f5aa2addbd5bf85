"""``mlem.stimuli``, ``mlem.layers`` and ``corpus.controlled_stimuli``: checked at start naming the key; the
controlled sentences join the evaluation texts; the fit's cost is estimated and logged before it starts."""

from __future__ import annotations

import logging

import pytest

from tests.mlem.planted import planted_stimuli
from thinkalike.language.grammar import generate_sentences
from thinkalike.mlem.features import FeatureError, encode_features
from thinkalike.mlem.fit import CostEstimate, MLEMSettings, estimate_cost, log_cost
from thinkalike.mlem.stimuli import stimulus_table
from thinkalike.pipelines.corpus.nodes import build_evaluation_texts
from thinkalike.pipelines.corpus.schema import validate_corpus
from thinkalike.pipelines.mlem.pipeline import create_pipeline
from thinkalike.pipelines.mlem.schema import validate_mlem
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import ParameterError

ZOO = {
    "models": {
        "gelu_2l": {"family": "bridge", "architecture": {"n_layers": 2}},
        "neox_l": {"family": "hf", "architecture": {"model_type": "gpt_neox", "num_hidden_layers": 4}},
    }
}
CONTROLLED_ON = {"controlled_stimuli": {"enabled": True}}


@pytest.mark.parametrize(
    ("mlem", "parameters", "message"),
    [
        ({"stimuli": "controlled"}, {"corpus": {}}, r"mlem\.stimuli: 'controlled' needs corpus\.controlled_stimuli"),
        ({"stimuli": "natural"}, None, r"mlem\.stimuli: Input should be 'corpus' or 'controlled'"),
        (
            {"categorical_coding": "one_hot"},
            None,
            r"mlem\.categorical_coding: Input should be 'equality' or 'indicators'",
        ),
        ({"layers": [0, 1, 1]}, None, r"mlem\.layers: each layer once"),
        ({"layers": []}, None, r"mlem\.layers: List should have at least 1 item"),
        ({"layers": [-1]}, None, r"mlem\.layers\.0: Input should be greater than or equal to 0"),
        ({"layers": [0, 3]}, {"zoo": ZOO}, r"mlem\.layers: zoo model gelu_2l stores layers 0\.\.2, not \[3\]"),
        (
            {"layers": [0, 2]},
            {"zoo": ZOO, "activations": {"layers": [0, 4]}},
            r"mlem\.layers: layer\(s\) \[2\] are not stored \(activations\.layers: \[0, 4\]\)",
        ),
    ],
)
def test_bad_stimuli_and_layer_settings_are_named_at_start(mlem, parameters, message):
    with pytest.raises(ParameterError, match=message):
        validate_mlem(mlem, RunSettings(parameters))


def test_good_stimuli_and_layer_settings_pass():
    assert validate_mlem({"stimuli": "controlled"}, RunSettings({"corpus": CONTROLLED_ON})).stimuli == "controlled"
    assert validate_mlem({"layers": [0, 2]}, RunSettings({"zoo": ZOO})).layers == [0, 2]
    assert validate_mlem({"layers": [3]}, RunSettings({"zoo": ZOO, "activations": {"final_norm": True}})).layers == [3]
    assert validate_mlem({"layers": [0, 4]}, RunSettings({"zoo": ZOO, "activations": {"layers": [0, 4]}})).layers == [
        0,
        4,
    ]
    assert validate_mlem({}).stimuli == "corpus"  # the default: the corpus's held-out sentences


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"nouns": 1}, r"corpus\.controlled_stimuli\.nouns: Input should be greater than or equal to 2"),
        ({"verbs": 99}, r"corpus\.controlled_stimuli\.verbs: Input should be less than or equal to"),
        ({"factors": {"gender": ["f", "m"]}}, r"corpus\.controlled_stimuli\.factors: unknown feature 'gender'"),
        ({"factors": {"tense": ["present"]}}, r"corpus\.controlled_stimuli\.factors: tense: two or more"),
        ({"factors": {"rc_noun_number": ["sg", "pl"]}}, r"corpus\.controlled_stimuli\.factors: rc_noun_number is"),
        ({"enabled": "yes"}, r"corpus\.controlled_stimuli\.enabled: Input should be a valid boolean"),
        ({"size": 3}, r"corpus\.controlled_stimuli\.size: unknown parameter"),
    ],
)
def test_bad_controlled_stimuli_settings_are_named(values, message):
    with pytest.raises(ParameterError, match=message):
        validate_corpus({"controlled_stimuli": values})


def test_controlled_sentences_join_the_evaluation_texts_only_when_enabled():
    heldout = generate_sentences(30, seed=2)
    corpus = {"n_evaluation_sentences": 10}
    assert len(build_evaluation_texts(heldout, settings=validate_corpus(corpus))) == 10
    joined = build_evaluation_texts(
        heldout, settings=validate_corpus({**corpus, "controlled_stimuli": {"enabled": True, "nouns": 2, "verbs": 1}})
    )
    assert len(joined) == 10 + 72 * 2 * 1
    assert joined["sentence_id"].is_unique and joined["sentence_id"].iloc[10] == heldout["sentence_id"].max() + 1
    assert list(joined["source"].value_counts().sort_index().items()) == [("controlled", 144), ("grammar", 10)]
    # mlem.stimuli picks one set or the other
    assert set(stimulus_table(joined, "sentence", "controlled")["sentence_id"]) == set(joined["sentence_id"][10:])
    assert set(stimulus_table(joined, "sentence", "corpus")["sentence_id"]) == set(joined["sentence_id"][:10])
    with pytest.raises(FeatureError, match=r"mlem\.stimuli: 'controlled': no 'controlled' sentence.*enabled: true"):
        stimulus_table(joined.head(10), "word", "controlled")


def test_controlled_stimuli_keep_mlem_when_natural_text_replaces_the_grammar():
    parameters = {
        "zoo": {"models": {"gelu_1l": {}}},
        "corpus": {"natural_text": {"path": "texts.txt", "use": "replace"}, **CONTROLLED_ON},
    }
    assert not create_pipeline(RunSettings({**parameters, "mlem": {"stimuli": "corpus"}})).nodes
    assert create_pipeline(RunSettings({**parameters, "mlem": {"stimuli": "controlled"}})).nodes


def test_cost_is_estimated_from_timed_steps_and_logged_when_it_may_take_minutes(caplog):
    frame, vectors = planted_stimuli(n=120)
    features = encode_features(frame, {name: "categorical" for name in frame})
    settings = MLEMSettings(pairs_per_step=256, n_folds=3, max_steps=400, n_permutations=2)
    cost = estimate_cost(features, {0: vectors, 1: vectors, 2: vectors}, settings)
    assert (cost.layers, cost.folds, cost.max_steps, cost.pairs_per_step) == (3, 3, 400, 256)
    assert 0 < cost.seconds_per_step < 1 and 0 < cost.seconds_per_scoring < 5
    assert cost.max_seconds == pytest.approx(3 * 3 * (400 * cost.seconds_per_step + cost.seconds_per_scoring))
    slow = CostEstimate(30, 5, 1000, 1024, 0.004, 0.1)  # a 30-layer hub model: 10.25 min at most
    with caplog.at_level(logging.DEBUG, logger="thinkalike.mlem.fit"):
        log_cost(slow, "pythia")
        log_cost(CostEstimate(2, 5, 1000, 1024, 0.001, 0.05), "gelu_2l")
    slow_record, fast_record = caplog.records[-2:]
    assert slow_record.levelno == logging.INFO and "30 layer(s) x 5 folds x at most 1000 steps" in slow_record.message
    assert "at most 10.2 min" in slow_record.message and "mlem.layers" in slow_record.message
    assert fast_record.levelno == logging.DEBUG
