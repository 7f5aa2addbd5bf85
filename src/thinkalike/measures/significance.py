"""Aggregation and significance of per-batch HSIC terms (numpy only).

A CKA run over ``B`` minibatches is summarised by three float64 arrays of HSIC values:

- ``cross``  (B, La, Lb): HSIC(K_i, L_j) between layer i of model a and layer j of model b,
- ``self_a`` (B, La):     HSIC(K_i, K_i),
- ``self_b`` (B, Lb):     HSIC(L_j, L_j).

Everything here works on those arrays, so it never needs the activations again.

Aggregations over batches (both named, selected by ``aggregation``):

- ``"mean_of_ratios"`` (Brown et al. 2023): CKA = (1/B) Σ_b cross_b / sqrt(self_a,b ⊗ self_b,b).
- ``"ratio_of_means"`` (Nguyen et al. 2021, ``efficient_CKA``):
  CKA = Σ_b cross_b / sqrt((Σ_b self_a,b) ⊗ (Σ_b self_b,b)); batches are weighted equally.

Left-out batches: an optional boolean mask ``valid`` (B, La, Lb) says which batches enter each
cell (a batch in which layer i of a or layer j of b is constant has no CKA for cell (i, j)).
Every sum above then runs over the cell's own batches V_ij = {b : valid_b,ij}:
mean_of_ratios = (1/|V_ij|) Σ_{b∈V_ij} CKA_b,ij and ratio_of_means =
Σ_{V_ij} cross_b,ij / sqrt(Σ_{V_ij} self_a,b,i · Σ_{V_ij} self_b,b,j); a cell with no batch is NaN.

Significance:

- :func:`bootstrap_ci`: percentile bootstrap over batches (resampled with replacement).
- :func:`permutation_p_values`: p = (1 + #{null ≥ observed}) / (1 + n_permutations), the null
  being produced by shuffling the token correspondence (see ``CKAAccumulator``).
"""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple, get_args

import numpy as np

Aggregation = Literal["mean_of_ratios", "ratio_of_means"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


class ConfidenceInterval(NamedTuple):
    """Elementwise confidence bounds, same shape as the CKA matrix."""

    ci_low: np.ndarray
    ci_high: np.ndarray


def check_aggregation(aggregation: str) -> None:
    """Raise ``ValueError`` unless ``aggregation`` is one of :data:`AGGREGATIONS`."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}; got {aggregation!r}")


def cka_from_hsic(cross: np.ndarray, self_a: np.ndarray, self_b: np.ndarray) -> np.ndarray:
    """CKA_ij = cross_ij / sqrt(self_a_i · self_b_j), broadcasting over leading dimensions.

    Shapes: cross (..., La, Lb), self_a (..., La), self_b (..., Lb). A cell whose self term on
    either side is not positive (constant layer, or a degenerate unbiased estimate) is NaN.
    """
    self_a = np.asarray(self_a, dtype=np.float64)
    self_b = np.asarray(self_b, dtype=np.float64)
    sa, sb = self_a[..., :, None], self_b[..., None, :]
    valid = (sa > 0) & (sb > 0)
    denominator = np.sqrt(np.where(valid, sa * sb, np.nan))
    return np.asarray(cross, dtype=np.float64) / denominator


def aggregate_cell_sums(
    sum_cross: np.ndarray,
    sum_self_a: np.ndarray,
    sum_self_b: np.ndarray,
    sum_ratios: np.ndarray,
    weight: np.ndarray,
    aggregation: Aggregation,
) -> np.ndarray:
    """Finish an aggregation from per-cell (weighted) sums over batches, all shaped (..., La, Lb).

    ``sum_self_a[..., i, j]`` is Σ_b w_b,ij self_a,b,i (likewise for b), ``sum_ratios`` is
    Σ_b w_b,ij CKA_b,ij and ``weight`` Σ_b w_b,ij (the cell's batch count when unweighted).
    mean_of_ratios = sum_ratios / weight; ratio_of_means = sum_cross / sqrt(sum_self_a·sum_self_b).
    Cells with zero weight (no batch) are NaN.
    """
    check_aggregation(aggregation)
    weight = np.asarray(weight, dtype=np.float64)
    if aggregation == "ratio_of_means":
        sa, sb = np.asarray(sum_self_a, dtype=np.float64), np.asarray(sum_self_b, dtype=np.float64)
        valid = (sa > 0) & (sb > 0) & (weight > 0)
        denominator = np.sqrt(np.where(valid, sa * sb, np.nan))
        return np.asarray(sum_cross, dtype=np.float64) / denominator
    ratios = np.asarray(sum_ratios, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, ratios / np.where(weight > 0, weight, 1.0), np.nan)


def aggregate_sums(
    sum_cross: np.ndarray,
    sum_self_a: np.ndarray,
    sum_self_b: np.ndarray,
    sum_ratios: np.ndarray,
    total_weight: float | np.ndarray,
    aggregation: Aggregation,
) -> np.ndarray:
    """Finish an aggregation from (weighted) sums over batches, every batch entering every cell.

    ``sum_ratios`` is Σ_b w_b CKA_b and ``total_weight`` Σ_b w_b (the batch count when
    unweighted); leading dimensions broadcast (bootstrap replicates, permutations). Self sums
    are per layer, (..., La) and (..., Lb).
    """
    check_aggregation(aggregation)
    if aggregation == "ratio_of_means":
        return cka_from_hsic(sum_cross, sum_self_a, sum_self_b)
    weight = np.asarray(total_weight, dtype=np.float64)
    return np.asarray(sum_ratios) / weight.reshape(weight.shape + (1, 1))


def aggregate(
    cross: np.ndarray,
    self_a: np.ndarray,
    self_b: np.ndarray,
    aggregation: Aggregation,
    weights: np.ndarray | None = None,
    valid: np.ndarray | None = None,
) -> np.ndarray:
    """Aggregate per-batch HSIC terms into a CKA matrix.

    With ``weights`` of shape (R, B) (e.g. bootstrap counts) the result has shape (R, La, Lb):
    one aggregation per row of weights; without, shape (La, Lb) with every batch weighted 1.
    ``valid`` (B, La, Lb) bool leaves batch b out of cell (i, j) where False (module docstring).
    """
    cross = np.asarray(cross, dtype=np.float64)
    self_a = np.asarray(self_a, dtype=np.float64)
    self_b = np.asarray(self_b, dtype=np.float64)
    n_batches = cross.shape[0]
    if n_batches == 0:
        raise ValueError("cannot aggregate zero batches")
    w = np.ones(n_batches) if weights is None else np.asarray(weights, dtype=np.float64)
    if valid is None:
        ratios = cka_from_hsic(cross, self_a, self_b) if aggregation == "mean_of_ratios" else cross
        return aggregate_sums(
            np.tensordot(w, cross, axes=(-1, 0)),
            np.tensordot(w, self_a, axes=(-1, 0)),
            np.tensordot(w, self_b, axes=(-1, 0)),
            np.tensordot(w, ratios, axes=(-1, 0)),
            w.sum(axis=-1),
            aggregation,
        )
    valid = np.asarray(valid, dtype=bool)
    if valid.shape != cross.shape:
        raise ValueError(f"valid must have the shape of cross {cross.shape}; got {valid.shape}")
    mask = valid.astype(np.float64)
    # ratio_of_means never reads the ratio sums, so they are only formed for mean_of_ratios
    valid_ratios = (
        np.where(valid, cka_from_hsic(cross, self_a, self_b), 0.0) if aggregation == "mean_of_ratios" else None
    )
    return aggregate_cell_sums(
        np.tensordot(w, np.where(valid, cross, 0.0), axes=(-1, 0)),
        np.tensordot(w, mask * self_a[:, :, None], axes=(-1, 0)),
        np.tensordot(w, mask * self_b[:, None, :], axes=(-1, 0)),
        np.zeros(1) if valid_ratios is None else np.tensordot(w, valid_ratios, axes=(-1, 0)),
        np.tensordot(w, mask, axes=(-1, 0)),
        aggregation,
    )


def bootstrap_ci(
    cross: np.ndarray,
    self_a: np.ndarray,
    self_b: np.ndarray,
    *,
    aggregation: Aggregation,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    valid: np.ndarray | None = None,
) -> ConfidenceInterval:
    """Percentile bootstrap interval per CKA cell, resampling batches with replacement.

    Each replicate draws B batches with replacement (multinomial counts, seeded
    ``numpy.random.default_rng(seed)``) and re-aggregates the stored terms. Returns the
    (1−confidence)/2 and (1+confidence)/2 percentiles; cells that are NaN stay NaN. With
    ``valid`` (the batches of each cell, see :func:`aggregate`) a replicate that drew none of
    a cell's batches says nothing about it: the cell's percentiles are taken over the
    replicates that drew at least one (NaN if none did).
    """
    check_aggregation(aggregation)
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1; got {n_bootstrap}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    n_batches = np.asarray(cross).shape[0]
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_batches, np.full(n_batches, 1.0 / n_batches), size=n_bootstrap)
    replicates = aggregate(cross, self_a, self_b, aggregation, weights=counts, valid=valid)
    alpha = 100.0 * (1.0 - confidence) / 2.0
    if valid is None:
        low, high = np.percentile(replicates, [alpha, 100.0 - alpha], axis=0)
        return ConfidenceInterval(low, high)
    drew_cell = np.tensordot(counts, np.asarray(valid, dtype=np.float64), axes=(-1, 0)) > 0
    replicates = np.where(drew_cell, replicates, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells stay NaN
        low, high = np.nanpercentile(replicates, [alpha, 100.0 - alpha], axis=0)
    return ConfidenceInterval(low, high)


def permutation_p_values(observed: np.ndarray, null: np.ndarray) -> np.ndarray:
    """One-sided permutation p-value per cell: (1 + #{null ≥ observed}) / (1 + n_permutations).

    ``null`` has shape (n_permutations, *observed.shape). NaN cells give NaN.
    """
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    exceed = (null >= observed[None]).sum(axis=0)
    p_values = (1.0 + exceed) / (1.0 + null.shape[0])
    return np.where(np.isnan(observed), np.nan, p_values)
