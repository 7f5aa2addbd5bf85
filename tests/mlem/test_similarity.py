"""Feature-based and RSA layer similarity, and MDS maps: known properties and values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr, weightedtau

from thinkalike.mlem.similarity import (
    feature_similarity,
    finite_rows,
    importance_profiles,
    long_similarity,
    matrix_from_long,
    mds_coordinates,
    pair_distances,
    rsa_similarity,
    sample_pairs,
)


@pytest.fixture
def layers():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((4, 60, 8))  # 4 layers, 60 stimuli
    vectors[1] = vectors[0] * 2.0 + 0.01 * rng.standard_normal((60, 8))
    return vectors


def test_rsa_of_a_layer_with_itself_is_one_and_matrix_is_symmetric(layers):
    first, second = sample_pairs(60, 500, seed=0)
    assert (first != second).all()
    distances = pair_distances(layers, first, second)
    matrix = rsa_similarity(distances)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[0, 1] > 0.99  # layer 1 is a scaled copy of layer 0
    assert matrix[0, 2] == pytest.approx(spearmanr(distances[0], distances[2]).statistic)
    np.testing.assert_allclose(distances[0, 0], np.linalg.norm(layers[0, first[0]] - layers[0, second[0]]))


@pytest.mark.parametrize("n_layers", [1, 2, 3])
def test_rsa_matrix_is_square_for_any_number_of_layers(layers, n_layers):
    """Two layers in all (e.g. two models with one chosen layer each) gave scipy's scalar, not a 2 x 2 matrix."""
    first, second = sample_pairs(60, 500, seed=0)
    distances = pair_distances(layers[:n_layers], first, second)
    matrix = rsa_similarity(distances)
    assert matrix.shape == (n_layers, n_layers)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    if n_layers == 2:
        assert matrix[0, 1] == matrix[1, 0] == pytest.approx(spearmanr(distances[0], distances[1]).statistic)


def test_feature_similarity_is_weighted_tau_symmetric_with_unit_diagonal():
    profiles = np.random.default_rng(1).random((5, 6))
    matrix = feature_similarity(profiles)
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[1, 3] == pytest.approx(weightedtau(profiles[1], profiles[3]).statistic)
    assert feature_similarity(np.stack([profiles[0], 2 * profiles[0] + 1]))[0, 1] == pytest.approx(1.0)


def test_mds_separates_two_blocks_of_layers():
    similarity = np.full((6, 6), 0.1)
    similarity[:3, :3] = similarity[3:, 3:] = 0.9
    np.fill_diagonal(similarity, 1.0)
    xy = mds_coordinates(similarity, seed=0)
    within = np.linalg.norm(xy[0] - xy[1])
    between = np.linalg.norm(xy[0] - xy[4])
    assert between > 3 * within
    np.testing.assert_allclose(mds_coordinates(similarity, seed=0), xy)  # seeded


def test_long_table_round_trip_and_finite_rows():
    labels = [("a", 0), ("a", 1), ("b", 0)]
    matrix = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, np.nan], [0.2, np.nan, 1.0]])
    table = long_similarity(matrix, labels)
    assert len(table) == 9
    np.testing.assert_array_equal(matrix_from_long(table, labels), matrix)
    keep = finite_rows(matrix)
    assert keep.sum() == 2 and np.isfinite(matrix[np.ix_(keep, keep)]).all()


def test_importance_profiles_fill_a_dropped_feature_with_zero():
    rows = [
        {"model": "m", "layer": layer, "feature": feature, "importance": value, "fold": -1}
        for layer, values in [(1, {"x": 0.2, "y": 0.1}), (0, {"x": 0.3, "y": 0.0})]
        for feature, value in values.items()
    ]
    rows.append({"model": "n", "layer": 0, "feature": "x", "importance": 0.5, "fold": -1})
    rows.append({"model": "n", "layer": 0, "feature": "x", "importance": 9.0, "fold": 0})  # a fold row: ignored
    labels, matrix, features = importance_profiles(pd.DataFrame(rows))
    assert labels == [("m", 0), ("m", 1), ("n", 0)] and features == ["x", "y"]
    np.testing.assert_allclose(matrix, [[0.3, 0.0], [0.2, 0.1], [0.5, 0.0]])
