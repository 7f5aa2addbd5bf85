"""The one interface every method uses to talk to a model, whatever its source.

A :class:`ModelHandle` wraps a loaded model (Hugging Face, TransformerBridge, zoo) and
exposes, in one convention:

* ``residual_streams(input_ids, attention_mask)`` -> tensor ``(n_layers + 1, batch, seq, d_model)``;
  index 0 is the embedding output (the residual stream entering block 0), index ``l`` the
  residual stream after block ``l - 1`` (i.e. "after layer l", layer 0 = embeddings). The last
  one, ``n_layers``, is the last block's output *before* the final norm (pre-LN models:
  GPT-2's ``ln_f``, Llama's ``norm``, TransformerLens' ``ln_final``), so it is not what
  transformers' ``hidden_states[-1]`` holds;
* ``layer_streams(input_ids, attention_mask, final_norm=True)`` adds the final norm's output as
  one more layer, index ``n_layers + 1`` (= transformers' ``hidden_states[-1]``; the
  ``activations.final_norm`` parameter). Models without a final norm (``has_final_norm`` false:
  post-LN encoders such as BERT, whose blocks end in a LayerNorm and whose ``hidden_states[-1]``
  is the last block's output itself; TL models with ``normalization_type: null``) raise
  :class:`NoFinalNormError`;
* ``embedding_matrix()`` -> ``(d_vocab, d_model)``; ``unembedding_matrix()`` -> ``(d_model, d_vocab)``;
* ``layer_parameters(block)`` -> per-block parameter groups in TransformerLens shapes:
  ``W_Q, W_K, W_V``: ``(n_heads, d_model, d_head)``; ``W_O``: ``(n_heads, d_head, d_model)``;
  ``FF_in``: ``(d_model, d_mlp)``; ``FF_out``: ``(d_mlp, d_model)``;
* ``logits_from_layer(residual, layer, input_ids, attention_mask)`` -> logits
  ``(batch, seq, d_vocab)`` of the model whose residual stream after ``layer`` (same indexing
  as ``residual_streams``) is replaced by ``residual``; gradients flow into ``residual``. Only
  the *tail* runs: blocks ``layer … n_layers - 1``, the final norm and the head (plus the
  model's own input preparation — embedding lookup, masks, positions — whose output is
  replaced); blocks before ``layer`` are not executed (:func:`running_only_blocks_from`);
* ``logits(input_ids, attention_mask)`` -> the plain forward pass's logits.

Weights are never silently random. A checkpoint without an LM head (a sentence encoder saved
as ``BertModel``) is loaded as its base model: ``has_unembedding`` is false and
``unembedding_matrix()``, ``unembedding_bias()`` and ``logits_from_layer()`` raise
:class:`NoUnembeddingError`. Weights the model defines but the checkpoint lacks are listed in
``missing_weights``; every method that would compute with one raises
:class:`MissingWeightsError` naming them, and :meth:`ModelHandle.check_view` says up front
whether a *view* (:data:`VIEWS`) is usable.

Embedding-space methods that need the vocabulary matrix ``E`` call
:meth:`ModelHandle.vocabulary_matrix`; it falls back to the input embedding only when asked
to and only where that is exact (see there).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

PARAMETER_GROUPS: tuple[str, ...] = ("W_Q", "W_K", "W_V", "W_O", "FF_in", "FF_out")

#: What a caller intends to compute -> the weights it touches (checked by ``check_view``).
VIEWS: dict[str, str] = {
    "residual_streams": "residual streams (the input embeddings and every block)",
    "all": "every method (embeddings, blocks, final norm and LM head)",
}


class ModelSourceError(ValueError):
    """A model spec cannot be loaded (unknown source, missing path, unreachable hub...)."""


class UnsupportedArchitectureError(ModelSourceError):
    """The model loaded but the requested view (hooking, parameter group) is not available."""


class NoUnembeddingError(UnsupportedArchitectureError):
    """The checkpoint has no LM head, so there is no unembedding (and no logits)."""


class NoFinalNormError(UnsupportedArchitectureError):
    """The model has no final norm between its last block and its head (``activations.final_norm``)."""


class MissingWeightsError(ModelSourceError):
    """Weights that a computation needs are not in the checkpoint (they would be random)."""


def check_view_name(view: str) -> None:
    """Raises ``ValueError`` for a view that is not one of :data:`VIEWS`."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r} (known: {sorted(VIEWS)})")


def missing_weights_message(model: str, missing: list[str], what: str) -> str:
    """The error text for weights ``what`` needs that the checkpoint of ``model`` lacks."""
    shown = ", ".join(missing[:8]) + (f", … ({len(missing)} in all)" if len(missing) > 8 else "")
    return (
        f"{model}: the checkpoint lacks {len(missing)} weight(s) that {what} need(s): {shown}; transformers "
        "would initialise them randomly, so nothing is computed with them (use a checkpoint that has them, "
        "or a view that does not touch them)"
    )


@dataclass(frozen=True)
class ModelDimensions:
    """Sizes of a model, in TransformerLens names."""

    n_layers: int
    d_model: int
    d_vocab: int
    n_heads: int
    d_head: int
    d_mlp: int


class ModelHandle(ABC):
    """A loaded model seen through ThinkAlike's single interface (see module docstring)."""

    def __init__(
        self,
        name: str,
        spec: str,
        module: torch.nn.Module,
        tokenizer,
        dims: ModelDimensions,
        is_causal: bool,
        missing_weights: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.spec = spec
        self.module = module
        self.tokenizer = tokenizer
        self.dims = dims
        self.is_causal = is_causal
        self.missing_weights = tuple(sorted(missing_weights))

    @property
    def has_unembedding(self) -> bool:
        """Whether the model has an LM head (``unembedding_matrix()`` works)."""
        return True

    @property
    def ties_input_embedding(self) -> bool:
        """Whether the model family's LM head uses the input embedding as its unembedding (``U = W_Eᵀ``)."""
        return False

    def missing_weights_for(self, view: str) -> list[str]:
        """Names of the weights ``view`` (one of :data:`VIEWS`) needs that the checkpoint lacks."""
        check_view_name(view)
        return list(self.missing_weights)

    def check_view(self, view: str) -> None:
        """Raises :class:`MissingWeightsError` naming the weights ``view`` needs that the checkpoint lacks."""
        missing = self.missing_weights_for(view)
        if missing:
            raise MissingWeightsError(
                missing_weights_message(f"model {self.name!r} ({self.spec})", missing, VIEWS[view])
            )

    def vocabulary_matrix(self, *, allow_input_embedding: bool = False) -> torch.Tensor:
        """``E`` ``(d_model, d_vocab)`` of the embedding-space methods: the unembedding ``U``.

        Without an LM head, and only with ``allow_input_embedding=True``, the input embedding
        ``W_Eᵀ`` — valid only where the family's head *ties* its decoder to the input embedding
        (``ties_input_embedding``: BERT, GPT-2…), so the absent head would have used exactly this
        matrix (its bias and, for BERT, the dense + LayerNorm transform before it are not
        reproduced). Otherwise raises :class:`NoUnembeddingError`.
        """
        if self.has_unembedding:
            return self.unembedding_matrix()
        if allow_input_embedding and self.ties_input_embedding:
            return self.embedding_matrix().T
        reason = (
            "its head is not tied to the input embedding"
            if allow_input_embedding
            else "pass allow_input_embedding=True where W_E is a valid stand-in"
        )
        raise NoUnembeddingError(f"model {self.name!r} ({self.spec}) has no LM head, so no unembedding; {reason}")

    @property
    def n_layers(self) -> int:
        return self.dims.n_layers

    @property
    def d_model(self) -> int:
        return self.dims.d_model

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.module.parameters()).dtype

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> ModelHandle:
        self.module.to(device=device, dtype=dtype)
        return self

    @abstractmethod
    def residual_streams(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Residual stream after every block, ``(n_layers + 1, batch, seq, d_model)``; 0 = embeddings,
        ``n_layers`` = the last block's output before the final norm."""

    def final_norm_absence(self) -> str | None:
        """Why the model has no final norm between its last block and its head; ``None`` when it has one."""
        return f"{type(self).__name__} exposes no final norm"

    @property
    def has_final_norm(self) -> bool:
        """Whether the model applies a norm between its last block and its head (:meth:`final_norm_output`)."""
        return self.final_norm_absence() is None

    def check_final_norm(self) -> None:
        """Raises :class:`NoFinalNormError` saying why, where the model has no final norm."""
        reason = self.final_norm_absence()
        if reason is not None:
            raise NoFinalNormError(
                f"activations.final_norm: model {self.name!r} ({self.spec}) has no final norm "
                f"({reason}); its last stored layer is already its final hidden state, so set "
                "activations.final_norm: false"
            )

    def final_norm_output(self, residual: torch.Tensor) -> torch.Tensor:
        """The model's final norm applied to the last residual stream ``(..., d_model)`` (transformers'
        ``hidden_states[-1]``); raises :class:`NoFinalNormError` where there is none."""
        self.check_final_norm()
        raise NotImplementedError(f"{type(self).__name__} does not apply its final norm")

    def layer_streams(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, *, final_norm: bool = False
    ) -> torch.Tensor:
        """:meth:`residual_streams`, and with ``final_norm`` the final norm's output as layer ``n_layers + 1``:
        ``(n_layers + 1 + final_norm, batch, seq, d_model)``. Checks for a final norm before running."""
        if final_norm:
            self.check_final_norm()
        streams = self.residual_streams(input_ids, attention_mask)
        if not final_norm:
            return streams
        normed = self.final_norm_output(streams[-1])
        return torch.cat([streams, normed.to(streams.dtype)[None]], dim=0)

    @abstractmethod
    def embedding_matrix(self) -> torch.Tensor:
        """Token embedding ``E``, ``(d_vocab, d_model)``."""

    @abstractmethod
    def unembedding_matrix(self) -> torch.Tensor:
        """Unembedding ``U``, ``(d_model, d_vocab)``; logits = final_norm(x) @ U (+ bias)."""

    @abstractmethod
    def layer_parameters(self, block: int) -> dict[str, torch.Tensor]:
        """Parameter groups of block ``block`` (0-based), shapes as in the module docstring."""

    @abstractmethod
    def logits_from_layer(
        self, residual: torch.Tensor, layer: int, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Logits when the residual stream after ``layer`` (0 = embeddings) is ``residual``; runs only the
        blocks after ``layer`` (module docstring)."""

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The model's logits from a plain forward pass (no substitution). This default re-enters at the
        embeddings; the model families override it with their own forward."""
        streams = self.residual_streams(input_ids, attention_mask)
        return self.logits_from_layer(streams[0], 0, input_ids, attention_mask)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, spec={self.spec!r}, dims={self.dims})"


def default_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextmanager
def running_only_blocks_from(blocks: torch.nn.ModuleList, start: int) -> Iterator[None]:
    """Within the ``with`` block, ``blocks`` holds only ``blocks[start:]`` (re-indexed from 0).

    A model whose forward loops over its block list (transformers' and TransformerLens' models do)
    then runs the tail blocks only: blocks ``0 … start - 1`` are not executed at all (no compute, no autograd
    graph), while the model still prepares its inputs (embedding lookup, attention mask,
    positions) and applies its final norm and head exactly as in a full forward pass. The list
    is restored on exit, also after an exception. Not thread-safe (the module is shared).
    """
    if not 0 <= start <= len(blocks):
        raise IndexError(f"start block {start} outside 0..{len(blocks)}")
    saved = blocks._modules
    kept = list(saved.values())[start:]
    object.__setattr__(blocks, "_modules", OrderedDict((str(i), block) for i, block in enumerate(kept)))
    try:
        yield
    finally:
        object.__setattr__(blocks, "_modules", saved)


def substitute_input(module: torch.nn.Module, residual: torch.Tensor, argument: str = "hidden_states"):
    """Registers a forward pre-hook making ``residual`` the first input of ``module`` (positional, or the
    keyword ``argument``), cast to the original's device and dtype (differentiably); returns the hook handle.
    Raises ``ValueError`` when the shapes differ."""

    def like(original: torch.Tensor) -> torch.Tensor:
        if residual.shape != original.shape:
            raise ValueError(f"residual of shape {tuple(residual.shape)} replaces one of shape {tuple(original.shape)}")
        return residual.to(device=original.device, dtype=original.dtype)

    def pre_hook(_mod, args, kwargs):
        if args:
            return (like(first_tensor(args[0])),) + tuple(args[1:]), kwargs
        if argument not in kwargs:
            raise UnsupportedArchitectureError(
                f"{type(module).__name__} was called without a positional input "
                f"or {argument!r}; cannot substitute the residual stream"
            )
        return args, {**kwargs, argument: like(kwargs[argument])}

    return module.register_forward_pre_hook(pre_hook, with_kwargs=True)


def first_tensor(output: Any) -> torch.Tensor:
    """The hidden state in a module's or hook's output: the tensor itself or the first of a tuple."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise UnsupportedArchitectureError(f"cannot read a hidden state from an output of type {type(output).__name__}")
