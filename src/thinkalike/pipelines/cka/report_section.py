"""The ``cka`` pipeline's part of the report: CKA, and the measures beyond CKA
(:class:`~thinkalike.reports.experiments.ReportSection`, read by :func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import (
    CKA_HEATMAPS,
    MEASURE_PAIR_TABLES,
    Experiment,
    KeyNumber,
    ReportSection,
    Shown,
)
from thinkalike.reports.findings.cka import claims_cka, collect_cka
from thinkalike.reports.findings.measures import claims_measures, collect_measures
from thinkalike.reports.interactive import cka_distance_plotly, cka_heatmaps_plotly, measure_matrices_plotly
from thinkalike.reports.measure_space import measure_space_html

SECTIONS = (
    ReportSection(
        "cka",
        Experiment(
            "cka",
            "CKA",
            "How alike are the models' layers by CKA: which pairs of models are closest, and what do seed, depth and "
            "activation change (Brown et al. 2023 §2, fig. 2)?",
            ("cka",),
            "cka",
            ("cka_distances", CKA_HEATMAPS),
            (
                Shown(
                    "cka_distance_interactive",
                    "CKA distance (arccos of the mean matched-layer CKA) between every pair of "
                    "models (Brown et al. 2023 fig. 2).",
                    "cka",
                    ("cka",),
                    interactive=True,
                    drawn_from=("cka_distances",),
                    draw=lambda tables: cka_distance_plotly(tables.get("cka_distances")),
                ),
                Shown(
                    "cka_heatmaps_interactive",
                    "CKA of every layer of one model against every layer of the other, one "
                    "pair at a time (the dropdown), with each cell's confidence interval.",
                    "cka",
                    interactive=True,
                    drawn_from=(CKA_HEATMAPS,),
                    draw=lambda tables: cka_heatmaps_plotly(tables.get(CKA_HEATMAPS)),
                ),
                Shown(
                    "cka_group_curves_figure",
                    "CKA by relative depth within and between groups of models (SoLU, GeLU).",
                    "cka",
                ),
            ),
            (
                KeyNumber("model pairs compared (each model with itself too)", ("cka.n_pairs",), "d"),
                KeyNumber("pairs of different models", ("cka.n_between_pairs",), "d"),
                KeyNumber("tokens per pair", ("cka.n_tokens",), "d"),
                KeyNumber("blocks of layers within each model (its own CKA, best split)", ("cka.intra_block_runs",)),
                KeyNumber("their block contrast (within − between, CKA)", ("cka.intra_block_contrasts",), "2"),
            ),
        ),
        tables=("cka_distances",),
        collect=lambda run: collect_cka(run.tables, run.roles, run.parameters),
        claims=claims_cka,
    ),
    ReportSection(
        "measures",
        Experiment(
            "measures",
            "Measures beyond CKA",
            "Do other similarity measures (Procrustes, the CCA family, RSA, nearest neighbours …) tell the same "
            "story as CKA, and which of them can be trusted for what (Klabunde et al. 2025; Ding et al. 2021)?",
            ("cka",),
            "measures",
            (
                "similarity_measures",
                "dimension_shares",
                "rogue_remedies",
                "similarity_calibration",
                "measure_grounding",
                MEASURE_PAIR_TABLES,
            ),
            (
                Shown(
                    "measure_matrices_interactive",
                    "Each measure's mean over matched layers for every pair of models, one "
                    "measure at a time (the dropdown).",
                    "cka",
                    ("measures.replicas_vs_solu_gelu",),
                    interactive=True,
                    drawn_from=("similarity_measures",),
                    draw=lambda tables: measure_matrices_plotly(tables.get("similarity_measures")),
                ),
                Shown(
                    "measure_grounding_figure",
                    "Which similarity measure registers what (Klabunde et al. 2025; Ding et "
                    "al. 2021): layer monotonicity, sensitivity to removed principal components, the null on permuted and "
                    "independent rows, specificity and trained vs untrained.",
                    "cka",
                    ("measures.grounding", "measures.guide"),
                ),
                Shown(
                    "dimension_shares_figure",
                    "Rogue dimensions: the variance share of each layer's largest one and three dimensions.",
                    "cka",
                    ("measures.rogue",),
                ),
            ),
            (
                KeyNumber("measures", ("measures.n_measures",), "d"),
                KeyNumber("rows drawn per pair", ("measures.n_tokens",), "d"),
                KeyNumber("largest share of one dimension", ("measures.rogue.max_top1",), "%"),
                KeyNumber("permutations of the calibration", ("measures.calibration.n_permutations",), "d"),
            ),
            details=measure_space_html,
        ),
        tables=(
            "similarity_measures",
            "dimension_shares",
            "rogue_remedies",
            "similarity_calibration",
            "measure_grounding",
        ),
        collect=lambda run: collect_measures(run.tables, run.roles),
        claims=claims_measures,
    ),
)
