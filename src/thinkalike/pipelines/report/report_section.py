"""The ``report`` pipeline's own part of the report: the run's timings, rendered into the report when the run ends
(:mod:`thinkalike.pipelines.report.timings`; :class:`~thinkalike.reports.experiments.ReportSection`, read by
:func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import TIMING, Experiment, ReportSection, Shown
from thinkalike.reports.findings.timing import claims_timing, collect_timing

SECTIONS = (
    ReportSection(
        TIMING,
        Experiment(
            TIMING,
            "Run timings",
            "Where did the run's time go, pipeline by pipeline, and did the run keep its budget?",
            (),
            TIMING,
            (),
            (
                Shown(
                    "timeline_interactive",
                    "Every node of the run from its start to its end, one row per pipeline.",
                    "(run)",
                    ("timing",),
                    interactive=True,
                ),
            ),
        ),
        tables=("run_timings",),
        collect=lambda run: collect_timing(run.tables),
        claims=claims_timing,
        heading="Run time",
        listed_without_claims=False,
    ),
)
