"""Bad input is refused, naming what is wrong (model, layer, parameter, feature), before any fitting."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import thinkalike.mlem.fit as fit_module
from tests.mlem.planted import planted_stimuli
from thinkalike.mlem.features import (
    FeatureError,
    FeatureTable,
    drop_single_valued,
    encode_features,
)
from thinkalike.mlem.fit import MLEMSettings, fit_layers
from thinkalike.pipelines.mlem.schema import validate_mlem
from thinkalike.pipelines.schema import ParameterError


@pytest.fixture
def no_fitting(monkeypatch):
    """Any fit is a test failure: the checks must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("fit_layer ran before the input was checked")

    monkeypatch.setattr(fit_module, "fit_layer", refuse)


@pytest.fixture
def planted():
    frame, vectors = planted_stimuli(n=60)
    return encode_features(frame, {name: "categorical" for name in frame}), vectors


def test_single_valued_feature_is_dropped_with_a_warning_naming_it(caplog):
    frame = pd.DataFrame({"pos": ["NOUN", "VERB", "NOUN"], "tense": ["none", "past", "none"], "type": ["q", "q", "q"]})
    table = encode_features(
        frame, {"pos": "categorical", "tense": "categorical", "type": "categorical"}, {"tense": {"none"}}
    )
    with caplog.at_level(logging.WARNING):
        kept = drop_single_valued(table, what="gelu_2l")
    assert kept.names == ("pos",)
    assert "feature 'tense' dropped" in caplog.text and "feature 'type' dropped" in caplog.text
    assert "gelu_2l" in caplog.text
    with pytest.raises(FeatureError, match="no feature takes two values"):
        drop_single_valued(encode_features(frame[["type"]], {"type": "categorical"}))


def test_too_few_stimuli_for_the_folds(planted, no_fitting):
    features, vectors = planted
    few = features.subset(np.arange(7))
    with pytest.raises(ValueError, match=r"neox_s: 7 stimuli are too few for mlem.fit.n_folds=5"):
        fit_layers(few, {0: vectors[:7]}, MLEMSettings(n_folds=5), what="neox_s", progress=False)


def test_nan_in_vectors_names_model_and_layer(planted, no_fitting):
    features, vectors = planted
    broken = vectors.copy()
    broken[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"gelu_2l layer 2: NaN or inf in the vectors of 1 stimuli"):
        fit_layers(features, {0: vectors, 1: vectors, 2: broken}, MLEMSettings(), what="gelu_2l", progress=False)


def test_nan_in_feature_codes_names_the_model(planted, no_fitting):
    features, vectors = planted
    values = features.values.copy()
    values[0, 0] = np.nan
    broken = FeatureTable(features.names, features.kinds, values, features.categories)
    with pytest.raises(FeatureError, match=r"mamba_2l: NaN or inf in the categorical feature codes"):
        fit_layers(broken, {0: vectors}, MLEMSettings(), what="mamba_2l", progress=False)


def test_vectors_and_features_must_have_the_same_stimuli(planted, no_fitting):
    features, vectors = planted
    with pytest.raises(ValueError, match=r"m layer 4: 59 vectors for 60 stimuli"):
        fit_layers(features, {4: vectors[:59]}, MLEMSettings(), what="m", progress=False)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"features": ["pos", "gender"]}, r"mlem.features: unknown word-level feature\(s\) \['gender'\]; known: \["),
        ({"level": "sentence", "features": ["pos"]}, r"mlem.features: unknown sentence-level feature\(s\) \['pos'\]"),
        ({"level": "paragraph"}, r"mlem.level"),
        ({"fit": {"n_fold": 3}}, r"mlem.fit.n_fold: unknown parameter"),
        ({"fit": {"n_folds": 1}}, r"mlem.fit.n_folds: Input should be greater than or equal to 2 \(got 1\)"),
        ({"fit": {"pairs_per_step": "many"}}, r"mlem.fit.pairs_per_step"),
        ({"max_stimuli": 6, "fit": {"n_folds": 5}}, r"mlem.max_stimuli: 6 stimuli are too few"),
        ({"rsa_pairs": 1}, r"mlem.rsa_pairs"),
    ],
)
def test_bad_parameters_are_named(values, message):
    with pytest.raises(ParameterError, match=message):
        validate_mlem(values)


def test_good_parameters_pass():
    assert (
        validate_mlem({"level": "sentence", "features": ["tense", "n_words"], "fit": {"n_folds": 3}}).level
        == "sentence"
    )
