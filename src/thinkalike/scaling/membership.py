"""Which models form the ``scaling`` family and its twins, from the parameters and the models whose activations are
extracted (no Kedro import).

``scaling.family: auto`` (the default) takes every GPT-NeoX zoo model whose activations are extracted, smallest
first (non-embedding parameters), except the on-trend twins; ``scaling.twins: auto`` pairs GPT-NeoX zoo models that
are equal in everything (width, depth, MLP width, rotary share, seed, training) but their number of heads: of each
such pair, the one whose head dimension is off the family's most common one is the family member, the other its
twin. Explicit lists name any configured models (``scaling.architectures`` gives the shapes of models that are not
in the zoo, e.g. Hugging Face checkpoints). With ``auto`` and fewer than 3 members the pipeline is empty.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from thinkalike.scaling.analysis import Architecture, ScalingConfigError, architecture_of

AUTO = "auto"
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


def _section(parameters: Mapping[str, Any], name: str) -> dict[str, Any]:
    return dict(parameters.get(name) or {})


def _neox_zoo(parameters: Mapping[str, Any], extracted: Collection[str]) -> dict[str, dict[str, Any]]:
    zoo = _section(parameters, "zoo").get("models") or {}
    return {
        name: dict(entry)
        for name, entry in zoo.items()
        if name in extracted and (entry.get("architecture") or {}).get("model_type") == "gpt_neox"
    }


def _twin_candidates(neox: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    def without_heads(entry: Mapping[str, Any]) -> tuple:
        arch = {k: v for k, v in (entry.get("architecture") or {}).items() if k != "num_attention_heads"}
        rest = {k: v for k, v in entry.items() if k != "architecture"}
        return repr(sorted(arch.items())), repr(sorted(rest.items()))

    return [
        (a, b)
        for a, b in combinations(neox, 2)
        if without_heads(neox[a]) == without_heads(neox[b])
        and neox[a]["architecture"].get("num_attention_heads") != neox[b]["architecture"].get("num_attention_heads")
    ]


def family_plan(parameters: Mapping[str, Any], extracted: Collection[str]) -> ScalingPlan | None:
    """The family of the ``scaling`` section, or ``None`` when it has no section or (``auto``) fewer than 3
    members. ``extracted``: the names of the models whose activations are extracted (the configured models).
    Names that are not among them, or a family of fewer than 3, raise :class:`ScalingConfigError` naming the
    setting."""
    scaling = _section(parameters, "scaling")
    if not scaling:
        return None
    zoo = _section(parameters, "zoo").get("models") or {}
    given = dict(scaling.get("architectures") or {})
    neox = _neox_zoo(parameters, extracted)

    def architecture(name: str) -> Architecture:
        if name in given:
            return architecture_of(name, given[name])
        if name in zoo:
            return architecture_of(name, zoo[name])
        raise ScalingConfigError(f"scaling: {name!r} is not a zoo model; give its shape in scaling.architectures")

    family_setting, twins_setting = scaling.get("family", AUTO), scaling.get("twins", AUTO)
    if twins_setting == AUTO:
        shapes = {name: architecture(name) for name in neox}
        head_dims = [shape.d_head for shape in shapes.values()]
        trend = max(set(head_dims), key=head_dims.count) if head_dims else None
        twins = {}
        for a, b in _twin_candidates(neox):
            if (shapes[a].d_head == trend) != (shapes[b].d_head == trend):
                odd, twin = (b, a) if shapes[a].d_head == trend else (a, b)
                twins[odd] = twin
    else:
        twins = {str(k): str(v) for k, v in dict(twins_setting or {}).items()}
    if family_setting == AUTO:
        family = [name for name in neox if name not in twins.values()]
        if len(family) < MIN_MEMBERS:
            return None
    else:
        family = [str(name) for name in family_setting or []]
        if len(family) < MIN_MEMBERS:
            raise ScalingConfigError(f"scaling.family needs at least {MIN_MEMBERS} models, got {family}")
    unknown = sorted({*family, *twins, *twins.values()} - set(extracted))
    if unknown:
        raise ScalingConfigError(
            f"scaling.family / scaling.twins name model(s) {unknown} that have no activations; "
            f"configured models: {sorted(extracted)}"
        )
    stray = sorted(odd for odd in twins if odd not in family)
    if stray:
        raise ScalingConfigError(f"scaling.twins: {stray} must be members of scaling.family ({family})")
    architectures = {name: architecture(name) for name in [*family, *twins.values()]}
    family.sort(key=lambda name: (architectures[name].n_parameters, name))
    return ScalingPlan(tuple(family), twins, architectures)
