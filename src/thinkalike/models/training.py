"""Deterministic CPU/GPU training of small zoo language models.

Causal objective: mean next-token cross-entropy
    loss = −(1/N) Σ_t log softmax(z_t)[x_{t+1}]   over all positions t < n_ctx − 1.
Masked objective (BERT-style): a fraction ``mask_probability`` of non-special positions is
selected; of those 80 % become ``<mask>``, 10 % a random token, 10 % stay; the loss is the
cross-entropy at the selected positions only. ``LanguageModelTrainer.train(…, mask_rates=…)`` gives
every position of every training row its own selection probability instead (e.g. a hypothesis
masked more often than its premise, so that filling it in needs the premise: XLM's translation
LM on sentence pairs, Conneau & Lample 2019); rows may then be right-padded with ``pad_id``,
which the model does not attend to.

Optimiser: AdamW with linear warm-up then cosine decay to 10 % of the peak rate.
Everything is seeded from ``seed`` (initialisation, batch order, masking), so the same
configuration gives the same weights on the same device.

Progress: one tqdm bar per model on stderr, showing the step, the current training loss and
the latest held-out loss; it refreshes every 0.5 s on a terminal and every
30 s otherwise (logs), and stays as one line when training ends. It is named by the trainer's
``description``, else by the enclosing :func:`progress_label` (the zoo node names its model).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, model_validator
from tqdm import tqdm

from thinkalike.models.zoo_entry import OBJECTIVES

LogitsFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


class TrainingConfig(BaseModel):
    """Optimisation settings of one zoo model (strict types, unknown settings refused, checked on construction)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    steps: int = 300
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    eval_every: int = 50
    eval_batches: int = 8
    mask_probability: float = 0.15
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"training needs steps >= 1 and batch_size >= 1, got {self.steps}, {self.batch_size}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(f"warmup_steps must be in [0, steps), got {self.warmup_steps} with steps={self.steps}")
        if self.eval_every < 1 or self.eval_batches < 1:
            raise ValueError(f"eval_every and eval_batches must be >= 1, got {self.eval_every}, {self.eval_batches}")
        if self.learning_rate <= 0 or self.weight_decay < 0:
            raise ValueError(
                f"learning_rate must be > 0 and weight_decay >= 0, got {self.learning_rate}, {self.weight_decay}"
            )
        if not 0 < self.mask_probability < 1:
            raise ValueError(f"mask_probability must be in (0, 1), got {self.mask_probability}")
        return self


_PROGRESS_LABEL: ContextVar[str] = ContextVar("thinkalike_training_label", default="training")
_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


@contextmanager
def progress_label(label: str) -> Iterator[None]:
    """Names the progress bars of trainers built without a ``description`` inside the block."""
    token = _PROGRESS_LABEL.set(label)
    try:
        yield
    finally:
        _PROGRESS_LABEL.reset(token)


def progress_bar(total: int, description: str, enabled: bool = True) -> tqdm:
    """A short one-line bar on stderr (0.5 s refresh on a terminal, 30 s in logs)."""
    interactive = sys.stderr.isatty()
    return tqdm(
        total=total,
        desc=description,
        unit="step",
        leave=True,
        disable=not enabled,
        file=sys.stderr,
        mininterval=0.5 if interactive else 30.0,
        bar_format=_BAR_FORMAT,
        dynamic_ncols=interactive,
    )


@dataclass(frozen=True)
class MaskingTokens:
    """Token ids a masked-LM objective needs."""

    mask_id: int
    special_ids: tuple[int, ...]
    vocab_size: int


def learning_rate_factor(step: int, config: TrainingConfig) -> float:
    """Warm-up factor (step+1)/warmup, then cosine from 1 to 0.1 over the remaining steps."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def adamw(parameters: Iterable[torch.nn.Parameter], learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``parameters``, the tensors updated together (``foreach``): the same update as torch's per-tensor
    loop, which torch picks on a CPU — ``m ← β₁m + (1−β₁)g``, ``v ← β₂v + (1−β₂)g²``, ``θ ← θ(1 − ηλ) − η m̂ /
    (√v̂ + ε)`` — to the bit (tested), with less Python per step (one call per operation over all the tensors, not
    one per tensor; a zoo model's step is small enough for that overhead to count). torch's ``fused`` kernel does
    less work still but rounds differently, which changes a trained model's weights (~1e-3 after 60 steps) and so
    the findings."""
    return torch.optim.AdamW(parameters, lr=learning_rate, weight_decay=weight_decay, foreach=True)


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over positions whose target is a real (unmasked) token."""
    targets = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)


def mask_tokens(
    input_ids: torch.Tensor, tokens: MaskingTokens, probability: float | torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: returns (corrupted ids, targets with −100 where no loss is taken). ``probability`` is one
    selection probability or one per position (a tensor shaped like ``input_ids``)."""
    special = torch.isin(input_ids, torch.tensor(tokens.special_ids, device=input_ids.device))
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    selected = (draw < probability) & ~special
    targets = input_ids.masked_fill(~selected, -100)
    action = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    corrupted = input_ids.clone()
    corrupted[selected & (action < 0.8)] = tokens.mask_id
    random_positions = selected & (action >= 0.8) & (action < 0.9)
    random_ids = torch.randint(0, tokens.vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    corrupted[random_positions] = random_ids[random_positions]
    return corrupted, targets


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy at the selected (target ≠ −100) positions."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)


class LanguageModelTrainer:
    """Trains ``module`` (through ``logits_fn``) on packed token sequences.

    ``objective`` is ``"causal"`` or ``"masked"``; the masked objective needs ``masking``.
    ``progress`` shows a progress bar named ``description`` (module docstring).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        logits_fn: LogitsFn,
        objective: str,
        config: TrainingConfig,
        masking: MaskingTokens | None = None,
        device: torch.device | None = None,
        *,
        progress: bool = True,
        description: str | None = None,
        pad_id: int | None = None,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be 'causal' or 'masked', got {objective!r}")
        if objective == "masked" and masking is None:
            raise ValueError("the masked objective needs MaskingTokens (mask id, special ids)")
        self.module = module
        self.logits_fn = logits_fn
        self.objective = objective
        self.config = config
        self.masking = masking
        self.device = device or torch.device("cpu")
        self.progress = progress
        self.description = description if description is not None else _PROGRESS_LABEL.get()
        self.pad_id = pad_id

    def _loss(self, batch: torch.Tensor, generator: torch.Generator, rates: torch.Tensor | None = None) -> torch.Tensor:
        attention_mask = torch.ones_like(batch) if self.pad_id is None else (batch != self.pad_id).long()
        if self.objective == "causal":
            return causal_lm_loss(self.logits_fn(self.module, batch, attention_mask), batch, attention_mask)
        probability = self.config.mask_probability if rates is None else rates
        assert self.masking is not None  # the masked objective's (checked in __init__)
        corrupted, targets = mask_tokens(batch, self.masking, probability, generator)
        return masked_lm_loss(self.logits_fn(self.module, corrupted, attention_mask), targets)

    @torch.no_grad()
    def evaluate(self, sequences: np.ndarray) -> float:
        """Mean loss over up to ``eval_batches`` batches of ``sequences`` (fixed masking seed)."""
        self.module.eval()
        generator = torch.Generator(device=self.device).manual_seed(self.config.seed + 1)
        data = torch.as_tensor(sequences, dtype=torch.long)
        losses = []
        for start in range(
            0, min(len(data), self.config.eval_batches * self.config.batch_size), self.config.batch_size
        ):
            batch = data[start : start + self.config.batch_size].to(self.device)
            losses.append(float(self._loss(batch, generator)))
        self.module.train()
        return float(np.mean(losses))

    def train(
        self,
        train_sequences: np.ndarray,
        heldout_sequences: np.ndarray,
        on_eval: Callable[[int, float, float], None] | None = None,
        mask_rates: np.ndarray | None = None,
    ) -> pd.DataFrame:
        """Runs ``config.steps`` optimiser steps; returns the curve (step, train_loss, heldout_loss, seconds).
        ``mask_rates`` (masked objective): the selection probability of every position of every training row,
        shaped like ``train_sequences``; held-out rows keep ``config.mask_probability``."""
        if len(train_sequences) < 1 or len(heldout_sequences) < 1:
            raise ValueError("training needs at least one training and one held-out sequence")
        if mask_rates is not None:
            if self.objective != "masked":
                raise ValueError("mask_rates apply to the masked objective only")
            if np.shape(mask_rates) != np.shape(train_sequences):
                raise ValueError(
                    f"mask_rates must be shaped like the training rows {np.shape(train_sequences)}, "
                    f"got {np.shape(mask_rates)}"
                )
            if not ((np.asarray(mask_rates) >= 0) & (np.asarray(mask_rates) < 1)).all():
                raise ValueError("mask_rates must lie in [0, 1)")
        rates = None if mask_rates is None else torch.as_tensor(np.asarray(mask_rates), dtype=torch.float32)
        config = self.config
        torch.manual_seed(config.seed)
        generator = torch.Generator(device=self.device).manual_seed(config.seed)
        order_rng = np.random.default_rng(config.seed)
        data = torch.as_tensor(train_sequences, dtype=torch.long)
        self.module.to(self.device).train()
        optimiser = adamw(self.module.parameters(), config.learning_rate, config.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: learning_rate_factor(step, config))
        rows, started, running = [], time.perf_counter(), []
        with progress_bar(config.steps, self.description, self.progress) as bar:
            for step in range(config.steps):
                rows_idx = order_rng.integers(0, len(data), size=config.batch_size)
                batch = data[rows_idx].to(self.device)
                loss = self._loss(batch, generator, None if rates is None else rates[rows_idx].to(self.device))
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
                optimiser.step()
                schedule.step()
                current = float(loss.detach())
                running.append(current)
                if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                    heldout = self.evaluate(heldout_sequences)
                    rows.append(
                        {
                            "step": step + 1,
                            "train_loss": float(np.mean(running)),
                            "heldout_loss": heldout,
                            "seconds": time.perf_counter() - started,
                        }
                    )
                    if on_eval is not None:
                        on_eval(step + 1, rows[-1]["train_loss"], heldout)
                    running = []
                held = f", held-out {rows[-1]['heldout_loss']:.3f}" if rows else ""
                bar.set_postfix_str(f"loss {current:.3f}{held}", refresh=False)
                bar.update(1)
        self.module.eval()
        return pd.DataFrame(rows)
