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
- **Sensitivity** (:func:`sensitivity_to_components`): removing a layer's top principal components one after the
  other should make it less alike to the intact layer, step by step. For k = 0 … K components removed (the layer
  centred, its projections on the first k right singular vectors subtracted), the Spearman correlation of −k and
  s·measure(X, X_k); 1 when every step lowers alikeness. Chance: 0.

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


def specificity_auprc(values: Sequence[float], same_architecture: Sequence[bool], kind: str) -> tuple[float, float]:
    """(average precision, chance) of ranking pairs by oriented value with ``same_architecture`` pairs (seed
    replicas) as the positives (module docstring)."""
    scores = _sign(kind) * np.asarray(values, dtype=np.float64)
    labels = np.asarray(same_architecture, dtype=bool)
    if scores.shape != labels.shape or scores.ndim != 1:
        raise ValueError(f"values and same_architecture must be two lists of equal length, got {scores.shape} and "
                         f"{labels.shape}")
    if labels.all() or not labels.any():
        raise ValueError("same_architecture: needs both seed-replica pairs (True) and pairs of different "
                         "architectures (False)")
    if not np.isfinite(scores).all():
        return float("nan"), float(labels.mean())
    return float(average_precision_score(labels, scores)), float(labels.mean())


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


def sensitivity_to_components(x: np.ndarray, measure: Callable[[np.ndarray, np.ndarray], float], kind: str,
                              max_components: int = 8) -> float:
    """Spearman ρ of −k and the oriented ``measure(x, x without its top k components)``, k = 0 … max_components
    (module docstring)."""
    if max_components < 2:
        raise ValueError(f"max_components: {max_components} must be ≥ 2")
    steps = np.arange(max_components + 1)
    values = np.array([measure(x, without_top_components(x, int(k))) for k in steps])
    if not np.isfinite(values).all():
        return float("nan")
    return float(spearmanr(-steps, _sign(kind) * values).statistic)


def grounding_row(measure: str, kind: str, **scores: Any) -> dict[str, Any]:
    """One ``measure_grounding`` row: the measure, its kind and each test's score beside its chance level
    (``monotonicity``/``sensitivity``: chance 0; ``specificity``: a ``(score, chance)`` pair)."""
    row: dict[str, Any] = {"measure": measure, "kind": kind}
    for test, value in scores.items():
        score, chance = value if isinstance(value, tuple) else (value, 0.0)
        row[test], row[f"{test}_chance"] = score, chance
    return row
