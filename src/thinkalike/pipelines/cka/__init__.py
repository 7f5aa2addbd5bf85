"""The ``cka`` pipeline: CKA and the measures beyond it for every configured pair."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import cka_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_cka

SPEC = PipelineSpec(
    "cka",
    create_pipeline,
    stage=30,
    section="cka",
    upstream=("activations",),
    check=check_cka,
    replaced_whole=("pairs", "groups"),
    rules=RULES,
    viz_group="cka",
    dataset_prefixes=("models.cka.", "cka_", "similarity_", "dimension_shares", "rogue_", "measure_"),
    report=SECTIONS,
    timing_label=cka_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
