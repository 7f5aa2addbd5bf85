"""Thin nodes of the ``activations`` pipeline: residual streams of every configured model.

``activations.packing`` (``packed`` | ``sentence``; :mod:`thinkalike.language.packing`) lays the
evaluation texts out for every model: hub/local models pack them with their own tokenizer
here; zoo models get the corpus pipeline's packed layout, re-laid one text per row here for
``sentence``. ``activations.final_norm`` adds the final norm's output as one more stored layer
(``n_layers + 1``); without it the last stored layer is the last block's output, before the
final norm. Their settings are the ``activations`` section parsed once by the pipeline's builder
(:class:`~thinkalike.pipelines.activations.schema.ActivationParameters`, bound as ``settings``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.language.packing import (
    check_packable,
    one_text_per_row,
    pack_evaluation_sequences,
    text_wrapping,
)
from thinkalike.models.activation_store import ActivationStream, store_size_bytes
from thinkalike.models.extraction import ResidualBatches, check_layers
from thinkalike.models.handle import ModelHandle, ModelSourceError, default_device
from thinkalike.models.sources import load_model, load_saved_zoo_model
from thinkalike.pipelines.activations.schema import ActivationParameters

COMPUTE_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def compute_dtype(settings: ActivationParameters) -> torch.dtype:
    """The dtype models run in (``activations.dtype``)."""
    return COMPUTE_DTYPES[settings.dtype]


def model_device(settings: ActivationParameters, model_name: str):
    """``activations.devices.<model>``, else ``activations.device``, else CUDA when present, else CPU.

    Per-model devices let two large models of a streaming CKA pair run each on its own GPU.
    """
    return default_device(settings.devices.get(model_name) or settings.device)


def output_dtype(settings: ActivationParameters) -> torch.dtype:
    """The dtype extraction hands to the store: the compute dtype; bfloat16 (numpy has none) exactly as float32."""
    dtype = compute_dtype(settings)
    return torch.float32 if dtype == torch.bfloat16 else dtype


def store_dtype(settings: ActivationParameters) -> str:
    """``activations.store_dtype``, or the compute dtype when it is null."""
    return settings.store_dtype or settings.dtype


def activation_stream(
    handle: ModelHandle, sequences: dict[str, np.ndarray], settings: ActivationParameters, model_name: str
) -> ActivationStream:
    """The lazy extraction of ``handle`` on ``sequences`` with its store settings and size estimate.

    ``activations.final_norm``: the stored layers run to ``n_layers + 1``, the final norm's output
    (checked here, before any forward pass: a model without one raises ``NoFinalNormError``).
    """
    final_norm = settings.final_norm
    if final_norm:
        handle.check_final_norm()
    layers = check_layers(settings.layers, handle.n_layers, model_name, final_norm)
    if layers is None and final_norm:
        layers = list(range(handle.n_layers + 2))
    n_stored = len(layers) if layers is not None else handle.n_layers + 1
    dtype = store_dtype(settings)
    size = store_size_bytes(int(np.asarray(sequences["attention_mask"]).sum()), n_stored, handle.d_model, dtype)
    batches = ResidualBatches(handle, sequences, settings.batch_size, output_dtype(settings), layers, final_norm)
    return ActivationStream(
        model_name,
        batches,
        dtype=dtype,
        n_layers=handle.n_layers,
        layer_subset=layers,
        estimated_bytes=size,
        spec=handle.spec,
    )


def extract_zoo_activations(
    evaluation_sequences: dict[str, np.ndarray],
    evaluation_index: pd.DataFrame,
    tokenizer,
    weights: dict[str, torch.Tensor],
    config: dict[str, Any],
    *,
    settings: ActivationParameters,
    model_name: str,
    spec: str | None = None,
) -> tuple[ActivationStream, pd.DataFrame]:
    """Residual streams of a zoo model (``spec``, default ``zoo:<its name>``; ``?weights=initial`` for its
    initialisation) on the evaluation sequences (corpus tokenizer).

    The corpus pipeline packs them (``packed`` layout); with ``activations.packing: sentence``
    they are re-laid one text per row (:func:`one_text_per_row`, the same rows as packing the
    texts with ``packing="sentence"``) and the returned index table is that layout's.
    """
    if settings.packing == "sentence":
        evaluation_sequences, evaluation_index = one_text_per_row(evaluation_index, text_wrapping(tokenizer).pad)
    handle = load_saved_zoo_model(
        weights,
        config,
        tokenizer,
        name=model_name,
        spec=spec,
        device=model_device(settings, model_name),
        dtype=compute_dtype(settings),
    )
    return activation_stream(handle, evaluation_sequences, settings, model_name), evaluation_index


def extract_external_activations(
    evaluation_texts: pd.DataFrame, *, settings: ActivationParameters, model_name: str, spec: str, n_ctx: int
) -> tuple[ActivationStream, pd.DataFrame]:
    """Residual streams of a hub / local / GGUF / TransformerLens model, with its own tokenizer.

    The evaluation texts are packed with the model's tokenizer and its own special-token
    convention into rows of ``n_ctx`` (``activations.n_ctx``, else ``corpus.n_ctx``) tokens, in
    the ``activations.packing`` layout; longer texts are split at words (counted in the log).
    The index table maps each token to its sentence and word so methods can compare models
    whose tokenizers differ. The model is loaded for the ``residual_streams`` view: a
    checkpoint without LM head (a sentence encoder) is fine, one lacking embedding or block
    weights raises ``MissingWeightsError`` naming them.
    """
    handle = load_model(
        spec,
        name=model_name,
        device=model_device(settings, model_name),
        dtype=compute_dtype(settings),
        view="residual_streams",
    )
    if handle.tokenizer is None:
        raise ModelSourceError(
            f"model spec {spec!r} ({model_name}) came without a tokenizer: put its tokenizer files beside the weights"
        )
    check_packable(handle.tokenizer, n_ctx, what=f"activations.models.{model_name} ({spec})")
    sequences, index = pack_evaluation_sequences(evaluation_texts, handle.tokenizer, n_ctx, settings.packing)
    return activation_stream(handle, sequences, settings, model_name), index
