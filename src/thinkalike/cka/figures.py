"""CKA figures from the long tables of :mod:`thinkalike.cka.compute` (no Kedro): a pair's heatmap (matplotlib and
plotly), the per-layer curves of group pairs and the models × models distance matrix, in the style of
:mod:`thinkalike.figures` (made without pyplot, so no backend is chosen or forced here; at least
:data:`~thinkalike.figures.MIN_FIGURE_WIDTH_IN` inches wide at :data:`~thinkalike.figures.FIGURE_DPI` dots per
inch, ≥ 1050 px).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.figure import Figure

from thinkalike.cka.compute import cka_matrix_from_table, layer_matrix
from thinkalike.figures import DISTINCT_LINES, FIGURE_DPI, LAYER_LABEL, MIN_FIGURE_WIDTH_IN

_MAX_ANNOTATED_LAYERS = 16


def _layer_ids(table: pd.DataFrame, column: str) -> list[int]:
    """The residual-stream numbers of a table's matrix rows (``layer_a``) or columns (``layer_b``), in order."""
    return [int(layer) for layer in sorted(table[column].unique())]


def _layer_ticks(n_layers: int) -> list[int]:
    """Whole layers, every layer up to 16, else every k-th (k so that ≤ 16 ticks), always the last."""
    step = max(1, int(np.ceil(n_layers / _MAX_ANNOTATED_LAYERS)))
    ticks = list(range(0, n_layers, step))
    return ticks if ticks[-1] == n_layers - 1 else [*ticks, n_layers - 1]


def heatmap_figure(table: pd.DataFrame) -> Figure:
    """Brown et al.-style heatmap: layers of model b across, of model a up the side, CKA in [0, 1].

    Cells are ``clip(6 in / max(La, Lb), 0.25 in, 0.8 in)`` square; the figure is at least
    :data:`MIN_FIGURE_WIDTH_IN` wide at :data:`FIGURE_DPI`; values are printed in the cells up
    to 16 layers a side.
    """
    matrix = cka_matrix_from_table(table)
    layers_a, layers_b = matrix.shape
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    cell = float(np.clip(6.0 / max(layers_a, layers_b), 0.25, 0.8))
    size = (max(MIN_FIGURE_WIDTH_IN, cell * layers_b + 3.0), max(4.5, cell * layers_a + 1.8))
    figure = Figure(figsize=size, dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    image = axis.imshow(matrix, origin="lower", vmin=0.0, vmax=1.0, cmap="magma", aspect="auto")
    if max(layers_a, layers_b) <= _MAX_ANNOTATED_LAYERS:
        fontsize = float(np.clip(cell * 14.0, 6.0, 10.0))
        for (i, j), value in np.ndenumerate(matrix):
            if np.isfinite(value):
                axis.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    color="black" if value > 0.6 else "white",
                )
    axis.set(
        xlabel=f"{model_b} {LAYER_LABEL}",
        ylabel=f"{model_a} {LAYER_LABEL}",
        title=f"CKA: {model_a} vs {model_b}",
        xticks=_layer_ticks(layers_b),
        yticks=_layer_ticks(layers_a),
    )
    ids_a, ids_b = _layer_ids(table, "layer_a"), _layer_ids(table, "layer_b")
    axis.set_xticklabels([str(ids_b[i]) for i in _layer_ticks(layers_b)])
    axis.set_yticklabels([str(ids_a[i]) for i in _layer_ticks(layers_a)])
    figure.colorbar(image, ax=axis, label=f"{table['estimator'].iloc[0]} CKA")
    return figure


def heatmap_plotly(table: pd.DataFrame) -> go.Figure:
    """The same heatmap for kedro-viz previews, ticked at whole layers, with the CI on hover."""
    matrix = cka_matrix_from_table(table)
    low, high = layer_matrix(table, "ci_low"), layer_matrix(table, "ci_high")
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    layers_a, layers_b = matrix.shape
    ids_a, ids_b = _layer_ids(table, "layer_a"), _layer_ids(table, "layer_b")
    grid_a, grid_b = np.meshgrid(ids_a, ids_b, indexing="ij")
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            x=list(range(layers_b)),
            y=list(range(layers_a)),
            zmin=0,
            zmax=1,
            colorscale="Magma",
            customdata=np.dstack([low, high, grid_a, grid_b]),
            hovertemplate="a layer %{customdata[2]}, b layer %{customdata[3]}<br>CKA %{z:.3f}"
            "<br>CI [%{customdata[0]:.3f}, %{customdata[1]:.3f}]<extra></extra>",
        )
    )
    figure.update_layout(title=f"CKA: {model_a} vs {model_b}")
    ticks_a, ticks_b = _layer_ticks(layers_a), _layer_ticks(layers_b)
    figure.update_xaxes(
        title=f"{model_b} {LAYER_LABEL}", tickmode="array", tickvals=ticks_b, ticktext=[str(ids_b[i]) for i in ticks_b]
    )
    figure.update_yaxes(
        title=f"{model_a} {LAYER_LABEL}", tickmode="array", tickvals=ticks_a, ticktext=[str(ids_a[i]) for i in ticks_a]
    )
    return figure


def group_curves_figure(curves: pd.DataFrame, value_range: tuple[float, float] = (0.0, 1.0)) -> Figure:
    """Per-layer CKA curves with confidence bands, one line per group pair (Brown et al. figs 2b, 8).

    The y axis spans ``value_range`` (the estimator's CKA range, extended below 0 only when
    the data go there).
    """
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN, 4.5), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    if curves.empty:
        axis.text(0.5, 0.5, "no between-model pairs with group labels", ha="center", va="center")
    axis.set_prop_cycle(DISTINCT_LINES)
    for (group_a, group_b), curve in curves.groupby(["group_a", "group_b"]):
        curve = curve.sort_values("relative_depth")
        (line,) = axis.plot(curve["relative_depth"], curve["mean"], marker="o", label=f"{group_a} vs {group_b}")
        axis.fill_between(
            curve["relative_depth"],
            curve["ci_low"].astype(float),
            curve["ci_high"].astype(float),
            color=line.get_color(),
            alpha=0.2,
        )
    values = curves[["mean", "ci_low"]].to_numpy(dtype=float) if not curves.empty else np.zeros(1)
    goes_negative = bool((values[np.isfinite(values)] < 0).any())
    low = value_range[0] if goes_negative else max(value_range[0], 0.0)
    axis.set(
        xlabel="relative depth (0 = embeddings, 1 = last layer)",
        ylabel="CKA of matched layers",
        ylim=(low - 0.02, value_range[1] + 0.02),
        title="CKA by group pair (mean, CI across model pairs)",
    )
    if not curves.empty:
        axis.legend(fontsize=8)
    return figure


def distance_matrix_figure(distances: pd.DataFrame) -> Figure:
    """Models × models arccos distances, the value printed in each cell.

    Colours span the off-diagonal distances only; the diagonal (a model with itself, 0 by
    construction) and pairs that were not compared are drawn grey, not in the colour scale.
    """
    models = list(dict.fromkeys([*distances["model_a"], *distances["model_b"]]))
    position = {model: i for i, model in enumerate(models)}
    matrix = np.full((len(models), len(models)), np.nan)
    for row in distances.itertuples():
        matrix[position[row.model_a], position[row.model_b]] = row.arccos_distance
        matrix[position[row.model_b], position[row.model_a]] = row.arccos_distance
    diagonal = np.eye(len(models), dtype=bool)
    hidden = diagonal | ~np.isfinite(matrix)
    shown = np.ma.masked_array(matrix, mask=hidden)
    off_diagonal = matrix[~diagonal & np.isfinite(matrix)]
    vmin, vmax = (float(off_diagonal.min()), float(off_diagonal.max())) if off_diagonal.size else (0.0, 1.0)
    if vmax <= vmin:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    side = max(MIN_FIGURE_WIDTH_IN, 2.8 + 0.6 * len(models))
    figure = Figure(figsize=(side + 1.2, side), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.85")
    image = axis.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax)
    fontsize = 9 if len(models) <= 12 else 7
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            grey = bool(hidden[i, j])
            bright = not grey and (value - vmin) / (vmax - vmin) > 0.6
            axis.text(
                j,
                i,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=fontsize,
                color="black" if grey or bright else "white",
            )
    axis.set(xticks=range(len(models)), yticks=range(len(models)), title="arccos-CKA distance between models")
    axis.set_xticklabels(models, rotation=60, ha="right", fontsize=8)
    axis.set_yticklabels(models, fontsize=8)
    figure.colorbar(image, ax=axis, label="sqrt(Σ arccos(CKA)²) over matched layers (diagonal: grey)")
    return figure
