"""Canonical correlations, mean CCA, SVCCA and PWCCA against independent references.

The references use the covariance eigenproblem Σxx⁻¹ΣxyΣyy⁻¹Σyx a = ρ²a (``numpy.linalg.eig``)
instead of the module's orthonormal bases and SVD, an explicit loop for SVCCA's variance cut,
and the canonical weight vectors a for PWCCA's variates h = Xc·a.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import ortho_group

from thinkalike.measures.cca import canonical_correlations, mean_cca, pwcca, svcca


def pair(rng: np.random.Generator, n: int, d1: int, d2: int, scales_x=None) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.standard_normal((n, 3))
    x = latent @ rng.standard_normal((3, d1)) + 0.8 * rng.standard_normal((n, d1))
    y = latent @ rng.standard_normal((3, d2)) + 1.2 * rng.standard_normal((n, d2))
    if scales_x is not None:
        x = x * np.asarray(scales_x)
    return x + 4.0, y - 2.0


def ref_eigenproblem(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ρ descending, X-side canonical weight vectors as columns) for full-rank x, y."""
    x, y = x - x.mean(0), y - y.mean(0)
    sxx, syy, sxy = x.T @ x, y.T @ y, x.T @ y
    matrix = np.linalg.solve(sxx, sxy) @ np.linalg.solve(syy, sxy.T)
    values, vectors = np.linalg.eig(matrix)
    order = np.argsort(-values.real)[: min(x.shape[1], y.shape[1])]
    return np.sqrt(np.clip(values.real[order], 0, 1)), vectors.real[:, order]


def ref_pwcca(x: np.ndarray, y: np.ndarray) -> float:
    rho, weights = ref_eigenproblem(x, y)
    xc = x - x.mean(0)
    variates = xc @ weights
    variates /= np.linalg.norm(variates, axis=0)
    alpha = np.array([sum(abs(variates[:, i] @ xc[:, j]) for j in range(xc.shape[1])) for i in range(rho.size)])
    return float(np.sum(alpha / alpha.sum() * rho))


def ref_svcca(x: np.ndarray, y: np.ndarray, keep: float) -> float:
    reduced = []
    for m in (x, y):
        u, s, _ = np.linalg.svd(m - m.mean(0), full_matrices=False)
        k = 1
        while np.sum(s[:k] ** 2) < keep * np.sum(s**2):
            k += 1
        reduced.append(u[:, :k] * s[:k])
    return float(np.mean(ref_eigenproblem(*reduced)[0]))


@pytest.mark.parametrize("n,d1,d2", [(37, 5, 11), (50, 7, 3), (23, 4, 4)])
def test_correlations_mean_and_pwcca_equal_the_eigenproblem(n, d1, d2):
    x, y = pair(np.random.default_rng(n * d1), n, d1, d2)
    rho, _ = ref_eigenproblem(x, y)
    np.testing.assert_allclose(canonical_correlations(x, y), rho, atol=1e-10)
    assert mean_cca(x, y) == pytest.approx(rho.mean(), abs=1e-10)
    assert pwcca(x, y) == pytest.approx(ref_pwcca(x, y), abs=1e-9)


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99, 1.0])
def test_svcca_equals_the_explicit_variance_cut(keep):
    x, y = pair(np.random.default_rng(3), 41, 6, 9, scales_x=[8, 4, 2, 1, 0.2, 0.05])
    assert svcca(x, y, keep=keep) == pytest.approx(ref_svcca(x, y, keep), abs=1e-10)


def test_svcca_keep_1_is_mean_cca():
    x, y = pair(np.random.default_rng(4), 37, 5, 11)
    assert svcca(x, y, keep=1.0) == pytest.approx(mean_cca(x, y), abs=1e-12)


def test_identical_inputs_give_one():
    x, _ = pair(np.random.default_rng(5), 30, 6, 2)
    for measure in (mean_cca, svcca, pwcca):
        assert measure(x, x) == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(
        canonical_correlations(x, 2 * x @ np.random.default_rng(6).standard_normal((6, 6))), 1.0, atol=1e-10
    )


def test_rank_deficient_inputs_are_reduced_to_their_rank():
    rng = np.random.default_rng(7)
    x, y = pair(rng, 37, 4, 5)
    duplicated = np.hstack([x, x[:, :2], x[:, :1] - 3 * x[:, 1:2]])  # 7 columns, rank 4
    np.testing.assert_allclose(canonical_correlations(duplicated, y), canonical_correlations(x, y), atol=1e-10)
    assert pwcca(duplicated, y) != pytest.approx(pwcca(x, y), abs=1e-6)  # weights sum over X's own columns
    assert pwcca(y, duplicated) == pytest.approx(pwcca(y, x), abs=1e-10)  # Y's basis does not matter
    wide, narrow = rng.standard_normal((10, 30)), rng.standard_normal((10, 4))  # n < d: rank n − 1 = 9
    assert canonical_correlations(wide, narrow).size == 4
    assert mean_cca(wide, narrow) == pytest.approx(1.0, abs=1e-10)  # 9 + 4 > n − 1: trivially 1
    assert svcca(wide, narrow, keep=0.5) < 0.99  # the variance cut removes the forced overlap


def test_invariances_that_hold_and_fail():
    rng = np.random.default_rng(8)
    x, y = pair(rng, 45, 5, 6, scales_x=[10, 5, 1, 0.1, 0.05])
    q = ortho_group.rvs(5, random_state=9)
    stretch = np.diag([0.05, 0.2, 1.0, 30.0, 80.0]) @ q
    base = {f: f(x, y) for f in (mean_cca, svcca, pwcca)}
    assert mean_cca(x @ stretch - 5.0, y @ rng.standard_normal((6, 6))) == pytest.approx(base[mean_cca], abs=1e-9)
    assert svcca(3.0 * x @ q + 1.0, y[:, ::-1]) == pytest.approx(base[svcca], abs=1e-10)
    assert abs(svcca(x @ stretch, y) - base[svcca]) > 1e-3  # the 99 % cut keeps other directions
    assert pwcca(0.2 * x[:, ::-1] + 9.0, y @ rng.standard_normal((6, 6))) == pytest.approx(base[pwcca], abs=1e-9)
    assert abs(pwcca(x @ q, y) - base[pwcca]) > 1e-3  # weights are L1 sums over X's features
    assert pwcca(y, x) != pytest.approx(base[pwcca], abs=1e-3)  # asymmetric


def test_constant_input_gives_nan_with_a_warning():
    x, _ = pair(np.random.default_rng(10), 12, 3, 3)
    for measure in (mean_cca, svcca, pwcca):
        with pytest.warns(RuntimeWarning, match=f"{measure.__name__} is undefined: y is constant"):
            assert math.isnan(measure(x, np.ones((12, 2))))
    with pytest.warns(RuntimeWarning):
        assert canonical_correlations(np.ones((12, 2)), x).size == 0


def test_bad_input_names_the_parameter():
    x, y = pair(np.random.default_rng(11), 12, 3, 4)
    for keep in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"keep: {keep} must be in \(0, 1\]"):
            svcca(x, y, keep=keep)
    with pytest.raises(ValueError, match="x has 12 tokens, y has 11"):
        pwcca(x, y[:11])
    x[0, 0] = np.inf
    with pytest.raises(ValueError, match="x contains NaN or Inf"):
        mean_cca(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean_cca(y, y)
