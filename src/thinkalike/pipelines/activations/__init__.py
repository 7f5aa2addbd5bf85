"""The ``activations`` pipeline: every configured model's residual streams on the evaluation texts."""

from thinkalike.pipelines.specs import PipelineSpec

from .pipeline import create_pipeline
from .schema import check_activations

SPEC = PipelineSpec(
    "activations",
    create_pipeline,
    stage=20,
    section="activations",
    upstream=("zoo",),
    check=check_activations,
    replaced_whole=("models", "devices"),
)

__all__ = ["SPEC", "create_pipeline"]
