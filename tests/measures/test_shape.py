"""Procrustes and netrep's angular shape metric against independent references.

References written here, differently from the module: the Procrustes distance by solving the
rotation with ``scipy.linalg.orthogonal_procrustes`` on zero-padded matrices and measuring
‖X̂R − Ŷ‖_F; the angular metric by replaying netrep's ``LinearMetric.fit/score`` path (zero-pad,
``whiten`` with eigenvalues of XᵀX clipped at 1e-7 and variance preserved, SVD alignment,
transform, angle of the flattened matrices).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group

from thinkalike.measures.cca import mean_cca
from thinkalike.measures.shape import angular_shape_distance, procrustes_distance


def pair(rng: np.random.Generator, n: int, d1: int, d2: int, noise: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.standard_normal((n, 3))
    x = latent @ rng.standard_normal((3, d1)) + noise * rng.standard_normal((n, d1)) + 2.0
    y = latent @ rng.standard_normal((3, d2)) + noise * rng.standard_normal((n, d2)) - 1.0
    return x, y


def zero_pad(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = max(x.shape[1], y.shape[1])
    return np.pad(x, ((0, 0), (0, width - x.shape[1]))), np.pad(y, ((0, 0), (0, width - y.shape[1])))


def ref_procrustes(x: np.ndarray, y: np.ndarray) -> float:
    x, y = zero_pad(x - x.mean(0), y - y.mean(0))
    x, y = x / np.linalg.norm(x), y / np.linalg.norm(y)
    rotation, _ = orthogonal_procrustes(x, y)
    return float(np.linalg.norm(x @ rotation - y))


def netrep_whiten(x: np.ndarray, alpha: float, eigval_tol: float = 1e-7) -> np.ndarray:
    if alpha > 1 - eigval_tol:
        return x
    lam, vectors = np.linalg.eigh(x.T @ x)
    lam = np.maximum(lam, eigval_tol)
    d = alpha + (1 - alpha) * lam ** (-1 / 2)
    new_var = np.sum(alpha**2 * lam + 2 * alpha * (1 - alpha) * lam**0.5 + (1 - alpha) ** 2)
    d *= np.sqrt(np.sum(lam) / new_var)
    return x @ ((vectors * d[None, :]) @ vectors.T)


def ref_netrep_angle(x: np.ndarray, y: np.ndarray, alpha: float) -> float:
    x, y = zero_pad(x, y)
    xw, yw = netrep_whiten(x - x.mean(0), alpha), netrep_whiten(y - y.mean(0), alpha)
    u, _, vt = np.linalg.svd(xw.T @ yw)
    tx, ty = (xw @ u).ravel(), (yw @ vt.T).ravel()
    return float(np.arccos(np.clip(tx @ ty / (np.linalg.norm(tx) * np.linalg.norm(ty)), -1, 1)))


@pytest.mark.parametrize("n,d1,d2", [(37, 5, 11), (40, 6, 6), (9, 12, 3)])
def test_procrustes_equals_the_solved_rotation(n, d1, d2):
    x, y = pair(np.random.default_rng(n + d1), n, d1, d2)
    assert procrustes_distance(x, y) == pytest.approx(ref_procrustes(x, y), abs=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("n,d1,d2", [(37, 5, 11), (40, 6, 6), (12, 15, 4)])
def test_angular_shape_distance_equals_netrep(n, d1, d2, alpha):
    x, y = pair(np.random.default_rng(10 * n + d2), n, d1, d2)
    assert angular_shape_distance(x, y, alpha=alpha) == pytest.approx(ref_netrep_angle(x, y, alpha), abs=1e-8)


def test_procrustes_is_the_chord_of_the_angle_and_alpha_0_is_mean_cca():
    x, y = pair(np.random.default_rng(1), 37, 5, 11)
    theta = angular_shape_distance(x, y)
    assert procrustes_distance(x, y) == pytest.approx(2 * math.sin(theta / 2), abs=1e-12)
    x, y = pair(np.random.default_rng(2), 37, 6, 6)
    assert math.cos(angular_shape_distance(x, y, alpha=0.0)) == pytest.approx(mean_cca(x, y), abs=1e-10)


def test_identical_shapes_are_at_zero_and_orthogonal_ones_at_the_maximum():
    rng = np.random.default_rng(3)
    x, _ = pair(rng, 30, 7, 7)
    same_shape = 3.0 * x @ ortho_group.rvs(7, random_state=4) + 5.0
    assert procrustes_distance(x, same_shape) == pytest.approx(0.0, abs=1e-6)  # sqrt of rounding ~1e-16
    for alpha in (0.0, 0.5, 1.0):
        assert angular_shape_distance(x, x, alpha=alpha) == pytest.approx(0.0, abs=1e-6)
    raw = rng.standard_normal((30, 7))
    basis, _ = np.linalg.qr(raw - raw.mean(0))  # centred orthonormal columns: XᵀY = 0
    x, y = basis[:, :3], basis[:, 3:]
    assert procrustes_distance(x, y) == pytest.approx(math.sqrt(2), abs=1e-10)
    assert angular_shape_distance(x, y) == pytest.approx(math.pi / 2, abs=1e-10)


def test_invariances_and_the_ones_each_alpha_lacks():
    rng = np.random.default_rng(5)
    x, y = pair(rng, 37, 5, 5)
    q = ortho_group.rvs(5, random_state=6)
    stretch = np.diag([0.05, 0.3, 1.0, 4.0, 20.0]) @ q  # invertible, far from orthogonal
    base = {alpha: angular_shape_distance(x, y, alpha=alpha) for alpha in (0.0, 0.5, 1.0)}
    for alpha, value in base.items():  # every alpha: rotations, translation, permutation
        assert angular_shape_distance(x @ q + 7.0, y[:, ::-1], alpha=alpha) == pytest.approx(value, abs=1e-10)
    assert angular_shape_distance(x @ stretch, y, alpha=0.0) == pytest.approx(base[0.0], abs=1e-9)  # CCA
    assert abs(angular_shape_distance(x @ stretch, y, alpha=1.0) - base[1.0]) > 1e-3
    assert abs(angular_shape_distance(x @ stretch, y, alpha=0.5) - base[0.5]) > 1e-3
    assert angular_shape_distance(4.0 * x, y, alpha=1.0) == pytest.approx(base[1.0], abs=1e-12)
    assert abs(angular_shape_distance(4.0 * x, y, alpha=0.5) - base[0.5]) > 1e-4  # netrep: XᵀX not scale-free
    d = procrustes_distance(x, y)
    assert procrustes_distance(0.1 * x @ q - 3.0, y) == pytest.approx(d, abs=1e-10)
    assert abs(procrustes_distance(x @ stretch, y) - d) > 1e-3


def test_torch_input_and_constant_input():
    x, y = pair(np.random.default_rng(7), 20, 4, 6)
    expected = procrustes_distance(x, y)
    assert procrustes_distance(torch.from_numpy(x).float(), torch.from_numpy(y)) == pytest.approx(expected, abs=1e-6)
    assert procrustes_distance(torch.from_numpy(x).bfloat16(), y) == pytest.approx(expected, abs=0.05)
    with pytest.warns(RuntimeWarning, match="angular_shape_distance is undefined: y is constant"):
        assert math.isnan(angular_shape_distance(x, np.full((20, 3), 0.37)))


def test_bad_input_names_the_parameter():
    x, y = pair(np.random.default_rng(8), 10, 3, 4)
    with pytest.raises(ValueError, match="x has 10 tokens, y has 9"):
        procrustes_distance(x, y[:9])
    with pytest.raises(ValueError, match="n: procrustes_distance needs at least 2 tokens; got n = 1"):
        procrustes_distance(x[:1], y[:1])
    y[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"y contains NaN or Inf \(1 entries; first at token 4, feature 2\)"):
        angular_shape_distance(x, y)
    with pytest.raises(ValueError, match=r"alpha: 1.5 must be in \[0, 1\]"):
        angular_shape_distance(x, x, alpha=1.5)
    with pytest.raises(ValueError, match="x must be a 2-D"):
        procrustes_distance(x[None], x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        procrustes_distance(x, x)  # clean input: no warnings
