"""The ``scaling`` section's check: its settings and the family it names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.pipelines.errors import ParameterError


def check_scaling(parameters: Mapping[str, Any]) -> None:
    """``scaling`` (nothing when the section is empty): :class:`~thinkalike.scaling.analysis.ScalingSettings` and
    :func:`~thinkalike.pipelines.scaling.family.scaling_plan`."""
    if not parameters.get("scaling"):
        return
    from thinkalike.pipelines.scaling.family import scaling_plan
    from thinkalike.scaling.analysis import ScalingSettings

    try:
        ScalingSettings.from_parameters(parameters["scaling"])
        scaling_plan(parameters)
    except ParameterError:
        raise
    except (TypeError, ValueError) as error:
        message = str(error)
        raise ParameterError(message if message.startswith("scaling") else f"scaling: {message}") from None
