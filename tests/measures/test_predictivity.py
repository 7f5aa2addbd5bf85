"""Cross-validated ridge R² against closed-form ridge on contiguous folds and brute-force leave-one-out,
and against the sklearn recipe the module's docstring names (which it evaluates from per-fold SVDs), on both
of its paths (per pair, and the Gram path of per-layer forms)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_predict

from thinkalike.measures import predictivity
from thinkalike.measures.predictivity import (
    DEFAULT_ALPHAS,
    linear_predictivity,
    linear_predictivity_prepared,
    prepare_predictivity,
)


def pair(rng: np.random.Generator, n: int, d1: int, d2: int, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((n, d1)) * rng.uniform(0.5, 3.0, d1) + 2.0
    return x, x @ rng.standard_normal((d1, d2)) + noise * rng.standard_normal((n, d2)) - 1.0


def ridge_predict(x_train, y_train, x_test, alpha):
    """Closed-form ridge with an unpenalised intercept: centre on the training rows, solve, add the means back."""
    mx, my = x_train.mean(0), y_train.mean(0)
    xc = x_train - mx
    weights = np.linalg.solve(xc.T @ xc + alpha * np.eye(xc.shape[1]), xc.T @ (y_train - my))
    return (x_test - mx) @ weights + my


def loo_alpha(x, y, alphas):
    """The α with the least leave-one-out squared error, by refitting without each row."""
    errors = []
    for alpha in alphas:
        rows = np.arange(len(x))
        errors.append(
            sum(np.sum((ridge_predict(x[rows != i], y[rows != i], x[i : i + 1], alpha) - y[i]) ** 2) for i in rows)
        )
    return alphas[int(np.argmin(errors))]


def ref_predictivity(x, y, alphas, n_folds):
    xs = x / math.sqrt(np.sum((x - x.mean(0)) ** 2) / len(x))
    predicted = np.empty_like(y)
    for test in np.array_split(np.arange(len(x)), n_folds):  # contiguous, first folds one longer
        train = np.setdiff1d(np.arange(len(x)), test)
        alpha = loo_alpha(xs[train], y[train], alphas)
        predicted[test] = ridge_predict(xs[train], y[train], xs[test], alpha)
    return 1.0 - np.sum((y - predicted) ** 2) / np.sum((y - y.mean(0)) ** 2)


@pytest.mark.parametrize("n,d1,d2,n_folds", [(37, 5, 11, 5), (23, 7, 3, 4), (30, 40, 2, 3)])
def test_equals_closed_form_ridge_with_one_alpha(n, d1, d2, n_folds):
    x, y = pair(np.random.default_rng(n + d1), n, d1, d2, noise=2.0)
    for alpha in (0.01, 3.0):
        got = linear_predictivity(x, y, alphas=[alpha], n_folds=n_folds)
        assert got == pytest.approx(ref_predictivity(x, y, [alpha], n_folds), abs=1e-10)


def sklearn_predictivity(x, y, alphas, n_folds):
    xs = x / math.sqrt(np.sum((x - x.mean(0)) ** 2) / len(x))
    predicted = cross_val_predict(RidgeCV(alphas=np.array(alphas)), xs, y, cv=KFold(n_splits=n_folds))
    return float(r2_score(y, predicted, multioutput="variance_weighted"))


@pytest.mark.parametrize("n,d1,d2,n_folds", [(37, 5, 11, 5), (60, 12, 7, 4), (30, 40, 6, 3), (25, 3, 2, 5)])
def test_equals_sklearn_cross_val_predict_of_ridgecv(n, d1, d2, n_folds):
    rng = np.random.default_rng(10 * n + d1)
    x, y = pair(rng, n, d1, d2, noise=float(rng.uniform(0.2, 3.0)))
    cases = [
        (x, y),
        (np.hstack([x, x[:, :2], x[:, :1] - x[:, 1:2]]), y),  # rank-deficient x
        (x, np.hstack([y, np.full((n, 1), 2.5)])),
    ]  # a constant target column
    for xs, ys in cases:
        for alphas in (DEFAULT_ALPHAS, [0.3, 3.0, 30.0]):
            expected = sklearn_predictivity(xs, ys, alphas, n_folds)
            assert linear_predictivity(xs, ys, alphas=alphas, n_folds=n_folds) == pytest.approx(expected, abs=1e-10)


def test_alpha_is_chosen_by_leave_one_out_in_each_training_fold():
    x, y = pair(np.random.default_rng(1), 25, 6, 4, noise=3.0)
    alphas = [0.1, 3.0, 100.0]
    assert linear_predictivity(x, y, alphas=alphas) == pytest.approx(ref_predictivity(x, y, alphas, 5), abs=1e-10)


def test_extremes_and_asymmetry():
    rng = np.random.default_rng(2)
    x, _ = pair(rng, 40, 6, 1)
    assert linear_predictivity(x, x, alphas=[1e-9]) == pytest.approx(1.0, abs=1e-9)
    assert linear_predictivity(x, x[:, :2]) > 0.999
    assert linear_predictivity(x[:, :2], x) < 0.6  # two columns cannot predict the other four
    assert linear_predictivity(x, rng.standard_normal((40, 3))) < 0.1  # unrelated: at or below the mean


def test_invariances_and_a_linear_map_that_changes_it():
    rng = np.random.default_rng(3)
    x, y = pair(rng, 40, 5, 4, noise=2.0)
    base = linear_predictivity(x, y)
    qx, qy = ortho_group.rvs(5, random_state=4), ortho_group.rvs(4, random_state=5)
    assert linear_predictivity(7.0 * x @ qx - 3.0, 0.2 * y[:, ::-1] @ qy + 1.0) == pytest.approx(base, abs=1e-10)
    assert abs(linear_predictivity(x, y @ np.diag([0.05, 1.0, 1.0, 20.0])) - base) > 1e-3


def test_constant_target_gives_nan_with_a_warning():
    x, _ = pair(np.random.default_rng(6), 12, 3, 1)
    with pytest.warns(RuntimeWarning, match="linear_predictivity is undefined: y is constant"):
        assert math.isnan(linear_predictivity(x, np.full((12, 2), 3.0)))


def test_bad_input_names_the_parameter():
    x, y = pair(np.random.default_rng(7), 12, 3, 2)
    with pytest.raises(ValueError, match="n_folds: 1 must be an integer ≥ 2"):
        linear_predictivity(x, y, n_folds=1)
    for alphas in ([], [1.0, -2.0], [np.inf]):
        with pytest.raises(ValueError, match="alphas: .* must be a non-empty sequence of positive"):
            linear_predictivity(x, y, alphas=alphas)
    with pytest.raises(ValueError, match="n: linear_predictivity with n_folds = 5 needs at least 10 tokens; got n = 8"):
        linear_predictivity(x[:8], y[:8])
    with pytest.raises(ValueError, match="x has 12 tokens, y has 11"):
        linear_predictivity(x, y[:11])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        linear_predictivity(x, y)


@pytest.mark.parametrize("n,d1,d2,n_folds", [(37, 5, 11, 5), (30, 40, 6, 3), (60, 70, 90, 4), (41, 12, 50, 3)])
def test_the_gram_path_equals_the_feature_path_and_sklearn(n, d1, d2, n_folds):
    """ridge_gram's per-layer forms (the path measure_table takes for a predictor with many wide targets) give
    the value of the per-pair evaluation and of sklearn, on narrow, wide, rank-deficient, offset and partly
    constant inputs."""
    rng = np.random.default_rng(7 * n + d2)
    x, y = pair(rng, n, d1, d2, noise=float(rng.uniform(0.2, 3.0)))
    cases = [
        (x, y),
        (np.hstack([x, x[:, :2], x[:, :1] - x[:, 1:2]]), y),  # rank-deficient x
        (x, np.hstack([y, np.full((n, 1), 2.5)])),  # a constant target column
        (x + 1e4, y - 3e4),
    ]  # large offsets: the target's Gram is of its centred rows
    for xs, ys in cases:
        for alphas in (DEFAULT_ALPHAS, [0.3, 3.0, 30.0]):
            px, py = prepare_predictivity(xs, alphas, n_folds), prepare_predictivity(ys, alphas, n_folds, name="y")
            feature = linear_predictivity_prepared(px, py)  # no expect_comparisons: the per-pair path
            assert not px.gram_path(py.width)
            gram = predictivity._gram_r2(px, py)
            assert gram == pytest.approx(feature, abs=1e-11)
            assert gram == pytest.approx(sklearn_predictivity(xs, ys, alphas, n_folds), abs=1e-10)


def test_a_predictor_told_of_many_wide_targets_takes_the_gram_path_and_a_permuted_target_moves_its_gram():
    rng = np.random.default_rng(8)
    x, y = pair(rng, 50, 60, 70)
    px = prepare_predictivity(x, n_folds=4)
    px.expect_comparisons(1)
    assert not px.gram_path(70)  # one pair: the per-layer forms do not pay
    px.expect_comparisons(20)
    py = prepare_predictivity(y, n_folds=4, name="y")
    value = linear_predictivity_prepared(px, py)
    assert px.gram_path(70) and "gram_folds" in px.__dict__
    assert value == pytest.approx(linear_predictivity(x, y, n_folds=4), abs=1e-11)
    permutation = rng.permutation(50)
    moved = py.permuted(permutation)  # the target's Gram moves with the rows
    np.testing.assert_allclose(
        moved.target.gram, prepare_predictivity(y[permutation], n_folds=4).target.gram, rtol=0, atol=1e-9
    )
    assert linear_predictivity_prepared(px, moved) == pytest.approx(
        linear_predictivity(x, y[permutation], n_folds=4), abs=1e-11
    )
    px.release()
    assert "gram_folds" not in px.__dict__ and "folds" not in px.__dict__


def test_the_gram_path_is_not_taken_when_its_forms_would_not_fit():
    from thinkalike.measures.ridge_gram import LOO_FORMS_MAX_BYTES, gram_path_pays, loo_forms_bytes

    sizes = [103, 103, 102, 102, 102]
    assert loo_forms_bytes(512, sizes, 9) < 30 * 2**20 and gram_path_pays(512, sizes, 9, 576, 576, 31)
    big = [400] * 5  # n = 2000: 440 MB of forms
    assert loo_forms_bytes(2000, big, 9) > LOO_FORMS_MAX_BYTES and not gram_path_pays(2000, big, 9, 4096, 4096, 100)
