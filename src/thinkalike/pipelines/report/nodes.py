"""The ``report`` node: the findings of :mod:`thinkalike.reports.findings`, experiment by experiment with their
figures (:mod:`thinkalike.reports.report`), and an index of the run's other outputs, as one HTML file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from thinkalike.pipelines.specs import producing_pipeline, report_outline
from thinkalike.reports.experiments import findings_dataset
from thinkalike.reports.findings import claims_of, collect_findings
from thinkalike.reports.findings.claims import single_run
from thinkalike.reports.report import IndexedOutput, MissingInput, describe_output, report_html

TITLE = "ThinkAlike: every experiment of the run"
#: The NLI encoder's config: a table of the report (the encoder's depth and source), not one of the zoo's model configs.
NLI_ENCODER_CONFIG = "models.nli.encoder.model_config"

logger = logging.getLogger(__name__)


class NeverSaved:
    """Stands for an input of the report that was never saved (:mod:`thinkalike.pipelines.report.hooks`); Kedro
    refuses ``None`` as a dataset's data."""

    def __repr__(self) -> str:
        return "NeverSaved()"


def write_report(
    parameters: dict[str, Any],
    committed: dict[str, Any] | NeverSaved,
    *values: Any,
    names: Sequence[str],
    indexed: Sequence[str] = (),
) -> tuple[str, dict[str, Any]]:
    """The report's HTML from the saved outputs ``values`` of datasets ``names`` then ``indexed`` (the run's
    other outputs, listed in its index; :class:`NeverSaved`: never saved) with the committed replicates' verdicts
    beside this run's estimates (``committed``: docs/findings.json, :class:`NeverSaved` where the project has none),
    and the run's claims
    (``{"claims": [...]}``, every proposition with its margin: :func:`thinkalike.reports.findings.claims_of`)."""
    outline = report_outline()  # every pipeline's report sections, declared in its folder
    figure_names = {figure.name for figure in outline.png_figures()}
    read = {
        name: None if isinstance(value, NeverSaved) else value
        for name, value in zip([*names, *indexed], values, strict=True)
    }
    by_name = {name: read[name] for name in names}
    # the sections' numbers as their pipelines saved them (None: never saved, as when nothing makes a section's
    # tables: the section is then collected from them and says they are missing); the timings are collected here
    saved = {section.section: read.get(findings_dataset(section.section)) for section in outline.saved_sections}
    saved_names = {findings_dataset(section) for section in saved}
    index = [
        IndexedOutput(
            name, producing_pipeline(name), "never saved" if read[name] is None else describe_output(read[name])
        )
        for name in indexed
    ]
    missing = [
        MissingInput(name, producing_pipeline(name))
        for name, value in by_name.items()
        if value is None and name not in saved_names
    ]
    # a zoo model's config goes to model_configs; the NLI encoder's stays a table (its depth and source: a real
    # checkpoint's is not conf's architecture)
    tables: dict[str, Any] = {
        name: value
        for name, value in by_name.items()
        if value is not None
        and name not in figure_names
        and (not name.endswith(".model_config") or name == NLI_ENCODER_CONFIG)
        and name not in saved_names
    }
    tables["parameters"] = parameters
    tables["model_configs"] = {
        name.removeprefix("models.").removesuffix(".model_config"): value
        for name, value in by_name.items()
        if name.endswith(".model_config")
        and name.startswith("models.")
        and value is not None
        and name != NLI_ENCODER_CONFIG
    }
    collected = collect_findings(tables, outline, saved)
    images = {name: by_name.get(name) for name in figure_names}
    if missing:
        logger.info(
            "report: %d input(s) never saved, listed in the report: %s",
            len(missing),
            ", ".join(m.name for m in missing[:8]) + (" …" if len(missing) > 8 else ""),
        )
    claims = {"claims": single_run(claims_of(collected, outline))}
    theirs = None if isinstance(committed, NeverSaved) else committed
    return report_html(TITLE, collected, tables, images, outline, missing, index, committed=theirs), claims
