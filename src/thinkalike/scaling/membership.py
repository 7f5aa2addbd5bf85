"""Which models form the ``scaling`` family and its twins, from the parameters and the models whose activations are
extracted (no Kedro import).

``scaling.family: auto`` (the default) takes every GPT-NeoX zoo model whose activations are extracted, smallest
first (non-embedding parameters), except the on-trend twins; ``scaling.twins: auto`` pairs GPT-NeoX zoo models that
are equal in everything (width, depth, MLP width, rotary share, seed, training) but their heads: of each such pair,
the one whose head dimension is off the family's most common one is the family member, the other its twin
(:func:`thinkalike.models.zoo_record.neox_twins`). Explicit lists name any configured models
(``scaling.architectures`` gives the shapes of models that are not in the zoo, e.g. Hugging Face checkpoints). With
``auto`` and fewer than 3 members the pipeline is empty. The section's family settings are read once, into
:class:`FamilySettings`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Final, Literal

from thinkalike.models.zoo_record import neox_twins, zoo_models
from thinkalike.scaling.analysis import Architecture, ScalingConfigError, architecture_of

AUTO: Final = "auto"
MIN_MEMBERS = 3


@dataclass(frozen=True)
class ScalingPlan:
    """The family (smallest first), ``{off-trend member: twin}`` and every model's architecture."""

    family: tuple[str, ...]
    twins: dict[str, str]
    architectures: dict[str, Architecture]

    @property
    def models(self) -> list[str]:
        return [*self.family, *self.twins.values()]

    def pairs(self) -> list[tuple[str, str]]:
        """Every model with itself and every pair of the family and twins: the CKA tables the analysis reads."""
        return [(m, m) for m in self.models] + list(combinations(self.models, 2))


@dataclass(frozen=True)
class FamilySettings:
    """The ``scaling`` section's family settings, where their defaults are written: ``family`` (:data:`AUTO` or the
    members' names), ``twins`` (:data:`AUTO` or ``{off-trend member: twin}``) and ``architectures`` (the shapes of
    models outside the zoo, ``{name: {d_model, n_layers, n_heads, d_head, rotary_dims, d_mlp}}``)."""

    family: tuple[str, ...] | Literal["auto"] = AUTO
    twins: Mapping[str, str] | Literal["auto"] = AUTO
    architectures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _architectures(settings: FamilySettings, zoo: Mapping[str, Any]) -> Callable[[str], Architecture]:
    """The shape of a model: its ``scaling.architectures`` entry, else its zoo entry's."""

    def architecture(name: str) -> Architecture:
        if name in settings.architectures:
            return architecture_of(name, settings.architectures[name])
        if name in zoo:
            return architecture_of(name, zoo[name])
        raise ScalingConfigError(f"scaling: {name!r} is not a zoo model; give its shape in scaling.architectures")

    return architecture


def _members(settings: FamilySettings, neox: list[str], twins: Mapping[str, str]) -> list[str] | None:
    """The family's members: ``auto``, the GPT-NeoX zoo models but the twins (None when fewer than
    :data:`MIN_MEMBERS`); else the names given (an error when fewer)."""
    if settings.family == AUTO:
        family = [name for name in neox if name not in twins.values()]
        return family if len(family) >= MIN_MEMBERS else None
    family = list(settings.family)
    if len(family) < MIN_MEMBERS:
        raise ScalingConfigError(f"scaling.family needs at least {MIN_MEMBERS} models, got {family}")
    return family


def plan_family(settings: FamilySettings, zoo: Mapping[str, Any], extracted: Collection[str]) -> ScalingPlan | None:
    """The family of ``settings`` over the zoo entries ``zoo`` (``zoo.models``), or ``None`` when (``auto``) it has
    fewer than 3 members. ``twins: auto`` is :func:`~thinkalike.models.zoo_record.neox_twins` of the GPT-NeoX zoo
    models whose activations are extracted (``extracted``). Names that are not extracted, or a family of fewer
    than 3, raise :class:`ScalingConfigError` naming the setting."""
    records = zoo_models(zoo, [name for name in zoo if name in extracted])
    neox = [name for name, record in records.items() if record.kind == "gpt_neox"]
    twins = neox_twins(list(records.values())) if isinstance(settings.twins, str) else dict(settings.twins)
    family = _members(settings, neox, twins)
    if family is None:
        return None
    unknown = sorted({*family, *twins, *twins.values()} - set(extracted))
    if unknown:
        raise ScalingConfigError(
            f"scaling.family / scaling.twins name model(s) {unknown} that have no activations; "
            f"configured models: {sorted(extracted)}"
        )
    stray = sorted(odd for odd in twins if odd not in family)
    if stray:
        raise ScalingConfigError(f"scaling.twins: {stray} must be members of scaling.family ({family})")
    architecture = _architectures(settings, zoo)
    architectures = {name: architecture(name) for name in [*family, *twins.values()]}
    family.sort(key=lambda name: (architectures[name].n_parameters, name))
    return ScalingPlan(tuple(family), twins, architectures)
