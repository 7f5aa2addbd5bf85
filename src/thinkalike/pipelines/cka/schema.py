"""The ``cka`` section's check: its settings (:class:`~thinkalike.cka.settings.CKASettings`), its measures
(:class:`~thinkalike.measures.tables.MeasureSettings`), device, pairs and groups against the configured models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.pipelines.activations.pipeline import configured_models
from thinkalike.pipelines.cka.pairs import cka_pairs
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.schema import check_device, validate_dataclass
from thinkalike.cka.settings import CKASettings
from thinkalike.measures.tables import MeasureSettings

CKA_STRUCTURE_KEYS = frozenset({"pairs", "groups", "device", "mode", "measures"})
CKA_MODES = ("stored", "streaming")


def check_cka(parameters: Mapping[str, Any]) -> None:
    """``cka`` (nothing when the section is empty)."""
    if parameters.get("cka"):
        validate_cka(parameters["cka"], configured_models(parameters))


def validate_cka(cka: Any, models: dict[str, str]) -> None:
    """The ``cka`` section against ``models`` (name → spec)."""
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
