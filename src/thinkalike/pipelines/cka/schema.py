"""The ``cka`` section: its model (:class:`CKAParameters`), its parse (:func:`parse_cka`; of the run's settings
:func:`cka_settings`, and :func:`cka_section` against the configured models, each once per run) and its check before
a run (:func:`check_cka`).

The section reads as a straight line: ``conf/*/parameters_cka.yml`` → :class:`CKAParameters` (its estimation keys
as :class:`~thinkalike.cka.settings.CKASettings`, ``cka.measures`` as
:class:`~thinkalike.cka.measure_tables.MeasureSettings`: the library's dataclasses, where those defaults are written;
``cka.pairs`` as :class:`~thinkalike.pipelines.cka.pairs.CKAPairs`)
→ the nodes (:mod:`thinkalike.pipelines.cka.nodes`, bound to it) → :mod:`thinkalike.cka` and
:mod:`thinkalike.cka.measure_tables`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, InstanceOf, field_validator

from thinkalike.cka.measure_tables import LAYER_GRIDS, WHERE, MeasureSettings
from thinkalike.cka.settings import CKASettings
from thinkalike.measures.registry import MEASURE_NAMES
from thinkalike.pipelines.activations.schema import configured_models_of
from thinkalike.pipelines.cka.pairs import CKAPairs, cka_pairs, parse_pairs
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import Device, _Section, dataclass_default, validate_section

#: The keys of ``cka`` that are not :class:`CKASettings` fields (:class:`CKAParameters`' own).
CKA_STRUCTURE_KEYS = frozenset({"pairs", "groups", "device", "mode", "measures"})


def _measure_default(name: str) -> Any:
    """MeasureSettings' default of field ``name`` (the section's models take it from there: one default)."""
    return dataclass_default(MeasureSettings, name)


class RemediesParameters(_Section):
    """``cka.measures.remedies``: these measures again, standardised and with the top dimensions removed."""

    measures: list[str] = Field(default_factory=lambda: list(_measure_default("remedy_measures")))
    remove_top_dimensions: int = _measure_default("remedy_top_dimensions")


class CalibrationParameters(_Section):
    """``cka.measures.calibration``: the measures given a permutation null on pairs of different models."""

    measures: list[str] = Field(default_factory=lambda: list(_measure_default("calibration_measures")))
    n_permutations: int = _measure_default("calibration_permutations")


class GroundingParameters(_Section):
    """``cka.measures.grounding``: the controls of a model against itself (principal components removed, up to)."""

    max_components: int = _measure_default("grounding_components")


#: ``cka.measures.names: all``: every registered measure.
ALL_MEASURES = "all"


class MeasuresParameters(_Section):
    """``cka.measures``, laid out as its YAML (remedies, calibration, grounding nested; null turns each off): typed here,
    checked by :class:`~thinkalike.cka.measure_tables.MeasureSettings`, which :meth:`settings` builds."""

    #: the measures, in the order given, or ``all``: every registered one in the registry's order
    #: (:data:`~thinkalike.measures.registry.MEASURE_NAMES`, so that a new measure module is in the table by itself)
    names: list[str] | Literal["all"] = Field(default_factory=list)
    max_tokens: int = _measure_default("max_tokens")
    seed: int = _measure_default("seed")
    layers: Literal[LAYER_GRIDS] = _measure_default("layers")  # type: ignore[valid-type]
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    standardise: bool = _measure_default("standardise")
    remove_top_dimensions: int = _measure_default("remove_top_dimensions")
    remedies: RemediesParameters | None = Field(default_factory=RemediesParameters)
    calibration: CalibrationParameters | None = Field(default_factory=CalibrationParameters)
    grounding: GroundingParameters | None = Field(default_factory=GroundingParameters)

    def settings(self) -> MeasureSettings:
        """The library's settings: the nested blocks' fields flat, a null block off (no remedies, no calibration, no
        grounding controls)."""
        remedies, calibration = self.remedies, self.calibration or CalibrationParameters(measures=[])
        return MeasureSettings(
            names=MEASURE_NAMES if self.names == ALL_MEASURES else tuple(self.names),
            max_tokens=self.max_tokens,
            seed=self.seed,
            options={name: dict(options) for name, options in self.options.items()},
            standardise=self.standardise,
            remove_top_dimensions=self.remove_top_dimensions,
            remedy_measures=tuple(remedies.measures) if remedies else (),
            remedy_top_dimensions=remedies.remove_top_dimensions
            if remedies
            else _measure_default("remedy_top_dimensions"),
            calibration_measures=tuple(calibration.measures),
            calibration_permutations=calibration.n_permutations,
            grounding_components=self.grounding.max_components if self.grounding else 0,
            layers=self.layers,
        )


def measure_settings(values: Any) -> MeasureSettings:
    """``cka.measures`` (absent or null: no measures) as :class:`~thinkalike.cka.measure_tables.MeasureSettings`; a
    :class:`ParameterError` naming the key (``cka.measures.<key>…``) otherwise."""
    if values is None:
        return MeasureSettings()
    parsed = validate_section(MeasuresParameters, values, WHERE)
    try:
        return parsed.settings()
    except ValueError as error:
        message = str(error)
        raise ParameterError(message if message.startswith(WHERE) else f"{WHERE}: {message}") from None


class CKAParameters(_Section):
    """``cka`` parsed (:func:`parse_cka`): ``estimation`` is the section's estimation keys (``estimator`` …
    ``exclude_special_tokens``, flat in the section) as :class:`~thinkalike.cka.settings.CKASettings`; ``measures``
    is ``cka.measures`` as :class:`~thinkalike.cka.measure_tables.MeasureSettings` (absent or null: CKA alone);
    ``mode``: ``stored`` (from the activation stores) or ``streaming`` (from the forward passes); ``device``: where
    CKA runs (null: CUDA when present, else CPU); ``pairs``: ``cka.pairs`` as
    :class:`~thinkalike.pipelines.cka.pairs.CKAPairs` (null: every pair of the configured models and each with
    itself); ``groups``: model → group label."""

    estimation: InstanceOf[CKASettings] = Field(default_factory=CKASettings)
    measures: InstanceOf[MeasureSettings] = Field(default_factory=MeasureSettings)
    mode: Literal["stored", "streaming"] = "stored"
    device: Device | None = None
    pairs: InstanceOf[CKAPairs] | None = None
    groups: dict[str, str] = Field(default_factory=dict)

    @field_validator("groups", mode="before")
    @classmethod
    def _labels(cls, groups: Any) -> Any:
        if groups is None:
            return {}
        if not isinstance(groups, Mapping):
            raise ValueError("must map model names to group labels")
        return {str(model): str(group) for model, group in groups.items()}


def parse_cka(values: Any) -> CKAParameters:
    """The ``cka`` section (absent: every default) on its own; a :class:`ParameterError` naming the key
    (``cka.<estimation key>``, ``cka.measures…``, ``cka.pairs…``, ``cka.mode`` …)."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ParameterError(f"cka: must be a mapping of settings, got {values!r}")
    estimation = validate_section(
        CKASettings, {key: value for key, value in values.items() if key not in CKA_STRUCTURE_KEYS}, "cka"
    )
    measures = measure_settings(values.get("measures"))
    structure = {key: values[key] for key in CKA_STRUCTURE_KEYS - {"measures", "pairs"} if key in values}
    pairs = None if values.get("pairs") is None else parse_pairs(values["pairs"], "cka.pairs")
    parsed = {**structure, "estimation": estimation, "measures": measures, "pairs": pairs}
    return validate_section(CKAParameters, parsed, "cka")


def validate_cka(values: Any, models: dict[str, str]) -> CKAParameters:
    """:func:`parse_cka`, then its pairs and groups against ``models`` (name → spec)."""
    return checked_against_models(parse_cka(values), models)


def checked_against_models(cka: CKAParameters, models: dict[str, str]) -> CKAParameters:
    """``cka`` whose pairs and groups name only ``models`` (name → spec); a :class:`ParameterError` naming the key
    otherwise."""
    try:
        cka_pairs(cka.pairs, models)
    except ValueError as error:
        raise ParameterError(f"cka.pairs: {error}") from None
    unknown = sorted(set(cka.groups) - set(models))
    if unknown:
        raise ParameterError(f"cka.groups: unknown model(s) {unknown}; known: {sorted(models)}")
    return cka


def cka_settings(run: RunSettings) -> CKAParameters:
    """The run's ``cka`` section parsed on its own (:func:`parse_cka`; absent: every default)."""
    return parse_cka(run.raw("cka"))


def cka_section(run: RunSettings) -> CKAParameters:
    """The run's ``cka`` section (:func:`cka_settings`) checked against the configured models
    (:func:`checked_against_models`)."""
    return checked_against_models(run.parsed(cka_settings), run.parsed(configured_models_of))


def check_cka(run: RunSettings) -> None:
    """``cka`` (nothing when the section is empty)."""
    if run.raw("cka"):
        run.parsed(cka_section)
