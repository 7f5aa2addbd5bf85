"""The ``stitching`` section: its model (:class:`StitchingParameters`, where each default is written), its parse
(:func:`validate_stitching`, once, by the pipeline's builder) and its check before a run (:func:`check_stitching`).

The section reads as a straight line: ``conf/*/parameters_stitching.yml`` → :class:`StitchingParameters` → the
nodes (:mod:`thinkalike.pipelines.stitching.nodes`, bound to it) → :mod:`thinkalike.stitching`
(:meth:`StitchingParameters.stitch_settings`, :meth:`StitchingParameters.seeds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from thinkalike.pipelines.activations.schema import zoo_model_names
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import Device, ParameterError, _Section, validate_section
from thinkalike.pipelines.stitching.plan import stitching_pairs
from thinkalike.stitching import StitchConfigError, StitchSettings, phi_seed_list


class StitchingParameters(_Section):
    """``stitching``: which ordered zoo-model pairs (``pairs``, ``directions``, ``self_baselines``), layers and stitch
    kinds; the evaluation split (``eval_fraction`` of the distinct sequences among the first ``max_sequences``
    held-out ones, drawn with ``split_seed``; 1: all of them, with ``train_source: train_sequences`` only) and φ's training data (``train_source``, ``max_train_sequences``);
    ``settings`` are :class:`~thinkalike.stitching.StitchSettings` (validated by building it);
    ``exclude_special_targets``: special tokens are never targets (the section's key, not a setting);
    ``phi_seeds``: a number of φ seeds ≥ 1 or a list of distinct seeds ≥ 0
    (:func:`~thinkalike.stitching.phi_seed_list`)."""

    pairs: dict[str, Any] = Field(default_factory=dict)  # the syntax of cka.pairs
    directions: Literal["forward", "both"] = "both"
    self_baselines: bool = True
    layers: Literal["diagonal", "relative", "all"] = "diagonal"
    # pydantic copies a mutable default for each instance
    kinds: list[Literal["identity", "affine", "affine_ln"]] = Field(["identity", "affine", "affine_ln"], min_length=1)
    eval_fraction: float = Field(1.0, gt=0, le=1)  # 1: every held-out sequence (train_source: train_sequences)
    split_seed: int = 0
    max_sequences: int | None = Field(None, ge=2)
    train_source: Literal["heldout", "train_sequences"] = "train_sequences"  # φ's training data (evaluation: held-out)
    max_train_sequences: int | None = Field(None, ge=1)
    device: Device | None = None
    progress: bool = False
    exclude_special_targets: bool = True
    phi_seeds: Any = 1  # checked by validate_stitching (thinkalike.stitching.phi_seed_list)
    settings: StitchSettings = Field(default_factory=StitchSettings)

    def stitch_settings(self) -> StitchSettings:
        """``settings`` with the section's ``exclude_special_targets``."""
        return self.settings.model_copy(update={"exclude_special_targets": self.exclude_special_targets})

    def seeds(self) -> tuple[int, ...]:
        """The φ seeds of ``phi_seeds`` (:func:`~thinkalike.stitching.phi_seed_list`)."""
        return phi_seed_list(self.phi_seeds)


def validate_stitching(values: Any, zoo_models: list[str]) -> StitchingParameters:
    """The stitching section: its keys, the stitch settings and the pairs (zoo models only, for now)."""
    raw_settings = values.get("settings") if isinstance(values, Mapping) else None
    if isinstance(raw_settings, Mapping) and "exclude_special_targets" in raw_settings:
        raise ParameterError(
            "stitching.settings.exclude_special_targets: unknown parameter (set stitching.exclude_special_targets)"
        )
    stitching = validate_section(StitchingParameters, values, "stitching")
    if stitching.eval_fraction == 1 and stitching.train_source == "heldout":
        raise ParameterError(
            "stitching.eval_fraction: 1 evaluates on every held-out sequence and leaves none to train φ on "
            "(train_source: heldout); use a fraction below 1 or train_source: train_sequences"
        )
    try:
        stitching.seeds()
    except StitchConfigError as error:
        raise ParameterError(f"stitching.{error}") from None
    try:
        stitching_pairs(stitching.pairs, zoo_models)
    except ValueError as error:
        raise ParameterError(f"stitching.pairs: {error}") from None
    return stitching


def stitching_section(run: RunSettings) -> StitchingParameters:
    """The run's ``stitching`` section parsed against the zoo's models (:func:`validate_stitching`)."""
    return validate_stitching(run.raw("stitching"), zoo_model_names(run.parameters))


def check_stitching(run: RunSettings) -> None:
    """``stitching`` against the zoo's models (nothing when the section is empty or there is no zoo model)."""
    if run.raw("stitching") and zoo_model_names(run.parameters):
        run.parsed(stitching_section)
