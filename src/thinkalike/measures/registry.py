"""The registry of the pairwise representation measures: every :class:`~thinkalike.measures.measure.Measure` that a
module of :mod:`thinkalike.measures` declares, found there, so that adding a measure is its module and its test.

A *measure module* is a module of this package that assigns ``MEASURES`` (a tuple of
:class:`~thinkalike.measures.measure.Measure`) at its top level: its source is read (:mod:`ast`) to tell, and only
those are imported (the package's other modules, e.g. :mod:`thinkalike.measures.layerwise`, use the registry).
``MEASURES`` here maps each name to its measure in the measures' ``order``; two measures of one name are an error
naming both modules. What a measure declares, and what ``tests/measures/test_registry.py`` checks of each (every
declared invariance and symmetry, and that every undeclared one fails), is :mod:`thinkalike.measures.measure`'s.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np

from thinkalike.measures.measure import (
    COSINE_INVARIANCES,
    INVARIANCES,
    KINDS,
    QUADRATIC_MAX_TOKENS,
    SHAPE_INVARIANCES,
    Measure,
)

__all__ = [
    "COSINE_INVARIANCES",
    "INVARIANCES",
    "KINDS",
    "MEASURES",
    "MEASURE_NAMES",
    "QUADRATIC_MAX_TOKENS",
    "SHAPE_INVARIANCES",
    "Measure",
    "measure",
    "measure_modules",
    "subsample_tokens",
]

PACKAGE = "thinkalike.measures"
DECLARATION = "MEASURES"


def _declares_measures(source: str) -> bool:
    """Whether a module's source assigns :data:`DECLARATION` at its top level."""
    for statement in ast.parse(source).body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == DECLARATION for t in targets):
            return True
    return False


def measure_modules(folder: Path = Path(__file__).parent) -> list[str]:
    """The measure modules of the package (module docstring), by file name."""
    return [
        f"{PACKAGE}.{path.stem}"
        for path in sorted(folder.glob("*.py"))
        if path.stem != "__init__"
        and path.resolve() != Path(__file__).resolve()  # this registry's own MEASURES is what it finds
        and _declares_measures(path.read_text(encoding="utf-8"))
    ]


def _registered() -> dict[str, Measure]:
    """Every measure the measure modules declare, by ``order`` (then name)."""
    found: dict[str, tuple[Measure, str]] = {}
    for module_name in measure_modules():
        declared = getattr(importlib.import_module(module_name), DECLARATION)
        for entry in declared:
            if not isinstance(entry, Measure):
                raise TypeError(f"{module_name}.{DECLARATION}: {entry!r} is not a Measure")
            if entry.name in found:
                raise ValueError(f"measure {entry.name!r} is declared by {found[entry.name][1]} and {module_name}")
            found[entry.name] = (entry, module_name)
    ordered = sorted((m for m, _ in found.values()), key=lambda m: (m.order, m.name))
    return {m.name: m for m in ordered}


MEASURES: dict[str, Measure] = _registered()
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
