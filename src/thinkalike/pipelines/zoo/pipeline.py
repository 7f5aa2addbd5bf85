"""``zoo``: one training node per model in ``zoo.models`` (namespace ``models.<model>``), then a summary.

``kedro run --pipelines zoo --namespaces models.gelu_2l`` trains one model; ``--namespaces models``
trains them all and summarises (the summary node is in ``models``). Naming:
:mod:`thinkalike.pipelines.namespaces`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.namespaces import (
    GPU_WORK,
    MODELS,
    check_model_names,
    model_dataset,
    model_namespace,
    namespaced_node,
)
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.zoo import nodes

OUTPUTS = ["model_weights", "model_config", "training_curve"]


def model_pipeline(name: str) -> Pipeline:
    """Training of zoo model ``name`` in namespace ``models.<name>``."""
    return Pipeline([namespaced_node(
        bind(nodes.train_model, model_name=name),
        ["train_sequences", "heldout_sequences", "tokenizer", f"params:zoo.models.{name}", "params:zoo",
         "params:corpus"],
        OUTPUTS, name="train_model", namespace=model_namespace(name), tags=[GPU_WORK])])


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    """One training node per ``zoo.models`` entry, then ``summarise_zoo`` (namespace ``models``)."""
    models = list(section(parameters, "zoo").get("models") or {})
    if not models:
        return Pipeline([])
    check_model_names(models, "zoo.models")
    per_model = sum((model_pipeline(name) for name in models), Pipeline([]))
    summary = Node(nodes.summarise_zoo,
                   ["corpus_statistics", "params:zoo", *[model_dataset(m, "training_curve") for m in models]],
                   ["zoo_summary", "zoo_training_curves_figure"], name="summarise_zoo", namespace=MODELS)
    return per_model + Pipeline([summary])
