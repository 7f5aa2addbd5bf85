"""``zoo``: one namespaced training pipeline per model in ``zoo.models``, then a summary.

``kedro run --pipeline zoo --namespaces gelu_2l`` trains one model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.zoo import nodes

SHARED_INPUTS = {"train_sequences", "heldout_sequences", "tokenizer"}


def model_pipeline(name: str) -> Pipeline:
    """Training of zoo model ``name`` in namespace ``name``."""
    return Pipeline(
        [Node(bind(nodes.train_model, model_name=name),
              ["train_sequences", "heldout_sequences", "tokenizer", "params:model", "params:zoo", "params:corpus"],
              ["model_weights", "model_config", "training_curve"], name="train_model")],
        namespace=name,
        inputs=SHARED_INPUTS,
        parameters={"params:model": f"params:zoo.models.{name}", "params:zoo": "params:zoo",
                    "params:corpus": "params:corpus"},
    )


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    """One training pipeline per ``zoo.models`` entry (namespace = model name), then ``summarise_zoo``."""
    models = list((section(parameters, "zoo").get("models") or {}))
    if not models:
        return Pipeline([])
    per_model = sum((model_pipeline(name) for name in models), Pipeline([]))
    summary = Node(nodes.summarise_zoo, ["corpus_statistics", "params:zoo", *[f"{m}.training_curve" for m in models]],
                   ["zoo_summary", "zoo_training_curves_figure"], name="summarise_zoo")
    return per_model + Pipeline([summary])
