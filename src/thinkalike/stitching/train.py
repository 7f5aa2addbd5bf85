"""Training a stitching layer φ with everything else frozen (Brown et al. 2023 §3 and appendix C.1,
which borrow tuned-lens's recipe).

Optimiser: SGD with Nesterov momentum β = 0.9 and torch learning rate ``η = lr_scale · (1 − β)``
(tuned-lens's parametrisation: the momentum buffer sums ≈ 1/(1 − β) gradients, so ``lr_scale``
is the effective step size), weight decay 1e-3 on φ's affine deltas (see
:mod:`thinkalike.stitching.layers`: decay pulls φ toward its initial map), gradient-norm clip 1.0.

Schedule (:func:`learning_rate_factor`), for the update at step ``s`` of ``S`` with ``W`` warm-up
steps: ``η_s = η · s / W`` for ``s < W``, then ``η_s = η · (S − s) / (S − W)`` — transformers'
``get_linear_schedule_with_warmup`` as tuned-lens calls it, except that the decay ends at the end
of training (``s = S``); tuned-lens passes ``S − W`` as the length, so its rate reaches 0 at
``S − W`` and its last ``W`` steps do nothing.

Loss per step: the token-weighted mean cross-entropy of g's output over the step's sequences,
``Σ_b loss_sum_b / Σ_b n_b``, with ``ceil(tokens_per_step / seq)`` sequences per step run in
micro-batches of ``batch_size`` (gradients accumulate, each micro-batch backpropagates
``loss_sum_b / Σ n``, so the gradient equals the full step's). Sequences are drawn without
replacement from a seeded permutation of the training split, epoch after epoch.

Per micro-batch only this runs: a gather of f's precomputed features, φ, and g's blocks after
layer m with its final norm and head (``ModelHandle.logits_from_layer``), forward and backward;
g's parameters are frozen (``requires_grad`` off), so the backward pass computes activation
gradients only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.models.handle import ModelHandle
from thinkalike.models.training import progress_bar
from thinkalike.stitching.data import PreparedSplit, loss_sum, target_count
from thinkalike.stitching.layers import INITS, StitchConfigError, StitchLayer

FEATURE_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16,
                                          "bfloat16": torch.bfloat16, "float64": torch.float64}


class StitchDivergedError(RuntimeError):
    """The stitching loss became NaN/Inf; the message names the pair, the layers and the step."""


@dataclass(frozen=True)
class StitchSettings:
    """Stitching settings (defaults: Brown et al. / tuned-lens).

    ``steps``, ``warmup_steps``, ``lr_scale`` (torch lr = ``lr_scale · (1 − momentum)``), ``momentum``,
    ``weight_decay``, ``clip_grad_norm``: the optimiser (module docstring). ``tokens_per_step``:
    sequence positions per optimiser step (tuned-lens's default 2**18), run as micro-batches of
    ``batch_size`` sequences. ``eval_every``: held-out loss every so many steps on the first
    ``curve_eval_batches`` evaluation batches (of ``eval_batch_size`` sequences; the final
    evaluation uses them all). ``init``: φ's initial map (``auto`` | ``identity`` | ``lstsq``, see
    :mod:`thinkalike.stitching.layers`); the least-squares map is fitted on at most
    ``init_max_tokens`` real training tokens. ``objective``: ``auto`` | ``causal`` | ``masked`` |
    ``label`` (:mod:`thinkalike.stitching.data`); ``mask_probability`` for ``masked``.
    ``n_bootstrap`` resamples of the evaluation batches give the ``ci_level`` interval of the
    penalty. ``feature_dtype``: how f's precomputed features are held. ``seed``: batch order,
    masking, bootstrap.
    """

    steps: int = 2000
    warmup_steps: int = 200
    lr_scale: float = 1.0
    momentum: float = 0.9
    weight_decay: float = 1e-3
    clip_grad_norm: float = 1.0
    tokens_per_step: int = 2 ** 18
    batch_size: int = 32
    eval_batch_size: int = 32
    eval_every: int = 100
    curve_eval_batches: int = 4
    init: str = "auto"
    init_max_tokens: int = 65536
    objective: str = "auto"
    mask_probability: float = 0.15
    n_bootstrap: int = 1000
    ci_level: float = 0.95
    feature_dtype: str = "float32"
    seed: int = 0

    def __post_init__(self) -> None:
        positive = {"steps": self.steps, "tokens_per_step": self.tokens_per_step, "batch_size": self.batch_size,
                    "eval_batch_size": self.eval_batch_size, "eval_every": self.eval_every,
                    "curve_eval_batches": self.curve_eval_batches, "init_max_tokens": self.init_max_tokens,
                    "n_bootstrap": self.n_bootstrap}
        for name, value in positive.items():
            if int(value) != value or value < 1:
                raise StitchConfigError(f"stitching setting {name} must be a positive integer, got {value!r}")
        if int(self.warmup_steps) != self.warmup_steps or not 0 <= self.warmup_steps < self.steps:
            raise StitchConfigError(f"stitching warmup_steps ({self.warmup_steps}) must be in [0, steps) with steps = "
                                    f"{self.steps}: the warm-up must end before training does")
        if not self.lr_scale > 0 or not math.isfinite(self.lr_scale):
            raise StitchConfigError(f"stitching lr_scale must be a positive number, got {self.lr_scale!r}")
        if not 0 <= self.momentum < 1:
            raise StitchConfigError(f"stitching momentum must be in [0, 1), got {self.momentum!r}")
        if self.weight_decay < 0 or not self.clip_grad_norm > 0:
            raise StitchConfigError(f"stitching weight_decay must be >= 0 and clip_grad_norm > 0, got "
                                    f"{self.weight_decay!r}, {self.clip_grad_norm!r}")
        if self.init not in INITS:
            raise StitchConfigError(f"unknown stitching init {self.init!r}; known: {', '.join(INITS)}")
        if self.objective not in ("auto", "causal", "masked", "label"):
            raise StitchConfigError(f"unknown stitching objective {self.objective!r}; known: auto, causal, masked, "
                                    "label")
        if not 0 < self.mask_probability < 1 or not 0 < self.ci_level < 1:
            raise StitchConfigError(f"mask_probability and ci_level must be in (0, 1), got {self.mask_probability!r}, "
                                    f"{self.ci_level!r}")
        if self.feature_dtype not in FEATURE_DTYPES:
            raise StitchConfigError(f"feature_dtype must be one of {sorted(FEATURE_DTYPES)}, got "
                                    f"{self.feature_dtype!r}")

    @property
    def learning_rate(self) -> float:
        """The torch learning rate ``lr_scale · (1 − momentum)``."""
        return self.lr_scale * (1.0 - self.momentum)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> StitchSettings:
        """From a parameters dict; unknown keys raise :class:`StitchConfigError` naming them."""
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise StitchConfigError(f"unknown stitching setting(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def learning_rate_factor(step: int, steps: int, warmup_steps: int) -> float:
    """``η_s / η`` for the update at 0-based step ``s``: ``s / W`` during warm-up, then ``(S − s) / (S − W)``."""
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (steps - step) / (steps - warmup_steps))


@contextmanager
def frozen(*modules: torch.nn.Module) -> Iterator[None]:
    """Inside the block every parameter of ``modules`` has ``requires_grad=False`` and every submodule is in
    eval mode (no dropout); both are restored on exit."""
    unique = list({id(m): m for m in modules}.values())
    grads = [(p, p.requires_grad) for m in unique for p in m.parameters()]
    modes = [(sub, sub.training) for m in unique for sub in m.modules()]
    try:
        for p, _ in grads:
            p.requires_grad_(False)
        for m in unique:
            m.eval()
        yield
    finally:
        for p, flag in grads:
            p.requires_grad_(flag)
        for sub, flag in modes:
            sub.training = flag


def stitched_logits(phi: StitchLayer, g: ModelHandle, layer_g: int, features: torch.Tensor,
                    input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Logits of ``g_{>m} ∘ φ ∘ f_{≤l}`` given f's features after layer l: g's tail on ``φ(features)``."""
    return g.logits_from_layer(phi(features), layer_g, input_ids, attention_mask)


class StitchTrainer:
    """Trains ``phi`` (the only trainable module) between f's precomputed features and g's tail after ``layer_g``.

    ``train``: the prepared training split (features on g's device). ``label``: the pair and layers, for
    messages. Use :meth:`train_step` for one optimiser step (the benchmark does) or :meth:`run` for all.
    """

    def __init__(self, phi: StitchLayer, g: ModelHandle, layer_g: int, train: PreparedSplit, objective: str,
                 settings: StitchSettings, label: str = "stitch") -> None:
        self.phi, self.g, self.layer_g, self.train = phi, g, layer_g, train
        self.objective, self.settings, self.label = objective, settings, label
        decayed, undecayed = phi.decayed_parameters(), phi.undecayed_parameters()
        self.parameters = decayed + undecayed
        if not self.parameters:
            raise StitchConfigError(f"{label}: a {phi.kind} stitching layer has nothing to train")
        groups = [{"params": decayed, "weight_decay": settings.weight_decay}]
        if undecayed:
            groups.append({"params": undecayed, "weight_decay": 0.0})
        self.optimizer = torch.optim.SGD(groups, lr=settings.learning_rate, momentum=settings.momentum,
                                         nesterov=settings.momentum > 0)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: learning_rate_factor(s, settings.steps, settings.warmup_steps))
        seq = int(train.input_ids.shape[1])
        self.sequences_per_step = max(1, math.ceil(settings.tokens_per_step / seq))
        self._generator = torch.Generator().manual_seed(settings.seed)
        self._order = torch.empty(0, dtype=torch.long)
        self._device = train.input_ids.device

    def next_indices(self) -> torch.Tensor:
        """The next step's sequence indices (on the training device): a seeded permutation, epoch after epoch."""
        needed, parts = self.sequences_per_step, []
        while needed > 0:
            if self._order.numel() == 0:
                self._order = torch.randperm(len(self.train), generator=self._generator)
            take = self._order[:needed]
            self._order = self._order[needed:]
            parts.append(take)
            needed -= take.numel()
        return torch.cat(parts).to(self._device)

    def train_step(self, index: torch.Tensor) -> torch.Tensor:
        """One optimiser step on the sequences ``index``; returns the step's mean loss (0-d tensor, no sync)."""
        phi, train, objective = self.phi, self.train, self.objective
        total = target_count(train.targets[index], objective).clamp(min=1)
        summed = torch.zeros((), device=self._device)
        phi.train()
        for chunk in index.split(self.settings.batch_size):
            features, ids, mask, targets = train.batch(chunk)
            logits = stitched_logits(phi, self.g, self.layer_g, features, ids, mask)
            loss = loss_sum(logits, targets, objective)
            (loss / total).backward()
            summed = summed + loss.detach()
        torch.nn.utils.clip_grad_norm_(self.parameters, self.settings.clip_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return summed / total

    def _check(self, losses: torch.Tensor, first: int, last: int) -> None:
        window = losses[first:last]
        finite = torch.isfinite(window)
        if not bool(finite.all()):
            bad = first + int((~finite).nonzero()[0, 0])
            self._diverged(f"the training loss is {float(losses[bad])} at step {bad + 1} of {self.settings.steps}")

    def _diverged(self, what: str) -> None:
        raise StitchDivergedError(f"stitching {self.label} diverged: {what}; try a smaller lr_scale (now "
                                  f"{self.settings.lr_scale})")

    def run(self, heldout: Callable[[], float], heldout_reference: float = float("nan"), *,
            progress: bool = True) -> pd.DataFrame:
        """All ``settings.steps`` steps. ``heldout()`` returns the held-out stitched loss (evaluated before
        training, every ``eval_every`` steps and after the last); ``heldout_reference`` (g's own loss on the same
        batches) gives the ``heldout_penalty`` column. Returns the learning curve: one row per step (``step`` 1…S,
        ``train_loss``, ``lr``, ``heldout_loss`` / ``heldout_penalty`` where evaluated, else NaN) after a row
        ``step`` 0 (held-out loss at initialisation). NaN/Inf losses raise :class:`StitchDivergedError`."""
        settings = self.settings
        steps = settings.steps
        losses = torch.empty(steps, device=self._device)
        initial = heldout()
        if not math.isfinite(initial):
            raise StitchDivergedError(f"stitching {self.label}: the held-out loss at initialisation is {initial}, "
                                      "before any training step (the models or f's features produce NaN/Inf)")
        heldout_at = {0: initial}
        checked = 0
        with progress_bar(steps, f"stitch {self.label}", progress) as bar:
            for step in range(steps):
                losses[step] = self.train_step(self.next_indices())
                bar.update(1)
                if (step + 1) % settings.eval_every == 0 or step + 1 == steps:
                    self._check(losses, checked, step + 1)
                    checked = step + 1
                    value = heldout()
                    if not math.isfinite(value):
                        self._diverged(f"the held-out loss is {value} after step {step + 1}")
                    heldout_at[step + 1] = value
                    bar.set_postfix_str(f"loss {float(losses[step]):.3f}, held-out {value:.3f}", refresh=False)
        train_loss = losses.double().cpu().numpy()
        base = settings.learning_rate
        rows = [{"step": 0, "train_loss": np.nan, "lr": np.nan}]
        rows += [{"step": s + 1, "train_loss": float(train_loss[s]),
                  "lr": base * learning_rate_factor(s, steps, settings.warmup_steps)} for s in range(steps)]
        curve = pd.DataFrame(rows)
        curve["heldout_loss"] = curve["step"].map(heldout_at).astype(float)
        curve["heldout_penalty"] = curve["heldout_loss"] - heldout_reference
        return curve
