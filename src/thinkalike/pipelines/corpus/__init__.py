"""The ``corpus`` pipeline: the language, its tokenizer and the packed evaluation sequences."""

from thinkalike.pipelines.specs import PipelineSpec

from .mlflow_rules import RULES
from .pipeline import create_pipeline
from .report_section import SECTIONS
from .schema import check_corpus

SPEC = PipelineSpec(
    "corpus",
    create_pipeline,
    stage=0,
    section="corpus",
    check=check_corpus,
    replaced_whole=("controlled_stimuli.factors",),
    rules=RULES,
    dataset_prefixes=("corpus_",),
    report=SECTIONS,
)

__all__ = ["SPEC", "create_pipeline"]
