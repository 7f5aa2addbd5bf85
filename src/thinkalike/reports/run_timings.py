"""The report's run-timings section (no Kedro): the run's timing paragraph
(:func:`thinkalike.reports.findings.timing.render_timing`), whether it kept its budget, every node on a time line and
each pipeline's total, from the ``run_timings`` table.

That table is saved when the run ends, after the report's node has run (:mod:`thinkalike.run_record.timing_hooks`), so the
report is written with a placeholder between :data:`START_MARKER` and :data:`END_MARKER` and the findings it was
made from embedded as JSON (element :data:`FINDINGS_ID`); once the table is saved, :func:`with_run_timings` renders
the section from it and those findings into the region (the hook writes the file again: temporary file and rename).
A report whose run never saved a table keeps the placeholder, which says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from thinkalike.reports.experiments import TIMING, ReportOutline, RunTables
from thinkalike.reports.findings.text import guarded, seconds_text
from thinkalike.reports.findings.timing import render_timing
from thinkalike.reports.html_blocks import frame_table, markdown_html, plotly_figure
from thinkalike.reports.interactive import timeline_plotly
from thinkalike.reports.sections import held_claims, section_html
from thinkalike.run_record.clock import TOTAL, pipeline_totals

START_MARKER = "<!-- run-timings:start -->"
END_MARKER = "<!-- run-timings:end -->"
#: The id of the ``<script type="application/json">`` element holding the findings the report was made from.
FINDINGS_ID = "report-findings"
_FINDINGS_ELEMENT = re.compile(rf"<script type=\"application/json\" id=\"{FINDINGS_ID}\">(.*?)</script>", re.DOTALL)
_REGION = re.compile(re.escape(START_MARKER) + ".*?" + re.escape(END_MARKER), re.DOTALL)
PLACEHOLDER = (
    "The run's timings are added to this section when the run ends: the `run_timings` table is saved "
    "after the last node, this report included. If this sentence stays, the run stopped before saving it "
    "(or the report was written outside a `kedro run`)."
)


def findings_element(findings: Mapping[str, Any]) -> str:
    """The findings as a JSON element of the page (``</`` escaped, so the text can never close the script)."""
    text = json.dumps(findings, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    return f'<script type="application/json" id="{FINDINGS_ID}">{text}</script>'


def embedded_findings(report: str) -> dict[str, Any]:
    """The findings a report embeds (:func:`findings_element`); a ``ValueError`` when it embeds none."""
    found = _FINDINGS_ELEMENT.search(report)
    if found is None:
        raise ValueError(f"the report embeds no findings (no element {FINDINGS_ID!r}): written before they were")
    return json.loads(found.group(1).replace("<\\/", "</"))


def pipeline_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per pipeline (and the run's total): its nodes, its time as written and its share of the total."""
    totals = pipeline_totals(table)
    total = (
        float(totals.loc[totals["pipeline"] == TOTAL, "seconds"].iloc[0])
        if (totals["pipeline"] == TOTAL).any()
        else float("nan")
    )
    rows = [
        {
            "pipeline": str(row["pipeline"]),
            "nodes": int(row["nodes"]),
            "time": seconds_text(row["seconds"]),
            "share": f"{100 * row['seconds'] / total:.0f} %" if total > 0 and row["pipeline"] != TOTAL else "",
        }
        for row in totals.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=["pipeline", "nodes", "time", "share"])


def timings_section(findings: Mapping[str, Any], table: pd.DataFrame | None, outline: ReportOutline) -> str:
    """The run-timings section between its markers: from ``table`` (the saved ``run_timings``) and the report's
    findings (their ``timing`` part collected from that table: :func:`with_run_timings`), as ``outline``'s
    :data:`~thinkalike.reports.experiments.TIMING` section declares it; without a table, :data:`PLACEHOLDER`."""
    timing = outline.section(TIMING)
    experiment = timing.experiment
    if experiment is None:
        raise ValueError(f"the report's {TIMING!r} section declares no experiment to show")
    if table is None:
        body = section_html(experiment, {}, [], {}, before=markdown_html(PLACEHOLDER))
        return f"{START_MARKER}\n{body}\n{END_MARKER}"
    claims = held_claims(timing.claims(findings)) if timing.claims is not None else []
    timeline = timeline_plotly(table)
    figures = (
        {"timeline_interactive": plotly_figure(experiment.figures[0].caption, timeline, "figure-timeline")}
        if timeline is not None
        else {}
    )
    body = section_html(
        experiment,
        findings,
        claims,
        figures,
        before=markdown_html(render_timing(findings, outline.pipelines, outline.timing_labels)),
        after=frame_table(pipeline_table(table), "Each pipeline's time (its nodes' work)"),
    )
    return f"{START_MARKER}\n{body}\n{END_MARKER}"


def with_run_timings(report: str, table: pd.DataFrame, outline: ReportOutline) -> str:
    """``report`` with its run-timings region rendered from ``table`` and the findings it embeds (whose timing part
    becomes the table's); a ``ValueError`` when the report has no such region or no findings (an older report)."""
    if len(_REGION.findall(report)) != 1:
        raise ValueError("the report has no run-timings region (written before it had one)")
    collect = outline.section(TIMING).collect
    if collect is None:
        raise ValueError(f"the report's {TIMING!r} section declares no collect")
    findings = {**embedded_findings(report), TIMING: guarded(collect, RunTables({"run_timings": table}, {}, {}))}
    section = timings_section(findings, table, outline)
    report = _REGION.sub(lambda _: section, report)
    return _FINDINGS_ELEMENT.sub(lambda _: findings_element(findings), report)
