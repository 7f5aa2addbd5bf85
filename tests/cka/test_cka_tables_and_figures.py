"""CKA tables, summaries and figures: sizes, labels, ticks, colours, counts beside every mean."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from PIL import Image

from thinkalike.cka.compute import distance_table, pair_summary
from thinkalike.cka.figures import distance_matrix_figure, group_curves_figure, heatmap_figure, heatmap_plotly
from thinkalike.cka.settings import CKASettings
from thinkalike.figures import LAYER_LABEL
from thinkalike.pipelines.zoo.nodes import training_curves_figure


def pair_table(matrix: np.ndarray, model_a: str = "gpt", model_b: str = "bert", skip: bool = False) -> pd.DataFrame:
    """A long CKA table (the pipeline's columns) for a given matrix."""
    layers_a, layers_b = matrix.shape
    grid_a, grid_b = np.meshgrid(np.arange(layers_a), np.arange(layers_b), indexing="ij")
    return pd.DataFrame(
        {
            "model_a": model_a,
            "layer_a": grid_a.ravel(),
            "model_b": model_b,
            "layer_b": grid_b.ravel(),
            "cka": matrix.ravel(),
            "ci_low": matrix.ravel() - 0.05,
            "ci_high": matrix.ravel() + 0.05,
            "p_value": np.nan,
            "n_batches": 3,
            "n_tokens": 300,
            "estimator": "unbiased",
            "aggregation": "mean_of_ratios",
            "pooling": "token",
            "skip_constant_layers": skip,
        }
    )


def png_size(figure: Figure) -> tuple[int, int]:
    """(width, height) in pixels of the figure saved as MatplotlibDataset and MLflow save it."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    buffer.seek(0)
    return Image.open(buffer).size


# --------------------------------------------------------------------------- heatmaps


@pytest.mark.parametrize("layers", [(2, 3), (13, 13), (25, 7)])
def test_heatmap_is_paper_sized_and_labels_layer_zero(layers):
    rng = np.random.default_rng(0)
    figure = heatmap_figure(pair_table(rng.uniform(0, 1, layers)))
    width, height = png_size(figure)
    assert width >= 1000 and height >= 600
    axis = figure.axes[0]
    assert axis.get_xlabel() == f"bert {LAYER_LABEL}" and axis.get_ylabel() == f"gpt {LAYER_LABEL}"
    assert "0 = embeddings" in LAYER_LABEL
    ticks = list(axis.get_yticks())
    assert ticks[0] == 0 and ticks[-1] == layers[0] - 1 and all(float(t).is_integer() for t in ticks)


def test_heatmap_prints_values_in_cells_for_small_grids():
    figure = heatmap_figure(pair_table(np.array([[0.25, 0.5], [0.75, np.nan]])))
    texts = sorted(text.get_text() for text in figure.axes[0].texts)
    assert texts == ["0.25", "0.50", "0.75"]


@pytest.mark.parametrize("layers", [(3, 4), (25, 25)])
def test_plotly_heatmap_is_ticked_at_whole_layers(layers):
    figure = heatmap_plotly(pair_table(np.full(layers, 0.5)))
    for axis, n in ((figure.layout.xaxis, layers[1]), (figure.layout.yaxis, layers[0])):
        assert axis.tickmode == "array"
        values = list(axis.tickvals)
        assert values[0] == 0 and values[-1] == n - 1 and all(isinstance(v, int) for v in values)
        if n <= 16:
            assert values == list(range(n))
        assert LAYER_LABEL in axis.title.text
    assert list(figure.data[0].x) == list(range(layers[1]))


# --------------------------------------------------------------------------- distance matrix


def test_distance_figure_has_numbers_and_keeps_the_diagonal_out_of_the_colour_scale():
    distances = pd.DataFrame(
        {
            "model_a": ["a", "b", "a", "a", "b"],
            "model_b": ["a", "b", "b", "c", "c"],
            "arccos_distance": [0.0, 0.0, 0.4, 0.9, 1.3],
        }
    )
    figure = distance_matrix_figure(distances)
    axis = figure.axes[0]
    image = axis.images[0]
    shown = image.get_array()
    assert shown.mask[np.diag_indices(3)].all()  # the diagonal is drawn grey, not the brightest colour
    assert image.get_clim() == (0.4, 1.3)  # the colours span the compared pairs only
    texts = [text.get_text() for text in axis.texts]
    assert sorted(texts) == sorted(["0.00", "0.00", "0.40", "0.40", "0.90", "0.90", "1.30", "1.30"])
    assert png_size(figure)[0] >= 1000


# --------------------------------------------------------------------------- curves


def test_group_curves_figure_bands_stay_in_the_cka_range():
    curves = pd.DataFrame(
        {
            "group_a": "x",
            "group_b": "y",
            "relative_depth": [0.0, 0.5, 1.0],
            "mean": [0.9, 0.95, 0.99],
            "ci_low": [0.7, 0.9, 0.95],
            "ci_high": [1.0, 1.0, 1.0],
            "n": 2,
        }
    )
    figure = group_curves_figure(curves, (-1.0, 1.0))
    axis = figure.axes[0]
    band = axis.collections[0].get_paths()[0].vertices
    assert band[:, 1].max() <= 1.0
    assert axis.get_ylim()[1] <= 1.05 and axis.get_ylim()[0] >= -0.05  # no negative values: from 0
    assert png_size(figure)[0] >= 1000


def test_training_curves_of_many_models_are_distinguishable():
    curves = [
        pd.DataFrame({"model": f"m{i}", "step": [10, 20], "heldout_loss": [4.0 - i / 10, 3.0 - i / 10]})
        for i in range(14)
    ]
    figure = training_curves_figure(curves, 4.5, 0.3)
    lines = [line for line in figure.axes[0].get_lines() if line.get_label().startswith("m")]
    styles = {(line.get_color(), line.get_linestyle()) for line in lines}
    assert len(lines) == 14 and len(styles) == 14
    assert png_size(figure)[0] >= 1000


# --------------------------------------------------------------------------- summaries


def test_pair_summary_reports_counts_and_is_nan_with_a_nan_layer():
    table = pair_table(np.array([[0.9, 0.1], [0.2, np.nan]]))
    with pytest.warns(RuntimeWarning, match=r"'gpt' vs 'bert'.*1 of 2 matched layers"):
        summary = pair_summary(table)
    assert math.isnan(summary["mean_matched_cka"]) and math.isnan(summary["arccos_distance"])
    assert (summary["n_matched_layers"], summary["n_finite_layers"]) == (2, 1)
    skipped = pair_summary(pair_table(np.array([[0.9, 0.1], [0.2, np.nan]]), skip=True))  # the table's setting
    assert skipped["mean_matched_cka"] == pytest.approx(0.9)
    assert skipped["arccos_distance"] == pytest.approx(math.acos(0.9))


def test_distance_table_has_counts_beside_every_mean():
    tables = [pair_table(np.diag([1.0, 0.5]), "a", "b"), pair_table(np.array([[0.8, 0.0], [0.0, np.nan]]), "a", "c")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        distances = distance_table(tables).set_index("model_b")
    assert distances.loc["b", "mean_matched_cka"] == pytest.approx(0.75)
    assert distances.loc["b", ["n_matched_layers", "n_finite_layers"]].tolist() == [2, 2]
    assert math.isnan(distances.loc["c", "mean_matched_cka"])
    assert distances.loc["c", ["n_matched_layers", "n_finite_layers"]].tolist() == [2, 1]
    assert distances["n_finite_layers"].dtype == np.int64


def test_skip_constant_layers_setting_is_checked():
    assert CKASettings().skip_constant_layers is False
    from thinkalike.pipelines.cka.schema import parse_cka

    assert parse_cka({"skip_constant_layers": True}).estimation.skip_constant_layers is True
    with pytest.raises(ValueError, match="skip_constant_layers must be true or false"):
        CKASettings(skip_constant_layers="no")


# --------------------------------------------------------------------------- no backend at import


def test_importing_the_library_does_not_choose_a_matplotlib_backend():
    code = (
        "import matplotlib; import thinkalike.cka.figures, thinkalike.pipelines.zoo.nodes; "
        "print(matplotlib.get_backend())"
    )
    env_backend = "svg"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MPLBACKEND": env_backend},
    )
    assert result.stdout.strip().lower() == env_backend


def test_a_stored_layer_subset_keeps_its_layer_numbers():
    from thinkalike.cka.compute import cka_long_table
    from thinkalike.measures.cka import CKAAccumulator

    rng = np.random.default_rng(3)
    accumulator = CKAAccumulator(3, 2)
    accumulator.update(rng.standard_normal((3, 16, 4)), rng.standard_normal((2, 16, 5)))
    table = cka_long_table(accumulator.result(), CKASettings(n_bootstrap=0), [0, 6, 12], [0, 4])
    assert sorted(table["layer_a"].unique()) == [0, 6, 12] and sorted(table["layer_b"].unique()) == [0, 4]
    figure = heatmap_figure(table)
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == ["0", "6", "12"]
    plotly = heatmap_plotly(table)
    assert list(plotly.layout.yaxis.tickvals) == [0, 1, 2] and list(plotly.layout.yaxis.ticktext) == ["0", "6", "12"]
    with pytest.raises(ValueError, match="layer ids"):
        cka_long_table(accumulator.result(), CKASettings(n_bootstrap=0), [0, 6], [0, 4])


def test_the_table_keeps_each_minibatchs_cka_and_their_mean_is_the_cell():
    """``batch_cka``: one value per minibatch per cell; with mean_of_ratios their mean is the cell's CKA, and each
    equals CKA computed on that minibatch alone."""
    from thinkalike.cka.compute import cka_long_table
    from thinkalike.measures.cka import CKAAccumulator, cka_matrix

    rng = np.random.default_rng(3)
    batches = [(rng.normal(size=(3, 50, 6)), rng.normal(size=(2, 50, 5))) for _ in range(4)]
    accumulator = CKAAccumulator(3, 2, aggregation="mean_of_ratios")
    for a, b in batches:
        accumulator.update(a, b)
    table = cka_long_table(accumulator.result(), CKASettings(n_bootstrap=0))
    values = np.stack(table["batch_cka"].to_list())
    assert values.shape == (6, 4)
    np.testing.assert_allclose(values.mean(axis=1), table["cka"], rtol=1e-12)
    first = cka_matrix(batches[0][0], batches[0][1])
    np.testing.assert_allclose(values[:, 0], first.ravel(), rtol=1e-9)
