"""Work shared across layer pairs and permutations equals the straightforward per-pair computation.

The references here compute every cell from its definition on the raw pair (no preparation, no row
factor, Gram, complement or permuted preparation): ‖XcᵀYc‖_* by an SVD of the d₁ × d₂ product, the
canonical correlations as the singular values of Q_xᵀQ_y, RSA by scipy, predictivity by sklearn.
Layers both narrower and wider than they have rows (d > n, where the token-space paths are taken).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg, stats
from scipy.spatial.distance import pdist
from sklearn.linear_model import RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_predict

from thinkalike.measures import cka as cka_module
from thinkalike.measures.calibration import calibrate
from thinkalike.measures.cca import prepare_cca, prepare_svcca, variance_subspace
from thinkalike.measures.compact import (
    complement_basis,
    correlation_sum,
    permuted_condensed,
    row_factor,
    triangular_cross,
)
from thinkalike.measures.distances import match_layers_by_relative_depth
from thinkalike.measures.inputs import Layer, centred
from thinkalike.measures.layerwise import measure_table
from thinkalike.measures.neighbours import cknna, knn_jaccard, mutual_knn
from thinkalike.measures.registry import MEASURE_NAMES
from thinkalike.measures.shape import partially_whitened, prepare_shape

N = 40
OPTIONS = {
    "angular_shape": {"alpha": 0.5},
    "svcca": {"keep": 0.99},
    "mutual_knn": {"k": 5},
    "cknna": {"k": 5},
    "knn_jaccard": {"k": 5},
    "linear_predictivity": {"alphas": [0.01, 1.0, 100.0], "n_folds": 4},
}


def model(seed: int, widths: tuple[int, ...], n: int = N) -> list[np.ndarray]:
    """Residual-stream-like layers of the given widths (some wider than n), sharing a latent signal."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 6))
    return [latent @ rng.standard_normal((6, d)) + 0.7 * rng.standard_normal((n, d)) + 0.3 for d in widths]


def _cosine(bx: np.ndarray, by: np.ndarray) -> float:
    return float(np.clip(linalg.svdvals(bx.T @ by).sum() / (np.linalg.norm(bx) * np.linalg.norm(by)), 0.0, 1.0))


def _mean_correlation(qx: np.ndarray, qy: np.ndarray) -> float:
    return float(np.mean(np.clip(linalg.svdvals(qx.T @ qy), 0.0, 1.0)))


def reference(name: str, x: np.ndarray, y: np.ndarray) -> float:
    """One cell from the measure's definition (module docstring)."""
    xc, yc = centred(x), centred(y)
    if name == "cka":
        return cka_module.cka(x, y, estimator="unbiased")
    if name == "procrustes":
        return math.sqrt(max(0.0, 2.0 - 2.0 * _cosine(xc, yc)))
    if name == "angular_shape":
        return math.acos(_cosine(partially_whitened(xc, 0.5), partially_whitened(yc, 0.5)))
    if name == "mean_cca":
        return _mean_correlation(linalg.orth(xc), linalg.orth(yc))
    if name == "svcca":
        return _mean_correlation(variance_subspace(xc, 0.99), variance_subspace(yc, 0.99))
    if name == "pwcca":  # the bases of prepare_cca: where r_x + r_y > n − 1 some ρᵢ are tied at 1, and the
        # weights within a tied block depend on the basis (cca's module docstring), so any other basis may differ
        qx, qy = prepare_cca(x).basis, prepare_cca(y).basis
        rotation, rho, _ = linalg.svd(qx.T @ qy, full_matrices=False)
        alpha = np.abs(rotation[:, : rho.size].T @ (qx.T @ xc)).sum(axis=1)
        return float(np.dot(alpha / alpha.sum(), np.clip(rho, 0.0, 1.0)))
    if name == "rsa":
        return float(stats.spearmanr(pdist(x, "correlation"), pdist(y, "correlation"))[0])
    if name in ("mutual_knn", "cknna", "knn_jaccard"):
        return {"mutual_knn": mutual_knn, "cknna": cknna, "knn_jaccard": knn_jaccard}[name](x, y, k=5)
    options = OPTIONS["linear_predictivity"]
    xs = x / math.sqrt(np.sum(xc**2) / len(x))
    predicted = cross_val_predict(
        RidgeCV(alphas=np.array(options["alphas"])), xs, y, cv=KFold(n_splits=options["n_folds"])
    )
    return float(r2_score(y, predicted, multioutput="variance_weighted"))


def reference_grid(layers_a: list[np.ndarray], layers_b: list[np.ndarray]) -> np.ndarray:
    return np.array([[[reference(name, x, y) for y in layers_b] for x in layers_a] for name in MEASURE_NAMES])


@pytest.mark.parametrize(
    ("widths_a", "widths_b"),
    [
        ((8, 50, 72), (30, 45, 12)),  # narrow, wide (d > n) and in between (r_x + r_y > n − 1)
        ((35, 33), (38, 36, 34)),  # both below n, together above it: the CCA complements
    ],
)
def test_table_equals_the_per_pair_definitions(widths_a, widths_b):
    a, b = model(1, widths_a), model(2, widths_b)
    table = measure_table(a, b, MEASURE_NAMES, OPTIONS)
    values = table.value.to_numpy().reshape(len(MEASURE_NAMES), len(a), len(b))
    np.testing.assert_allclose(values, reference_grid(a, b), rtol=0, atol=1e-9)


def test_self_table_equals_the_per_pair_definitions():
    a = model(3, (10, 44, 60, 25))
    table = measure_table(a, None, MEASURE_NAMES, OPTIONS)
    values = table.value.to_numpy().reshape(len(MEASURE_NAMES), len(a), len(a))
    expected = reference_grid(a, a)
    diagonal = np.zeros_like(values, dtype=bool)
    for m, name in enumerate(MEASURE_NAMES):
        if name in ("procrustes", "angular_shape"):
            diagonal[m] = np.eye(len(a), dtype=bool)  # a shape distance of a layer to itself: ~1e-8, not 0
    np.testing.assert_allclose(values[~diagonal], expected[~diagonal], rtol=0, atol=1e-9)
    np.testing.assert_allclose(values[diagonal], 0.0, atol=1e-6)


def test_calibration_nulls_equal_tables_of_the_permuted_rows():
    a, b = model(4, (12, 55)), model(5, (48, 20))
    b[1][7] = b[1][3]  # a duplicated token: ties in its k-NN graph, so that preparation is made again
    result = calibrate(a, b, MEASURE_NAMES, OPTIONS, n_permutations=3, seed=2)
    for p, permutation in enumerate(result.permutations):
        table = measure_table(a, [layer[permutation] for layer in b], MEASURE_NAMES, OPTIONS)
        expected = table.value.to_numpy().reshape(len(MEASURE_NAMES), 2, 2)
        np.testing.assert_allclose(result.null_cells[p], expected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            result.null_cells[p], reference_grid(a, [layer[permutation] for layer in b]), rtol=0, atol=1e-9
        )


def test_the_shared_factors():
    rng = np.random.default_rng(6)
    x = centred(rng.standard_normal((30, 45)))
    factor = row_factor(x)
    assert factor.shape == (30, 30)
    np.testing.assert_allclose(factor @ factor.T, x @ x.T, atol=1e-10)
    q = linalg.orth(centred(rng.standard_normal((30, 20))))
    complement = complement_basis(q)
    assert complement.shape == (30, 9)
    np.testing.assert_allclose(complement.T @ complement, np.eye(9), atol=1e-12)
    np.testing.assert_allclose(complement.T @ np.hstack([q, np.ones((30, 1))]), 0.0, atol=1e-12)
    p = linalg.orth(centred(rng.standard_normal((30, 15))))
    assert correlation_sum(q, p, complement, complement_basis(p)) == pytest.approx(correlation_sum(q, p), abs=1e-12)
    permutation = rng.permutation(30)
    np.testing.assert_array_equal(permuted_condensed(pdist(x), permutation), pdist(x[permutation]))
    for width in (45, 29, 30):  # a square row factor and lower-trapezoidal ones (n × 29, n × 30)
        lower = row_factor(centred(rng.standard_normal((30, width))))
        assert not np.triu(lower, 1).any()
        other = rng.standard_normal((30, 17))
        for right in (other, lower[permutation]):  # any matrix with the same rows
            np.testing.assert_allclose(triangular_cross(lower, right), lower.T @ right, rtol=0, atol=1e-12)


def test_a_layer_shares_its_centred_matrix_and_svd_and_changes_no_bit():
    """The preparations that take a Layer (measure_table, the calibration) equal those of its matrix, bit for bit."""
    x = model(9, (50,))[0]
    layer = Layer(x)
    shape, whitened = prepare_shape(layer), prepare_shape(layer, 0.5)
    reduced, svcca_basis = prepare_cca(layer, max_dims=7), prepare_svcca(layer, 0.99, max_dims=7)
    assert shape.basis is reduced.centred is layer.centred.matrix  # one centred matrix, one SVD for all
    assert "svd" in layer.centred.__dict__
    np.testing.assert_array_equal(shape.basis, prepare_shape(x).basis)
    np.testing.assert_array_equal(whitened.basis, prepare_shape(x, 0.5).basis)
    np.testing.assert_array_equal(reduced.basis, prepare_cca(x, max_dims=7).basis)
    np.testing.assert_array_equal(svcca_basis.basis, prepare_svcca(x, 0.99, max_dims=7).basis)
    layer.release()
    assert "centred" not in layer.__dict__


def test_calibration_on_a_grid_computes_only_its_cells_and_searches_only_them():
    a, b = model(7, (9, 10, 11, 12)), model(8, (9, 10))
    grid = [(0, 1), (3, 0)]
    full = calibrate(a, b, ["cka", "procrustes"], n_permutations=4, seed=3)
    part = calibrate(a, b, ["cka", "procrustes"], n_permutations=4, seed=3, pairs=grid)
    cells = set(grid) | set(match_layers_by_relative_depth(4, 2))  # the grid and the matched pairs
    assert cells == {(0, 1), (3, 0), (0, 0), (3, 1)}
    inside = np.zeros((4, 2), dtype=bool)
    inside[tuple(np.array(sorted(cells)).T)] = True
    np.testing.assert_array_equal(part.null_cells[:, :, inside], full.null_cells[:, :, inside])
    assert np.isnan(part.null_cells[:, :, ~inside]).all()
    np.testing.assert_array_equal(part.null_matched_mean, full.null_matched_mean)
    for m in range(2):
        best = np.max(full.null_cells[:, m][:, inside] * (1 if m == 0 else -1), axis=1) * (1 if m == 0 else -1)
        np.testing.assert_array_equal(part.null_best[:, m], best)
    scores = part.scores[part.scores.statistic == "cell"]
    outside = ~np.array([(i, j) in cells for i, j in zip(scores.layer_a, scores.layer_b)])
    assert scores[outside].z.isna().all() and (scores[outside].n_null == 0).all()
    assert scores[~outside].z.notna().all()
