"""The report's interactive figures, drawn from saved tables only (no Kedro; nothing recomputed): the figures whose
values are worth a hover — models × models matrices (the CKA distance, each measure's matched-layer mean), the layers
× layers CKA of every pair (the ``cka`` pipeline's saved figure), the MLEM similarity of every layer pair — and the
run's timeline. Each builder returns ``None`` when its table is missing or empty (the report then says what is
missing).

The methods' own plotly figures are reused where they exist: the ``cka`` pipeline's saved ``cka_heatmaps_plotly``,
:func:`thinkalike.mlem.figures.similarity_plotly`, :func:`thinkalike.figures.dropdown_figure`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from thinkalike.figures import dropdown_figure
from thinkalike.mlem.figures import similarity_plotly
from thinkalike.mlem.similarity import matrix_from_long
from thinkalike.run_record.clock import START_ROW

#: Per model pair of ``cka_distances``: the columns shown on hover (column, label, plotly number format).
DISTANCE_HOVER = (
    ("mean_matched_cka", "mean matched-layer CKA", ".3f"),
    ("n_matched_layers", "matched layers", "d"),
    ("n_tokens", "tokens", ",d"),
)
#: Per model pair and measure of ``similarity_measures``: the columns shown on hover.
MEASURE_HOVER = (("n_matched_layers", "matched layers", "d"), ("n_tokens", "rows", ",d"))
#: Per node of ``run_timings``: the columns shown on hover.
TIMING_HOVER = (
    ("seconds", "work s", ".2f"),
    ("cpu_seconds", "CPU s", ".2f"),
    ("load_seconds", "load s", ".2f"),
    ("save_seconds", "save s", ".2f"),
    ("peak_rss_mb", "peak memory MB", ".0f"),
)


def _menu_at_right(figure: go.Figure) -> go.Figure:
    """A dropdown figure (:func:`thinkalike.figures.dropdown_figure`) with its menu at the right, clear of the title."""
    if figure.layout.updatemenus:
        figure.layout.updatemenus[0].update(x=1.0, xanchor="right")
    return figure


def _usable(table: object) -> TypeGuard[pd.DataFrame]:
    """Whether ``table`` is a non-empty data frame."""
    return isinstance(table, pd.DataFrame) and not table.empty


def model_matrix_plotly(
    table: pd.DataFrame, value: str, label: str, hover: Sequence[tuple[str, str, str]] = ()
) -> go.Figure:
    """Models × models heatmap of column ``value`` of a table with one row per pair (``model_a``, ``model_b``; either
    order fills both cells), ``label`` naming the value; the ``hover`` columns that the table has are shown on hover.
    Pairs the table does not hold stay blank."""
    models = list(dict.fromkeys([*table["model_a"].astype(str), *table["model_b"].astype(str)]))
    position = {model: index for index, model in enumerate(models)}
    shown = [(column, name, form) for column, name, form in hover if column in table]
    matrix = np.full((len(models), len(models)), np.nan)
    extra = np.full((len(models), len(models), max(1, len(shown))), np.nan)
    for row in table.to_dict("records"):
        for a, b in ((row["model_a"], row["model_b"]), (row["model_b"], row["model_a"])):
            i, j = position[str(a)], position[str(b)]
            matrix[i, j] = row[value]
            extra[i, j, : len(shown)] = [row[column] for column, _, _ in shown]
    template = (
        "%{y} vs %{x}<br>"
        + label
        + " %{z:.3f}"
        + "".join(f"<br>{name} %{{customdata[{k}]:{form}}}" for k, (_, name, form) in enumerate(shown))
        + "<extra></extra>"
    )
    figure = go.Figure(
        go.Heatmap(
            z=matrix,
            x=models,
            y=models,
            customdata=extra,
            colorscale="Viridis",
            hovertemplate=template,
            colorbar={"title": {"text": label}},
        )
    )
    side = max(420, 90 + 40 * len(models))
    figure.update_layout(title=f"{label}, every pair of models", height=side, yaxis={"autorange": "reversed"})
    return figure


def cka_distance_plotly(distances: object) -> go.Figure | None:
    """The arccos CKA distance of every pair of models (``cka_distances``), its mean matched-layer CKA on hover."""
    if not _usable(distances):
        return None
    return model_matrix_plotly(distances, "arccos_distance", "arccos CKA distance", DISTANCE_HOVER)


def cka_heatmaps_plotly(saved: object) -> go.Figure | None:
    """Every pair's CKA of each layer against each, one pair at a time from a dropdown, the CI of each cell on hover:
    the ``cka`` pipeline's own ``cka_heatmaps_plotly``, drawn from the pairs' ``cka_table`` s
    (:func:`thinkalike.cka.figures.heatmap_plotly`), its menu moved clear of the title. Reading the saved figure,
    not the pairs' tables, keeps those tables inside the ``models.cka`` box of kedro-viz (a dataset read by nodes of
    two boxes is drawn outside both)."""
    if not isinstance(saved, go.Figure) or not saved.data:
        return None
    return _menu_at_right(go.Figure(saved))


def measure_matrices_plotly(summary: object) -> go.Figure | None:
    """Each measure's matched-layer mean for every pair of models (``similarity_measures``), one measure at a time
    from a dropdown."""
    if not _usable(summary):
        return None
    figures = {}
    for measure, rows in summary.groupby("measure", sort=False):
        kind = str(rows["kind"].iloc[0]) if "kind" in rows else "value"
        figures[str(measure)] = model_matrix_plotly(
            rows, "matched_mean", f"{measure} ({kind}), matched-layer mean", MEASURE_HOVER
        )
    return _menu_at_right(dropdown_figure(figures, "Measures"))


def mlem_similarity_plotly(feature: object, rsa: object) -> go.Figure | None:
    """The feature-based and RSA similarity of every pair of layers of every model (``mlem_feature_similarity``,
    ``mlem_rsa_similarity``), side by side (:func:`thinkalike.mlem.figures.similarity_plotly`)."""
    tables = {method: table for method, table in (("feature", feature), ("rsa", rsa)) if _usable(table)}
    if not tables:
        return None
    first = next(iter(tables.values()))
    labels = list(dict.fromkeys(zip(first["model_a"].astype(str), first["layer_a"].astype(int))))
    matrices = {method: matrix_from_long(table, labels) for method, table in tables.items()}
    figure = similarity_plotly(matrices, labels)
    return figure.update_layout(height=max(520, 200 + 12 * len(labels)))


def timeline_plotly(timings: object) -> go.Figure | None:
    """The run's nodes on a time line (``run_timings``): one bar per node from its start to its end, one row per
    pipeline, the node's work, CPU, load and save seconds and peak memory on hover."""
    if not _usable(timings):
        return None
    nodes = timings[timings["node"] != START_ROW].copy()
    if nodes.empty:
        return None
    started = pd.to_datetime(nodes["started_at"], utc=True)
    nodes["offset"] = (started - started.min()).dt.total_seconds()
    shown = [(column, name, form) for column, name, form in TIMING_HOVER if column in nodes]
    template = (
        "%{customdata[0]}<br>%{y}, from %{base:.2f} s for %{x:.2f} s"
        + "".join(f"<br>{name} %{{customdata[{k + 1}]:{form}}}" for k, (_, name, form) in enumerate(shown))
        + "<extra>%{fullData.name}</extra>"
    )
    figure = go.Figure()
    for status, rows in nodes.groupby("status", sort=False):
        custom = np.column_stack([rows["node"].astype(str), *(rows[column].to_numpy() for column, _, _ in shown)])
        figure.add_trace(
            go.Bar(
                x=rows["span_seconds"],
                base=rows["offset"],
                y=rows["pipeline"].astype(str),
                orientation="h",
                name=str(status),
                customdata=custom,
                hovertemplate=template,
            )
        )
    pipelines = list(dict.fromkeys(nodes["pipeline"].astype(str)))
    figure.update_layout(
        title="The run's nodes in time, by pipeline",
        barmode="overlay",
        xaxis_title="seconds since the first node started",
        height=max(320, 120 + 32 * len(pipelines)),
        yaxis={"categoryorder": "array", "categoryarray": pipelines[::-1]},
    )
    return figure
