"""Thin nodes of the ``zoo`` pipeline: train each configured model, then summarise."""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from thinkalike.models.handle import default_device
from thinkalike.models.zoo import (
    state_dict_for_saving,
    train_zoo_model,
    training_config,
    zoo_config,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def train_model(train_sequences: dict[str, np.ndarray], heldout_sequences: dict[str, np.ndarray], tokenizer,
                model: dict[str, Any], zoo: dict[str, Any], corpus: dict[str, Any], *, model_name: str):
    """Trains zoo model ``model_name``; returns weights, config, training curve and MLflow metrics."""
    config = zoo_config(model_name, model, tokenizer, int(corpus["n_ctx"]))
    training = training_config(zoo.get("training") or {}, model)
    module, curve = train_zoo_model(config, training, train_sequences["input_ids"], heldout_sequences["input_ids"],
                                    tokenizer, default_device())
    metrics = {
        "train_loss": [{"value": float(v), "step": int(s)} for s, v in zip(curve["step"], curve["train_loss"])],
        "heldout_loss": [{"value": float(v), "step": int(s)} for s, v in zip(curve["step"], curve["heldout_loss"])],
    }
    return state_dict_for_saving(module), config, curve, metrics


def summarise_zoo(corpus_statistics: dict[str, Any], zoo: dict[str, Any], *curves: pd.DataFrame):
    """One row per model: final held-out loss against the unigram baseline, and a curves figure.

    ``improvement`` = 1 − heldout_loss / unigram_entropy; a model has learned the language when
    it is at least ``zoo.baseline_margin`` (default 0.30).
    """
    baseline = float(corpus_statistics["unigram_entropy_nats"])
    margin = float(zoo.get("baseline_margin", 0.30))
    rows = []
    for curve in curves:
        last = curve.iloc[-1]
        improvement = 1.0 - float(last["heldout_loss"]) / baseline
        rows.append({"model": last["model"], "n_parameters": int(last["n_parameters"]), "steps": int(last["step"]),
                     "train_seconds": float(last["seconds"]), "heldout_loss": float(last["heldout_loss"]),
                     "unigram_entropy": baseline, "improvement": improvement, "beats_baseline": improvement >= margin})
    summary = pd.DataFrame(rows)
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for curve in curves:
        axis.plot(curve["step"], curve["heldout_loss"], label=str(curve["model"].iloc[0]))
    axis.axhline(baseline, color="black", linestyle="--", label="unigram entropy")
    axis.axhline(baseline * (1 - margin), color="grey", linestyle=":", label=f"baseline − {margin:.0%}")
    axis.set(xlabel="step", ylabel="held-out loss (nats/token)", title="Zoo training curves")
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    return summary, figure
