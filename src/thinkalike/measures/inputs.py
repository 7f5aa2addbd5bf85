"""Checked float64 inputs for the pairwise measures (shape, CCA, RSA, neighbours, predictivity).

Every measure compares two activation matrices X (n × d₁) and Y (n × d₂) whose rows are the
same n tokens in the same order. :func:`paired_activations` turns numpy arrays, lists or torch
tensors (any dtype, any device) into float64 numpy arrays and checks, before any expensive
work, that

- each is 2-D (tokens × features) with at least one feature,
- both have the same number of rows n, and n is at least the measure's minimum,
- neither holds NaN or Inf (the message names the input, the count and the first entry).

:func:`checked_matrix` makes the same checks on one input: each measure's per-input
preparation (``prepare_*`` in its module, used by :mod:`thinkalike.measures.layerwise` to
prepare a layer once for all its layer pairs) starts with it, and the comparison of two
prepared inputs checks only that they hold the same number of tokens.

Shared per-layer work. :class:`Layer` wraps one matrix that several measures prepare in turn
(:func:`thinkalike.measures.layerwise.measure_table`, the calibration): its centred columns and their thin
SVD Xc = U·diag(s)·Vᵀ are computed once, on first use, for every preparation that needs them
(:func:`centred_input`: the partially whitened basis of the shape metrics, the top principal components
of the CCA family, SVCCA's variance subspace), and dropped with :meth:`Layer.release` when the layer is
prepared. Every function that takes a matrix takes a :class:`Layer` too; the values are those of the
matrix itself, bit for bit (the same centring, the same LAPACK call).

A result that is undefined for valid input (e.g. a matrix that is constant over tokens, so it
has no variance after centring) is NaN with a ``RuntimeWarning`` naming the measure and the
input, as :func:`thinkalike.measures.cka.cka` does for a constant layer: one degenerate layer
must not stop a whole grid of comparisons.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Any

import numpy as np
from scipy import linalg


class Centred:
    """A centred matrix Xc (``centred``) and, on first use, its thin SVD (``svd``: U, s, Vᵀ; s descending)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    @cached_property
    def svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``scipy.linalg.svd(Xc, full_matrices=False)``: U (n × m), s (m,), Vᵀ (m × d), m = min(n, d)."""
        return linalg.svd(self.matrix, full_matrices=False, check_finite=False)


class Layer:
    """One layer's matrix, with the work several measures' preparations share (module docstring)."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    @cached_property
    def centred(self) -> Centred:
        """The centred columns (:func:`centred`), with their SVD made on first use."""
        return Centred(centred(self.matrix))

    def release(self) -> None:
        """Drop the shared work (the matrix stays)."""
        self.__dict__.pop("centred", None)


def as_float64_matrix(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 numpy array; a torch tensor is detached and moved to the CPU first.

    Tensors are cast with ``.double()`` before ``np.asarray`` so that bfloat16 (which numpy
    cannot hold) converts too.
    """
    if isinstance(values, Layer):
        return values.matrix
    if hasattr(values, "detach"):  # a torch tensor; no torch import needed for numpy input
        values = values.detach().cpu().double().numpy()
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a numeric (tokens, features) matrix: {error}") from None


def _check_matrix(matrix: np.ndarray, name: str) -> None:
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (tokens, features) matrix; got shape {matrix.shape}")
    if matrix.shape[1] < 1:
        raise ValueError(f"{name} has no features (shape {matrix.shape})")


def _check_finite(matrix: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(matrix)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise ValueError(
            f"{name} contains NaN or Inf ({int(bad.sum())} entries; first at token {row}, feature {column})"
        )


def checked_matrix(values: Any, name: str, *, measure: str, min_tokens: int) -> np.ndarray:
    """One input as a checked float64 array: 2-D with a feature, at least ``min_tokens`` rows, finite.

    ``name`` names the input in messages (``"x"``, ``"layers_a[3]"``); ``measure`` the caller.
    """
    matrix = as_float64_matrix(values, name)
    _check_matrix(matrix, name)
    if matrix.shape[0] < min_tokens:
        raise ValueError(f"n: {measure} needs at least {min_tokens} tokens; got n = {matrix.shape[0]}")
    _check_finite(matrix, name)
    return matrix


def centred_input(values: Any, name: str, *, measure: str, min_tokens: int) -> Centred:
    """:func:`checked_matrix`, centred (:func:`centred`): shared with the other preparations of a :class:`Layer`."""
    matrix = checked_matrix(values, name, measure=measure, min_tokens=min_tokens)
    if isinstance(values, Layer):
        return values.centred
    return Centred(centred(matrix))


def check_same_tokens(n_x: int, n_y: int) -> None:
    """Raise unless both inputs hold the same number of tokens (rows)."""
    if n_x != n_y:
        raise ValueError(f"x and y must hold the same tokens (rows): x has {n_x} tokens, y has {n_y}")


def paired_activations(x: Any, y: Any, *, measure: str, min_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) as checked float64 arrays (module docstring); ``measure`` names the caller in messages."""
    x_matrix, y_matrix = as_float64_matrix(x, "x"), as_float64_matrix(y, "y")
    _check_matrix(x_matrix, "x")
    _check_matrix(y_matrix, "y")
    n_x, n_y = x_matrix.shape[0], y_matrix.shape[0]
    check_same_tokens(n_x, n_y)
    if n_x < min_tokens:
        raise ValueError(f"n: {measure} needs at least {min_tokens} tokens; got n = {n_x}")
    _check_finite(x_matrix, "x")
    _check_finite(y_matrix, "y")
    return x_matrix, y_matrix


def centred(matrix: np.ndarray) -> np.ndarray:
    """Columns minus their means over tokens (first token subtracted first, so constant columns give exact 0)."""
    shifted = matrix - matrix[:1]
    return shifted - shifted.mean(axis=0)


def numerical_rank(singular_values: np.ndarray, shape: tuple[int, ...]) -> int:
    """How many singular values exceed max(shape)·ε·s_max (numpy's ``matrix_rank`` and scipy's ``orth`` rule)."""
    if singular_values.size == 0:
        return 0
    tol = max(shape) * np.finfo(np.float64).eps * float(singular_values.max())
    return int(np.sum(singular_values > tol))


def undefined(measure: str, reason: str) -> float:
    """NaN, with a ``RuntimeWarning`` saying why ``measure`` is undefined on this input."""
    warnings.warn(f"{measure} is undefined: {reason}; returning NaN", RuntimeWarning, stacklevel=3)
    return float("nan")
