"""``activations``: per model (namespaced), the residual stream after every block.

Models: every zoo model when ``activations.include_zoo`` is true, plus ``activations.models``
(``name: spec`` with spec ``zoo:<name>``, ``zoo:<name>?weights=initial`` — its initialisation, untrained —,
``hf:<id or dir>``, ``gguf:<file>``, ``tl:<arch>``).
A model's extraction is in namespace ``models.<name>``, with its training when it is a zoo model
(:mod:`thinkalike.pipelines.namespaces`): ``kedro run --pipelines activations --namespaces
models.gelu_2l`` extracts one model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kedro.pipeline import Pipeline

from thinkalike.models.sources import zoo_target
from thinkalike.pipelines.activations import nodes
from thinkalike.pipelines.activations.schema import (
    ActivationParameters,
    activations_section,
    configured_models,
    extracted_models,
    zoo_model_names,
)
from thinkalike.pipelines.corpus.schema import CorpusParameters, corpus_section
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import (
    model_dataset,
    model_namespace,
    namespaced_node,
)
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.runners.settings import GPU_WORK

__all__ = ["ExtractionSource", "configured_models", "create_pipeline", "extraction_source", "external_n_ctx"]

OUTPUTS = ["activations", "activation_index"]


@dataclass(frozen=True)
class ExtractionSource:
    """How to extract one model: ``function(*inputs' data) -> (ActivationStream, index)`` (its settings bound);
    ``inputs`` are catalog names."""

    function: Callable[..., Any]
    inputs: tuple[str, ...]


def extraction_source(name: str, spec: str, settings: ActivationParameters, n_ctx: int) -> ExtractionSource:
    """The extraction function of model ``name`` (``spec``), with the parsed ``activations`` section bound, and the
    catalog datasets it reads."""
    zoo_name = zoo_target(spec)
    if zoo_name is not None:
        return ExtractionSource(
            with_fixed_arguments(nodes.extract_zoo_activations, settings=settings, model_name=name, spec=spec),
            (
                "evaluation_sequences",
                "evaluation_index",
                "tokenizer",
                model_dataset(zoo_name, "model_weights"),
                model_dataset(zoo_name, "model_config"),
            ),
        )
    return ExtractionSource(
        with_fixed_arguments(
            nodes.extract_external_activations, settings=settings, model_name=name, spec=spec, n_ctx=n_ctx
        ),
        ("evaluation_texts",),
    )


def external_n_ctx(settings: ActivationParameters, corpus: CorpusParameters) -> int:
    """Row length for models with their own tokenizer: ``activations.n_ctx``, else ``corpus.n_ctx``."""
    return settings.n_ctx or corpus.n_ctx


def model_pipeline(name: str, spec: str, settings: ActivationParameters, n_ctx: int) -> Pipeline:
    """Extraction for one model in namespace ``models.<name>``."""
    source = extraction_source(name, spec, settings, n_ctx)
    return Pipeline(
        [
            namespaced_node(
                source.function,
                list(source.inputs),
                OUTPUTS,
                name="extract_activations",
                namespace=model_namespace(name),
                tags=[GPU_WORK],
            )
        ]
    )


def create_pipeline(run: RunSettings) -> Pipeline:
    """One extraction node per configured model (:func:`~thinkalike.pipelines.activations.schema.extracted_models`,
    namespace ``models.<name>``), with the ``activations`` section parsed once here
    (:func:`~thinkalike.pipelines.activations.schema.activations_section`)."""
    parameters = run.parameters
    settings = run.parsed(activations_section)
    n_ctx = external_n_ctx(settings, run.parsed(corpus_section))
    models = extracted_models(settings, zoo_model_names(parameters))
    return sum((model_pipeline(name, spec, settings, n_ctx) for name, spec in models.items()), Pipeline([]))
