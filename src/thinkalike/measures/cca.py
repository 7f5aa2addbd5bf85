r"""Canonical correlation measures: mean CCA, SVCCA (Raghu et al. 2017), PWCCA (Morcos et al. 2018).

Inputs X (n × d₁), Y (n × d₂), rows = the same n tokens; computed in float64, columns centred
(Xc = X − 1x̄ᵀ).

- **Canonical correlations** (Björck & Golub 1973; no iterative solver such as sklearn's CCA):
  with Q_x (n × r_x) an orthonormal basis of the column space of Xc and Q_y likewise,
  ρ₁ ≥ … ≥ ρ_m are the singular values of Q_xᵀQ_y, m = min(r_x, r_y). They equal the square
  roots of the eigenvalues of Σxx⁻¹ΣxyΣyy⁻¹Σyx when both covariances are invertible.
- **Mean CCA**: ρ̄ = (1/m) Σᵢ ρᵢ.
- **SVCCA** (Raghu et al. 2017): reduce each input to its top kₓ left singular vectors, kₓ the
  smallest k with Σ_{i≤k} sᵢ² ≥ keep·Σᵢ sᵢ² (keep = 0.99: 99 % of the variance), likewise k_y;
  then the mean of the min(kₓ, k_y) canonical correlations of the two reduced subspaces (as in
  the svcca repository's tutorial, which averages all of them).
- **PWCCA** (Morcos et al. 2018, "projection weighting"): with hᵢ = Q_x pᵢ the unit-norm canonical
  variates of X (pᵢ the left singular vectors of Q_xᵀQ_y) and x̃ⱼ the centred columns of X,
  αᵢ = Σⱼ |⟨hᵢ, x̃ⱼ⟩|, weights wᵢ = αᵢ / Σₖ αₖ, and PWCCA(X, Y) = Σᵢ wᵢ ρᵢ — how much of X each
  canonical direction accounts for. Asymmetric: the weights come from X (the first argument).
  Departures from ``google/svcca`` ``pwcca.py``, stated: that code weights by whichever input
  has fewer neurons, and builds its directions from the rotation u without Σxx^{−1/2} and with
  the neuron means added back (so they are not centred); here the paper's definition is used.
  The variates hᵢ are centred, so ⟨hᵢ, xⱼ⟩ = ⟨hᵢ, x̃ⱼ⟩ and translation does not matter. When
  several ρᵢ are equal the canonical variates within that block are not unique and neither are
  their weights.

Rank. Q_x is ``scipy.linalg.orth(Xc)``: the left singular vectors whose singular values exceed
max(n, d)·ε·s_max, so duplicated or collinear features, d > n and centring (rank ≤ n − 1) are
handled by reducing each input to its numerical rank r. Beware: when r_x + r_y > n − 1 the two
column spaces (in the (n − 1)-dimensional space of centred vectors) must share at least
r_x + r_y − (n − 1) dimensions, so that many correlations are 1 whatever the data — mean CCA of
wide layers on few tokens is close to 1 by construction; SVCCA's reduction is the usual remedy.
An input constant over tokens (rank 0) gives NaN with a RuntimeWarning.

Invariances. ρ (hence mean CCA): any invertible linear map of either input, translation
(so orthogonal maps, isotropic scaling and permutation too). SVCCA: orthogonal maps,
isotropic scaling, translation, permutation — not general linear maps, which change which
directions carry 99 % of the variance. PWCCA: isotropic scaling, translation, permutation of
either input, and any invertible linear map of Y; not orthogonal maps of X (the weights are
L1 sums over X's features).

Cost: the thin SVDs, O(n·d·min(n, d)) per input, plus O(n·r_x·r_y).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg

from thinkalike.measures.inputs import centred, numerical_rank, paired_activations, undefined

MIN_TOKENS = 2


def _column_space(xc: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n × rank) of the column space, numerical rank by scipy's default rcond."""
    return linalg.orth(xc)


def _bases(x: Any, y: Any, measure: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(Xc, Q_x, Q_y), or None after a warning when either input has no variance."""
    x_matrix, y_matrix = paired_activations(x, y, measure=measure, min_tokens=MIN_TOKENS)
    xc = centred(x_matrix)
    q_x, q_y = _column_space(xc), _column_space(centred(y_matrix))
    for name, basis in (("x", q_x), ("y", q_y)):
        if basis.shape[1] == 0:
            undefined(measure, f"{name} is constant over tokens (no variance after centring)")
            return None
    return xc, q_x, q_y


def _correlations(q_x: np.ndarray, q_y: np.ndarray) -> np.ndarray:
    return np.clip(linalg.svdvals(q_x.T @ q_y), 0.0, 1.0)


def canonical_correlations(x: Any, y: Any) -> np.ndarray:
    """ρ₁ ≥ … ≥ ρ_m, m = min(rank Xc, rank Yc): singular values of Q_xᵀQ_y (module docstring).

    An input constant over tokens gives an empty array with a RuntimeWarning.
    """
    bases = _bases(x, y, "canonical_correlations")
    if bases is None:
        return np.empty(0)
    return _correlations(bases[1], bases[2])


def mean_cca(x: Any, y: Any) -> float:
    """(1/m) Σᵢ ρᵢ over the m = min(r_x, r_y) canonical correlations."""
    bases = _bases(x, y, "mean_cca")
    if bases is None:
        return float("nan")
    return float(np.mean(_correlations(bases[1], bases[2])))


def _check_keep(keep: float) -> float:
    value = float(keep)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"keep: {keep} must be in (0, 1] (the fraction of variance the kept directions explain)")
    return value


def variance_subspace(xc: np.ndarray, keep: float) -> np.ndarray:
    """Top-k left singular vectors of the centred ``xc``, k the smallest with Σ_{i≤k} sᵢ² ≥ keep·Σ sᵢ².

    k never exceeds the numerical rank (the basis of :func:`scipy.linalg.orth`).
    """
    u, s, _ = linalg.svd(xc, full_matrices=False)
    rank = numerical_rank(s, xc.shape)
    if rank == 0:
        return u[:, :0]
    explained = np.cumsum(s[:rank] ** 2) / np.sum(s[:rank] ** 2)
    k = min(int(np.searchsorted(explained, keep * (1.0 - 1e-12))) + 1, rank)
    return u[:, :k]


def svcca(x: Any, y: Any, keep: float = 0.99) -> float:
    """Mean canonical correlation of the subspaces keeping ``keep`` of each input's variance."""
    keep = _check_keep(keep)
    x_matrix, y_matrix = paired_activations(x, y, measure="svcca", min_tokens=MIN_TOKENS)
    q_x, q_y = variance_subspace(centred(x_matrix), keep), variance_subspace(centred(y_matrix), keep)
    for name, basis in (("x", q_x), ("y", q_y)):
        if basis.shape[1] == 0:
            return undefined("svcca", f"{name} is constant over tokens (no variance after centring)")
    return float(np.mean(_correlations(q_x, q_y)))


def pwcca(x: Any, y: Any) -> float:
    """Σᵢ wᵢρᵢ, wᵢ ∝ Σⱼ |⟨hᵢ, x̃ⱼ⟩| with hᵢ X's unit canonical variates (module docstring)."""
    bases = _bases(x, y, "pwcca")
    if bases is None:
        return float("nan")
    xc, q_x, q_y = bases
    rotation_x, rho, _ = linalg.svd(q_x.T @ q_y, full_matrices=False)
    variates = q_x @ rotation_x[:, : rho.size]  # hᵢ as columns, orthonormal
    alpha = np.abs(variates.T @ xc).sum(axis=1)
    return float(np.dot(alpha / alpha.sum(), np.clip(rho, 0.0, 1.0)))
