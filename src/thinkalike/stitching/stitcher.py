"""One stitch end to end: ``g_{>m} ∘ φ ∘ f_{≤l}`` — checks, f's features, φ's initialisation, training,
held-out evaluation — as one call a pipeline node can make (:func:`stitch`).

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

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.models.handle import ModelHandle
from thinkalike.models.training import MaskingTokens
from thinkalike.stitching.data import (
    PreparedSplit,
    TokenSplit,
    check_disjoint,
    check_features,
    layer_features,
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
    own_batch_losses,
    stitched_batch_losses,
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
    StitchDivergedError,
    StitchSettings,
    StitchTrainer,
    frozen,
)

#: Value columns of the learning curve (after ``f``, ``layer_f``, ``g``, ``layer_g``, ``kind`` and ``step``).
CURVE_VALUES: tuple[str, ...] = ("train_loss", "lr", "heldout_loss", "heldout_penalty")

#: Columns of :meth:`StitchResult.row` (the penalty table), in order.
ROW_FIELDS: tuple[str, ...] = (
    "f", "g", "f_spec", "g_spec", "layer_f", "layer_g", "kind", "init", "objective",
    "stitched_loss", "g_loss", "f_loss", "penalty", "penalty_ci_low", "penalty_ci_high", "ci_level",
    "initial_heldout_penalty", "final_train_loss", "n_eval_batches", "n_eval_targets", "n_train_sequences",
    "steps", "warmup_steps", "lr_scale", "tokens_per_step", "seconds", "f_loss_note",
)


def describe_pair(f: ModelHandle, g: ModelHandle, layer_f: int, layer_g: int, kind: str) -> str:
    """``'f'@l -> 'g'@m (kind)``, the name of a stitch in messages."""
    return f"{f.name!r}@{layer_f} -> {g.name!r}@{layer_g} ({kind})"


def check_stitch(f: ModelHandle, g: ModelHandle, layer_f: int, layer_g: int, kind: str,
                 settings: StitchSettings | None = None) -> str:
    """Raises :class:`StitchConfigError` for a stitch that cannot run; returns the initialisation it will use.
    Cheap (no forward pass): a pipeline can validate its whole configuration with it first."""
    settings = settings or StitchSettings()
    check_kind(kind)
    for handle, layer, which in ((f, layer_f, "f"), (g, layer_g, "g")):
        if isinstance(layer, bool) or int(layer) != layer or not 0 <= layer <= handle.n_layers:
            raise StitchConfigError(f"stitching layer {layer!r} of {which} = model {handle.name!r} is out of range "
                                    f"0..{handle.n_layers} (0 = embeddings, {handle.n_layers} = its last block)")
    if kind == "identity" and f.d_model != g.d_model:
        raise StitchConfigError(f"identity stitching needs equal widths: model {f.name!r} has d_model {f.d_model}, "
                                f"model {g.name!r} has d_model {g.d_model}; use kind 'affine' or 'affine_ln'")
    mismatch = token_stream_mismatch(f, g)
    if mismatch:
        raise StitchConfigError(mismatch)
    if not g.has_unembedding:
        raise StitchConfigError(f"model {g.name!r} (g) has no head, so the stitched model has no output to score")
    return resolve_init(kind, settings.init, f.d_model, g.d_model)


@dataclass
class StitchResult:
    """Everything one stitch produced. :meth:`row` is its penalty-table row (:data:`ROW_FIELDS`);
    ``curve`` the learning curve (empty for identity stitching); ``per_batch`` the evaluation batches;
    ``phi_config`` + ``phi_state`` the trained φ (:meth:`load_phi`)."""

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
        """The penalty-table row: names, layers, kind, losses, penalty with its CI, training facts."""
        ev = self.evaluation
        trained = self.curve[self.curve["step"] > 0] if len(self.curve) else self.curve
        values = {
            "f": self.f, "g": self.g, "f_spec": self.f_spec, "g_spec": self.g_spec,
            "layer_f": self.layer_f, "layer_g": self.layer_g, "kind": self.kind, "init": self.init,
            "objective": self.objective, "stitched_loss": ev.stitched_loss, "g_loss": ev.g_loss,
            "f_loss": ev.f_loss, "penalty": ev.penalty, "penalty_ci_low": ev.penalty_ci_low,
            "penalty_ci_high": ev.penalty_ci_high, "ci_level": ev.ci_level,
            "initial_heldout_penalty": float(self.curve["heldout_penalty"].iloc[0]) if len(self.curve) else np.nan,
            "final_train_loss": float(trained["train_loss"].iloc[-1]) if len(trained) else np.nan,
            "n_eval_batches": ev.n_batches, "n_eval_targets": ev.n_targets,
            "n_train_sequences": self.n_train_sequences,
            "steps": self.settings.steps if self.kind != "identity" else 0,
            "warmup_steps": self.settings.warmup_steps, "lr_scale": self.settings.lr_scale,
            "tokens_per_step": self.tokens_per_step, "seconds": self.seconds, "f_loss_note": ev.f_loss_note,
        }
        return {key: values[key] for key in ROW_FIELDS}


def prepare_split(f: ModelHandle, layer_f: int, split: TokenSplit, objective: str, settings: StitchSettings, *,
                  device: torch.device, masking: MaskingTokens | None, seed: int,
                  features: torch.Tensor | None = None, what: str = "tokens",
                  batch_size: int | None = None) -> PreparedSplit:
    """Model inputs, targets and f's features after ``layer_f`` for ``split``, on ``device``, computed in batches
    of ``batch_size`` sequences (default ``settings.eval_batch_size``). ``features`` (precomputed, e.g.
    :func:`~thinkalike.stitching.data.features_from_store`) are used as given — not for the masked objective,
    whose features must be those of the corrupted inputs."""
    input_ids, targets = targets_for(split, objective, masking=masking, mask_probability=settings.mask_probability,
                                     seed=seed)
    if int(target_count(targets, objective)) == 0:
        raise StitchConfigError(f"the {what} have no scored targets for the {objective} objective")
    dtype = FEATURE_DTYPES[settings.feature_dtype]
    if features is None:
        features = layer_features(f, layer_f, input_ids, split.attention_mask,
                                  batch_size=batch_size or settings.eval_batch_size, device=device, dtype=dtype)
    else:
        if objective == "masked":
            raise StitchConfigError("precomputed features cannot be used with the masked objective: f must see the "
                                    "corrupted inputs, which are drawn here")
        features = check_features(torch.as_tensor(features), split, f.d_model, f"precomputed {what} features")
        features = features.to(device=device, dtype=dtype)
    return PreparedSplit(input_ids.to(device), split.attention_mask.to(device), targets.to(device), features)


def _init_pairs(prepared: PreparedSplit, g: ModelHandle, layer_g: int, max_tokens: int,
                batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Rows (f's feature, g's residual after ``layer_g``) of the real training tokens, up to ``max_tokens``."""
    taken = 0
    with torch.no_grad():
        for start in range(0, len(prepared), batch_size):
            if taken >= max_tokens:
                return
            index = torch.arange(start, min(start + batch_size, len(prepared)), device=prepared.input_ids.device)
            features, ids, mask, _ = prepared.batch(index)
            target = g.residual_streams(ids.to(g.device), mask.to(g.device))[layer_g]
            real = mask.bool()
            x, y = features[real], target.to(features.device)[real]
            keep = min(x.shape[0], max_tokens - taken)
            taken += keep
            yield x[:keep], y[:keep]


def stitch(f: ModelHandle, g: ModelHandle, layer_f: int, layer_g: int, kind: str, train_tokens, eval_tokens,
           settings: StitchSettings | Mapping[str, Any] | None = None, *, train_mask=None, eval_mask=None,
           train_labels=None, eval_labels=None, train_features: torch.Tensor | None = None,
           eval_features: torch.Tensor | None = None, masking: MaskingTokens | None = None,
           progress: bool = True) -> StitchResult:
    """Stitches f's residual stream after ``layer_f`` into g's after ``layer_g`` with a φ of ``kind``
    (``identity`` | ``affine`` | ``affine_ln``), trains φ on ``train_tokens`` (not for identity) and evaluates
    on the disjoint ``eval_tokens``.

    Tokens: ``(n, seq)`` arrays or :class:`~thinkalike.stitching.data.TokenSplit` s, with optional masks and,
    for classifiers, labels. ``train_features`` / ``eval_features``: f's residuals after ``layer_f`` for those
    sequences if already at hand (an activation store), else computed once here. ``masking``: mask/special
    token ids for the masked objective (default: g's tokenizer). Models are frozen and in eval mode during the
    call (restored after); φ and the features live on g's device.
    """
    started = time.perf_counter()
    settings = settings if isinstance(settings, StitchSettings) else StitchSettings.from_dict(settings)
    train = TokenSplit.of(train_tokens, train_mask, train_labels, what="training tokens")
    evaluation = TokenSplit.of(eval_tokens, eval_mask, eval_labels, what="evaluation tokens")
    init = check_stitch(f, g, layer_f, layer_g, kind, settings)
    if (train.labels is None) != (evaluation.labels is None):
        raise StitchConfigError("labels must be given for both the training and the evaluation tokens, or neither")
    objective = resolve_objective(settings.objective, g, train.labels is not None)
    if objective == "masked":
        masking = masking_tokens(g, masking)
    check_disjoint(train, evaluation)
    label = describe_pair(f, g, layer_f, layer_g, kind)
    device = g.device
    with frozen(f.module, g.module):
        prepared_eval = prepare_split(f, layer_f, evaluation, objective, settings, device=device, masking=masking,
                                      seed=settings.seed + 1, features=eval_features, what="evaluation tokens")
        phi = build_stitch_layer(kind, f.d_model, g.d_model).to(device)
        g_own = own_batch_losses(g, prepared_eval, objective, settings.eval_batch_size)
        curve = pd.DataFrame({"step": pd.Series(dtype="int64"),
                              **{c: pd.Series(dtype="float64") for c in CURVE_VALUES}})
        if kind != "identity":
            # no-grad forward passes over the training tokens: batches as large as training's or evaluation's
            forward_batch = max(settings.batch_size, settings.eval_batch_size)
            prepared_train = prepare_split(f, layer_f, train, objective, settings, device=device, masking=masking,
                                           seed=settings.seed, features=train_features, what="training tokens",
                                           batch_size=forward_batch)
            if init == "lstsq":
                assert isinstance(phi, AffineStitch)
                initialise_least_squares(phi, _init_pairs(prepared_train, g, layer_g, settings.init_max_tokens,
                                                          forward_batch))
            curve_batches = settings.curve_eval_batches
            g_curve = BatchLosses(g_own.sums[:curve_batches], g_own.counts[:curve_batches]).mean

            def heldout() -> float:
                return stitched_batch_losses(phi, g, layer_g, prepared_eval, objective, settings.eval_batch_size,
                                             curve_batches).mean

            trainer = StitchTrainer(phi, g, layer_g, prepared_train, objective, settings, label)
            curve = trainer.run(heldout, g_curve, progress=progress)
            tokens_per_step = trainer.sequences_per_step * train.seq_len
        else:
            tokens_per_step = 0
        result = evaluate_stitch(phi, f, g, layer_g, prepared_eval, objective, batch_size=settings.eval_batch_size,
                                 n_bootstrap=settings.n_bootstrap, level=settings.ci_level, seed=settings.seed,
                                 g_own=g_own)
    if not math.isfinite(result.stitched_loss):
        raise StitchDivergedError(f"stitching {label} diverged: the evaluation loss is {result.stitched_loss}; try "
                                  f"a smaller lr_scale (now {settings.lr_scale})")
    for column, value in reversed((("f", f.name), ("layer_f", layer_f), ("g", g.name), ("layer_g", layer_g),
                                   ("kind", kind))):
        curve.insert(0, column, value)
    return StitchResult(
        f=f.name, g=g.name, f_spec=f.spec, g_spec=g.spec, layer_f=int(layer_f), layer_g=int(layer_g), kind=kind,
        init=init, objective=objective, evaluation=result, curve=curve, phi_config=phi.config(),
        phi_state={k: v.detach().cpu().clone().contiguous() for k, v in phi.state_dict().items()},
        settings=settings, n_train_sequences=len(train), tokens_per_step=tokens_per_step,
        seconds=time.perf_counter() - started)


def evaluate_saved(phi_config: Mapping[str, Any], phi_state: Mapping[str, torch.Tensor], f: ModelHandle,
                   g: ModelHandle, layer_f: int, layer_g: int, eval_tokens,
                   settings: StitchSettings | Mapping[str, Any] | None = None, *, eval_mask=None, eval_labels=None,
                   eval_features: torch.Tensor | None = None, masking: MaskingTokens | None = None
                   ) -> StitchEvaluation:
    """Re-evaluates a saved φ (``phi_config``, ``phi_state``) on an evaluation split exactly as :func:`stitch`
    did (same settings → same batches, masking and bootstrap)."""
    settings = settings if isinstance(settings, StitchSettings) else StitchSettings.from_dict(settings)
    evaluation = TokenSplit.of(eval_tokens, eval_mask, eval_labels, what="evaluation tokens")
    check_stitch(f, g, layer_f, layer_g, phi_config["kind"], settings)
    objective = resolve_objective(settings.objective, g, evaluation.labels is not None)
    if objective == "masked":
        masking = masking_tokens(g, masking)
    phi = load_stitch_layer(phi_config, phi_state).to(g.device)
    with frozen(f.module, g.module):
        prepared = prepare_split(f, layer_f, evaluation, objective, settings, device=g.device, masking=masking,
                                 seed=settings.seed + 1, features=eval_features, what="evaluation tokens")
        return evaluate_stitch(phi, f, g, layer_g, prepared, objective, batch_size=settings.eval_batch_size,
                               n_bootstrap=settings.n_bootstrap, level=settings.ci_level, seed=settings.seed)
