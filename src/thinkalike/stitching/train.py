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

φ seeds (:func:`phi_seed_list`): φ's initial map is deterministic (the identity or the least-squares
map), so what varies between trainings of one stitch is the data order. φ seed ``k`` draws its
sequences from a permutation generator seeded with ``settings.seed + k`` (seed 0: the order a
single stitch always had). :class:`LockstepTrainer` trains the S seeds of one stitch together,
step by step: one SGD optimiser holds a parameter group per φ and kind of parameter (SGD updates
each parameter on its own), gradient clipping is per φ (each seed's own norm). Fused
(:func:`fuse_seeds`; on a GPU by default), at each micro-batch the S seeds' sequences go through
their own φ's, are concatenated along the batch and run through g's tail **once** (``S ×
batch_size`` rows); the loss is ``Σ_k loss_sum_k / n_k`` (each seed's own token-weighted mean),
whose gradient with respect to φ_k is exactly seed k's own (the rows of different seeds do not
interact in g's tail: attention is within a sequence, every other operation within a token), so
every seed follows the trajectory of its separate training to float round-off (batched matrix
products may sum in another order). Unfused (on a CPU by default), g's tail runs once per seed
and every seed's step is exactly its separate training's.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, model_validator

from thinkalike.models.handle import ModelHandle
from thinkalike.models.training import progress_bar
from thinkalike.stitching.data import PreparedSplit, loss_sum, target_count
from thinkalike.stitching.layers import INITS, StitchConfigError, StitchLayer

FEATURE_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


class StitchDivergedError(RuntimeError):
    """The stitching loss became NaN/Inf; the message names the pair, the layers and the step."""


class StitchSettings(BaseModel):
    """Stitching settings (defaults: the default run's CPU schedule, conf/base's ``stitching.settings``; conf/gpu
    sets Brown et al.'s: 2000 steps with 200 of warm-up, 16,384 tokens a step).

    ``steps``, ``warmup_steps``, ``lr_scale`` (torch lr = ``lr_scale · (1 − momentum)``), ``momentum``,
    ``weight_decay``, ``clip_grad_norm``: the optimiser (module docstring). ``tokens_per_step``:
    sequence positions per optimiser step (tuned-lens's default is 2**18), run as micro-batches of
    ``batch_size`` sequences. ``eval_every``: held-out loss every so many steps on the first
    ``curve_eval_batches`` evaluation batches (of ``eval_batch_size`` sequences; the final
    evaluation uses them all). ``init``: φ's initial map (``auto`` | ``identity`` | ``lstsq``, see
    :mod:`thinkalike.stitching.layers`); the least-squares map is fitted on at most
    ``init_max_tokens`` real training tokens. ``objective``: ``auto`` | ``causal`` | ``masked`` |
    ``label`` (:mod:`thinkalike.stitching.data`); ``mask_probability`` for ``masked``.
    ``n_bootstrap`` resamples of the evaluation batches give the ``ci_level`` interval of the
    penalty. ``feature_dtype``: how f's precomputed features are held. ``seed``: batch order (φ seed
    ``k`` uses ``seed + k``), masking, bootstrap. ``exclude_special_targets``: special tokens are
    never targets, in training or evaluation (:func:`~thinkalike.stitching.data.excluded_target_ids`;
    the ``label`` objective's targets are labels and are never excluded).

    A pydantic model: unknown keys and wrong types are refused (strict: ``steps: "150"`` is not a number), and the
    checks below raise :class:`StitchConfigError` messages inside pydantic's ``ValidationError`` (a ``ValueError``).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    steps: int = 150
    warmup_steps: int = 15
    lr_scale: float = 1.0
    momentum: float = 0.9
    weight_decay: float = 1e-3
    clip_grad_norm: float = 1.0
    tokens_per_step: int = 1024
    batch_size: int = 16
    eval_batch_size: int = 4
    eval_every: int = 25
    curve_eval_batches: int = 2
    init: str = "auto"
    init_max_tokens: int = 8192
    objective: str = "auto"
    mask_probability: float = 0.15
    n_bootstrap: int = 1000
    ci_level: float = 0.95
    feature_dtype: str = "float32"
    seed: int = 0
    exclude_special_targets: bool = True

    @model_validator(mode="after")
    def _checked(self) -> StitchSettings:
        self._check()
        return self

    def _check(self) -> None:
        positive = {
            "steps": self.steps,
            "tokens_per_step": self.tokens_per_step,
            "batch_size": self.batch_size,
            "eval_batch_size": self.eval_batch_size,
            "eval_every": self.eval_every,
            "curve_eval_batches": self.curve_eval_batches,
            "init_max_tokens": self.init_max_tokens,
            "n_bootstrap": self.n_bootstrap,
        }
        for name, value in positive.items():
            if int(value) != value or value < 1:
                raise StitchConfigError(f"stitching setting {name} must be a positive integer, got {value!r}")
        if int(self.warmup_steps) != self.warmup_steps or not 0 <= self.warmup_steps < self.steps:
            raise StitchConfigError(
                f"stitching warmup_steps ({self.warmup_steps}) must be in [0, steps) with steps = "
                f"{self.steps}: the warm-up must end before training does"
            )
        if not self.lr_scale > 0 or not math.isfinite(self.lr_scale):
            raise StitchConfigError(f"stitching lr_scale must be a positive number, got {self.lr_scale!r}")
        if not 0 <= self.momentum < 1:
            raise StitchConfigError(f"stitching momentum must be in [0, 1), got {self.momentum!r}")
        if self.weight_decay < 0 or not self.clip_grad_norm > 0:
            raise StitchConfigError(
                f"stitching weight_decay must be >= 0 and clip_grad_norm > 0, got "
                f"{self.weight_decay!r}, {self.clip_grad_norm!r}"
            )
        if self.init not in INITS:
            raise StitchConfigError(f"unknown stitching init {self.init!r}; known: {', '.join(INITS)}")
        if self.objective not in ("auto", "causal", "masked", "label"):
            raise StitchConfigError(
                f"unknown stitching objective {self.objective!r}; known: auto, causal, masked, label"
            )
        if not 0 < self.mask_probability < 1 or not 0 < self.ci_level < 1:
            raise StitchConfigError(
                f"mask_probability and ci_level must be in (0, 1), got {self.mask_probability!r}, {self.ci_level!r}"
            )
        if self.feature_dtype not in FEATURE_DTYPES:
            raise StitchConfigError(
                f"feature_dtype must be one of {sorted(FEATURE_DTYPES)}, got {self.feature_dtype!r}"
            )
        if not isinstance(self.exclude_special_targets, bool):
            raise StitchConfigError(
                f"exclude_special_targets must be true or false, got {self.exclude_special_targets!r}"
            )

    @property
    def learning_rate(self) -> float:
        """The torch learning rate ``lr_scale · (1 − momentum)``."""
        return self.lr_scale * (1.0 - self.momentum)

    def to_dict(self) -> dict[str, Any]:
        """Every setting by name (what a saved φ's config records)."""
        return self.model_dump()


def phi_seed_list(phi_seeds: Any) -> tuple[int, ...]:
    """The φ seeds of ``phi_seeds``: a number of seeds ``n`` ≥ 1 gives ``0 … n − 1``; a list gives its seeds
    (distinct integers ≥ 0, at least one) in its order. Anything else raises :class:`StitchConfigError`
    naming ``phi_seeds``. Seed ``k`` trains on the order drawn with ``settings.seed + k``."""

    def integer(value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))

    if integer(phi_seeds):
        if phi_seeds < 1:
            raise StitchConfigError(f"phi_seeds must be a number of seeds >= 1 or a list of seeds, got {phi_seeds!r}")
        return tuple(range(int(phi_seeds)))
    if isinstance(phi_seeds, (list, tuple)):
        if not phi_seeds:
            raise StitchConfigError("phi_seeds must hold at least one seed, got an empty list")
        bad = [value for value in phi_seeds if not integer(value) or value < 0]
        if bad:
            raise StitchConfigError(f"phi_seeds must be integers >= 0, got {bad!r} in {list(phi_seeds)!r}")
        repeated = sorted({int(v) for v in phi_seeds if list(phi_seeds).count(v) > 1})
        if repeated:
            raise StitchConfigError(f"phi_seeds must be distinct, got {repeated} more than once in {list(phi_seeds)!r}")
        return tuple(int(value) for value in phi_seeds)
    raise StitchConfigError(
        f"phi_seeds must be a number of seeds >= 1 or a list of distinct seeds >= 0, got {phi_seeds!r}"
    )


def fuse_seeds(fuse: bool | None, device: torch.device | str) -> bool:
    """Whether the φ seeds of a stitch share one pass of g's tail: ``fuse`` if given, else when training runs on
    CUDA (``device``: where f's features and g live)."""
    return bool(fuse) if fuse is not None else torch.device(device).type == "cuda"


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


def stitched_logits(
    phi: StitchLayer,
    g: ModelHandle,
    layer_g: int,
    features: torch.Tensor,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """Logits of ``g_{>m} ∘ φ ∘ f_{≤l}`` given f's features after layer l: g's tail on ``φ(features)``."""
    return g.logits_from_layer(phi(features), layer_g, input_ids, attention_mask)


class LockstepTrainer:
    """Trains the φ's ``phis`` of one stitch, one per φ seed of ``seeds``, in lockstep (module docstring): the
    only trainable modules, between f's precomputed features ``train`` (shared by every seed) and g's tail after
    ``layer_g``. ``label``: the pair and layers, for messages. :meth:`train_step` makes one optimiser step of
    every seed, :meth:`run` all of them. With one φ it is the plain trainer (:class:`StitchTrainer`).

    ``fuse`` (:func:`fuse_seeds`): run g's tail once on the seeds' concatenated micro-batches (on a GPU, where
    these tiny models are overhead-bound) or once per seed (on a CPU, where a step is compute-bound, so fusing
    saves little; ``benchmarks/stitching_speed.py`` times seeds in lockstep against apart). Unfused, every seed's
    step is exactly its separate training's; fused, to float round-off.
    """

    def __init__(
        self,
        phis: Sequence[StitchLayer],
        g: ModelHandle,
        layer_g: int,
        train: PreparedSplit,
        objective: str,
        settings: StitchSettings,
        label: str = "stitch",
        seeds: Sequence[int] | None = None,
        fuse: bool | None = None,
    ) -> None:
        self.phis = list(phis)
        self.fuse = fuse_seeds(fuse, train.input_ids.device)
        self.seeds = tuple(range(len(self.phis))) if seeds is None else phi_seed_list(list(seeds))
        if not self.phis or len(self.seeds) != len(self.phis):
            raise StitchConfigError(f"{label}: {len(self.phis)} stitching layers for {len(self.seeds)} φ seeds")
        self.g, self.layer_g, self.train = g, layer_g, train
        self.objective, self.settings, self.label = objective, settings, label
        groups: list[dict[str, Any]] = []
        self.parameter_sets: list[list[torch.nn.Parameter]] = []
        for phi in self.phis:
            decayed, undecayed = phi.decayed_parameters(), phi.undecayed_parameters()
            if not decayed + undecayed:
                raise StitchConfigError(f"{label}: a {phi.kind} stitching layer has nothing to train")
            self.parameter_sets.append(decayed + undecayed)
            groups.append({"params": decayed, "weight_decay": settings.weight_decay})
            if undecayed:
                groups.append({"params": undecayed, "weight_decay": 0.0})
        self.optimizer = torch.optim.SGD(
            groups, lr=settings.learning_rate, momentum=settings.momentum, nesterov=settings.momentum > 0
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: learning_rate_factor(s, settings.steps, settings.warmup_steps)
        )
        seq = int(train.input_ids.shape[1])
        self.sequences_per_step = max(1, math.ceil(settings.tokens_per_step / seq))
        self._generators = [torch.Generator().manual_seed(settings.seed + seed) for seed in self.seeds]
        self._orders = [torch.empty(0, dtype=torch.long) for _ in self.seeds]
        self._device = train.input_ids.device

    def _next(self, which: int) -> torch.Tensor:
        needed, parts = self.sequences_per_step, []
        while needed > 0:
            if self._orders[which].numel() == 0:
                self._orders[which] = torch.randperm(len(self.train), generator=self._generators[which])
            take = self._orders[which][:needed]
            self._orders[which] = self._orders[which][needed:]
            parts.append(take)
            needed -= take.numel()
        return torch.cat(parts).to(self._device)

    def next_indices(self) -> list[torch.Tensor]:
        """Every seed's next step's sequence indices (on the training device): a permutation drawn with
        ``settings.seed + seed``, epoch after epoch."""
        return [self._next(which) for which in range(len(self.seeds))]

    def train_step(self, indices: Sequence[torch.Tensor]) -> torch.Tensor:
        """One optimiser step of every seed, seed ``k`` on the sequences ``indices[k]``; returns each seed's mean
        loss of the step, ``(S,)`` (no sync)."""
        train, objective, phis = self.train, self.objective, self.phis
        totals = [target_count(train.targets[index], objective).clamp(min=1) for index in indices]
        summed = torch.zeros(len(phis), device=self._device)
        for phi in phis:
            phi.train()
        chunks = [index.split(self.settings.batch_size) for index in indices]
        for parts in zip(*chunks):
            batches = [
                (phi(features), ids, mask, targets)
                for phi, (features, ids, mask, targets) in zip(phis, (train.batch(part) for part in parts))
            ]
            if self.fuse and len(phis) > 1:
                residual, ids, mask = (torch.cat([batch[i] for batch in batches]) for i in range(3))
                logits = self.g.logits_from_layer(residual, self.layer_g, ids, mask).split([len(p) for p in parts])
                losses = [loss_sum(part, batch[3], objective) for part, batch in zip(logits, batches)]
                # summed in order from the first seed's term, as sum() would (no 0 start: a tensor, not an int)
                functools.reduce(operator.add, (loss / total for loss, total in zip(losses, totals))).backward()
            else:
                losses = []
                for (residual, ids, mask, targets), total in zip(batches, totals):
                    loss = loss_sum(self.g.logits_from_layer(residual, self.layer_g, ids, mask), targets, objective)
                    (loss / total).backward()
                    losses.append(loss)
            summed = summed + torch.stack([loss.detach() for loss in losses])
        for parameters in self.parameter_sets:
            torch.nn.utils.clip_grad_norm_(parameters, self.settings.clip_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return summed / torch.stack(totals)

    def _check(self, losses: torch.Tensor, first: int, last: int) -> None:
        window = losses[first:last]
        finite = torch.isfinite(window)
        if not bool(finite.all()):
            bad_step, bad_seed = (int(v) for v in (~finite).nonzero()[0])
            bad_step += first
            seed = f" (φ seed {self.seeds[bad_seed]})" if len(self.seeds) > 1 else ""
            self._diverged(
                f"the training loss is {float(losses[bad_step, bad_seed])} at step {bad_step + 1} of "
                f"{self.settings.steps}{seed}"
            )

    def _diverged(self, what: str) -> None:
        raise StitchDivergedError(
            f"stitching {self.label} diverged: {what}; try a smaller lr_scale (now {self.settings.lr_scale})"
        )

    def run(
        self, heldout: Callable[[], Sequence[float]], heldout_reference: float = float("nan"), *, progress: bool = True
    ) -> list[pd.DataFrame]:
        """All ``settings.steps`` steps of every seed. ``heldout()`` returns each seed's held-out stitched loss
        (evaluated before training, every ``eval_every`` steps and after the last); ``heldout_reference`` (g's
        own loss on the same batches) gives the ``heldout_penalty`` column. Returns one learning curve per seed:
        one row per step (``step`` 1…S, ``train_loss``, ``lr``, ``heldout_loss`` / ``heldout_penalty`` where
        evaluated, else NaN) after a row ``step`` 0 (held-out loss at initialisation). NaN/Inf losses raise
        :class:`StitchDivergedError`."""
        settings = self.settings
        steps, count = settings.steps, len(self.seeds)
        losses = torch.empty((steps, count), device=self._device)
        initial = [float(value) for value in heldout()]
        if not all(math.isfinite(value) for value in initial):
            raise StitchDivergedError(
                f"stitching {self.label}: the held-out loss at initialisation is {initial[0]}, "
                "before any training step (the models or f's features produce NaN/Inf)"
            )
        heldout_at = {0: initial}
        checked = 0
        with progress_bar(steps, f"stitch {self.label}", progress) as bar:
            for step in range(steps):
                losses[step] = self.train_step(self.next_indices())
                bar.update(1)
                if (step + 1) % settings.eval_every == 0 or step + 1 == steps:
                    self._check(losses, checked, step + 1)
                    checked = step + 1
                    values = [float(value) for value in heldout()]
                    for seed, value in zip(self.seeds, values):
                        if not math.isfinite(value):
                            seed_note = f" (φ seed {seed})" if count > 1 else ""
                            self._diverged(f"the held-out loss is {value} after step {step + 1}{seed_note}")
                    heldout_at[step + 1] = values
                    bar.set_postfix_str(f"loss {float(losses[step, 0]):.3f}, held-out {values[0]:.3f}", refresh=False)
        train_loss = losses.double().cpu().numpy()
        base = settings.learning_rate
        curves = []
        for which in range(count):
            rows = [{"step": 0, "train_loss": np.nan, "lr": np.nan}]
            rows += [
                {
                    "step": s + 1,
                    "train_loss": float(train_loss[s, which]),
                    "lr": base * learning_rate_factor(s, steps, settings.warmup_steps),
                }
                for s in range(steps)
            ]
            curve = pd.DataFrame(rows)
            curve["heldout_loss"] = curve["step"].map({s: v[which] for s, v in heldout_at.items()}).astype(float)
            curve["heldout_penalty"] = curve["heldout_loss"] - heldout_reference
            curves.append(curve)
        return curves


class StitchTrainer(LockstepTrainer):
    """Trains one ``phi`` (the only trainable module) between f's precomputed features and g's tail after
    ``layer_g``, on the data order of ``settings.seed`` (φ seed 0): :class:`LockstepTrainer` with one φ.

    ``train``: the prepared training split (features on g's device). ``label``: the pair and layers, for
    messages. Use :meth:`train_step` for one optimiser step (the benchmark does) or :meth:`run` for all.
    """

    def __init__(
        self,
        phi: StitchLayer,
        g: ModelHandle,
        layer_g: int,
        train: PreparedSplit,
        objective: str,
        settings: StitchSettings,
        label: str = "stitch",
    ) -> None:
        super().__init__([phi], g, layer_g, train, objective, settings, label, seeds=(0,))
        self.phi = phi
        self.parameters = self.parameter_sets[0]

    def next_indices(self) -> torch.Tensor:  # type: ignore[override]
        """The next step's sequence indices (on the training device): a seeded permutation, epoch after epoch."""
        return self._next(0)

    def train_step(self, index: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """One optimiser step on the sequences ``index``; returns the step's mean loss (0-d tensor, no sync)."""
        return super().train_step([index])[0]

    def run(  # type: ignore[override]
        self,
        heldout: Callable[[], float],
        heldout_reference: float = float("nan"),
        *,
        progress: bool = True,
    ) -> pd.DataFrame:
        """:meth:`LockstepTrainer.run` of the one φ: ``heldout()`` returns its held-out loss; one curve."""
        return super().run(lambda: [heldout()], heldout_reference, progress=progress)[0]
