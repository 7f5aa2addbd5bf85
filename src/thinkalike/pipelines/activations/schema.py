"""The ``activations`` section's check (its pydantic model: :class:`thinkalike.pipelines.schema.ActivationParameters`):
the settings, and every configured model's spec and tokenizer (no weights loaded)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from thinkalike.language.packing import check_packable
from thinkalike.models.bridge import resolve_bridge_checkpoint
from thinkalike.models.sources import check_model_spec, load_spec_tokenizer, parse_model_spec, spec_options
from thinkalike.pipelines.activations.pipeline import configured_models
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.schema import validate_activations, validate_corpus


def check_activations(parameters: Mapping[str, Any]) -> None:
    """``activations``: its keys, then each model of :func:`configured_models` (``activations.models.<name>``)."""
    activations = validate_activations(parameters.get("activations"))
    n_ctx = activations.n_ctx or validate_corpus(parameters.get("corpus")).n_ctx
    zoo_names = list((parameters.get("zoo") or {}).get("models") or {})
    for name, spec in configured_models(parameters).items():
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
