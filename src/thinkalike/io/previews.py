"""Dataset previews for kedro-viz: what a dataset holds, or why there is nothing to show.

kedro-viz shows ``dataset.preview()`` in its side panel and picks the renderer from the *name*
of the method's return annotation: ``TablePreview`` (``{"columns", "index", "data"}``, cells shown
with ``String(value)``), ``JSONPreview`` (a JSON string), ``ImagePreview`` (a base64 PNG) or
``PlotlyPreview`` (a Plotly figure dict). The payload must be JSON-encodable by FastAPI (no numpy
arrays), and a preview that raises shows nothing at all. Previews built with
:func:`preview_or_message` never raise: a dataset with no saved version yet, or one that cannot be
read, previews as a message in its own kind saying so.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from kedro.io import AbstractDataset
from kedro_datasets._typing import ImagePreview, JSONPreview, PlotlyPreview, TablePreview

CELL_ITEMS = 12  # items of a list cell shown before "…"
UNAVAILABLE = "preview unavailable"
Preview = TypeVar("Preview")


def not_saved_message(dataset: AbstractDataset) -> str:
    """Why a dataset without a saved version has nothing to preview."""
    where = getattr(dataset, "_filepath", None)
    return (
        f"Not saved yet{f' (nothing under {where})' if where else ''}: "
        "a pipeline run writes it (see the run command above)."
    )


def preview_or_message(
    dataset: AbstractDataset, make: Callable[[], Preview], message: Callable[[str], Preview]
) -> Preview:
    """``make()`` when ``dataset`` has a saved version, else ``message(reason)``; an error becomes its message."""
    try:
        if not dataset.exists():
            return message(not_saved_message(dataset))
        return make()
    except Exception as error:  # noqa: BLE001 - a preview shows why it failed instead of nothing
        return message(f"Cannot preview: {type(error).__name__}: {error}")


def cell_text(values: Sequence[Any] | np.ndarray, limit: int = CELL_ITEMS) -> str:
    """A list cell as short text: ``[did, every, pilot, … (+5)]``."""
    items = list(values)
    shown = ", ".join(str(jsonable(item)) for item in items[:limit])
    more = f", … (+{len(items) - limit})" if len(items) > limit else ""
    return f"[{shown}{more}]"


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and non-finite floats as ``None`` (recursively)."""
    if isinstance(value, np.ndarray):
        return [jsonable(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def jsonable_table(table: Mapping[str, Any]) -> TablePreview:
    """A ``DataFrame.to_dict(orient="split")`` table with list cells as text and other cells JSON-safe."""

    def cell(value: Any) -> Any:
        if isinstance(value, (np.ndarray, list, tuple)):
            return cell_text(value)
        return jsonable(value)

    return TablePreview(
        {
            "columns": [str(column) for column in table["columns"]],
            "index": [jsonable(label) for label in table["index"]],
            "data": [[cell(value) for value in row] for row in table["data"]],
        }
    )


def rounded(values: np.ndarray, digits: int = 4) -> list:
    """Nested lists of ``values`` at ``digits`` significant digits (for previews of activations)."""
    return jsonable(np.vectorize(lambda x: float(f"{x:.{digits}g}"), otypes=[float])(np.asarray(values)))


def message_table(message: str) -> TablePreview:
    """A one-cell table saying ``message``."""
    return TablePreview({"columns": [UNAVAILABLE], "index": [0], "data": [[message]]})


def message_json(message: str) -> JSONPreview:
    """A JSON preview saying ``message``."""
    return JSONPreview(json.dumps({UNAVAILABLE: message}))


def message_plotly(message: str) -> PlotlyPreview:
    """An empty Plotly figure with ``message`` in the middle."""
    return PlotlyPreview(
        {
            "data": [],
            "layout": {
                "annotations": [
                    {"text": message, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
                ],
                "xaxis": {"visible": False},
                "yaxis": {"visible": False},
            },
        }
    )


def message_image(message: str) -> ImagePreview:
    """A small PNG (base64) with ``message`` written on it."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 1.2), dpi=100)
    figure.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return ImagePreview(base64.b64encode(buffer.getvalue()).decode("ascii"))
