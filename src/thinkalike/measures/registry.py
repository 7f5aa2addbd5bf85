"""One registry of the pairwise representation measures, with what each is known to satisfy.

Every registered function has the signature ``f(x, y, **options) -> float`` with x (n × d₁),
y (n × d₂) the same n tokens (numpy arrays or torch tensors). A :class:`Measure` records:

- ``kind``: ``"similarity"`` (larger = more alike) or ``"distance"`` (0 = identical shape);
- ``is_metric``: a true metric (symmetric, triangle inequality) on the equivalence classes of
  its invariances;
- ``invariances``: the transforms of either input's features that leave the value unchanged
  (with default options), from :data:`INVARIANCES` — ``orthogonal`` (X → XQ, QᵀQ = I),
  ``isotropic_scaling`` (X → cX, c > 0), ``permutation`` (of feature columns),
  ``invertible_linear`` (X → XA, A invertible), ``translation`` (X → X + 1bᵀ);
- ``cost``: time in terms of tokens n and width d (the dominant term);
- ``symmetric``: f(x, y) = f(y, x);
- ``max_tokens``: for measures quadratic in n, the default token subsample a pipeline should
  draw with :func:`subsample_tokens` (None: use all tokens);
- ``rows_per_dimension``: rows (tokens) the measure needs per dimension it compares, or None when any
  count will do; a measure with a requirement takes a ``max_dims`` option (each input reduced to its top
  ``max_dims`` principal components) and :meth:`Measure.max_dims` gives ``n // rows_per_dimension``. The CCA
  family needs :data:`thinkalike.measures.cca.ROWS_PER_DIMENSION` (10): on fewer rows its canonical
  correlations are large by chance, and all 1 when the widths pass the rows. Linear predictivity needs none:
  its R² is scored on held-out folds, so independent inputs give ≈ 0 at any width;
- ``similarity_of``: for a distance, the similarity it is computed from (Procrustes:
  ‖X̂ᵀŶ‖_* = 1 − d²/2; the angular shape metric: cos θ) — 1 for identical inputs, 0 for
  orthogonal ones; :meth:`Measure.alikeness` applies it (the identity for a similarity);
- ``prepare`` and ``compare``: the measure split into per-input work and a cheap comparison,
  ``function(x, y, **options) == compare(prepare(x, **options), prepare(y, **options))``
  (to rounding for CKA, exactly for the others), so that a layer is prepared once for all
  its layer pairs (:func:`thinkalike.measures.layerwise.measure_table`). ``prepare(x,
  **options, name=...)`` takes the measure's options and a name for messages; measures that
  share a ``prepare`` (procrustes and angular_shape at alpha = 1; mean_cca and pwcca; the
  three k-NN measures at one k) can share its result. Without them, the checked float64
  matrix is prepared and ``function`` compares.

The defining formulas are in each measure's module docstring; ``tests/measures/test_registry.py``
checks every declared invariance and symmetry, and that every undeclared one fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from thinkalike.measures import cka as cka_module
from thinkalike.measures.cca import (
    ROWS_PER_DIMENSION,
    mean_cca,
    mean_cca_prepared,
    prepare_cca,
    prepare_svcca,
    pwcca,
    pwcca_prepared,
    svcca,
    svcca_prepared,
)
from thinkalike.measures.hsic import unbiased_hsic
from thinkalike.measures.inputs import centred, check_same_tokens, checked_matrix, paired_activations, undefined
from thinkalike.measures.neighbours import (
    cknna,
    cknna_prepared,
    knn_jaccard,
    knn_jaccard_prepared,
    mutual_knn,
    mutual_knn_prepared,
    prepare_neighbours,
)
from thinkalike.measures.predictivity import linear_predictivity, linear_predictivity_prepared, prepare_predictivity
from thinkalike.measures.rsa import prepare_rsa, rsa, rsa_prepared
from thinkalike.measures.shape import (
    angular_shape_distance,
    angular_shape_prepared,
    prepare_shape,
    procrustes_distance,
    procrustes_prepared,
)

INVARIANCES = frozenset({"orthogonal", "isotropic_scaling", "permutation", "invertible_linear", "translation"})
KINDS = ("similarity", "distance")
# n × n float64 arrays of 32 MB and O(n²·d) work per pair (``benchmarks/measures.py`` times each measure against CKA)
QUADRATIC_MAX_TOKENS = 2000


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


def _prepare_matrix(x: Any, *, name: str = "x", **options: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """The default preparation: the checked float64 matrix, with the options for ``function``."""
    return checked_matrix(x, name, measure="this measure", min_tokens=1), options


@dataclass(frozen=True)
class Measure:
    """A registered measure and its properties (module docstring)."""

    name: str
    function: Callable[..., float]
    kind: Literal["similarity", "distance"]
    is_metric: bool
    invariances: frozenset[str]
    cost: str
    symmetric: bool
    max_tokens: int | None = None
    prepare: Callable[..., Any] | None = None
    compare: Callable[[Any, Any], float] | None = None
    similarity_of: Callable[[np.ndarray], np.ndarray] | None = None
    rows_per_dimension: int | None = None

    @property
    def preparer(self) -> Callable[..., Any]:
        """``prepare``, set for every measure (the default preparation where none was given)."""
        assert self.prepare is not None  # __post_init__ sets the default
        return self.prepare

    @property
    def comparer(self) -> Callable[[Any, Any], float]:
        """``compare``, set for every measure (the default comparison where none was given)."""
        assert self.compare is not None  # __post_init__ sets the default
        return self.compare

    def max_dims(self, n_tokens: int) -> int | None:
        """The most dimensions ``n_tokens`` rows support: ``n_tokens // rows_per_dimension`` (None: no limit)."""
        return None if self.rows_per_dimension is None else n_tokens // self.rows_per_dimension

    def __post_init__(self) -> None:
        if (self.prepare is None) != (self.compare is None):
            raise ValueError("prepare, compare: give both or neither")
        if self.prepare is None:
            object.__setattr__(self, "prepare", _prepare_matrix)
            object.__setattr__(self, "compare", self._compare_matrices)
        if self.kind not in KINDS:
            raise ValueError(f"kind: {self.kind!r} must be one of {KINDS}")
        unknown = set(self.invariances) - INVARIANCES
        if unknown:
            raise ValueError(f"invariances: {sorted(unknown)} are not among {sorted(INVARIANCES)}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens: {self.max_tokens} must be ≥ 1 or None")
        if (self.similarity_of is None) != (self.kind == "similarity"):
            raise ValueError("similarity_of: a distance needs the similarity it is computed from; a similarity none")

    def alikeness(self, values: Any) -> np.ndarray:
        """``values`` as similarities (module docstring): themselves for a similarity measure."""
        values = np.asarray(values, dtype=np.float64)
        return values if self.similarity_of is None else self.similarity_of(values)

    def __call__(self, x: Any, y: Any, **options: Any) -> float:
        return self.function(x, y, **options)

    def _compare_matrices(self, px: tuple[np.ndarray, dict[str, Any]], py: tuple[np.ndarray, dict[str, Any]]) -> float:
        """The default comparison: ``function`` on the prepared matrices, with x's options."""
        return self.function(px[0], py[0], **px[1])


_SHAPE = frozenset({"orthogonal", "isotropic_scaling", "permutation", "translation"})
_COSINE = frozenset({"orthogonal", "isotropic_scaling", "permutation"})

_MEASURES: tuple[Measure, ...] = (
    Measure(
        "cka",
        unbiased_cka,
        "similarity",
        False,
        _SHAPE,
        "n·d² (n²·d when d > n)",
        True,
        prepare=prepare_cka,
        compare=unbiased_cka_prepared,
    ),
    Measure(
        "procrustes",
        procrustes_distance,
        "distance",
        True,
        _SHAPE,
        "n·d²",
        True,
        prepare=prepare_shape,
        compare=procrustes_prepared,
        similarity_of=lambda d: 1.0 - d**2 / 2.0,
    ),
    Measure(
        "angular_shape",
        angular_shape_distance,
        "distance",
        True,
        _SHAPE,
        "n·d²",
        True,
        prepare=prepare_shape,
        compare=angular_shape_prepared,
        similarity_of=np.cos,
    ),
    Measure(
        "mean_cca",
        mean_cca,
        "similarity",
        False,
        _SHAPE | {"invertible_linear"},
        "n·d²",
        True,
        prepare=prepare_cca,
        compare=mean_cca_prepared,
        rows_per_dimension=ROWS_PER_DIMENSION,
    ),
    Measure(
        "svcca",
        svcca,
        "similarity",
        False,
        _SHAPE,
        "n·d²",
        True,
        prepare=prepare_svcca,
        compare=svcca_prepared,
        rows_per_dimension=ROWS_PER_DIMENSION,
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
        rows_per_dimension=ROWS_PER_DIMENSION,
    ),
    Measure(
        "rsa",
        rsa,
        "similarity",
        False,
        frozenset({"isotropic_scaling", "permutation"}),
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_rsa,
        compare=rsa_prepared,
    ),
    Measure(
        "mutual_knn",
        mutual_knn,
        "similarity",
        False,
        _COSINE,
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_neighbours,
        compare=mutual_knn_prepared,
    ),
    Measure(
        "cknna",
        cknna,
        "similarity",
        False,
        _COSINE,
        "n²·d",
        False,
        QUADRATIC_MAX_TOKENS,  # ≈ symmetric
        prepare=prepare_neighbours,
        compare=cknna_prepared,
    ),
    Measure(
        "knn_jaccard",
        knn_jaccard,
        "similarity",
        False,
        _COSINE,
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_neighbours,
        compare=knn_jaccard_prepared,
    ),
    Measure(
        "linear_predictivity",
        linear_predictivity,
        "similarity",
        False,
        _SHAPE,
        "folds·n·d²",
        False,
        prepare=prepare_predictivity,
        compare=linear_predictivity_prepared,
    ),
)

MEASURES: dict[str, Measure] = {m.name: m for m in _MEASURES}
MEASURE_NAMES: tuple[str, ...] = tuple(MEASURES)


def measure(name: str) -> Measure:
    """The registered :class:`Measure` called ``name``."""
    try:
        return MEASURES[name]
    except KeyError:
        raise ValueError(f"name: unknown measure {name!r}; known measures: {', '.join(MEASURE_NAMES)}") from None


def subsample_tokens(n: int, max_tokens: int | None, seed: int) -> np.ndarray:
    """Sorted token indices: all n if ``max_tokens`` is None or ≥ n, else ``max_tokens`` drawn without
    replacement by ``numpy.random.default_rng(seed)``. Index both inputs with the same result."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: {n!r} must be a positive number of tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1
    ):
        raise ValueError(f"max_tokens: {max_tokens!r} must be a positive integer or None")
    if max_tokens is None or max_tokens >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_tokens, replace=False))
