r"""Linear predictivity: cross-validated ridge R² of one representation from the other.

Inputs X (n × d₁), Y (n × d₂), rows = the same n tokens; computed in float64.
:func:`linear_predictivity` (x, y) predicts Y from X; swap the arguments for X from Y — the
measure is asymmetric (a wide layer predicts a narrow one better than the reverse).

Protocol:

1. X is divided by one scalar, s = sqrt(‖Xc‖²_F / n) (the root-mean-square norm of a
   centred token), so that the ridge penalty's scale, hence the chosen α, does not depend on
   the overall scale of X (a single scalar from all tokens: no per-fold information leaks).
2. Out-of-fold predictions Ŷ from ``sklearn.model_selection.cross_val_predict`` over
   ``KFold(n_folds)`` — contiguous folds, no shuffling, so tokens of one sentence mostly stay
   in one fold (neighbouring tokens are correlated, and shuffled folds would leak them).
3. In each training fold, ``RidgeCV(alphas)`` (with intercept) fits
   W = argmin ‖Y − XW − 1b‖²_F + α‖W‖²_F, one α for all outputs, chosen by efficient
   leave-one-out error within the training fold.
4. R² pooled over tokens and output dimensions (variance weighted;
   ``sklearn.metrics.r2_score(multioutput="variance_weighted")``)::

       R² = 1 − Σᵢⱼ (Yᵢⱼ − Ŷᵢⱼ)² / Σᵢⱼ (Yᵢⱼ − Ȳⱼ)²,   Ȳⱼ the mean of column j over all n tokens

   ≤ 1; 1 = perfect linear prediction; ≤ 0 = no better than the mean.

Invariances: orthogonal maps, isotropic scaling, translation and permutation of either input;
not general linear maps (the ridge penalty of X and the variance weighting of Y are not
invariant to them). A Y constant over tokens has no variance to explain: NaN with a
RuntimeWarning. Cost: O(n_folds·n·d₁·min(n, d₁)) for the ridge fits plus O(n·d₁·d₂).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_predict

from thinkalike.measures.inputs import centred, paired_activations, undefined

DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-4, 4, 9))
DEFAULT_FOLDS = 5


def _check_options(alphas: Sequence[float], n_folds: int) -> tuple[float, ...]:
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"n_folds: {n_folds!r} must be an integer ≥ 2")
    values = tuple(float(a) for a in np.atleast_1d(np.asarray(alphas, dtype=np.float64)))
    if not values or not all(np.isfinite(a) and a > 0 for a in values):
        raise ValueError(f"alphas: {alphas!r} must be a non-empty sequence of positive, finite ridge penalties")
    return values


def linear_predictivity(
    x: Any, y: Any, alphas: Sequence[float] = DEFAULT_ALPHAS, n_folds: int = DEFAULT_FOLDS
) -> float:
    """Cross-validated, variance-weighted ridge R² of y predicted from x (module docstring)."""
    penalties = _check_options(alphas, n_folds)
    x_matrix, y_matrix = paired_activations(
        x, y, measure=f"linear_predictivity with n_folds = {n_folds}", min_tokens=2 * n_folds
    )
    if not centred(y_matrix).any():
        return undefined("linear_predictivity", "y is constant over tokens (no variance to predict)")
    scale = float(np.sqrt(np.sum(centred(x_matrix) ** 2) / x_matrix.shape[0]))
    inputs = x_matrix / scale if scale > 0 else x_matrix
    # an array, not a tuple: RidgeCV writes its checked value back into a one-element alphas
    predicted = cross_val_predict(RidgeCV(alphas=np.array(penalties)), inputs, y_matrix, cv=KFold(n_splits=n_folds))
    return float(r2_score(y_matrix, predicted, multioutput="variance_weighted"))
