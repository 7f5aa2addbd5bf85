"""The ``scaling`` pipeline (:mod:`.pipeline`): CKA across a width/depth family (Brown et al. 2023 §5); which models
form the family (:mod:`.plan`), and the CKA pairs it reads (``cka_pairs``)."""

from thinkalike.pipelines.specs import PipelineSpec

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .plan import check_scaling, scaling_cka_pairs
from .report_section import SECTIONS

SPEC = PipelineSpec(
    "scaling",
    create_pipeline,
    stage=40,
    section="scaling",
    upstream=("cka",),
    check=check_scaling,
    replaced_whole=("twins", "architectures"),
    rules=RULES,
    viz_group="scaling",
    dataset_prefixes=("scaling_",),
    report=SECTIONS,
    cka_pairs=scaling_cka_pairs,
)

__all__ = ["SPEC", "create_pipeline"]
