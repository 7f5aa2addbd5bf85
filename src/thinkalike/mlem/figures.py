"""MLEM figures (matplotlib object API, no pyplot; plotly twins for kedro-viz).

* :func:`profile_figure` — one model's feature-importance profile, features × layers (as the
  paper's figures), the held-out Spearman of each layer under its column.
* :func:`similarity_figure` — the feature-based and RSA similarity matrices of all layers of
  all models, side by side, models separated by lines.
* :func:`mds_figure` — the MDS maps of both similarities, one trajectory per model (embeddings
  → last layer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from thinkalike.figures import DISTINCT_LINES, FIGURE_DPI, MIN_FIGURE_WIDTH_IN
from thinkalike.mlem.fit import ALL_FOLDS

METHOD_TITLES = {
    "feature": "feature-based (weighted Kendall τ of importance profiles)",
    "rsa": "RSA (Spearman of neural distances)",
}


def profile_matrix(profile: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """``(features × layers importance, held-out Spearman per layer)`` from a model's profile table."""
    overall = profile[profile["fold"] == ALL_FOLDS]
    features = list(dict.fromkeys(overall["feature"]))
    matrix = overall.pivot(index="feature", columns="layer", values="importance").loc[features]
    spearman = overall.groupby("layer")["spearman_heldout"].first()
    return matrix, spearman


def profile_figure(profile: pd.DataFrame) -> Figure:
    """Features × layers heatmap of permutation importance (mean over folds × permutations)."""
    matrix, spearman = profile_matrix(profile)
    model = str(profile["model"].iloc[0])
    n_features, n_layers = matrix.shape
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN, 1.0 * n_layers + 3.5), max(3.5, 0.45 * n_features + 1.8)),
        dpi=FIGURE_DPI,
        layout="constrained",
    )
    axis = figure.subplots()
    values = matrix.to_numpy(dtype=float)
    top = max(float(np.nanmax(np.abs(values))) if values.size else 0.0, 1e-6)
    image = axis.imshow(values, aspect="auto", cmap="viridis", vmin=min(0.0, float(np.nanmin(values))), vmax=top)
    for (i, j), value in np.ndenumerate(values):
        axis.text(
            j, i, f"{value:.3f}", ha="center", va="center", fontsize=8, color="black" if value > 0.6 * top else "white"
        )
    axis.set_xticks(range(n_layers), [f"{layer}\nρ={spearman[layer]:.2f}" for layer in matrix.columns])
    axis.set_yticks(range(n_features), list(matrix.index))
    axis.set(xlabel="layer (0 = embeddings); ρ = held-out Spearman", title=f"MLEM feature importance: {model}")
    figure.colorbar(image, ax=axis, label="importance (drop in held-out Spearman)")
    return figure


def profile_plotly(profile: pd.DataFrame) -> go.Figure:
    """The profile heatmap for kedro-viz, with the interval on hover."""
    matrix, spearman = profile_matrix(profile)
    overall = profile[profile["fold"] == ALL_FOLDS]
    low = overall.pivot(index="feature", columns="layer", values="ci_low").loc[matrix.index]
    high = overall.pivot(index="feature", columns="layer", values="ci_high").loc[matrix.index]
    figure = go.Figure(
        go.Heatmap(
            z=matrix.to_numpy(float),
            x=[f"{layer} (ρ={spearman[layer]:.2f})" for layer in matrix.columns],
            y=list(matrix.index),
            colorscale="Viridis",
            customdata=np.dstack([low.to_numpy(float), high.to_numpy(float)]),
            hovertemplate="%{y}, layer %{x}<br>importance %{z:.4f}<br>CI [%{customdata[0]:.4f}, %{customdata[1]:.4f}]"
            "<extra></extra>",
        )
    )
    figure.update_layout(title=f"MLEM feature importance: {profile['model'].iloc[0]}", xaxis_title="layer")
    return figure


def _model_bounds(labels: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """``(model, first, last)`` positions of each model's run of layers in ``labels``."""
    bounds: list[tuple[str, int, int]] = []
    for position, (model, _) in enumerate(labels):
        if bounds and bounds[-1][0] == model:
            bounds[-1] = (model, bounds[-1][1], position)
        else:
            bounds.append((model, position, position))
    return bounds


def similarity_figure(matrices: dict[str, np.ndarray], labels: Sequence[tuple[str, int]]) -> Figure:
    """Side-by-side heatmaps of ``matrices`` (``{"feature": …, "rsa": …}``) over the same ``labels``."""
    n = len(labels)
    side = float(np.clip(0.16 * n + 2.5, 4.5, 11.0))
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN, 2 * side + 1.5), side + 0.6), dpi=FIGURE_DPI, layout="constrained"
    )
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    bounds = _model_bounds(labels)
    centres = [(first + last) / 2 for _, first, last in bounds]
    for axis, (method, matrix) in zip(axes, matrices.items()):
        image = axis.imshow(matrix, vmin=-1.0, vmax=1.0, cmap="RdBu_r", interpolation="nearest")
        for _, first, _ in bounds[1:]:
            axis.axhline(first - 0.5, color="black", linewidth=0.6)
            axis.axvline(first - 0.5, color="black", linewidth=0.6)
        axis.set_xticks(centres, [model for model, _, _ in bounds], rotation=90, fontsize=7)
        axis.set_yticks(centres, [model for model, _, _ in bounds], fontsize=7)
        axis.set_title(METHOD_TITLES.get(method, method), fontsize=9)
        figure.colorbar(image, ax=axis, shrink=0.8)
    figure.suptitle("Layer similarity across models (each block: a model's layers, embeddings first)")
    return figure


def similarity_plotly(matrices: dict[str, np.ndarray], labels: Sequence[tuple[str, int]]) -> go.Figure:
    """The two matrices for kedro-viz, layers named ``model:layer`` on hover."""
    names = [f"{model}:{layer}" for model, layer in labels]
    figure = make_subplots(rows=1, cols=len(matrices), subplot_titles=[METHOD_TITLES.get(m, m) for m in matrices])
    for column, matrix in enumerate(matrices.values(), start=1):
        figure.add_trace(
            go.Heatmap(
                z=matrix,
                x=names,
                y=names,
                zmin=-1,
                zmax=1,
                colorscale="RdBu_r",
                showscale=column == 1,
                hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=column,
        )
    figure.update_layout(title="Layer similarity across models")
    return figure


def mds_figure(coordinates: pd.DataFrame) -> Figure:
    """One panel per method: each model's layers as a trajectory (circle = embeddings, square = last layer)."""
    methods = list(dict.fromkeys(coordinates["method"]))
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN, 5.5 * len(methods) + 2.0), 5.5), dpi=FIGURE_DPI, layout="constrained"
    )
    axes = figure.subplots(1, max(1, len(methods)), squeeze=False)[0]
    for axis, method in zip(axes, methods):
        axis.set_prop_cycle(DISTINCT_LINES)
        for model, points in coordinates[coordinates["method"] == method].groupby("model", sort=False):
            points = points.sort_values("layer")
            (line,) = axis.plot(points["x"], points["y"], marker=".", label=model)
            axis.plot(points["x"].iloc[:1], points["y"].iloc[:1], marker="o", color=line.get_color())
            axis.plot(points["x"].iloc[-1:], points["y"].iloc[-1:], marker="s", color=line.get_color())
        axis.set(title=f"MDS: {METHOD_TITLES.get(method, method)}", xlabel="MDS 1", ylabel="MDS 2")
        axis.title.set_fontsize(9)
    if methods:
        axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def mds_plotly(coordinates: pd.DataFrame) -> go.Figure:
    """The MDS trajectories for kedro-viz (one subplot per method)."""
    methods = list(dict.fromkeys(coordinates["method"]))
    figure = make_subplots(rows=1, cols=max(1, len(methods)), subplot_titles=[METHOD_TITLES.get(m, m) for m in methods])
    for column, method in enumerate(methods, start=1):
        for model, points in coordinates[coordinates["method"] == method].groupby("model", sort=False):
            points = points.sort_values("layer")
            figure.add_trace(
                go.Scatter(
                    x=points["x"],
                    y=points["y"],
                    mode="lines+markers",
                    name=model,
                    legendgroup=model,
                    showlegend=column == 1,
                    text=points["layer"],
                    hovertemplate=f"{model} layer %{{text}}<extra></extra>",
                ),
                row=1,
                col=column,
            )
    figure.update_layout(title="MDS of all layers (one trajectory per model)")
    return figure
