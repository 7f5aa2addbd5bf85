"""Forest plots of a question's parts as inline SVG (one line of markup, so a Markdown table cell can hold it).

Each part is one row on a common axis in units of its own δ, ``x = effect / δ``: the band ``[−1, +1]`` (grey) is
"smaller than the smallest effect of interest", the line at 0 the part's reference; the replicates' effects are
dots, the pooled 95 % interval a bar with the mean a tick. Parts of one question have different scales (CKA,
robust z, shares), and δ is what the plan fixed for each, so δ units put them side by side without a second axis.
The axis runs over ``±R``, ``R`` the largest ``|x|`` of the question (at least 2); nothing is clipped. Written by
hand (a few rectangles and circles) rather than with matplotlib, whose SVG carries fonts, ids and metadata that
change between versions and would make the generated page differ from run to run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Pixels: the plot's width, one part's row height, the left and right margins.
WIDTH, ROW, MARGIN = 160, 12, 4
#: The smallest half-range of the axis in δ units (the band ±1 always shows with room either side).
MIN_RANGE = 2.0


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def half_range(parts: Sequence[Mapping[str, Any]]) -> float:
    """``R``: the largest |effect / δ| or |interval end / δ| over ``parts`` (at least :data:`MIN_RANGE`)."""
    extent = MIN_RANGE
    for part in parts:
        delta = float(part["delta"])
        values = _finite(list(part.get("effects") or []) + list(part.get("ci95") or []))
        extent = max([extent] + [abs(v) / delta for v in values])
    return extent


def forest_svg(named_parts: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """One SVG (a single line) with a row per ``(name, part)``: ``part`` holds ``effects``, ``mean``, ``ci95`` and
    ``delta`` as docs/findings.json stores them. A part without a mean is an empty row. Each row's ``<title>`` says
    its name, mean and interval in the part's own units, for a reader (and a screen reader) hovering over it."""
    parts = [part for _, part in named_parts]
    extent = half_range(parts)
    height = ROW * len(named_parts)
    span = WIDTH - 2 * MARGIN

    def x(value: float, delta: float) -> float:
        return round(MARGIN + span * (value / delta + extent) / (2 * extent), 2)

    shapes = [
        f'<rect x="{x(-1, 1)}" y="0" width="{round(x(1, 1) - x(-1, 1), 2)}" height="{height}" fill="#e4e4e4"/>',
        f'<line x1="{x(0, 1)}" y1="0" x2="{x(0, 1)}" y2="{height}" stroke="#888" stroke-width="1"/>',
    ]
    for index, (name, part) in enumerate(named_parts):
        delta, middle = float(part["delta"]), index * ROW + ROW / 2
        mean, ci95 = part.get("mean"), part.get("ci95")
        title = f"{name}: no estimate" if mean is None else f"{name}: {mean:+.3g}"
        if ci95:
            title += f" [{ci95[0]:+.3g}, {ci95[1]:+.3g}]"
        row = [f"<title>{_escape(title)} (δ = {delta:g})</title>"]
        for effect in _finite(list(part.get("effects") or [])):
            row.append(f'<circle cx="{x(effect, delta)}" cy="{middle}" r="1.6" fill="#6a8caf"/>')
        if ci95 and mean is not None:
            low, high = x(float(ci95[0]), delta), x(float(ci95[1]), delta)
            row.append(f'<line x1="{low}" y1="{middle}" x2="{high}" y2="{middle}" stroke="#1a1a1a" stroke-width="2"/>')
            row.append(
                f'<line x1="{x(float(mean), delta)}" y1="{middle - 4}" x2="{x(float(mean), delta)}" '
                f'y2="{middle + 4}" stroke="#1a1a1a" stroke-width="2"/>'
            )
        shapes.append(f'<g class="part">{"".join(row)}</g>')
    label = f"forest plot in units of δ, axis ±{extent:.3g}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{label}">{"".join(shapes)}</svg>'
    )


def _escape(text: str) -> str:
    """XML text (``&``, ``<``, ``>``) with ``|`` as its entity, so the markup never splits a Markdown table cell."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;")
