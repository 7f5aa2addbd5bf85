"""measure_table against every registered measure called on each layer pair, and check_measures' messages.

The reference for each cell is the measure's own function, ``measure(name)(x, y, **options)``
(whose tests compare it with independent implementations); the table reaches it through the
per-layer preparations, shared between measures and reused across pairs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from thinkalike.measures.layerwise import COLUMNS, check_measures, measure_table
from thinkalike.measures.registry import MEASURE_NAMES, MEASURES, Measure, measure

N = 37
OPTIONS = {
    "angular_shape": {"alpha": 0.4},
    "svcca": {"keep": 0.9},
    "rsa": {"distance": "euclidean", "correlation": "pearson"},
    "mutual_knn": {"k": 3},
    "cknna": {"k": 4},
    "knn_jaccard": {"k": 3},
    "linear_predictivity": {"alphas": [0.1, 10.0], "n_folds": 3},
}


def layers(seed: int, widths: tuple[int, ...], n: int = N) -> list[np.ndarray]:
    """Residual-stream-like layers sharing a latent signal, with odd widths and offsets."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 3))
    stream = [latent @ rng.standard_normal((3, widths[0])) + rng.standard_normal((n, widths[0])) + 1.0]
    for width in widths[1:]:
        stream.append(stream[-1][:, :1] * rng.standard_normal(width) + 0.8 * rng.standard_normal((n, width)) - 0.5)
    return stream


def cell(table: pd.DataFrame, name: str, i: int, j: int) -> float:
    rows = table[(table.measure == name) & (table.layer_a == i) & (table.layer_b == j)]
    assert len(rows) == 1
    return float(rows.value.iloc[0])


@pytest.mark.parametrize("options", [None, OPTIONS], ids=["defaults", "options"])
def test_table_equals_each_measure_called_on_every_pair(options):
    layers_a, layers_b = layers(1, (5, 7, 3)), layers(2, (6, 9))
    table = measure_table(layers_a, layers_b, MEASURE_NAMES, options)
    for name in MEASURE_NAMES:
        for i, x in enumerate(layers_a):
            for j, y in enumerate(layers_b):
                expected = measure(name)(x, y, **(options or {}).get(name, {}))
                assert math.isfinite(expected)
                assert abs(cell(table, name, i, j) - expected) <= 1e-12, (name, i, j)


def test_self_comparison_equals_the_explicit_pair_of_lists_and_mirrors_symmetric_measures():
    stack = layers(3, (6, 4, 8))
    alone = measure_table(stack, None, MEASURE_NAMES, OPTIONS)
    explicit = measure_table(stack, stack, MEASURE_NAMES, OPTIONS)
    assert alone[["measure", "layer_a", "layer_b"]].equals(explicit[["measure", "layer_a", "layer_b"]])
    # A distance of a layer to itself is sqrt(2 − 2·cos) or arccos(cos) at cos = 1 − O(ε): rounding of
    # cos (XᵀX by BLAS syrk when x is y, by gemm for two equal copies) shows as O(√ε) there.
    diagonal_distance = alone.measure.isin(["procrustes", "angular_shape"]) & (alone.layer_a == alone.layer_b)
    np.testing.assert_allclose(alone.value[~diagonal_distance], explicit.value[~diagonal_distance], rtol=0, atol=1e-12)
    np.testing.assert_allclose(alone.value[diagonal_distance], 0.0, atol=1e-7)
    np.testing.assert_allclose(explicit.value[diagonal_distance], 0.0, atol=1e-7)
    for name in MEASURE_NAMES:
        grid = alone[alone.measure == name].value.to_numpy().reshape(3, 3)
        if measure(name).symmetric:
            np.testing.assert_array_equal(grid, grid.T)  # copied, not recomputed
    assert measure_table(stack, None, ["cknna"], {"cknna": {"k": 4}}).value.to_numpy().reshape(3, 3)[
        1, 0
    ] == pytest.approx(measure("cknna")(stack[1], stack[0], k=4), abs=1e-12)  # asymmetric: computed


def test_columns_order_and_types():
    layers_a, layers_b = layers(4, (5, 5, 5)), layers(5, (4, 4))
    names = ["rsa", "cka", "procrustes"]
    table = measure_table(layers_a, layers_b, names)
    assert list(table.columns) == list(COLUMNS) == ["measure", "layer_a", "layer_b", "value"]
    assert len(table) == 3 * 3 * 2
    assert table.measure.tolist() == [name for name in names for _ in range(6)]
    assert table.layer_a.tolist() == [0, 0, 1, 1, 2, 2] * 3
    assert table.layer_b.tolist() == [0, 1] * 9
    assert table.layer_a.dtype == np.int64 and table.layer_b.dtype == np.int64 and table.value.dtype == np.float64
    assert all(isinstance(name, str) for name in table.measure)
    empty = measure_table(layers_a, layers_b, [])
    assert list(empty.columns) == list(COLUMNS) and len(empty) == 0


def test_torch_layers_and_a_progress_bar(capsys):
    layers_a = layers(6, (5, 6))
    tensors = [torch.from_numpy(x) for x in layers_a]
    expected = measure_table(layers_a, None, ["cka", "mean_cca"])
    got = measure_table(tensors, None, ["cka", "mean_cca"], progress="layer pairs")
    pd.testing.assert_frame_equal(got, expected)
    assert "layer pairs" in capsys.readouterr().err


def test_each_layer_is_prepared_once_and_shared_preparations_once(monkeypatch):
    calls: list[str] = []

    def counting(prepare):
        @functools.wraps(prepare)
        def wrapper(x, *args, name="x", **options):
            calls.append(name)
            return prepare(x, *args, name=name, **options)

        return wrapper

    shared = counting(MEASURES["mutual_knn"].prepare)
    for name in ("mutual_knn", "knn_jaccard", "cknna"):
        monkeypatch.setitem(MEASURES, name, dataclasses.replace(MEASURES[name], prepare=shared))
    cka_entry = MEASURES["cka"]
    monkeypatch.setitem(MEASURES, "cka", dataclasses.replace(cka_entry, prepare=counting(cka_entry.prepare)))
    layers_a, layers_b = layers(7, (5, 6, 7)), layers(8, (4, 5))
    measure_table(layers_a, layers_b, ["cka", "mutual_knn", "knn_jaccard", "cknna"])
    assert sorted(calls) == sorted(2 * ["layers_a[0]", "layers_a[1]", "layers_a[2]", "layers_b[0]", "layers_b[1]"])
    calls.clear()
    measure_table(layers_a, None, ["cka", "mutual_knn", "cknna"], {"mutual_knn": {"k": 3}})  # different k: own
    assert sorted(calls) == sorted(3 * ["layers_a[0]", "layers_a[1]", "layers_a[2]"])


def test_a_measure_without_a_preparation_is_compared_by_its_function(monkeypatch):
    plain = Measure("plain_cka", MEASURES["cka"].function, "similarity", False, frozenset(), "n·d²", True)
    monkeypatch.setitem(MEASURES, "plain_cka", plain)
    layers_a, layers_b = layers(9, (5, 6)), layers(10, (3, 4, 7))
    table = measure_table(layers_a, layers_b, ["plain_cka"])
    assert table.value.tolist() == [plain(x, y) for x in layers_a for y in layers_b]
    with pytest.raises(ValueError, match="prepare, compare: give both or neither"):
        Measure("m", plain.function, "similarity", False, frozenset(), "n", True, prepare=lambda x: x)


def test_a_constant_layer_gives_nan_cells_and_one_log_line_per_measure_naming_the_pairs(caplog):
    layers_a, layers_b = layers(10, (5, 6)), [np.full((N, 3), 2.0), layers(11, (4,))[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a log line, not a Python warning
        with caplog.at_level(logging.WARNING, logger="thinkalike.measures.layerwise"):
            table = measure_table(layers_a, layers_b, ["cka", "mean_cca", "mutual_knn"])
    messages = [r.getMessage() for r in caplog.records]
    grid = table.value.to_numpy().reshape(3, 2, 2)
    assert np.isnan(grid[:2, :, 0]).all() and np.isfinite(grid[:2, :, 1]).all()  # cka, mean_cca
    assert np.isfinite(grid[2]).all()  # cosines of a constant (non-zero) layer are defined
    assert len(messages) == 2
    assert messages[0].startswith("cka is undefined: y is constant over tokens")
    assert (
        "[measure_table, cka at (layer_a, layer_b) = (0, 0), (1, 0); x is layers_a[layer_a], y is "
        "layers_b[layer_b]]" in messages[0]
    )
    assert messages[1].startswith("mean_cca is undefined: y is constant")


def test_bad_layers_are_named_before_any_work():
    good = layers(12, (4, 4))
    with pytest.raises(ValueError, match=r"layers_b\[1\]: has 36 tokens but layers_a\[0\] has 37"):
        measure_table(good, [good[0], good[1][:-1]], ["cka"])
    bad = [good[0], good[1].copy()]
    bad[1][3, 2] = np.nan
    with pytest.raises(ValueError, match=r"layers_a\[1\] contains NaN or Inf \(1 entries; first at token 3"):
        measure_table(bad, None, ["cka"])
    with pytest.raises(ValueError, match=r"layers_a\[0\] must be a 2-D"):
        measure_table([good[0][None]], None, ["cka"])
    with pytest.raises(ValueError, match="layers_b: must be a non-empty sequence"):
        measure_table(good, [], ["cka"])
    with pytest.raises(ValueError, match=r"measures.options.mutual_knn.k: 40 must be < 37 tokens"):
        measure_table(good, None, ["mutual_knn"], {"mutual_knn": {"k": 40}})


@pytest.mark.parametrize(
    "measures,options,n_tokens,message",
    [
        (["cka", "cca"], None, None, "cka.measures: unknown measure 'cca'; known measures: cka, procrustes, "),
        (["cka", "rsa", "cka"], None, None, "cka.measures: 'cka' is listed more than once"),
        ("cka", None, None, "cka.measures: must be a list of measure names"),
        (
            ["cka"],
            {"rsa": {}},
            None,
            "cka.measures.options.rsa: options given for a measure that is not in cka.measures (listed: cka)",
        ),
        (["rsa"], {"rsa": 3}, None, "cka.measures.options.rsa: must be a mapping from option to value"),
        (["rsa"], [("rsa", {})], None, "cka.measures.options: must be a mapping"),
        (
            ["mutual_knn"],
            {"mutual_knn": {"topk": 5}},
            None,
            "cka.measures.options.mutual_knn.topk: not an option of mutual_knn (its options: k)",
        ),
        (
            ["procrustes"],
            {"procrustes": {"alpha": 0.5}},
            None,
            "cka.measures.options.procrustes.alpha: not an option of procrustes (it takes no options)",
        ),
        (["mutual_knn"], {"mutual_knn": {"k": 0}}, None, "cka.measures.options.mutual_knn.k: 0 must be an integer ≥ 1"),
        (
            ["knn_jaccard"],
            {"knn_jaccard": {"k": 2.5}},
            None,
            "cka.measures.options.knn_jaccard.k: 2.5 must be an integer ≥ 1",
        ),
        (["cknna"], {"cknna": {"k": 1}}, None, "cka.measures.options.cknna.k: 1 must be an integer ≥ 2"),
        (
            ["mutual_knn"],
            {"mutual_knn": {"k": 600}},
            512,
            "cka.measures.options.mutual_knn.k: 600 must be < 512 tokens",
        ),
        (["cknna"], None, 8, "cka.measures.options.cknna.k: 10 (the default) must be < 8 tokens"),
        (
            ["angular_shape"],
            {"angular_shape": {"alpha": 1.5}},
            None,
            "cka.measures.options.angular_shape.alpha: 1.5 must be a number in [0, 1]",
        ),
        (
            ["angular_shape"],
            {"angular_shape": {"alpha": "half"}},
            None,
            "cka.measures.options.angular_shape.alpha: 'half' must be a number in [0, 1]",
        ),
        (["svcca"], {"svcca": {"keep": 0}}, None, r"cka.measures.options.svcca.keep: 0 must be a number in (0, 1]"),
        (["svcca"], {"svcca": {"keep": 1.5}}, None, r"cka.measures.options.svcca.keep: 1.5 must be a number in (0, 1]"),
        (
            ["rsa"],
            {"rsa": {"distance": "cosine"}},
            None,
            "cka.measures.options.rsa.distance: 'cosine' must be one of correlation, euclidean",
        ),
        (
            ["rsa"],
            {"rsa": {"correlation": "kendall"}},
            None,
            "cka.measures.options.rsa.correlation: 'kendall' must be one of spearman, pearson",
        ),
        (
            ["linear_predictivity"],
            {"linear_predictivity": {"n_folds": 1}},
            None,
            "cka.measures.options.linear_predictivity.n_folds: 1 must be an integer ≥ 2",
        ),
        (
            ["linear_predictivity"],
            {"linear_predictivity": {"alphas": [1.0, -1.0]}},
            None,
            "cka.measures.options.linear_predictivity.alphas: [1.0, -1.0] must be a non-empty sequence of positive",
        ),
        (
            ["linear_predictivity"],
            None,
            9,
            "cka.measures.options.linear_predictivity.n_folds: 5 (the default) must be ≤ 4 for 9 tokens",
        ),
        (["cka"], None, 3, "cka.measures: cka needs at least 4 tokens; got 3"),
    ],
)
def test_check_measures_names_the_setting_at_fault(measures, options, n_tokens, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        check_measures(measures, options, n_tokens, where="cka.measures")


def test_check_measures_accepts_good_settings():
    check_measures(list(MEASURE_NAMES), OPTIONS, n_tokens=N)
    check_measures(["mutual_knn"], {"mutual_knn": {"k": np.int64(5)}}, n_tokens=6)
    check_measures([], None)
    with pytest.raises(ValueError, match=r"^measures: unknown measure"):
        check_measures(["nope"], None)  # the default prefix
