"""One self-contained HTML report of every experiment, from saved outputs only (no Kedro import; recomputes
nothing), that opens offline in any browser. Its layout is the template ``report.html.j2`` (each experiment's
section: ``section.html.j2``; :mod:`thinkalike.reports.templating`).

The page: where its findings come from, a table of contents, the papers' scorecard (its first section: one row per
question, this run's effect and the verdict, :mod:`thinkalike.reports.findings.scorecard`), then one section per experiment
(the experiments of the report's outline, :class:`thinkalike.reports.experiments.ReportOutline`, in the pipelines'
stage order: the corpus and the zoo, CKA, the measures beyond CKA, the scaling family, stitching, MLEM, the
embedding space, NLI, the run's timings), each with the question it answers, what is
missing (named with the pipeline that makes it), its figures each beside the findings' sentences that read it (the
claims that hold in this run, :mod:`thinkalike.reports.findings`), the sentences no figure reads and its key numbers;
the measures section also says where the CCA family compared a reduced space and where a measure was left out
(:mod:`.measure_space`). Last, the missing inputs no section reads and an index of the run's other outputs (each
with its pipeline and what it holds: :func:`describe_output`).

Figures: the saved PNGs, embedded as base64; and the figures worth a hover (models × models and layers × layers
matrices, the run's time line) drawn interactively from the saved tables (:mod:`.interactive`) by the one copy of
plotly.js the page embeds in its head. The findings the page was made from are embedded as JSON: the run's timings
are rendered into their section from them when the run ends (:mod:`.run_timings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markdown_it import MarkdownIt

from thinkalike.reports.experiments import TIMING, Experiment, ReportOutline
from thinkalike.reports.findings import findings_document, provenance
from thinkalike.reports.findings.claims import section_of
from thinkalike.reports.findings.scorecard import render_run_beside_committed
from thinkalike.reports.html_blocks import (
    markdown_html,
    plotly_figure,
    plotly_script,
    png_figure,
)
from thinkalike.reports.run_timings import findings_element, timings_section
from thinkalike.reports.sections import MissingInput, missing_html, section_html
from thinkalike.reports.templating import render_template

__all__ = ["IndexedOutput", "MissingInput", "describe_output", "report_html"]


@dataclass(frozen=True)
class IndexedOutput:
    """An output the report lists but does not show: its catalog name, its pipeline and what it holds."""

    name: str
    pipeline: str
    holds: str


def describe_output(data: Any) -> str:
    """What a saved output holds, in a few words: a table's rows and columns, a folder's number of figures, a
    plotly figure's number of traces, a text's length."""
    if isinstance(data, pd.DataFrame):
        return f"table, {len(data):,} rows × {data.shape[1]} columns"
    if isinstance(data, bytes):
        return "figure (PNG)"
    if isinstance(data, str):
        return f"text, {len(data):,} characters"
    if isinstance(data, Mapping):
        values = list(data.values())
        if values and all(isinstance(value, bytes) for value in values):
            return f"folder of {len(values)} figures (PNG)"
        return f"{len(values)} entries"
    if hasattr(data, "data") and hasattr(data, "layout"):  # a plotly figure
        return f"interactive figure (plotly), {len(data.data)} traces"
    return type(data).__name__


def figure_blocks(
    tables: Mapping[str, Any], images: Mapping[str, bytes | None], outline: ReportOutline
) -> dict[str, str]:
    """Every figure of ``outline`` that can be shown, as HTML by name: the saved PNGs found in ``images`` and the
    interactive figures drawn from ``tables`` (a figure whose data is missing is left out)."""
    figures = outline.figures()
    captions = {figure.name: figure.caption for figure in figures}
    blocks = {name: png_figure(captions[name], image) for name, image in images.items() if image and name in captions}
    for figure in figures:
        drawn = figure.draw(tables) if figure.draw is not None else None
        if drawn is not None:
            blocks[figure.name] = plotly_figure(
                figure.caption, drawn, f"figure-{figure.name.removesuffix('_interactive')}"
            )
    return blocks


def _experiment_html(
    experiment: Experiment,
    findings: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    blocks: Mapping[str, str],
    missing: Sequence[MissingInput],
    tables: Mapping[str, Any],
    outline: ReportOutline,
) -> str:
    """One experiment's section (the run-timings one: its placeholder region, :mod:`.run_timings`)."""
    if experiment.key == TIMING:
        return timings_section(findings, None, outline)
    held = [claim for claim in claims if section_of(claim["id"]) == experiment.key]
    after = experiment.details(tables) if experiment.details is not None else ""
    return section_html(experiment, findings, held, blocks, missing, after=after)


#: The scorecard section's anchor: the report's first section.
SCORECARD = "scorecard"


def scorecard_table(rows: Sequence[Mapping[str, Any]], committed: Mapping[str, Any] | None = None) -> str:
    """The papers' scorecard, the report's first section, as an HTML table: one row per question, this run's
    estimates beside the committed replicates' verdicts (``committed``: docs/findings.json;
    :func:`~thinkalike.reports.findings.scorecard.render_run_beside_committed`)."""
    return MarkdownIt("commonmark").enable("table").render(render_run_beside_committed(rows, committed))


def report_html(
    title: str,
    findings: Mapping[str, Any],
    tables: Mapping[str, Any],
    images: Mapping[str, bytes | None],
    outline: ReportOutline,
    missing: Sequence[MissingInput] = (),
    indexed: Sequence[IndexedOutput] = (),
    committed: Mapping[str, Any] | None = None,
) -> str:
    """The whole report (module docstring) from one run's collected ``findings``
    (:func:`~thinkalike.reports.findings.collect_findings`), its loaded ``tables`` (catalog name → data; the pairs'
    tables and ``parameters`` among them), the saved PNGs (``images``: catalog name → bytes, ``None``: not saved),
    the ``missing`` inputs and the ``indexed`` other outputs; ``outline``: the report's sections, each declared by
    its pipeline (:func:`thinkalike.pipelines.specs.report_outline`); ``committed``: the committed replicates'
    document (docs/findings.json), whose verdicts the scorecard shows beside this run's estimates."""
    document = findings_document([findings], outline)
    experiments = outline.experiments
    blocks = figure_blocks(tables, images, outline)
    by_section: dict[str, list[MissingInput]] = {}
    unread: list[MissingInput] = []
    for entry in missing:
        experiment = outline.experiment_of(entry.name)
        (by_section.setdefault(experiment.key, []) if experiment else unread).append(entry)
    sections = [
        _experiment_html(
            experiment, findings, document["claims"], blocks, by_section.get(experiment.key, []), tables, outline
        )
        for experiment in experiments
    ]
    contents = [(SCORECARD, "The papers' questions"), *((e.key, e.title) for e in experiments)]
    if unread:
        contents.append(("missing", "Missing inputs"))
    if indexed:
        contents.append(("outputs", "Every other output of the run"))
    return render_template(
        "report.html.j2",
        title=title,
        plotly_script=plotly_script(),
        provenance=markdown_html(provenance(document)),
        contents=contents,
        scorecard_anchor=SCORECARD,
        scorecard=scorecard_table(document["scorecard"], committed),
        experiments=sections,
        unread=missing_html(unread) if unread else "",
        indexed=list(indexed),
        findings_element=findings_element(findings),
    )
