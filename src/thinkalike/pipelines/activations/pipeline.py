"""``activations``: per model (namespaced), the residual stream after every block.

Models: every zoo model when ``activations.include_zoo`` is true, plus ``activations.models``
(``name: spec`` with spec ``zoo:<name>``, ``hf:<id or dir>``, ``gguf:<file>``, ``tl:<arch>``).
``kedro run --pipeline activations --namespaces gelu_2l`` extracts one model.
"""

from __future__ import annotations

from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations import nodes
from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.parameters import section

OUTPUTS = ["activations", "activation_index"]


def configured_models(parameters: dict[str, Any] | None = None) -> dict[str, str]:
    """``{namespace: spec}`` of the models whose activations are extracted."""
    activations = section(parameters, "activations")
    models: dict[str, str] = {}
    if activations.get("include_zoo", True):
        models.update({name: f"zoo:{name}" for name in section(parameters, "zoo").get("models") or {}})
    models.update(activations.get("models") or {})
    return models


def model_pipeline(name: str, spec: str, n_ctx: int) -> Pipeline:
    """Extraction for one model in namespace ``name``."""
    if spec.startswith("zoo:"):
        zoo_name = spec.removeprefix("zoo:")
        node = Node(bind(nodes.extract_zoo_activations, model_name=name),
                    ["evaluation_sequences", "evaluation_index", "tokenizer", f"{zoo_name}.model_weights",
                     f"{zoo_name}.model_config", "params:activations"], OUTPUTS, name="extract_activations")
        inputs = {"evaluation_sequences", "evaluation_index", "tokenizer", f"{zoo_name}.model_weights",
                  f"{zoo_name}.model_config"}
    else:
        node = Node(bind(nodes.extract_external_activations, model_name=name, spec=spec, n_ctx=n_ctx),
                    ["evaluation_texts", "params:activations"], OUTPUTS, name="extract_activations")
        inputs = {"evaluation_texts"}
    return Pipeline([node], namespace=name, inputs=inputs, parameters={"params:activations": "params:activations"})


def create_pipeline(parameters: dict[str, Any] | None = None, **kwargs) -> Pipeline:
    n_ctx = int(section(parameters, "activations").get("n_ctx") or section(parameters, "corpus").get("n_ctx", 64))
    return sum((model_pipeline(name, spec, n_ctx) for name, spec in configured_models(parameters).items()),
               Pipeline([]))
