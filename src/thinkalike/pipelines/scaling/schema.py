"""The ``scaling`` section: its model (:class:`ScalingParameters`), its parse (:func:`validate_scaling`) and its
check before a run (:func:`~thinkalike.pipelines.scaling.plan.check_scaling`: its settings and the family it
names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import _Section, validate_section
from thinkalike.scaling.analysis import ScalingSettings
from thinkalike.scaling.membership import AUTO, FamilySettings


class ScalingParameters(_Section):
    """``scaling``: the family, its twins and the shapes of models outside the zoo
    (:class:`~thinkalike.scaling.membership.FamilySettings`), then the analysis settings
    (:class:`~thinkalike.scaling.analysis.ScalingSettings`, where their defaults are written: null keeps one)."""

    family: list[str] | Literal["auto"] = AUTO
    twins: dict[str, str] | Literal["auto"] = AUTO
    architectures: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # the analysis settings: null (or absent) keeps ScalingSettings' default
    early_depths: list[float] | None = None
    band: list[float] | None = None
    max_blocks: int | None = None
    min_contrast: float | None = None
    n_resamples: int | None = None
    pair_resamples: int | None = None
    null_permutations: int | None = None
    seed: int | None = None
    outlier_z: float | None = None

    def family_settings(self) -> FamilySettings:
        """The family settings, for :func:`~thinkalike.scaling.membership.plan_family`."""
        family = self.family if self.family == AUTO else tuple(self.family)
        return FamilySettings(family, self.twins, self.architectures)

    def settings(self) -> ScalingSettings:
        """The analysis settings (:meth:`~thinkalike.scaling.analysis.ScalingSettings.from_parameters`)."""
        return ScalingSettings.from_parameters(self.model_dump(exclude={"family", "twins", "architectures"}))


#: The keys of the ``scaling`` section: the family (:func:`~thinkalike.pipelines.scaling.plan.scaling_plan`) and
#: the analysis settings (:class:`~thinkalike.scaling.analysis.ScalingSettings`).
SCALING_KEYS = tuple(ScalingParameters.model_fields)


def validate_scaling(values: Any) -> ScalingParameters:
    """The section: its keys (:data:`SCALING_KEYS`; another is an unknown parameter, named with the section's keys)
    and their types, each error naming ``scaling.<key>``."""
    unknown = sorted(set(values or {}) - set(SCALING_KEYS)) if isinstance(values, Mapping) else []
    if unknown:
        raise ParameterError(f"scaling.{unknown[0]}: unknown parameter (the section's keys: {', '.join(SCALING_KEYS)})")
    return validate_section(ScalingParameters, values, "scaling")


def scaling_section(run: RunSettings) -> ScalingParameters:
    """The run's ``scaling`` section parsed (:func:`validate_scaling`)."""
    return validate_scaling(run.raw("scaling"))
