"""The MLEM metric over feature differences (Jalouzot et al. 2024).

For a pair's feature differences ``Δf ∈ [0, 1]^K`` the feature distance is always the paper's
bilinear form (Jalouzot et al. 2024, eq. 1; the MLEM code's ``(W(X) * X).sum(1)``)::

    d_F = Δfᵀ W Δf

* diagonal (default): ``W = diag(w)``, so ``d_F = Σ_k w_k Δf_k²``, with
  ``w = softplus(θ) / ‖softplus(θ)‖₂`` — non-negative weights of unit norm (the scale is
  irrelevant to a rank correlation). For a categorical feature ``Δf_k ∈ {0, 1}`` and
  ``Δf_k² = Δf_k``; a numeric feature's scaled difference ``|x_i − x_j|`` enters squared;
* ``interactions=True``: ``W = L Lᵀ / ‖L Lᵀ‖_F``, symmetric positive semi-definite, ``L`` a free
  ``K × K`` matrix; ``W_kk`` is feature k's own weight and ``W_kl`` the interaction of k and l.
  The diagonal model is the special case ``W = diag(w)`` (up to the normalisation: unit
  Euclidean norm of ``w`` = unit Frobenius norm of ``diag(w)``).

Initialisation is deterministic: ``θ = 0`` (equal weights), ``L = I`` (``W = I/√K``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


class MetricModel(nn.Module):
    """``d_F(Δf)`` of the module docstring; :meth:`feature_weights` gives one weight per feature."""

    def __init__(self, n_features: int, interactions: bool = False) -> None:
        super().__init__()
        if n_features < 1:
            raise ValueError(f"MetricModel needs at least one feature, got {n_features}")
        self.interactions = interactions
        if interactions:
            self.factor = nn.Parameter(torch.eye(n_features))
        else:
            self.theta = nn.Parameter(torch.zeros(n_features))

    def weight_matrix(self) -> torch.Tensor:
        """``W = L Lᵀ / ‖L Lᵀ‖_F`` (interactions) or ``diag(w)`` (diagonal)."""
        if self.interactions:
            gram = self.factor @ self.factor.T
            return gram / gram.norm()
        return torch.diag(self.weights())

    def weights(self) -> torch.Tensor:
        """The diagonal model's ``w = softplus(θ)/‖softplus(θ)‖``; ``diag(W)`` with interactions."""
        if self.interactions:
            return torch.diagonal(self.weight_matrix())
        positive = functional.softplus(self.theta)
        return positive / positive.norm()

    def forward(self, differences: torch.Tensor) -> torch.Tensor:
        """``d_F = Δfᵀ W Δf`` of each row ``Δf`` of ``differences`` ``(m, K)``; diagonal: ``Σ_k w_k Δf_k²``."""
        if self.interactions:
            return ((differences @ self.weight_matrix()) * differences).sum(dim=1)
        return differences.square() @ self.weights()

    @torch.no_grad()
    def feature_weights(self) -> torch.Tensor:
        """One non-negative weight per feature (detached)."""
        return self.weights().detach().clone()
