"""The unbiased HSIC estimator (Song et al. 2012, HSIC₁) from its sufficient terms, written once: CKA's batched
path (:mod:`thinkalike.measures.cka`), its prepared path (:mod:`thinkalike.measures.registry`) and CKNNA's sparse
k-NN kernels (:mod:`thinkalike.measures.neighbours`) each compute the terms their own way and call this.

For n × n kernel matrices K̃, L̃ with zeroed diagonals,

    HSIC₁(K, L) = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1) / ((n − 1)(n − 2)) − 2 / (n − 2) · 1ᵀK̃L̃1] / (n(n − 3)),

``trace`` = tr(K̃L̃), ``sums_product`` = (1ᵀK̃1)(1ᵀL̃1) and ``ones_product`` = 1ᵀK̃L̃1 (= (K̃1)·(L̃1) for symmetric
kernels). It needs n ≥ 4. Floats or tensors alike (element-wise: a batch of layer pairs at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # the batched path's values; the formula itself needs nothing of torch
    from torch import Tensor

Value = TypeVar("Value", float, "Tensor")


def unbiased_hsic(trace: Value, sums_product: Value, ones_product: Value, n: int) -> Value:
    """HSIC₁ from its three terms (module docstring) for ``n`` ≥ 4 rows (the callers check n)."""
    return (trace + sums_product / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * ones_product) / (n * (n - 3))
