"""Rogue dimensions: shares, standardisation and removal on planted data, and what they do to CKA."""

import numpy as np
import pytest

from thinkalike.measures.cka import cka
from thinkalike.measures.rogue import (
    ROGUE_SHARE,
    remove_top_dimensions,
    standardise_dimensions,
    top_dimensions,
    top_share,
    variance_shares,
)


def _planted(seed: int = 0, n: int = 400, d: int = 16, rogue_scale: float = 30.0):
    """Two 'models' sharing a 12-dimensional signal, each with one private dimension of huge variance."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(n, d - 1))
    a = np.column_stack([shared[:, :5], rogue_scale * rng.normal(size=n), shared[:, 5:]])
    b = np.column_stack([shared @ np.linalg.qr(rng.normal(size=(d - 1, d - 1)))[0], rogue_scale * rng.normal(size=n)])
    return a, b


def test_shares_sum_to_one_largest_first_and_flag_the_planted_dimension():
    a, _ = _planted()
    shares = variance_shares(a)
    assert shares.sum() == pytest.approx(1.0) and (np.diff(shares) <= 0).all()
    assert top_share(a) > ROGUE_SHARE and top_dimensions(a, 1).tolist() == [5]
    expected = 900.0 / (900.0 + 15.0)  # variance 30² against 15 unit dimensions
    assert top_share(a) == pytest.approx(expected, rel=0.15)
    assert top_share(a, 16) == pytest.approx(1.0)


def test_standardised_dimensions_have_unit_variance_and_constants_become_zero():
    a, _ = _planted()
    a[:, 3] = 7.0
    z = standardise_dimensions(a)
    variances = z.var(axis=0)
    np.testing.assert_allclose(np.delete(variances, 3), 1.0, atol=1e-12)
    assert (z[:, 3] == 0).all() and np.allclose(z.mean(axis=0), 0.0)
    assert variance_shares(z)[0] == pytest.approx(1 / 15)  # 15 live dimensions share equally


def test_removal_drops_exactly_the_largest_dimensions_and_keeps_the_order():
    a, _ = _planted()
    kept = remove_top_dimensions(a, 1)
    np.testing.assert_array_equal(kept, np.delete(a, 5, axis=1))
    assert remove_top_dimensions(a, 0) is not None and remove_top_dimensions(a, 0).shape == a.shape
    with pytest.raises(ValueError, match=r"k: 16 must be in \[0, 16\)"):
        remove_top_dimensions(a, 16)
    with pytest.raises(ValueError, match="x: needs"):
        variance_shares(np.ones(5))


def test_rogue_dimensions_decide_cka_and_either_remedy_recovers_the_shared_signal():
    """The issue's observation, planted: one private high-variance dimension per model hides a shared
    15-dimensional signal from CKA; standardising or dropping it recovers it."""
    a, b = _planted()
    raw = cka(a, b)
    assert raw < 0.1
    assert cka(remove_top_dimensions(a, 1), remove_top_dimensions(b, 1)) > 0.99
    assert cka(standardise_dimensions(a), standardise_dimensions(b)) > 0.8
