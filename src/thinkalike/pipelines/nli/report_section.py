"""The ``nli`` pipeline's part of the report (:class:`~thinkalike.reports.experiments.ReportSection`, read by
:func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, Shown
from thinkalike.reports.findings.nli import claims_nli, collect_nli

SECTIONS = (
    ReportSection(
        "nli",
        Experiment(
            "nli",
            "NLI",
            "Do fine-tuned copies of one encoder generalize differently out of distribution, and do stitching and CKA "
            "tell the generalizing copies from the heuristic ones (McCoy et al. 2020; Brown et al. 2023 §4)?",
            ("nli",),
            "nli",
            ("models.nli.encoder.model_config", "models.nli.*"),
            (
                Shown(
                    "models.nli.accuracy_figure",
                    "NLI copies: in-distribution and out-of-distribution (HANS-style) "
                    "accuracy, generalizing and heuristic groups (McCoy et al. 2020; Brown et al. 2023 §4).",
                    "nli",
                    ("nli",),
                ),
                Shown(
                    "models.nli.stitching_figure",
                    "Identity stitching within and between the NLI groups, per layer.",
                    "nli",
                    ("nli.stitching",),
                ),
                Shown(
                    "models.nli.cka_group_curves_figure",
                    "CKA within and between the NLI groups, per layer.",
                    "nli",
                    ("nli.cka",),
                ),
            ),
            (
                KeyNumber("copies", ("nli.n_copies",), "d"),
                KeyNumber("lexical-overlap rule, test accuracy", ("nli.baseline.test",), "3"),
                KeyNumber("copies' test accuracy", ("nli.test",), "3"),
                KeyNumber("copies' OOD non-entailed accuracy", ("nli.ood_non_entailed",), "3"),
                KeyNumber("mostly heuristic copies", ("nli.n_heuristic",), "d"),
            ),
        ),
        tables=(
            "models.nli.pairs",
            "models.nli.accuracy",
            "models.nli.groups",
            "models.nli.training_curves",
            "models.nli.stitching",
            "models.nli.stitching_groups",
            "models.nli.cka_group_curves",
            "models.nli.sweep",
            "models.nli.encoder.model_config",
        ),
        collect=lambda run: collect_nli(run.tables, run.parameters),
        claims=claims_nli,
        heading="NLI (Brown et al. §4, offline)",
    ),
)
