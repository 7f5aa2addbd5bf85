"""cka.measures.layers (the layer grid), the cost estimate line and the rogue-dimension log line
(thinkalike.cka.measure_tables), on small random activations (no project)."""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import pandas as pd
import pytest

from thinkalike.cka.measure_figures import measures_heatmap_figure
from thinkalike.cka.measure_tables import (
    MeasureSettings,
    dimension_shares,
    grounding_table,
    layer_shares,
    measure_matrix,
    measures_long_table,
    pair_measure_summary,
    remedy_summary,
)
from thinkalike.cka.settings import CKASettings
from thinkalike.measures.distances import match_layers_by_relative_depth

NAMES = ("cka", "procrustes", "mean_cca", "rsa", "mutual_knn", "linear_predictivity")
OPTIONS = {"mutual_knn": {"k": 5}, "linear_predictivity": {"n_folds": 3}}


def activations(seed: int, layers: int, n: int = 60, d: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((layers, n, d)).cumsum(axis=0)


def settings(**changes) -> MeasureSettings:
    return MeasureSettings(
        names=NAMES, max_tokens=48, options=OPTIONS, remedy_measures=("cka",), grounding_components=2, **changes
    )


def table(acts_a, acts_b, measures, name_b="b"):
    return measures_long_table(
        acts_a,
        acts_b,
        measures,
        CKASettings(),
        model_a="a",
        model_b=name_b,
        layer_ids_a=range(len(acts_a)),
        layer_ids_b=range(len(acts_a if acts_b is None else acts_b)),
    )


@pytest.mark.parametrize(
    ("layers_a", "layers_b", "grid"), [(9, 9, "all"), (13, 4, "all"), (14, 4, "relative"), (4, 31, "relative")]
)
def test_auto_is_every_pair_up_to_12_layers_and_embeddings_else_relative(layers_a, layers_b, grid):
    measures = MeasureSettings(names=("cka",))
    assert measures.layers == "auto"
    assert measures.layer_grid(layers_a, layers_b) == grid
    pairs = measures.layer_pairs(layers_a, layers_b)
    assert pairs is None if grid == "all" else pairs == match_layers_by_relative_depth(layers_a, layers_b)


def test_diagonal_is_equal_positions_and_the_matched_pairs():
    measures = MeasureSettings(names=("cka",), layers="diagonal")
    assert measures.layer_pairs(3, 3) == [(0, 0), (1, 1), (2, 2)]
    assert measures.layer_pairs(3, 5) == [(0, 0), (1, 1), (1, 2), (2, 2), (2, 4)]


@pytest.mark.parametrize("value", ["every", 3, None])
def test_a_bad_grid_is_named_in_one_line(value):
    from thinkalike.pipelines.cka.schema import measure_settings

    with pytest.raises(
        ValueError, match=r"^cka\.measures\.layers: Input should be 'diagonal', 'relative', 'all' or 'auto'"
    ):
        measure_settings({"names": ["cka"], "layers": value})


@pytest.mark.parametrize("grid", ["relative", "diagonal"])
def test_fewer_pairs_give_the_same_cells_and_summaries_as_every_pair(grid):
    acts_a, acts_b = activations(0, 5), activations(1, 3)
    every = table(acts_a, acts_b, settings(layers="all"))
    fewer = table(acts_a, acts_b, settings(layers=grid))
    assert len(fewer) == len(every)  # every cell keeps its row, NaN outside the grid
    computed = fewer["value"].notna()
    expected = settings(layers=grid).layer_pairs(5, 3)
    configured = fewer[(fewer["variant"] == "configured") & computed]
    assert sorted(set(zip(configured["layer_a"], configured["layer_b"]))) == sorted(expected)
    np.testing.assert_array_equal(fewer.loc[computed, "value"], every.loc[computed, "value"])
    pd.testing.assert_frame_equal(pair_measure_summary(fewer), pair_measure_summary(every))
    pd.testing.assert_frame_equal(remedy_summary([fewer]), remedy_summary([every]))
    pd.testing.assert_frame_equal(dimension_shares([fewer]), dimension_shares([every]))
    assert np.isnan(measure_matrix(fewer, "cka")).sum() == 5 * 3 - len(expected)
    measures_heatmap_figure(fewer).savefig(io.BytesIO(), format="png")  # blank cells outside the grid


def test_grounding_takes_a_model_with_itself_on_the_diagonal_grid():
    acts = activations(2, 5)
    tables = [table(acts, None, settings(layers=grid), name_b="a") for grid in ("all", "relative")]
    every, diagonal = (grounding_table([t], {}) for t in tables)
    assert every["monotonicity"].notna().all()
    assert diagonal["monotonicity"].isna().all()  # needs every pair of the model with itself
    for test in ("sensitivity", "null_permuted", "null_independent"):  # the controls are one layer: unchanged
        np.testing.assert_array_equal(diagonal[test], every[test])


def test_one_estimate_line_before_the_rest(caplog):
    with caplog.at_level(logging.INFO, logger="thinkalike.cka.measure_tables"):
        table(activations(3, 4), activations(4, 4), settings(layers="all"))
    lines = [r.getMessage() for r in caplog.records if "layer pairs" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "measures a vs b (cka.measures.layers: all): 16 layer pairs × 6 measures; the first 5 took "
    )
    assert lines[0].endswith(" in all")


def test_the_rogue_dimension_is_one_log_line_not_a_warning(caplog, recwarn):
    rows = np.random.default_rng(5).standard_normal((3, 50, 6))
    rows[1, :, 2] *= 30.0  # layer 1: one dimension carries almost all of the variance
    with caplog.at_level(logging.INFO, logger="thinkalike.cka.measure_tables"):
        shares = layer_shares(list(rows), "gpt", [0, 4, 8])
    assert shares["top1_share"].iloc[1] > 0.9
    records = [r for r in caplog.records if r.name == "thinkalike.cka.measure_tables"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    message = records[0].getMessage()
    assert message.startswith("gpt: one dimension carries more than 50% of the variance at layer(s) 4 (")
    assert "cka.measures.standardise" in message and "cka.measures.remove_top_dimensions" in message
    assert "\n" not in message
    assert len(recwarn) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Python warning of any kind
        layer_shares(list(rows), "gpt", [0, 4, 8])
