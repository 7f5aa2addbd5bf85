"""The ``zoo`` section's check (its pydantic model: :class:`thinkalike.pipelines.schema.ZooParameters`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.pipelines.schema import validate_corpus, validate_zoo


def check_zoo(parameters: Mapping[str, Any]) -> None:
    """``zoo``: every model's training (defaults + overrides) and architecture, against the corpus's sizes."""
    validate_zoo(parameters.get("zoo"), validate_corpus(parameters.get("corpus")))
