"""The ``corpus`` pipeline's part of the report: its numbers, shown by the zoo's section
(:class:`~thinkalike.reports.experiments.ReportSection`, read by :func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import ReportSection
from thinkalike.reports.findings.timing import collect_corpus

SECTIONS = (
    ReportSection(
        "corpus",
        tables=("corpus_statistics",),
        collect=lambda run: collect_corpus(run.tables),
    ),
)
