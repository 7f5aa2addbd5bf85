"""The ``zoo`` pipeline's part of the report: the corpus and the zoo
(:class:`~thinkalike.reports.experiments.ReportSection`, read by :func:`thinkalike.pipelines.specs.report_outline`)."""

from __future__ import annotations

from thinkalike.reports.experiments import Experiment, KeyNumber, ReportSection, Shown
from thinkalike.reports.findings.timing import claims_zoo, collect_zoo

SECTIONS = (
    ReportSection(
        "zoo",
        Experiment(
            "zoo",
            "The corpus and the zoo",
            "What was trained on what: does every model of the zoo learn the corpus, its held-out loss well below the "
            "corpus's unigram entropy?",
            ("corpus", "zoo"),
            "zoo",
            ("corpus_statistics", "zoo_summary", "models.*.model_config"),
            (Shown("zoo_training_curves_figure", "Training and held-out loss of every zoo model.", "zoo", ("zoo",)),),
            (
                KeyNumber("sentences in the corpus", ("corpus.n_sentences",), "d"),
                KeyNumber("vocabulary", ("corpus.vocab_size",), "d"),
                KeyNumber("unigram entropy (nats)", ("corpus.unigram_entropy_nats",), "3"),
                KeyNumber("models in the zoo", ("zoo.n_models",), "d"),
                KeyNumber(
                    "held-out loss below the unigram entropy", ("zoo.min_improvement", "zoo.max_improvement"), "%"
                ),
                KeyNumber("required margin", ("zoo.margin",), "%"),
            ),
        ),
        tables=("zoo_summary",),
        collect=lambda run: collect_zoo(run.tables, run.parameters),
        claims=claims_zoo,
        heading="The zoo",
    ),
)
