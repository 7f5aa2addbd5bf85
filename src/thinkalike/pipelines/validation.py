"""Checks of the run's configuration made before any node runs (cheap: no weights are loaded)."""

from __future__ import annotations

from typing import Any

from thinkalike.language.natural_text import read_natural_text
from thinkalike.models.sources import check_model_spec
from thinkalike.pipelines.activations.pipeline import configured_models
from thinkalike.reports.cka import CKASettings


def validate_parameters(parameters: dict[str, Any]) -> None:
    """Raises a clear error for an unknown model spec, a missing path or an unreadable natural-text file."""
    zoo_names = list((parameters.get("zoo") or {}).get("models") or {})
    for name, spec in configured_models(parameters).items():
        if not isinstance(spec, str):
            raise ValueError(f"activations.models.{name}: a model spec must be a string like 'hf:<dir>', got {spec!r}")
        check_model_spec(spec, zoo_names=zoo_names)
    if parameters.get("cka"):
        CKASettings.from_parameters(parameters["cka"])
    natural = (parameters.get("corpus") or {}).get("natural_text") or {}
    if natural.get("path"):
        read_natural_text(natural["path"], natural.get("mode", "lines"))
