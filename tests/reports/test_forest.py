"""Forest plots (reports/findings/forest.py): where each mark lands, read back from the SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from thinkalike.reports.findings.forest import MARGIN, WIDTH, forest_svg

SVG = "{http://www.w3.org/2000/svg}"


def position(value_in_delta: float, extent: float) -> float:
    return MARGIN + (WIDTH - 2 * MARGIN) * (value_in_delta + extent) / (2 * extent)


def test_marks_land_at_their_values_in_units_of_delta():
    parts = [
        ("a", {"delta": 0.1, "effects": [0.1, 0.3, -0.2, 0.2], "mean": 0.1, "ci95": [-0.2, 0.4]}),
        ("b | with a pipe", {"delta": 2.0, "effects": [1.0, 3.0], "mean": 2.0, "ci95": [1.0, 3.0]}),
        ("unmeasured", {"delta": 1.0, "effects": [None, None], "mean": None}),
    ]
    markup = forest_svg(parts)
    assert "\n" not in markup and "|" not in markup  # one line, safe in a Markdown table cell
    root = ET.fromstring(markup)
    extent = 4.0  # a's interval end 0.4 / δ 0.1
    assert root.get("aria-label") == "forest plot in units of δ, axis ±4"
    band = root.find(f"{SVG}rect")
    assert float(band.get("x")) == pytest.approx(position(-1, extent), abs=0.01)
    assert float(band.get("x")) + float(band.get("width")) == pytest.approx(position(1, extent), abs=0.02)
    rows = root.findall(f"{SVG}g")
    assert len(rows) == 3
    dots = [float(c.get("cx")) for c in rows[0].findall(f"{SVG}circle")]
    assert dots == pytest.approx([position(v, extent) for v in (1, 3, -2, 2)], abs=0.01)
    bar, tick = rows[1].findall(f"{SVG}line")
    assert (float(bar.get("x1")), float(bar.get("x2"))) == pytest.approx(
        (position(0.5, extent), position(1.5, extent)), abs=0.01
    )
    assert float(tick.get("x1")) == pytest.approx(position(1.0, extent), abs=0.01)
    assert rows[1].find(f"{SVG}title").text == "b &#124; with a pipe: +2 [+1, +3] (δ = 2)".replace("&#124;", "|")
    assert not rows[2].findall(f"{SVG}circle") and not rows[2].findall(f"{SVG}line")


def test_the_axis_is_at_least_two_deltas_either_side():
    root = ET.fromstring(forest_svg([("small", {"delta": 1.0, "effects": [0.1], "mean": 0.1, "ci95": [0.0, 0.2]})]))
    assert root.get("aria-label").endswith("±2")
