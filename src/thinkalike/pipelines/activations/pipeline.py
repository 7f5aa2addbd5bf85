"""``activations``: per model (namespaced), the residual stream after every block.

Models: every zoo model when ``activations.include_zoo`` is true, plus ``activations.models``
(``name: spec`` with spec ``zoo:<name>``, ``hf:<id or dir>``, ``gguf:<file>``, ``tl:<arch>``).
``kedro run --pipeline activations --namespaces gelu_2l`` extracts one model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations import nodes
from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.parameters import section

OUTPUTS = ["activations", "activation_index"]


def configured_models(parameters: Mapping[str, Any]) -> dict[str, str]:
    """``{namespace: spec}`` of the models whose activations are extracted."""
    activations = section(parameters, "activations")
    models: dict[str, str] = {}
    if activations.get("include_zoo", True):
        models.update({name: f"zoo:{name}" for name in section(parameters, "zoo").get("models") or {}})
    models.update(activations.get("models") or {})
    return models


@dataclass(frozen=True)
class ExtractionSource:
    """How to extract one model: ``function(*inputs' data, activations) -> (ActivationStream, index)``."""

    function: Callable[..., Any]
    inputs: tuple[str, ...]


def extraction_source(name: str, spec: str, n_ctx: int) -> ExtractionSource:
    """The extraction function of model ``name`` (``spec``) and the catalog datasets it reads."""
    if spec.startswith("zoo:"):
        zoo_name = spec.removeprefix("zoo:")
        return ExtractionSource(bind(nodes.extract_zoo_activations, model_name=name),
                                ("evaluation_sequences", "evaluation_index", "tokenizer", f"{zoo_name}.model_weights",
                                 f"{zoo_name}.model_config"))
    return ExtractionSource(bind(nodes.extract_external_activations, model_name=name, spec=spec, n_ctx=n_ctx),
                            ("evaluation_texts",))


def external_n_ctx(parameters: Mapping[str, Any]) -> int:
    """Row length for models with their own tokenizer: ``activations.n_ctx``, else ``corpus.n_ctx``."""
    return int(section(parameters, "activations").get("n_ctx") or section(parameters, "corpus").get("n_ctx", 64))


def model_pipeline(name: str, spec: str, n_ctx: int) -> Pipeline:
    """Extraction for one model in namespace ``name``."""
    source = extraction_source(name, spec, n_ctx)
    node = Node(source.function, [*source.inputs, "params:activations"], OUTPUTS, name="extract_activations")
    return Pipeline([node], namespace=name, inputs=set(source.inputs),
                    parameters={"params:activations": "params:activations"})


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    """One extraction pipeline per :func:`configured_models` entry (namespace = model name)."""
    n_ctx = external_n_ctx(parameters)
    return sum((model_pipeline(name, spec, n_ctx) for name, spec in configured_models(parameters).items()),
               Pipeline([]))
