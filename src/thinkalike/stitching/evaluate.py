"""Evaluating a stitch on held-out tokens: stitched loss, g's and f's own losses, penalty and its CI.

On the evaluation split, in batches ``b`` of ``eval_batch_size`` sequences with ``n_b`` scored
targets (for the causal objective: the next tokens of the sequences that are real and, with
``exclude_special_targets``, not special tokens — :func:`~thinkalike.stitching.data.targets_for`),
the losses are token-weighted means of per-target cross-entropy:

* stitched loss ``L_s = Σ_b S_b / Σ_b n_b`` with ``S_b`` the summed loss of ``g_{>m} ∘ φ ∘ f_{≤l}``;
* g's own loss ``L_g = Σ_b G_b / Σ_b n_b`` from g's plain forward pass (``ModelHandle.logits``,
  an independent path from the tail the stitch runs), f's own loss ``L_f`` likewise from f;
* penalty ``P = L_s − L_g = Σ_b (S_b − G_b) / Σ_b n_b``, i.e. over the scored targets T,
  ``P = (1/|T|) Σ_{t∈T} −log p_{g∘φ∘f}(t | context) − (1/|T|) Σ_{t∈T} −log p_g(t | context)``
  (``n_targets = |T|``).

Confidence interval: a paired percentile bootstrap over evaluation batches — ``n_bootstrap``
resamples ``B*`` of the batches with replacement (seeded), ``P* = Σ_{b∈B*} (S_b − G_b) / Σ_{b∈B*} n_b``,
and the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of ``P*``. With one batch the interval
is the point.

Classifiers (the ``label`` objective) also have an accuracy penalty (:func:`evaluate_stitch_accuracy`):
with ``C_b`` the stitched model's and ``K_b`` g's correct predictions (``argmax`` = label) in batch ``b``
of ``n_b`` sequences, accuracy ``A = Σ_b C_b / Σ_b n_b`` and penalty ``P_acc = A_g − A_s =
Σ_b (K_b − C_b) / Σ_b n_b`` (Brown et al. 2023 report stitching on NLI this way), with the same paired
batch bootstrap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from thinkalike.models.handle import ModelHandle
from thinkalike.stitching.data import PreparedSplit, logits_fit, loss_sum, target_count
from thinkalike.stitching.layers import StitchLayer
from thinkalike.stitching.train import stitched_logits

LogitsFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class BatchLosses:
    """Summed loss ``sums`` and scored-target counts ``counts`` per evaluation batch (float64 / int64 arrays)."""

    sums: np.ndarray
    counts: np.ndarray

    @property
    def mean(self) -> float:
        """The token-weighted mean ``Σ sums / Σ counts``."""
        total = int(self.counts.sum())
        return float(self.sums.sum() / total) if total else float("nan")


def batch_losses(
    logits_fn: LogitsFn, split: PreparedSplit, objective: str, batch_size: int, max_batches: int | None = None
) -> BatchLosses:
    """Per-batch summed loss of ``logits_fn(features, input_ids, attention_mask)`` over consecutive batches of
    ``split`` (the first ``max_batches`` only, if given), under ``no_grad``."""
    sums, counts = [], []
    with torch.no_grad():
        for number, start in enumerate(range(0, len(split), batch_size)):
            if max_batches is not None and number >= max_batches:
                break
            index = torch.arange(start, min(start + batch_size, len(split)), device=split.input_ids.device)
            features, ids, mask, targets = split.batch(index)
            logits = logits_fn(features, ids, mask)
            sums.append(loss_sum(logits, targets, objective))
            counts.append(target_count(targets, objective))
    return BatchLosses(torch.stack(sums).double().cpu().numpy(), torch.stack(counts).cpu().numpy())


def stitched_batch_losses(
    phi: StitchLayer,
    g: ModelHandle,
    layer_g: int,
    split: PreparedSplit,
    objective: str,
    batch_size: int,
    max_batches: int | None = None,
) -> BatchLosses:
    """Per-batch losses of the stitched model (φ in eval mode)."""
    phi.eval()
    return batch_losses(
        lambda x, ids, mask: stitched_logits(phi, g, layer_g, x, ids, mask), split, objective, batch_size, max_batches
    )


def lockstep_batch_losses(
    phis: Sequence[StitchLayer],
    g: ModelHandle,
    layer_g: int,
    split: PreparedSplit,
    objective: str,
    batch_size: int,
    max_batches: int | None = None,
    fuse: bool = True,
) -> list[BatchLosses]:
    """:func:`stitched_batch_losses` of several φ's of one stitch (its φ seeds) on the same batches; ``fuse``: g's
    tail run once per batch on the φ's outputs concatenated along the batch (``len(phis) × batch_size`` rows;
    rows do not interact, so each φ's losses are its own, to float round-off). Unfused, or with one φ, exactly
    :func:`stitched_batch_losses` of each."""
    if len(phis) == 1 or not fuse:
        return [stitched_batch_losses(phi, g, layer_g, split, objective, batch_size, max_batches) for phi in phis]
    for phi in phis:
        phi.eval()
    sums: list[list[torch.Tensor]] = [[] for _ in phis]
    counts = []
    with torch.no_grad():
        for number, start in enumerate(range(0, len(split), batch_size)):
            if max_batches is not None and number >= max_batches:
                break
            index = torch.arange(start, min(start + batch_size, len(split)), device=split.input_ids.device)
            features, ids, mask, targets = split.batch(index)
            count = len(phis)
            logits = g.logits_from_layer(
                torch.cat([phi(features) for phi in phis]), layer_g, ids.repeat(count, 1), mask.repeat(count, 1)
            ).split(len(index))
            for which, part in enumerate(logits):
                sums[which].append(loss_sum(part, targets, objective))
            counts.append(target_count(targets, objective))
    counted = torch.stack(counts).cpu().numpy()
    return [BatchLosses(torch.stack(values).double().cpu().numpy(), counted) for values in sums]


def own_batch_losses(
    handle: ModelHandle, split: PreparedSplit, objective: str, batch_size: int, max_batches: int | None = None
) -> BatchLosses:
    """Per-batch losses of ``handle``'s own plain forward pass on the split's inputs and targets."""
    device = handle.device
    return batch_losses(
        lambda _x, ids, mask: handle.logits(ids.to(device), mask.to(device)).to(split.targets.device),
        split,
        objective,
        batch_size,
        max_batches,
    )


def own_loss_unavailable(handle: ModelHandle, split: PreparedSplit, objective: str) -> str | None:
    """Why ``handle``'s own loss cannot be computed under ``objective`` on ``split`` (no head, another objective,
    logits that do not fit the targets), or ``None``."""
    if not handle.has_unembedding:
        return f"model {handle.name!r} has no LM head"
    if objective in ("causal", "masked") and handle.is_causal != (objective == "causal"):
        kind = "causal" if handle.is_causal else "masked"
        return f"model {handle.name!r} is a {kind} model, not trained on the {objective} objective"
    with torch.no_grad():
        ids, mask = split.input_ids[:1].to(handle.device), split.attention_mask[:1].to(handle.device)
        logits = handle.logits(ids, mask)
    if not logits_fit(logits, split.targets[:1].to(logits.device), objective):
        return f"model {handle.name!r}'s logits {tuple(logits.shape)} do not fit the {objective} targets"
    return None


def paired_bootstrap_ci(
    stitched: BatchLosses, own: BatchLosses, *, n_bootstrap: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of ``P = Σ (S_b − G_b) / Σ n_b`` over batch resamples (module docstring)."""
    diff = stitched.sums - own.sums
    counts = stitched.counts.astype(np.float64)
    n = diff.shape[0]
    if n == 1:
        point = float(diff[0] / counts[0])
        return point, point
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(n_bootstrap, n))
    resampled = diff[draws].sum(axis=1) / np.maximum(counts[draws].sum(axis=1), 1.0)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(resampled, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class StitchEvaluation:
    """Held-out losses of one stitch (module docstring); ``per_batch`` holds ``n_targets``, ``stitched_sum``,
    ``g_sum``, ``f_sum`` per evaluation batch. ``f_loss`` is NaN where f's own loss does not exist
    (``f_loss_note`` says why)."""

    stitched_loss: float
    g_loss: float
    f_loss: float
    penalty: float
    penalty_ci_low: float
    penalty_ci_high: float
    ci_level: float
    n_batches: int
    n_targets: int
    per_batch: pd.DataFrame
    f_loss_note: str = ""


def evaluate_stitch(
    phi: StitchLayer,
    f: ModelHandle,
    g: ModelHandle,
    layer_g: int,
    split: PreparedSplit,
    objective: str,
    *,
    batch_size: int = 32,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    g_own: BatchLosses | None = None,
    f_own: tuple[BatchLosses | None, str] | None = None,
) -> StitchEvaluation:
    """Evaluates φ on ``split`` (f's features already in it): stitched, g's and f's own losses, penalty, CI.
    ``g_own``: g's per-batch losses on this split if already computed; ``f_own``: :func:`own_losses_or_note`
    of f on this split if already computed (neither depends on φ or the layers)."""
    stitched = stitched_batch_losses(phi, g, layer_g, split, objective, batch_size)
    if g_own is None:
        g_own = own_batch_losses(g, split, objective, batch_size)
    f_losses, note = own_losses_or_note(f, split, objective, batch_size) if f_own is None else f_own
    low, high = paired_bootstrap_ci(stitched, g_own, n_bootstrap=n_bootstrap, level=level, seed=seed)
    per_batch = pd.DataFrame(
        {
            "batch": np.arange(len(stitched.counts)),
            "n_targets": stitched.counts,
            "stitched_sum": stitched.sums,
            "g_sum": g_own.sums,
            "f_sum": f_losses.sums if f_losses is not None else np.nan,
        }
    )
    return StitchEvaluation(
        stitched_loss=stitched.mean,
        g_loss=g_own.mean,
        f_loss=f_losses.mean if f_losses is not None else float("nan"),
        penalty=float((stitched.sums - g_own.sums).sum() / max(int(stitched.counts.sum()), 1)),
        penalty_ci_low=low,
        penalty_ci_high=high,
        ci_level=level,
        n_batches=len(stitched.counts),
        n_targets=int(stitched.counts.sum()),
        per_batch=per_batch,
        f_loss_note=note or "",
    )


def own_losses_or_note(
    handle: ModelHandle, split: PreparedSplit, objective: str, batch_size: int
) -> tuple[BatchLosses | None, str]:
    """``(handle's own per-batch losses, "")``, or ``(None, why not)`` (:func:`own_loss_unavailable`)."""
    note = own_loss_unavailable(handle, split, objective)
    return (None, note) if note else (own_batch_losses(handle, split, objective, batch_size), "")


# --------------------------------------------------------------------------- accuracy (classifiers)


def batch_correct(logits_fn: LogitsFn, split: PreparedSplit, batch_size: int) -> BatchLosses:
    """Per-batch number of sequences whose ``argmax`` class of ``logits_fn(features, input_ids, attention_mask)``
    ``(batch, n_classes)`` equals the label (``split.targets``, the ``label`` objective), as a
    :class:`BatchLosses` whose ``sums`` are the correct counts and ``counts`` the sequences: its ``mean`` is the
    accuracy ``Σ correct / n``."""
    sums, counts = [], []
    with torch.no_grad():
        for start in range(0, len(split), batch_size):
            index = torch.arange(start, min(start + batch_size, len(split)), device=split.input_ids.device)
            features, ids, mask, targets = split.batch(index)
            logits = logits_fn(features, ids, mask)
            if logits.ndim != 2 or tuple(targets.shape) != (logits.shape[0],):
                raise ValueError(
                    f"accuracy needs (batch, n_classes) logits and one label per sequence, got logits "
                    f"{tuple(logits.shape)} and labels {tuple(targets.shape)}"
                )
            sums.append((logits.argmax(dim=-1) == targets.to(logits.device)).sum())
            counts.append(torch.tensor(int(targets.shape[0])))
    return BatchLosses(torch.stack(sums).double().cpu().numpy(), torch.stack(counts).cpu().numpy())


def own_batch_correct(handle: ModelHandle, split: PreparedSplit, batch_size: int) -> BatchLosses:
    """Per-batch correct counts of ``handle``'s own plain forward pass (:func:`batch_correct`)."""
    device = handle.device
    return batch_correct(lambda _x, ids, mask: handle.logits(ids.to(device), mask.to(device)), split, batch_size)


@dataclass(frozen=True)
class StitchAccuracy:
    """Accuracy of a stitched classifier against g's own on one evaluation split: ``penalty`` = g's accuracy −
    the stitched model's (positive: stitching costs accuracy), with its paired percentile-bootstrap interval
    over evaluation batches (:func:`paired_bootstrap_ci` with g's correct counts in the place of the stitched
    losses: ``P* = Σ_{b∈B*} (G_b − S_b) / Σ_{b∈B*} n_b``)."""

    stitched_accuracy: float
    g_accuracy: float
    penalty: float
    penalty_ci_low: float
    penalty_ci_high: float
    ci_level: float
    n_batches: int
    n_sequences: int


def evaluate_stitch_accuracy(
    phi: StitchLayer,
    g: ModelHandle,
    layer_g: int,
    split: PreparedSplit,
    *,
    batch_size: int = 32,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    g_correct: BatchLosses | None = None,
) -> StitchAccuracy:
    """Accuracy of ``g_{>m} ∘ φ ∘ f_{≤l}`` (f's features already in ``split``, label targets) against g's own, the
    accuracy penalty and its CI (:class:`StitchAccuracy`). ``g_correct``: g's per-batch correct counts on this
    split (same ``batch_size``) if already computed — they do not depend on f or the layer."""
    phi.eval()
    stitched = batch_correct(lambda x, ids, mask: stitched_logits(phi, g, layer_g, x, ids, mask), split, batch_size)
    if g_correct is None:
        g_correct = own_batch_correct(g, split, batch_size)
    if len(g_correct.counts) != len(stitched.counts) or not np.array_equal(g_correct.counts, stitched.counts):
        raise ValueError(
            "g's correct counts were computed on other batches than the stitched model's "
            f"({len(g_correct.counts)} vs {len(stitched.counts)} batches)"
        )
    low, high = paired_bootstrap_ci(g_correct, stitched, n_bootstrap=n_bootstrap, level=level, seed=seed)
    n = int(stitched.counts.sum())
    return StitchAccuracy(
        stitched_accuracy=stitched.mean,
        g_accuracy=g_correct.mean,
        penalty=float((g_correct.sums - stitched.sums).sum() / max(n, 1)),
        penalty_ci_low=low,
        penalty_ci_high=high,
        ci_level=level,
        n_batches=len(stitched.counts),
        n_sequences=n,
    )
