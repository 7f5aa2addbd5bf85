"""Grounding tests of the measures (thinkalike.measures.grounding) on planted cases whose answer is known."""

import numpy as np
import pytest

from thinkalike.measures.grounding import (
    grounding_row,
    layer_monotonicity,
    null_level,
    sensitivity_score,
    sensitivity_to_components,
    separation_auprc,
    specificity_auprc,
    without_top_components,
)
from thinkalike.measures.registry import MEASURES


def _stream(layers: int = 6, n: int = 200, d: int = 16, seed: int = 0) -> list[np.ndarray]:
    """A residual-stream-like model: each layer adds fresh noise to the previous one."""
    rng = np.random.default_rng(seed)
    return list(rng.normal(size=(layers, n, d)).cumsum(axis=0))


def _intra(name: str, layers: list[np.ndarray]) -> np.ndarray:
    return np.array([[MEASURES[name](a, b) for b in layers] for a in layers])


@pytest.mark.parametrize("name", ["cka", "procrustes", "mutual_knn"])
def test_a_residual_stream_is_monotone_for_similarities_and_distances_alike(name):
    matrix = _intra(name, _stream())
    assert layer_monotonicity(matrix, MEASURES[name].kind) > 0.8
    shuffled = np.random.default_rng(1).permutation(6)  # the same layers in a random order: no monotonicity
    assert layer_monotonicity(matrix[np.ix_(shuffled, shuffled)], MEASURES[name].kind) < 0.8


def test_monotonicity_is_exact_on_a_matrix_that_falls_with_distance_and_oriented_by_kind():
    distance = np.abs(np.subtract.outer(np.arange(5), np.arange(5))).astype(float)
    assert layer_monotonicity(np.exp(-distance), "similarity") == pytest.approx(1.0)
    assert layer_monotonicity(distance, "distance") == pytest.approx(1.0)
    assert layer_monotonicity(distance, "similarity") == pytest.approx(-1.0)
    assert np.isnan(layer_monotonicity(np.eye(2), "similarity"))
    with pytest.raises(ValueError, match="matrix: an intra-model"):
        layer_monotonicity(np.ones((2, 3)), "similarity")
    with pytest.raises(ValueError, match="kind"):
        layer_monotonicity(distance, "metric")


def test_specificity_is_the_average_precision_of_replicas_above_other_architectures():
    same = [True, True, False, False, False]
    assert specificity_auprc([0.9, 0.8, 0.5, 0.4, 0.3], same, "similarity") == (pytest.approx(1.0), 0.4)
    assert specificity_auprc([0.1, 0.2, 0.5, 0.6, 0.7], same, "distance")[0] == pytest.approx(1.0)
    worst, chance = specificity_auprc([0.1, 0.2, 0.5, 0.6, 0.7], same, "similarity")
    # positives ranked last: precision 1/4 at the first, 2/5 at the second
    assert worst == pytest.approx((1 / 4 + 2 / 5) / 2) and worst < chance + 0.1
    with pytest.raises(ValueError, match="same_architecture .*: needs both"):
        specificity_auprc([0.1, 0.2], [True, True], "similarity")


def test_removing_top_components_removes_exactly_them():
    x = _stream()[3]
    rest = without_top_components(x, 2)
    _, s, vt = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    np.testing.assert_allclose(rest @ vt[:2].T, 0.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.svd(rest, compute_uv=False)[:14], s[2:], rtol=1e-9)
    with pytest.raises(ValueError, match="k: 16 must be in"):
        without_top_components(x, 16)


@pytest.mark.parametrize("name", ["cka", "procrustes", "linear_predictivity"])
def test_measures_that_see_variance_fall_step_by_step_as_components_go(name):
    x = np.random.default_rng(2).normal(size=(150, 12)) * np.linspace(3, 0.5, 12)  # distinct component variances
    assert sensitivity_to_components(x, MEASURES[name], MEASURES[name].kind, max_components=6) > 0.9


def test_a_row_keeps_each_score_beside_its_chance():
    row = grounding_row("cka", "similarity", monotonicity=0.9, specificity=(0.8, 0.4))
    assert row == {
        "measure": "cka",
        "kind": "similarity",
        "monotonicity": 0.9,
        "monotonicity_chance": 0.0,
        "specificity": 0.8,
        "specificity_chance": 0.4,
    }


def test_sensitivity_is_one_for_a_falling_sequence_and_oriented_by_kind():
    assert sensitivity_score([1.0, 0.8, 0.5, 0.1], "similarity") == pytest.approx(1.0)
    assert sensitivity_score([0.0, 0.2, 0.5, 0.9], "distance") == pytest.approx(1.0)
    assert sensitivity_score([1.0, 0.5, 0.8, 0.1], "similarity") == pytest.approx(0.8)
    assert np.isnan(sensitivity_score([1.0, 0.5], "similarity")) and np.isnan(
        sensitivity_score([1, np.nan, 0], "similarity")
    )


def test_trained_vs_untrained_ranks_replica_pairs_above_untrained_ones():
    replicas = [True, True, True, False, False, False]
    assert separation_auprc([0.9, 0.8, 0.85, 0.3, 0.2, 0.4], replicas, "similarity") == (pytest.approx(1.0), 0.5)
    assert separation_auprc([0.9, 0.3, 0.85, 0.8, 0.2, 0.4], replicas, "similarity")[0] < 1.0
    with pytest.raises(ValueError, match="untrained: needs both"):
        separation_auprc([0.1, 0.2], [False, False], "similarity", what="untrained")


def test_distances_read_as_the_similarity_they_are_computed_from():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(60, 7)), rng.normal(size=(60, 5)) + rng.normal(size=(60, 1))
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    nuclear = np.linalg.svd((xc / np.linalg.norm(xc)).T @ (yc / np.linalg.norm(yc)), compute_uv=False).sum()
    for name in ("procrustes", "angular_shape"):  # angular_shape at its default alpha = 1
        assert MEASURES[name].alikeness(MEASURES[name](x, y)) == pytest.approx(nuclear, rel=1e-10)
        assert MEASURES[name].alikeness(MEASURES[name](x, x)) == pytest.approx(1.0)
    assert MEASURES["cka"].alikeness(0.3) == 0.3


def test_the_null_shows_which_measures_are_biased_on_unrelated_inputs():
    """Independent Gaussian inputs (n = 120 tokens, 40 dimensions each): unbiased CKA sits at 0, while mean CCA —
    which finds the best of 40 directions in each input — is far above it (its known small-sample bias)."""
    rng = np.random.default_rng(4)
    pairs = [(rng.normal(size=(120, 40)), rng.normal(size=(120, 40))) for _ in range(5)]
    level = {
        name: null_level([MEASURES[name].alikeness(MEASURES[name](x, y)) for x, y in pairs])
        for name in ("cka", "mean_cca", "procrustes")
    }
    assert abs(level["cka"]) < 0.02
    assert level["mean_cca"] > 0.4 and level["procrustes"] > 0.4
    assert np.isnan(null_level([])) and np.isnan(null_level([0.1, np.nan]))
