"""calibrate: permutation nulls of the reported statistics (cell, matched_mean, best), z and p.

Independent random "models" (Gaussian tokens; within a model each layer a step of a random walk
from the previous one, corr ρ = 0.8) at widths 8 and 64 and depths 2 and 6, n = 120 tokens,
P = 30 permutations, four cheap measures (linear_predictivity with 3 folds to keep the file
under a few seconds). Under independence the observed table is exchangeable with the permuted
ones, so z ≈ N(0, 1)-like and p is uniform on {1/31, …, 1}; the raw statistics are not.

How the thresholds were chosen: this file's null experiment (``null_runs`` at data seeds
1000 + s, permutation seed s) was repeated for s = 0..99. Over those 100 runs:

- the mean of the 32 calibrated z (4 combos × 4 measures × {matched_mean, best}) had sd 0.34,
  range −0.84..+0.85 (so the brief's "< 0.7" would fail about one seed in 25): bound 1.4
  (≈ 4 sd, 0.55 above the worst seen);
- the mean z of one (width, depth) combo (8 strongly correlated values) had sd 0.65, worst
  |·| 2.32: bound 3.0;
- the mean of the 320 per-cell z had sd 0.24, worst |·| 0.67: bound 1.0;
- single |z| reached 5.66 (a P = 30 null's std is itself noisy): bound 7;
- the mean of the 32 p-values lay in 0.28..0.77 (sd 0.09): bounds 0.15..0.85. ("All p >
  0.01" holds by construction at P = 30: the smallest possible p is 1/31.)
- inflation, over seeds 0..19 (0..99 for the depth effect): the per-cell z at the observed
  best pair (a z that ignores the search over pairs) exceeded the calibrated z of best by
  0.99..2.0 on average over the depth-6 combos: bound 0.5. The best null mean of cka and
  mutual_knn grew from depth 2 to 6 by at least 0.0076 and exceeded the matched_mean's by
  at least 0.018: bound > 0. Procrustes' matched_mean distance fell from width 8 to 64 by
  at least 0.31 (bound 0.2), at least 21.8 null sds (bound 10), while the two calibrated z
  differed by at most 3.18 (bound 5, ≈ 3.5 sd of a difference of two unit-variance z).
"""

from __future__ import annotations

import functools
import logging
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from thinkalike.measures import calibration
from thinkalike.measures.calibration import COLUMNS, NO_LAYER, calibrate, null_permutations
from thinkalike.measures.distances import match_layers_by_relative_depth
from thinkalike.measures.layerwise import measure_table
from thinkalike.measures.registry import MEASURE_NAMES, MEASURES

MEASURES_CHEAP = ["cka", "procrustes", "mutual_knn", "linear_predictivity"]
OPTIONS_CHEAP = {"linear_predictivity": {"n_folds": 3}}
N = 120
P = 30
COMBOS = ((8, 2), (8, 6), (64, 2), (64, 6))  # (width, depth)
SMALL_OPTIONS = {
    "mutual_knn": {"k": 3},
    "cknna": {"k": 4},
    "knn_jaccard": {"k": 3},
    "linear_predictivity": {"n_folds": 3},
}


def random_model(rng: np.random.Generator, n: int, width: int, depth: int, rho: float = 0.8) -> list[np.ndarray]:
    """Layers h₀ ~ N(0, I), h_{l+1} = ρ·h_l + sqrt(1 − ρ²)·ε (tokens iid, layers correlated)."""
    layer = rng.standard_normal((n, width))
    layers = [layer]
    for _ in range(depth - 1):
        layer = rho * layer + math.sqrt(1.0 - rho**2) * rng.standard_normal((n, width))
        layers.append(layer)
    return layers


@functools.cache
def null_runs(seed: int = 0) -> dict[tuple[int, int], calibration.CalibrationResult]:
    """Two independent models per (width, depth), calibrated (the experiment the docstring describes)."""
    rng = np.random.default_rng(1000 + seed)
    runs = {}
    for width, depth in COMBOS:
        a, b = random_model(rng, N, width, depth), random_model(rng, N, width, depth)
        runs[width, depth] = calibrate(a, b, MEASURES_CHEAP, OPTIONS_CHEAP, n_permutations=P, seed=seed)
    return runs


def row(scores: pd.DataFrame, name: str, statistic: str) -> pd.Series:
    rows = scores[(scores.measure == name) & (scores.statistic == statistic)]
    assert len(rows) == 1
    return rows.iloc[0]


def small_models(seed: int = 3, n: int = 40) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    a = [rng.standard_normal((n, d)) for d in (5, 7, 4)]
    b = [a[0][:, :3] @ rng.standard_normal((3, 6)) + rng.standard_normal((n, 6)), rng.standard_normal((n, 8))]
    return a, b


# --------------------------------------------------------------------------- independent models


def test_raw_statistics_inflate_with_width_and_depth():
    runs = null_runs()
    for depth in (2, 6):
        # Procrustes distance of independent Gaussians shrinks with width (similarity ~ sqrt(d/n))
        narrow, wide = (row(runs[w, depth].scores, "procrustes", "matched_mean") for w in (8, 64))
        assert wide.observed < narrow.observed - 0.2
        assert wide.null_mean < narrow.null_mean - 0.2
        assert (narrow.observed - wide.observed) / narrow.null_std > 10  # far outside one null's spread
        assert abs(narrow.z - wide.z) < 5  # ... while the calibrated scores stay comparable
    for width in (8, 64):
        for name in ("cka", "mutual_knn"):  # the maximum over 36 pairs exceeds that over 4
            shallow, deep = (row(runs[width, d].scores, name, "best") for d in (2, 6))
            assert deep.null_mean > shallow.null_mean
            assert deep.null_mean > row(runs[width, 6].scores, name, "matched_mean").null_mean


def test_best_needs_the_null_of_the_maximum():
    """The best pair's own per-cell z ignores the search over 36 pairs and is inflated; calibrated best is not."""
    gaps = []
    for width in (8, 64):
        scores = null_runs()[width, 6].scores
        for name in MEASURES_CHEAP:
            best = row(scores, name, "best")
            cells = scores[(scores.measure == name) & (scores.statistic == "cell")]
            cell = cells[(cells.layer_a == best.layer_a) & (cells.layer_b == best.layer_b)].iloc[0]
            assert cell.observed == best.observed
            gaps.append(cell.z - best.z)
    assert np.mean(gaps) > 0.5


def test_independent_models_have_calibrated_scores_consistent_with_zero():
    summary = []
    cell_z = []
    for (width, depth), run in null_runs().items():
        scores = run.scores
        assert list(scores.columns) == list(COLUMNS)
        assert (scores.n_permutations == P).all() and (scores.n_null == P).all()
        reported = scores[scores.statistic != "cell"]
        assert len(reported) == 2 * len(MEASURES_CHEAP)
        assert np.isfinite(reported.z).all()
        assert abs(reported.z.mean()) < 3.0, (width, depth, reported.z.tolist())
        summary.append(reported)
        cell_z.append(scores[scores.statistic == "cell"].z.to_numpy())
    reported = pd.concat(summary)
    assert abs(reported.z.mean()) < 1.4
    assert reported.z.abs().max() < 7.0
    assert (reported.p_value >= 1.0 / (P + 1)).all() and (reported.p_value <= 1.0).all()
    assert 0.15 < reported.p_value.mean() < 0.85
    assert abs(np.concatenate(cell_z).mean()) < 1.0


# --------------------------------------------------------------------------- planted similarity


def test_rotated_copy_is_far_above_chance():
    rng = np.random.default_rng(7)
    a = random_model(rng, N, 16, 3)
    rotation = np.linalg.qr(rng.standard_normal((16, 16)))[0]
    b = [layer @ rotation + 0.1 * rng.standard_normal(layer.shape) for layer in a]
    scores = calibrate(a, b, MEASURES_CHEAP, OPTIONS_CHEAP, n_permutations=P, seed=1).scores
    for name in MEASURES_CHEAP:
        for statistic in ("matched_mean", "best"):
            result = row(scores, name, statistic)
            assert result.z > 5, (name, statistic, result.z)  # distances too: the sign is flipped
            assert result.p_value == pytest.approx(1.0 / (P + 1), abs=0.0)
        best = row(scores, name, "best")
        assert best.layer_a == best.layer_b  # the matching layer of the copy
    assert row(scores, "procrustes", "matched_mean").observed < row(scores, "procrustes", "matched_mean").null_mean


# --------------------------------------------------------------------------- exactness and formulas


def test_observed_is_measure_table_and_nulls_are_the_seeded_permutations():
    a, b = small_models()
    result = calibrate(a, b, MEASURE_NAMES, SMALL_OPTIONS, n_permutations=3, seed=11)
    pd.testing.assert_frame_equal(result.observed, measure_table(a, b, MEASURE_NAMES, SMALL_OPTIONS))
    rng = np.random.default_rng(11)
    expected = np.stack([rng.permutation(40) for _ in range(3)])
    np.testing.assert_array_equal(result.permutations, expected)
    np.testing.assert_array_equal(null_permutations(40, 3, 11), expected)
    for p, permutation in enumerate(expected):
        table = measure_table(a, [layer[permutation] for layer in b], MEASURE_NAMES, SMALL_OPTIONS)
        np.testing.assert_allclose(
            result.null_cells[p], table.value.to_numpy().reshape(len(MEASURE_NAMES), 3, 2), rtol=0, atol=1e-12
        )  # B's preparations moved with the rows: equal to rounding
    cells = result.scores[result.scores.statistic == "cell"]
    np.testing.assert_array_equal(cells.observed.to_numpy(), result.observed.value.to_numpy())
    assert (
        cells[["measure", "layer_a", "layer_b"]]
        .reset_index(drop=True)
        .equals(result.observed[["measure", "layer_a", "layer_b"]])
    )

    again = calibrate(a, b, MEASURE_NAMES, SMALL_OPTIONS, n_permutations=3, seed=11)
    pd.testing.assert_frame_equal(again.scores, result.scores)
    np.testing.assert_array_equal(again.null_cells, result.null_cells)
    other = calibrate(a, b, MEASURE_NAMES, SMALL_OPTIONS, n_permutations=3, seed=12)
    assert not np.array_equal(other.permutations, result.permutations)
    assert not np.array_equal(other.null_cells, result.null_cells)
    pd.testing.assert_frame_equal(other.observed, result.observed)


def test_statistics_z_and_p_follow_the_formulas():
    a, b = small_models(seed=5)
    result = calibrate(a, b, MEASURE_NAMES, SMALL_OPTIONS, n_permutations=9, seed=2)
    pairs = match_layers_by_relative_depth(3, 2)
    assert pairs == [(0, 0), (2, 1)]
    scores = result.scores
    assert len(scores) == len(MEASURE_NAMES) * (3 * 2 + 2)
    for m, name in enumerate(MEASURE_NAMES):
        sign = 1.0 if MEASURES[name].kind == "similarity" else -1.0
        observed = result.observed[result.observed.measure == name].value.to_numpy().reshape(3, 2)
        null = result.null_cells[:, m]
        matched_null = np.mean([null[:, i, j] for i, j in pairs], axis=0)
        best_null = (sign * null).reshape(9, -1).max(axis=1) * sign
        np.testing.assert_array_equal(result.null_matched_mean[:, m], matched_null)
        np.testing.assert_array_equal(result.null_best[:, m], best_null)
        best_index = int(np.argmax(sign * observed))
        cases = [
            ("matched_mean", np.mean([observed[i, j] for i, j in pairs]), matched_null, (NO_LAYER, NO_LAYER)),
            ("best", observed.ravel()[best_index], best_null, divmod(best_index, 2)),
            ("cell", observed[2, 0], null[:, 2, 0], (2, 0)),
        ]
        for statistic, value, values, (i, j) in cases:
            rows = scores[
                (scores.measure == name)
                & (scores.statistic == statistic)
                & (scores.layer_a == i)
                & (scores.layer_b == j)
            ]
            assert len(rows) == 1, (name, statistic)
            got = rows.iloc[0]
            assert got.observed == pytest.approx(value, rel=1e-12, abs=1e-15)
            assert got.null_mean == pytest.approx(values.mean(), rel=1e-12, abs=1e-15)
            assert got.null_std == pytest.approx(values.std(ddof=1), rel=1e-12, abs=1e-15)
            assert got.z == pytest.approx(sign * (value - values.mean()) / values.std(ddof=1), rel=1e-9)
            assert got.p_value == (1 + np.sum(sign * values >= sign * value)) / 10
            assert got.n_permutations == 9 and got.n_null == 9


def test_undefined_cells_propagate_to_the_statistics(caplog):
    rng = np.random.default_rng(0)
    a = [rng.standard_normal((30, 4)) for _ in range(2)]
    b = [rng.standard_normal((30, 4)), np.ones((30, 4))]  # layer 1 of b: constant, CKA undefined
    with caplog.at_level(logging.WARNING):
        scores = calibrate(a, b, ["cka"], n_permutations=4, seed=0).scores
    assert any("calibrate null, cka: in 4 of 4 permutations" in r.getMessage() for r in caplog.records)
    cells = scores[scores.statistic == "cell"]
    defined = cells.layer_b == 0
    assert np.isfinite(cells[defined].z).all() and (cells[defined].n_null == 4).all()
    assert cells[~defined].z.isna().all() and cells[~defined].p_value.isna().all()
    assert (cells[~defined].n_null == 0).all()
    for statistic in ("matched_mean", "best"):
        result = row(scores, "cka", statistic)
        assert math.isnan(result.observed) and math.isnan(result.z) and math.isnan(result.p_value)
    assert row(scores, "cka", "best").layer_a == NO_LAYER


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_permutations": 1}, "n_permutations: 1 must be an integer ≥ 2"),
        ({"n_permutations": 2.0}, "n_permutations: 2.0"),
        ({"n_permutations": True}, "n_permutations: True"),
        ({"seed": -1}, "seed: -1 must be a non-negative integer"),
        ({"seed": 0.5}, "seed: 0.5"),
        ({"layers_b": None}, "layers_b: required"),
        ({"layers_b": "short"}, "layers_b[1]: has 39 tokens but layers_a[0] has 40"),
        ({"measures": ["cka", "nope"]}, "measures: unknown measure 'nope'"),
        ({"options": {"mutual_knn": {"k": 40}}}, "measures.options.mutual_knn.k: 40 must be < 40 tokens"),
    ],
)
def test_bad_input_is_named_before_any_work(monkeypatch, change, message):
    a, b = small_models()
    arguments = {"layers_b": b, "measures": ["cka", "mutual_knn"], "options": None, "n_permutations": 3, "seed": 0}
    arguments.update(change)
    if arguments["layers_b"] == "short":
        arguments["layers_b"] = [b[0], b[1][:-1]]

    def no_work(*args, **kwargs):
        raise AssertionError("a table was computed before the input was checked")

    monkeypatch.setattr(calibration, "measure_table", no_work)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as error:
            calibrate(a, arguments.pop("layers_b"), arguments.pop("measures"), arguments.pop("options"), **arguments)
    assert message in str(error.value)
