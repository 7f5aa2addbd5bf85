"""The ``activations`` section: its model (:class:`ActivationParameters`, where each default is written), its
parse (:func:`validate_activations`, once per builder), which models it extracts (:func:`configured_models`) and
its check before a run (:func:`check_activations`: the settings, and every configured model's spec and tokenizer,
no weights loaded)."""

from __future__ import annotations

import os
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from thinkalike.language.packing import check_packable
from thinkalike.models.bridge import resolve_bridge_checkpoint
from thinkalike.models.sources import check_model_spec, load_spec_tokenizer, parse_model_spec, spec_options
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.namespaces import check_model_names
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import Device, _Section, validate_section

Dtype = Literal["float32", "float16", "bfloat16"]
#: The dtypes models run in and activations are stored in.
ACTIVATION_DTYPES: tuple[str, ...] = typing.get_args(Dtype)


class ActivationParameters(_Section):
    """``activations``: which models (every zoo model with ``include_zoo``, and ``models``: name → spec), how they
    run (``batch_size``, ``dtype``, ``device``, per-model ``devices``), what is stored (``store_dtype``, null: as
    ``dtype``; ``layers``, null: all; ``final_norm``) and how the evaluation texts are laid out (``n_ctx`` of the
    models with their own tokenizer, null: ``corpus.n_ctx``; ``packing``)."""

    include_zoo: bool = True
    models: dict[str, str] = Field(default_factory=dict)
    batch_size: int = Field(32, ge=1)
    dtype: Dtype = "float32"
    store_dtype: Dtype | None = None
    layers: list[typing.Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    device: Device | None = None
    devices: dict[str, Device] = Field(default_factory=dict)  # per model, overriding device
    n_ctx: int | None = Field(None, ge=4)
    packing: Literal["packed", "sentence"] = "packed"
    final_norm: bool = False


def validate_activations(values: Any) -> ActivationParameters:
    """The ``activations`` section (absent: every default); a :class:`ParameterError` naming the key."""
    activations = validate_section(ActivationParameters, values, "activations")
    for name, spec in activations.models.items():
        if not spec.strip():
            raise ParameterError(f"activations.models.{name}: empty model spec")
    return activations


#: The keys of ``activations`` that say which models are extracted (:func:`configured_models`).
MODEL_KEYS = ("include_zoo", "models")


def zoo_model_names(parameters: Mapping[str, Any]) -> list[str]:
    """The names under ``zoo.models``: what the pipelines that name nodes after the zoo's models read of the
    ``zoo`` section (each model's settings are the zoo pipeline's,
    :class:`~thinkalike.pipelines.zoo.schema.ZooParameters`)."""
    return list(section(parameters, "zoo").get("models") or {})


def extracted_models(activations: ActivationParameters, zoo_models: list[str]) -> dict[str, str]:
    """``{namespace: spec}`` of the models whose activations are extracted: the zoo's ``zoo_models`` as
    ``zoo:<name>`` when ``activations.include_zoo``, then ``activations.models``; a name that cannot be a
    namespace is a :class:`ParameterError` naming it."""
    models: dict[str, str] = {}
    if activations.include_zoo:
        check_model_names(zoo_models, "zoo.models")
        models.update({name: f"zoo:{name}" for name in zoo_models})
    check_model_names(activations.models, "activations.models")
    models.update(activations.models)
    return models


def configured_models(parameters: Mapping[str, Any]) -> dict[str, str]:
    """:func:`extracted_models` of the run's parameters. Only the keys that choose the models (:data:`MODEL_KEYS`)
    are parsed here, so the pipelines that need the model list (corpus, cka, mlem, …) do not check this
    machine's devices."""
    raw = section(parameters, "activations")
    chosen = validate_section(ActivationParameters, {key: raw[key] for key in MODEL_KEYS if key in raw}, "activations")
    return extracted_models(chosen, zoo_model_names(parameters))


def activations_section(run: RunSettings) -> ActivationParameters:
    """The run's ``activations`` section parsed (:func:`validate_activations`)."""
    return validate_activations(run.raw("activations"))


def configured_models_of(run: RunSettings) -> dict[str, str]:
    """The run's configured models (:func:`configured_models`), worked out once per run for every reader."""
    return configured_models(run.parameters)


def check_activations(run: RunSettings) -> None:
    """``activations``: its keys, then each model of :func:`configured_models` (``activations.models.<name>``)."""
    activations = run.parsed(activations_section)
    n_ctx = activations.n_ctx or run.parsed(corpus_section).n_ctx
    zoo_names = zoo_model_names(run.parameters)
    for name, spec in extracted_models(activations, zoo_names).items():
        try:
            _check_model(spec, zoo_names, n_ctx, name)
        except ValueError as error:  # ModelSourceError is a ValueError
            raise ParameterError(f"activations.models.{name}: {error}") from None


def _check_model(spec: str, zoo_names: list[str], n_ctx: int, name: str) -> None:
    """The spec, a ``tl:`` architecture, and what packing needs of the model's tokenizer (no weights loaded)."""
    check_model_spec(spec, zoo_names=zoo_names)
    source, target = parse_model_spec(spec)
    if source == "tl":
        weights = spec_options(spec).get("weights")
        resolve_bridge_checkpoint(target, os.path.expanduser(weights) if weights else None)
    tokenizer = load_spec_tokenizer(spec)  # None for zoo: and tl: without tokenizer files
    if tokenizer is not None:
        check_packable(tokenizer, n_ctx, what=f"activations.models.{name} ({spec})")
