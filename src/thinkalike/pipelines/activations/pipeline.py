"""``activations``: per model (namespaced), the residual stream after every block.

Models: every zoo model when ``activations.include_zoo`` is true, plus ``activations.models``
(``name: spec`` with spec ``zoo:<name>``, ``zoo:<name>?weights=initial`` — its initialisation, untrained —,
``hf:<id or dir>``, ``gguf:<file>``, ``tl:<arch>``).
A model's extraction is in namespace ``models.<name>``, with its training when it is a zoo model
(:mod:`thinkalike.pipelines.namespaces`): ``kedro run --pipelines activations --namespaces
models.gelu_2l`` extracts one model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kedro.pipeline import Pipeline

from thinkalike.models.sources import zoo_target
from thinkalike.pipelines.activations import nodes
from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.namespaces import (
    GPU_WORK,
    check_model_names,
    model_dataset,
    model_namespace,
    namespaced_node,
)
from thinkalike.pipelines.parameters import section

OUTPUTS = ["activations", "activation_index"]


def configured_models(parameters: Mapping[str, Any]) -> dict[str, str]:
    """``{namespace: spec}`` of the models whose activations are extracted."""
    activations = section(parameters, "activations")
    models: dict[str, str] = {}
    if activations.get("include_zoo", True):
        zoo_models = section(parameters, "zoo").get("models") or {}
        check_model_names(zoo_models, "zoo.models")
        models.update({name: f"zoo:{name}" for name in zoo_models})
    check_model_names(activations.get("models") or {}, "activations.models")
    models.update(activations.get("models") or {})
    return models


@dataclass(frozen=True)
class ExtractionSource:
    """How to extract one model: ``function(*inputs' data, activations) -> (ActivationStream, index)``;
    ``inputs`` are catalog names."""

    function: Callable[..., Any]
    inputs: tuple[str, ...]


def extraction_source(name: str, spec: str, n_ctx: int) -> ExtractionSource:
    """The extraction function of model ``name`` (``spec``) and the catalog datasets it reads."""
    zoo_name = zoo_target(spec)
    if zoo_name is not None:
        return ExtractionSource(bind(nodes.extract_zoo_activations, model_name=name, spec=spec),
                                ("evaluation_sequences", "evaluation_index", "tokenizer",
                                 model_dataset(zoo_name, "model_weights"), model_dataset(zoo_name, "model_config")))
    return ExtractionSource(bind(nodes.extract_external_activations, model_name=name, spec=spec, n_ctx=n_ctx),
                            ("evaluation_texts",))


def external_n_ctx(parameters: Mapping[str, Any]) -> int:
    """Row length for models with their own tokenizer: ``activations.n_ctx``, else ``corpus.n_ctx``."""
    return int(section(parameters, "activations").get("n_ctx") or section(parameters, "corpus").get("n_ctx", 64))


def model_pipeline(name: str, spec: str, n_ctx: int) -> Pipeline:
    """Extraction for one model in namespace ``models.<name>``."""
    source = extraction_source(name, spec, n_ctx)
    return Pipeline([namespaced_node(source.function, [*source.inputs, "params:activations"], OUTPUTS,
                                     name="extract_activations", namespace=model_namespace(name), tags=[GPU_WORK])])


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    """One extraction node per :func:`configured_models` entry (namespace ``models.<name>``)."""
    n_ctx = external_n_ctx(parameters)
    return sum((model_pipeline(name, spec, n_ctx) for name, spec in configured_models(parameters).items()),
               Pipeline([]))
