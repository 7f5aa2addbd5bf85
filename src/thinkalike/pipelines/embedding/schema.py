"""The ``embedding`` parameter section, validated before any node runs (``validate_embedding``)."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from thinkalike.embedding.finetune_diff import TASKS
from thinkalike.models.finetune import FinetuneConfig
from thinkalike.pipelines.schema import (
    Device,
    ParameterError,
    _Section,
    validate_dataclass,
    validate_section,
)

VectorGroup = Literal["FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"]
InteractionGroup = Literal["W_VO", "W_QK"]
EPrime = Literal["transpose", "pinv"]
Positive = typing.Annotated[int, Field(ge=1)]


class ReadingsParameters(_Section):
    k: int = Field(20, ge=1)                       # top tokens per vector and sign
    pair_k: int = Field(30, ge=1)                  # top (input, output) pairs per head and interaction group
    groups: list[VectorGroup] = Field(default_factory=lambda: ["FF_key", "FF_value"])
    interactions: list[InteractionGroup] = Field(default_factory=lambda: ["W_VO", "W_QK"])
    e_prime: EPrime = "transpose"
    exclude_same_token: bool = False
    report_neurons: int = Field(3, ge=0)           # per layer, the FF neurons of largest ‖value‖ in the report
    report_heads: int = Field(2, ge=0)             # per layer, the first heads in the report
    report_rows: int = Field(15, ge=1)


class LookupParameters(_Section):
    group: Literal["FF_value", "FF_key"] = "FF_value"
    top: int = Field(10, ge=1)
    k_tokens: int = Field(10, ge=1)
    token_sets: dict[str, list[str]] = Field(default_factory=dict)


class KeepKParameters(_Section):
    ks: list[Positive] | None = Field(None, min_length=1)   # null: 10 … 4096 below V, and V
    e_primes: list[EPrime] = Field(default_factory=lambda: ["transpose", "pinv"], min_length=1)
    distributions: list[Literal["normal", "ff_values", "residual"]] = Field(
        default_factory=lambda: ["normal", "ff_values", "residual"], min_length=1)
    n: int = Field(1000, ge=2)
    residual_rows: int = Field(20000, ge=4)
    seed: int = 0


class AlignmentParameters(_Section):
    pairs: dict[str, Any] = Field(default_factory=dict)  # the syntax of cka.pairs; {} aligns nothing
    groups: list[VectorGroup] = Field(default_factory=lambda: ["FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"],
                                      min_length=1)
    spaces: list[Literal["projected", "raw"]] = Field(default_factory=lambda: ["projected", "raw"], min_length=1)


class FinetuneParameters(_Section):
    task: Literal[TASKS] = "tense"  # type: ignore[valid-type]
    models: list[str] = Field(default_factory=list)
    top_layers: int = Field(2, ge=1)
    n_train: int | None = Field(2000, ge=8)
    n_eval: int | None = Field(400, ge=8)
    top_k: int = Field(20, ge=1)
    n_rows: int = Field(10, ge=1)
    n_random: int = Field(50, ge=1)
    seed: int = 0
    settings: dict[str, Any] = Field(default_factory=dict)  # thinkalike.models.finetune.FinetuneConfig


class ZeroShotParameters(_Section):
    pairs: list[list[str]] = Field(default_factory=list)  # [fine-tuned A, B]


class EmbeddingParameters(_Section):
    models: list[str] | None = None
    device: Device | None = None
    dtype: Literal["float32", "float64"] = "float32"
    allow_input_embedding: bool = False
    threads: int | None = Field(None, ge=1)
    progress: bool = True
    readings: ReadingsParameters = Field(default_factory=ReadingsParameters)
    lookup: LookupParameters = Field(default_factory=LookupParameters)
    keep_k: KeepKParameters = Field(default_factory=KeepKParameters)
    alignment: AlignmentParameters = Field(default_factory=AlignmentParameters)
    finetune: FinetuneParameters = Field(default_factory=FinetuneParameters)
    zero_shot: ZeroShotParameters = Field(default_factory=ZeroShotParameters)


def embedding_models(embedding: EmbeddingParameters, configured: Mapping[str, str]) -> dict[str, str]:
    """``{name: spec}`` of the models read: ``embedding.models`` (every configured model when null)."""
    if embedding.models is None:
        return dict(configured)
    unknown = [name for name in embedding.models if name not in configured]
    if unknown:
        raise ParameterError(f"embedding.models: {unknown} are not models of the activations pipeline; known: "
                             f"{sorted(configured)}")
    return {name: configured[name] for name in embedding.models}


def alignment_pairs(embedding: EmbeddingParameters, models: Mapping[str, str]) -> list[tuple[str, str]]:
    """The pairs of ``embedding.alignment.pairs`` (the cka.pairs syntax); none when it is empty."""
    from thinkalike.pipelines.cka.pairs import configured_pairs

    if not embedding.alignment.pairs:
        return []
    try:
        return configured_pairs(dict(embedding.alignment.pairs), models)
    except ValueError as error:
        raise ParameterError(f"embedding.alignment.pairs: {error}") from None


def tokenizer_mismatch(first: str, second: str, models: Mapping[str, str]) -> str | None:
    """Why models ``first`` and ``second`` cannot share the vocabulary space (None when they do): zoo models use
    the corpus tokenizer; other specs are compared through their tokenizers' token → id maps."""
    spec_a, spec_b = models[first], models[second]
    zoo_a, zoo_b = spec_a.startswith("zoo:"), spec_b.startswith("zoo:")
    if zoo_a and zoo_b:
        return None
    if zoo_a != zoo_b:
        return (f"model {first!r} ({spec_a}) and model {second!r} ({spec_b}) use different tokenizers (the corpus "
                "tokenizer and the hub model's own); the embedding space is shared only by models with one tokenizer")
    from thinkalike.models.sources import load_spec_tokenizer

    tokenizer_a, tokenizer_b = load_spec_tokenizer(spec_a), load_spec_tokenizer(spec_b)
    if tokenizer_a is None or tokenizer_b is None or tokenizer_a.get_vocab() != tokenizer_b.get_vocab():
        return (f"model {first!r} ({spec_a}) and model {second!r} ({spec_b}) use different tokenizers (their "
                "token → id maps differ or one is missing); the embedding space is shared only by models with one "
                "tokenizer")
    return None


def validate_embedding(values: Any, parameters: Mapping[str, Any]) -> EmbeddingParameters:
    """The section, its models, pairs, fine-tuning settings and the k's against the zoo's vocabulary bound."""
    from thinkalike.pipelines.activations.pipeline import configured_models

    embedding = validate_section(EmbeddingParameters, values, "embedding")
    configured = configured_models(parameters)
    models = embedding_models(embedding, configured)
    zoo = (parameters.get("zoo") or {}).get("models") or {}
    vocab_bound = int((parameters.get("corpus") or {}).get("vocab_size", 400))
    if any(spec.startswith("zoo:") for spec in models.values()):  # V = len(corpus tokenizer) <= corpus.vocab_size
        for key, k in (("readings.k", embedding.readings.k), ("readings.pair_k", embedding.readings.pair_k),
                       ("lookup.k_tokens", embedding.lookup.k_tokens), ("finetune.top_k", embedding.finetune.top_k),
                       *(("keep_k.ks", k) for k in embedding.keep_k.ks or ())):
            if k > vocab_bound:
                raise ParameterError(f"embedding.{key}: k={k} exceeds the zoo's vocabulary size (at most "
                                     f"corpus.vocab_size={vocab_bound})")
    for first, second in alignment_pairs(embedding, models):
        reason = tokenizer_mismatch(first, second, models)
        if reason:
            raise ParameterError(f"embedding.alignment.pairs: {reason}")
    finetune = embedding.finetune
    validate_dataclass(FinetuneConfig, finetune.settings, "embedding.finetune.settings")
    for name in finetune.models:
        if name not in models or not models[name].startswith("zoo:") or name not in zoo:
            raise ParameterError(f"embedding.finetune.models: {name!r} is not a zoo model read by this pipeline "
                                 f"(models: {sorted(models)})")
        model = zoo[name]
        if model.get("family") != "bridge":
            raise ParameterError(f"embedding.finetune.models: {name!r} is a {model.get('family')!r}-family zoo "
                                 "model; fine-tuning the top layers needs a 'bridge'-family one")
        depth = int((model.get("architecture") or {}).get("n_layers", 0))
        if finetune.top_layers > depth:
            raise ParameterError(f"embedding.finetune.top_layers: {finetune.top_layers} exceeds the {depth} "
                                 f"layer(s) of {name!r}")
    for pair in embedding.zero_shot.pairs:
        if len(pair) != 2:
            raise ParameterError(f"embedding.zero_shot.pairs: entries are [fine-tuned model A, model B], got {pair}")
        tuned, donor = pair
        if tuned not in finetune.models:
            raise ParameterError(f"embedding.zero_shot.pairs: {tuned!r} is not in embedding.finetune.models "
                                 f"{finetune.models} (model A must be fine-tuned)")
        if donor not in models:
            raise ParameterError(f"embedding.zero_shot.pairs: unknown model {donor!r}; known: {sorted(models)}")
        reason = tokenizer_mismatch(tuned, donor, models)
        if reason:
            raise ParameterError(f"embedding.zero_shot.pairs: {reason}")
    return embedding
