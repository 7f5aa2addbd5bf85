"""Parameter vectors of a model, per layer and group, in the row-vector convention ``x ↦ x W``.

From :meth:`ModelHandle.layer_parameters` (TransformerLens shapes, biases omitted; every family the handles
map: TransformerLens-style zoo bridges, GPT-2, GPT-NeoX, Llama — gate omitted, GQA K/V heads repeated to
``n_heads`` —, BERT, and Mamba, whose ``FF_in``/``FF_out`` are its mixer's input (x half) and output
projections and which has no attention: its ``W_*`` groups are skipped with a note).

Vector groups (each an ``(n, d_model)`` matrix whose rows are d-vectors, read as ``v·E``), as Dar et al.:

==========  ===================================================  ==========================
group       rows                                                 n per layer
==========  ===================================================  ==========================
FF_key      columns of ``FF_in`` (d × d_mlp): the FF keys        d_mlp
FF_value    rows of ``FF_out`` (d_mlp × d): the FF values        d_mlp
W_Q, W_K,   columns of each head's ``W`` (d × d_head), heads     n_heads · d_head
W_V         in order (head h, column j → row h·d_head + j)
W_O         rows of each head's ``W_O`` (d_head × d), heads       n_heads · d_head
            in order
==========  ===================================================  ==========================

Interaction groups (per head, read as V × V matrices): ``W_VO = W_V W_O`` and ``W_QK = W_Q W_Kᵀ`` (d × d,
rank ≤ d_head), kept as their factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from thinkalike.models.handle import ModelHandle, UnsupportedArchitectureError

VECTOR_GROUPS: tuple[str, ...] = ("FF_key", "FF_value", "W_Q", "W_K", "W_V", "W_O")
INTERACTION_GROUPS: tuple[str, ...] = ("W_VO", "W_QK")

#: Handle group(s) each vector / interaction group is built from.
SOURCE_GROUPS: dict[str, tuple[str, ...]] = {
    "FF_key": ("FF_in",),
    "FF_value": ("FF_out",),
    "W_Q": ("W_Q",),
    "W_K": ("W_K",),
    "W_V": ("W_V",),
    "W_O": ("W_O",),
    "W_VO": ("W_V", "W_O"),
    "W_QK": ("W_Q", "W_K"),
}
_HANDLE_GROUPS: tuple[str, ...] = ("W_Q", "W_K", "W_V", "W_O", "FF_in", "FF_out")


@dataclass(frozen=True)
class ModelParameters:
    """The parameter groups of a model's layers (handle shapes), and the groups it lacks with the reason."""

    model: str
    layers: tuple[int, ...]
    groups: tuple[dict[str, torch.Tensor], ...]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def has(self, group: str) -> bool:
        """Whether every handle group ``group`` (a vector or interaction group) is built from is present."""
        return all(source not in self.skipped for source in SOURCE_GROUPS[group])

    def missing_reason(self, group: str) -> str | None:
        """Why ``group`` cannot be built (``None`` when it can)."""
        reasons = [self.skipped[s] for s in SOURCE_GROUPS[group] if s in self.skipped]
        return f"{self.model}: no {group} ({'; '.join(dict.fromkeys(reasons))})" if reasons else None

    def _require(self, group: str) -> None:
        if group not in SOURCE_GROUPS:
            raise ValueError(f"unknown parameter group {group!r} (known: {list(SOURCE_GROUPS)})")
        reason = self.missing_reason(group)
        if reason is not None:
            raise UnsupportedArchitectureError(reason)

    def vectors(self, group: str, position: int) -> torch.Tensor:
        """Rows of vector group ``group`` of the ``position``-th extracted layer: ``(n, d_model)`` (table above)."""
        self._require(group)
        if group not in VECTOR_GROUPS:
            raise ValueError(f"{group!r} is an interaction group; vector groups: {list(VECTOR_GROUPS)}")
        params = self.groups[position]
        if group == "FF_key":
            return params["FF_in"].T
        if group == "FF_value":
            return params["FF_out"]
        weight = params[group]
        if group == "W_O":  # (H, d_head, d): rows
            return weight.reshape(-1, weight.shape[-1])
        return weight.transpose(1, 2).reshape(-1, weight.shape[1])  # (H, d, d_head): columns

    def interaction_factors(self, group: str, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A, B)`` with ``W = A_h B_h`` per head: ``W_VO``: ``(W_V (H, d, d_head), W_O (H, d_head, d))``;
        ``W_QK``: ``(W_Q, W_Kᵀ (H, d_head, d))``."""
        self._require(group)
        params = self.groups[position]
        if group == "W_VO":
            return params["W_V"], params["W_O"]
        if group == "W_QK":
            return params["W_Q"], params["W_K"].transpose(1, 2)
        raise ValueError(f"{group!r} is not an interaction group ({list(INTERACTION_GROUPS)})")


def extract_parameters(handle: ModelHandle, layers: Sequence[int] | None = None) -> ModelParameters:
    """The parameter groups of ``layers`` (default: every block) of ``handle``; groups the architecture lacks
    (Mamba's attention; an attention-only model's MLP) are recorded in ``skipped`` with the reason, not raised.
    Raises ``IndexError`` for a layer outside the model."""
    layers = tuple(range(handle.n_layers)) if layers is None else tuple(int(layer) for layer in layers)
    for layer in layers:
        if not 0 <= layer < handle.n_layers:
            raise IndexError(f"layer {layer} outside 0 … {handle.n_layers - 1} of model {handle.name!r}")
    per_layer: list[dict[str, torch.Tensor]] = []
    skipped: dict[str, str] = {}
    for layer in layers:
        params = handle.layer_parameters(layer)
        present = {}
        for group in _HANDLE_GROUPS:
            try:
                present[group] = params[group].detach()
            except (UnsupportedArchitectureError, KeyError) as error:
                skipped.setdefault(group, str(error).strip("'\""))
        per_layer.append(present)
    return ModelParameters(handle.name, layers, tuple(per_layer), skipped)
