"""Mutual k-NN, k-NN Jaccard and CKNNA against loops, sklearn's NearestNeighbors and a port of Huh et al.

References: neighbour sets by a python loop sorting each token's cosines by (−similarity, index)
(the module's tie rule); ReSi's recipe (``NearestNeighbors(n_neighbors=k + 1, metric="cosine")``,
first column dropped) on tie-free data; CKNNA by a line-by-line torch port of
``AlignmentMetrics.cknna`` / ``hsic_unbiased`` (platonic-rep ``metrics.py``), with its 1e-6 in
the denominator made a parameter.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group
from sklearn.neighbors import NearestNeighbors

from thinkalike.measures.neighbours import cknna, cosine_similarities, knn_jaccard, mutual_knn, neighbour_mask


def pair(rng: np.random.Generator, n: int, d1: int, d2: int) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.standard_normal((n, 3))
    x = latent @ rng.standard_normal((3, d1)) + 0.6 * rng.standard_normal((n, d1))
    return x, latent @ rng.standard_normal((3, d2)) + 0.9 * rng.standard_normal((n, d2))


def loop_neighbours(m: np.ndarray, k: int) -> list[set[int]]:
    norms = [math.sqrt(float(row @ row)) for row in m]
    result = []
    for i in range(len(m)):
        cosines = [(-(float(m[i] @ m[j]) / (norms[i] * norms[j])), j) for j in range(len(m)) if j != i]
        result.append({j for _, j in sorted(cosines)[:k]})
    return result


def resi_neighbours(m: np.ndarray, k: int) -> list[set[int]]:
    _, indices = NearestNeighbors(n_neighbors=k + 1, metric="cosine").fit(m).kneighbors(m)
    return [set(row[1:]) for row in indices]


def overlap_scores(a: list[set[int]], b: list[set[int]], k: int) -> tuple[float, float]:
    mutual = np.mean([len(p & q) / k for p, q in zip(a, b)])
    jaccard = np.mean([len(p & q) / len(p | q) for p, q in zip(a, b)])
    return float(mutual), float(jaccard)


def huh_cknna(x: np.ndarray, y: np.ndarray, topk: int, eps: float) -> float:
    feats_a = torch.nn.functional.normalize(torch.from_numpy(x), p=2, dim=-1)
    feats_b = torch.nn.functional.normalize(torch.from_numpy(y), p=2, dim=-1)
    n = feats_a.shape[0]

    def hsic_unbiased(k_mat, l_mat):
        m = k_mat.shape[0]
        k_tilde, l_tilde = k_mat.clone().fill_diagonal_(0), l_mat.clone().fill_diagonal_(0)
        value = (
            torch.sum(k_tilde * l_tilde.T)
            + torch.sum(k_tilde) * torch.sum(l_tilde) / ((m - 1) * (m - 2))
            - 2 * torch.sum(torch.mm(k_tilde, l_tilde)) / (m - 2)
        )
        return value / (m * (m - 3))

    def similarity(k_mat, l_mat):
        _, top_k = torch.topk(k_mat.clone().fill_diagonal_(float("-inf")), topk, dim=1)
        _, top_l = torch.topk(l_mat.clone().fill_diagonal_(float("-inf")), topk, dim=1)
        mask = torch.zeros(n, n, dtype=k_mat.dtype).scatter_(1, top_k, 1) * torch.zeros(
            n, n, dtype=k_mat.dtype
        ).scatter_(1, top_l, 1)
        return hsic_unbiased(mask * k_mat, mask * l_mat)

    k_mat, l_mat = feats_a @ feats_a.T, feats_b @ feats_b.T
    sim_kl, sim_kk, sim_ll = similarity(k_mat, l_mat), similarity(k_mat, k_mat), similarity(l_mat, l_mat)
    return sim_kl.item() / (torch.sqrt(sim_kk * sim_ll) + eps).item()


@pytest.mark.parametrize("n,d1,d2,k", [(37, 5, 11, 4), (40, 8, 3, 10), (12, 2, 6, 1)])
def test_overlaps_equal_loop_and_resi_neighbours(n, d1, d2, k):
    x, y = pair(np.random.default_rng(n + k), n, d1, d2)
    expected = overlap_scores(loop_neighbours(x, k), loop_neighbours(y, k), k)
    assert (mutual_knn(x, y, k=k), knn_jaccard(x, y, k=k)) == pytest.approx(expected, abs=1e-12)
    assert overlap_scores(resi_neighbours(x, k), resi_neighbours(y, k), k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n,d1,d2,k", [(37, 5, 11, 4), (40, 8, 3, 10), (25, 4, 4, 2)])
def test_cknna_equals_the_port_of_huh_et_al(n, d1, d2, k):
    x, y = pair(np.random.default_rng(3 * n + k), n, d1, d2)
    assert cknna(x, y, k=k) == pytest.approx(huh_cknna(x, y, k, eps=0.0), abs=1e-10)
    assert cknna(x, y, k=k) == pytest.approx(huh_cknna(x, y, k, eps=1e-6), abs=1e-3)  # their guard, small


def test_ties_take_the_lower_token_index_first():
    axes = np.eye(4)
    x = np.vstack([axes, -axes, axes[:2] + axes[2:]])  # cosines 0, ±1 and ±1/√2: many exact ties
    y = np.random.default_rng(8).standard_normal((10, 3))
    for k in (1, 2, 3, 5):
        mask = neighbour_mask(cosine_similarities(x), k)
        assert [set(np.flatnonzero(row)) for row in mask] == loop_neighbours(x, k)
        expected = overlap_scores(loop_neighbours(x, k), loop_neighbours(y, k), k)
        assert (mutual_knn(x, y, k=k), knn_jaccard(x, y, k=k)) == pytest.approx(expected, abs=1e-12)
    first_row = neighbour_mask(cosine_similarities(x), 3)[0]  # e₁: e₁+e₃ (cos 1/√2), then six tied at 0
    assert set(np.flatnonzero(first_row)) == {8, 1, 2}


def test_identical_inputs_and_all_neighbours_give_one():
    x, y = pair(np.random.default_rng(4), 30, 5, 7)
    q = ortho_group.rvs(5, random_state=5)
    for measure in (mutual_knn, knn_jaccard, cknna):
        assert measure(x, 3.0 * x @ q, k=5) == pytest.approx(1.0, abs=1e-12)
    assert mutual_knn(x, y, k=29) == knn_jaccard(x, y, k=29) == 1.0  # every other token is a neighbour
    assert mutual_knn(x, y, k=5) < 0.9
    assert abs(mutual_knn(x + 3.0, y, k=5) - mutual_knn(x, y, k=5)) > 0.01  # cosine of uncentred rows


def test_zero_row_gives_nan_with_a_warning():
    x, y = pair(np.random.default_rng(6), 10, 3, 3)
    y[3] = 0.0
    for measure in (mutual_knn, knn_jaccard, cknna):
        with pytest.warns(RuntimeWarning, match=r"1 token\(s\) of y are all-zero rows"):
            assert math.isnan(measure(x, y, k=2))


def test_bad_input_names_the_parameter():
    x, y = pair(np.random.default_rng(7), 40, 3, 3)
    with pytest.raises(ValueError, match="k: 50 must be < n = 40 tokens"):
        mutual_knn(x, y, k=50)
    with pytest.raises(ValueError, match="k: 40 must be < n = 40 tokens"):
        knn_jaccard(x, y, k=40)
    with pytest.raises(ValueError, match="k: 0 must be an integer ≥ 1"):
        mutual_knn(x, y, k=0)
    with pytest.raises(ValueError, match="k: 2.5 must be an integer"):
        mutual_knn(x, y, k=2.5)
    with pytest.raises(ValueError, match="k: 1 must be an integer ≥ 2"):
        cknna(x, y, k=1)
    with pytest.raises(ValueError, match="n: cknna needs at least 4 tokens; got n = 3"):
        cknna(x[:3], y[:3], k=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cknna(x, y, k=3)
