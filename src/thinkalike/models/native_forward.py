"""A plain-torch forward pass of a TransformerLens-native zoo model, over the bridge's own parameters.

Why it exists: a ``TransformerBridge`` runs every native module through its generalized components
(hook points, a layer norm written out as ``mean``/``pow``/``div``, masks built per call); on the
zoo's tiny models that wrapping, not arithmetic, is a large share of a training step
(``benchmarks/native_forward.py`` times both paths on the zoo's shapes). Training, stitching tails and
extraction of zoo models use this path; anything it does not cover (hooks a user added, other
architectures, left padding) goes through the bridge.

The computation, for the pre-LN block of ``transformer_lens.model_bridge.sources.native``
(``x`` the residual stream, ``LN`` a LayerNorm with the block's scale and bias, ε = ``cfg.eps``)::

    x₀ = W_E[ids] (+ W_pos[0 … S−1] for learned absolute positions)
    a  = softmax(q kᵀ / s + M) v,  q, k, v = LN₁(x) W_{Q,K,V} + b   (per head; RoPE on q, k if rotary)
    x  = x + a W_O + b_O
    x  = x + act(LN₂(x) W_in + b_in) [→ LN_mlp for solu_ln] W_out + b_out
    logits = LN_final(x) W_U (+ b_U)

with ``s = attn_scale`` if the config sets one, else √d_head, and ``M`` = −∞ where a key is a padding
token or (causal models) after the query. Attention is ``torch.nn.functional.scaled_dot_product_attention``.
The result equals the bridge's to float round-off (``tests/models/test_native_forward.py``: logits and
every parameter gradient, each supported configuration, with and without right padding).

Covered (:meth:`NativeForward.of` returns ``None`` otherwise, and callers use the bridge):
``normalization_type`` LN, learned or rotary positions (no RoPE scaling), causal or bidirectional
attention, the activations of :data:`ACTIVATIONS`, no gated MLP, no grouped-query heads, no soft caps,
no hooks registered on the bridge. Per call, attention masks that are ``None``, all ones or right
padding (each row ones then zeros, at least one one) are covered — :meth:`NativeForward.covers`;
with left padding the bridge derives other positions, so the caller falls back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["ACTIVATIONS", "NativeForward", "bridge_path", "native_forward"]

#: The MLP activations of TransformerLens' native model (``solu_ln`` adds a LayerNorm after it).
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
    "solu": lambda x: x * F.softmax(x, dim=-1),
    "solu_ln": lambda x: x * F.softmax(x, dim=-1),
}

_BLOCK_KEYS = (
    "ln1.weight",
    "ln1.bias",
    "attn.q.weight",
    "attn.q.bias",
    "attn.k.weight",
    "attn.k.bias",
    "attn.v.weight",
    "attn.v.bias",
    "attn.o.weight",
    "attn.o.bias",
)
_MLP_KEYS = ("ln2.weight", "ln2.bias", "mlp.in.weight", "mlp.in.bias", "mlp.out.weight", "mlp.out.bias")


def _is_native_bridge(module: torch.nn.Module) -> bool:
    try:
        from transformer_lens.model_bridge.sources.native.model import NativeModel
    except ImportError:  # pragma: no cover - TransformerLens layout changed: use the bridge
        return False
    return isinstance(getattr(module, "original_model", None), NativeModel)


def _has_hooks(module: torch.nn.Module) -> bool:
    """Whether a bridge component of ``module`` or one of its hook points (TransformerLens' hook points are
    modules too) has a forward, forward-pre or backward hook: the fast path would not run them. The wrapped
    native modules (under ``_original_component``) are skipped: TransformerLens keeps its own capture hooks there
    once any hook has been used. torch offers no public query for this; these are ``nn.Module``'s own hook
    dictionaries."""
    return any(
        sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks
        for name, sub in module.named_modules()
        if "_original_component" not in name
    )


def rotary_tables(n_ctx: int, rotary_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos``, ``sin`` ``(n_ctx, rotary_dim)`` of interleaved RoPE: angle ``p · base^(−2i/rotary_dim)`` for
    position ``p`` and pair ``i``, each repeated for the pair's two channels."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim))
    angles = torch.outer(torch.arange(n_ctx).float(), inv_freq)
    return angles.cos().repeat_interleave(2, dim=-1), angles.sin().repeat_interleave(2, dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on the first ``cos.shape[-1]`` channels of ``x`` ``(batch, heads, seq, d_head)``: channel pairs
    ``(x₂ᵢ, x₂ᵢ₊₁)`` rotate to ``(x₂ᵢ cos − x₂ᵢ₊₁ sin, x₂ᵢ₊₁ cos + x₂ᵢ sin)``; the rest pass through."""
    width = cos.shape[-1]
    rot, rest = x[..., :width], x[..., width:]
    half = torch.stack((-rot[..., 1::2], rot[..., 0::2]), dim=-1).flatten(-2)
    rot = rot * cos + half * sin
    return torch.cat([rot, rest], dim=-1) if rest.shape[-1] else rot


@dataclass
class NativeForward:
    """The forward pass of a native zoo bridge over its parameters ``weights`` (the module's own
    ``nn.Parameter`` objects: gradients reach them, an optimiser over ``module.parameters()`` trains them)."""

    weights: dict[str, torch.Tensor]
    n_layers: int
    n_heads: int
    d_head: int
    eps: float
    scale: float
    causal: bool
    act_fn: str
    attn_only: bool
    n_ctx: int
    rotary: tuple[torch.Tensor, torch.Tensor] | None

    @classmethod
    def of(cls, module: torch.nn.Module) -> NativeForward | None:
        """The fast path of ``module``, or ``None`` when ``module`` is not a native bridge this covers (module
        docstring). Building it reads the module's state dict (milliseconds): use :func:`native_forward`, which
        keeps it with the module."""
        cfg = getattr(module, "cfg", None)
        if cfg is None or not _is_native_bridge(module):
            return None
        norm = getattr(cfg, "normalization_type", None)
        positions = (getattr(cfg, "positional_embedding_type", None) or "standard").lower()
        unsupported = (
            str(norm).upper() != "LN"
            or positions not in ("standard", "rotary")
            or str(getattr(cfg, "act_fn", "")).lower() not in ACTIVATIONS
            or getattr(cfg, "gated_mlp", False)
            or getattr(cfg, "final_rms", False)
            or (getattr(cfg, "n_key_value_heads", None) or cfg.n_heads) != cfg.n_heads
            or getattr(cfg, "attn_scores_soft_cap", -1.0) > 0
            or getattr(cfg, "output_logits_soft_cap", -1.0) > 0
            or getattr(cfg, "rope_scaling", None)
            or getattr(cfg, "attention_dir", "causal") not in ("causal", "bidirectional")
        )
        if unsupported:
            return None
        weights = module.state_dict(keep_vars=True)
        n_layers, attn_only = int(cfg.n_layers), bool(getattr(cfg, "attn_only", False))
        act_fn = str(cfg.act_fn).lower()
        needed = ["embed.weight", "ln_final.weight", "ln_final.bias", "unembed.weight"]
        needed += ["pos_embed.weight"] if positions == "standard" else []
        for layer in range(n_layers):
            keys = _BLOCK_KEYS + (() if attn_only else _MLP_KEYS)
            keys += ("mlp.ln.weight", "mlp.ln.bias") if act_fn == "solu_ln" and not attn_only else ()
            needed += [f"blocks.{layer}.{key}" for key in keys]
        if any(key not in weights for key in needed):
            return None
        d_head = int(cfg.d_head)
        use_scale = getattr(cfg, "use_attn_scale", True) and getattr(cfg, "attn_scale", -1.0) > 0
        scale = float(cfg.attn_scale) if use_scale else math.sqrt(d_head)
        rotary = None
        if positions == "rotary":
            rotary_dim = getattr(cfg, "rotary_dim", None) or d_head
            device = weights["embed.weight"].device
            cos, sin = rotary_tables(int(cfg.n_ctx), int(rotary_dim), float(cfg.rotary_base))
            rotary = (cos.to(device), sin.to(device))
        return cls(
            weights=weights,
            n_layers=n_layers,
            n_heads=int(cfg.n_heads),
            d_head=d_head,
            eps=float(cfg.eps),
            scale=scale,
            causal=cfg.attention_dir == "causal",
            act_fn=act_fn,
            attn_only=attn_only,
            n_ctx=int(cfg.n_ctx),
            rotary=rotary,
        )

    # -- masks

    def covers(self, seq: int, attention_mask: torch.Tensor | None) -> bool:
        """Whether the fast path computes what the bridge does for ``seq`` ≤ ``n_ctx`` positions and
        ``attention_mask``: ``None``, or a 0/1 ``(batch, seq)`` mask whose every row is ones then zeros with at
        least one one (right padding). Longer inputs go to the bridge, which raises its own error."""
        if seq > self.n_ctx:
            return False
        if attention_mask is None:
            return True
        if attention_mask.dim() != 2:
            return False
        keep = attention_mask.bool()
        return bool(keep[:, 0].all()) and not bool((keep[:, 1:] & ~keep[:, :-1]).any())

    def _attention_mask(self, attention_mask: torch.Tensor | None, seq: int) -> torch.Tensor | None:
        """SDPA's boolean mask ``(batch, 1, seq, seq)`` (True: attend), or ``None`` for no padding."""
        if attention_mask is None or bool(attention_mask.bool().all()):
            return None
        keep = attention_mask.bool()[:, None, None, :]
        if self.causal:
            keep = keep & torch.ones(seq, seq, dtype=torch.bool, device=keep.device).tril()
        return keep

    # -- pieces

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The residual stream before block 0: token embeddings (+ learned positions ``0 … S−1``)."""
        residual = F.embedding(input_ids, self.weights["embed.weight"])
        if self.rotary is None:
            residual = residual + self.weights["pos_embed.weight"][: input_ids.shape[1]]
        return residual

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weights[f"{name}.weight"], self.weights[f"{name}.bias"], self.eps)

    def block(self, residual: torch.Tensor, layer: int, mask: torch.Tensor | None) -> torch.Tensor:
        """Block ``layer`` on ``residual`` ``(batch, seq, d_model)``; ``mask`` from :meth:`_attention_mask`."""
        w = self.weights
        p = f"blocks.{layer}."
        batch, seq, _ = residual.shape
        h = self._norm(residual, p + "ln1")

        def heads(name: str) -> torch.Tensor:
            out = F.linear(h, w[p + f"attn.{name}.weight"], w[p + f"attn.{name}.bias"])
            return out.view(batch, seq, self.n_heads, self.d_head).transpose(1, 2)

        q, k, v = heads("q"), heads("k"), heads("v")
        if self.rotary is not None:
            cos, sin = (t[:seq].to(device=q.device, dtype=q.dtype) for t in self.rotary)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.causal and mask is None, scale=1.0 / self.scale
        )
        attended = attended.transpose(1, 2).reshape(batch, seq, self.n_heads * self.d_head)
        residual = residual + F.linear(attended, w[p + "attn.o.weight"], w[p + "attn.o.bias"])
        if self.attn_only:
            return residual
        mid = ACTIVATIONS[self.act_fn](
            F.linear(self._norm(residual, p + "ln2"), w[p + "mlp.in.weight"], w[p + "mlp.in.bias"])
        )
        if self.act_fn == "solu_ln":
            mid = self._norm(mid, p + "mlp.ln")
        return residual + F.linear(mid, w[p + "mlp.out.weight"], w[p + "mlp.out.bias"])

    def unembed(self, residual: torch.Tensor) -> torch.Tensor:
        """Logits of the last residual stream: the final LayerNorm, then ``W_U`` (+ ``b_U``)."""
        return F.linear(
            self._norm(residual, "ln_final"), self.weights["unembed.weight"], self.weights.get("unembed.bias")
        )

    # -- whole passes

    def logits_from_layer(
        self, residual: torch.Tensor, layer: int, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits with ``residual`` as the stream after ``layer`` (blocks ``layer … n_layers − 1``, then the
        unembedding); gradients flow into ``residual`` and the parameters."""
        mask = self._attention_mask(attention_mask, residual.shape[1])
        for index in range(layer, self.n_layers):
            residual = self.block(residual, index, mask)
        return self.unembed(residual)

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """The forward pass's logits ``(batch, seq, d_vocab)``."""
        return self.logits_from_layer(self.embed(input_ids), 0, attention_mask)

    def residual_streams(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """``(n_layers + 1, batch, seq, d_model)``: the stream before block 0 and after every block."""
        mask = self._attention_mask(attention_mask, input_ids.shape[1])
        streams = [self.embed(input_ids)]
        for index in range(self.n_layers):
            streams.append(self.block(streams[-1], index, mask))
        return torch.stack(streams, dim=0)


_CACHE_ATTRIBUTE = "_thinkalike_native_forward"
_OFF_ATTRIBUTE = "_thinkalike_native_forward_off"


@contextmanager
def bridge_path(module: torch.nn.Module) -> Iterator[None]:
    """Inside the block every call of ``module`` runs through the bridge itself (what the fast path is compared
    with, and what a hook-based check of the bridge's own machinery needs)."""
    previous = module.__dict__.get(_OFF_ATTRIBUTE, False)
    module.__dict__[_OFF_ATTRIBUTE] = True
    try:
        yield
    finally:
        module.__dict__[_OFF_ATTRIBUTE] = previous


def native_forward(module: torch.nn.Module, seq: int, attention_mask: torch.Tensor | None) -> NativeForward | None:
    """The fast path for one call of ``module`` on ``seq`` positions with ``attention_mask``, or ``None`` where the
    bridge must run: not a covered native bridge, hooks registered on it (a user's intervention must see the
    forward pass), or a mask :meth:`NativeForward.covers` does not cover. The :class:`NativeForward` is built once
    and kept on the module with the identities of its parameters; it is rebuilt when they change (e.g. a
    ``load_state_dict(..., assign=True)``)."""
    if module.__dict__.get(_OFF_ATTRIBUTE):
        return None
    identities = tuple(id(parameter) for parameter in module.parameters())
    cached = module.__dict__.get(_CACHE_ATTRIBUTE)
    if cached is None or cached[0] != identities:
        cached = (identities, NativeForward.of(module))
        module.__dict__[_CACHE_ATTRIBUTE] = cached
    fast = cached[1]
    if fast is None or _has_hooks(module) or not fast.covers(seq, attention_mask):
        return None
    return fast
