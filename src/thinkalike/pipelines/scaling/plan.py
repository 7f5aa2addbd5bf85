"""Which models form the ``scaling`` family, from the run's settings (no Kedro import): the plan of
:mod:`thinkalike.scaling.membership` over the models whose activations are extracted."""

from __future__ import annotations

from thinkalike.pipelines.activations.schema import configured_models_of
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.scaling.schema import scaling_section
from thinkalike.scaling.membership import ScalingPlan, plan_family


def scaling_plan(run: RunSettings) -> ScalingPlan | None:
    """:func:`~thinkalike.scaling.membership.plan_family` of the run's ``scaling`` section
    (:func:`~thinkalike.pipelines.scaling.schema.scaling_section`) over ``zoo.models`` and the configured models
    (:func:`~thinkalike.pipelines.activations.schema.configured_models`); ``None`` without a ``scaling`` section."""
    if not run.raw("scaling"):
        return None
    zoo = dict((run.raw("zoo") or {}).get("models") or {})
    return plan_family(run.parsed(scaling_section).family_settings(), zoo, run.parsed(configured_models_of))


def scaling_cka_pairs(run: RunSettings) -> list[tuple[str, str]]:
    """The CKA pairs the scaling analysis reads (every member and twin with itself and with each other:
    :meth:`~thinkalike.scaling.membership.ScalingPlan.pairs`); none without a family."""
    plan = scaling_plan(run)
    return plan.pairs() if plan else []


def check_scaling(run: RunSettings) -> None:
    """``scaling`` (nothing when the section is empty): :func:`~thinkalike.pipelines.scaling.schema.validate_scaling`,
    its :class:`~thinkalike.scaling.analysis.ScalingSettings` and its family (:func:`scaling_plan`), each error a
    :class:`ParameterError` naming ``scaling``."""
    if not run.raw("scaling"):
        return
    try:
        run.parsed(scaling_section).settings()
        scaling_plan(run)
    except ParameterError:
        raise
    except (TypeError, ValueError) as error:
        message = str(error)
        raise ParameterError(message if message.startswith("scaling") else f"scaling: {message}") from None
