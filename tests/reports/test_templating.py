"""The report's and the findings page's templates (thinkalike.reports.templating): a value the template needs and is
not given is an error, not a blank; the HTML templates escape every value but the blocks made as HTML; the
templates ship with the package."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2
import pytest

from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.findings import collect_findings
from thinkalike.reports.report import report_html
from thinkalike.reports.templating import TEMPLATES, render_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIR = ROOT / "src" / "thinkalike" / "reports" / "templates"


def test_a_value_the_template_needs_and_is_not_given_is_an_error():
    with pytest.raises(jinja2.UndefinedError, match="scorecard"):
        render_template("findings.md.j2", filters={"wrap": str, "prose": str})


def test_the_html_templates_escape_values_but_not_the_blocks_made_as_html():
    outline = report_outline()
    page = report_html("<b>T</b> & 'u'", collect_findings({"parameters": {}}, outline), {}, {}, outline)
    assert "<title>&lt;b&gt;T&lt;/b&gt; &amp; &#39;u&#39;</title>" in page and "<b>T</b>" not in page
    assert page.count("<section id='") == 1 + len(outline.experiments)  # the sections' HTML went in as HTML


def test_the_templates_ship_as_package_data():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package, folder = TEMPLATES
    assert f"{folder}/*.j2" in declared[package]
    assert {path.name for path in TEMPLATE_DIR.glob("*.j2")} == {
        "blocks.html.j2",
        "findings.md.j2",
        "report.html.j2",
        "section.html.j2",
    }
