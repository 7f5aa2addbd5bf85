"""``mlem``: per-model MLEM feature profiles, then feature-based and RSA layer similarity and MDS maps."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import mlem_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_mlem

SPEC = PipelineSpec(
    "mlem",
    create_pipeline,
    stage=60,
    section="mlem",
    upstream=("activations",),
    check=check_mlem,
    rules=RULES,
    viz_group="mlem",
    dataset_prefixes=("mlem_",),
    report=SECTIONS,
    timing_label=mlem_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
