"""The parameter schemas of every pipeline, declared once and checked before any node runs.

Each top-level section of ``parameters_<pipeline>.yml`` is a pydantic model (strict types:
``"64"`` is not an int; unknown keys are errors). Settings that already have a dataclass in the
library (``TrainingConfig``, ``GrammarConfig``, ``CKASettings``) are validated by building
that dataclass, so its own checks run too. Every error names the parameter's full key, e.g.
``activations.batch_size``, ``zoo.models.gelu_2l.training.lr`` or ``cka.pooling``.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)

from thinkalike.language.grammar import (
    ANIMATE_NOUNS,
    INTRANSITIVE_VERBS,
    TRANSITIVE_VERBS,
    ControlledConfig,
    GrammarConfig,
)
from thinkalike.models.training import TrainingConfig
from thinkalike.pipelines.errors import ParameterError

ACTIVATION_DTYPES = ("float32", "float16", "bfloat16")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NaturalTextParameters(_Section):
    path: str | None = None
    mode: Literal["lines", "plain"] = "lines"
    use: Literal["join", "replace"] = "join"


class ControlledStimuliParameters(_Section):
    """``corpus.controlled_stimuli``: the paper's kind of stimuli (:class:`~thinkalike.language.grammar.ControlledConfig`),
    added to the evaluation texts when ``enabled``; ``factors`` maps features to crossed values (null: defaults)."""

    enabled: bool = False
    factors: dict[str, list[str]] | None = None
    nouns: int = Field(2, ge=2, le=len(ANIMATE_NOUNS))
    verbs: int = Field(2, ge=1, le=min(len(TRANSITIVE_VERBS), len(INTRANSITIVE_VERBS)))

    @field_validator("factors")
    @classmethod
    def _crossable(cls, factors: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        if factors is not None:
            try:
                ControlledConfig(factors={name: tuple(values) for name, values in factors.items()})
            except ValueError as error:
                raise ValueError(str(error).removeprefix("ControlledConfig.factors").lstrip(":. ")) from None
        return factors

    def config(self) -> ControlledConfig:
        """The grammar's :class:`~thinkalike.language.grammar.ControlledConfig` of these settings."""
        factors = None if self.factors is None else {name: tuple(values) for name, values in self.factors.items()}
        return ControlledConfig(factors=factors, nouns=self.nouns, verbs=self.verbs)


class CorpusParameters(_Section):
    seed: int = 0
    n_sentences: int = Field(8000, ge=10)
    heldout_fraction: float = Field(0.1, gt=0, lt=1)
    n_evaluation_sentences: int = Field(400, ge=1)
    vocab_size: int = Field(400, ge=32)
    n_ctx: int = Field(64, ge=4)
    grammar: dict[str, float] = Field(default_factory=dict)
    natural_text: NaturalTextParameters = Field(default_factory=NaturalTextParameters)
    controlled_stimuli: ControlledStimuliParameters = Field(default_factory=ControlledStimuliParameters)


class ZooModelParameters(_Section):
    family: Literal["bridge", "hf"]
    seed: int = 0
    objective: Literal["causal", "masked"] = "causal"
    architecture: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)


class ZooParameters(_Section):
    baseline_margin: float = Field(0.30, ge=0, lt=1)
    training: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, ZooModelParameters] = Field(default_factory=dict)


def check_device(device: str) -> str:
    """``device`` unchanged; ``ValueError`` for a device string torch cannot parse or a device this machine lacks."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{device!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:1')") from error
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{device!r} was asked for but this machine has no CUDA device; use null (CUDA when "
                             "present, else CPU) or 'cpu'")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{device!r} was asked for but MPS is not available here")
    return device


Device = typing.Annotated[str, AfterValidator(check_device)]
"""A torch device string this machine has (``cpu``, ``cuda``, ``cuda:1``…)."""


class ActivationParameters(_Section):
    include_zoo: bool = True
    models: dict[str, str] = Field(default_factory=dict)
    batch_size: int = Field(32, ge=1)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    store_dtype: Literal["float32", "float16", "bfloat16"] | None = None
    layers: list[typing.Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    device: Device | None = None
    devices: dict[str, Device] = Field(default_factory=dict)  # per model, overriding device
    n_ctx: int | None = Field(None, ge=4)
    packing: Literal["packed", "sentence"] = "packed"
    final_norm: bool = False



class StitchingParameters(_Section):
    """``stitching``: which ordered zoo-model pairs, layers and stitch kinds; ``settings`` are
    :class:`~thinkalike.stitching.StitchSettings` (validated by building it); ``exclude_special_targets``:
    special tokens are never targets (the section's key, not a setting); ``phi_seeds``: a number of φ seeds
    ≥ 1 or a list of distinct seeds ≥ 0 (:func:`~thinkalike.stitching.phi_seed_list`)."""

    pairs: dict[str, Any] = Field(default_factory=dict)  # the syntax of cka.pairs
    directions: Literal["forward", "both"] = "both"
    self_baselines: bool = True
    layers: Literal["diagonal", "relative", "all"] = "diagonal"
    kinds: list[Literal["identity", "affine", "affine_ln"]] = Field(default_factory=lambda: ["affine_ln"],
                                                                      min_length=1)
    eval_fraction: float = Field(0.2, gt=0, lt=1)
    split_seed: int = 0
    max_sequences: int | None = Field(None, ge=2)
    train_source: Literal["heldout", "train_sequences"] = "heldout"  # φ's training data (evaluation: held-out)
    max_train_sequences: int | None = Field(None, ge=1)
    device: Device | None = None
    progress: bool = False
    exclude_special_targets: bool = True
    phi_seeds: Any = 1  # checked by validate_stitching (thinkalike.stitching.phi_seed_list)
    settings: dict[str, Any] = Field(default_factory=dict)


def _key(prefix: str, location: tuple[Any, ...]) -> str:
    return ".".join([prefix, *(str(part) for part in location if part != "__root__")])


def _message(error: Mapping[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown parameter"
    if "input" in error and error["type"] not in ("missing",):
        return f"{message} (got {error['input']!r})"
    return message


def _raise_from(error: ValidationError, prefix: str) -> None:
    problems = [f"{_key(prefix, e['loc'])}: {_message(e)}" for e in error.errors()]
    raise ParameterError("; ".join(problems)) from None


def validate_section(model: type[BaseModel], values: Any, key: str) -> Any:
    """``model`` built from ``values``; a :class:`ParameterError` naming ``key.<field>`` otherwise."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ParameterError(f"{key}: must be a mapping of settings, got {values!r}")
    try:
        return model.model_validate(dict(values))
    except ValidationError as error:
        _raise_from(error, key)


def validate_dataclass(cls: type, values: Any, key: str, *, ignore: frozenset[str] = frozenset()) -> Any:
    """An instance of dataclass ``cls`` from ``values`` with strict types and its own checks.

    The field types come from the dataclass's annotations (a strict pydantic model is made from
    them); unknown keys (other than ``ignore``), wrong types and a ``ValueError`` from the
    dataclass's ``__post_init__`` are :class:`ParameterError` s naming ``key.<field>``.
    """
    if not isinstance(values, Mapping):
        raise ParameterError(f"{key}: must be a mapping of settings, got {values!r}")
    chosen = {name: value for name, value in values.items() if name not in ignore}
    validated = validate_section(_strict_model_of(cls), chosen, key)
    try:
        return cls(**{name: getattr(validated, name) for name in chosen})
    except (ValueError, TypeError) as error:
        raise ParameterError(_keyed_message(str(error), key, cls)) from None


def _keyed_message(message: str, key: str, cls: type) -> str:
    """``message`` of a dataclass check, led by the full key of the field it names (when it names one)."""
    first, _, rest = message.partition(" ")
    field = first.removeprefix(f"{cls.__name__}.").removeprefix(f"{key}.")
    if field in {f.name for f in dataclasses.fields(cls)}:
        return f"{key}.{field} {rest}"
    return f"{key}: {message}"


@functools.cache
def _strict_model_of(cls: type) -> type[BaseModel]:
    """A strict, extra-forbidding pydantic model with the fields (types, defaults) of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: (hints[f.name], f.default if f.default is not dataclasses.MISSING else ...)
              for f in dataclasses.fields(cls)}
    return create_model(f"{cls.__name__}Parameters", __base__=_Section, **fields)


def validate_corpus(values: Any) -> CorpusParameters:
    corpus = validate_section(CorpusParameters, values, "corpus")
    validate_dataclass(GrammarConfig, corpus.grammar, "corpus.grammar")
    return corpus


def validate_zoo(values: Any, corpus: CorpusParameters, vocab_size: int | None = None) -> ZooParameters:
    """The zoo section; every model's training (defaults + overrides) and architecture are checked."""
    zoo = validate_section(ZooParameters, values, "zoo")
    validate_dataclass(TrainingConfig, zoo.training, "zoo.training", ignore=frozenset({"seed"}))
    for name, model in zoo.models.items():
        key = f"zoo.models.{name}"
        validate_dataclass(TrainingConfig, {**zoo.training, **model.training, "seed": model.seed},
                           f"{key}.training")
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


def validate_activations(values: Any) -> ActivationParameters:
    activations = validate_section(ActivationParameters, values, "activations")
    for name, spec in activations.models.items():
        if not spec.strip():
            raise ParameterError(f"activations.models.{name}: empty model spec")
    return activations


def validate_stitching(values: Any, zoo_models: list[str]) -> StitchingParameters:
    """The stitching section: its keys, the stitch settings and the pairs (zoo models only, for now)."""
    from thinkalike.pipelines.stitching.plan import stitching_pairs
    from thinkalike.stitching import StitchSettings

    from thinkalike.stitching import StitchConfigError, phi_seed_list

    stitching = validate_section(StitchingParameters, values, "stitching")
    if "exclude_special_targets" in stitching.settings:
        raise ParameterError("stitching.settings.exclude_special_targets: unknown parameter (set "
                             "stitching.exclude_special_targets)")
    validate_dataclass(StitchSettings, stitching.settings, "stitching.settings")
    try:
        phi_seed_list(stitching.phi_seeds)
    except StitchConfigError as error:
        raise ParameterError(f"stitching.{error}") from None
    try:
        stitching_pairs({"pairs": stitching.pairs}, zoo_models)
    except ValueError as error:
        raise ParameterError(f"stitching.pairs: {error}") from None
    return stitching
