"""The ``mlem`` section: its model (:class:`MLEMParameters`, where each default is written; ``mlem.fit`` is
:class:`~thinkalike.mlem.fit.MLEMSettings`), its parse (:func:`validate_mlem`, once, by the pipeline's builder) and
its check before a run against the other sections (:func:`check_mlem`)."""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import Field

from thinkalike.mlem.features import FeatureError
from thinkalike.mlem.fit import MLEMSettings
from thinkalike.mlem.stimuli import resolve_features
from thinkalike.models.zoo_entry import zoo_depth
from thinkalike.pipelines.activations.schema import activations_section
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import (
    Device,
    ParameterError,
    _Section,
    validate_section,
)


class MLEMParameters(_Section):
    """``mlem``: which stimuli and features, which layers, how many RSA pairs; ``fit`` is
    :class:`~thinkalike.mlem.fit.MLEMSettings` (a pydantic model, nested as the YAML nests it)."""

    stimuli: Literal["corpus", "controlled"] = "corpus"
    categorical_coding: Literal["equality", "indicators"] = "equality"
    level: Literal["word", "sentence"] = "word"
    sentence_pooling: Literal["mean", "last"] = "mean"
    features: list[str] | None = None
    max_stimuli: int | None = Field(1000, ge=4)
    layers: list[typing.Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    rsa_pairs: int = Field(4000, ge=10)
    device: Device | None = None
    progress: bool = True
    fit: MLEMSettings = Field(default_factory=MLEMSettings)

    def fit_settings(self) -> MLEMSettings:
        """:class:`~thinkalike.mlem.fit.MLEMSettings` of ``fit`` (its defaults for the settings not given)."""
        return self.fit


def validate_mlem(values: Any, run: RunSettings | None = None) -> MLEMParameters:
    """The section, its fit settings and its feature names (an unknown one is named with the known ones).

    With the ``run``'s settings also what depends on other sections: ``mlem.stimuli: controlled``
    needs ``corpus.controlled_stimuli.enabled``; ``mlem.layers`` must be stored (``activations.layers``,
    and every zoo model's depth: layers 0 … n_layers, + 1 with ``activations.final_norm``).
    """
    mlem = validate_section(MLEMParameters, values, "mlem")
    if len(set(mlem.layers or [])) < len(mlem.layers or []):
        raise ParameterError(f"mlem.layers: each layer once, got {mlem.layers}")
    if run is not None:
        check_against_run(mlem, run)
    settings = mlem.fit
    try:
        resolve_features(mlem.level, mlem.features)
    except FeatureError as error:
        raise ParameterError(str(error)) from None
    if mlem.max_stimuli is not None and mlem.max_stimuli < 2 * settings.n_folds:
        raise ParameterError(
            f"mlem.max_stimuli: {mlem.max_stimuli} stimuli are too few for mlem.fit.n_folds="
            f"{settings.n_folds} (each test fold needs at least 2)"
        )
    return mlem


def check_against_run(mlem: MLEMParameters, run: RunSettings) -> None:
    """The checks of :func:`validate_mlem` that read other sections (no weights are loaded)."""
    parameters = run.parameters
    corpus = run.parsed(corpus_section)
    if mlem.stimuli == "controlled" and not corpus.controlled_stimuli.enabled:
        raise ParameterError(
            "mlem.stimuli: 'controlled' needs corpus.controlled_stimuli.enabled: true (the "
            "controlled sentences must join the evaluation texts to be extracted)"
        )
    if mlem.layers is None:
        return
    activations = run.parsed(activations_section)
    stored = activations.layers
    missing = [layer for layer in mlem.layers if stored is not None and layer not in stored]
    if missing:
        raise ParameterError(f"mlem.layers: layer(s) {missing} are not stored (activations.layers: {stored})")
    extra = 1 if activations.final_norm else 0
    zoo = section(parameters, "zoo").get("models") or {} if activations.include_zoo else {}
    for name, model in zoo.items():
        depth = zoo_depth(model)
        if depth is not None and stored is None and max(mlem.layers) > depth + extra:
            raise ParameterError(
                f"mlem.layers: zoo model {name} stores layers 0..{depth + extra}, not "
                f"{[layer for layer in mlem.layers if layer > depth + extra]}"
            )


def mlem_section(run: RunSettings) -> MLEMParameters:
    """The run's ``mlem`` section parsed with what it depends on in other sections (:func:`validate_mlem`)."""
    return validate_mlem(run.raw("mlem"), run)


def check_mlem(run: RunSettings) -> None:
    """``mlem`` with what it depends on in other sections (nothing when the section is empty)."""
    if run.raw("mlem"):
        run.parsed(mlem_section)
