"""The ``embedding`` parameter section, validated before any node runs (``validate_embedding``)."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Literal, cast

from pydantic import Field

from thinkalike.embedding.finetune_diff import TASKS
from thinkalike.embedding.token_structure import DEFAULT_GROUPS as TOKEN_STRUCTURE_GROUPS
from thinkalike.models.finetune import FinetuneConfig
from thinkalike.models.zoo_entry import DEPTH_KEYS
from thinkalike.models.zoo_record import ZooModel, seed_families, zoo_models
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import (
    Device,
    ParameterError,
    _Section,
    validate_section,
)

VectorGroup = Literal["FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"]
InteractionGroup = Literal["W_VO", "W_QK"]
EPrime = Literal["transpose", "pinv"]
Positive = typing.Annotated[int, Field(ge=1)]
NonNegative = typing.Annotated[int, Field(ge=0)]
AUTO: typing.Final = "auto"


class ReadingsParameters(_Section):
    k: int = Field(20, ge=1)  # top tokens per vector and sign
    pair_k: int = Field(30, ge=1)  # top (input, output) pairs per head and interaction group
    groups: list[VectorGroup] = ["FF_key", "FF_value"]  # pydantic copies a mutable default for each instance
    interactions: list[InteractionGroup] = ["W_VO", "W_QK"]
    e_prime: EPrime = "transpose"
    exclude_same_token: bool = False
    report_neurons: int = Field(3, ge=0)  # per layer, the FF neurons of largest ‖value‖ in the report
    report_heads: int = Field(2, ge=0)  # per layer, the first heads in the report
    report_rows: int = Field(15, ge=1)
    # which blocks and heads are read: "auto" (every block and head of a model with at most AUTO_LAYERS blocks
    # and AUTO_HEAD_PRODUCTS head products; else AUTO_LAYERS blocks evenly spaced, first and last included, and
    # the first heads), null (every one), or a list of block indices / a number of first heads or their indices
    layers: list[NonNegative] | Literal["auto"] | None = "auto"
    heads: Positive | list[NonNegative] | Literal["auto"] | None = "auto"


class LookupParameters(_Section):
    group: Literal["FF_value", "FF_key"] = "FF_value"
    top: int = Field(10, ge=1)
    k_tokens: int = Field(10, ge=1)
    token_sets: dict[str, list[str]] = Field(default_factory=dict)


class KeepKParameters(_Section):
    ks: list[Positive] | None = Field(None, min_length=1)  # null: 10 … 4096 below V, and V
    e_primes: list[EPrime] = Field(["transpose", "pinv"], min_length=1)
    distributions: list[Literal["normal", "ff_values", "residual"]] = Field(
        ["normal", "ff_values", "residual"], min_length=1
    )
    n: int = Field(300, ge=2)
    residual_rows: int = Field(20000, ge=4)
    seed: int = 0


class OverlapParameters(_Section):
    """Key–value overlap (appendix B, fig. 6): :func:`thinkalike.embedding.overlap.pair_overlap`."""

    # top tokens of v·E per vector; auto: the paper's 100 capped at V / 20 (thinkalike.embedding.overlap.auto_k:
    # 20 at the zoo's V = 394, where k = 100 would be a quarter of the vocabulary and overlap by chance)
    k: Positive | Literal["auto"] = AUTO
    n_random: int = Field(10, ge=1)  # random derangements of the second group's rows per layer and pair (baseline)
    seed: int = 0


class TokenStructureParameters(_Section):
    """Part-of-speech coherence of top tokens (§3's readings measured):
    :func:`thinkalike.embedding.token_structure.token_structure`."""

    # top tokens of +v.E per vector; auto: as overlap.k (thinkalike.embedding.overlap.auto_k: 20 at the zoo's V = 394)
    k: Positive | Literal["auto"] = AUTO
    # vector groups read (thinkalike.embedding.token_structure.DEFAULT_GROUPS: FF keys and values, W_V and W_O)
    groups: list[VectorGroup] = Field([cast(VectorGroup, group) for group in TOKEN_STRUCTURE_GROUPS], min_length=1)
    n_random: int = Field(1000, ge=0)  # Gaussian vectors read through the same E (the second baseline); 0: none
    seed: int = 0


class AlignmentParameters(_Section):
    pairs: dict[str, Any] | Literal["auto"] = AUTO  # the syntax of cka.pairs; {} aligns nothing; auto: replicas
    groups: list[VectorGroup] = Field(["FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O"], min_length=1)
    spaces: list[Literal["projected", "raw"]] = Field(["projected", "raw"], min_length=1)


class FinetuneParameters(_Section):
    task: Literal[TASKS] = "tense"  # type: ignore[valid-type]
    models: list[str] | Literal["auto"] = AUTO
    top_layers: int = Field(2, ge=1)
    n_train: int | None = Field(2000, ge=8)
    n_eval: int | None = Field(400, ge=8)
    top_k: int = Field(20, ge=1)
    n_rows: int = Field(10, ge=1)
    n_random: int = Field(50, ge=1)
    seed: int = 0
    settings: FinetuneConfig = Field(default_factory=FinetuneConfig)

    def config(self) -> FinetuneConfig:
        """The :class:`~thinkalike.models.finetune.FinetuneConfig` of ``settings``."""
        return self.settings


class ZeroShotParameters(_Section):
    pairs: list[list[str]] | Literal["auto"] = AUTO  # [fine-tuned A, B]


class EmbeddingParameters(_Section):
    models: list[str] | None = None
    device: Device | None = None
    dtype: Literal["float32", "float64"] = "float32"
    allow_input_embedding: bool = False
    threads: int | None = Field(None, ge=1)
    progress: bool = True
    # the blocks whose parameters keep-k's FF-value pool, the key–value overlap and the token structure read
    # (null: every block); a few blocks of a deep model keep a reduced run short (conf/real_tiny)
    blocks: list[NonNegative] | None = None
    readings: ReadingsParameters = Field(default_factory=ReadingsParameters)
    lookup: LookupParameters = Field(default_factory=LookupParameters)
    keep_k: KeepKParameters = Field(default_factory=KeepKParameters)
    overlap: OverlapParameters = Field(default_factory=OverlapParameters)
    token_structure: TokenStructureParameters = Field(default_factory=TokenStructureParameters)
    alignment: AlignmentParameters = Field(default_factory=AlignmentParameters)
    finetune: FinetuneParameters = Field(default_factory=FinetuneParameters)
    zero_shot: ZeroShotParameters = Field(default_factory=ZeroShotParameters)


@dataclass
class EmbeddingPlan:
    """What the ``embedding`` pipeline reads, resolved against the configured models (:func:`plan_embedding`).

    ``notes``: one line per setting that adapted to the models (``auto``, a model left out for lack of an LM
    head); ``problems``: one message per setting that names something that cannot be read, each starting with
    the parameter's full key. The pipeline is built from what is valid; a run that uses it fails on the first
    problem before any node (:func:`validate_embedding`).
    """

    models: dict[str, str]
    pairs: list[tuple[str, str]]
    finetuned: list[str]
    zero_shot: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _depth(model: ZooModel) -> int:
    """The model's depth, 0 when its entry gives none (it then sorts last)."""
    return model.depth or 0


def embedding_models(
    embedding: EmbeddingParameters, configured: Mapping[str, str]
) -> tuple[dict[str, str], list[str], list[str]]:
    """``({name: spec}, notes, problems)`` of the models read. ``embedding.models`` null: every configured model
    with an LM head (:func:`~thinkalike.models.sources.spec_has_lm_head`), those without left out with a note
    (kept when ``allow_input_embedding``); a list: those models, an unknown one or one without an LM head a problem."""
    from thinkalike.models.sources import spec_has_lm_head

    allow = embedding.allow_input_embedding
    headless = [] if allow else [name for name, spec in configured.items() if spec_has_lm_head(spec) is False]
    if embedding.models is None:
        notes = (
            [
                f"embedding.models: {headless} left out: no LM head, so no unembedding (name them with "
                "embedding.allow_input_embedding: true where the head is tied to the input embedding)"
            ]
            if headless
            else []
        )
        return {name: spec for name, spec in configured.items() if name not in headless}, notes, []
    problems = []
    unknown = [name for name in embedding.models if name not in configured]
    if unknown:
        problems.append(
            f"embedding.models: {unknown} are not models of the activations pipeline; known: {sorted(configured)}"
        )
    named_headless = [name for name in embedding.models if name in headless]
    if named_headless:
        problems.append(
            f"embedding.models: {named_headless} have no LM head, so no unembedding (their config's "
            "architectures have no LM head); leave them out, or set embedding.allow_input_embedding: "
            "true where the head is tied to the input embedding"
        )
    models = {name: configured[name] for name in embedding.models if name in configured and name not in headless}
    return models, [], problems


def _zoo_of(models: Mapping[str, str], zoo: Mapping[str, ZooModel]) -> list[str]:
    """The models read that are zoo models (``zoo:<name>`` specs of configured zoo entries), in order."""
    return [name for name, spec in models.items() if spec == f"zoo:{name}" and name in zoo]


def _auto_pairs(models: Mapping[str, str], zoo: Mapping[str, ZooModel]) -> tuple[list[tuple[str, str]], str]:
    """``alignment.pairs: auto``: every pair of the deepest group of seed replicas
    (:func:`~thinkalike.models.zoo_record.seed_families`; ties: the larger group)."""
    groups = seed_families([zoo[name] for name in _zoo_of(models, zoo)])
    if not groups:
        return [], (
            "embedding.alignment.pairs: auto — no two models read differ only in seed, so no layers are "
            "aligned (name pairs to align others)"
        )
    group = [model.name for model in max(groups, key=lambda members: (_depth(members[0]), len(members)))]
    pairs = list(combinations(group, 2))
    return pairs, f"embedding.alignment.pairs: auto — every pair of the seed replicas {group} ({len(pairs)} pairs)"


def _tunable(name: str, models: Mapping[str, str], zoo: Mapping[str, ZooModel], top_layers: int) -> str | None:
    """Why zoo model ``name`` cannot be fine-tuned here (``None`` when it can)."""
    if name not in models or models[name] != f"zoo:{name}" or name not in zoo:
        return f"{name!r} is not a zoo model read by this pipeline (models: {sorted(models)})"
    if zoo[name].family != "bridge":
        return (
            f"{name!r} is a {zoo[name].family!r}-family zoo model; fine-tuning the top layers needs a "
            "'bridge'-family one"
        )
    if top_layers > _depth(zoo[name]):
        return f"embedding.finetune.top_layers: {top_layers} exceeds the {_depth(zoo[name])} layer(s) of {name!r}"
    return None


def _auto_finetuned(models: Mapping[str, str], zoo: Mapping[str, ZooModel], top_layers: int) -> tuple[list[str], str]:
    """``finetune.models: auto``: the deepest 'bridge'-family zoo model read (the first of equals)."""
    candidates = [name for name in _zoo_of(models, zoo) if _tunable(name, models, zoo, top_layers) is None]
    if not candidates:
        return [], "embedding.finetune.models: auto — no 'bridge'-family zoo model is read, so none is fine-tuned"
    chosen = max(candidates, key=lambda name: (_depth(zoo[name]), -candidates.index(name)))
    return [chosen], f"embedding.finetune.models: auto — {chosen!r} (the deepest 'bridge'-family zoo model)"


def _auto_zero_shot(
    tuned: list[str], models: Mapping[str, str], zoo: Mapping[str, ZooModel]
) -> tuple[list[tuple[str, str]], str]:
    """``zero_shot.pairs: auto``: each fine-tuned model A with itself, with its seed replicas
    (:func:`~thinkalike.models.zoo_record.seed_families`), and with the deepest zoo model read whose configuration
    differs from A's only in depth (and seed)."""
    pairs: list[tuple[str, str]] = []
    names = _zoo_of(models, zoo)
    families = seed_families([zoo[name] for name in names])
    for first in tuned:
        family = next((group for group in families if zoo[first] in group), [])
        replicas = [model.name for model in family if model.name != first]
        shape = zoo[first].signature(DEPTH_KEYS)
        shallower = [
            name
            for name in names
            if _depth(zoo[name]) != _depth(zoo[first]) and zoo[name].signature(DEPTH_KEYS) == shape
        ]
        deeper = sorted(shallower, key=lambda name: -_depth(zoo[name]))[:1]
        pairs += [(first, first)] + [(first, name) for name in replicas + deeper]
    return pairs, f"embedding.zero_shot.pairs: auto — {[list(pair) for pair in pairs]}"


def plan_embedding(embedding: EmbeddingParameters, parameters: Mapping[str, Any]) -> EmbeddingPlan:
    """The models, alignment pairs, fine-tuned models and zero-shot pairs of ``embedding`` for the configured models;
    ``auto`` settings adapt to them (with a note), named models that cannot be read are problems (never raised)."""
    from thinkalike.pipelines.activations.pipeline import configured_models
    from thinkalike.pipelines.cka.pairs import configured_pairs

    zoo = zoo_models((parameters.get("zoo") or {}).get("models") or {})
    models, notes, problems = embedding_models(embedding, configured_models(parameters))
    if embedding.alignment.pairs == AUTO:
        pairs, note = _auto_pairs(models, zoo)
        notes.append(note)
    elif not embedding.alignment.pairs:
        pairs = []
    else:
        try:
            pairs = configured_pairs(dict(embedding.alignment.pairs), models)
        except ValueError as error:
            pairs = []
            problems.append(f"embedding.alignment.pairs: {str(error).replace('cka.pairs ', '')}")
    top_layers = embedding.finetune.top_layers
    if embedding.finetune.models == AUTO:
        tuned, note = _auto_finetuned(models, zoo, top_layers)
        notes.append(note)
    else:
        tuned = []
        for name in embedding.finetune.models:
            reason = _tunable(name, models, zoo, top_layers)
            if reason is None:
                tuned.append(name)
            else:
                problems.append(reason if reason.startswith("embedding.") else f"embedding.finetune.models: {reason}")
    if embedding.zero_shot.pairs == AUTO:
        zero_shot, note = _auto_zero_shot(tuned, models, zoo)
        if tuned:
            notes.append(note)
    else:
        zero_shot = []
        for pair in embedding.zero_shot.pairs:
            if len(pair) != 2:
                problems.append(f"embedding.zero_shot.pairs: entries are [fine-tuned model A, model B], got {pair}")
            elif pair[0] not in tuned:
                problems.append(
                    f"embedding.zero_shot.pairs: {pair[0]!r} is not a fine-tuned model "
                    f"(embedding.finetune.models: {tuned}); model A must be fine-tuned"
                )
            elif pair[1] not in models or models[pair[1]] != f"zoo:{pair[1]}":
                problems.append(
                    f"embedding.zero_shot.pairs: {pair[1]!r} is not a zoo model read by this pipeline "
                    f"(models: {sorted(models)})"
                )
            else:
                zero_shot.append((pair[0], pair[1]))
    return EmbeddingPlan(models, pairs, tuned, zero_shot, notes, problems)


def tokenizer_mismatch(first: str, second: str, models: Mapping[str, str]) -> str | None:
    """Why models ``first`` and ``second`` cannot share the vocabulary space (None when they do): zoo models use
    the corpus tokenizer; other specs are compared through their tokenizers' token → id maps."""
    spec_a, spec_b = models[first], models[second]
    zoo_a, zoo_b = spec_a.startswith("zoo:"), spec_b.startswith("zoo:")
    if zoo_a and zoo_b:
        return None
    if zoo_a != zoo_b:
        return (
            f"model {first!r} ({spec_a}) and model {second!r} ({spec_b}) use different tokenizers (the corpus "
            "tokenizer and the hub model's own); the embedding space is shared only by models with one tokenizer"
        )
    from thinkalike.models.sources import load_spec_tokenizer

    tokenizer_a, tokenizer_b = load_spec_tokenizer(spec_a), load_spec_tokenizer(spec_b)
    if tokenizer_a is None or tokenizer_b is None or tokenizer_a.get_vocab() != tokenizer_b.get_vocab():
        return (
            f"model {first!r} ({spec_a}) and model {second!r} ({spec_b}) use different tokenizers (their "
            "token → id maps differ or one is missing); the embedding space is shared only by models with one "
            "tokenizer"
        )
    return None


def validate_embedding(values: Any, run: RunSettings) -> EmbeddingParameters:
    """The section, its models, pairs, fine-tuning settings and the k's against the zoo's vocabulary bound; the
    first problem of :func:`plan_embedding` is raised."""
    embedding = validate_section(EmbeddingParameters, values, "embedding")
    plan = plan_embedding(embedding, run.parameters)
    if plan.problems:
        raise ParameterError(plan.problems[0])
    vocab_bound = run.parsed(corpus_section).vocab_size
    if any(spec.startswith("zoo:") for spec in plan.models.values()):  # V = len(corpus tokenizer) <= vocab_size
        for key, k in (
            ("readings.k", embedding.readings.k),
            ("readings.pair_k", embedding.readings.pair_k),
            ("lookup.k_tokens", embedding.lookup.k_tokens),
            ("finetune.top_k", embedding.finetune.top_k),
            *(("keep_k.ks", k) for k in embedding.keep_k.ks or ()),
            *((("overlap.k", embedding.overlap.k),) if isinstance(embedding.overlap.k, int) else ()),
            *(
                (("token_structure.k", embedding.token_structure.k),)
                if isinstance(embedding.token_structure.k, int)
                else ()
            ),
        ):
            if k > vocab_bound:
                raise ParameterError(
                    f"embedding.{key}: k={k} exceeds the zoo's vocabulary size (at most "
                    f"corpus.vocab_size={vocab_bound})"
                )
    for first, second in plan.pairs:
        reason = tokenizer_mismatch(first, second, plan.models)
        if reason:
            raise ParameterError(f"embedding.alignment.pairs: {reason}")
    for tuned, donor in plan.zero_shot:
        reason = tokenizer_mismatch(tuned, donor, plan.models)
        if reason:
            raise ParameterError(f"embedding.zero_shot.pairs: {reason}")
    return embedding


def embedding_section(run: RunSettings) -> EmbeddingParameters:
    """The run's ``embedding`` section parsed with its models, pairs and k's (:func:`validate_embedding`)."""
    return validate_embedding(run.raw("embedding"), run)


def check_embedding(run: RunSettings) -> None:
    """``embedding`` with its models and pairs (nothing when the section is empty)."""
    if run.raw("embedding"):
        run.parsed(embedding_section)
