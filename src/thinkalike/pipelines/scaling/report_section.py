"""The ``scaling`` pipeline's part of the report: the width/depth family
(:class:`~thinkalike.reports.experiments.ReportSection`, read by :func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, RunTables, Shown
from thinkalike.reports.findings.scaling import claims_scaling
from thinkalike.reports.findings.text import missing_section


def collect_scaling(run: RunTables) -> dict[str, Any]:
    """The scaling pipeline's summary as it is (its answers are already numbers: :mod:`thinkalike.scaling.analysis`)."""
    summary: Mapping[str, Any] | None = run.tables.get("scaling_summary")
    return dict(summary) if summary else missing_section("scaling_summary")


SECTIONS = (
    ReportSection(
        "scaling",
        Experiment(
            "scaling",
            "Scaling family",
            "Across a family of widths and depths: does a model's CKA with itself grow with size, are early layers alike "
            "across scale, and is the member off the head-dimension trend an outlier (Brown et al. 2023 §5)?",
            ("scaling", "cka"),
            "scaling",
            ("scaling_summary",),
            (
                Shown(
                    "scaling_figure",
                    "The width/depth family: intra-model CKA against size (fig. 10), each member's "
                    "intermediate-layer CKA against the others with its robust z (fig. 9), early-layer CKA across scale "
                    "(fig. 3) and the largest member's blocks.",
                    "scaling",
                    ("scaling",),
                ),
            ),
            (
                KeyNumber("members", ("scaling.family",)),
                KeyNumber("Spearman of intra-model CKA against size", ("scaling.intra_vs_size_spearman",)),
                KeyNumber("mean intermediate-layer CKA between members", ("scaling.band_mean_between_members",)),
                KeyNumber("outliers", ("scaling.outliers",)),
            ),
        ),
        tables=("scaling_summary",),
        collect=collect_scaling,
        claims=claims_scaling,
        heading="Scaling family (Brown et al. §5)",
    ),
)
