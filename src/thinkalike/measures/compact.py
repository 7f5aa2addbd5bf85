r"""Per-layer factors that make a layer pair's comparison cost independent of the wider side (no Kedro).

Every measure here compares centred inputs Xc (n × d₁), Yc (n × d₂) of the same n tokens; the
columns of a centred input lie in 1⊥, the (n − 1)-dimensional space of vectors summing to 0.
When a layer is wider than it has tokens (d > n), its cross products with another layer can be
formed in the n-dimensional token space instead of the d-dimensional feature space. What this
module provides is computed once per layer and reused for all its layer pairs
(:mod:`thinkalike.measures.layerwise`) and for every row permutation of the calibration null
(:mod:`thinkalike.measures.calibration`):

- :func:`row_factor`: L (n × n) with Xc = L·Qᵀ, Q (d × n) with orthonormal columns — the
  transposed R of the thin QR decomposition Xcᵀ = Q·R. Then XcᵀYc = Q_x·(L_xᵀL_y)·Q_yᵀ, so
  XcᵀYc and L_xᵀL_y have the same singular values, and ‖XcᵀYc‖²_F = ‖L_xᵀL_y‖²_F = ⟨XcXcᵀ, YcYcᵀ⟩_F.
  Either side may use its factor or itself (:func:`compact`: the factor only when d > n).
- :func:`triangular_cross`: L_xᵀF for a row factor L_x (lower trapezoidal, as :func:`row_factor` returns
  it: L[i, j] = 0 for j > i) and any F with the same rows, by BLAS ``trmm`` on the k × k triangle of L_xᵀ
  plus a product with the n − k rows below it — about half the multiply-adds of a general product when
  k is close to n.
- :func:`complement_basis`: C (n × (N − k)), an orthonormal basis of the part of 1⊥ orthogonal
  to span(Q) for an orthonormal Q (n × k) inside 1⊥, N = n − 1.
- :func:`correlation_sum`: Σᵢ ρᵢ, the sum of the m = min(k_x, k_y) canonical correlations
  (cosines of the principal angles) between span(Q_x) and span(Q_y) inside 1⊥, computed either
  as the singular values of Q_xᵀQ_y or, when that is cheaper, from the complements:

      Σᵢ ρᵢ = (k_x + k_y − N) + Σᵢ ρᵢ⊥,   ρ⊥ the singular values of C_xᵀC_y

  (the principal angles strictly between 0 and π/2 of two subspaces and of their orthogonal
  complements coincide, with multiplicities — Björck & Golub 1973, Knyazev & Argentati 2002;
  the angles equal to 0 number dim(𝒳 ∩ 𝒴) = k_x + k_y − N + dim(𝒳⊥ ∩ 𝒴⊥), and angles of π/2
  add nothing). In particular when one subspace is all of 1⊥ every correlation is 1.
- :func:`permuted_condensed`: the condensed (pdist) vector of a symmetric matrix whose rows and
  columns are both permuted, from the condensed vector itself.

All in float64; each result equals the direct computation to rounding (about 1e-13).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import blas


def row_factor(xc: np.ndarray) -> np.ndarray:
    """L (n × min(n, d)) with Xc = L·Qᵀ, Qᵀ·Q = I: the transposed R of the thin QR of Xcᵀ."""
    r = linalg.qr(xc.T, mode="r", check_finite=False)[0]
    return np.ascontiguousarray(r[: min(xc.shape)].T)


def compact(xc: np.ndarray) -> np.ndarray:
    """:func:`row_factor` of ``xc`` when it is wider than it has rows (d > n), else ``xc`` itself."""
    return row_factor(xc) if xc.shape[1] > xc.shape[0] else xc


def triangular_cross(lower: np.ndarray, other: np.ndarray) -> np.ndarray:
    """L_xᵀ·F (k × m) for a lower-trapezoidal ``lower`` L_x (n × k, k ≤ n) and any ``other`` F (n × m)
    (module docstring): trmm of the upper-triangular L_x[:k]ᵀ with F[:k], plus L_x[k:]ᵀ·F[k:]."""
    k = lower.shape[1]
    cross = blas.dtrmm(1.0, lower[:k].T, other[:k], side=0, lower=0)  # L_x[:k] is C-ordered: its ᵀ is Fortran
    if lower.shape[0] > k:
        cross += lower[k:].T @ other[k:]
    return cross


def complement_basis(basis: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n × (n − 1 − k)) of {v ⊥ 1, v ⊥ span(basis)} for an orthonormal n × k ``basis`` in 1⊥."""
    n, k = basis.shape
    if k >= n - 1:
        return basis[:, :0]
    ones = np.full((n, 1), 1.0 / np.sqrt(n))
    q, _ = linalg.qr(np.hstack([ones, basis]), mode="full", check_finite=False)
    return q[:, k + 1 :]


def use_complements(k_x: int, k_y: int, n: int) -> bool:
    """Whether :func:`correlation_sum` works on the complements: only when they are smaller (k_x + k_y > n − 1)."""
    ambient = n - 1
    c_x, c_y = max(ambient - k_x, 0), max(ambient - k_y, 0)
    return k_x + k_y > ambient and c_x * c_y * max(min(c_x, c_y), 1) < k_x * k_y * min(k_x, k_y)


def correlation_sum(
    basis_x: np.ndarray,
    basis_y: np.ndarray,
    complement_x: np.ndarray | None = None,
    complement_y: np.ndarray | None = None,
) -> float:
    """Σ of the min(k_x, k_y) canonical correlations of two orthonormal bases inside 1⊥, each clipped to [0, 1]
    (module docstring); from the complements when they are given."""
    if complement_x is None or complement_y is None:
        return float(np.sum(np.clip(linalg.svdvals(basis_x.T @ basis_y, check_finite=False), 0.0, 1.0)))
    n = basis_x.shape[0]
    shared = basis_x.shape[1] + basis_y.shape[1] - (n - 1)
    if complement_x.shape[1] == 0 or complement_y.shape[1] == 0:
        return float(min(basis_x.shape[1], basis_y.shape[1]))
    rest = np.clip(linalg.svdvals(complement_x.T @ complement_y, check_finite=False), 0.0, 1.0)
    return float(shared + np.sum(rest))


def condensed_permutation(n: int, permutation: np.ndarray) -> np.ndarray:
    """Indices into a condensed vector v (length n(n − 1)/2, pdist order) such that ``v[indices]`` is the condensed
    vector of the matrix with rows and columns permuted by ``permutation`` (entry (i, j) ↦ (π(i), π(j)))."""
    i, j = np.triu_indices(n, k=1)
    a, b = permutation[i], permutation[j]
    low, high = np.minimum(a, b), np.maximum(a, b)
    return (n * low - low * (low + 1) // 2 + (high - low - 1)).astype(np.intp)


def permuted_condensed(values: np.ndarray, permutation: np.ndarray) -> np.ndarray:
    """:func:`condensed_permutation` applied to ``values``."""
    n = len(permutation)
    return values[condensed_permutation(n, np.asarray(permutation))]
