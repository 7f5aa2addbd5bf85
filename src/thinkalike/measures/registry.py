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
  draw with :func:`subsample_tokens` (None: use all tokens).

The defining formulas are in each measure's module docstring; ``tests/measures/test_registry.py``
checks every declared invariance and symmetry, and that every undeclared one fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from thinkalike.measures import cka as cka_module
from thinkalike.measures.cca import mean_cca, pwcca, svcca
from thinkalike.measures.inputs import paired_activations
from thinkalike.measures.neighbours import cknna, knn_jaccard, mutual_knn
from thinkalike.measures.predictivity import linear_predictivity
from thinkalike.measures.rsa import rsa
from thinkalike.measures.shape import angular_shape_distance, procrustes_distance

INVARIANCES = frozenset({"orthogonal", "isotropic_scaling", "permutation", "invertible_linear", "translation"})
KINDS = ("similarity", "distance")
QUADRATIC_MAX_TOKENS = 2000  # n × n float64 arrays of 32 MB; 0.2–1.5 s per pair on one core at d = 256


def unbiased_cka(x: Any, y: Any) -> float:
    """Linear CKA with the unbiased HSIC estimator (:func:`thinkalike.measures.cka.cka`)."""
    x_matrix, y_matrix = paired_activations(x, y, measure="cka", min_tokens=cka_module.MIN_TOKENS)
    return cka_module.cka(x_matrix, y_matrix, estimator="unbiased")


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

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: {self.kind!r} must be one of {KINDS}")
        unknown = set(self.invariances) - INVARIANCES
        if unknown:
            raise ValueError(f"invariances: {sorted(unknown)} are not among {sorted(INVARIANCES)}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens: {self.max_tokens} must be ≥ 1 or None")

    def __call__(self, x: Any, y: Any, **options: Any) -> float:
        return self.function(x, y, **options)


_SHAPE = frozenset({"orthogonal", "isotropic_scaling", "permutation", "translation"})
_COSINE = frozenset({"orthogonal", "isotropic_scaling", "permutation"})

_MEASURES: tuple[Measure, ...] = (
    Measure("cka", unbiased_cka, "similarity", False, _SHAPE, "n·d² (n²·d when d > n)", True),
    Measure("procrustes", procrustes_distance, "distance", True, _SHAPE, "n·d²", True),
    Measure("angular_shape", angular_shape_distance, "distance", True, _SHAPE, "n·d²", True),
    Measure("mean_cca", mean_cca, "similarity", False, _SHAPE | {"invertible_linear"}, "n·d²", True),
    Measure("svcca", svcca, "similarity", False, _SHAPE, "n·d²", True),
    Measure("pwcca", pwcca, "similarity", False, frozenset({"isotropic_scaling", "permutation", "translation"}),
            "n·d²", False),
    Measure("rsa", rsa, "similarity", False, frozenset({"isotropic_scaling", "permutation"}), "n²·d", True,
            QUADRATIC_MAX_TOKENS),
    Measure("mutual_knn", mutual_knn, "similarity", False, _COSINE, "n²·d", True, QUADRATIC_MAX_TOKENS),
    Measure("cknna", cknna, "similarity", False, _COSINE, "n²·d", False, QUADRATIC_MAX_TOKENS),  # ≈ symmetric
    Measure("knn_jaccard", knn_jaccard, "similarity", False, _COSINE, "n²·d", True, QUADRATIC_MAX_TOKENS),
    Measure("linear_predictivity", linear_predictivity, "similarity", False, _SHAPE, "folds·n·d²", False),
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
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer))
                                   or max_tokens < 1):
        raise ValueError(f"max_tokens: {max_tokens!r} must be a positive integer or None")
    if max_tokens is None or max_tokens >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_tokens, replace=False))
