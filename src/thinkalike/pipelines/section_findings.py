"""Each pipeline's findings as datasets: one node per report section a pipeline declares
(:attr:`~thinkalike.reports.experiments.ReportOutline.saved_sections`), ``collect_<section>_findings``, collects the
section's numbers from the pipeline's saved tables and saves them as ``<section>_findings``
(:func:`~thinkalike.reports.experiments.findings_dataset`, data/08_reporting/findings/<section>.json), and the run's
estimates of the papers' questions those numbers measure as ``<section>_estimates`` (question, part, estimate,
within-run interval: :func:`~thinkalike.reports.findings.scorecard.section_estimates`,
data/08_reporting/estimates/<section>.json). The report and ``python -m thinkalike.findings_cli`` read those datasets
and collect nothing again.

The node sits in its pipeline's box (``models.<viz_group>``; the corpus's and the zoo's in ``models``, where the
report reads them) and reads ``parameters`` and those of the section's tables that some pipeline of the run's
registry makes (a table nothing makes in this configuration, e.g. the measures' summaries without ``cka.measures``,
is missing from the section, which says so). The zoo's roles come from the parameters' ``zoo.models`` and, where the
section reads it, ``zoo_summary``'s order (:func:`thinkalike.reports.findings.model_facts`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import MODELS, group_namespace
from thinkalike.pipelines.specs import PipelineSpec, report_outline
from thinkalike.reports.experiments import estimates_dataset, findings_dataset
from thinkalike.reports.findings import collect_section, run_context
from thinkalike.reports.findings.scorecard import section_estimates


def save_section_findings(
    parameters: dict[str, Any], *values: Any, section: str, names: tuple[str, ...], saved: tuple[str, ...]
) -> tuple[dict, list[dict]]:
    """Section ``section``'s numbers from the tables ``values`` (named ``names``) and the run's ``parameters``
    (:func:`~thinkalike.reports.findings.collect_section`), and the questions' estimates they measure (``saved``: the
    sections the run saves, :func:`~thinkalike.reports.findings.scorecard.section_estimates`)."""
    tables = {"parameters": parameters, **dict(zip(names, values, strict=True))}
    findings = collect_section(report_outline().section(section), tables)
    return findings, section_estimates(section, findings, run_context(tables), saved)


def section_findings_pipeline(spec: PipelineSpec, made: Collection[str]) -> Pipeline:
    """The ``collect_<section>_findings`` node of every section ``spec`` declares (its timings' section excepted),
    each reading the section's tables found in ``made`` (what the run's pipelines save); a section none of whose
    tables is made gets no node."""
    outline = report_outline()
    saved = {section.section for section in outline.saved_sections}
    in_run = tuple(s.section for s in outline.saved_sections if any(name in made for name in s.tables))
    namespace = group_namespace(spec.viz_group) if spec.viz_group else MODELS
    nodes = []
    for section in spec.report:
        if section.section not in saved:
            continue
        names = tuple(name for name in section.tables if name in made)
        if not names:  # nothing to collect from (conf/test scales no family): the report says the tables are missing
            continue
        nodes.append(
            Node(
                with_fixed_arguments(save_section_findings, section=section.section, names=names, saved=in_run),
                ["parameters", *names],
                [findings_dataset(section.section), estimates_dataset(section.section)],
                name=f"collect_{section.section}_findings",
                namespace=namespace,
            )
        )
    return Pipeline(nodes)
