"""MLEM recovers planted feature weights; its profile is invariant to rotations and uniform scaling; seeded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import special_ortho_group, weightedtau

from tests.mlem.planted import BILINEAR, bilinear_stimuli, bilinear_weights, planted_stimuli, true_scales
from thinkalike.mlem.features import encode_features
from thinkalike.mlem.fit import (
    ALL_FOLDS,
    MLEMSettings,
    fit_layer,
    heldout_pairs,
    neural_distances,
    profile_table,
)
from thinkalike.mlem.model import MetricModel

SETTINGS = MLEMSettings(pairs_per_step=512, n_folds=3, n_permutations=5, heldout_pairs=2000)


@pytest.fixture(scope="module")
def planted():
    frame, vectors = planted_stimuli()
    features = encode_features(frame, {name: "categorical" for name in frame})
    return features, vectors, fit_layer(features, vectors, SETTINGS)


def test_planted_weights_and_importances_are_recovered(planted):
    features, _, fit = planted
    truth = true_scales(features.names)
    weights = fit.weights.mean(axis=0)
    importance = fit.importances.reshape(-1, features.n_features).mean(axis=0)
    assert weightedtau(weights, truth).statistic >= 0.9
    assert weightedtau(importance, truth).statistic >= 0.9
    assert list(np.argsort(-weights)[:4]) == list(np.argsort(-truth)[:4])
    assert fit.spearman.min() > 0.8


def test_unused_feature_importance_interval_covers_zero(planted):
    features, _, fit = planted
    table = profile_table(fit, "planted", 0)
    overall = table[table["fold"] == ALL_FOLDS].set_index("feature")
    assert overall.loc["unused", "ci_low"] <= 0 <= overall.loc["unused", "ci_high"]
    used = overall.drop(index="unused")
    assert (used["ci_low"] > 0).all()  # every planted feature matters
    assert len(table) == features.n_features * (SETTINGS.n_folds + 1)
    assert table["spearman_heldout"].between(-1, 1).all()


def test_profile_is_invariant_to_rotation_and_uniform_scaling(planted):
    features, vectors, fit = planted
    rotation = special_ortho_group.rvs(vectors.shape[1], random_state=1)
    moved = fit_layer(features, 3.7 * vectors @ rotation, SETTINGS)
    np.testing.assert_allclose(moved.weights, fit.weights, atol=1e-4)
    np.testing.assert_allclose(moved.importances, fit.importances, atol=1e-4)
    np.testing.assert_allclose(moved.spearman, fit.spearman, atol=1e-6)


def test_fit_is_deterministic(planted):
    features, vectors, fit = planted
    again = fit_layer(features, vectors, SETTINGS)
    np.testing.assert_array_equal(again.weights, fit.weights)
    np.testing.assert_array_equal(again.importances, fit.importances)


def test_interaction_model_is_psd_with_unit_frobenius_norm(planted):
    features, vectors, _ = planted
    fit = fit_layer(
        features,
        vectors,
        MLEMSettings(interactions=True, pairs_per_step=512, n_folds=2, n_permutations=2, max_steps=150),
    )
    for matrix in fit.matrices:
        np.testing.assert_allclose(matrix, matrix.T, atol=1e-6)
        assert np.linalg.eigvalsh(matrix).min() > -1e-6
        assert np.linalg.norm(matrix) == pytest.approx(1.0, abs=1e-5)
    assert weightedtau(fit.weights.mean(axis=0), true_scales(features.names)).statistic >= 0.9
    assert fit.spearman.min() > 0.8


def test_metric_model_formulas():
    model = MetricModel(3)
    with torch.no_grad():
        model.theta.copy_(torch.tensor([0.0, 1.0, -2.0]))
    softplus = np.log1p(np.exp([0.0, 1.0, -2.0]))
    expected = softplus / np.linalg.norm(softplus)
    np.testing.assert_allclose(model.weights().detach().numpy(), expected, rtol=1e-6)
    differences = torch.tensor([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(model(differences).detach().numpy(), [expected[0] + 0.25 * expected[2], 0.0], rtol=1e-6)
    full = MetricModel(2, interactions=True)
    with torch.no_grad():
        full.factor.copy_(torch.tensor([[1.0, 0.0], [2.0, 1.0]]))
    gram = np.array([[1.0, 2.0], [2.0, 5.0]]) / np.linalg.norm([[1.0, 2.0], [2.0, 5.0]])
    x = np.array([0.5, 1.0])
    assert float(full(torch.tensor(x[None], dtype=torch.float32)).detach()) == pytest.approx(x @ gram @ x, rel=1e-6)


def test_neural_distance_is_min_max_scaled_squared_euclidean():
    vectors = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0]])
    first, second = torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])
    euclidean = np.array([5.0, 1.0, np.hypot(2, 4)])
    expected = ((euclidean - 1.0) / 4.0) ** 2
    np.testing.assert_allclose(neural_distances(vectors, first, second).numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize(("n", "m"), [(5, 100), (40, 50)])
def test_heldout_pairs_are_distinct_pairs_of_distinct_stimuli(n, m):
    first, second = heldout_pairs(n, m, np.random.default_rng(0))
    assert len(first) == min(m, n * (n - 1) // 2)
    assert (first < second).all() and (second < n).all()
    assert len(set(zip(first.tolist(), second.tolist()))) == len(first)


def test_estimated_pairs_per_step_grows_with_the_required_stability(planted):
    from thinkalike.mlem.fit import estimate_pairs_per_step

    features, _, _ = planted
    loose = estimate_pairs_per_step(features, torch.Generator().manual_seed(0), start=64, threshold=0.2)
    tight = estimate_pairs_per_step(features, torch.Generator().manual_seed(0), start=64, threshold=0.03)
    assert 64 <= loose < tight <= 65536


def test_numeric_feature_weight_is_recovered_under_the_bilinear_form():
    """Neural distances that follow ``Δfᵀ W Δf`` (W diagonal, a numeric feature among categorical ones): the
    fitted normalised weights recover the planted ones, the numeric feature's within 0.05 (issue 17 §3.1;
    the former linear form ``Σ_k w_k Δf_k`` under-weighted it: 0.24 for a true 0.31). At a soft-rank strength of 4
    (conf/base's 1.0, near-hard ranks, recovers it less well here: 0.24 for the true 0.32)."""
    frame, vectors = bilinear_stimuli()
    kinds = {name: kind for name, (kind, _, _) in BILINEAR.items()}
    features = encode_features(frame, kinds)
    fit = fit_layer(
        features,
        vectors,
        MLEMSettings(pairs_per_step=1024, rank_strength=4.0, n_folds=3, n_permutations=2, heldout_pairs=2000),
    )
    weights = fit.weights.mean(axis=0)
    truth = bilinear_weights(features.names)
    numeric = features.names.index("x")
    assert abs(weights[numeric] - truth[numeric]) <= 0.05, (weights, truth)
    np.testing.assert_allclose(weights, truth, atol=0.08)
    assert fit.spearman.min() > 0.8


@pytest.mark.parametrize("ties", [False, True])
def test_average_ranks_equal_scipy_rankdata(ties):
    """The fit's target ranks are scipy's average ranks exactly, ties included (identical stimuli give equal
    distances)."""
    from scipy.stats import rankdata

    from thinkalike.mlem.fit import average_ranks

    rng = np.random.default_rng(7)
    values = rng.integers(0, 30, 500).astype(np.float32) if ties else rng.normal(size=500).astype(np.float32)
    ranks = average_ranks(torch.from_numpy(values))
    assert ranks.dtype == torch.float64
    np.testing.assert_array_equal(ranks.numpy(), rankdata(values))
    assert (np.unique(values).size < values.size) == ties
    with pytest.raises(ValueError, match="values: a 1-D tensor"):
        average_ranks(torch.zeros(2, 2))


def test_heldout_spearman_equals_scipy_and_is_zero_on_a_constant_side():
    from scipy.stats import spearmanr

    from thinkalike.mlem.fit import _centred_ranks, _spearman

    rng = np.random.default_rng(8)
    x, y = rng.normal(size=400).astype(np.float32), rng.integers(0, 40, 400).astype(np.float32)  # y with ties
    y = y + 0.5 * x
    assert _spearman(x, _centred_ranks(y)) == pytest.approx(spearmanr(x, y).statistic, abs=1e-15)
    assert _spearman(np.ones(400, dtype=np.float32), _centred_ranks(y)) == 0.0 and _centred_ranks(np.ones(3)) is None
