"""The ``mlem`` parameter section, validated before any node runs (``validate_mlem``)."""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import Field

from thinkalike.mlem.features import FeatureError
from thinkalike.mlem.fit import MLEMSettings
from thinkalike.mlem.stimuli import resolve_features
from thinkalike.pipelines.schema import (
    Device,
    ParameterError,
    _Section,
    validate_dataclass,
    validate_section,
)


class MLEMParameters(_Section):
    """``mlem``: which stimuli and features, which layers, how many RSA pairs; ``fit`` is
    :class:`~thinkalike.mlem.fit.MLEMSettings` (validated by building it)."""

    level: Literal["word", "sentence"] = "word"
    sentence_pooling: Literal["mean", "last"] = "mean"
    features: list[str] | None = None
    max_stimuli: int | None = Field(None, ge=4)
    layers: list[typing.Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    rsa_pairs: int = Field(4000, ge=10)
    device: Device | None = None
    progress: bool = True
    fit: dict[str, Any] = Field(default_factory=dict)


def validate_mlem(values: Any) -> MLEMParameters:
    """The section, its fit settings and its feature names (an unknown one is named with the known ones)."""
    mlem = validate_section(MLEMParameters, values, "mlem")
    settings = validate_dataclass(MLEMSettings, mlem.fit, "mlem.fit")
    try:
        resolve_features(mlem.level, mlem.features)
    except FeatureError as error:
        raise ParameterError(str(error)) from None
    if mlem.max_stimuli is not None and mlem.max_stimuli < 2 * settings.n_folds:
        raise ParameterError(f"mlem.max_stimuli: {mlem.max_stimuli} stimuli are too few for mlem.fit.n_folds="
                             f"{settings.n_folds} (each test fold needs at least 2)")
    return mlem
