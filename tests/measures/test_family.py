"""Family summaries: intra-model similarity, layers by relative depth, robust z-scores with a planted outlier."""

import numpy as np
import pytest

from thinkalike.measures.scaling_summaries import mean_off_diagonal, outliers, relative_depth_layers, robust_z


def test_mean_off_diagonal_leaves_out_the_diagonal():
    matrix = np.array([[1.0, 0.2, 0.4], [0.2, 1.0, 0.6], [0.4, 0.6, 1.0]])
    assert mean_off_diagonal(matrix) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="square matrix"):
        mean_off_diagonal(np.ones((2, 3)))


def test_relative_depth_picks_the_same_fraction_of_every_depth():
    assert relative_depth_layers(6, [0, 0.25, 0.5, 1]) == [0, 2, 3, 6]
    assert relative_depth_layers(32, [0.25]) == [8] and relative_depth_layers(16, [0.25]) == [4]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        relative_depth_layers(4, [1.5])


def test_a_planted_outlier_is_the_only_member_flagged():
    rng = np.random.default_rng(0)
    family = {f"m{i}": 0.80 + rng.normal(0, 0.01) for i in range(6)}
    assert outliers(family) == []
    family["odd"] = 0.55
    scores = robust_z(family)
    assert scores["odd"] < -3.5 and all(abs(z) < 3.5 for name, z in scores.items() if name != "odd")
    assert outliers(family) == ["odd"]
    # against numpy's median and MAD directly
    values = np.array(list(family.values()))
    mad = np.median(np.abs(values - np.median(values)))
    assert scores["odd"] == pytest.approx((0.55 - np.median(values)) / (1.4826 * mad))


def test_a_family_without_spread_flags_any_different_member():
    assert robust_z({"a": 1.0, "b": 1.0, "c": 1.0, "d": 2.0}) == {"a": 0.0, "b": 0.0, "c": 0.0, "d": np.inf}
    with pytest.raises(ValueError, match="at least 3"):
        robust_z({"a": 1.0, "b": 2.0})


def test_the_depth_band_mean_takes_the_cells_of_both_models_in_the_band():
    from thinkalike.measures.scaling_summaries import depth_band_mean

    # 3 blocks (depths 0, 1/3, 2/3, 1) against 2 blocks (0, 1/2, 1): band [0.25, 0.75] holds rows 1, 2 and column 1
    matrix = np.arange(12, dtype=float).reshape(4, 3)
    assert depth_band_mean(matrix, 0.25, 0.75) == np.mean([matrix[1, 1], matrix[2, 1]])
    assert depth_band_mean(matrix, 0.0, 1.0) == matrix.mean()
    matrix[1, 1] = np.nan  # a NaN cell is left out
    assert depth_band_mean(matrix, 0.25, 0.75) == matrix[2, 1]
    with pytest.raises(ValueError, match="relative depth"):
        depth_band_mean(np.ones((3, 3)), 0.6, 0.7)  # depths 0, 0.5, 1: nothing in the band
    with pytest.raises(ValueError, match="low <= high"):
        depth_band_mean(np.ones((3, 3)), 0.8, 0.2)
