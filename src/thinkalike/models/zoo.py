"""Zoo models: small language models trained here, sharing the corpus tokenizer.

A zoo entry in config names a ``family`` (``bridge`` = TransformerLens 4 native
TransformerBridge, ``hf`` = a transformers architecture given by ``model_type``), an
``objective`` (``causal`` | ``masked``), a ``seed``, its ``architecture`` (keyword arguments in
that family's own names: TransformerLens names for bridge, transformers config names for hf)
and optional ``training`` overrides. :func:`zoo_config` turns it into the persisted config dict
understood by :func:`thinkalike.models.architectures.build_zoo_module`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.models.architectures import build_zoo_module, hf_zoo_config, zoo_logits
from thinkalike.models.handle import ModelSourceError
from thinkalike.models.training import (
    LanguageModelTrainer,
    MaskingTokens,
    TrainingConfig,
)
from thinkalike.models.zoo_entry import OBJECTIVES, objective_of, seed_of

FAMILIES = ("bridge", "hf")


def zoo_config(name: str, entry: dict[str, Any], tokenizer, n_ctx: int) -> dict[str, Any]:
    """The persisted config of zoo model ``name`` from its config ``entry`` and the corpus tokenizer."""
    family = entry.get("family")
    objective = objective_of(entry)
    if family not in FAMILIES:
        raise ModelSourceError(f"zoo model {name!r}: family must be one of {FAMILIES}, got {family!r}")
    if objective not in OBJECTIVES:
        raise ModelSourceError(f"zoo model {name!r}: objective must be one of {OBJECTIVES}, got {objective!r}")
    architecture = dict(entry.get("architecture") or {})
    seed = seed_of(entry)
    if family == "bridge":
        direction = "causal" if objective == "causal" else "bidirectional"
        if architecture.setdefault("attention_dir", direction) != direction:
            raise ModelSourceError(f"zoo model {name!r}: a {objective} objective needs attention_dir={direction!r}")
        bridge = {**architecture, "d_vocab": len(tokenizer), "n_ctx": n_ctx, "seed": seed}
        return {"name": name, "family": "bridge", "objective": objective, "seed": seed, "bridge_config": bridge}
    model_type = architecture.pop("model_type", None)
    if model_type is None:
        raise ModelSourceError(f"zoo model {name!r}: an hf model needs architecture.model_type")
    special = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if model_type != "mamba":
        special["max_position_embeddings"] = n_ctx
    config = hf_zoo_config(name, model_type, objective, **{**special, **architecture})
    config["seed"] = seed
    return config


def training_config(defaults: dict[str, Any], entry: dict[str, Any]) -> TrainingConfig:
    """Project training defaults overridden by the entry's ``training`` and seeded by its ``seed``."""
    merged = {**defaults, **(entry.get("training") or {}), "seed": seed_of(entry)}
    return TrainingConfig(**merged)


def train_zoo_model(
    config: dict[str, Any],
    training: TrainingConfig,
    train_ids,
    heldout_ids,
    tokenizer,
    device: torch.device | None = None,
    *,
    mask_rates: np.ndarray | None = None,
    padded: bool = False,
) -> tuple[torch.nn.Module, pd.DataFrame]:
    """Builds (seeded) and trains one zoo model; returns the trained module and its curve. ``mask_rates``: per
    position masking probabilities of the training rows; ``padded``: rows may hold the tokenizer's pad token,
    which is not attended to (:class:`~thinkalike.models.training.LanguageModelTrainer`)."""
    torch.manual_seed(training.seed)
    module = build_zoo_module(config, seed=training.seed)
    masking = None
    if config["objective"] == "masked":
        masking = MaskingTokens(
            mask_id=tokenizer.mask_token_id, special_ids=tuple(tokenizer.all_special_ids), vocab_size=len(tokenizer)
        )

    def logits_fn(model, input_ids, attention_mask):
        return zoo_logits(model, config, input_ids, attention_mask)

    trainer = LanguageModelTrainer(
        module,
        logits_fn,
        config["objective"],
        training,
        masking,
        device,
        pad_id=tokenizer.pad_token_id if padded else None,
    )
    curve = trainer.train(train_ids, heldout_ids, mask_rates=mask_rates)
    curve.insert(0, "model", config["name"])
    curve["n_parameters"] = sum(p.numel() for p in module.parameters())
    return module.cpu(), curve


def state_dict_for_saving(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Contiguous, unshared CPU copies of the parameters and buffers (safetensors refuses shared storage)."""
    return {key: value.detach().cpu().clone().contiguous() for key, value in module.state_dict().items()}
