"""A real pretrained encoder (``packaged:minilm``, ``hf:<dir or id>``) as a zoo-style encoder artifact: the
``(weights, config)`` pair that :func:`thinkalike.models.finetune.finetune_classifier` fine-tunes into copies, as it
does the zoo's own masked encoder (issue 58: Brown et al.'s NLI question on MiniLM).

The config is an ``hf``-family zoo config (``objective: masked``, ``hf_config`` the checkpoint's transformers config,
``source`` the spec it came from); the weights are the base model's, keyed as the model type's token classifier
holds them (``<base_model_prefix>.…``, e.g. ``bert.encoder.layer.0…``). Left out: the checkpoint's pooler (a token
classifier has none) and any LM head (outside the base model; the classifier's own head is drawn per copy).
"""

from __future__ import annotations

from typing import Any

import torch

from thinkalike.models.handle import ModelSourceError
from thinkalike.models.sources import load_model

#: Keys of a transformers config that a zoo config does not carry (the version and the path it was read from).
_VOLATILE_CONFIG_KEYS = ("transformers_version", "_name_or_path")


def checkpoint_shape(spec: str) -> tuple[int, int]:
    """``(layers, positions)`` of the masked-LM encoder ``spec`` names, from its config alone (no weights read): the
    check before a run. A :class:`ModelSourceError` naming the spec for a spec that is no local ``hf:`` / ``packaged:``
    checkpoint, or a config without those fields."""
    from transformers import AutoConfig

    from thinkalike.models.sources import check_model_spec, resolve_checkpoint_dir

    check_model_spec(spec)
    where = resolve_checkpoint_dir(spec)
    try:
        config = AutoConfig.from_pretrained(where)
    except Exception as error:  # noqa: BLE001 - transformers raises many kinds; the message names the spec
        raise ModelSourceError(
            f"model spec {spec!r}: cannot read its config ({type(error).__name__}: {error})"
        ) from None
    layers, positions = getattr(config, "num_hidden_layers", None), getattr(config, "max_position_embeddings", None)
    if not isinstance(layers, int) or not isinstance(positions, int):
        raise ModelSourceError(f"model spec {spec!r}: its config gives no num_hidden_layers / max_position_embeddings")
    return layers, positions


def import_encoder(spec: str, name: str) -> tuple[dict[str, torch.Tensor], dict[str, Any], Any]:
    """``(weights, config, tokenizer)`` of the encoder ``spec`` names (module docstring), on the CPU in float32;
    a :class:`ModelSourceError` naming the spec for a checkpoint that is not a masked-LM encoder."""
    handle = load_model(spec, name=name, device="cpu", dtype="float32", view="residual_streams")
    module = handle.module
    config = getattr(module, "config", None)
    if config is None or handle.is_causal:
        raise ModelSourceError(f"model spec {spec!r}: the NLI copies fine-tune a masked-LM encoder (BERT-like)")
    base = getattr(module, "base_model", module)
    prefix = str(getattr(module, "base_model_prefix", "") or "")
    if not prefix:
        raise ModelSourceError(f"model spec {spec!r}: {type(module).__name__} names no base model prefix")
    weights = {
        f"{prefix}.{key}": value.detach().to(torch.float32).contiguous().clone()
        for key, value in base.state_dict().items()
        if not key.startswith("pooler.")
    }
    hf_config = {key: value for key, value in config.to_dict().items() if key not in _VOLATILE_CONFIG_KEYS}
    zoo_config = {"name": name, "family": "hf", "objective": "masked", "hf_config": hf_config, "source": spec}
    return weights, zoo_config, handle.tokenizer
