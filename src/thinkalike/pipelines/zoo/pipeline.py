"""``zoo``: one training node per model in ``zoo.models`` (namespace ``models.<model>``), then a summary.

``kedro run --pipelines zoo --namespaces models.gelu_2l`` trains one model; ``--namespaces models``
trains them all and summarises (the summary node is in ``models``). Naming:
:mod:`thinkalike.pipelines.namespaces`.
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.corpus.schema import CorpusParameters, corpus_section
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import (
    MODELS,
    check_model_names,
    model_dataset,
    model_namespace,
    namespaced_node,
)
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import validate_section
from thinkalike.pipelines.zoo import nodes
from thinkalike.pipelines.zoo.schema import ZooParameters
from thinkalike.runners.settings import GPU_WORK

OUTPUTS = ["model_weights", "model_config", "training_curve"]


def model_pipeline(name: str, settings: ZooParameters, corpus: CorpusParameters) -> Pipeline:
    """Training of zoo model ``name`` in namespace ``models.<name>``."""
    return Pipeline(
        [
            namespaced_node(
                with_fixed_arguments(nodes.train_model, settings=settings, corpus=corpus, model_name=name),
                ["train_sequences", "heldout_sequences", "tokenizer"],
                OUTPUTS,
                name="train_model",
                namespace=model_namespace(name),
                tags=[GPU_WORK],
            )
        ]
    )


def create_pipeline(run: RunSettings) -> Pipeline:
    """One training node per ``zoo.models`` entry, then ``summarise_zoo`` (namespace ``models``), with the ``zoo``
    section parsed once here (:class:`~thinkalike.pipelines.zoo.schema.ZooParameters`; its deeper checks, each
    model's training and architecture, are :func:`~thinkalike.pipelines.zoo.schema.check_zoo`'s before a run) and
    the ``corpus`` section for the models' context length."""
    parameters = run.parameters
    settings = validate_section(ZooParameters, parameters.get("zoo"), "zoo")
    models = list(settings.models)
    if not models:
        return Pipeline([])
    check_model_names(models, "zoo.models")
    corpus = run.parsed(corpus_section)
    per_model = sum((model_pipeline(name, settings, corpus) for name in models), Pipeline([]))
    summary = Node(
        with_fixed_arguments(nodes.summarise_zoo, settings=settings),
        ["corpus_statistics", *[model_dataset(m, "training_curve") for m in models]],
        ["zoo_summary", "zoo_training_curves_figure"],
        name="summarise_zoo",
        namespace=MODELS,
    )
    return per_model + Pipeline([summary])
