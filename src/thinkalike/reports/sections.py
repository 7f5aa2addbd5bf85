"""One experiment's section of the report as HTML (no Kedro): its question, what is missing (with the pipeline that
makes it), each figure beside the findings' sentences that read it, the sentences no figure reads, and its key
numbers (:mod:`thinkalike.reports.experiments`)."""

from __future__ import annotations

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
    missing_block,
    numbers_table,
    reading,
    sentences_html,
)
from thinkalike.reports.templating import render_template

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


def _missing_items(missing: Sequence[MissingInput]) -> list[tuple[str, str, int | None]]:
    """One item per missing input (name, pipeline, its number of pairs or None); a method's per-pair datasets once,
    with their number of pairs."""
    items: dict[tuple[str, str], int] = {}
    for entry in missing:
        match = _PAIR_DATASET.match(entry.name)
        name = f"{match.group(1)}.<pair>.{match.group(2)}" if match else entry.name
        items[(name, entry.pipeline)] = items.get((name, entry.pipeline), 0) + 1
    return [(name, pipeline, count if "<pair>" in name else None) for (name, pipeline), count in items.items()]


def missing_html(missing: Sequence[MissingInput]) -> str:
    """The inputs never saved, each with the pipeline that makes them (empty when none)."""
    if not missing:
        return ""
    pipelines = ",".join(dict.fromkeys(m.pipeline for m in missing if m.pipeline != "?"))
    return missing_block(pipelines, _missing_items(missing))


def section_html(
    experiment: Experiment,
    findings: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    figures: Mapping[str, str],
    missing: Sequence[MissingInput] = (),
    before: str = "",
    after: str = "",
) -> str:
    """The experiment's section, laid out by the template ``section.html.j2``: its question, ``missing`` inputs,
    ``before`` (HTML), each figure of ``figures`` (name → its HTML; a figure not there is left out) beside the
    sentences of the ``claims`` (merged, those that hold) it reads, the sentences no shown figure reads, ``after``
    (HTML) and the key numbers."""
    collected = findings.get(experiment.section)
    not_run = not_run_sentence(experiment.title, collected) if isinstance(collected, Mapping) else None
    shown = [figure for figure in experiment.figures if figure.name in figures]
    grouped = claims_by_figure(claims, shown)
    readings = [reading(figures[f.name], render_claims(grouped.get(f.name, []), "runs")) for f in shown]
    rest = render_claims(grouped.get(None, []), "runs")
    return render_template(
        "section.html.j2",
        key=experiment.key,
        title=experiment.title,
        question=experiment.question,
        pipelines=list(experiment.pipelines),
        not_run=markdown_html(not_run) if not_run else "",
        before=[missing_html(missing), before, *readings, sentences_html(rest) if rest else ""],
        no_claim_holds=not rest and not claims and not not_run and collected is not None,
        after=[after, numbers_table(key_numbers(experiment, findings))],
    ).rstrip("\n")


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
