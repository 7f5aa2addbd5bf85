"""One stitch end to end: ``g_{>m} ∘ φ ∘ f_{≤l}`` — checks, f's features, φ's initialisation, training,
held-out evaluation — as one call a pipeline node can make (:func:`stitch`; :func:`stitch_grid` runs a
pair's whole grid of layers and kinds, every trained kind once per φ seed, sharing what the stitches
have in common).

Penalty (:mod:`~thinkalike.stitching.evaluate`), over the scored evaluation targets ``T`` — the next
tokens of the evaluation sequences, special tokens left out when ``exclude_special_targets``
(default; :func:`~thinkalike.stitching.data.excluded_target_ids`):
``P = (1/|T|) Σ_{t∈T} −log p_{g∘φ∘f}(t | context) − (1/|T|) Σ_{t∈T} −log p_g(t | context)``,
the stitched model's mean loss minus g's own on the same targets; φ trains on the same rule.
``n_targets = |T|`` is in every row.

Layers are the activation stores' residual-stream indices: 0 = embeddings, ``l`` = after block
``l − 1``, ``n_layers`` = the last block's output before the final norm. f's residual after
layer l goes through φ into g's residual stream after layer m, and g runs on from there (its
blocks ``m … n_layers − 1``, final norm, head). Everything but φ is frozen.

Every configuration error (:class:`~thinkalike.stitching.layers.StitchConfigError`) is raised by
:func:`check_stitch` before any feature is computed or any step taken: unknown kind, identity
between different widths, layers out of range, different token streams, bad settings (warm-up ≥
steps…), overlapping train/evaluation tokens, missing labels. A diverging stitch raises
:class:`~thinkalike.stitching.train.StitchDivergedError`.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.models.handle import ModelHandle
from thinkalike.models.training import MaskingTokens
from thinkalike.stitching.data import (
    IGNORE,
    PreparedSplit,
    TokenSplit,
    check_disjoint,
    check_features,
    excluded_target_ids,
    layers_features,
    masking_tokens,
    resolve_objective,
    target_count,
    targets_for,
    token_stream_mismatch,
)
from thinkalike.stitching.evaluate import (
    BatchLosses,
    StitchEvaluation,
    evaluate_stitch,
    lockstep_batch_losses,
    own_batch_losses,
    own_losses_or_note,
)
from thinkalike.stitching.layers import (
    AffineStitch,
    StitchConfigError,
    StitchLayer,
    build_stitch_layer,
    check_kind,
    initialise_least_squares,
    load_stitch_layer,
    resolve_init,
)
from thinkalike.stitching.train import (
    FEATURE_DTYPES,
    LockstepTrainer,
    StitchDivergedError,
    StitchSettings,
    frozen,
    phi_seed_list,
)

#: Value columns of the learning curve (after ``f``, ``layer_f``, ``g``, ``layer_g``, ``kind``, ``phi_seed`` and
#: ``step``).
CURVE_VALUES: tuple[str, ...] = ("train_loss", "lr", "heldout_loss", "heldout_penalty")

#: Columns of :meth:`StitchResult.row` (the penalty table), in order.
ROW_FIELDS: tuple[str, ...] = (
    "f",
    "g",
    "f_spec",
    "g_spec",
    "layer_f",
    "layer_g",
    "kind",
    "init",
    "objective",
    "stitched_loss",
    "g_loss",
    "f_loss",
    "penalty",
    "penalty_ci_low",
    "penalty_ci_high",
    "ci_level",
    "initial_heldout_penalty",
    "final_train_loss",
    "n_eval_batches",
    "n_targets",
    "exclude_special_targets",
    "phi_seed",
    "n_train_sequences",
    "steps",
    "warmup_steps",
    "lr_scale",
    "tokens_per_step",
    "seconds",
    "f_loss_note",
)


def describe_pair(f: ModelHandle, g: ModelHandle, layer_f: int, layer_g: int, kind: str) -> str:
    """``'f'@l -> 'g'@m (kind)``, the name of a stitch in messages."""
    return f"{f.name!r}@{layer_f} -> {g.name!r}@{layer_g} ({kind})"


def check_stitch(
    f: ModelHandle, g: ModelHandle, layer_f: int, layer_g: int, kind: str, settings: StitchSettings | None = None
) -> str:
    """Raises :class:`StitchConfigError` for a stitch that cannot run; returns the initialisation it will use.
    Cheap (no forward pass): a pipeline can validate its whole configuration with it first."""
    settings = settings or StitchSettings()
    check_kind(kind)
    for handle, layer, which in ((f, layer_f, "f"), (g, layer_g, "g")):
        if isinstance(layer, bool) or int(layer) != layer or not 0 <= layer <= handle.n_layers:
            raise StitchConfigError(
                f"stitching layer {layer!r} of {which} = model {handle.name!r} is out of range "
                f"0..{handle.n_layers} (0 = embeddings, {handle.n_layers} = its last block)"
            )
    if kind == "identity" and f.d_model != g.d_model:
        raise StitchConfigError(
            f"identity stitching needs equal widths: model {f.name!r} has d_model {f.d_model}, "
            f"model {g.name!r} has d_model {g.d_model}; use kind 'affine' or 'affine_ln'"
        )
    mismatch = token_stream_mismatch(f, g)
    if mismatch:
        raise StitchConfigError(mismatch)
    if not g.has_unembedding:
        raise StitchConfigError(f"model {g.name!r} (g) has no head, so the stitched model has no output to score")
    return resolve_init(kind, settings.init, f.d_model, g.d_model)


@dataclass
class StitchResult:
    """Everything one stitch (one φ seed of it) produced. :meth:`row` is its penalty-table row
    (:data:`ROW_FIELDS`); ``curve`` the learning curve (empty for identity stitching); ``per_batch`` the
    evaluation batches; ``phi_config`` + ``phi_state`` the trained φ (:meth:`load_phi`); ``phi_seed`` the φ
    seed whose data order trained it (0 for identity stitching, which trains nothing); ``seconds`` the time of
    the stitch's own work (its seeds' training, together, and evaluation; the pair's shared features and own
    losses are not counted)."""

    f: str
    g: str
    f_spec: str
    g_spec: str
    layer_f: int
    layer_g: int
    kind: str
    init: str
    objective: str
    evaluation: StitchEvaluation
    curve: pd.DataFrame
    phi_config: dict[str, Any]
    phi_state: dict[str, torch.Tensor]
    settings: StitchSettings
    n_train_sequences: int
    tokens_per_step: int
    seconds: float
    phi_seed: int = 0

    @property
    def stitched_loss(self) -> float:
        return self.evaluation.stitched_loss

    @property
    def g_loss(self) -> float:
        return self.evaluation.g_loss

    @property
    def f_loss(self) -> float:
        return self.evaluation.f_loss

    @property
    def penalty(self) -> float:
        return self.evaluation.penalty

    @property
    def per_batch(self) -> pd.DataFrame:
        return self.evaluation.per_batch

    def load_phi(self) -> StitchLayer:
        """The trained φ rebuilt from ``phi_config`` and ``phi_state`` (CPU)."""
        return load_stitch_layer(self.phi_config, self.phi_state)

    def row(self) -> dict[str, Any]:
        """The penalty-table row: names, layers, kind, losses, penalty with its CI, the number of scored
        evaluation targets (``n_targets``) and whether special tokens were left out of them, training facts."""
        ev = self.evaluation
        trained = self.curve[self.curve["step"] > 0] if len(self.curve) else self.curve
        values = {
            "f": self.f,
            "g": self.g,
            "f_spec": self.f_spec,
            "g_spec": self.g_spec,
            "layer_f": self.layer_f,
            "layer_g": self.layer_g,
            "kind": self.kind,
            "init": self.init,
            "objective": self.objective,
            "stitched_loss": ev.stitched_loss,
            "g_loss": ev.g_loss,
            "f_loss": ev.f_loss,
            "penalty": ev.penalty,
            "penalty_ci_low": ev.penalty_ci_low,
            "penalty_ci_high": ev.penalty_ci_high,
            "ci_level": ev.ci_level,
            "initial_heldout_penalty": float(self.curve["heldout_penalty"].iloc[0]) if len(self.curve) else np.nan,
            "final_train_loss": float(trained["train_loss"].iloc[-1]) if len(trained) else np.nan,
            "n_eval_batches": ev.n_batches,
            "n_targets": ev.n_targets,
            "exclude_special_targets": self.settings.exclude_special_targets,
            "phi_seed": self.phi_seed,
            "n_train_sequences": self.n_train_sequences,
            "steps": self.settings.steps if self.kind != "identity" else 0,
            "warmup_steps": self.settings.warmup_steps,
            "lr_scale": self.settings.lr_scale,
            "tokens_per_step": self.tokens_per_step,
            "seconds": self.seconds,
            "f_loss_note": ev.f_loss_note,
        }
        return {key: values[key] for key in ROW_FIELDS}


def prepare_split(
    f: ModelHandle,
    layer_f: int,
    split: TokenSplit,
    objective: str,
    settings: StitchSettings,
    *,
    device: torch.device,
    masking: MaskingTokens | None,
    seed: int,
    features: torch.Tensor | None = None,
    what: str = "tokens",
    batch_size: int | None = None,
    exclude_ids: frozenset[int] = frozenset(),
) -> PreparedSplit:
    """Model inputs, targets (none at the tokens of ``exclude_ids``) and f's features after ``layer_f`` for
    ``split``, on ``device``, computed in batches of ``batch_size`` sequences (default
    ``settings.eval_batch_size``). ``features`` (precomputed, e.g.
    :func:`~thinkalike.stitching.data.features_from_store`) are used as given — not for the masked objective,
    whose features must be those of the corrupted inputs."""
    inputs = _SplitInputs.of(split, objective, settings, masking=masking, seed=seed, what=what, exclude_ids=exclude_ids)
    given = {} if features is None else {layer_f: features}
    return inputs.prepared(
        [layer_f], f, settings, device=device, given=given, batch_size=batch_size or settings.eval_batch_size
    )[layer_f]


@dataclass(frozen=True)
class _SplitInputs:
    """A split's model inputs and targets (on the CPU), shared by every stitch of a pair."""

    split: TokenSplit
    input_ids: torch.Tensor
    targets: torch.Tensor
    objective: str
    what: str

    @classmethod
    def of(
        cls,
        split: TokenSplit,
        objective: str,
        settings: StitchSettings,
        *,
        masking: MaskingTokens | None,
        seed: int,
        what: str,
        exclude_ids: frozenset[int],
    ) -> _SplitInputs:
        input_ids, targets = targets_for(
            split,
            objective,
            masking=masking,
            mask_probability=settings.mask_probability,
            seed=seed,
            exclude_ids=exclude_ids,
        )
        if int(target_count(targets, objective)) == 0:
            raise StitchConfigError(
                f"the {what} have no scored targets for the {objective} objective"
                + (
                    " once special tokens are left out (exclude_special_targets)"
                    if exclude_ids and objective != "label"
                    else ""
                )
            )
        return cls(split, input_ids, targets, objective, what)

    def prepared(
        self,
        layers: Iterable[int],
        f: ModelHandle,
        settings: StitchSettings,
        *,
        device: torch.device,
        given: Mapping[int, torch.Tensor],
        batch_size: int,
    ) -> dict[int, PreparedSplit]:
        """A :class:`PreparedSplit` per layer of f: the ``given`` features where there are some, the others
        computed in one pass over the sequences (:func:`~thinkalike.stitching.data.layers_features`)."""
        layers = sorted(set(int(layer) for layer in layers))
        dtype = FEATURE_DTYPES[settings.feature_dtype]
        features: dict[int, torch.Tensor] = {}
        for layer in layers:
            if layer in given and given[layer] is not None:
                if self.objective == "masked":
                    raise StitchConfigError(
                        "precomputed features cannot be used with the masked objective: f must "
                        "see the corrupted inputs, which are drawn here"
                    )
                checked = check_features(
                    torch.as_tensor(given[layer]), self.split, f.d_model, f"precomputed {self.what} features"
                )
                features[layer] = checked.to(device=device, dtype=dtype)
        missing = [layer for layer in layers if layer not in features]
        if missing:
            features.update(
                layers_features(
                    f,
                    missing,
                    self.input_ids,
                    self.split.attention_mask,
                    batch_size=batch_size,
                    device=device,
                    dtype=dtype,
                )
            )
        ids, mask, targets = (t.to(device) for t in (self.input_ids, self.split.attention_mask, self.targets))
        return {layer: PreparedSplit(ids, mask, targets, features[layer]) for layer in layers}


@dataclass(frozen=True)
class _InitBatch:
    """One batch of the training sequences the least-squares initialisation reads: the rows ``index``, their
    real tokens ``real`` (kept: the first ``keep`` of them) and g's residual at those tokens per layer."""

    index: torch.Tensor
    real: torch.Tensor
    keep: int
    targets: dict[int, torch.Tensor]


def _init_batches(
    prepared: PreparedSplit, g: ModelHandle, layers_g: Iterable[int], max_tokens: int, batch_size: int
) -> list[_InitBatch]:
    """g's residuals after each of ``layers_g`` at the first ``max_tokens`` real training tokens, in batches of
    ``batch_size`` sequences (one forward pass of g per batch serves every layer)."""
    layers_g = sorted(set(layers_g))
    batches, taken = [], 0
    with torch.no_grad():
        for start in range(0, len(prepared), batch_size):
            if taken >= max_tokens:
                break
            index = torch.arange(start, min(start + batch_size, len(prepared)), device=prepared.input_ids.device)
            _, ids, mask, _ = prepared.batch(index)
            streams = g.residual_streams(ids.to(g.device), mask.to(g.device))
            real = mask.bool()
            keep = min(int(real.sum()), max_tokens - taken)
            taken += keep
            targets = {layer: streams[layer].to(prepared.features.device)[real][:keep] for layer in layers_g}
            batches.append(_InitBatch(index, real, keep, targets))
    return batches


def _init_pairs(
    prepared: PreparedSplit, batches: list[_InitBatch], layer_g: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Rows (f's feature, g's residual after ``layer_g``) of the real training tokens of ``batches``."""
    for batch in batches:
        yield prepared.features[batch.index][batch.real][: batch.keep], batch.targets[layer_g]


def _settings(settings: StitchSettings | Mapping[str, Any] | None) -> StitchSettings:
    return settings if isinstance(settings, StitchSettings) else StitchSettings.model_validate(dict(settings or {}))


@dataclass(frozen=True)
class _GridStitch:
    """One stitch of a grid: f's layer, g's layer, φ's kind and the initialisation it uses
    (:func:`check_stitch`)."""

    layer_f: int
    layer_g: int
    kind: str
    init: str


@dataclass(frozen=True)
class _GridPlan:
    """A checked grid (:meth:`checked`): its settings, φ seeds, token splits, stitches, objective, masking tokens
    and the token ids never scored as targets."""

    settings: StitchSettings
    seeds: tuple[int, ...]
    train: TokenSplit
    evaluation: TokenSplit
    stitches: tuple[_GridStitch, ...]
    objective: str
    masking: MaskingTokens | None
    exclude_ids: frozenset[int]

    @classmethod
    def checked(
        cls,
        f: ModelHandle,
        g: ModelHandle,
        stitches: Sequence[tuple[int, int, str]],
        train: TokenSplit,
        evaluation: TokenSplit,
        settings: StitchSettings,
        seeds: tuple[int, ...],
        *,
        masking: MaskingTokens | None,
        special_ids: Iterable[int] | None,
    ) -> _GridPlan:
        """Every configuration check of :func:`stitch_grid` (raising :class:`StitchConfigError`), before any
        forward pass: at least one stitch, each stitch (:func:`check_stitch`), labels on both splits or neither,
        the objective and its masking tokens, disjoint splits."""
        if not stitches:
            raise StitchConfigError("no stitch to run: give at least one (layer_f, layer_g, kind)")
        inits = [check_stitch(f, g, layer_f, layer_g, kind, settings) for layer_f, layer_g, kind in stitches]
        if (train.labels is None) != (evaluation.labels is None):
            raise StitchConfigError("labels must be given for both the training and the evaluation tokens, or neither")
        objective = resolve_objective(settings.objective, g, train.labels is not None)
        if objective == "masked":
            masking = masking_tokens(g, masking)
        check_disjoint(train, evaluation)
        exclude_ids = (
            frozenset()
            if objective == "label"
            else excluded_target_ids(f, g, settings.exclude_special_targets, special_ids)
        )
        checked = tuple(
            _GridStitch(int(layer_f), int(layer_g), kind, init)
            for (layer_f, layer_g, kind), init in zip(stitches, inits)
        )
        return cls(settings, seeds, train, evaluation, checked, objective, masking, exclude_ids)

    @property
    def trained(self) -> list[_GridStitch]:
        """The stitches whose φ is trained (all but identity stitching)."""
        return [stitch for stitch in self.stitches if stitch.kind != "identity"]

    def inputs(self, split: TokenSplit, seed: int, what: str) -> _SplitInputs:
        """``split``'s model inputs and targets under this grid's objective (:class:`_SplitInputs`)."""
        return _SplitInputs.of(
            split,
            self.objective,
            self.settings,
            masking=self.masking,
            seed=seed,
            what=what,
            exclude_ids=self.exclude_ids,
        )


@dataclass(frozen=True)
class _SharedWork:
    """What every stitch of a grid shares (:meth:`computed`): the prepared evaluation split per layer of f, g's
    and f's own evaluation losses, the prepared training split per trained layer of f and g's residuals for the
    least-squares initialisation."""

    prepared_eval: dict[int, PreparedSplit]
    g_own: BatchLosses
    f_own: tuple[BatchLosses | None, str]
    prepared_train: dict[int, PreparedSplit]
    init_batches: list[_InitBatch]

    @classmethod
    def computed(
        cls,
        f: ModelHandle,
        g: ModelHandle,
        grid: _GridPlan,
        *,
        train_features: Mapping[int, torch.Tensor] | None,
        eval_features: Mapping[int, torch.Tensor] | None,
    ) -> _SharedWork:
        """The shared work of ``grid``, on g's device (the models frozen by the caller): the evaluation targets and
        f's features first, then g's and f's own losses, then the training split's (only if some stitch trains)."""
        settings, trained = grid.settings, grid.trained
        eval_inputs = grid.inputs(grid.evaluation, settings.seed + 1, "evaluation tokens")
        train_inputs = grid.inputs(grid.train, settings.seed, "training tokens") if trained else None
        prepared_eval = eval_inputs.prepared(
            [stitch.layer_f for stitch in grid.stitches],
            f,
            settings,
            device=g.device,
            given=eval_features or {},
            batch_size=settings.eval_batch_size,
        )
        any_eval = next(iter(prepared_eval.values()))
        g_own = own_batch_losses(g, any_eval, grid.objective, settings.eval_batch_size)
        f_own = own_losses_or_note(f, any_eval, grid.objective, settings.eval_batch_size)
        prepared_train: dict[int, PreparedSplit] = {}
        init_batches: list[_InitBatch] = []
        if train_inputs is not None:
            # no-grad forward passes over the training tokens: batches as large as training's or evaluation's
            forward_batch = max(settings.batch_size, settings.eval_batch_size)
            prepared_train = train_inputs.prepared(
                [stitch.layer_f for stitch in trained],
                f,
                settings,
                device=g.device,
                given=train_features or {},
                batch_size=forward_batch,
            )
            lstsq_layers = [stitch.layer_g for stitch in trained if stitch.init == "lstsq"]
            if lstsq_layers:
                init_batches = _init_batches(
                    next(iter(prepared_train.values())), g, lstsq_layers, settings.init_max_tokens, forward_batch
                )
        return cls(prepared_eval, g_own, f_own, prepared_train, init_batches)


def stitch_grid(
    f: ModelHandle,
    g: ModelHandle,
    stitches: Sequence[tuple[int, int, str]],
    train_tokens,
    eval_tokens,
    settings: StitchSettings | Mapping[str, Any] | None = None,
    *,
    phi_seeds: int | Sequence[int] = 1,
    train_mask=None,
    eval_mask=None,
    train_labels=None,
    eval_labels=None,
    train_features: Mapping[int, torch.Tensor] | None = None,
    eval_features: Mapping[int, torch.Tensor] | None = None,
    masking: MaskingTokens | None = None,
    special_ids: Iterable[int] | None = None,
    progress: bool = True,
    on_stitch: Callable[[list[StitchResult]], None] | None = None,
    fuse_seeds: bool | None = None,
) -> list[StitchResult]:
    """Every stitch ``(layer_f, layer_g, kind)`` of ``stitches`` from f into g (:func:`stitch`), each trained
    kind once per φ seed of ``phi_seeds`` (:func:`~thinkalike.stitching.train.phi_seed_list`; the seeds of a
    stitch train in lockstep, :class:`~thinkalike.stitching.train.LockstepTrainer`), sharing what does not
    depend on the stitch: the token splits and targets, f's features (one pass over each split for every
    layer of f the grid needs), g's and f's own evaluation losses, g's residuals for the least-squares
    initialisation. Returns the results in ``stitches`` order; a trained kind gives one result per φ seed (in
    seed order), identity stitching one result (φ seed 0: nothing is trained).

    ``train_features`` / ``eval_features``: f's residuals per layer for those sequences, if at hand. Special
    tokens are never targets when ``settings.exclude_special_targets`` (``special_ids``, else the tokenizer's:
    :func:`~thinkalike.stitching.data.excluded_target_ids`). ``on_stitch``: called with each stitch's results
    (its seeds) as soon as they are done (a pipeline logs them). ``fuse_seeds``: whether a stitch's seeds share
    one pass of g's tail (:func:`~thinkalike.stitching.train.fuse_seeds`; default: on CUDA). Every configuration
    error is raised before any forward pass.
    """
    settings = _settings(settings)
    seeds = phi_seed_list(phi_seeds)
    train = TokenSplit.of(train_tokens, train_mask, train_labels, what="training tokens")
    evaluation = TokenSplit.of(eval_tokens, eval_mask, eval_labels, what="evaluation tokens")
    grid = _GridPlan.checked(
        f, g, stitches, train, evaluation, settings, seeds, masking=masking, special_ids=special_ids
    )
    results: list[StitchResult] = []
    with frozen(f.module, g.module):
        shared = _SharedWork.computed(f, g, grid, train_features=train_features, eval_features=eval_features)
        for stitch in grid.stitches:
            done = _run_grid_stitch(f, g, grid, shared, stitch, progress=progress, fuse_seeds=fuse_seeds)
            results.extend(done)
            if on_stitch is not None:
                on_stitch(done)
    return results


def _run_grid_stitch(
    f: ModelHandle,
    g: ModelHandle,
    grid: _GridPlan,
    shared: _SharedWork,
    stitch: _GridStitch,
    *,
    progress: bool,
    fuse_seeds: bool | None,
) -> list[StitchResult]:
    """One stitch of ``grid``: φ built (identity) or trained once per φ seed, then each seed's φ evaluated on the
    held-out split; its results in seed order (:class:`StitchDivergedError` if a seed's evaluation loss is not
    finite). ``seconds`` counts this stitch's own work, not the shared work."""
    started = time.perf_counter()
    label = describe_pair(f, g, stitch.layer_f, stitch.layer_g, stitch.kind)
    settings, split = grid.settings, shared.prepared_eval[stitch.layer_f]
    used_seeds: tuple[int, ...]
    curves: list[pd.DataFrame] | list[None]
    if stitch.kind == "identity":
        phis = [build_stitch_layer(stitch.kind, f.d_model, g.d_model).to(g.device)]
        used_seeds, curves, tokens_per_step = (0,), [None], 0
    else:
        phis, curves, tokens_per_step = _train_grid_stitch(
            f, g, grid, shared, stitch, label, progress=progress, fuse_seeds=fuse_seeds
        )
        used_seeds = grid.seeds
    evaluations = [
        evaluate_stitch(
            phi,
            f,
            g,
            stitch.layer_g,
            split,
            grid.objective,
            batch_size=settings.eval_batch_size,
            n_bootstrap=settings.n_bootstrap,
            level=settings.ci_level,
            seed=settings.seed,
            g_own=shared.g_own,
            f_own=shared.f_own,
        )
        for phi in phis
    ]
    seconds = time.perf_counter() - started
    return [
        _grid_result(f, g, grid, stitch, phi, seed, curve, evaluation, tokens_per_step, seconds, label, len(phis))
        for phi, seed, curve, evaluation in zip(phis, used_seeds, curves, evaluations)
    ]


def _train_grid_stitch(
    f: ModelHandle,
    g: ModelHandle,
    grid: _GridPlan,
    shared: _SharedWork,
    stitch: _GridStitch,
    label: str,
    *,
    progress: bool,
    fuse_seeds: bool | None,
) -> tuple[list[StitchLayer], list[pd.DataFrame], int]:
    """A trained stitch's φ, one per φ seed of ``grid`` (the same initialisation: least squares on the shared
    initialisation batches where ``init`` is ``lstsq``), trained in lockstep with a held-out curve on the first
    ``curve_eval_batches`` evaluation batches; returns the φs, their learning curves and the tokens per step."""
    settings, seeds = grid.settings, grid.seeds
    prepared_train, split = shared.prepared_train[stitch.layer_f], shared.prepared_eval[stitch.layer_f]
    phi = build_stitch_layer(stitch.kind, f.d_model, g.d_model).to(g.device)
    if stitch.init == "lstsq":
        assert isinstance(phi, AffineStitch)
        initialise_least_squares(phi, _init_pairs(prepared_train, shared.init_batches, stitch.layer_g))
    phis = [phi] + [copy.deepcopy(phi) for _ in seeds[1:]]
    curve_batches = settings.curve_eval_batches
    g_curve = BatchLosses(shared.g_own.sums[:curve_batches], shared.g_own.counts[:curve_batches]).mean
    trainer = LockstepTrainer(
        phis, g, stitch.layer_g, prepared_train, grid.objective, settings, label, seeds=seeds, fuse=fuse_seeds
    )
    fuse = trainer.fuse

    def heldout() -> list[float]:
        return [
            losses.mean
            for losses in lockstep_batch_losses(
                phis, g, stitch.layer_g, split, grid.objective, settings.eval_batch_size, curve_batches, fuse
            )
        ]

    curves = trainer.run(heldout, g_curve, progress=progress)
    return phis, curves, trainer.sequences_per_step * grid.train.seq_len


def _grid_result(
    f: ModelHandle,
    g: ModelHandle,
    grid: _GridPlan,
    stitch: _GridStitch,
    phi: StitchLayer,
    seed: int,
    curve: pd.DataFrame | None,
    evaluation: StitchEvaluation,
    tokens_per_step: int,
    seconds: float,
    label: str,
    n_seeds: int,
) -> StitchResult:
    """The :class:`StitchResult` of one φ seed of a grid's stitch; :class:`StitchDivergedError` if its evaluation
    loss is not finite (naming the seed when the stitch has several)."""
    if not math.isfinite(evaluation.stitched_loss):
        which = f" (φ seed {seed})" if n_seeds > 1 else ""
        raise StitchDivergedError(
            f"stitching {label} diverged{which}: the evaluation loss is "
            f"{evaluation.stitched_loss}; try a smaller lr_scale (now "
            f"{grid.settings.lr_scale})"
        )
    return StitchResult(
        f=f.name,
        g=g.name,
        f_spec=f.spec,
        g_spec=g.spec,
        layer_f=stitch.layer_f,
        layer_g=stitch.layer_g,
        kind=stitch.kind,
        init=stitch.init,
        objective=grid.objective,
        evaluation=evaluation,
        curve=_curve_frame(curve, f.name, stitch.layer_f, g.name, stitch.layer_g, stitch.kind, seed),
        phi_config=phi.config(),
        phi_state={k: v.detach().cpu().clone().contiguous() for k, v in phi.state_dict().items()},
        settings=grid.settings,
        n_train_sequences=len(grid.train),
        tokens_per_step=tokens_per_step,
        seconds=seconds,
        phi_seed=seed,
    )


def _curve_frame(
    curve: pd.DataFrame | None, f: str, layer_f: int, g: str, layer_g: int, kind: str, seed: int
) -> pd.DataFrame:
    """A learning curve with the stitch's names in front (an empty, typed frame for identity stitching)."""
    if curve is None:
        curve = pd.DataFrame(
            {"step": pd.Series(dtype="int64"), **{c: pd.Series(dtype="float64") for c in CURVE_VALUES}}
        )
    for column, value in reversed(
        (("f", f), ("layer_f", layer_f), ("g", g), ("layer_g", layer_g), ("kind", kind), ("phi_seed", seed))
    ):
        curve.insert(0, column, value)
    return curve


def stitch_seeds(
    f: ModelHandle,
    g: ModelHandle,
    layer_f: int,
    layer_g: int,
    kind: str,
    train_tokens,
    eval_tokens,
    settings: StitchSettings | Mapping[str, Any] | None = None,
    *,
    phi_seeds: int | Sequence[int] = 1,
    train_features: torch.Tensor | None = None,
    eval_features: torch.Tensor | None = None,
    **kwargs: Any,
) -> list[StitchResult]:
    """:func:`stitch` once per φ seed (trained in lockstep; identity stitching: one result): :func:`stitch_grid`
    of one stitch."""
    return stitch_grid(
        f,
        g,
        [(layer_f, layer_g, kind)],
        train_tokens,
        eval_tokens,
        settings,
        phi_seeds=phi_seeds,
        train_features=None if train_features is None else {int(layer_f): train_features},
        eval_features=None if eval_features is None else {int(layer_f): eval_features},
        **kwargs,
    )


def stitch(
    f: ModelHandle,
    g: ModelHandle,
    layer_f: int,
    layer_g: int,
    kind: str,
    train_tokens,
    eval_tokens,
    settings: StitchSettings | Mapping[str, Any] | None = None,
    *,
    train_mask=None,
    eval_mask=None,
    train_labels=None,
    eval_labels=None,
    train_features: torch.Tensor | None = None,
    eval_features: torch.Tensor | None = None,
    masking: MaskingTokens | None = None,
    special_ids: Iterable[int] | None = None,
    progress: bool = True,
) -> StitchResult:
    """Stitches f's residual stream after ``layer_f`` into g's after ``layer_g`` with a φ of ``kind``
    (``identity`` | ``affine`` | ``affine_ln``), trains φ on ``train_tokens`` (not for identity; φ seed 0: the
    data order of ``settings.seed``) and evaluates on the disjoint ``eval_tokens``.

    Tokens: ``(n, seq)`` arrays or :class:`~thinkalike.stitching.data.TokenSplit` s, with optional masks and,
    for classifiers, labels. ``train_features`` / ``eval_features``: f's residuals after ``layer_f`` for those
    sequences if already at hand (an activation store), else computed once here. ``masking``: mask/special
    token ids for the masked objective (default: g's tokenizer). ``special_ids``: the token ids never scored as
    targets when ``settings.exclude_special_targets`` (default: the tokenizer's special tokens,
    :func:`~thinkalike.stitching.data.excluded_target_ids`). Models are frozen and in eval mode during the
    call (restored after); φ and the features live on g's device.
    """
    return stitch_seeds(
        f,
        g,
        layer_f,
        layer_g,
        kind,
        train_tokens,
        eval_tokens,
        settings,
        phi_seeds=1,
        train_mask=train_mask,
        eval_mask=eval_mask,
        train_labels=train_labels,
        eval_labels=eval_labels,
        train_features=train_features,
        eval_features=eval_features,
        masking=masking,
        special_ids=special_ids,
        progress=progress,
    )[0]


def evaluate_saved(
    phi_config: Mapping[str, Any],
    phi_state: Mapping[str, torch.Tensor],
    f: ModelHandle,
    g: ModelHandle,
    layer_f: int,
    layer_g: int,
    eval_tokens,
    settings: StitchSettings | Mapping[str, Any] | None = None,
    *,
    eval_mask=None,
    eval_labels=None,
    eval_features: torch.Tensor | None = None,
    masking: MaskingTokens | None = None,
    special_ids: Iterable[int] | None = None,
) -> StitchEvaluation:
    """Re-evaluates a saved φ (``phi_config``, ``phi_state``; any φ seed) on an evaluation split exactly as
    :func:`stitch` did (same settings → same batches, masking, targets and bootstrap; ``special_ids`` as given
    to :func:`stitch`, default the tokenizer's special tokens)."""
    settings = _settings(settings)
    evaluation = TokenSplit.of(eval_tokens, eval_mask, eval_labels, what="evaluation tokens")
    check_stitch(f, g, layer_f, layer_g, phi_config["kind"], settings)
    objective = resolve_objective(settings.objective, g, evaluation.labels is not None)
    if objective == "masked":
        masking = masking_tokens(g, masking)
    exclude_ids = (
        frozenset()
        if objective == "label"
        else excluded_target_ids(f, g, settings.exclude_special_targets, special_ids)
    )
    phi = load_stitch_layer(phi_config, phi_state).to(g.device)
    with frozen(f.module, g.module):
        prepared = prepare_split(
            f,
            layer_f,
            evaluation,
            objective,
            settings,
            device=g.device,
            masking=masking,
            seed=settings.seed + 1,
            features=eval_features,
            what="evaluation tokens",
            exclude_ids=exclude_ids,
        )
        return evaluate_stitch(
            phi,
            f,
            g,
            layer_g,
            prepared,
            objective,
            batch_size=settings.eval_batch_size,
            n_bootstrap=settings.n_bootstrap,
            level=settings.ci_level,
            seed=settings.seed,
        )


def scored_targets(
    f: ModelHandle,
    g: ModelHandle,
    eval_tokens,
    settings: StitchSettings | Mapping[str, Any] | None = None,
    *,
    eval_mask=None,
    masking: MaskingTokens | None = None,
    special_ids: Iterable[int] | None = None,
) -> np.ndarray:
    """Which tokens of the evaluation sequences :func:`stitch` scores as targets, ``(n, seq)`` 0/1: for the
    causal objective, 1 at a real position t ≥ 1 whose token is not excluded (it is predicted from position
    t − 1); for the masked objective, 1 at the selected positions. Its sum is the evaluation's ``n_targets``.
    (The ``label`` objective scores labels, not tokens: not for it.)"""
    settings = _settings(settings)
    evaluation = TokenSplit.of(eval_tokens, eval_mask, what="evaluation tokens")
    objective = resolve_objective(settings.objective, g, False)
    if objective == "masked":
        masking = masking_tokens(g, masking)
    exclude_ids = excluded_target_ids(f, g, settings.exclude_special_targets, special_ids)
    _, targets = targets_for(
        evaluation,
        objective,
        masking=masking,
        mask_probability=settings.mask_probability,
        seed=settings.seed + 1,
        exclude_ids=exclude_ids,
    )
    scored = targets != IGNORE
    if objective == "causal":
        scored[:, 0] = False
    return scored.numpy().astype(np.int64)


def seed_summary(results: Sequence[StitchResult]) -> dict[str, Any]:
    """The φ-seed columns of one stitch's row from its results (one per φ seed, in seed order): ``n_phi_seeds``,
    ``phi_seeds`` and ``penalty_seeds`` (JSON lists: the seeds and each seed's held-out penalty),
    ``penalty_seed_mean`` (the mean over seeds ``P̄ = (1/S) Σ_k P_k``), ``penalty_seed_std`` (the sample
    standard deviation across seeds, ``sqrt(Σ_k (P_k − P̄)² / (S − 1))``; 0 for identity stitching, which
    trains nothing; NaN for a trained stitch with one seed: its training variability was not measured),
    ``penalty_seed_min`` and ``penalty_seed_max``. This spread measures φ's training variability (data
    order); the evaluation-bootstrap interval (``penalty_ci_low`` / ``_high``, of the first seed) measures
    the finite evaluation set — they answer different questions and are reported side by side."""
    if not results:
        raise ValueError("a stitch without results")
    keys = {(r.f, r.g, r.layer_f, r.layer_g, r.kind) for r in results}
    if len(keys) != 1:
        raise ValueError(f"the seeds of one stitch were expected, got stitches {sorted(keys)}")
    penalties = np.array([r.penalty for r in results], dtype=np.float64)
    return {
        "n_phi_seeds": len(results),
        "phi_seeds": json.dumps([int(r.phi_seed) for r in results]),
        "penalty_seeds": json.dumps([float(p) for p in penalties]),
        "penalty_seed_mean": float(penalties.mean()),
        "penalty_seed_std": (
            float(penalties.std(ddof=1))
            if len(penalties) > 1
            else 0.0
            if results[0].kind == "identity"
            else float("nan")
        ),
        "penalty_seed_min": float(penalties.min()),
        "penalty_seed_max": float(penalties.max()),
    }


def group_seeds(results: Sequence[StitchResult]) -> list[list[StitchResult]]:
    """``results`` (of :func:`stitch_grid`) grouped by stitch ``(layer_f, layer_g, kind)``, in order."""
    groups: dict[tuple[int, int, str], list[StitchResult]] = {}
    for result in results:
        groups.setdefault((result.layer_f, result.layer_g, result.kind), []).append(result)
    return list(groups.values())
