"""Zero-shot stitching through the vocabulary space (Dar et al. §5.2).

A residual state ``x_B`` (row, d_B) of model B is read in vocabulary terms as ``x_B E_B`` and written back in
model A's space with ``E_A⁺`` (``torch.linalg.pinv``): ``x_A = x_B E_B E_A⁺``. The map
``M = E_B E_A⁺`` (d_B × d_A) needs no training (the paper's ``kernel = emb2 @ emb1.pinverse()``). For one
model (``E_A = E_B = E`` of rank d) ``M = E E⁺ = I``.
"""

from __future__ import annotations

import torch

from thinkalike.embedding.space import EmbeddingSpaceError


def zero_shot_map(embedding_b: torch.Tensor, embedding_a: torch.Tensor) -> torch.Tensor:
    """``M = E_B E_A⁺`` (d_B × d_A) from ``E_B`` (d_B × V) and ``E_A`` (d_A × V), in ``E_B``'s dtype (pinv in
    float64)."""
    if embedding_a.shape[1] != embedding_b.shape[1]:
        raise EmbeddingSpaceError(
            f"E_B and E_A have different vocabularies (V = {embedding_b.shape[1]} and "
            f"{embedding_a.shape[1]}); zero-shot stitching needs one tokenizer"
        )
    pseudo_inverse = torch.linalg.pinv(embedding_a.detach().double())  # V × d_A
    return (embedding_b.detach().double() @ pseudo_inverse).to(embedding_b.dtype)


def zero_shot_stitch(residual_b: torch.Tensor, embedding_b: torch.Tensor, embedding_a: torch.Tensor) -> torch.Tensor:
    """``x_A = x_B E_B E_A⁺`` for residual states ``x_B`` of shape ``(..., d_B)``."""
    if residual_b.shape[-1] != embedding_b.shape[0]:
        raise EmbeddingSpaceError(
            f"residual states of width {residual_b.shape[-1]} do not match E_B (d_B = {embedding_b.shape[0]})"
        )
    mapping = zero_shot_map(embedding_b, embedding_a)
    return residual_b @ mapping.to(device=residual_b.device, dtype=residual_b.dtype)
