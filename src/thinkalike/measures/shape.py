r"""Shape metrics: orthogonal Procrustes and the generalized shape metric of Williams et al. 2021.

Inputs X (n × d₁), Y (n × d₂), rows = the same n tokens; computed in float64. Both measures
centre the columns first (Xc = X − 1x̄ᵀ). Widths may differ: netrep zero-pads the narrower
matrix to the wider one, which changes none of the quantities below (‖XcᵀYc‖_* and the
Frobenius norms are those of the padded matrices), so the padding is implicit.

- **Procrustes distance** (the Euclidean shape distance of Ding et al. 2021 and ReSi, after
  centring and scaling each input to unit Frobenius norm, X̂ = Xc/‖Xc‖_F)::

      d_P(X, Y) = min_{Q orthogonal} ‖X̂Q − Ŷ‖_F = sqrt(2 − 2·‖X̂ᵀŶ‖_*)      ∈ [0, √2]

  (‖·‖_* the nuclear norm: the sum of singular values). A metric on shapes.

- **Angular shape distance with partial whitening** (netrep's ``LinearMetric(alpha,
  center_columns=True, zero_pad=True, score_method="angular")``, ``netrep/metrics/linear.py``
  and ``whiten`` in ``netrep/utils.py``). With λⱼ, vⱼ the eigenpairs of XcᵀXc (not divided
  by n), the partial whitening is X_α = Xc·Z_α, Z_α = Σⱼ (α + (1 − α)·λⱼ^{−1/2}) vⱼvⱼᵀ, i.e.
  X_α = Xc(α·I + (1 − α)(XcᵀXc)^{−1/2}) — α = 1: no whitening (Procrustes); α = 0: full
  whitening (CCA). Then::

      θ_α(X, Y) = arccos( ‖X_αᵀY_α‖_* / (‖X_α‖_F ‖Y_α‖_F) )      ∈ [0, π/2]

  which is netrep's angle between X_αU and Y_αV after the optimal rotation (U, V from the SVD
  of X_αᵀY_α). Evaluated from the thin SVD Xc = U_x S_x V_xᵀ: X_α = U_x diag(aᵢ) V_xᵀ with
  aᵢ = α·sᵢ + (1 − α) for the singular values sᵢ > tol, so the cosine is
  ‖diag(a)·U_xᵀU_y·diag(b)‖_* / (‖a‖·‖b‖). At α = 1 this equals arccos(‖X̂ᵀŶ‖_*), and
  d_P = 2·sin(θ₁/2); at α = 0 with full-rank inputs of equal width it is arccos(mean canonical
  correlation).

Departures from netrep, stated: netrep clips the eigenvalues of XcᵀXc at an absolute 1e-7;
here singular values sᵢ ≤ tol = max(n, d)·ε·s_max (numpy's ``matrix_rank`` rule) are dropped
as null directions (Xc has no component there; netrep's clip makes them vanish too). The two
agree whenever every kept λⱼ exceeds 1e-7. netrep's ``preserve_variance`` rescaling is one
scalar per input and does not change the angle.

Invariances. d_P and θ₁ (the default α = 1): orthogonal maps, isotropic scaling, translation
and permutation of each input's features. θ₀ (α = 0): every invertible linear map. For
0 < α < 1, mixing I with (XcᵀXc)^{−1/2} mixes units: θ_α then depends on the overall scale of
each input (and on n), as in netrep, so only orthogonal maps, translation and permutation
leave it unchanged.

Undefined: an input that is constant over tokens (Xc = 0) gives NaN with a RuntimeWarning.

Preparation (:func:`prepare_shape`, once per input and α; shared by both measures at α = 1):
the centred matrix (α = 1) or U_x·diag(a) (α < 1) and its Frobenius norm. Comparison
(:func:`procrustes_prepared`, :func:`angular_shape_prepared`): one cross product and the
singular values of a d₁ × d₂ (or rank × rank) matrix.
Cost: O(n·d₁·d₂ + d₁·d₂·min(d₁, d₂)) per pair; O(n·d·min(n, d)) per input for the thin SVD of
θ_α with α < 1.

Wide inputs (d ≥ n − 1). A basis with at least n − 1 columns (a layer wider than it has rows, or the
partially whitened basis of one, whose rank is n − 1 after centring) is replaced, once per input, by its
row factor L (n × min(n, d), basis = L·Qᵀ with Qᵀ·Q = I; :func:`thinkalike.measures.compact.row_factor`),
which leaves the singular values of the cross product unchanged (X_αᵀY_α = Q_x·L_xᵀY_α), so a pair costs
O(n·min(n, d₁)·min(n, d₂)) plus the singular values of a min(n, d₁) × min(n, d₂) matrix. L is lower
trapezoidal, so L_xᵀ·(the other side) is a triangular product (BLAS trmm,
:func:`thinkalike.measures.compact.triangular_cross`): half the multiply-adds of a general one. Equal to
the direct computation to rounding; inputs with d < n − 1 are computed exactly as above.

Row permutations (the calibration null): ``PreparedShape.permuted(π)`` is the preparation of X[π]
(its basis rows, and its row factor's, permuted; the norm unchanged), without a decomposition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

import numpy as np
from scipy import linalg

from thinkalike.measures.compact import row_factor, triangular_cross
from thinkalike.measures.inputs import (
    centred_input,
    check_same_tokens,
    numerical_rank,
    paired_activations,
    undefined,
)
from thinkalike.measures.measure import SHAPE_INVARIANCES, Measure, MeasureOptions, is_real, option_check

MIN_TOKENS = 2
DEFAULT_ALPHA = 1.0  # no whitening: the angular Procrustes distance


def _check_alpha(alpha: float) -> float:
    value = float(alpha)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"alpha: {alpha} must be in [0, 1] (1 = Procrustes, no whitening; 0 = CCA, full whitening)")
    return value


def partially_whitened(
    xc: np.ndarray, alpha: float, svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """U_x·diag(α·sᵢ + (1 − α)) over the singular values sᵢ > tol of the centred ``xc`` (n × rank).

    It equals netrep's X_α up to an orthogonal factor on the right (module docstring), which
    leaves Frobenius norms and nuclear norms of cross products unchanged. ``svd``: the thin SVD of ``xc``
    when it is already known (:class:`~thinkalike.measures.inputs.Centred`).
    """
    u, s, _ = linalg.svd(xc, full_matrices=False) if svd is None else svd
    rank = numerical_rank(s, xc.shape)  # singular values come sorted, largest first
    return u[:, :rank] * (alpha * s[:rank] + (1.0 - alpha))


@dataclass(frozen=True, eq=False)
class PreparedShape:
    """One input prepared for the shape metrics at one α (:func:`prepare_shape`)."""

    alpha: float
    basis: np.ndarray  # Xc (α = 1) or the partially whitened U_x·diag(a) (n × rank)
    norm: float  # ‖basis‖_F; 0 for an input constant over tokens

    @property
    def n_tokens(self) -> int:
        return self.basis.shape[0]

    @cached_property
    def factor(self) -> np.ndarray:
        """What the comparison multiplies: the basis, or its (lower-trapezoidal) row factor when the basis has at
        least n − 1 columns (module docstring, "Wide inputs")."""
        n, width = self.basis.shape
        return row_factor(self.basis) if width >= n - 1 else self.basis

    @cached_property
    def triangular(self) -> bool:
        """Whether :attr:`factor` is a row factor in its own token order (lower trapezoidal)."""
        return self.factor is not self.basis

    def permuted(self, permutation: np.ndarray) -> PreparedShape:
        """The preparation of X[π] (module docstring)."""
        moved = PreparedShape(self.alpha, self.basis[permutation], self.norm)
        if "factor" in self.__dict__:
            moved.__dict__["factor"] = self.factor[permutation]
            moved.__dict__["triangular"] = False  # its rows permuted: no longer lower trapezoidal
        return moved


def prepare_shape(x: Any, alpha: float = DEFAULT_ALPHA, *, name: str = "x") -> PreparedShape:
    """Centre ``x`` (and partially whiten it when α < 1) once, for any number of comparisons."""
    alpha = _check_alpha(alpha)
    given = centred_input(x, name, measure="the shape metrics", min_tokens=MIN_TOKENS)
    xc = given.matrix
    if not xc.any():
        return PreparedShape(alpha, xc, 0.0)
    basis = xc if alpha == 1.0 else partially_whitened(xc, alpha, given.svd)
    return PreparedShape(alpha, basis, float(np.linalg.norm(basis)))


def _cross(px: PreparedShape, py: PreparedShape) -> np.ndarray:
    """A matrix with the singular values of X_αᵀY_α: a factor's transpose times the other's, by trmm when one is
    triangular (:func:`~thinkalike.measures.compact.triangular_cross`; the transpose, if it is y's)."""
    if px.triangular:
        return triangular_cross(px.factor, py.factor)
    if py.triangular:
        return triangular_cross(py.factor, px.factor)
    return px.factor.T @ py.factor


def _cosine(px: PreparedShape, py: PreparedShape, measure: str) -> float | None:
    """‖X_αᵀY_α‖_* / (‖X_α‖_F‖Y_α‖_F) clipped to [0, 1], or None (after a warning) for a constant input."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    if px.alpha != py.alpha:
        raise ValueError(f"alpha: x was prepared with alpha = {px.alpha}, y with alpha = {py.alpha}")
    for side, prepared in (("x", px), ("y", py)):
        if prepared.norm == 0.0:
            undefined(measure, f"{side} is constant over tokens (no variance after centring)")
            return None
    cosine = linalg.svdvals(_cross(px, py), check_finite=False).sum() / (px.norm * py.norm)
    return float(np.clip(cosine, 0.0, 1.0))


def procrustes_prepared(px: PreparedShape, py: PreparedShape) -> float:
    """:func:`procrustes_distance` of two inputs prepared with α = 1."""
    if px.alpha != 1.0 or py.alpha != 1.0:
        raise ValueError("alpha: the Procrustes distance needs inputs prepared with alpha = 1")
    cosine = _cosine(px, py, "procrustes_distance")
    return float("nan") if cosine is None else math.sqrt(max(0.0, 2.0 - 2.0 * cosine))


def angular_shape_prepared(px: PreparedShape, py: PreparedShape) -> float:
    """:func:`angular_shape_distance` of two inputs prepared with the same α."""
    cosine = _cosine(px, py, "angular_shape_distance")
    return float("nan") if cosine is None else math.acos(cosine)


def procrustes_distance(x: Any, y: Any) -> float:
    """sqrt(2 − 2‖X̂ᵀŶ‖_*) for centred, unit-Frobenius-norm X̂, Ŷ, in [0, √2] (module docstring)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="procrustes_distance", min_tokens=MIN_TOKENS)
    return procrustes_prepared(prepare_shape(x_matrix), prepare_shape(y_matrix, name="y"))


def angular_shape_distance(x: Any, y: Any, alpha: float = DEFAULT_ALPHA) -> float:
    """arccos(‖X_αᵀY_α‖_* / (‖X_α‖_F‖Y_α‖_F)) in [0, π/2]: netrep's ``LinearMetric(alpha)`` angle.

    ``alpha`` = 1: Procrustes (rotations only); 0: CCA (any invertible linear map); between:
    partial whitening (module docstring, including its scale dependence for 0 < alpha < 1).
    """
    alpha = _check_alpha(alpha)
    x_matrix, y_matrix = paired_activations(x, y, measure="angular_shape_distance", min_tokens=MIN_TOKENS)
    return angular_shape_prepared(prepare_shape(x_matrix, alpha), prepare_shape(y_matrix, alpha, name="y"))


class AngularShapeOptions(MeasureOptions):
    """The angular shape metric's options."""

    alpha: Annotated[
        float,
        option_check(
            lambda value: (
                None
                if is_real(value) and 0.0 <= value <= 1.0
                else f"{value!r} must be a number in [0, 1] (1 = no whitening, 0 = full whitening)"
            )
        ),
    ] = DEFAULT_ALPHA


MEASURES = (
    Measure(
        "procrustes",
        procrustes_distance,
        "distance",
        True,
        SHAPE_INVARIANCES,
        "n·d²",
        True,
        prepare=prepare_shape,
        compare=procrustes_prepared,
        similarity_of=lambda d: 1.0 - d**2 / 2.0,
        min_tokens=MIN_TOKENS,
        order=20,
    ),
    Measure(
        "angular_shape",
        angular_shape_distance,
        "distance",
        True,
        SHAPE_INVARIANCES,
        "n·d²",
        True,
        prepare=prepare_shape,
        compare=angular_shape_prepared,
        similarity_of=np.cos,
        options=AngularShapeOptions,
        min_tokens=MIN_TOKENS,
        order=30,
    ),
)
