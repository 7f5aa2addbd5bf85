"""TransformerLens 4 ``TransformerBridge`` models: native zoo architectures and ``tl:`` sources.

TransformerLens 4 removed ``HookedTransformer``; its replacement is
``transformer_lens.model_bridge.TransformerBridge``. This module provides

* :func:`build_bridge_module` — a trainable, deterministic TL-native transformer built from a
  plain JSON-serialisable dict (see :data:`DEFAULT_BRIDGE_CONFIG`), used by the zoo (GeLU vs
  SoLU is one of the paper experiments). Persist it as that dict + ``module.state_dict()``
  (``safetensors.torch.save_file`` works as is: keys are TL names, no shared tensors) and restore
  with ``build_bridge_module(config).load_state_dict(state, strict=True)``;
* :func:`bridge_logits` — differentiable logits for the training loop;
* :class:`BridgeHandle` — the :class:`~thinkalike.models.handle.ModelHandle` view of any bridge
  (native or wrapping a Hugging Face model) through its hook points;
* :func:`load_bridge_handle` — the ``tl:<architecture>`` source: wrap a local Hugging Face
  checkpoint (a directory, or a hub id already in the local cache) with
  ``TransformerBridge.boot_transformers`` without any hub call.

Hook points used (verified on transformer-lens 4.3, native and GPT-2 adapters):
``blocks.0.hook_resid_pre`` (= ``hook_embed`` + ``hook_pos_embed``) and
``blocks.{i}.hook_resid_post``. The last residual stream (``blocks.{n-1}.hook_resid_post``) is
the last block's output before ``ln_final``; with ``final_norm=True``
(``ModelHandle.layer_streams``, ``activations.final_norm``) ``ln_final``'s output is added as
one more layer (``ln_final.hook_normalized`` / ``hook_out``; for a ``tl:`` source, transformers'
``hidden_states[-1]``). A model built with ``normalization_type: null`` has no final norm and
raises :class:`~thinkalike.models.handle.NoFinalNormError`. Importing this module does not
import transformer_lens; it is imported lazily (set ``HF_HUB_OFFLINE=1`` first on air-gapped
machines).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from thinkalike.models.handle import (
    ModelDimensions,
    ModelHandle,
    ModelSourceError,
    UnsupportedArchitectureError,
    first_tensor,
    running_only_blocks_from,
    substitute_input,
)
from thinkalike.models.native_forward import native_forward

if TYPE_CHECKING:  # transformer_lens is imported lazily (_tl)
    from transformer_lens.model_bridge import TransformerBridge

__all__ = [
    "ACT_FNS",
    "DEFAULT_BRIDGE_CONFIG",
    "EXTRA_BRIDGE_CONFIG_KEYS",
    "BridgeHandle",
    "bridge_logits",
    "build_bridge_module",
    "load_bridge_handle",
    "resolve_bridge_config",
]

#: Keys of a zoo bridge config and their defaults. ``None`` means "derived":
#: ``d_head = d_model // n_heads``, ``d_mlp = 4 * d_model``, ``initializer_range = 0.8/sqrt(d_model)``
#: (TransformerLens' "gpt2" init; output projections are additionally scaled by 1/sqrt(2 n_layers)).
#: ``d_vocab`` has no default (it is the tokenizer's vocabulary size) and must be given.
DEFAULT_BRIDGE_CONFIG: dict[str, Any] = {
    "d_model": 64,
    "n_layers": 2,
    "n_heads": 4,
    "d_head": None,
    "d_mlp": None,
    "d_vocab": None,
    "n_ctx": 128,
    "act_fn": "gelu",  # "gelu" (exact erf GeLU) or "solu_ln" (x*softmax(x) then a LayerNorm, Elhage et al.)
    "normalization_type": "LN",  # "LN", "LNPre", "RMS", "RMSPre" or None
    "positional_embedding_type": "standard",  # "standard" (learned absolute) or "rotary"
    "attention_dir": "causal",  # "causal" or "bidirectional"
    "attn_only": False,
    "eps": 1e-5,
    "init_mode": "gpt2",
    "initializer_range": None,
    "seed": 0,
}

#: Further ``TransformerBridgeConfig`` fields that may be given (no default here: TL's applies).
EXTRA_BRIDGE_CONFIG_KEYS: frozenset[str] = frozenset(
    {
        "gated_mlp",
        "final_rms",
        "rotary_dim",
        "rotary_base",
        "n_key_value_heads",
        "d_vocab_out",
        "attn_scores_soft_cap",
        "output_logits_soft_cap",
        "use_attn_scale",
        "attn_scale",
    }
)

#: Activations of TL's native MLP; "gelu" and "solu_ln" are the ones the experiments use.
ACT_FNS: frozenset[str] = frozenset({"gelu", "gelu_new", "relu", "silu", "solu", "solu_ln"})


def _tl():
    """Import transformer_lens lazily (it pulls in transformers and huggingface_hub)."""
    from transformer_lens.config import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge, TransformerBridgeConfig


# --------------------------------------------------------------------------- native models


def resolve_bridge_config(bridge_config: Mapping[str, Any]) -> dict[str, Any]:
    """Fill in defaults and derived values of a zoo bridge config; validate it.

    Returns a new JSON-serialisable dict with every key of :data:`DEFAULT_BRIDGE_CONFIG`
    (plus any given :data:`EXTRA_BRIDGE_CONFIG_KEYS`) resolved to a concrete value.
    """
    unknown = set(bridge_config) - set(DEFAULT_BRIDGE_CONFIG) - EXTRA_BRIDGE_CONFIG_KEYS
    if unknown:
        raise ValueError(
            f"unknown bridge config key(s) {sorted(unknown)}; known: "
            f"{sorted(set(DEFAULT_BRIDGE_CONFIG) | EXTRA_BRIDGE_CONFIG_KEYS)}"
        )
    cfg = {**DEFAULT_BRIDGE_CONFIG, **dict(bridge_config)}
    if cfg["d_vocab"] is None:
        raise ValueError("bridge config needs 'd_vocab' (the tokenizer's vocabulary size)")
    for key in ("d_model", "n_layers", "n_heads", "d_vocab", "n_ctx"):
        cfg[key] = int(cfg[key])
        if cfg[key] <= 0:
            raise ValueError(f"bridge config {key!r} must be positive, got {cfg[key]}")
    if cfg["d_head"] is None:
        if cfg["d_model"] % cfg["n_heads"]:
            raise ValueError(
                f"d_model ({cfg['d_model']}) is not divisible by n_heads ({cfg['n_heads']}); give d_head explicitly"
            )
        cfg["d_head"] = cfg["d_model"] // cfg["n_heads"]
    if cfg["d_mlp"] is None:
        cfg["d_mlp"] = 4 * cfg["d_model"]
    cfg["d_head"], cfg["d_mlp"] = int(cfg["d_head"]), int(cfg["d_mlp"])
    act_fn = str(cfg["act_fn"]).lower()
    if act_fn not in ACT_FNS:
        raise ValueError(f"act_fn {cfg['act_fn']!r} is not supported; use one of {sorted(ACT_FNS)}")
    cfg["act_fn"] = act_fn
    pos = str(cfg["positional_embedding_type"]).lower()
    if pos not in ("standard", "rotary"):
        raise ValueError(f"positional_embedding_type must be 'standard' or 'rotary', got {pos!r}")
    cfg["positional_embedding_type"] = pos
    if cfg["attention_dir"] not in ("causal", "bidirectional"):
        raise ValueError(f"attention_dir must be 'causal' or 'bidirectional', got {cfg['attention_dir']!r}")
    norm = cfg["normalization_type"]
    if norm is not None and str(norm).upper() not in ("LN", "LNPRE", "RMS", "RMSPRE"):
        raise ValueError(f"normalization_type must be LN, LNPre, RMS, RMSPre or None, got {norm!r}")
    if cfg["initializer_range"] is None:
        cfg["initializer_range"] = -1.0  # TL sentinel: 0.8/sqrt(d_model) for init_mode "gpt2"
    cfg["initializer_range"] = float(cfg["initializer_range"])
    if cfg["seed"] is None:
        raise ValueError("bridge config 'seed' must be an integer (zoo models are deterministic)")
    cfg["seed"] = int(cfg["seed"])
    return cfg


def build_bridge_module(bridge_config: Mapping[str, Any]) -> torch.nn.Module:
    """A trainable TL-native ``TransformerBridge`` built from a plain dict (see :data:`DEFAULT_BRIDGE_CONFIG`).

    Deterministic given ``seed`` (TransformerLens initialises with a scoped generator, so the
    caller's global RNG is not perturbed). The module is in train mode on the CPU, float32.
    ``module.parameters()`` are the underlying native model's parameters (each once);
    ``module.state_dict()`` has stable TL-style keys (``embed.weight``, ``blocks.0.attn.q.weight``,
    ``blocks.0.mlp.ln.weight`` for SoLU, ``unembed.bias`` — a zero buffer —, ...).
    """
    cfg = resolve_bridge_config(bridge_config)
    TransformerBridge, TransformerBridgeConfig = _tl()
    tl_cfg = TransformerBridgeConfig(device="cpu", dtype=torch.float32, model_name="thinkalike-native", **cfg)
    module = TransformerBridge.boot_native(tl_cfg, device="cpu", model_name="thinkalike-native")
    module.train()
    return quiet_device_moves(module)


def _to_quietly(module: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
    kwargs.setdefault("print_details", False)
    return type(module).to(module, *args, **kwargs)


def quiet_device_moves(module: torch.nn.Module) -> torch.nn.Module:
    """Silences "Moving model to device: …" on this TransformerBridge's ``to``/``cpu``/``cuda``.

    ``TransformerBridge.to`` prints that line (``print``, not logging) on every device move
    unless called with ``print_details=False``, TransformerLens's own switch. Generic code (the
    trainer, the model loaders) moves modules with a plain ``.to(device)``, which cannot pass a
    TransformerLens-only keyword, so this instance's ``to`` passes it by default; an explicit
    ``print_details=True`` still prints. Returns ``module``.
    """
    module.to = functools.partial(_to_quietly, module)  # type: ignore[method-assign]  # this instance's own to()
    return module


def bridge_logits(
    module: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits ``(batch, seq, d_vocab)`` of a TransformerBridge; differentiable.

    ``attention_mask`` is a 0/1 padding mask ``(batch, seq)``; with left padding TL derives the
    position ids from it. Inputs longer than ``n_ctx`` raise (native models). A native zoo bridge without
    hooks runs :mod:`thinkalike.models.native_forward`'s plain forward pass (the same function to float
    round-off, about twice as fast on the zoo's sizes).
    """
    if attention_mask is not None:
        attention_mask = attention_mask.to(input_ids.device)
    fast = native_forward(module, input_ids.shape[-1], attention_mask)
    if fast is not None:
        return fast.logits(input_ids, attention_mask)
    return module(input_ids, return_type="logits", attention_mask=attention_mask)


# --------------------------------------------------------------------------- handle


def _residual_hook_name(layer: int) -> str:
    return "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"


class _ResidualsCaptured(Exception):
    """Stops a forward pass once every residual stream has been captured."""


class BridgeHandle(ModelHandle):
    """:class:`ModelHandle` over a ``TransformerBridge`` (native or wrapping a HF model).

    Residual streams are read (and replaced) at ``blocks.0.hook_resid_pre`` and
    ``blocks.{i}.hook_resid_post``; the last one is pre-``ln_final`` unless ``final_norm`` is asked
    for (:meth:`final_norm_output`). Parameter accessors return detached tensors in
    TransformerLens shapes, as the bridge currently holds them (raw HF weights unless
    ``enable_compatibility_mode()`` was called on the bridge).
    """

    module: TransformerBridge  # what from_module accepts (a TransformerBridge's attributes are typed Any)

    @classmethod
    def from_module(cls, name: str, spec: str, module: torch.nn.Module, tokenizer) -> BridgeHandle:
        cfg = getattr(module, "cfg", None)
        if cfg is None or not hasattr(module, "blocks"):
            raise UnsupportedArchitectureError(f"{name}: {type(module).__name__} is not a TransformerBridge")
        n_layers = int(cfg.n_layers)
        hook_dict = getattr(module, "hook_dict", {})
        missing = [n for n in (_residual_hook_name(layer) for layer in range(n_layers + 1)) if n not in hook_dict]
        if missing:
            raise UnsupportedArchitectureError(f"{name}: the bridge exposes no residual hooks {missing}")
        d_vocab = int(cfg.d_vocab_out) if getattr(cfg, "d_vocab_out", -1) and cfg.d_vocab_out > 0 else int(cfg.d_vocab)
        dims = ModelDimensions(
            n_layers=n_layers,
            d_model=int(cfg.d_model),
            d_vocab=d_vocab,
            n_heads=int(cfg.n_heads),
            d_head=int(cfg.d_head),
            d_mlp=int(cfg.d_mlp) if cfg.d_mlp else 0,
        )
        is_causal = getattr(cfg, "attention_dir", "causal") == "causal"
        return cls(
            name,
            spec,
            module,
            tokenizer if tokenizer is not None else getattr(module, "tokenizer", None),
            dims,
            is_causal,
        )

    # -- activations

    def residual_streams(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        input_ids = input_ids.to(self.device)
        if attention_mask is not None:
            attention_mask = attention_mask.to(self.device)
        fast = native_forward(self.module, input_ids.shape[-1], attention_mask)
        if fast is not None:
            return fast.residual_streams(input_ids, attention_mask)
        names = [_residual_hook_name(layer) for layer in range(self.n_layers + 1)]
        captured: dict[str, torch.Tensor] = {}

        # Hook points may be registered under a canonical name (e.g. blocks.0.hook_in); map back.
        hook_dict = self.module.hook_dict
        canonical = {name: (hook_dict[name].name or name) for name in names}

        def capture(value, hook):
            captured[hook.name] = first_tensor(value)
            if len(captured) == len(names):
                raise _ResidualsCaptured  # the final norm and unembedding are not needed
            return value

        fwd_hooks = [(name, capture) for name in names]
        with self.module.hooks(fwd_hooks=fwd_hooks):
            try:
                bridge_logits(self.module, input_ids.to(self.device), attention_mask)
            except _ResidualsCaptured:
                pass
        try:
            streams = [captured[canonical[name]] for name in names]
        except KeyError as err:  # pragma: no cover - adapter-specific
            raise UnsupportedArchitectureError(f"{self.name}: hook {err} did not fire") from err
        return torch.stack(streams, dim=0)

    def logits_from_layer(
        self, residual: torch.Tensor, layer: int, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits with ``residual`` as the stream after ``layer``, running only blocks ``layer …``: the
        bridge's block list is cut to the tail for the call (:func:`running_only_blocks_from`; the
        bridge's ``blocks`` is the list its model loops over) and ``residual`` is substituted for the
        input of block ``layer`` — for ``layer == n_layers``, of ``ln_final`` (or of the unembedding
        where there is none). Gradients flow into ``residual``."""
        if not 0 <= layer <= self.n_layers:
            raise IndexError(f"layer {layer} out of range 0..{self.n_layers}")
        if attention_mask is not None:
            attention_mask = attention_mask.to(self.device)
        fast = native_forward(self.module, input_ids.shape[-1], attention_mask)
        if fast is not None:
            return fast.logits_from_layer(residual, layer, attention_mask)
        lists = self._block_lists()
        blocks = lists[0]
        entry: torch.nn.Module | None
        if layer < self.n_layers:
            entry = blocks[layer]
        else:
            entry = getattr(self.module, "ln_final", None)
            if entry is None:
                entry = self.module.unembed
        fired = []
        counter = entry.register_forward_pre_hook(lambda _mod, _args: fired.append(True))
        handle = substitute_input(entry, residual)
        try:
            with contextlib.ExitStack() as stack:
                for block_list in lists:
                    stack.enter_context(running_only_blocks_from(block_list, layer))
                logits = bridge_logits(self.module, input_ids.to(self.device), attention_mask)
        finally:
            handle.remove()
            counter.remove()
        if not fired:  # pragma: no cover - adapter-specific
            raise UnsupportedArchitectureError(
                f"{self.name}: the residual stream after layer {layer} was not "
                f"substituted ({type(entry).__name__} did not run)"
            )
        return logits

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The plain forward pass's logits ``(batch, seq, d_vocab)``."""
        return bridge_logits(self.module, input_ids.to(self.device), attention_mask)

    def _block_lists(self) -> list[torch.nn.ModuleList]:
        """Every module list holding the bridge's blocks in order: the bridge's ``blocks`` and the list its
        wrapped model loops over (the same object for native models and the adapters tried; cut together)."""
        if getattr(self, "_cached_block_lists", None) is None:
            blocks = self.module.blocks
            if not isinstance(blocks, torch.nn.ModuleList) or len(blocks) != self.n_layers:
                raise UnsupportedArchitectureError(
                    f"{self.name}: the bridge's blocks are not a list of {self.n_layers} modules"
                )
            members = [id(block) for block in blocks]
            found = {id(blocks): blocks}
            roots = [self.module, getattr(self.module, "original_model", None)]
            for root in (r for r in roots if isinstance(r, torch.nn.Module)):
                for module in root.modules():
                    if isinstance(module, torch.nn.ModuleList) and [id(m) for m in module] == members:
                        found.setdefault(id(module), module)
            self._cached_block_lists = list(found.values())
        return self._cached_block_lists

    # -- parameters

    def embedding_matrix(self) -> torch.Tensor:
        return self.module.W_E.detach()

    def unembedding_matrix(self) -> torch.Tensor:
        return self.module.W_U.detach()

    def unembedding_bias(self) -> torch.Tensor | None:
        """``b_U`` ``(d_vocab,)`` (zeros where the model has no unembedding bias)."""
        try:
            return self.module.b_U.detach()
        except AttributeError:
            return None

    def final_norm(self, residual: torch.Tensor) -> torch.Tensor:
        """The model's final normalisation applied to a residual stream ``(..., d_model)``."""
        return self.module.ln_final(residual)

    def final_norm_absence(self) -> str | None:
        """``None`` when the bridge normalises before its unembedding (``cfg.normalization_type`` set)."""
        if getattr(self.module.cfg, "normalization_type", None) is None or not hasattr(self.module, "ln_final"):
            return "normalization_type is null: ln_final is the identity"
        return None

    def final_norm_output(self, residual: torch.Tensor) -> torch.Tensor:
        """``ln_final`` of the last residual stream (what the unembedding reads); raises
        :class:`~thinkalike.models.handle.NoFinalNormError` without a final norm."""
        self.check_final_norm()
        return self.module.ln_final(residual)

    def layer_parameters(self, block: int) -> dict[str, torch.Tensor]:
        if not 0 <= block < self.n_layers:
            raise IndexError(f"block {block} out of range 0..{self.n_layers - 1}")
        blk = self.module.blocks[block]
        n_heads, d_head, d_model = self.dims.n_heads, self.dims.d_head, self.dims.d_model
        attn_only = bool(getattr(self.module.cfg, "attn_only", False))
        try:
            attn = blk.attn
            raw = {"W_Q": attn.W_Q, "W_K": attn.W_K, "W_V": attn.W_V, "W_O": attn.W_O}
            if not attn_only:
                raw.update(FF_in=blk.mlp.W_in, FF_out=blk.mlp.W_out)
        except AttributeError as err:
            raise UnsupportedArchitectureError(f"{self.name}: block {block} has no TL weight view ({err})") from err
        out: dict[str, torch.Tensor] = {}
        for key, value in raw.items():
            value = value.detach()
            if key in ("W_Q", "W_K", "W_V"):
                if value.dim() == 2:  # (d_model, n * d_head)
                    value = value.reshape(d_model, -1, d_head).permute(1, 0, 2)
                if value.shape[0] != n_heads:  # grouped-query attention: expand kv heads
                    value = value.repeat_interleave(n_heads // value.shape[0], dim=0)
            elif key == "W_O" and value.dim() == 2:  # (n * d_head, d_model)
                value = value.reshape(n_heads, d_head, d_model)
            out[key] = value
        expected = {
            "W_Q": (n_heads, d_model, d_head),
            "W_K": (n_heads, d_model, d_head),
            "W_V": (n_heads, d_model, d_head),
            "W_O": (n_heads, d_head, d_model),
            "FF_in": (d_model, self.dims.d_mlp),
            "FF_out": (self.dims.d_mlp, d_model),
        }
        for key, shape in expected.items():
            if key in out and tuple(out[key].shape) != shape:
                raise UnsupportedArchitectureError(
                    f"{self.name}: {key} of block {block} has shape {tuple(out[key].shape)}, expected {shape}"
                )
        if attn_only:  # no MLP: asking for FF_in / FF_out raises, naming the reason
            from thinkalike.models.hf import ParameterGroups

            return ParameterGroups(f"model {self.name!r}", "attention-only model: no MLP", out)
        return out


# --------------------------------------------------------------------------- tl: source


def _supported_architectures() -> dict[str, Any]:
    from transformer_lens.factories.architecture_adapter_factory import (
        SUPPORTED_ARCHITECTURES,
    )

    return SUPPORTED_ARCHITECTURES


def _local_checkpoint_dir(architecture: str, weights_path: str | None) -> Path:
    """The local directory holding the HF checkpoint, or a ModelSourceError naming ``architecture``."""
    if weights_path:
        path = Path(weights_path).expanduser()
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ModelSourceError(
                f"tl:{architecture}: {weights_path!r} is not a local Hugging Face model directory (no config.json)"
            )
        return path
    if Path(architecture).expanduser().is_dir():
        return _local_checkpoint_dir(architecture, str(Path(architecture).expanduser()))
    # A hub id already in the local cache?
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=architecture, local_files_only=True))
    except Exception as err:
        raise ModelSourceError(
            f"tl:{architecture}: no local weights — give weights_path (a local Hugging Face directory) "
            f"or put {architecture!r} in the Hugging Face cache; hub downloads are not attempted "
            f"({type(err).__name__})"
        ) from err


def _is_architecture_name(name: str, supported: Mapping[str, Any]) -> bool:
    """Whether ``name`` is a TL-supported architecture class or a transformers model type (not a hub id)."""
    from transformers import CONFIG_MAPPING

    lowered = name.lower()
    return lowered in {a.lower() for a in supported} or lowered in CONFIG_MAPPING


def _architecture_matches(requested: str, resolved: str, hf_config) -> bool:
    """Whether a ``tl:`` name that looks like an architecture or model type names this checkpoint."""
    req = requested.lower()
    names = {resolved.lower(), str(getattr(hf_config, "model_type", "")).lower()}
    names.update(a.lower() for a in (getattr(hf_config, "architectures", None) or []))
    return req in names


def resolve_bridge_checkpoint(architecture: str, weights_path: str | None) -> tuple[Path, str]:
    """The local checkpoint directory of a ``tl:`` source and the TransformerLens architecture it holds.

    Reads only ``config.json`` (cheap: used to validate a run's configuration before any
    weights are loaded). Raises :class:`ModelSourceError` naming ``architecture`` when it is not
    available offline, not supported by TransformerLens, or not what the checkpoint holds.
    """
    supported = _supported_architectures()
    path = _local_checkpoint_dir(architecture, weights_path)
    from transformer_lens.model_bridge.sources._hf_format import (
        determine_architecture_from_hf_config,
    )
    from transformers import AutoConfig

    try:
        hf_config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    except Exception as err:
        raise ModelSourceError(f"tl:{architecture}: cannot read the config in {str(path)!r}: {err}") from err
    try:
        resolved = determine_architecture_from_hf_config(hf_config)
    except ValueError as err:
        raise ModelSourceError(
            f"tl:{architecture}: the checkpoint in {str(path)!r} (model_type "
            f"{getattr(hf_config, 'model_type', None)!r}) is not an architecture TransformerLens supports"
        ) from err
    if _is_architecture_name(architecture, supported) and not _architecture_matches(architecture, resolved, hf_config):
        raise ModelSourceError(
            f"tl:{architecture}: the checkpoint in {str(path)!r} is a {resolved} "
            f"(model_type {hf_config.model_type!r}), not a {architecture}"
        )
    return path, resolved


def load_bridge_handle(architecture: str, weights_path: str | None, tokenizer, name: str) -> BridgeHandle:
    """Handle for the ``tl:<architecture>`` source: a TransformerBridge over a local HF checkpoint.

    ``architecture`` is a TransformerLens-supported HF architecture (``GPT2LMHeadModel``), a model
    type (``gpt2``) or a hub id (``EleutherAI/pythia-70m``). The weights come from ``weights_path``
    (a local HF directory) or, without it, from the local HF cache for a hub id; nothing is
    downloaded. The HF model is loaded here (eager attention, float32, eval mode) and handed to
    ``TransformerBridge.boot_transformers(..., hf_model=...)``: raw HF weights, no LayerNorm folding,
    so residual streams equal HF's ``hidden_states[:-1]`` and the last one is pre-final-norm.
    ``tokenizer`` is stored on the handle (and never handed to TransformerLens, which would
    mutate or re-load it); ``None`` keeps the tokenizer TL finds in the checkpoint directory.
    Raises :class:`ModelSourceError` naming the architecture when this cannot be done offline.
    """
    path, resolved = resolve_bridge_checkpoint(architecture, weights_path)
    from transformer_lens.model_bridge.sources.transformers.helpers import (
        get_hf_model_class_for_architecture,
    )

    model_class = get_hf_model_class_for_architecture(resolved)
    try:
        hf_model = model_class.from_pretrained(
            str(path), local_files_only=True, attn_implementation="eager", dtype=torch.float32
        )
    except Exception as err:
        raise ModelSourceError(f"tl:{architecture}: cannot load the weights in {str(path)!r}: {err}") from err
    hf_model.eval()
    TransformerBridge, _ = _tl()
    try:
        module = TransformerBridge.boot_transformers(str(path), hf_model=hf_model, device="cpu", dtype=torch.float32)
        quiet_device_moves(module)
    except Exception as err:
        raise ModelSourceError(f"tl:{architecture}: TransformerBridge cannot wrap {resolved}: {err}") from err
    module.eval()
    return BridgeHandle.from_module(name, f"tl:{architecture}", module, tokenizer)
