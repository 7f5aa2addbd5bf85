"""The ``embedding`` pipeline: Dar et al. 2022 (parameters in the vocabulary space) on the zoo and configured models."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import embedding_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_embedding

SPEC = PipelineSpec(
    "embedding",
    create_pipeline,
    stage=70,
    section="embedding",
    upstream=("activations",),
    check=check_embedding,
    replaced_whole=("alignment.pairs", "lookup.token_sets"),
    rules=RULES,
    viz_group="embedding",
    dataset_prefixes=("embedding_",),
    report=SECTIONS,
    timing_label=embedding_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
