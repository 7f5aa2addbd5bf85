"""Indicator coding of multi-valued categorical features (``mlem.categorical_coding: indicators``): a weight per
value, weights and importances reported per feature, the feature's columns permuted together."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
import torch

from thinkalike.mlem.features import (
    UNDEFINED_CODE,
    encode_features,
    feature_tensors,
    group_differences,
    indicator_coding,
    pair_differences,
)
from thinkalike.mlem.fit import MLEMSettings, fit_layer, profile_table, warn_correlated

SETTINGS = MLEMSettings(pairs_per_step=512, n_folds=3, n_permutations=3, heldout_pairs=2000)


def test_indicator_columns_values_and_groups():
    frame = pd.DataFrame(
        {
            "pos": ["DET", "NOUN", "VERB", "NOUN", "DET"],
            "number": ["sg", "pl", "none", "sg", "none"],
            "tense": ["none", "past", "present", "none", "past"],
            "position": [0, 1, 2, 3, 4],
        }
    )
    table = encode_features(
        frame,
        {"pos": "categorical", "number": "categorical", "tense": "categorical", "position": "numeric"},
        {"number": {"none"}, "tense": {"none"}},
    )
    coded = indicator_coding(table)
    assert coded.names == ("pos=DET", "pos=NOUN", "pos=VERB", "number", "tense", "position")
    assert coded.groups == ("pos", "pos", "pos", "number", "tense", "position")
    assert coded.feature_names == ("pos", "number", "tense", "position")
    assert coded.feature_kinds == ("categorical", "categorical", "categorical", "numeric")
    assert coded.group_columns() == [[0, 1, 2], [3], [4], [5]]
    np.testing.assert_array_equal(coded.values[:, :3], [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]])
    # two-valued features keep their one column (its undefined values too); numeric ones are unchanged
    np.testing.assert_array_equal(coded.values[:, 3:], table.values[:, 1:])
    values, categorical = feature_tensors(coded)
    first, second = torch.tensor([0, 0, 1]), torch.tensor([1, 4, 3])
    differences = pair_differences(values, categorical, first, second).numpy()
    np.testing.assert_array_equal(differences[:, :3], [[1, 1, 0], [0, 0, 0], [0, 0, 0]])  # DET-NOUN: two columns
    np.testing.assert_array_equal(group_differences(differences, coded)[:, 0], [1, 0, 0])  # = equality coding
    assert coded.subset(np.array([0, 2])).groups == coded.groups


def test_undefined_values_stay_undefined_in_every_indicator():
    frame = pd.DataFrame({"role": ["subject", "none", "object", "verb"]})
    coded = indicator_coding(encode_features(frame, {"role": "categorical"}, {"role": {"none"}}))
    assert coded.names == ("role=object", "role=subject", "role=verb")
    assert (coded.values[1] == UNDEFINED_CODE).all() and (coded.values[[0, 2, 3]] >= 0).all()
    with pytest.raises(ValueError, match="already coded"):
        indicator_coding(coded)


def unequal_classes(n: int = 360, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A 4-valued feature whose values sit at 0, 1, 2 and 6 on a line (not equidistant), plus a binary one."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"cls": rng.integers(0, 4, n).astype(str), "flag": rng.integers(0, 2, n).astype(str)})
    place = np.array([0.0, 1.0, 2.0, 6.0])[frame["cls"].astype(int)]
    vectors = np.stack([place, 1.5 * frame["flag"].astype(int)], axis=1)
    return frame, vectors + 0.2 * rng.standard_normal(vectors.shape)


def test_indicators_express_unequal_distances_between_a_features_values():
    frame, vectors = unequal_classes()
    table = encode_features(frame, {"cls": "categorical", "flag": "categorical"})
    equality = fit_layer(table, vectors, SETTINGS)
    indicators = fit_layer(indicator_coding(table), vectors, SETTINGS)
    assert indicators.spearman.mean() > equality.spearman.mean() + 0.1
    # reported per feature: the weight of "cls" is the sum of its four columns', importance permutes them together
    assert indicators.features == ("cls", "flag") and indicators.weights.shape == (3, 2)
    assert indicators.columns == ("cls=0", "cls=1", "cls=2", "cls=3", "flag")
    np.testing.assert_allclose(indicators.weights[:, 0], indicators.column_weights[:, :4].sum(axis=1))
    assert indicators.importances.shape == (3, SETTINGS.n_permutations, 2)
    assert (indicators.importances.mean(axis=(0, 1)) > 0.05).all()
    # the value far from the others (6) gets the largest weight
    assert np.argmax(indicators.column_weights[:, :4].mean(axis=0)) == 3
    table_rows = profile_table(indicators, "planted", 0)
    assert set(table_rows["feature"]) == {"cls", "flag"}


def test_columns_of_one_feature_are_not_reported_as_correlated(caplog):
    frame, _ = unequal_classes()
    coded = indicator_coding(encode_features(frame, {"cls": "categorical", "flag": "categorical"}))
    with caplog.at_level(logging.WARNING, logger="thinkalike.mlem.fit"):
        assert warn_correlated(coded, MLEMSettings(correlation_warning=0.3), "planted") == []
    assert "correlated" not in caplog.text
