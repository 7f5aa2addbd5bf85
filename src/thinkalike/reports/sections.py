"""One experiment's section of the report as HTML (no Kedro): its question, what is missing (with the pipeline that
makes it), each figure beside the findings' sentences that read it, the sentences no figure reads, and its key
numbers (:mod:`thinkalike.reports.experiments`)."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkalike.reports.experiments import Experiment, claims_by_figure
from thinkalike.reports.findings.claims import (
    Claim,
    merge_claims,
    render_claims,
    single_run,
    value_text,
)
from thinkalike.reports.findings.text import not_run_sentence
from thinkalike.reports.html_blocks import (
    markdown_html,
    numbers_table,
    reading,
    sentences_html,
)

#: A per-pair dataset of a method (``models.cka.<a>__<b>.cka_table``): listed once for all its pairs when missing.
_PAIR_DATASET = re.compile(r"^(models\.[a-z_]+)\.[^.]+__[^.]+\.([a-z_]+)$")


@dataclass(frozen=True)
class MissingInput:
    """An input the report could not read: its catalog name and the pipeline that makes it."""

    name: str
    pipeline: str


def held_claims(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """One run's claims that hold in it, as the findings render them (:func:`~thinkalike.reports.findings.claims.
    merge_claims` of that one run)."""
    return merge_claims([single_run(claims)])


def _missing_items(missing: Sequence[MissingInput]) -> list[str]:
    """One list item per missing input; a method's per-pair datasets once, with their number of pairs."""
    items: dict[tuple[str, str], int] = {}
    for entry in missing:
        match = _PAIR_DATASET.match(entry.name)
        name = f"{match.group(1)}.<pair>.{match.group(2)}" if match else entry.name
        items[(name, entry.pipeline)] = items.get((name, entry.pipeline), 0) + 1
    return [
        f"<li><code>{html.escape(name)}</code> (pipeline <code>{html.escape(pipeline)}</code>)"
        + (f", {count} pairs" if "<pair>" in name else "")
        + "</li>"
        for (name, pipeline), count in items.items()
    ]


def missing_html(missing: Sequence[MissingInput]) -> str:
    """The inputs never saved, each with the pipeline that makes them (empty when none)."""
    if not missing:
        return ""
    pipelines = " ".join(dict.fromkeys(m.pipeline for m in missing if m.pipeline != "?"))
    command = f" (<code>kedro run --pipelines {html.escape(pipelines.replace(' ', ','))}</code>)" if pipelines else ""
    return (
        f"<div class='missing'><p>Not in these outputs: their pipelines were not run{command}.</p>"
        f"<ul>{''.join(_missing_items(missing))}</ul></div>"
    )


def section_html(
    experiment: Experiment,
    findings: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    figures: Mapping[str, str],
    missing: Sequence[MissingInput] = (),
    before: str = "",
    after: str = "",
) -> str:
    """The experiment's section: its question, ``missing`` inputs, ``before`` (HTML), each figure of ``figures``
    (name → its HTML; a figure not there is left out) beside the sentences of the ``claims`` (merged, those that
    hold) it reads, the sentences no shown figure reads, ``after`` (HTML) and the key numbers."""
    collected = findings.get(experiment.section)
    not_run = not_run_sentence(experiment.title, collected) if isinstance(collected, Mapping) else None
    parts = [
        f"<section id='{experiment.key}' class='experiment'><h2>{html.escape(experiment.title)}</h2>",
        f"<p class='question'><strong>Question.</strong> {html.escape(experiment.question)}</p>",
    ]
    if experiment.pipelines:
        names = ", ".join(f"<code>{html.escape(name)}</code>" for name in experiment.pipelines)
        parts.append(
            f"<p class='made-by'>Made by the pipeline{'s' if len(experiment.pipelines) > 1 else ''} {names}.</p>"
        )
    if not_run:
        parts.append(f"<div class='missing'>{markdown_html(not_run)}</div>")
    parts += [missing_html(missing), before]
    shown = [figure for figure in experiment.figures if figure.name in figures]
    grouped = claims_by_figure(claims, shown)
    for figure in shown:
        parts.append(reading(figures[figure.name], render_claims(grouped.get(figure.name, []), "runs")))
    rest = render_claims(grouped.get(None, []), "runs")
    if rest:
        parts.append(sentences_html(rest))
    elif not claims and not not_run and collected is not None:
        parts.append("<p>No claim of this section holds in this run.</p>")
    parts += [after, numbers_table(key_numbers(experiment, findings)), "</section>"]
    return "\n".join(part for part in parts if part)


def _values_at(findings: Mapping[str, Any], path: str) -> list[Any]:
    """The values at a dotted path of the findings (a list's items one by one; nothing when the path is absent)."""
    value: Any = findings
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return []
        value = value[key]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return list(value)
    return [value] if isinstance(value, (int, float, str, list)) and not isinstance(value, bool) else []


def key_numbers(experiment: Experiment, findings: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The experiment's key numbers as (label, value written) rows, the rows the findings have no value for left out."""
    rows = []
    for number in experiment.numbers:
        values = [value for path in number.paths for value in _values_at(findings, path)]
        if values and all(isinstance(value, str) for value in values):
            text = ", ".join(f"`{value}`" for value in dict.fromkeys(values))
        else:
            text = value_text(values, number.spec) if values else "n/a"
        if text != "n/a":
            rows.append((number.label, text))
    return rows
