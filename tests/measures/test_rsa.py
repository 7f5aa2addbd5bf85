"""RSA against RDMs built by explicit loops and Spearman as Pearson of ranks; the MLEM baseline agrees."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy.stats import ortho_group, rankdata

from thinkalike.measures.rsa import rdm, rsa
from thinkalike.mlem.similarity import pair_distances, rsa_similarity


def pair(rng: np.random.Generator, n: int, d1: int, d2: int) -> tuple[np.ndarray, np.ndarray]:
    latent = rng.standard_normal((n, 3))
    x = latent @ rng.standard_normal((3, d1)) + 0.8 * rng.standard_normal((n, d1)) + 1.0
    return x, latent @ rng.standard_normal((3, d2)) + 1.5 * rng.standard_normal((n, d2))


def ref_rdm(m: np.ndarray, distance: str) -> np.ndarray:
    values = []
    for i, j in itertools.combinations(range(len(m)), 2):
        if distance == "euclidean":
            values.append(math.sqrt(sum((a - b) ** 2 for a, b in zip(m[i], m[j]))))
        else:
            values.append(1.0 - np.corrcoef(m[i], m[j])[0, 1])
    return np.array(values)


def ref_rsa(x: np.ndarray, y: np.ndarray, distance: str, correlation: str) -> float:
    a, b = ref_rdm(x, distance), ref_rdm(y, distance)
    if correlation == "spearman":
        a, b = rankdata(a), rankdata(b)
    return float(np.corrcoef(a, b)[0, 1])


@pytest.mark.parametrize("distance", ["correlation", "euclidean"])
@pytest.mark.parametrize("correlation", ["spearman", "pearson"])
def test_rsa_equals_loop_reference(distance, correlation):
    x, y = pair(np.random.default_rng(1), 23, 5, 11)
    assert rsa(x, y, distance=distance, correlation=correlation) == pytest.approx(
        ref_rsa(x, y, distance, correlation), abs=1e-10
    )


def test_rdm_and_spearman_ties_get_average_ranks():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # a square: equal distances
    np.testing.assert_allclose(rdm(x, "euclidean"), ref_rdm(x, "euclidean"))
    y = x + np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.3, 0.1]])
    assert rsa(x, y, distance="euclidean") == pytest.approx(ref_rsa(x, y, "euclidean", "spearman"), abs=1e-12)


def test_mlem_baseline_on_all_pairs_equals_euclidean_spearman_rsa():
    x, y = pair(np.random.default_rng(2), 15, 4, 4)
    first, second = np.triu_indices(15, k=1)
    distances = pair_distances(np.stack([x, y]), first, second)
    assert rsa_similarity(distances)[0, 1] == pytest.approx(rsa(x, y, distance="euclidean"), abs=1e-12)


def test_identical_and_invariances():
    rng = np.random.default_rng(3)
    x, y = pair(rng, 25, 6, 6)
    q = ortho_group.rvs(6, random_state=4)
    assert rsa(x, x) == pytest.approx(1.0, abs=1e-12)
    assert rsa(x, 2.5 * x @ q - 4.0, distance="euclidean") == pytest.approx(1.0, abs=1e-12)
    base = rsa(x, y)
    per_token = rng.uniform(0.5, 2.0, (25, 1)) * x + rng.standard_normal((25, 1))  # xᵢ → aᵢxᵢ + bᵢ1
    assert rsa(per_token[:, ::-1], 0.1 * y) == pytest.approx(base, abs=1e-12)
    assert abs(rsa(x @ q, y) - base) > 1e-3  # correlation RDMs are not rotation invariant
    assert abs(rsa(x + rng.standard_normal(6), y) - base) > 1e-3  # nor translation invariant
    euclidean = rsa(x, y, distance="euclidean", correlation="pearson")
    assert rsa(x @ q + 3.0, y, distance="euclidean", correlation="pearson") == pytest.approx(euclidean, abs=1e-12)
    stretched = x @ np.diag([0.1, 1, 1, 1, 1, 9.0])
    assert abs(rsa(stretched, y, distance="euclidean") - rsa(x, y, distance="euclidean")) > 1e-3


def test_undefined_inputs_give_nan_with_a_warning():
    x, y = pair(np.random.default_rng(5), 8, 3, 3)
    y[2] = 0.5
    with pytest.warns(RuntimeWarning, match=r"1 token\(s\) of y have all features equal"):
        assert math.isnan(rsa(x, y))
    with pytest.warns(RuntimeWarning, match="the RDM of x is constant"):
        assert math.isnan(rsa(np.ones((8, 3)), y, distance="euclidean"))


def test_bad_input_names_the_parameter():
    x, y = pair(np.random.default_rng(6), 8, 3, 3)
    with pytest.raises(ValueError, match=r"distance: 'cosine' must be one of \('correlation', 'euclidean'\)"):
        rsa(x, y, distance="cosine")
    with pytest.raises(ValueError, match="correlation: 'kendall' must be one of"):
        rsa(x, y, correlation="kendall")
    with pytest.raises(ValueError, match="n: rsa needs at least 3 tokens; got n = 2"):
        rsa(x[:2], y[:2])
    with pytest.raises(ValueError, match="x has 8 tokens, y has 7"):
        rsa(x, y[:7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rsa(x, y)
