"""The experiments report's page (thinkalike.reports.report), from planted outputs: one section per experiment behind
a table of contents, figures beside the sentences that read them, interactive figures drawn from the tables with
one copy of plotly.js, missing inputs named in their section with their pipeline, the dimensions each measure
compared (issue 39), and the run-timings region rendered from a timings table after the fact."""

from __future__ import annotations

import base64
import json
import re

import markupsafe
import pandas as pd
import pytest

from thinkalike.cka.figures import heatmap_plotly
from thinkalike.figures import dropdown_figure
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.experiments import (
    CKA_HEATMAPS,
    Shown,
    claims_by_figure,
)
from thinkalike.reports.findings import collect_findings
from thinkalike.reports.findings.scorecard import QUESTIONS
from thinkalike.reports.measure_space import measure_space_sentences
from thinkalike.reports.report import MissingInput, report_html
from thinkalike.reports.run_timings import (
    END_MARKER,
    PLACEHOLDER,
    START_MARKER,
    embedded_findings,
    with_run_timings,
)
from thinkalike.run_record.clock import COLUMNS

OUTLINE = report_outline()  # the project's report sections

PNG = b"\x89PNG\r\n\x1a\nplanted"
PLOTLY_BANNER = re.compile(r"\* plotly\.js v\d")


def _distances() -> pd.DataFrame:
    rows = [("a", "a", 0.0, 1.0), ("a", "b", 1.2, 0.36), ("b", "b", 0.0, 1.0)]
    return pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "layers_a": 2,
                "layers_b": 3,
                "arccos_distance": d,
                "mean_matched_cka": c,
                "n_matched_layers": 2,
                "n_finite_layers": 2,
                "n_tokens": 100,
            }
            for a, b, d, c in rows
        ]
    )


def _pair_table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model_a": "a",
                "model_b": "b",
                "layer_a": i,
                "layer_b": j,
                "cka": 0.1 * (i + j + 1),
                "ci_low": 0.0,
                "ci_high": 1.0,
                "estimator": "unbiased",
            }
            for i in range(2)
            for j in range(3)
        ]
    )


def _measures_table(
    a: str, b: str, n_tokens: int, measures: dict[str, int | None], width: int = 32, old: bool = False
) -> pd.DataFrame:
    """A pair's measures table: each measure (name → its ``max_dims``, ``None``: every dimension), layer 0 × 0."""
    rows = [
        {
            "model_a": a,
            "model_b": b,
            "layer_a": 0,
            "layer_b": 0,
            "measure": name,
            "variant": "configured",
            "value": 0.5,
            "n_tokens": n_tokens,
            "options": json.dumps({} if limit is None else {"max_dims": limit}),
            "dims_a": width if limit is None else limit,
            "dims_b": width if limit is None else limit,
        }
        for name, limit in measures.items()
    ]
    table = pd.DataFrame(rows)
    return table.drop(columns=["options", "dims_a", "dims_b"]) if old else table


def planted_report(**extra) -> str:
    """A report of planted outputs (CKA distances and the pairs' heatmaps; ``extra`` tables besides), four inputs
    missing."""
    heatmaps = dropdown_figure({"a vs b": heatmap_plotly(_pair_table())}, "CKA")
    tables = {
        "cka_distances": _distances(),
        CKA_HEATMAPS: heatmaps,
        "parameters": {"cka": {"measures": {"names": ["cka", "mean_cca"]}}},
        **extra,
    }
    return report_html(
        "T",
        collect_findings(tables, OUTLINE),
        tables,
        {"stitching_figure": PNG, "scaling_figure": None},
        OUTLINE,
        [
            MissingInput("stitching_penalties", "stitching"),
            MissingInput("models.cka.a__c.measures_table", "cka"),
            MissingInput("models.cka.b__c.measures_table", "cka"),
            MissingInput("odd_one", "?"),
        ],
    )


def _section(page: str, key: str) -> str:
    start = page.index(f"<section id='{key}'")
    return page[start : page.index("</section>", start)]


def test_the_page_has_a_section_per_experiment_behind_its_table_of_contents():
    page = planted_report()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    contents = page[page.index("<nav class='contents'") : page.index("</nav>")]
    anchors = re.findall(r"href='#([^']+)'", contents)
    assert anchors == ["scorecard"] + [e.key for e in OUTLINE.experiments] + [
        "missing"
    ]  # and the inputs no section reads
    for anchor in anchors:
        assert page.count(f"<section id='{anchor}'") == 1
    # the first section after the contents is the papers' scorecard: a table with one row per question
    after = page[page.index("</nav>") :]
    assert (
        re.search(r"<h2>([^<]*)</h2>", after).group(1) == "The papers&#x27; questions"
        or re.search(r"<h2>([^<]*)</h2>", after).group(1) == "The papers' questions"
    )
    scorecard = _section(page, "scorecard")
    assert scorecard.count("<tr>") == 1 + len(QUESTIONS)  # the header and one row per question
    for verdict in re.findall(r"<td><strong>([^<]*)</strong>", scorecard):
        assert verdict in ("one run", "not testable")  # one run: estimates, no verdict
    for experiment in OUTLINE.experiments:
        # escaped as the template escapes it (Jinja2 writes an apostrophe as &#39;)
        assert f"<strong>Question.</strong> {markupsafe.escape(experiment.question)}" in page


def test_figures_are_embedded_once_and_interactive_ones_drawn_from_the_tables():
    page = planted_report()
    assert len(PLOTLY_BANNER.findall(page)) == 1  # exactly one copy of plotly.js
    assert page.count("cdn.plot.ly/plotly") == page.count("<script src=") == 0  # nothing fetched
    assert page.count(f"data:image/png;base64,{base64.b64encode(PNG).decode()}") == 1
    assert "figure-cka_distance" in _section(page, "cka") and "figure-cka_heatmaps" in _section(page, "cka")
    # the distance matrix holds the saved distance of a vs b, in both cells
    call = re.search(r'Plotly\.newPlot\(\s*"figure-cka_distance",\s*(\[.*?\]),\s*\{', page, re.DOTALL)
    z = json.loads(call.group(1))[0]["z"]
    assert z[0][1] == z[1][0] == pytest.approx(1.2) and z[0][0] == 0.0
    assert page.count("figure-mlem_similarity") == 0  # its tables were not saved: left out, not drawn empty
    assert page.count("scaling_figure") == 0 and "Scaling family: not in these outputs" in page


def test_missing_inputs_are_named_in_their_section_with_their_pipeline():
    page = planted_report()
    stitching = _section(page, "stitching")
    assert "<code>stitching_penalties</code> (pipeline <code>stitching</code>)" in stitching
    assert "kedro run --pipelines stitching" in stitching
    measures = _section(page, "measures")
    assert "<code>models.cka.&lt;pair&gt;.measures_table</code> (pipeline <code>cka</code>), 2 pairs" in measures
    assert "<code>odd_one</code> (pipeline <code>?</code>)" in _section(page, "missing")
    assert OUTLINE.experiment_of("models.nli.encoder.model_config").key == "nli"
    assert OUTLINE.experiment_of("models.gelu_1l.model_config").key == "zoo"
    assert OUTLINE.experiment_of("models.cka.a__b.measures_table").key == "measures"


def test_a_claim_goes_beside_the_figure_that_reads_it_the_most_specifically():
    figures = (Shown("accuracy", "", "nli", ("nli",)), Shown("stitching", "", "nli", ("nli.stitching",)))
    claims = [
        {"id": i}
        for i in ("nli.test_below_rule", "nli.stitching_deeper.between", "nli.stitching.x", "other.thing", "nli")
    ]
    grouped = claims_by_figure(claims, figures)
    assert [c["id"] for c in grouped["accuracy"]] == ["nli.test_below_rule", "nli"]
    assert [c["id"] for c in grouped["stitching"]] == ["nli.stitching_deeper.between", "nli.stitching.x"]
    assert [c["id"] for c in grouped[None]] == ["other.thing"]


def test_the_measures_section_says_where_the_cca_family_compared_fewer_dimensions():
    tables = {
        "models.cka.a__a.measures_table": _measures_table("a", "a", 48, {"cka": None, "mean_cca": 4}),
        "models.cka.a__b.measures_table": _measures_table("a", "b", 48, {"cka": None, "mean_cca": 4}),
        "models.cka.b__b.measures_table": _measures_table("b", "b", 5, {"cka": None}),  # too few rows: left out
        "models.cka.c__c.measures_table": _measures_table("c", "c", 640, {"cka": None, "mean_cca": 64}),  # all 32
        "models.cka.d__d.measures_table": _measures_table("d", "d", 48, {"cka": None, "mean_cca": 4}, old=True),
        "models.cka.e__e.measures_table": None,  # never saved
    }
    parameters = {"cka": {"measures": {"names": ["cka", "mean_cca"]}}}
    sentences = measure_space_sentences(tables, parameters)
    assert sentences == [
        (
            "`mean_cca` compared the top 4 principal components of 32 dimensions (48 rows; they need 10 rows per "
            "dimension) for `a` with itself and `a`–`b`."
        ),
        "`mean_cca` left out for `b` with itself: 5 rows are too few; they need 10 rows per dimension.",
        (
            "The measures tables of `d` with itself do not say which dimensions were compared (saved before they "
            "recorded `dims_a`, `dims_b`, `options` and `n_tokens`; rerun `cka` for them)."
        ),
    ]
    page = planted_report(**tables)
    assert "compared the top 4 principal components of 32 dimensions" in _section(page, "measures")
    # without the configured names, a measure some pair has and another lacks is left out there
    assert measure_space_sentences(
        {k: tables[k] for k in ("models.cka.a__b.measures_table", "models.cka.b__b.measures_table")}, {}
    )[1].startswith("`mean_cca` left out for `b` with itself")
    assert measure_space_sentences({}, parameters) == []
    everything = measure_space_sentences({"x": tables["models.cka.c__c.measures_table"]}, parameters)
    assert everything == ["Every measure compared every dimension of each layer (no `max_dims`)."]


def planted_timings(seconds: tuple[float, ...] = (2.0, 3.5)) -> pd.DataFrame:
    """A run_timings table: the (start) row, then one node per span, alternately in cka and report."""
    start = pd.Timestamp("2026-01-01T00:00:00Z")
    rows = [
        {
            "node": "(start)",
            "namespace": "",
            "pipeline": "(run)",
            "status": "completed",
            "started_at": start,
            "seconds": 0.0,
            "span_seconds": 0.5,
        }
    ]
    offset = 0.5
    for index, span in enumerate(seconds):
        rows.append(
            {
                "node": f"cka.node_{index}",
                "namespace": "cka",
                "pipeline": ["cka", "report"][index % 2],
                "status": "completed",
                "started_at": start + pd.Timedelta(seconds=offset),
                "seconds": span,
                "span_seconds": span,
            }
        )
        offset += span
    table = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    table["run_seconds"] = offset
    for column in ("cpu_seconds", "load_seconds", "save_seconds", "other_seconds", "peak_rss_mb", "peak_rss_growth_mb"):
        table[column] = table[column].fillna(0.0).astype(float)
    table["worker"] = ""
    return table


def test_the_run_timings_are_rendered_into_their_region_from_the_table():
    page = planted_report()
    region = page[page.index(START_MARKER) : page.index(END_MARKER)]
    assert "run_timings" in region and PLACEHOLDER.split(":")[0] in region.replace("&#x27;", "'")
    assert embedded_findings(page)["timing"] == {"missing": ["run_timings"]}

    timed = with_run_timings(page, planted_timings(), OUTLINE)
    region = timed[timed.index(START_MARKER) : timed.index(END_MARKER)]
    assert "The run&#x27;s timings are added" not in region and "figure-timeline" in region
    assert "<td>cka</td><td>1</td><td>2.0 s</td>" in region and "<td>report</td><td>1</td><td>3.5 s</td>" in region
    assert embedded_findings(timed)["timing"]["pipelines"] == {
        "cka": {"seconds": 2.0, "nodes": 1},
        "report": {"seconds": 3.5, "nodes": 1},
    }
    assert timed.replace(region, "") == page.replace(
        page[page.index(START_MARKER) : page.index(END_MARKER)], ""
    ).replace(
        json.dumps(embedded_findings(page), ensure_ascii=False, sort_keys=True),
        json.dumps(embedded_findings(timed), ensure_ascii=False, sort_keys=True),
    )  # nothing else changed
    assert len(PLOTLY_BANNER.findall(timed)) == 1
    again = with_run_timings(timed, planted_timings((1.0,)), OUTLINE)  # a region rendered once can be rendered again
    assert "<td>cka</td><td>1</td><td>1.0 s</td>" in again and again.count("3.5 s") == 0
    with pytest.raises(ValueError, match="no run-timings region"):
        with_run_timings("<html>an older report</html>", planted_timings(), OUTLINE)
