"""The ``zoo`` section: its model (:class:`ZooParameters`, where each default is written; each model's settings
:class:`ZooModelParameters`), its parse (:func:`validate_zoo`) and its check before a run (:func:`check_zoo`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from thinkalike.models.training import TrainingConfig
from thinkalike.models.zoo_entry import DEFAULT_OBJECTIVE, DEFAULT_SEED, Objective
from thinkalike.pipelines.corpus.schema import CorpusParameters, corpus_section
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import _Section, validate_section


class ZooModelParameters(_Section):
    """``zoo.models.<name>``: the model's ``family`` (``bridge``: TransformerLens-style, ``hf``: a transformers
    config), ``seed``, ``objective``, ``architecture`` and ``training`` overrides of ``zoo.training``."""

    family: Literal["bridge", "hf"]
    seed: int = DEFAULT_SEED
    objective: Objective = DEFAULT_OBJECTIVE
    architecture: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)


class ZooParameters(_Section):
    """``zoo``: the models (``models``), their shared ``training`` (a
    :class:`~thinkalike.models.training.TrainingConfig`, overridden per model) and ``baseline_margin``, the share of
    the unigram entropy a model must beat to have learned the language."""

    baseline_margin: float = Field(0.30, ge=0, lt=1)
    training: TrainingConfig = Field(default_factory=TrainingConfig)  # each model's seed is its own
    models: dict[str, ZooModelParameters] = Field(default_factory=dict)

    def shared_training(self) -> dict[str, Any]:
        """``zoo.training`` as the mapping each model's own ``training`` overrides (the seed is each model's)."""
        return self.training.model_dump(exclude={"seed"})


def validate_zoo(values: Any, corpus: CorpusParameters, vocab_size: int | None = None) -> ZooParameters:
    """The zoo section; every model's training (defaults + overrides) and architecture are checked."""
    zoo = validate_section(ZooParameters, values, "zoo")
    if "seed" in zoo.training.model_fields_set:
        raise ParameterError("zoo.training.seed: each model's seed is its own (zoo.models.<name>.seed)")
    for name, model in zoo.models.items():
        key = f"zoo.models.{name}"
        validate_section(
            TrainingConfig, {**zoo.shared_training(), **model.training, "seed": model.seed}, f"{key}.training"
        )
        _check_architecture(name, model, corpus.n_ctx, vocab_size or corpus.vocab_size, f"{key}.architecture")
    return zoo


def _check_architecture(name: str, model: ZooModelParameters, n_ctx: int, vocab_size: int, key: str) -> None:
    """Builds the model's config (no weights) so a bad architecture fails before training."""
    from thinkalike.models.architectures import hf_zoo_config
    from thinkalike.models.bridge import resolve_bridge_config

    architecture = dict(model.architecture)
    try:
        if model.family == "bridge":
            resolve_bridge_config({**architecture, "d_vocab": vocab_size, "n_ctx": n_ctx})
        else:
            model_type = architecture.pop("model_type", None)
            if model_type is None:
                raise ValueError("an hf model needs architecture.model_type")
            hf_zoo_config(name, model_type, model.objective, **architecture)
    except (ValueError, TypeError) as error:
        raise ParameterError(f"{key}: {error}") from None


def check_zoo(run: RunSettings) -> None:
    """``zoo``: every model's training (defaults + overrides) and architecture, against the corpus's sizes."""
    validate_zoo(run.raw("zoo"), run.parsed(corpus_section))
