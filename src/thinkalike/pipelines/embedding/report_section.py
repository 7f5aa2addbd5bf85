"""The ``embedding`` pipeline's part of the report (:class:`~thinkalike.reports.experiments.ReportSection`, read by
:func:`thinkalike.pipelines.specs.report_outline`): about trained models only (the untrained controls left out)."""

from __future__ import annotations

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, Shown
from thinkalike.reports.findings.embedding import claims_embedding, collect_embedding
from thinkalike.reports.findings.text import without_models

SECTIONS = (
    ReportSection(
        "embedding",
        Experiment(
            "embedding",
            "Embedding space",
            "Read in the embedding space, do parameters and layers line up across models, and can one model's layers "
            "be stitched into another's without training (Dar et al. 2022)?",
            ("embedding",),
            "embedding",
            (
                "embedding_keep_k",
                "embedding_alignment",
                "embedding_feature_fractions",
                "embedding_zero_shot",
                "embedding_finetune_curves",
            ),
            (
                Shown(
                    "embedding_alignment_figure",
                    "Layers of two seed replicas aligned through the embedding space (Dar et al. 2022 §5.1).",
                    "embedding",
                    ("embedding.alignment",),
                ),
                Shown(
                    "embedding_zero_shot_figure",
                    "Zero-shot stitching through the embedding space (Dar et al. 2022 §5.2).",
                    "embedding",
                    ("embedding.zero_shot",),
                ),
            ),
            (
                KeyNumber("vocabulary", ("embedding.keep_k.V",), "d"),
                KeyNumber("layers on the diagonal, raw", ("embedding.alignment.by_space.raw",), "%"),
                KeyNumber("layers on the diagonal, projected", ("embedding.alignment.by_space.projected",), "%"),
                KeyNumber("fine-tuned accuracy", ("embedding.finetune.accuracy",), "3"),
                KeyNumber("majority rate", ("embedding.finetune.chance",), "3"),
            ),
        ),
        tables=(
            "embedding_keep_k",
            "embedding_alignment",
            "embedding_feature_fractions",
            "embedding_zero_shot",
            "embedding_key_value_overlap",
            "embedding_token_structure",
            "embedding_finetune_curves",
            "corpus_statistics",  # the vocabulary's size: keep-k's k / V
        ),
        collect=lambda run: collect_embedding(without_models(run.tables, run.untrained), run.roles),
        claims=claims_embedding,
    ),
)
