"""What every method's figures share: their style, and several figures as one (no Kedro).

Style: figures are :class:`matplotlib.figure.Figure` objects made without pyplot, so no backend is
chosen or forced here: they save anywhere (Kedro, MLflow) and display inline in notebooks. They are
sized to be read in a paper: at least :data:`MIN_FIGURE_WIDTH_IN` inches wide at :data:`FIGURE_DPI`
dots per inch (≥ 1050 px); plotly figures are :data:`PLOTLY_WIDTH` px wide.

Several figures as one: a dict of matplotlib figures per file name, one plotly figure with a dropdown.
A method's per-pair (or per-model) figures are drawn by its summary node and saved as one dataset
each (kedro-viz then draws them inside the method's box, not on the top level): matplotlib figures
as a folder of PNGs (:class:`thinkalike.io.atomic.MatplotlibDataset` saves a dict ``{file: figure}``),
plotly figures as one figure whose dropdown shows one of them at a time (kedro-viz previews one
plotly figure per dataset).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import matplotlib
import plotly.graph_objects as go
from cycler import cycler

FIGURE_DPI = 150
MIN_FIGURE_WIDTH_IN = 7.0  # 7 in × 150 dpi = 1050 px
PLOTLY_WIDTH = 1050  # px: the interactive figures as wide as the PNGs
LAYER_LABEL = "layer (0 = embeddings)"

#: 40 distinct (line style, colour) combinations: the 10 tab10 colours solid, then dashed, …
DISTINCT_LINES = cycler(linestyle=["-", "--", "-.", ":"]) * cycler(color=matplotlib.color_sequences["tab10"])

Item = TypeVar("Item")


def figure_files(items: Mapping[str, Item], draw: Callable[[Item], Any]) -> dict[str, Any]:
    """``{"<name>.png": draw(item)}`` for every item: the figures of a folder dataset, one file per name."""
    return {f"{name}.png": draw(item) for name, item in items.items()}


def dropdown_figure(figures: Mapping[str, go.Figure], title: str) -> go.Figure:
    """One plotly figure holding every figure of ``figures`` (single-axes figures), the first shown; a dropdown
    labelled with the dict's keys shows another (its traces, title and axes). No figures: an empty one
    titled ``title``."""
    names = list(figures)
    if not names:
        return go.Figure(layout={"title": f"{title}: nothing to show"})
    combined = go.Figure(layout=figures[names[0]].layout)
    spans = []
    for name in names:
        start = len(combined.data)
        combined.add_traces(list(figures[name].data))
        spans.append(range(start, len(combined.data)))
    total = len(combined.data)
    for position, trace in enumerate(combined.data):
        trace.visible = position in spans[0]
    buttons = []
    for name, span in zip(names, spans):
        layout = figures[name].layout
        buttons.append(
            {
                "label": name,
                "method": "update",
                "args": [
                    {"visible": [position in span for position in range(total)]},
                    {
                        "title": layout.title.to_plotly_json(),
                        "xaxis": layout.xaxis.to_plotly_json(),
                        "yaxis": layout.yaxis.to_plotly_json(),
                    },
                ],
            }
        )
    combined.update_layout(
        updatemenus=[
            {
                "buttons": buttons,
                "direction": "down",
                "active": 0,
                "showactive": True,
                "x": 0.0,
                "xanchor": "left",
                "y": 1.12,
                "yanchor": "bottom",
            }
        ],
        margin={"t": 120},
    )
    return combined


def legend_if_labelled(axis: Any, **options: Any) -> None:
    """``axis.legend(**options)`` when the axis has a labelled artist; an empty panel (nothing to compare) gets
    none instead of matplotlib's "No artists with labels" warning."""
    if axis.get_legend_handles_labels()[0]:
        axis.legend(**options)
