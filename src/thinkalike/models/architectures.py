"""Zoo model modules, built from a plain config dict (so a zoo model is ``(config, state_dict)``).

Config dict layout::

    {"name": str, "family": "hf", "objective": "causal" | "masked",
     "hf_config": {...}}            # PretrainedConfig.to_dict(), with model_type and architectures
    {"name": str, "family": "bridge", "objective": "causal",
     "bridge_config": {...}}        # see thinkalike.models.bridge

Everything in the dict is JSON-serialisable.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from thinkalike.models.handle import ModelSourceError
from thinkalike.models.zoo_entry import OBJECTIVES, objective_of

_DROP_KEYS = ("model_type", "transformers_version", "_name_or_path")


def _model_name(config: dict) -> str:
    return str(config.get("name", "<unnamed zoo model>")) if isinstance(config, dict) else repr(config)


def _auto_class(objective: str, name: str):
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    if objective == "causal":
        return AutoModelForCausalLM
    if objective == "masked":
        return AutoModelForMaskedLM
    raise ModelSourceError(f"zoo model {name!r}: objective must be one of {OBJECTIVES}, got {objective!r}")


def _token_classifier_class():
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification


def _lm_class_name(objective: str, model_type: str, name: str) -> str:
    """The name of the transformers class of ``objective``'s language model for ``model_type`` (``gpt_neox``,
    causal: ``GPTNeoXForCausalLM``), from the auto classes' name tables. Asking ``AutoModelForCausalLM``'s mapping
    for the class itself imports the architecture's modeling module and transformers' model-loading code, which the
    parameter check before a run has no use for."""
    from transformers.models.auto import modeling_auto

    names = {
        "causal": modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "masked": modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    }[objective]
    class_name = names.get(model_type)
    if not isinstance(class_name, str):
        raise ModelSourceError(f"zoo model {name!r}: no {objective} LM class for model_type {model_type!r}")
    return class_name


def _hf_config(config: dict):
    from transformers import AutoConfig

    name = _model_name(config)
    hf = config.get("hf_config")
    if not isinstance(hf, dict) or "model_type" not in hf:
        raise ModelSourceError(f"zoo model {name!r}: 'hf_config' must be a dict with a 'model_type'")
    _check_model_type(hf["model_type"], name)
    rest = {k: v for k, v in hf.items() if k not in _DROP_KEYS}
    return AutoConfig.for_model(hf["model_type"], **rest)


def _check_model_type(model_type: str, name: str) -> None:
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise ModelSourceError(f"zoo model {name!r}: unknown transformers model_type {model_type!r}")


@contextlib.contextmanager
def _seeded(seed: int | None):
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def build_zoo_module(config: dict, seed: int | None = None) -> torch.nn.Module:
    """A freshly initialised module for a zoo config (``seed`` makes the init deterministic
    without touching the global RNG state)."""
    name = _model_name(config)
    if not isinstance(config, dict):
        raise ModelSourceError(f"zoo model {name}: config must be a dict")
    family = config.get("family")
    if family == "hf":
        # a fine-tuned copy (thinkalike.models.finetune): the per-position class head of transformers' token
        # classifier, whose logits the copy pools; else the objective's language model
        auto = _token_classifier_class() if "classifier" in config else _auto_class(objective_of(config), name)
        hf_config = _hf_config(config)
        with _seeded(seed):
            try:
                return auto.from_config(hf_config)
            except ValueError as exc:
                raise ModelSourceError(
                    f"zoo model {name!r}: no {config.get('objective')} LM class for model_type "
                    f"{hf_config.model_type!r} ({exc})"
                ) from exc
    if family == "bridge":
        from thinkalike.models.bridge import build_bridge_module

        bridge_config = config.get("bridge_config")
        if not isinstance(bridge_config, dict):
            raise ModelSourceError(f"zoo model {name!r}: family 'bridge' needs a 'bridge_config' dict")
        with _seeded(seed):
            return build_bridge_module(bridge_config)
    raise ModelSourceError(f"zoo model {name!r}: unknown family {family!r} (expected 'hf' or 'bridge')")


def zoo_logits(
    module: torch.nn.Module, config: dict, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits ``(batch, seq, d_vocab)`` of a zoo module of either family."""
    family = config.get("family")
    if family == "hf":
        return module(input_ids=input_ids, attention_mask=attention_mask).logits
    if family == "bridge":
        from thinkalike.models.bridge import bridge_logits

        return bridge_logits(module, input_ids, attention_mask)
    raise ModelSourceError(f"zoo model {_model_name(config)!r}: unknown family {family!r}")


def hf_zoo_config(name: str, model_type: str, objective: str, **kwargs: Any) -> dict:
    """The zoo config dict of a transformers model, e.g.
    ``hf_zoo_config("neox-s", "gpt_neox", "causal", hidden_size=64, num_hidden_layers=2, ...)``."""
    from transformers import AutoConfig

    _auto_class(objective, name)  # names a bad objective
    _check_model_type(model_type, name)
    hf_config = AutoConfig.for_model(model_type, **kwargs)
    hf_config.architectures = [_lm_class_name(objective, hf_config.model_type, name)]
    as_dict = hf_config.to_dict()
    as_dict.pop("transformers_version", None)
    as_dict.pop("_name_or_path", None)
    return {"name": name, "family": "hf", "objective": objective, "hf_config": as_dict}
