"""The ``mlem`` pipeline's part of the report (:class:`~thinkalike.reports.experiments.ReportSection`, read by
:func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, Shown
from thinkalike.reports.findings.mlem import claims_mlem, collect_mlem
from thinkalike.reports.interactive import mlem_similarity_plotly

SECTIONS = (
    ReportSection(
        "mlem",
        Experiment(
            "mlem",
            "MLEM",
            "Which linguistic features explain each layer's representation, and which layers are alike by those "
            "features (Jalouzot et al. 2024)?",
            ("mlem",),
            "mlem",
            ("mlem_profiles", "mlem_feature_similarity", "mlem_rsa_similarity"),
            (
                Shown(
                    "mlem_similarity_interactive",
                    "Feature-based (MLEM, weighted Kendall τ) and RSA similarity of every "
                    "pair of layers (Jalouzot et al. 2024).",
                    "mlem",
                    ("mlem.odd_one_out",),
                    interactive=True,
                    drawn_from=("mlem_feature_similarity", "mlem_rsa_similarity"),
                    draw=lambda tables: mlem_similarity_plotly(
                        tables.get("mlem_feature_similarity"), tables.get("mlem_rsa_similarity")
                    ),
                ),
                Shown("mlem_mds_figure", "MDS of the layers by their MLEM feature importances.", "mlem"),
            ),
            (
                KeyNumber("models", ("mlem.n_models",), "d"),
                KeyNumber("layers", ("mlem.n_layers",), "d"),
                KeyNumber("held-out Spearman per layer", ("mlem.spearman",)),
                KeyNumber("feature on top at most layers", ("mlem.dominant",)),
                KeyNumber("cross-validation folds", ("mlem.n_folds",), "d"),
            ),
        ),
        tables=("mlem_profiles", "mlem_feature_similarity", "mlem_rsa_similarity"),
        collect=lambda run: collect_mlem(run.tables, run.roles, run.untrained),
        claims=claims_mlem,
    ),
)
