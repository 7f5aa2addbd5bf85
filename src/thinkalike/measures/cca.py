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

Rank. Q_x spans the left singular vectors of Xc whose singular values exceed max(n, d)·ε·s_max
(``scipy.linalg.orth``'s rule), so duplicated or collinear features, d > n and centring
(rank ≤ n − 1) are handled by reducing each input to its numerical rank r. It is computed as
the Q of a thin QR decomposition Xc = QR when R's singular values (those of Xc) give full
column rank r = d ≤ n − 1 (the usual case; about twice as fast as the SVD), else as
``scipy.linalg.orth(Xc)``; both span the same column space, so the correlations agree to
rounding. Beware: when r_x + r_y > n − 1 the two
column spaces (in the (n − 1)-dimensional space of centred vectors) must share at least
r_x + r_y − (n − 1) dimensions, so that many correlations are 1 whatever the data — mean CCA of
wide layers on few tokens is close to 1 by construction; SVCCA's reduction is the usual remedy.
An input constant over tokens (rank 0) gives NaN with a RuntimeWarning.

Too few rows. Even short of that forced overlap, r canonical correlations of n independent rows are
large by chance (their mean is about sqrt(r/n) for r ≪ n, and → 1 as r → n). So each measure takes
``max_dims``: when an input's rank exceeds it, the input is first reduced to its top ``max_dims``
principal components (the leading left singular vectors of Xc; PWCCA's weights still sum over X's own
centred features). :data:`ROWS_PER_DIMENSION` = 10 is what the pipelines require
(:attr:`thinkalike.measures.registry.Measure.rows_per_dimension`): ``max_dims = n // 10``. The
default ``max_dims=None`` is the textbook definition, as the outside libraries compute it.

Invariances. ρ (hence mean CCA): any invertible linear map of either input, translation
(so orthogonal maps, isotropic scaling and permutation too). SVCCA: orthogonal maps,
isotropic scaling, translation, permutation — not general linear maps, which change which
directions carry 99 % of the variance. PWCCA: isotropic scaling, translation, permutation of
either input, and any invertible linear map of Y; not orthogonal maps of X (the weights are
L1 sums over X's features).

Preparation, once per input (:func:`prepare_cca` for mean CCA and PWCCA, :func:`prepare_svcca`
per ``keep``): the centred matrix and its basis Q_x (or the kept singular vectors), plus Q_xᵀXc
for PWCCA's weights when the input is PWCCA's first argument. Comparison
(:func:`mean_cca_prepared`, :func:`svcca_prepared`, :func:`pwcca_prepared`): Q_xᵀQ_y and its
singular values (PWCCA: with the left singular vectors).
Cost: the thin QR/SVDs, O(n·d·min(n, d)) per input, plus O(n·r_x·r_y + r_x·r_y·min(r_x, r_y)) per pair.

Wide inputs (r_x + r_y > n − 1). Mean CCA and SVCCA then take the sum of the correlations from the
orthogonal complements of the two bases inside 1⊥ (:func:`thinkalike.measures.compact.correlation_sum`:
Σρ = (r_x + r_y − (n − 1)) + Σρ⊥), whose singular value problem is (n − 1 − r_x) × (n − 1 − r_y) instead
of r_x × r_y, when that is smaller; each input's complement is found once
(``PreparedCCA.complement``). When one basis spans all of 1⊥ every correlation is 1, and PWCCA,
Σ wᵢρᵢ with Σ wᵢ = 1, is 1 without a decomposition. The values equal the direct ones to rounding
(about 1e-13). Narrow inputs (r_x + r_y ≤ n − 1) are computed as above.

Row permutations (the calibration null, :mod:`thinkalike.measures.calibration`): a prepared input's
``permuted(π)`` is the preparation of X[π] — its centred rows and basis rows permuted (the same
column space, rows relabelled), no decomposition.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

import numpy as np
from scipy import linalg

from thinkalike.measures.compact import complement_basis, correlation_sum, use_complements
from thinkalike.measures.inputs import (
    centred_input,
    check_same_tokens,
    numerical_rank,
    paired_activations,
    undefined,
)
from thinkalike.measures.measure import SHAPE_INVARIANCES, Measure, MeasureOptions, is_integer, is_real, option_check

MIN_TOKENS = 2
DEFAULT_KEEP = 0.99  # SVCCA: the share of each side's variance its SVD keeps (Raghu et al. 2017)
ROWS_PER_DIMENSION = 10  # rows the CCA family needs per canonical dimension (module docstring, "Too few rows")


def _check_max_dims(max_dims: int | None) -> int | None:
    if max_dims is not None and (
        isinstance(max_dims, bool) or not isinstance(max_dims, (int, np.integer)) or max_dims < 1
    ):
        raise ValueError(f"max_dims: {max_dims!r} must be a positive integer or None (no reduction)")
    return None if max_dims is None else int(max_dims)


def _top_components(
    xc: np.ndarray, max_dims: int, svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """The top ``max_dims`` left singular vectors of ``xc`` (at most its numerical rank, whose basis they then are:
    the column space that :func:`_column_space` spans); ``svd``: the thin SVD of ``xc`` when already known."""
    u, s, _ = linalg.svd(xc, full_matrices=False, check_finite=False) if svd is None else svd
    return u[:, : min(max_dims, numerical_rank(s, xc.shape))]


def _column_space(xc: np.ndarray) -> np.ndarray:
    """Orthonormal basis (n × rank) of the column space, numerical rank by scipy's ``orth`` rule.

    Thin QR when it has full column rank (module docstring), else ``scipy.linalg.orth``.
    """
    n, d = xc.shape
    if d < n:
        q, r = linalg.qr(xc, mode="economic", check_finite=False)
        if numerical_rank(linalg.svdvals(r, check_finite=False), xc.shape) == d:
            return q
    return linalg.orth(xc)


@dataclass(frozen=True, eq=False)
class PreparedCCA:
    """One input prepared for mean CCA and PWCCA (:func:`prepare_cca`)."""

    centred: np.ndarray  # Xc (n × d)
    basis: np.ndarray  # Q_x (n × r); r = 0 for an input constant over tokens

    @property
    def n_tokens(self) -> int:
        return self.centred.shape[0]

    @cached_property
    def projection(self) -> np.ndarray:
        """Q_xᵀXc (r × d): the canonical variates' inner products with the features are Pᵀ·this."""
        return self.basis.T @ self.centred

    @cached_property
    def complement(self) -> np.ndarray:
        """Orthonormal basis of the part of 1⊥ orthogonal to Q_x (n × (n − 1 − r))."""
        return complement_basis(self.basis)

    def release(self) -> None:
        """Drop Q_xᵀXc, used only while this input is PWCCA's first argument."""
        self.__dict__.pop("projection", None)

    @property
    def spans_everything(self) -> bool:
        """Whether Q_x spans all of 1⊥ (r = n − 1): every canonical correlation with it is 1."""
        return self.basis.shape[1] >= self.n_tokens - 1

    def permuted(self, permutation: np.ndarray) -> PreparedCCA:
        """The preparation of X[π] (module docstring)."""
        moved = PreparedCCA(self.centred[permutation], self.basis[permutation])
        if "complement" in self.__dict__:
            moved.__dict__["complement"] = self.complement[permutation]
        return moved


@dataclass(frozen=True, eq=False)
class PreparedSVCCA:
    """One input prepared for SVCCA at one ``keep`` (:func:`prepare_svcca`)."""

    keep: float
    basis: np.ndarray  # top-k left singular vectors (n × k); k = 0 for a constant input

    @property
    def n_tokens(self) -> int:
        return self.basis.shape[0]

    @cached_property
    def complement(self) -> np.ndarray:
        """Orthonormal basis of the part of 1⊥ orthogonal to the kept singular vectors."""
        return complement_basis(self.basis)

    def permuted(self, permutation: np.ndarray) -> PreparedSVCCA:
        """The preparation of X[π] (module docstring)."""
        moved = PreparedSVCCA(self.keep, self.basis[permutation])
        if "complement" in self.__dict__:
            moved.__dict__["complement"] = self.complement[permutation]
        return moved


def _mean_correlation(px: PreparedCCA | PreparedSVCCA, py: PreparedCCA | PreparedSVCCA) -> float:
    """Mean of the min(r_x, r_y) canonical correlations, from the complements when cheaper (module docstring)."""
    k_x, k_y = px.basis.shape[1], py.basis.shape[1]
    if use_complements(k_x, k_y, px.n_tokens):
        total = correlation_sum(px.basis, py.basis, px.complement, py.complement)
    else:
        total = correlation_sum(px.basis, py.basis)
    return total / min(k_x, k_y)


def prepare_cca(x: Any, max_dims: int | None = None, *, name: str = "x") -> PreparedCCA:
    """Centre ``x`` and find an orthonormal basis of its column space (its top ``max_dims`` principal
    components when its rank is larger), once."""
    max_dims = _check_max_dims(max_dims)
    given = centred_input(x, name, measure="canonical correlation analysis", min_tokens=MIN_TOKENS)
    xc = given.matrix
    if max_dims is None or min(xc.shape[0] - 1, xc.shape[1]) <= max_dims:  # nothing to reduce
        return PreparedCCA(xc, _column_space(xc))
    return PreparedCCA(xc, _top_components(xc, max_dims, given.svd))  # one SVD: the rank and the top components


def _check_bases(px: PreparedCCA | PreparedSVCCA, py: PreparedCCA | PreparedSVCCA, measure: str) -> bool:
    """False (after a warning) when either input has no variance."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    for name, prepared in (("x", px), ("y", py)):
        if prepared.basis.shape[1] == 0:
            undefined(measure, f"{name} is constant over tokens (no variance after centring)")
            return False
    return True


def _correlations(q_x: np.ndarray, q_y: np.ndarray) -> np.ndarray:
    return np.clip(linalg.svdvals(q_x.T @ q_y, check_finite=False), 0.0, 1.0)


def canonical_correlations(x: Any, y: Any) -> np.ndarray:
    """ρ₁ ≥ … ≥ ρ_m, m = min(rank Xc, rank Yc): singular values of Q_xᵀQ_y (module docstring).

    An input constant over tokens gives an empty array with a RuntimeWarning.
    """
    x_matrix, y_matrix = paired_activations(x, y, measure="canonical_correlations", min_tokens=MIN_TOKENS)
    px, py = prepare_cca(x_matrix), prepare_cca(y_matrix, name="y")
    if not _check_bases(px, py, "canonical_correlations"):
        return np.empty(0)
    return _correlations(px.basis, py.basis)


def mean_cca_prepared(px: PreparedCCA, py: PreparedCCA) -> float:
    """:func:`mean_cca` of two prepared inputs."""
    if not _check_bases(px, py, "mean_cca"):
        return float("nan")
    return _mean_correlation(px, py)


def mean_cca(x: Any, y: Any, max_dims: int | None = None) -> float:
    """(1/m) Σᵢ ρᵢ over the m = min(r_x, r_y) canonical correlations (each side in at most ``max_dims``
    principal components)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="mean_cca", min_tokens=MIN_TOKENS)
    return mean_cca_prepared(prepare_cca(x_matrix, max_dims), prepare_cca(y_matrix, max_dims, name="y"))


def _check_keep(keep: float) -> float:
    value = float(keep)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"keep: {keep} must be in (0, 1] (the fraction of variance the kept directions explain)")
    return value


def variance_subspace(
    xc: np.ndarray,
    keep: float,
    max_dims: int | None = None,
    svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Top-k left singular vectors of the centred ``xc``, k the smallest with Σ_{i≤k} sᵢ² ≥ keep·Σ sᵢ²
    and at most ``max_dims``.

    k never exceeds the numerical rank (the basis of :func:`scipy.linalg.orth`). ``svd``: the thin SVD of ``xc``
    when it is already known (:class:`~thinkalike.measures.inputs.Centred`).
    """
    u, s, _ = linalg.svd(xc, full_matrices=False) if svd is None else svd
    rank = numerical_rank(s, xc.shape)
    if rank == 0:
        return u[:, :0]
    explained = np.cumsum(s[:rank] ** 2) / np.sum(s[:rank] ** 2)
    k = min(int(np.searchsorted(explained, keep * (1.0 - 1e-12))) + 1, rank)
    return u[:, : k if max_dims is None else min(k, max_dims)]


def prepare_svcca(x: Any, keep: float = DEFAULT_KEEP, max_dims: int | None = None, *, name: str = "x") -> PreparedSVCCA:
    """Centre ``x`` and keep the singular vectors explaining ``keep`` of its variance (at most ``max_dims``),
    once."""
    keep, max_dims = _check_keep(keep), _check_max_dims(max_dims)
    given = centred_input(x, name, measure="svcca", min_tokens=MIN_TOKENS)
    return PreparedSVCCA(keep, variance_subspace(given.matrix, keep, max_dims, given.svd))


def svcca_prepared(px: PreparedSVCCA, py: PreparedSVCCA) -> float:
    """:func:`svcca` of two inputs prepared with the same ``keep``."""
    if px.keep != py.keep:
        raise ValueError(f"keep: x was prepared with keep = {px.keep}, y with keep = {py.keep}")
    if not _check_bases(px, py, "svcca"):
        return float("nan")
    return _mean_correlation(px, py)


def svcca(x: Any, y: Any, keep: float = DEFAULT_KEEP, max_dims: int | None = None) -> float:
    """Mean canonical correlation of the subspaces keeping ``keep`` of each input's variance (at most
    ``max_dims`` directions each)."""
    keep = _check_keep(keep)
    x_matrix, y_matrix = paired_activations(x, y, measure="svcca", min_tokens=MIN_TOKENS)
    return svcca_prepared(prepare_svcca(x_matrix, keep, max_dims), prepare_svcca(y_matrix, keep, max_dims, name="y"))


def pwcca_prepared(px: PreparedCCA, py: PreparedCCA) -> float:
    """:func:`pwcca` of two prepared inputs (the weights come from ``px``)."""
    if not _check_bases(px, py, "pwcca"):
        return float("nan")
    if px.spans_everything or py.spans_everything:  # every ρᵢ = 1 and Σ wᵢ = 1 (module docstring)
        return 1.0
    rotation_x, rho, _ = linalg.svd(px.basis.T @ py.basis, full_matrices=False, check_finite=False)
    # ⟨hᵢ, x̃ⱼ⟩ for the variates hᵢ = Q_x pᵢ: (Q_x P)ᵀXc = Pᵀ(Q_xᵀXc)
    alpha = np.abs(rotation_x[:, : rho.size].T @ px.projection).sum(axis=1)
    return float(np.dot(alpha / alpha.sum(), np.clip(rho, 0.0, 1.0)))


def pwcca(x: Any, y: Any, max_dims: int | None = None) -> float:
    """Σᵢ wᵢρᵢ, wᵢ ∝ Σⱼ |⟨hᵢ, x̃ⱼ⟩| with hᵢ X's unit canonical variates (module docstring; each side in at
    most ``max_dims`` principal components)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="pwcca", min_tokens=MIN_TOKENS)
    return pwcca_prepared(prepare_cca(x_matrix, max_dims), prepare_cca(y_matrix, max_dims, name="y"))


def _max_dims_problem(value: Any) -> str | None:
    if value is None or (is_integer(value) and value >= 1):
        return None
    return f"{value!r} must be a positive integer (principal components kept) or null (none dropped)"


class CCAOptions(MeasureOptions):
    """Mean CCA's and PWCCA's options."""

    max_dims: Annotated[int | None, option_check(_max_dims_problem)] = None  # top principal components compared


class SVCCAOptions(CCAOptions):
    """SVCCA's options."""

    keep: Annotated[
        float,
        option_check(
            lambda value: (
                None
                if is_real(value) and 0.0 < value <= 1.0
                else f"{value!r} must be a number in (0, 1] (the fraction of variance kept)"
            )
        ),
    ] = DEFAULT_KEEP


MEASURES = (
    Measure(
        "mean_cca",
        mean_cca,
        "similarity",
        False,
        SHAPE_INVARIANCES | {"invertible_linear"},
        "n·d²",
        True,
        prepare=prepare_cca,
        compare=mean_cca_prepared,
        options=CCAOptions,
        rows_per_dimension=ROWS_PER_DIMENSION,
        min_tokens=MIN_TOKENS,
        order=40,
    ),
    Measure(
        "svcca",
        svcca,
        "similarity",
        False,
        SHAPE_INVARIANCES,
        "n·d²",
        True,
        prepare=prepare_svcca,
        compare=svcca_prepared,
        options=SVCCAOptions,
        rows_per_dimension=ROWS_PER_DIMENSION,
        min_tokens=MIN_TOKENS,
        order=50,
    ),
    Measure(
        "pwcca",
        pwcca,
        "similarity",
        False,
        frozenset({"isotropic_scaling", "permutation", "translation"}),
        "n·d²",
        False,
        prepare=prepare_cca,
        compare=pwcca_prepared,
        options=CCAOptions,
        rows_per_dimension=ROWS_PER_DIMENSION,
        min_tokens=MIN_TOKENS,
        order=60,
    ),
)
