"""The nli pipeline: generalizing vs heuristic NLI copies (Brown et al. 2023 §4)."""

from thinkalike.pipelines.specs import PipelineSpec
from thinkalike.reports.findings.timing import nli_timing_label

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_nli

SPEC = PipelineSpec(
    "nli",
    create_pipeline,
    stage=80,
    section="nli",
    upstream=("corpus",),
    check=check_nli,
    rules=RULES,
    viz_group="nli",
    dataset_prefixes=("models.nli.",),
    report=SECTIONS,
    timing_label=nli_timing_label,
)

__all__ = ["SPEC", "create_pipeline"]
