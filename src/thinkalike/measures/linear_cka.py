"""Linear CKA with the unbiased HSIC estimator as a registered measure (:mod:`thinkalike.measures.measure`): the
numpy float64 path that prepares each layer once (:func:`prepare_cka`) and compares two prepared layers
(:func:`unbiased_cka_prepared`); :mod:`thinkalike.measures.cka` is the batched torch path of the CKA pipeline and
holds the formulas (notation: K = XcXcᵀ, K̃ with a zeroed diagonal, r = K̃1).

    CKA(X, Y) = HSIC₁(K, L) / sqrt(HSIC₁(K, K) · HSIC₁(L, L))   (HSIC₁: :mod:`thinkalike.measures.hsic`)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from thinkalike.measures import cka as cka_module
from thinkalike.measures.hsic import unbiased_hsic
from thinkalike.measures.inputs import centred, check_same_tokens, checked_matrix, paired_activations, undefined
from thinkalike.measures.measure import SHAPE_INVARIANCES, Measure


def unbiased_cka(x: Any, y: Any) -> float:
    """Linear CKA with the unbiased HSIC estimator (:func:`thinkalike.measures.cka.cka`)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="cka", min_tokens=cka_module.MIN_TOKENS)
    return cka_module.cka(x_matrix, y_matrix, estimator="unbiased")


@dataclass(frozen=True, eq=False)
class PreparedCKA:
    """One input's share of unbiased linear CKA (:func:`prepare_cka`; notation of :mod:`~thinkalike.measures.cka`)."""

    centred: np.ndarray  # Xc, centred as the cka module does (first token subtracted first)
    k: np.ndarray  # diag K: ‖xᵢ‖² of the centred rows
    r: np.ndarray  # K̃1 = K1 − k
    r_sum: float  # 1ᵀK̃1
    self_hsic: float  # HSIC₁(K, K)

    @property
    def n_tokens(self) -> int:
        return self.centred.shape[0]

    @property
    def width(self) -> int:
        return self.centred.shape[1]

    @cached_property
    def gram(self) -> np.ndarray:
        """K = XcXcᵀ (n × n), for pairs where ⟨K, L⟩_F is cheaper than ‖XcᵀYc‖²_F (d₁·d₂ > n²)."""
        return self.centred @ self.centred.T

    def permuted(self, permutation: np.ndarray) -> PreparedCKA:
        """The preparation of X[π]: every per-token quantity permuted, the sums and self-HSIC unchanged."""
        moved = PreparedCKA(
            self.centred[permutation], self.k[permutation], self.r[permutation], self.r_sum, self.self_hsic
        )
        if "gram" in self.__dict__:
            moved.__dict__["gram"] = self.gram[np.ix_(permutation, permutation)]
        return moved


def _unbiased_hsic(trace: float, r_a: np.ndarray, r_b: np.ndarray, r_sum_a: float, r_sum_b: float) -> float:
    """HSIC₁ from tr(K̃L̃), K̃1 and L̃1 (the cka module's docstring)."""
    return unbiased_hsic(trace, r_sum_a * r_sum_b, float(r_a @ r_b), r_a.shape[0])


def prepare_cka(x: Any, *, name: str = "x") -> PreparedCKA:
    """Centre ``x`` and compute its HSIC moments and self-HSIC once (feature form, float64).

    The comparison needs only ‖XcᵀYc‖²_F (O(n·d₁·d₂)), or ⟨XcXcᵀ, YcYcᵀ⟩_F, the same number (O(n²) per pair,
    each side's n × n Gram formed once), when d₁·d₂ > n²; it equals :func:`unbiased_cka` (the cka
    module's float64 path) to rounding, about 1e-15.
    """
    xc = centred(checked_matrix(x, name, measure="cka", min_tokens=cka_module.MIN_TOKENS))
    k = np.einsum("ij,ij->i", xc, xc)
    r = xc @ xc.sum(axis=0) - k
    r_sum = float(r.sum())
    gram = xc.T @ xc
    self_hsic = _unbiased_hsic(float(np.sum(gram * gram)) - float(k @ k), r, r, r_sum, r_sum)
    return PreparedCKA(xc, k, r, r_sum, self_hsic)


def unbiased_cka_prepared(px: PreparedCKA, py: PreparedCKA) -> float:
    """:func:`unbiased_cka` of two prepared inputs: HSIC₁(K, L)/sqrt(HSIC₁(K, K)·HSIC₁(L, L))."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    for side, prepared in (("x", px), ("y", py)):
        if not prepared.k.any():
            return undefined("cka", f"{side} is constant over tokens (no variance after centring)")
        if not prepared.self_hsic > 0.0:
            return undefined(
                "cka",
                f"{side} has a non-positive unbiased self-HSIC ({prepared.self_hsic:.3g}; "
                "too few tokens for the unbiased estimator?)",
            )
    n = px.n_tokens
    if px.width * py.width > n * n:  # wide layers: ‖XcᵀYc‖²_F = ⟨K, L⟩_F in the token space
        squared = float(np.vdot(px.gram, py.gram))
    else:
        cross = px.centred.T @ py.centred
        squared = float(np.sum(cross * cross))
    trace = squared - float(px.k @ py.k)
    cross_hsic = _unbiased_hsic(trace, px.r, py.r, px.r_sum, py.r_sum)
    return cross_hsic / float(np.sqrt(px.self_hsic * py.self_hsic))


MEASURES = (
    Measure(
        "cka",
        unbiased_cka,
        "similarity",
        False,
        SHAPE_INVARIANCES,
        "n·d² (n²·d when d > n)",
        True,
        prepare=prepare_cka,
        compare=unbiased_cka_prepared,
        min_tokens=cka_module.MIN_TOKENS,
        order=10,
    ),
)
