"""Model specs and the single loader that turns one into a :class:`ModelHandle`.

Spec grammar: ``<source>:<target>[?key=value&key=value]``

==========================================  ================================================
spec                                        meaning
==========================================  ================================================
``zoo:<name>``                              a zoo model from ``zoo_artifacts[name]`` =
                                            ``(config dict, state dict)``
``hf:<local directory>``                    a ``save_pretrained`` directory (config.json)
``hf:<hub id>[?revision=R]``                a Hugging Face hub id (with ``HF_HUB_OFFLINE=1``
                                            it must already be in the local cache)
``gguf:<file.gguf>``                        a GGUF file, loaded by transformers
``gguf:<directory or hub id>::<file.gguf>`` a GGUF file inside a directory / hub repo
``tl:<architecture>[?weights=<path>]``      a TransformerLens 4 ``TransformerBridge``,
                                            optionally with local weights
==========================================  ================================================

Options: ``revision`` (hf, gguf hub repos), ``trust_remote_code=true`` (hf only; also the
``trust_remote_code`` argument), ``weights`` (tl). A local path is anything that exists, or that
starts with ``/``, ``.``, ``~`` or contains more than one ``/``; other targets are hub ids.

Only safe formats are loaded: safetensors where the checkpoint has them, otherwise
``torch.load(weights_only=True)`` (transformers' ``weights_only=True``); remote code only on
request. Every error is a :class:`ModelSourceError` whose message contains the spec.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from thinkalike.models.handle import (
    ModelHandle,
    ModelSourceError,
    UnsupportedArchitectureError,
    default_device,
)

SOURCES: tuple[str, ...] = ("zoo", "hf", "gguf", "tl")
_OPTIONS: dict[str, frozenset[str]] = {
    "zoo": frozenset(),
    "hf": frozenset({"revision", "trust_remote_code"}),
    "gguf": frozenset({"revision"}),
    "tl": frozenset({"weights"}),
}
_TRUE = frozenset({"1", "true", "yes", "on"})
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
_WEIGHT_FILES = _SAFETENSORS_FILES + ("pytorch_model.bin", "pytorch_model.bin.index.json")


# ---------------------------------------------------------------------- parsing
def _split(spec: str) -> tuple[str, str, dict[str, str]]:
    if not isinstance(spec, str) or ":" not in spec:
        raise ModelSourceError(f"model spec {spec!r}: expected '<source>:<target>' with source in {SOURCES}")
    source, rest = spec.split(":", 1)
    if source not in SOURCES:
        raise ModelSourceError(f"model spec {spec!r}: unknown source {source!r} (known: {', '.join(SOURCES)})")
    options: dict[str, str] = {}
    if "?" in rest:
        rest, query = rest.split("?", 1)
        for item in filter(None, query.split("&")):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ModelSourceError(f"model spec {spec!r}: option {item!r} is not key=value")
            options[key] = value
    if not rest:
        raise ModelSourceError(f"model spec {spec!r}: empty target after {source!r}:")
    unknown = set(options) - _OPTIONS[source]
    if unknown:
        raise ModelSourceError(f"model spec {spec!r}: unknown option(s) {sorted(unknown)} for source {source!r} "
                               f"(allowed: {sorted(_OPTIONS[source]) or 'none'})")
    return source, rest, options


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``(source, target)`` of a spec, options stripped; raises :class:`ModelSourceError`."""
    source, target, _ = _split(spec)
    return source, target


def spec_options(spec: str) -> dict[str, str]:
    """The ``?key=value&...`` options of a spec (validated against its source)."""
    return _split(spec)[2]


def _looks_like_path(target: str) -> bool:
    return (os.path.exists(os.path.expanduser(target)) or target.startswith(("/", ".", "~"))
            or target.count("/") > 1 or "\\" in target)


def _hub_offline() -> bool:
    try:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            return True
    except ImportError:  # pragma: no cover
        pass
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def _cached_hub_file(repo_id: str, filename: str, revision: str | None) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, filename, revision=revision)
    return found if isinstance(found, str) else None


def _gguf_location(spec: str, target: str) -> tuple[str, str, bool]:
    """``(directory or repo id, file name, is_local)`` of a gguf target."""
    if "::" in target:
        where, filename = target.split("::", 1)
        if not filename:
            raise ModelSourceError(f"model spec {spec!r}: empty GGUF file name after '::'")
        local = _looks_like_path(where)
        return (os.path.expanduser(where) if local else where), filename, local
    path = Path(os.path.expanduser(target))
    return str(path.parent), path.name, True


def _trusts_remote_code(options: Mapping[str, str], trust_remote_code: bool) -> bool:
    return bool(trust_remote_code) or options.get("trust_remote_code", "").strip().lower() in _TRUE


def _check_hf_config(spec: str, config: dict, trusted: bool) -> None:
    from transformers import CONFIG_MAPPING

    model_type = config.get("model_type")
    if model_type in CONFIG_MAPPING:
        return
    if config.get("auto_map"):
        if not trusted:
            raise ModelSourceError(
                f"model spec {spec!r}: model_type {model_type!r} needs the repository's own code (auto_map); "
                "it is not run unless asked: add '?trust_remote_code=true' to the spec (or pass "
                "trust_remote_code=True) if you trust it")
        return
    raise UnsupportedArchitectureError(f"model spec {spec!r}: transformers does not know model_type {model_type!r}")


def _read_json(spec: str, path: str | Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ModelSourceError(f"model spec {spec!r}: cannot read {path}: {exc}") from exc


def _check_hf(spec: str, target: str, options: Mapping[str, str], trusted: bool) -> dict:
    """Validate an hf target; returns ``{"local": bool, "path_or_id": str, "safetensors": bool}``."""
    if _looks_like_path(target):
        path = Path(os.path.expanduser(target))
        if not path.exists():
            raise ModelSourceError(f"model spec {spec!r}: no such directory {str(path)!r}")
        if not path.is_dir():
            raise ModelSourceError(f"model spec {spec!r}: {str(path)!r} is not a directory "
                                   "(a GGUF file is loaded with 'gguf:<file>')")
        if not (path / "config.json").is_file():
            raise ModelSourceError(f"model spec {spec!r}: {str(path)!r} has no config.json "
                                   "(expected a save_pretrained directory)")
        if not any((path / f).is_file() for f in _WEIGHT_FILES):
            raise ModelSourceError(f"model spec {spec!r}: {str(path)!r} has no weights ({', '.join(_WEIGHT_FILES)})")
        _check_hf_config(spec, _read_json(spec, path / "config.json"), trusted)
        return {"local": True, "path_or_id": str(path),
                "safetensors": any((path / f).is_file() for f in _SAFETENSORS_FILES)}
    if not _HUB_ID.match(target):
        raise ModelSourceError(f"model spec {spec!r}: {target!r} is neither an existing path nor a hub id")
    revision = options.get("revision")
    config_path = _cached_hub_file(target, "config.json", revision)
    if config_path is None:
        if _hub_offline():
            raise ModelSourceError(
                f"model spec {spec!r}: hub id {target!r} is not in the local Hugging Face cache and the hub is "
                "offline (HF_HUB_OFFLINE=1); download it where the hub is reachable, or point 'hf:' at a local "
                "directory")
        return {"local": False, "path_or_id": target, "safetensors": None}
    _check_hf_config(spec, _read_json(spec, config_path), trusted)
    safetensors = any(_cached_hub_file(target, f, revision) for f in _SAFETENSORS_FILES)
    return {"local": False, "path_or_id": target, "safetensors": True if safetensors else None}


def _check_gguf(spec: str, target: str, options: Mapping[str, str]) -> tuple[str, str]:
    where, filename, local = _gguf_location(spec, target)
    if local:
        file_path = Path(where) / filename
        if not file_path.is_file():
            raise ModelSourceError(f"model spec {spec!r}: no such GGUF file {str(file_path)!r}")
    else:
        if not _HUB_ID.match(where):
            raise ModelSourceError(f"model spec {spec!r}: {where!r} is neither an existing path nor a hub id")
        cached = _cached_hub_file(where, filename, options.get("revision"))
        if cached is None:
            if _hub_offline():
                raise ModelSourceError(f"model spec {spec!r}: {filename!r} of hub repo {where!r} is not in the "
                                       "local cache and the hub is offline (HF_HUB_OFFLINE=1)")
            return where, filename
        file_path = Path(cached)
    try:
        import gguf
    except ImportError as exc:  # pragma: no cover
        raise ModelSourceError(f"model spec {spec!r}: the 'gguf' package is needed to read GGUF files") from exc
    try:
        reader = gguf.GGUFReader(str(file_path))
        field = reader.get_field("general.architecture")
        architecture = field.contents() if field is not None else None
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not a readable GGUF"
        raise ModelSourceError(f"model spec {spec!r}: {str(file_path)!r} is not a readable GGUF file: {exc}") from exc
    if architecture is None:
        raise ModelSourceError(f"model spec {spec!r}: GGUF file has no general.architecture")
    try:
        from transformers.modeling_gguf_pytorch_utils import (
            GGUF_SUPPORTED_ARCHITECTURES,
        )
    except ImportError:  # pragma: no cover - layout of transformers changed; let loading decide
        GGUF_SUPPORTED_ARCHITECTURES = None
    if GGUF_SUPPORTED_ARCHITECTURES is not None and architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise UnsupportedArchitectureError(
            f"model spec {spec!r}: transformers cannot load GGUF architecture {architecture!r}")
    return where, filename


def _check_tl(spec: str, options: Mapping[str, str]) -> str | None:
    weights = options.get("weights")
    if weights is not None:
        weights = os.path.expanduser(weights)
        if not os.path.exists(weights):
            raise ModelSourceError(f"model spec {spec!r}: no such weights path {weights!r}")
    return weights


def check_model_spec(spec: str, zoo_names: Iterable[str] | None = None, *, trust_remote_code: bool = False) -> None:
    """All cheap checks of a spec, loading no weights (so a pipeline fails before any compute).

    ``zoo_names``: the known zoo models; when ``None`` a zoo name is not checked.
    """
    source, target, options = _split(spec)
    if source == "zoo":
        if zoo_names is not None:
            names = sorted(zoo_names)
            if target not in names:
                raise ModelSourceError(f"model spec {spec!r}: unknown zoo model {target!r} (known: {names})")
    elif source == "hf":
        _check_hf(spec, target, options, _trusts_remote_code(options, trust_remote_code))
    elif source == "gguf":
        _check_gguf(spec, target, options)
    elif source == "tl":
        _check_tl(spec, options)


# ---------------------------------------------------------------------- loading
def _dtype(spec: str, dtype: torch.dtype | str | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ModelSourceError(f"model spec {spec!r}: unknown dtype {dtype!r}")
    return resolved


def _causal_or_masked(spec: str, config) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    architectures = list(getattr(config, "architectures", None) or [])
    if any("MaskedLM" in a for a in architectures):
        return AutoModelForMaskedLM
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or getattr(config, "auto_map", None):
        return AutoModelForCausalLM
    if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return AutoModelForMaskedLM
    raise UnsupportedArchitectureError(
        f"model spec {spec!r}: model_type {config.model_type!r} has no causal or masked LM head in transformers")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _load_tokenizer(spec: str, path_or_id: str, **kwargs) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path_or_id, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types here
        raise ModelSourceError(f"model spec {spec!r}: cannot load its tokenizer ({type(exc).__name__}: {exc}); "
                               "pass tokenizer=... to load_model") from exc
    # transformers 5 silently builds an *empty* tokenizer class from model_type when no tokenizer
    # files exist; a vocabulary of nothing but special tokens means there was no tokenizer.
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        raise ModelSourceError(f"model spec {spec!r}: has no tokenizer files (the tokenizer transformers built "
                               f"has {len(tokenizer)} token(s)); pass tokenizer=... to load_model")
    return tokenizer


def _wrap_hf(spec: str, name: str, module: torch.nn.Module, tokenizer, is_causal: bool | None = None) -> ModelHandle:
    from thinkalike.models.hf import HFModelHandle

    try:
        return HFModelHandle(name, spec, module, tokenizer, is_causal=is_causal)
    except UnsupportedArchitectureError as exc:
        message = str(exc)
        raise UnsupportedArchitectureError(message if spec in message else f"model spec {spec!r}: {message}") from exc


def _load_zoo(spec, target, name, zoo_artifacts, tokenizer, device, dtype) -> ModelHandle:
    from thinkalike.models.architectures import build_zoo_module

    if zoo_artifacts is None or target not in zoo_artifacts:
        known = sorted(zoo_artifacts) if zoo_artifacts is not None else []
        raise ModelSourceError(f"model spec {spec!r}: unknown zoo model {target!r} (known: {known})")
    config, state_dict = zoo_artifacts[target]
    try:
        module = build_zoo_module(config)
    except ModelSourceError as exc:
        raise type(exc)(f"model spec {spec!r}: {exc}") from exc
    try:
        module.load_state_dict(dict(state_dict), strict=True)
    except RuntimeError as exc:
        raise ModelSourceError(f"model spec {spec!r}: state dict does not match its config: {exc}") from exc
    module.to(device=device, dtype=dtype).eval()
    if config.get("family") == "bridge":
        from thinkalike.models.bridge import BridgeHandle

        return BridgeHandle.from_module(name, spec, module, tokenizer)
    return _wrap_hf(spec, name, module, tokenizer, is_causal=config.get("objective", "causal") == "causal")


def _load_hf(spec, target, options, name, tokenizer, device, dtype, trusted) -> ModelHandle:
    info = _check_hf(spec, target, options, trusted)
    path_or_id = info["path_or_id"]
    common: dict[str, Any] = {"trust_remote_code": trusted}
    if options.get("revision"):
        common["revision"] = options["revision"]
    return _from_pretrained(spec, path_or_id, common, name, tokenizer, device, dtype, "loading failed",
                            use_safetensors=info["safetensors"], weights_only=True)


def _from_pretrained(spec, where, common: dict[str, Any], name, tokenizer, device, dtype, failure: str,
                     **weights_options: Any) -> ModelHandle:
    """Config, then causal/masked weights, then tokenizer from ``where``; any failure names the spec."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(where, **common)
        auto = _causal_or_masked(spec, config)
        module = auto.from_pretrained(where, config=config, **weights_options, **common,
                                      **({"dtype": dtype} if dtype else {}))
    except ModelSourceError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ModelSourceError(f"model spec {spec!r}: {failure} ({type(exc).__name__}: {exc})") from exc
    module.to(device).eval()
    if tokenizer is None:
        tokenizer = _load_tokenizer(spec, where, **common)
    return _wrap_hf(spec, name, module, tokenizer)


def _load_gguf(spec, target, options, name, tokenizer, device, dtype) -> ModelHandle:
    where, filename = _check_gguf(spec, target, options)
    common: dict[str, Any] = {"gguf_file": filename}
    if options.get("revision"):
        common["revision"] = options["revision"]
    return _from_pretrained(spec, where, common, name, tokenizer, device, dtype, "loading the GGUF file failed")


def load_model(spec: str, *, name: str | None = None,
               zoo_artifacts: Mapping[str, tuple[dict, dict]] | None = None, tokenizer=None,
               device: str | torch.device | None = None, dtype: torch.dtype | str | None = None,
               trust_remote_code: bool = False) -> ModelHandle:
    """Load the model a spec names and wrap it in a :class:`ModelHandle` (eval mode).

    ``name`` defaults to the spec's target. ``tokenizer``: used as given; when ``None`` it is
    loaded from the hf / gguf source, and for tl from tokenizer files beside local weights (zoo
    sources, and tl without such files, keep ``None`` unless given). ``device``:
    CUDA when available if ``None``. ``dtype``: a torch dtype or its name; ``None`` keeps the
    checkpoint's.
    """
    source, target, options = _split(spec)
    name = name or target
    device_ = default_device(device)
    dtype_ = _dtype(spec, dtype)
    if source == "zoo":
        return _load_zoo(spec, target, name, zoo_artifacts, tokenizer, device_, dtype_)
    if source == "hf":
        return _load_hf(spec, target, options, name, tokenizer, device_, dtype_,
                        _trusts_remote_code(options, trust_remote_code))
    if source == "gguf":
        return _load_gguf(spec, target, options, name, tokenizer, device_, dtype_)
    # source == "tl"
    weights = _check_tl(spec, options)
    from thinkalike.models.bridge import load_bridge_handle

    if tokenizer is None and weights and any(Path(weights, f).is_file() for f in TOKENIZER_FILES):
        tokenizer = _load_tokenizer(spec, weights)

    try:
        handle = load_bridge_handle(target, weights, tokenizer, name)
    except ModelSourceError as exc:
        if spec in str(exc):
            raise
        raise type(exc)(f"model spec {spec!r}: {exc}") from exc
    if handle.spec != spec:
        handle.spec = spec
    return handle.to(device=device_, dtype=dtype_)
