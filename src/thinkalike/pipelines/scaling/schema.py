"""The ``scaling`` section's check: its settings and the family it names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from thinkalike.pipelines.errors import ParameterError
from thinkalike.scaling.analysis import ScalingSettings

#: The keys of the ``scaling`` section: the family (:func:`~thinkalike.pipelines.scaling.plan.scaling_plan`) and
#: the analysis settings (:class:`~thinkalike.scaling.analysis.ScalingSettings`).
SCALING_KEYS = ("family", "twins", "architectures", *(f.name for f in fields(ScalingSettings)))


def check_scaling(parameters: Mapping[str, Any]) -> None:
    """``scaling`` (nothing when the section is empty): its keys (:data:`SCALING_KEYS`; another is an unknown
    parameter, as in every other section), :class:`~thinkalike.scaling.analysis.ScalingSettings` and
    :func:`~thinkalike.pipelines.scaling.plan.scaling_plan`."""
    if not parameters.get("scaling"):
        return
    unknown = sorted(set(parameters["scaling"]) - set(SCALING_KEYS))
    if unknown:
        raise ParameterError(f"scaling.{unknown[0]}: unknown parameter (the section's keys: {', '.join(SCALING_KEYS)})")
    from thinkalike.pipelines.scaling.plan import scaling_plan
    from thinkalike.scaling.analysis import ScalingSettings

    try:
        ScalingSettings.from_parameters(parameters["scaling"])
        scaling_plan(parameters)
    except ParameterError:
        raise
    except (TypeError, ValueError) as error:
        message = str(error)
        raise ParameterError(message if message.startswith("scaling") else f"scaling: {message}") from None
