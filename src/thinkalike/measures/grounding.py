"""Grounding tests of similarity measures (Klabunde et al. 2025, ReSi; Ding et al. 2021): does a measure register
what it should? No Kedro.

Every score is oriented so that larger = the measure behaves as it should; ``kind`` is the measure's
(``similarity``: larger = more alike; ``distance``: smaller = more alike) and ``s`` = +1 or −1 accordingly, so that
``s·v`` is "alikeness".

- **Layer monotonicity** (:func:`layer_monotonicity`): within one model, alikeness should fall as layers grow
  apart. For an L × L intra-model matrix V, the Spearman correlation over the pairs i < j of −|i − j| and s·V_ij
  (ReSi reports 0.98 for CKA on language models). Chance: 0.
- **Specificity** (:func:`specificity_auprc`): models that differ only in their seed (positives) should be more
  alike than models of different architectures (negatives). The average precision (area under the
  precision-recall curve, ``sklearn.metrics.average_precision_score``) of ranking the pairs by s·v; chance: the
  share of positives.
- **Sensitivity** (:func:`sensitivity_to_components`, :func:`sensitivity_score`): removing a layer's top principal
  components one after the other should make it less alike to the intact layer, step by step. For k = 0 … K
  components removed (X_k: the layer centred, its projections on the first k right singular vectors subtracted),
  the Spearman correlation of −k and s·measure(X_0, X_k); 1 when every step lowers alikeness. Chance: 0.
- **Trained vs untrained** (:func:`separation_auprc`): a trained model should be more alike to another trained
  model of its architecture (a seed replica) than to an untrained one (an initialisation). The average precision
  of ranking the replica pairs (positives) above the trained-vs-untrained pairs by s·v; chance: the share of
  positives.
- **Null** (:func:`null_level`): inputs with no correspondence — a layer against itself with its rows permuted,
  or against itself on other tokens — should score as unrelated. The mean *alikeness* a = similarity form of the
  measure (the value of a similarity; for a distance, the similarity it is computed from:
  :attr:`thinkalike.measures.registry.Measure.as_similarity`, e.g. Procrustes ‖X̂ᵀŶ‖_* = 1 − d²/2) over such
  pairs; 0 for a measure with no bias, 1 for identical inputs. Chance (what unrelated inputs should give): 0.

:func:`grounding_row` gathers one measure's scores with their chance levels (a ``measure_grounding`` table row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

KINDS = ("similarity", "distance")


def _sign(kind: str) -> float:
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} must be one of {KINDS}")
    return 1.0 if kind == "similarity" else -1.0


def layer_monotonicity(matrix: np.ndarray, kind: str) -> float:
    """Spearman ρ over i < j of −|i − j| and the oriented value (module docstring); NaN with fewer than 3 layers or
    a non-finite cell."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise ValueError(f"matrix: an intra-model (L × L) matrix is needed, got shape {values.shape}")
    rows, columns = np.triu_indices(values.shape[0], k=1)
    if len(rows) < 3 or not np.isfinite(values[rows, columns]).all():
        return float("nan")
    return float(spearmanr(-(columns - rows), _sign(kind) * values[rows, columns]).statistic)


def separation_auprc(
    values: Sequence[float], positives: Sequence[bool], kind: str, what: str = "positives"
) -> tuple[float, float]:
    """(average precision, chance) of ranking pairs by oriented value with the ``positives`` pairs first
    (``sklearn.metrics.average_precision_score``); chance = the share of positives. ``what`` names the labels in
    errors."""
    scores = _sign(kind) * np.asarray(values, dtype=np.float64)
    labels = np.asarray(positives, dtype=bool)
    if scores.shape != labels.shape or scores.ndim != 1:
        raise ValueError(f"values and {what} must be two lists of equal length, got {scores.shape} and {labels.shape}")
    if labels.all() or not labels.any():
        raise ValueError(f"{what}: needs both positive (True) and negative (False) pairs")
    if not np.isfinite(scores).all():
        return float("nan"), float(labels.mean())
    return float(average_precision_score(labels, scores)), float(labels.mean())


def specificity_auprc(values: Sequence[float], same_architecture: Sequence[bool], kind: str) -> tuple[float, float]:
    """:func:`separation_auprc` with ``same_architecture`` pairs (seed replicas) as the positives and pairs of
    different architectures as the negatives (module docstring)."""
    return separation_auprc(
        values,
        same_architecture,
        kind,
        what="same_architecture (seed-replica pairs and pairs of different architectures)",
    )


def null_level(alikeness: Sequence[float] | np.ndarray) -> float:
    """The mean alikeness (similarity form) of pairs with no correspondence (module docstring); NaN when a value
    is not finite or there are none."""
    values = np.asarray(alikeness, dtype=np.float64)
    if values.size == 0 or not np.isfinite(values).all():
        return float("nan")
    return float(values.mean())


def without_top_components(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` centred, minus its projection on its first ``k`` principal directions (right singular vectors)."""
    centred = np.asarray(x, dtype=np.float64) - np.asarray(x, dtype=np.float64).mean(axis=0)
    if k == 0:
        return centred
    if not 0 < k < min(centred.shape):
        raise ValueError(f"k: {k} must be in [0, {min(centred.shape)}) (tokens and width of the layer)")
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    top = vt[:k]
    return centred - centred @ top.T @ top


def sensitivity_score(values: Sequence[float], kind: str) -> float:
    """Spearman ρ of −k and the oriented ``values[k]`` = measure(X_0, X_k), k = 0 … K (module docstring); 0 when the
    values do not move; NaN with fewer than 3 steps or a non-finite value."""
    oriented = _sign(kind) * np.asarray(values, dtype=np.float64)
    if oriented.ndim != 1 or len(oriented) < 3 or not np.isfinite(oriented).all():
        return float("nan")
    if np.ptp(oriented) == 0.0:  # the measure does not register the removals at all
        return 0.0
    return float(spearmanr(-np.arange(len(oriented)), oriented).statistic)


def sensitivity_to_components(
    x: np.ndarray, measure: Callable[[np.ndarray, np.ndarray], float], kind: str, max_components: int = 8
) -> float:
    """:func:`sensitivity_score` of ``measure(X_0, X_k)``, k = 0 … max_components (module docstring)."""
    if max_components < 2:
        raise ValueError(f"max_components: {max_components} must be ≥ 2")
    reference = without_top_components(x, 0)
    return sensitivity_score(
        [measure(reference, without_top_components(x, k)) for k in range(max_components + 1)], kind
    )


def grounding_row(measure: str, kind: str, **scores: Any) -> dict[str, Any]:
    """One ``measure_grounding`` row: the measure, its kind and each test's score beside its chance level
    (a bare score has chance 0 — monotonicity, sensitivity, the null levels; a ``(score, chance)`` pair gives its
    own — specificity, trained vs untrained)."""
    row: dict[str, Any] = {"measure": measure, "kind": kind}
    for test, value in scores.items():
        score, chance = value if isinstance(value, tuple) else (value, 0.0)
        row[test], row[f"{test}_chance"] = score, chance
    return row
