"""The ``nli`` parameter section, validated before any node runs (``validate_nli``), and the one place its defaults
live: the pipeline's builder parses it once (``nli_section``) and binds the typed settings into the nodes.

Errors name the full key: ``nli.group_size`` when k > N / 2, ``nli.pairs.counterexample_fraction`` or
``nli.sweep.fractions`` for a fraction outside [0, 1), ``nli.pairs.ood_subcases`` for an unknown subcase,
``nli.stitching.layers`` for a layer the encoder does not have.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import Field

from thinkalike.cka.settings import CKASettings
from thinkalike.language.nli import PairsConfig
from thinkalike.models.finetune import FinetuneConfig
from thinkalike.models.training import TrainingConfig
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import (
    Device,
    ParameterError,
    _Section,
    validate_section,
)

#: FinetuneConfig fields set per copy by the pipeline (``copy_seeds``), not in ``nli.finetune``.
SEED_FIELDS = frozenset({"head_seed", "data_seed"})
#: CKA settings the nli pipeline fixes: token rows of one tokenizer, special tokens left out.
FIXED_CKA_FIELDS = frozenset({"pooling", "exclude_special_tokens"})


class PairTextParameters(_Section):
    """``nli.encoder.pair_text``: unlabelled premise/hypothesis text mixed into the encoder's pretraining."""

    n_pairs: int = Field(4000, ge=1)
    seed: int = 1
    share: float = Field(0.75, ge=0, le=1)  # share of the pretraining rows that are pair text
    # masking probability of premise / hypothesis tokens in pair-text rows (corpus rows: training.mask_probability)
    premise_mask_probability: float = Field(0.1, ge=0, lt=1)
    hypothesis_mask_probability: float = Field(0.5, ge=0, lt=1)


#: ``nli.encoder.source`` of the zoo's own encoder, pretrained on the grammar by the pipeline.
ZOO_ENCODER = "zoo"


class EncoderParameters(_Section):
    """``nli.encoder``: the masked encoder every copy starts from. ``source``: ``zoo`` (a bridge-family zoo
    encoder pretrained on the grammar: ``seed``, ``architecture``, ``training``, ``pair_text``) or a real
    pretrained checkpoint's spec (``packaged:minilm``, ``hf:<dir or id>``: imported as it is, with its own
    tokenizer; the zoo settings are then not read)."""

    source: str = ZOO_ENCODER
    seed: int = 0
    architecture: dict[str, Any] = Field(default_factory=dict)
    training: TrainingConfig = Field(default_factory=TrainingConfig)  # its seed is nli.encoder.seed
    pair_text: PairTextParameters = Field(default_factory=PairTextParameters)


class SweepParameters(_Section):
    """``nli.sweep``: the counterexample-fraction sweep, run exactly when ``run`` is true (a setting, never a
    result: whether the copies' accuracies spread is a number that float round-off can move across
    ``nli.min_spread``, so it only suggests the sweep in a log line). Its cost: ``len(fractions) × n_copies``
    fine-tunes, less those at the experiment's own fraction (reused)."""

    run: bool = False
    fractions: list[float] = Field(default_factory=lambda: [0.0, 0.1, 0.2], min_length=1)
    n_copies: int = Field(2, ge=2)


class NLIStitchingParameters(_Section):
    """``nli.stitching``: identity stitching of every ordered pair of copies."""

    layers: list[typing.Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)  # null: 0..n_layers
    max_pairs: int | None = Field(160, ge=2)  # per evaluation set (test, ood), stratified; null: all
    batch_size: int = Field(32, ge=1)
    n_bootstrap: int = Field(1000, ge=1)
    ci_level: float = Field(0.95, gt=0, lt=1)
    seed: int = 0


class NLIParameters(_Section):
    """``nli``: Brown et al. (2023) §4 on the grammar's HANS-style pairs (module docstring of the pipeline)."""

    n_copies: int = Field(10, ge=2)
    n_ctx: int = Field(64, ge=4)  # the encoder's context: the longest encoded pair must fit
    group_size: int | None = Field(None, ge=1)  # k; null: n_copies // 3 (thirds)
    seed: int = 0
    min_spread: float = Field(0.1, ge=0, le=1)
    threads: int | None = Field(None, ge=1)  # null: the run's policy (thinkalike.threads)
    device: Device | None = None
    progress: bool = True
    pairs: PairsConfig = Field(default_factory=PairsConfig)
    encoder: EncoderParameters = Field(default_factory=EncoderParameters)
    finetune: FinetuneConfig = Field(default_factory=FinetuneConfig)  # the copies' seeds come from nli.seed
    sweep: SweepParameters = Field(default_factory=SweepParameters)
    stitching: NLIStitchingParameters = Field(default_factory=NLIStitchingParameters)
    cka: CKASettings = Field(default_factory=CKASettings)  # its pooling and special tokens are the pipeline's

    def pairs_config(self, **overrides: Any) -> PairsConfig:
        """The pairs of ``nli.pairs`` (defaults: :class:`~thinkalike.language.nli.PairsConfig`'s), with
        ``overrides`` (the encoder's pair text, a sweep's counterexample fraction)."""
        return PairsConfig.model_validate({**self.pairs.model_dump(), **overrides}) if overrides else self.pairs

    def finetune_config(self, seeds: tuple[int, int]) -> FinetuneConfig:
        """One copy's fine-tuning: ``nli.finetune`` (defaults: :class:`~thinkalike.models.finetune.FinetuneConfig`'s)
        with that copy's ``(head_seed, data_seed)`` (:func:`~thinkalike.models.finetune.copy_seeds`)."""
        head_seed, data_seed = seeds
        return self.finetune.model_copy(update={"head_seed": head_seed, "data_seed": data_seed})

    def cka_settings(self) -> CKASettings:
        """``nli.cka`` (defaults: :class:`~thinkalike.cka.settings.CKASettings`'s) with the fields the pipeline fixes
        (:data:`FIXED_CKA_FIELDS`): token rows, special tokens left out."""
        return self.cka.model_copy(update={"pooling": "token", "exclude_special_tokens": True})


def group_size(n_copies: int, k: int | None) -> int:
    """k of the generalizing (top k) and heuristic (bottom k) groups: ``k`` or, when ``None``, a third of
    the copies (at least 1). :class:`ParameterError` naming ``nli.group_size`` unless 1 ≤ k ≤ N / 2."""
    chosen = max(1, n_copies // 3) if k is None else int(k)
    if not 1 <= chosen <= n_copies / 2:
        raise ParameterError(
            f"nli.group_size: k = {chosen} must be between 1 and n_copies / 2 = {n_copies / 2} "
            f"(the top k and bottom k of nli.n_copies = {n_copies} copies must not overlap)"
        )
    return chosen


def validate_nli(values: Any, corpus_n_ctx: int = 64) -> NLIParameters:
    """The section and every library setting in it, checked by building it (no weights, no data)."""
    from thinkalike.models.bridge import resolve_bridge_config

    nli = validate_section(NLIParameters, values, "nli")
    group_size(nli.n_copies, nli.group_size)
    for key in sorted(SEED_FIELDS & nli.finetune.model_fields_set):
        raise ParameterError(
            f"nli.finetune.{key}: the copies' seeds come from nli.seed (copy_seeds), not from nli.finetune"
        )
    if nli.encoder.source == ZOO_ENCODER:
        if nli.n_ctx < corpus_n_ctx:
            raise ParameterError(
                f"nli.n_ctx: {nli.n_ctx} is shorter than the corpus rows the encoder pretrains on "
                f"(corpus.n_ctx = {corpus_n_ctx})"
            )
        if "seed" in nli.encoder.training.model_fields_set:
            raise ParameterError("nli.encoder.training.seed: the encoder's seed is nli.encoder.seed")
        try:
            bridge = resolve_bridge_config({**nli.encoder.architecture, "d_vocab": 64, "n_ctx": nli.n_ctx})
        except (ValueError, TypeError) as error:
            raise ParameterError(f"nli.encoder.architecture: {error}") from None
        n_layers = int(bridge["n_layers"])
    else:
        n_layers = _checkpoint_layers(nli.encoder.source, nli.n_ctx)
    for fraction in nli.sweep.fractions:
        if not 0.0 <= fraction < 1.0:
            raise ParameterError(
                f"nli.sweep.fractions: every counterexample fraction must be in [0, 1), got {fraction}"
            )
        validate_section(PairsConfig, {**nli.pairs.model_dump(), "counterexample_fraction": fraction}, "nli.pairs")
    if nli.stitching.layers is not None:
        beyond = sorted(layer for layer in nli.stitching.layers if layer > n_layers)
        if beyond:
            raise ParameterError(
                f"nli.stitching.layers: the encoder has layers 0..{n_layers} (0 = embeddings), not {beyond}"
            )
    unknown_fixed = sorted(FIXED_CKA_FIELDS & nli.cka.model_fields_set)
    if unknown_fixed:
        raise ParameterError(
            f"nli.cka.{unknown_fixed[0]}: fixed by the nli pipeline (token rows, special tokens left out)"
        )
    return nli


def _checkpoint_layers(spec: str, n_ctx: int) -> int:
    """A real encoder's layers from its config (no weights read), after its spec and its context are checked."""
    from thinkalike.models.encoder_import import checkpoint_shape
    from thinkalike.models.handle import ModelSourceError

    try:
        layers, positions = checkpoint_shape(spec)
    except ModelSourceError as error:
        raise ParameterError(f"nli.encoder.source: {error}") from None
    if n_ctx > positions:
        raise ParameterError(f"nli.n_ctx: {n_ctx} is longer than {spec}'s {positions} positions")
    return layers


def nli_section(run: RunSettings) -> NLIParameters | None:
    """The run's ``nli`` section checked against the corpus's context length (:func:`validate_nli`); ``None`` when
    the section is empty."""
    if not run.raw("nli"):
        return None
    from thinkalike.pipelines.corpus.schema import corpus_section

    return validate_nli(run.raw("nli"), run.parsed(corpus_section).n_ctx)


def check_nli(run: RunSettings) -> None:
    """``nli`` against the corpus's context length (nothing when the section is empty)."""
    run.parsed(nli_section)
