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
RuntimeWarning.

Implementation. Steps 2–4 are what ``cross_val_predict(RidgeCV(alphas), X/s, Y,
cv=KFold(n_folds))`` and ``r2_score(Y, Ŷ, multioutput="variance_weighted")`` compute
(``tests/measures/test_predictivity.py`` checks against both), evaluated from one thin SVD
per training fold, Xc = U·diag(σ)·Vᵀ (Xc the training rows of X/s minus their means), so that
everything that depends on X alone is prepared once per input (:func:`prepare_predictivity`)
and reused for every Y:

- leave-one-out (sklearn's efficient form, intercept included): with fₖ = σₖ²/(σₖ² + α) and
  the hat diagonal hᵢ = Σₖ Uᵢₖ²fₖ, the LOO residual of token i is cᵢ/dᵢ with
  c = Yc − U·diag(f)·UᵀYc and dᵢ = 1 − hᵢ − (1 − (U·diag(f)·Uᵀ1)ᵢ)/n_train;
- the squared LOO error Σᵢ ‖cᵢ‖²/dᵢ² is evaluated per α without forming c: writing
  c = P + U·diag(e)·M (M = UᵀYc, P = Yc − UM, eₖ = 1 − fₖ) and wᵢ = 1/dᵢ²,
  Σᵢ wᵢ‖cᵢ‖² = Σᵢ wᵢ‖Pᵢ‖² + 2·Σₖ eₖ·Σᵢ wᵢUᵢₖ(PMᵀ)ᵢₖ + Σₖₗ eₖeₗ(MMᵀ)ₖₗ(Uᵀdiag(w)U)ₖₗ,
  where d, w and Uᵀdiag(w)U (one per α) belong to X; the terms are each of the size of the
  error (no cancellation of large terms);
- the α with the least error (the first on ties, as RidgeCV) gives the coefficients
  V·diag(σ/(σ² + α))·M and the test-fold predictions (X_test − x̄)V·diag(σ/(σ² + α))·M + ȳ.

Per pair this costs O(n·r·d₂) (r = min(n_train, d₁)) instead of RidgeCV's O(n·d₁·d₂) per α.

When the predictor is at least as wide as a training fold has tokens, U is square (orthogonal) and
P = Yc − U·UᵀYc = 0, so the two terms with P are left out (they are rounding noise then) — about half
of a pair's products at d ≥ n.
Preparation (per input, only when it is the predictor x): the folds' SVDs, O(n_folds·n·d₁·r),
and the α-dependent d and Uᵀdiag(w)U, O(n_alphas·n_folds·n·r²).

The Gram path. A predictor that will be compared with many targets (``expect_comparisons``, which
:func:`thinkalike.measures.layerwise.measure_table` and the calibration call with the number of pairs of its
row) may instead move the per-pair work into per-layer forms: each α's LOO error is ⟨A_a, K[t, t]⟩_F and each
fold's squared test residual ⟨D_aᵀD_a, K⟩_F, with A_a and D_a of X alone and K = Y₀Y₀ᵀ the target's token
Gram (:mod:`thinkalike.measures.ridge_gram`, with the derivation), so a pair costs n_folds·(n_alphas + 1)
inner products of about n²/2 entries, whatever the widths. It is taken when its cost model says so
(:func:`~thinkalike.measures.ridge_gram.gram_path_pays`: at n = 512, five folds, nine α and d = 576 from four
pairs per predictor on; at d = 96 from about forty); otherwise, and always without the hint (the function
:func:`linear_predictivity` itself), the computation is the one above, unchanged.
Both paths give the same value to rounding (``tests/measures/test_predictivity.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

import numpy as np
from scipy import linalg

from thinkalike.measures.inputs import centred, check_same_tokens, checked_matrix, paired_activations, undefined
from thinkalike.measures.measure import SHAPE_INVARIANCES, Measure, MeasureOptions, option_check
from thinkalike.measures.ridge_gram import GramFold, GramTarget, gram_path_pays, loo_forms, residual_form

DEFAULT_ALPHAS: tuple[float, ...] = tuple(float(a) for a in np.logspace(-4, 4, 9))
DEFAULT_FOLDS = 5


def _check_options(alphas: Sequence[float], n_folds: int) -> tuple[float, ...]:
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"n_folds: {n_folds!r} must be an integer ≥ 2")
    values = tuple(float(a) for a in np.atleast_1d(np.asarray(alphas, dtype=np.float64)))
    if not values or not all(np.isfinite(a) and a > 0 for a in values):
        raise ValueError(f"alphas: {alphas!r} must be a non-empty sequence of positive, finite ridge penalties")
    return values


def min_tokens(n_folds: int) -> int:
    """The fewest tokens for ``n_folds`` folds (two training tokens per fold at least)."""
    return 2 * n_folds


@dataclass(frozen=True, eq=False)
class _Fold:
    """What one training fold of the predictor X contributes, for every α (module docstring)."""

    train: np.ndarray  # token indices
    test: slice
    u: np.ndarray  # (n_train, r) left singular vectors of the centred training rows
    gain: np.ndarray  # (r,) σ, for the coefficients σ/(σ² + α)
    s2: np.ndarray  # (r,) σ²
    test_projection: np.ndarray  # (n_test, r): (X_test − x̄_train)·V
    weights: np.ndarray  # (n_alphas, n_train): wᵢ = 1/dᵢ², d the LOO denominators

    @cached_property
    def weighted_gram(self) -> np.ndarray:
        """(n_alphas, r, r): Uᵀ·diag(w)·U per α (the feature path's LOO errors)."""
        u = self.u
        weighted_gram = np.empty((self.weights.shape[0], u.shape[1], u.shape[1]))
        for a, w in enumerate(self.weights):
            scaled = u * np.sqrt(w)[:, None]
            np.matmul(scaled.T, scaled, out=weighted_gram[a])  # AᵀA: numpy calls BLAS syrk
        return weighted_gram


def _fold(inputs: np.ndarray, train: np.ndarray, test: slice, alphas: np.ndarray) -> _Fold:
    x_train = inputs[train]
    mean = x_train.mean(axis=0)
    u, sigma, vt = linalg.svd(x_train - mean, full_matrices=False, check_finite=False)
    s2 = sigma**2
    hat = s2 / (s2 + alphas[:, None])  # (n_alphas, r): f_k per α
    n_train = u.shape[0]
    leverage = (u**2) @ hat.T  # (n_train, n_alphas): hᵢ
    through_ones = u @ (hat * (u.sum(axis=0))).T  # (U·diag(f)·Uᵀ1)ᵢ, ~0 since the columns are centred
    denominators = 1.0 - leverage - (1.0 - through_ones) / n_train
    weights = (1.0 / denominators**2).T
    return _Fold(train, test, u, sigma, s2, (inputs[test] - mean) @ vt.T, weights)


@dataclass(frozen=True, eq=False)
class PreparedPredictivity:
    """One input prepared for linear predictivity (:func:`prepare_predictivity`).

    As the target y only the matrix is used (and, on the Gram path, its token Gram); as the predictor x the
    folds' decompositions are computed on first use and kept.
    """

    matrix: np.ndarray
    alphas: tuple[float, ...]
    n_folds: int

    @property
    def n_tokens(self) -> int:
        return self.matrix.shape[0]

    @property
    def width(self) -> int:
        return self.matrix.shape[1]

    @cached_property
    def varies(self) -> bool:
        """Whether the input is not constant over tokens (a target needs variance)."""
        return bool(centred(self.matrix).any())

    def permuted(self, permutation: np.ndarray) -> PreparedPredictivity:
        """The preparation of X[π] (its folds, if it is ever a predictor, are decomposed on first use; its token
        Gram, if made, moves with the rows)."""
        moved = PreparedPredictivity(self.matrix[permutation], self.alphas, self.n_folds)
        if "target" in self.__dict__:
            moved.__dict__["target"] = self.target.permuted(permutation)
        return moved

    def release(self) -> None:
        """Drop the folds' decompositions and forms (tens of MB at d ≥ n), kept only while this input is the
        predictor."""
        for name in ("folds", "gram_folds"):
            self.__dict__.pop(name, None)

    def expect_comparisons(self, count: int) -> None:
        """Say that this input is about to predict ``count`` targets: the Gram path is taken from the next
        comparison on when it is cheaper for that many (module docstring)."""
        self.__dict__["comparisons"] = int(count)
        self.__dict__.pop("on_gram_path", None)

    def gram_path(self, target_width: int) -> bool:
        """Whether this predictor's comparisons take the Gram path: decided at its first comparison after
        :meth:`expect_comparisons`, by :func:`~thinkalike.measures.ridge_gram.gram_path_pays` (never without it)."""
        if "on_gram_path" not in self.__dict__:
            comparisons = self.__dict__.get("comparisons")
            sizes = [stop - start for start, stop in self.fold_bounds]
            self.__dict__["on_gram_path"] = "gram_folds" in self.__dict__ or (
                comparisons is not None
                and gram_path_pays(self.n_tokens, sizes, len(self.alphas), self.width, target_width, comparisons)
            )
        return self.__dict__["on_gram_path"]

    @property
    def fold_bounds(self) -> tuple[tuple[int, int], ...]:
        """(start, stop) of each contiguous test fold: sklearn's KFold, the first n % n_folds folds one longer."""
        n = self.n_tokens
        sizes = np.full(self.n_folds, n // self.n_folds)
        sizes[: n % self.n_folds] += 1
        stops = np.cumsum(sizes)
        return tuple((int(stop - size), int(stop)) for stop, size in zip(stops, sizes))

    @cached_property
    def target(self) -> GramTarget:
        """This input as a target on the Gram path: K = Y₀Y₀ᵀ of its centred rows."""
        return GramTarget.of(centred(self.matrix))

    @cached_property
    def gram_folds(self) -> tuple[GramFold, ...]:
        """This input as a predictor on the Gram path: the LOO forms of each fold (:mod:`~.ridge_gram`)."""
        alphas = np.array(self.alphas)
        return tuple(GramFold(loo_forms(fold.u, fold.s2, fold.weights, alphas)) for fold in self.folds)

    @cached_property
    def folds(self) -> tuple[_Fold, ...]:
        """The contiguous KFold folds of the scaled predictor (module docstring, step 1)."""
        x = self.matrix
        n = x.shape[0]
        scale = float(np.sqrt(np.sum(centred(x) ** 2) / n))
        inputs = x / scale if scale > 0 else x
        alphas = np.array(self.alphas)
        folds = []
        for start, stop in self.fold_bounds:
            train = np.concatenate([np.arange(start), np.arange(stop, n)])
            folds.append(_fold(inputs, train, slice(start, stop), alphas))
        return tuple(folds)


def prepare_predictivity(
    x: Any, alphas: Sequence[float] = DEFAULT_ALPHAS, n_folds: int = DEFAULT_FOLDS, *, name: str = "x"
) -> PreparedPredictivity:
    """The checked matrix of ``x`` with the options; its folds are decomposed when it first predicts."""
    penalties = _check_options(alphas, n_folds)
    matrix = checked_matrix(
        x, name, measure=f"linear_predictivity with n_folds = {n_folds}", min_tokens=min_tokens(n_folds)
    )
    return PreparedPredictivity(matrix, penalties, int(n_folds))


def _fold_predictions(fold: _Fold, y_train: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Test-fold predictions of RidgeCV fitted on the fold's training rows (module docstring)."""
    y_mean = y_train.mean(axis=0)
    yc = y_train - y_mean
    u = fold.u
    m = u.T @ yc  # (r, d2)
    keep = alphas[:, None] / (fold.s2 + alphas[:, None])  # e = 1 − f, (n_alphas, r)
    if u.shape[1] < u.shape[0]:
        residual = yc - u @ m  # P: the part of Yc outside the span of U
        errors = fold.weights @ np.einsum("ij,ij->i", residual, residual)  # Σᵢ wᵢ‖Pᵢ‖² per α
        errors += 2.0 * np.einsum("ak,ak->a", keep, fold.weights @ (u * (residual @ m.T)))
    else:  # U square: P = 0 (module docstring)
        errors = np.zeros(alphas.size)
    quadratic = np.matmul(fold.weighted_gram * (m @ m.T), keep[:, :, None])[:, :, 0]
    errors += np.einsum("ak,ak->a", keep, quadratic)  # Σₖₗ eₖeₗ(MMᵀ)ₖₗ(Uᵀdiag(w)U)ₖₗ per α
    best = int(np.argmin(errors))
    coefficients = (fold.gain / (fold.s2 + alphas[best]))[:, None] * m
    return fold.test_projection @ coefficients + y_mean


def _r2_variance_weighted(y: np.ndarray, predicted: np.ndarray) -> float:
    """``sklearn.metrics.r2_score(y, predicted, multioutput="variance_weighted")`` (force_finite)."""
    numerator = np.sum((y - predicted) ** 2, axis=0)
    denominator = np.sum((y - np.mean(y, axis=0)) ** 2, axis=0)
    scores = np.ones(y.shape[1])
    valid = (denominator != 0) & (numerator != 0)
    scores[valid] = 1.0 - numerator[valid] / denominator[valid]
    scores[(numerator != 0) & (denominator == 0)] = 0.0
    if not np.any(denominator != 0):
        return float(np.mean(scores))
    return float(np.average(scores, weights=denominator))


def linear_predictivity_prepared(px: PreparedPredictivity, py: PreparedPredictivity) -> float:
    """:func:`linear_predictivity` of y from x, both prepared (x's options are used)."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    if not py.varies:
        return undefined("linear_predictivity", "y is constant over tokens (no variance to predict)")
    if px.gram_path(py.width):
        return _gram_r2(px, py)
    y = py.matrix
    alphas = np.array(px.alphas)
    predicted = np.empty_like(y)
    for fold in px.folds:
        predicted[fold.test] = _fold_predictions(fold, y[fold.train], alphas)
    return _r2_variance_weighted(y, predicted)


def _gram_r2(px: PreparedPredictivity, py: PreparedPredictivity) -> float:
    """R² on the Gram path (:mod:`thinkalike.measures.ridge_gram`): per fold, the α of least LOO error
    ⟨A_a, K[t, t]⟩ (the first on ties) and the squared test residual ⟨D_aᵀD_a, K⟩; R² = 1 − Σ residuals / tr K."""
    target = py.target
    blocks = target.training_blocks(px.fold_bounds)
    alphas = np.array(px.alphas)
    residual = 0.0
    for fold, forms, block in zip(px.folds, px.gram_folds, blocks):
        best = int(np.argmin(forms.loo @ block))
        if best not in forms.residuals:
            forms.residuals[best] = residual_form(
                fold.test_projection, fold.gain / (fold.s2 + alphas[best]), fold.u, px.n_tokens, fold.test
            )
        residual += float(forms.residuals[best] @ target.packed)
    return 1.0 - residual / target.trace


def linear_predictivity(
    x: Any, y: Any, alphas: Sequence[float] = DEFAULT_ALPHAS, n_folds: int = DEFAULT_FOLDS
) -> float:
    """Cross-validated, variance-weighted ridge R² of y predicted from x (module docstring)."""
    penalties = _check_options(alphas, n_folds)
    x_matrix, y_matrix = paired_activations(
        x, y, measure=f"linear_predictivity with n_folds = {n_folds}", min_tokens=min_tokens(n_folds)
    )
    return linear_predictivity_prepared(
        prepare_predictivity(x_matrix, penalties, n_folds), prepare_predictivity(y_matrix, penalties, n_folds, name="y")
    )


def _option_problem(key: str) -> Any:
    """The problem :func:`_check_options` finds with option ``key`` alone (the other at its default)."""

    def problem(value: Any) -> str | None:
        try:
            _check_options(**{"alphas": DEFAULT_ALPHAS, "n_folds": DEFAULT_FOLDS, key: value})
        except (TypeError, ValueError) as error:
            return str(error).split(": ", 1)[-1]
        return None

    return option_check(problem)


class PredictivityOptions(MeasureOptions):
    """Linear predictivity's options: the ridge penalties tried (by leave-one-out) and the contiguous folds."""

    alphas: Annotated[tuple[float, ...], _option_problem("alphas")] = DEFAULT_ALPHAS
    n_folds: Annotated[int, _option_problem("n_folds")] = DEFAULT_FOLDS


MEASURES = (
    Measure(
        "linear_predictivity",
        linear_predictivity,
        "similarity",
        False,
        SHAPE_INVARIANCES,
        "folds·n·d²",
        False,
        prepare=prepare_predictivity,
        compare=linear_predictivity_prepared,
        options=PredictivityOptions,
        order=110,
    ),
)
