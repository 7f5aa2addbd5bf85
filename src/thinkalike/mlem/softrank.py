"""Differentiable ranks for fitting a Spearman correlation.

:func:`soft_rank` is the l2-regularised soft rank of Blondel, Teboul, Berthet & Djolonga
(2020, "Fast Differentiable Sorting and Ranking"), the operator of ``torchsort.soft_rank``
(``regularization="l2"``) that the MLEM code uses. For values ``θ ∈ ℝⁿ`` and strength ``ε``::

    r_ε(θ) = argmin_{μ ∈ P(ρ)} ½ ‖μ − θ/ε‖²,     ρ = (n, n−1, …, 1)

the Euclidean projection of ``θ/ε`` onto the permutahedron of ``ρ`` (the convex hull of the
permutations of ρ). As ε → 0 it is the ascending rank (1 = smallest; ties share their mean
rank); as ε → ∞ it is ``θ/ε`` shifted to mean ``(n+1)/2`` (so Spearman tends to Pearson).
With σ the permutation sorting ``z = θ/ε`` in decreasing order, ``s = z_σ``, the projection is
(their Prop. 3)::

    r_σ = s − v,   v = argmin_{v₁ ≥ … ≥ vₙ} ‖v − (s − ρ)‖²     (decreasing isotonic regression)

``v`` comes from ``scipy.optimize.isotonic_regression`` (pool-adjacent-violators, O(n)), so one
soft rank costs O(n log n) (the sort). ``v`` is constant on blocks ``B``, and ∂v/∂y averages
within a block, so the vector–Jacobian product is ``(g − mean_B(g)) / ε`` on each block (in
sorted order). No Python loop over elements, no n × n matrix.

Why this and not a package: ``torchsort`` (the MLEM code's choice) ships only as a source
distribution whose C++/CUDA extension is compiled at install time against the installed torch
(on a CPU machine with a CUDA compiler on the path its build fails asking for ``CUDA_HOME``);
``torchpsort`` (pure PyTorch) requires Python ≥ 3.12. :func:`pairwise_soft_rank`, the
sigmoid surrogate ``r_i = ½ + Σ_j sigmoid((θ_i − θ_j)/τ)``, needs no library but costs O(n²)
time and memory per call; it is kept for the benchmark (``benchmarks/mlem_speed.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import isotonic_regression


def _block_ids(blocks: np.ndarray, n: int) -> np.ndarray:
    """Block index of each of ``n`` sorted positions, from the block start positions (``blocks``, length B+1)."""
    ids = np.zeros(n, dtype=np.int64)
    ids[blocks[1:-1]] = 1
    return np.cumsum(ids)


class _SoftRank(torch.autograd.Function):
    """l2 soft rank of a 1-D tensor (module docstring); the backward pass averages within PAV blocks."""

    @staticmethod
    def forward(ctx, values: torch.Tensor, strength: float) -> torch.Tensor:
        z = values.detach().cpu().double().numpy() / strength
        n = z.size
        order = np.argsort(-z, kind="stable")
        s = z[order]
        rho = np.arange(n, 0, -1, dtype=np.float64)
        fit = isotonic_regression(s - rho, increasing=False)
        ranks = np.empty(n, dtype=np.float64)
        ranks[order] = s - fit.x
        block = _block_ids(np.asarray(fit.blocks), n)
        ctx.save_for_backward(torch.from_numpy(order), torch.from_numpy(block))
        ctx.strength = strength
        return torch.from_numpy(ranks).to(values.device, values.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        order, block = ctx.saved_tensors
        g = grad.detach().cpu().double()[order]
        n_blocks = int(block[-1]) + 1 if block.numel() else 0
        sums = torch.zeros(n_blocks, dtype=torch.float64).index_add_(0, block, g)
        counts = torch.bincount(block, minlength=n_blocks).double()
        sorted_grad = (g - (sums / counts)[block]) / ctx.strength
        result = torch.empty_like(sorted_grad)
        result[order] = sorted_grad
        return result.to(grad.device, grad.dtype), None


def soft_rank(values: torch.Tensor, strength: float = 1.0) -> torch.Tensor:
    """Ascending l2 soft ranks (1 … n) of the 1-D ``values`` with regularisation ``strength`` ε > 0."""
    if values.ndim != 1:
        raise ValueError(f"soft_rank ranks a 1-D tensor, got shape {tuple(values.shape)}")
    if not strength > 0:
        raise ValueError(f"soft_rank strength must be > 0, got {strength}")
    return _SoftRank.apply(values, float(strength))


def pairwise_soft_rank(values: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Sigmoid surrogate ranks ``½ + Σ_j sigmoid((θ_i − θ_j)/τ)`` (O(n²); the rejected alternative)."""
    return 0.5 + torch.sigmoid((values[:, None] - values[None, :]) / temperature).sum(dim=1)


def pearson(x: torch.Tensor, y: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Pearson correlation of two 1-D tensors (differentiable; 0 when either is constant)."""
    xc, yc = x - x.mean(), y - y.mean()
    return (xc * yc).sum() / (xc.norm() * yc.norm()).clamp_min(eps)
