"""Checks of the run's configuration, made before any node runs (cheap: no weights are loaded).

Every section that a pipeline of the run reads (:mod:`thinkalike.pipelines.scope`) is validated from
its schema (:mod:`thinkalike.pipelines.schema`) before the first node, so a bad setting never surfaces
after earlier models trained; a section that no pipeline of the run reads is not looked at, so it
cannot stop the run. Errors are :class:`~thinkalike.pipelines.schema.ParameterError` s naming the full key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from kedro.pipeline import Pipeline

from thinkalike.language.natural_text import read_natural_text
from thinkalike.language.packing import check_packable
from thinkalike.models.bridge import resolve_bridge_checkpoint
from thinkalike.models.sources import (
    check_model_spec,
    load_spec_tokenizer,
    parse_model_spec,
    spec_options,
)
from thinkalike.pipelines.activations.pipeline import configured_models
from thinkalike.pipelines.builders import PIPELINE_BUILDERS, has_configuration_error
from thinkalike.pipelines.cka.pairs import cka_pairs
from thinkalike.pipelines.scope import PIPELINE_SECTIONS, sections_in_run
from thinkalike.pipelines.schema import (
    ParameterError,
    check_device,
    validate_activations,
    validate_corpus,
    validate_dataclass,
    validate_stitching,
    validate_zoo,
)
from thinkalike.reports.cka import CKASettings
from thinkalike.reports.measures import MeasureSettings

CKA_STRUCTURE_KEYS = frozenset({"pairs", "groups", "device", "mode", "measures"})
CKA_MODES = ("stored", "streaming")


def validate_parameters(parameters: dict[str, Any], pipelines: Iterable[str] | None = None,
                        built: Mapping[str, Pipeline] | None = None) -> None:
    """Raises a :class:`ParameterError` naming the parameter for any bad setting (a missing file included) of
    the sections that ``pipelines`` read (every project pipeline when ``None``). ``built``: the registered
    pipelines; those of ``pipelines`` that stand for a configuration error (or all, without ``built``) must
    build (:func:`check_builds`)."""
    pipelines = list(PIPELINE_SECTIONS if pipelines is None else pipelines)
    sections = sections_in_run(pipelines)
    corpus = validate_corpus(parameters.get("corpus"))
    if "zoo" in sections:
        validate_zoo(parameters.get("zoo"), corpus)
    zoo_names = list((parameters.get("zoo") or {}).get("models") or {})
    if "activations" in sections:
        activations = validate_activations(parameters.get("activations"))
        models = configured_models(parameters)
        n_ctx = activations.n_ctx or corpus.n_ctx
        for name, spec in models.items():
            try:
                _check_model(name, spec, zoo_names, n_ctx)
            except ValueError as error:  # ModelSourceError is a ValueError
                raise ParameterError(f"activations.models.{name}: {error}") from None
        if "cka" in sections and parameters.get("cka"):
            _validate_cka(parameters["cka"], models)
    if "scaling" in sections and parameters.get("scaling"):
        from thinkalike.pipelines.scaling.family import scaling_plan
        from thinkalike.reports.scaling import ScalingSettings

        try:
            ScalingSettings.from_parameters(parameters["scaling"])
            scaling_plan(parameters)
        except ParameterError:
            raise
        except (TypeError, ValueError) as error:
            message = str(error)
            raise ParameterError(message if message.startswith("scaling") else f"scaling: {message}") from None
    if "stitching" in sections and parameters.get("stitching") and zoo_names:  # no zoo models: nothing to stitch
        validate_stitching(parameters["stitching"], zoo_names)
    if "mlem" in sections and parameters.get("mlem"):
        from thinkalike.pipelines.mlem.schema import validate_mlem

        validate_mlem(parameters["mlem"], parameters)
    if "embedding" in sections and parameters.get("embedding"):
        from thinkalike.pipelines.embedding.schema import validate_embedding

        validate_embedding(parameters["embedding"], parameters)
    if "nli" in sections and parameters.get("nli"):
        from thinkalike.pipelines.nli.schema import validate_nli

        validate_nli(parameters["nli"], corpus.n_ctx)
    if corpus.natural_text.path:
        try:
            read_natural_text(corpus.natural_text.path, corpus.natural_text.mode)
        except (OSError, ValueError) as error:
            raise ParameterError(f"corpus.natural_text.path: {error}") from None
    check_builds(parameters, [name for name in pipelines if built is None or has_configuration_error(built[name])])


def check_builds(parameters: dict[str, Any], pipelines: Iterable[str]) -> None:
    """Each of ``pipelines`` builds from ``parameters``: the error that left it empty at registration
    (:func:`thinkalike.pipelines.builders.build_pipeline`) is raised here, naming the parameter."""
    for name in pipelines:
        try:
            PIPELINE_BUILDERS[name](parameters)
        except ParameterError:
            raise
        except ValueError as error:
            message = str(error)
            raise ParameterError(message if message.startswith(f"{name}.") else f"{name}: {message}") from None


def _check_model(name: str, spec: str, zoo_names: list[str], n_ctx: int) -> None:
    """The spec, a ``tl:`` architecture, and what packing needs of the model's tokenizer (no weights loaded)."""
    check_model_spec(spec, zoo_names=zoo_names)
    source, target = parse_model_spec(spec)
    if source == "tl":
        weights = spec_options(spec).get("weights")
        resolve_bridge_checkpoint(target, os.path.expanduser(weights) if weights else None)
    tokenizer = load_spec_tokenizer(spec)  # None for zoo: and tl: without tokenizer files
    if tokenizer is not None:
        check_packable(tokenizer, n_ctx, what=f"activations.models.{name} ({spec})")


def _validate_cka(cka: Any, models: dict[str, str]) -> None:
    validate_dataclass(CKASettings, cka, "cka", ignore=CKA_STRUCTURE_KEYS)
    if cka.get("mode", "stored") not in CKA_MODES:
        raise ParameterError(f"cka.mode: must be one of {CKA_MODES}, got {cka['mode']!r}")
    try:
        MeasureSettings.from_parameters(cka.get("measures"))
    except ValueError as error:
        message = str(error)
        raise ParameterError(message if message.startswith("cka.measures") else f"cka.measures: {message}") from None

    if cka.get("device") is not None:
        try:
            check_device(cka["device"])
        except ValueError as error:
            raise ParameterError(f"cka.device: {error}") from None
    try:
        cka_pairs(cka, models)
    except ValueError as error:
        raise ParameterError(f"cka.pairs: {error}") from None
    groups = cka.get("groups") or {}
    if not isinstance(groups, dict):
        raise ParameterError(f"cka.groups: must map model names to group labels, got {groups!r}")
    unknown = sorted(set(groups) - set(models))
    if unknown:
        raise ParameterError(f"cka.groups: unknown model(s) {unknown}; known: {sorted(models)}")
