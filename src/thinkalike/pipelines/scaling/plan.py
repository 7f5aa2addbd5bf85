"""Which models form the ``scaling`` family, from the run's parameters (no Kedro import): the plan of
:mod:`thinkalike.scaling.membership` over the models whose activations are extracted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkalike.pipelines.activations.schema import configured_models
from thinkalike.scaling.membership import ScalingPlan, family_plan


def scaling_plan(parameters: Mapping[str, Any]) -> ScalingPlan | None:
    """:func:`~thinkalike.scaling.membership.family_plan` of the parameters over their configured models
    (:func:`~thinkalike.pipelines.activations.schema.configured_models`, read only when there is a ``scaling``
    section)."""
    if not parameters.get("scaling"):
        return None
    return family_plan(parameters, configured_models(parameters))


def scaling_cka_pairs(parameters: Mapping[str, Any], models: Mapping[str, str]) -> list[tuple[str, str]]:
    """The CKA pairs the scaling analysis reads (every member and twin with itself and with each other:
    :meth:`~thinkalike.scaling.membership.ScalingPlan.pairs`), over the configured ``models``; none without a
    family."""
    plan = family_plan(parameters, models) if parameters.get("scaling") else None
    return plan.pairs() if plan else []
