"""The ``zoo`` pipeline: the small models trained on the corpus."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import zoo_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_zoo

SPEC = PipelineSpec(
    "zoo",
    create_pipeline,
    stage=10,
    section="zoo",
    upstream=("corpus",),
    check=check_zoo,
    replaced_whole=("models",),
    rules=RULES,
    dataset_prefixes=("zoo_", "models."),
    report=SECTIONS,
    timing_label=zoo_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
