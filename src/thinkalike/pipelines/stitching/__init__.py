"""The ``stitching`` pipeline: model stitching between the zoo's models."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import stitching_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_stitching

SPEC = PipelineSpec(
    "stitching",
    create_pipeline,
    stage=50,
    section="stitching",
    upstream=("zoo",),
    check=check_stitching,
    replaced_whole=("pairs",),
    rules=RULES,
    viz_group="stitching",
    dataset_prefixes=("stitching_",),
    report=SECTIONS,
    timing_label=stitching_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
