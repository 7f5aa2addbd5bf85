"""The ``report`` pipeline (:mod:`.pipeline`): one HTML report of every experiment from the saved outputs; the hook
that lets it run when some experiments never ran (:mod:`.hooks`)."""

from thinkalike.pipelines.specs import PipelineSpec

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .timings import report_after_timings

SPEC = PipelineSpec(
    "report",
    create_pipeline,
    stage=100,
    upstream=("corpus",),
    rules=RULES,
    viz_group="report",
    summarises=True,
    after_timings=report_after_timings,
    report=SECTIONS,
)

__all__ = ["SPEC", "create_pipeline"]
