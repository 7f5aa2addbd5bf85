"""A matplotlib figure rendered to PNG once, however many times it is written (the catalog's file, MLflow's
artifact, a report): ``savefig``'s defaults, the bytes kept on the figure for the next caller. Figures are
node outputs, not changed after they are returned, so the first rendering stands for all."""

from __future__ import annotations

import io
from typing import Any

_RENDERED = "_thinkalike_png"


def rendered_png(figure: Any) -> bytes:
    """``figure.savefig(format="png")``'s bytes (savefig's defaults otherwise), rendered on the first call only."""
    cached = getattr(figure, _RENDERED, None)
    if cached is None:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        cached = buffer.getvalue()
        setattr(figure, _RENDERED, cached)
    return cached
