"""One self-contained HTML report of every experiment, from saved outputs only (no Kedro import; recomputes
nothing): the findings' claims (:mod:`thinkalike.reports.findings`, the scaling family's verdicts among them:
:func:`thinkalike.reports.findings.scaling.claims_scaling`) and the saved figures, each PNG embedded as
base64 with its caption, so the one file opens offline in any browser. An experiment whose outputs are missing is named, with the pipeline that makes them.
Last, an index of the run's other outputs (the summaries' tables, figure folders, interactive figures and texts that
the findings do not quote): each with its pipeline and what it holds (:func:`describe_output`), so that one page
says everything the run saved and where to look for it (the catalog name, in kedro-viz, ``data/`` and MLflow).

The markdown of the paragraphs is rendered by markdown-it-py (CommonMark).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markdown_it import MarkdownIt

#: The figures the report shows, in order: (catalog name, caption, pipeline that draws it).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("cka_distance_figure", "CKA distance (arccos of matched-layer CKA) between every pair of models "
                            "(Brown et al. 2023 fig. 2).", "cka"),
    ("cka_group_curves_figure", "CKA by relative depth within and between groups of models (SoLU, GeLU).", "cka"),
    ("stitching_figure", "Stitching penalty of f's early layers into g's late layers, per layer and kind of φ "
                         "(Brown et al. 2023 §3, fig. 1).", "stitching"),
    ("scaling_figure", "The width/depth family: intra-model CKA against size (fig. 10), each member's "
                       "intermediate-layer CKA against the others with its robust z (fig. 9), early-layer CKA "
                       "across scale (fig. 3) and the largest member's blocks.", "scaling"),
    ("measure_grounding_figure", "Which similarity measure registers what (Klabunde et al. 2025; Ding et al. "
                                 "2021): layer monotonicity, sensitivity to removed principal components, the null "
                                 "on permuted and independent rows, specificity and trained vs untrained.", "cka"),
    ("mlem_similarity_figure", "Feature-based (MLEM, weighted Kendall τ) and RSA similarity of layers "
                               "(Jalouzot et al. 2024).", "mlem"),
    ("mlem_mds_figure", "MDS of the layers by their MLEM feature importances.", "mlem"),
    ("embedding_alignment_figure", "Layers of two seed replicas aligned through the embedding space "
                                   "(Dar et al. 2022 §5.1).", "embedding"),
    ("embedding_zero_shot_figure", "Zero-shot stitching through the embedding space (Dar et al. 2022 §5.2).",
     "embedding"),
    ("models.nli.accuracy_figure", "NLI copies: in-distribution and out-of-distribution (HANS-style) accuracy, "
                                   "generalizing and heuristic groups (McCoy et al. 2020; Brown et al. 2023 §4).",
     "nli"),
    ("models.nli.stitching_figure", "Identity stitching within and between the NLI groups, per layer.", "nli"),
    ("models.nli.cka_group_curves_figure", "CKA within and between the NLI groups, per layer.", "nli"),
)

_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5}
figure{margin:1.5rem 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{color:#444;font-size:.9rem}
code{background:#f3f3f3;padding:0 .2rem}.missing{color:#8a3b00}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}.index td{text-align:left}"""


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
    if hasattr(data, "data") and hasattr(data, "layout"):  # a plotly figure (not imported here)
        return f"interactive figure (plotly), {len(data.data)} traces"
    return type(data).__name__


def _index_html(indexed: Sequence[IndexedOutput]) -> str:
    rows = "".join(f"<tr><td><code>{html.escape(item.name)}</code></td><td>{html.escape(item.pipeline)}</td>"
                   f"<td>{html.escape(item.holds)}</td></tr>" for item in indexed)
    return ("<h2>Every other output of the run</h2><p>Saved by the pipelines, not quoted above; each is a catalog "
            "dataset (kedro-viz, <code>data/</code>) and is in MLflow where it logs.</p><table class='index'>"
            f"<tr><th>dataset</th><th>pipeline</th><th>holds</th></tr>{rows}</table>")


@dataclass(frozen=True)
class MissingInput:
    """An input the report could not read: its catalog name and the pipeline that makes it."""

    name: str
    pipeline: str


def _figure_html(caption: str, image: bytes) -> str:
    encoded = base64.b64encode(image).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def report_html(title: str, findings_markdown: str, figures: Mapping[str, bytes | None],
                missing: Sequence[MissingInput], indexed: Sequence[IndexedOutput] = ()) -> str:
    """The whole report: the findings (markdown; the scaling family's verdicts among its claims), the
    figures of :data:`FIGURES` that were found (PNG bytes by catalog name), the list of missing inputs and the
    index of the run's other outputs."""
    markdown = MarkdownIt("commonmark")
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts.append("<h2>Findings</h2>" + markdown.render(findings_markdown))
    shown = [(caption, image) for name, caption, _ in FIGURES if (image := figures.get(name))]
    parts.append("<h2>Figures</h2>" + "".join(_figure_html(caption, image) for caption, image in shown))
    if missing:
        items = "".join(f"<li><code>{html.escape(m.name)}</code> (pipeline <code>{html.escape(m.pipeline)}</code>)"
                        "</li>" for m in missing)
        parts.append("<h2>Missing inputs</h2><p class='missing'>Not in the saved outputs (their pipelines were not "
                     f"run): </p><ul>{items}</ul>")
    if indexed:
        parts.append(_index_html(indexed))
    parts.append("</body></html>")
    return "\n".join(parts)
