"""The ``stitching`` pipeline's part of the report (:class:`~thinkalike.reports.experiments.ReportSection`, read by
:func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, Shown
from thinkalike.reports.findings.stitching import claims_stitching, collect_stitching

SECTIONS = (
    ReportSection(
        "stitching",
        Experiment(
            "stitching",
            "Stitching",
            "Can one model's early layers feed another model's late layers through a trained map φ, and at what cost "
            "in loss (Bansal et al. 2021; Brown et al. 2023 §3)?",
            ("stitching",),
            "stitching",
            ("stitching_penalties", "stitching_phis"),
            (
                Shown(
                    "stitching_figure",
                    "Stitching penalty of f's early layers into g's late layers, per layer and kind of "
                    "φ (Brown et al. 2023 §3, fig. 1).",
                    "stitching",
                    ("stitching",),
                ),
            ),
            (
                KeyNumber("stitches", ("stitching.n_stitches",), "d"),
                KeyNumber("of them trained", ("stitching.n_trained",), "d"),
                KeyNumber("kinds of φ", ("stitching.kinds",)),
                KeyNumber("training tokens per φ", ("stitching.train_tokens",), "d"),
                KeyNumber("evaluation tokens", ("stitching.eval_tokens",), "d"),
                KeyNumber("self-stitching floors (nats/token)", ("stitching.self.span",), "+3"),
            ),
        ),
        tables=("stitching_penalties", "stitching_phis", "zoo_summary"),  # the zoo's: the models' training steps
        collect=lambda run: collect_stitching(run.tables, run.roles, run.parameters),
        claims=claims_stitching,
    ),
)
