"""Thin nodes of the ``zoo`` pipeline: train each configured model, then summarise. Their settings are the ``zoo``
section parsed once by the pipeline's builder (:class:`~thinkalike.pipelines.zoo.schema.ZooParameters`, bound as
``settings``; the ``corpus`` section as ``corpus``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib.figure import Figure

from thinkalike.models.handle import default_device
from thinkalike.models.training import progress_label
from thinkalike.models.zoo import (
    state_dict_for_saving,
    train_zoo_model,
    training_config,
    zoo_config,
)
from thinkalike.pipelines.corpus.schema import CorpusParameters
from thinkalike.pipelines.zoo.schema import ZooParameters

#: 40 distinct (line style, colour) combinations: the 10 tab10 colours solid, then dashed, …
DISTINCT_LINES = cycler(linestyle=["-", "--", "-.", ":"]) * cycler(color=matplotlib.color_sequences["tab10"])
FIGURE_DPI = 150


def train_model(
    train_sequences: dict[str, np.ndarray],
    heldout_sequences: dict[str, np.ndarray],
    tokenizer,
    *,
    settings: ZooParameters,
    corpus: CorpusParameters,
    model_name: str,
):
    """Trains zoo model ``model_name`` (``zoo.models.<name>``, its training ``zoo.training`` overridden by its own,
    rows of ``corpus.n_ctx``); returns weights, config and training curve (logged to MLflow from the curve)."""
    entry = settings.models[model_name].model_dump()
    config = zoo_config(model_name, entry, tokenizer, corpus.n_ctx)
    training = training_config(settings.shared_training(), entry)
    with progress_label(model_name):
        module, curve = train_zoo_model(
            config, training, train_sequences["input_ids"], heldout_sequences["input_ids"], tokenizer, default_device()
        )
    return state_dict_for_saving(module), config, curve


def summarise_zoo(corpus_statistics: dict[str, Any], *curves: pd.DataFrame, settings: ZooParameters):
    """One row per model: final held-out loss against the unigram baseline, and a curves figure.

    ``improvement`` = 1 − heldout_loss / unigram_entropy; a model has learned the language when
    it is at least ``zoo.baseline_margin``.
    """
    baseline = float(corpus_statistics["unigram_entropy_nats"])
    margin = settings.baseline_margin
    rows = []
    for curve in curves:
        last = curve.iloc[-1]
        improvement = 1.0 - float(last["heldout_loss"]) / baseline
        rows.append(
            {
                "model": last["model"],
                "n_parameters": int(last["n_parameters"]),
                "steps": int(last["step"]),
                "train_seconds": float(last["seconds"]),
                "heldout_loss": float(last["heldout_loss"]),
                "unigram_entropy": baseline,
                "improvement": improvement,
                "beats_baseline": improvement >= margin,
            }
        )
    summary = pd.DataFrame(rows)
    return summary, training_curves_figure(curves, baseline, margin)


def training_curves_figure(curves: Sequence[pd.DataFrame], unigram_entropy: float, margin: float) -> Figure:
    """Held-out loss against step, one line per model, each a distinct (line style, colour) pair.

    Horizontal lines: the unigram entropy (nats/token) and the learning threshold
    entropy·(1 − margin). 7 × 4.5 in at 150 dpi (1050 px wide); the legend goes below the plot.
    """
    figure = Figure(figsize=(7.0, 4.5), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    axis.set_prop_cycle(DISTINCT_LINES)
    for curve in curves:
        axis.plot(curve["step"], curve["heldout_loss"], label=str(curve["model"].iloc[0]))
    axis.axhline(unigram_entropy, color="black", linestyle="--", linewidth=1.0, label="unigram entropy")
    axis.axhline(
        unigram_entropy * (1 - margin),
        color="grey",
        linestyle=":",
        linewidth=1.0,
        label=f"unigram entropy − {margin:.0%}",
    )
    axis.set(xlabel="step", ylabel="held-out loss (nats/token)", title="Zoo training curves")
    axis.legend(fontsize=7, ncol=min(4, len(curves) + 2), loc="upper center", bbox_to_anchor=(0.5, -0.15))
    return figure
