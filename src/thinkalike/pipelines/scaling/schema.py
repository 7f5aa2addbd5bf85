"""The ``scaling`` section: its model (:class:`ScalingParameters`), its parse (:func:`validate_scaling`) and its
check before a run (:func:`~thinkalike.pipelines.scaling.plan.check_scaling`: its settings and the family it
names)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import _Section, dataclass_default, validate_section
from thinkalike.scaling.analysis import ScalingSettings
from thinkalike.scaling.membership import AUTO, FamilySettings

#: The analysis settings' fields (:class:`~thinkalike.scaling.analysis.ScalingSettings`), flat in the section.
ANALYSIS_FIELDS = tuple(field.name for field in dataclasses.fields(ScalingSettings))


def _default(name: str) -> Any:
    """ScalingSettings' default of field ``name``: the section's fields take it from there (one default)."""
    return dataclass_default(ScalingSettings, name)


class ScalingParameters(_Section):
    """``scaling``: the family, its twins and the shapes of models outside the zoo
    (:class:`~thinkalike.scaling.membership.FamilySettings`), then the analysis settings, typed here with
    :class:`~thinkalike.scaling.analysis.ScalingSettings`' defaults (where they are written) and checked by it."""

    family: list[str] | Literal["auto"] = AUTO
    twins: dict[str, str] | Literal["auto"] = AUTO
    architectures: dict[str, dict[str, Any]] = Field(default_factory=dict)
    early_depths: tuple[float, ...] = Field(_default("early_depths"), strict=False)  # a YAML list, as a tuple
    band: tuple[float, float] = Field(_default("band"), strict=False)
    max_blocks: int = _default("max_blocks")
    min_contrast: float = _default("min_contrast")
    n_resamples: int = _default("n_resamples")
    pair_resamples: int = _default("pair_resamples")
    null_permutations: int = _default("null_permutations")
    seed: int = _default("seed")
    outlier_z: float = _default("outlier_z")

    def family_settings(self) -> FamilySettings:
        """The family settings, for :func:`~thinkalike.scaling.membership.plan_family`."""
        family = self.family if self.family == AUTO else tuple(self.family)
        return FamilySettings(family, self.twins, self.architectures)

    def settings(self) -> ScalingSettings:
        """The analysis settings (:class:`~thinkalike.scaling.analysis.ScalingSettings`, which checks them)."""
        return ScalingSettings(**self.model_dump(include=set(ANALYSIS_FIELDS)))


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
