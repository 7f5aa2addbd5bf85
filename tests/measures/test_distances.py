"""arccos-CKA distances, relative-depth matching and group summaries."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from thinkalike.measures.distances import (
    arccos_cka,
    group_distance_table,
    layer_cka_curves,
    match_layers_by_relative_depth,
    matched_summary,
    mean_interval,
    model_distance,
    product_distance,
)


def test_arccos_cka_values_and_clipping():
    assert arccos_cka(1.0) == 0.0
    assert arccos_cka(1.0 + 1e-12) == 0.0
    assert arccos_cka(-1.0 - 1e-12) == pytest.approx(math.pi)
    assert arccos_cka(0.0) == pytest.approx(math.pi / 2)
    np.testing.assert_allclose(arccos_cka(np.array([1.0, 0.5, np.nan])), [0.0, math.pi / 3, np.nan])


def test_product_distance_known_value():
    assert product_distance([math.cos(0.3), math.cos(0.4)]) == pytest.approx(0.5)
    assert product_distance(np.ones(5)) == 0.0


@pytest.mark.parametrize(
    "la,lb,expected",
    [
        (3, 5, [(0, 0), (1, 2), (2, 4)]),
        (4, 4, [(0, 0), (1, 1), (2, 2), (3, 3)]),
        (5, 3, [(0, 0), (2, 1), (4, 2)]),
        (3, 4, [(0, 0), (1, 2), (2, 3)]),  # 1·3/2 = 1.5 rounds half up
        (1, 3, [(0, 2)]),
    ],
)
def test_match_layers_by_relative_depth(la, lb, expected):
    assert match_layers_by_relative_depth(la, lb) == expected


def test_model_distance_uses_matched_cells():
    matrix = np.full((3, 5), 0.0)
    for i, j in [(0, 0), (1, 2), (2, 4)]:
        matrix[i, j] = math.cos(0.2 * (i + 1))
    expected = math.sqrt(0.2**2 + 0.4**2 + 0.6**2)
    assert model_distance(matrix) == pytest.approx(expected)
    assert model_distance(matrix.T) == pytest.approx(expected)


GROUPS = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B"}


def test_group_distance_table_square_and_long():
    models = list(GROUPS)
    rng = np.random.default_rng(0)
    values = rng.uniform(0.1, 1.0, (5, 5))
    values = (values + values.T) / 2
    np.fill_diagonal(values, 0.0)
    square = pd.DataFrame(values, index=models, columns=models)
    table = group_distance_table(square, GROUPS).set_index(["group_a", "group_b"])
    aa = [square.loc["a1", "a2"], square.loc["a1", "a3"], square.loc["a2", "a3"]]
    ab = [square.loc[a, b] for a in ("a1", "a2", "a3") for b in ("b1", "b2")]
    assert table.loc[("A", "A"), "mean"] == pytest.approx(np.mean(aa))
    assert table.loc[("A", "A"), "std"] == pytest.approx(np.std(aa, ddof=1))
    assert table.loc[("A", "B"), "n"] == 6 and table.loc[("A", "B"), "mean"] == pytest.approx(np.mean(ab))
    assert table.loc[("B", "B"), "n"] == 1 and np.isnan(table.loc[("B", "B"), "std"])
    assert list(table["kind"]) == ["within", "between", "within"]
    long = pd.DataFrame(
        [(a, b, square.loc[a, b]) for a in models for b in models if a < b], columns=["model_a", "model_b", "distance"]
    )
    pd.testing.assert_frame_equal(group_distance_table(long, GROUPS), table.reset_index())


def test_layer_cka_curves_t_and_percentile():
    mats = {
        ("a1", "a2"): np.diag([1.0, 0.8, 0.6]),
        ("a1", "a3"): np.diag([1.0, 0.6, 0.4]),
        ("a1", "a1"): np.eye(3),  # self pairs are skipped
        ("a1", "b1"): np.full((3, 5), 0.3),
    }
    curves = layer_cka_curves(mats, GROUPS)
    within = curves[(curves.group_a == "A") & (curves.group_b == "A")].set_index("relative_depth")
    assert list(within.index) == [0.0, 0.5, 1.0]
    assert within.loc[0.5, "mean"] == pytest.approx(0.7) and within.loc[0.5, "n"] == 2
    half = 12.706204736174707 * np.std([0.8, 0.6], ddof=1) / np.sqrt(2)  # t_{0.975, 1}
    assert within.loc[0.5, "ci_low"] == pytest.approx(0.7 - half)
    between = curves[curves.group_b == "B"]
    assert len(between) == 3 and between["n"].eq(1).all() and between["ci_low"].isna().all()
    pct = layer_cka_curves(mats, GROUPS, interval="percentile", confidence=0.5)
    pct = pct.set_index(["group_a", "group_b", "relative_depth"])
    assert pct.loc[("A", "A", 1.0), "ci_low"] == pytest.approx(0.45)
    grid = layer_cka_curves(mats, GROUPS, n_points=5)
    assert len(grid[grid.group_b == "A"]) == 5


# --------------------------------------------------------------------------- no quiet partial numbers


def test_a_nan_matched_layer_makes_mean_and_distance_nan_with_counts_and_warning():
    matrix = np.array([[0.9, 0.1], [0.2, np.nan]])
    with pytest.warns(RuntimeWarning, match=r"of 'x' vs 'y' is NaN at matched layer pair\(s\).*\[\(1, 1\)\]: 1 of 2"):
        summary = matched_summary(matrix, label="'x' vs 'y'")
    assert math.isnan(summary.mean_cka) and math.isnan(summary.distance)
    assert (summary.n_matched_layers, summary.n_finite_layers) == (2, 1)
    skipped = matched_summary(matrix, skip_undefined=True)
    assert skipped.mean_cka == pytest.approx(0.9) and skipped.distance == pytest.approx(math.acos(0.9))
    assert (skipped.n_matched_layers, skipped.n_finite_layers) == (2, 1)
    assert model_distance(matrix, skip_undefined=True) == pytest.approx(math.acos(0.9))
    assert math.isnan(matched_summary(np.full((2, 2), np.nan), skip_undefined=True).mean_cka)


def test_finite_matrix_summary_has_all_layers_and_no_warning():
    matrix = np.diag([1.0, 0.8, 0.6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = matched_summary(matrix)
    assert summary.mean_cka == pytest.approx(0.8) and summary.n_finite_layers == summary.n_matched_layers == 3
    assert summary.distance == pytest.approx(model_distance(matrix))


def test_group_distance_mean_is_nan_when_a_pair_is_nan_unless_skipped():
    long = pd.DataFrame(
        [("a1", "a2", 0.5), ("a1", "a3", np.nan), ("a2", "a3", 0.7)], columns=["model_a", "model_b", "distance"]
    )
    table = group_distance_table(long, GROUPS).iloc[0]
    assert math.isnan(table["mean"]) and (table["n"], table["n_finite"]) == (3, 2)
    skipped = group_distance_table(long, GROUPS, skip_undefined=True).iloc[0]
    assert skipped["mean"] == pytest.approx(0.6) and skipped["std"] == pytest.approx(np.std([0.5, 0.7], ddof=1))


# --------------------------------------------------------------------------- intervals of the curves


def test_t_interval_is_scipys_and_is_clipped_to_the_cka_range():
    mats = {("a1", "a2"): np.diag([0.98, 0.5]), ("a1", "a3"): np.diag([0.999, 0.7])}
    curves = layer_cka_curves(mats, GROUPS).set_index("relative_depth")
    values = np.array([0.98, 0.999])
    low, high = stats.t.interval(0.95, 1, loc=values.mean(), scale=values.std(ddof=1) / np.sqrt(2))
    assert high > 1.0  # what a t interval over 2 pairs gives (the old curves reported it)
    assert curves.loc[0.0, "ci_low"] == pytest.approx(low) and curves.loc[0.0, "ci_high"] == 1.0
    last = np.array([0.5, 0.7])
    expected = stats.t.interval(0.95, 1, loc=0.6, scale=last.std(ddof=1) / np.sqrt(2))
    assert expected[0] < -0.5 and curves.loc[1.0, "ci_low"] == pytest.approx(expected[0])
    assert curves.loc[1.0, "ci_high"] == 1.0  # expected[1] = 1.87
    biased = layer_cka_curves(mats, GROUPS, value_range=(0.0, 1.0)).set_index("relative_depth")
    assert biased.loc[1.0, "ci_low"] == 0.0
    assert ((curves["ci_low"] >= -1) & (curves["ci_high"] <= 1)).all()


def test_mean_interval_edge_cases():
    assert mean_interval(np.array([0.4, 0.4, 0.4]), 0.95, "t") == pytest.approx((0.4, 0.4, 0.4))
    mean, low, high = mean_interval(np.array([0.3]), 0.95, "t")
    assert mean == 0.3 and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(v) for v in mean_interval(np.array([0.3, np.nan]), 0.95, "t"))
    with pytest.raises(ValueError, match="value_range"):
        layer_cka_curves({}, GROUPS, value_range=(1.0, 0.0))
