"""Thin nodes of the ``activations`` pipeline: residual streams of every configured model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.language.packing import pack_evaluation_sequences
from thinkalike.models.activation_store import ActivationBatch, ActivationStream
from thinkalike.models.extraction import iter_activation_batches
from thinkalike.models.handle import ModelHandle, ModelSourceError, default_device
from thinkalike.models.sources import load_model

DTYPES = {"float32": torch.float32, "float16": torch.float16}


def activation_dtype(activations: dict[str, Any]) -> torch.dtype:
    name = activations.get("dtype", "float32")
    if name not in DTYPES:
        raise ValueError(f"activations.dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return DTYPES[name]


@dataclass(frozen=True)
class ResidualBatches:
    """Re-iterable extraction: each pass runs the model batch by batch (bounded memory)."""

    handle: ModelHandle
    sequences: dict[str, np.ndarray]
    batch_size: int
    dtype: torch.dtype

    def __iter__(self) -> Iterator[ActivationBatch]:
        return iter_activation_batches(self.handle, self.sequences["input_ids"], self.sequences["attention_mask"],
                                       self.batch_size, dtype=self.dtype, progress=True)

def extract_zoo_activations(evaluation_sequences: dict[str, np.ndarray], evaluation_index: pd.DataFrame, tokenizer,
                            weights: dict[str, torch.Tensor], config: dict[str, Any], activations: dict[str, Any],
                            *, model_name: str) -> tuple[ActivationStream, pd.DataFrame]:
    """Residual streams of a zoo model on the evaluation sequences (corpus tokenizer)."""
    handle = load_model(f"zoo:{config['name']}", name=model_name, zoo_artifacts={config["name"]: (config, weights)},
                        tokenizer=tokenizer, device=default_device(activations.get("device")))
    batches = ResidualBatches(handle, evaluation_sequences, int(activations["batch_size"]),
                              activation_dtype(activations))
    return ActivationStream(model_name, batches), evaluation_index


def extract_external_activations(evaluation_texts: pd.DataFrame, activations: dict[str, Any], *, model_name: str,
                                 spec: str, n_ctx: int) -> tuple[ActivationStream, pd.DataFrame]:
    """Residual streams of a hub / local / GGUF / TransformerLens model, with its own tokenizer.

    The evaluation texts are packed with the model's tokenizer; the index table maps each token
    to its sentence and word so methods can compare models whose tokenizers differ.
    """
    handle = load_model(spec, name=model_name, device=default_device(activations.get("device")))
    if handle.tokenizer is None:
        raise ModelSourceError(f"model spec {spec!r} ({model_name}) came without a tokenizer: put its tokenizer "
                               "files beside the weights")
    sequences, index = pack_evaluation_sequences(evaluation_texts, handle.tokenizer, n_ctx)
    batches = ResidualBatches(handle, sequences, int(activations["batch_size"]), activation_dtype(activations))
    return ActivationStream(model_name, batches), index
