"""The ``stitching`` section's check (its pydantic model: :class:`thinkalike.pipelines.schema.StitchingParameters`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.pipelines.schema import validate_stitching


def check_stitching(parameters: Mapping[str, Any]) -> None:
    """``stitching`` against the zoo's models (nothing when the section is empty or there is no zoo model)."""
    zoo_names = list((parameters.get("zoo") or {}).get("models") or {})
    if parameters.get("stitching") and zoo_names:
        validate_stitching(parameters["stitching"], zoo_names)
