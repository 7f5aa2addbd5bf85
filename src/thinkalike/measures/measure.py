"""What a pairwise representation measure is: one :class:`Measure` object, declared in the measure's own module
(a module of :mod:`thinkalike.measures` that assigns ``MEASURES``, a tuple of them, at its top level) and found there
by :mod:`thinkalike.measures.registry`, so that adding a measure is its module and its test.

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

- ``options``: its options model (:class:`MeasureOptions`): one field per keyword option of ``function``, with its
  type, default and check, so that a configuration's options are checked before anything runs, each bad one named
  (:func:`thinkalike.measures.layerwise.check_measures`);
- ``min_tokens``: the fewest rows (tokens) the measure is defined on;
- ``order``: its place in the registry (the measures table's order, by default): the built-in ones 10, 20, …, 110.

The defining formulas are in each measure's module docstring; ``tests/measures/test_registry.py``
checks every declared invariance and symmetry, and that every undeclared one fails.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict

from thinkalike.measures.inputs import checked_matrix

INVARIANCES = frozenset({"orthogonal", "isotropic_scaling", "permutation", "invertible_linear", "translation"})
KINDS = ("similarity", "distance")
#: The invariances of the shape measures (CKA, the shape metrics, CCA's): of features' rotations, scale, order, offset.
SHAPE_INVARIANCES = frozenset({"orthogonal", "isotropic_scaling", "permutation", "translation"})
#: The invariances of the cosine-based k-NN measures (no translation: cosines are not centred).
COSINE_INVARIANCES = frozenset({"orthogonal", "isotropic_scaling", "permutation"})
# n × n float64 arrays of 32 MB and O(n²·d) work per pair (``benchmarks/measures.py`` times each measure against CKA)
QUADRATIC_MAX_TOKENS = 2000


class MeasureOptions(BaseModel):
    """A measure's keyword options: one field per option, its default the function's (the same constant), its check
    an :func:`option_check`. This base has none (a measure without options); unknown options are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def option_check(problem: Callable[[Any], str | None]) -> BeforeValidator:
    """A field check from ``problem(value)``: what is wrong with the value, as ``"<value> must be …"``, or None."""

    def check(value: Any) -> Any:
        message = problem(value)
        if message is not None:
            raise ValueError(message)
        return value

    return BeforeValidator(check)


def is_integer(value: Any) -> bool:
    """An integer, not a bool (numpy's too)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer_at_least(minimum: int) -> Callable[[Any], str | None]:
    """The problem of a value that should be an integer ≥ ``minimum``."""
    return lambda value: None if is_integer(value) and value >= minimum else f"{value!r} must be an integer ≥ {minimum}"


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
    options: type[MeasureOptions] = MeasureOptions
    min_tokens: int = 1
    order: int = 1000

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
        if self.min_tokens < 1:
            raise ValueError(f"min_tokens: {self.min_tokens} must be ≥ 1")
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
