"""The registry: every declared invariance and symmetry holds, every undeclared one fails, and helpers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group

from thinkalike.measures.cka import cka
from thinkalike.measures.linear_cka import unbiased_cka
from thinkalike.measures.registry import (
    INVARIANCES,
    MEASURE_NAMES,
    MEASURES,
    Measure,
    measure,
    subsample_tokens,
)

N, D = 60, 6
SCALES = np.array([6.0, 3.0, 2.0, 1.0, 0.1, 0.04])  # a decaying spectrum: SVCCA's 99 % cut drops directions


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    latent = rng.standard_normal((N, D)) * SCALES
    x = latent @ ortho_group.rvs(D, random_state=1) * SCALES + 0.3 * rng.standard_normal((N, D)) + 1.5
    y = latent[:, ::-1] @ rng.standard_normal((D, D)) * SCALES[::-1] + 0.5 * rng.standard_normal((N, D)) - 0.5
    return x, y


def transformed(matrix: np.ndarray, invariance: str) -> np.ndarray:
    """``matrix`` under one transform of each kind (chosen to be far from the identity)."""
    rng = np.random.default_rng(2)
    if invariance == "orthogonal":
        return matrix @ ortho_group.rvs(D, random_state=3)
    if invariance == "isotropic_scaling":
        return 7.5 * matrix
    if invariance == "permutation":
        return matrix[:, rng.permutation(D)]
    if invariance == "invertible_linear":
        return matrix @ (np.diag([0.02, 0.1, 1.0, 3.0, 40.0, 90.0]) @ ortho_group.rvs(D, random_state=4))
    return matrix + 4.0 * rng.standard_normal(D)  # translation


@pytest.mark.parametrize("name", MEASURE_NAMES)
def test_declared_invariances_hold_and_the_others_fail(name):
    entry = measure(name)
    x, y = data()
    base = entry(x, y)
    for invariance in sorted(INVARIANCES):
        changes = [abs(entry(transformed(x, invariance), y) - base), abs(entry(x, transformed(y, invariance)) - base)]
        if invariance in entry.invariances:
            assert max(changes) < 1e-7, f"{name} should be invariant to {invariance}: changed by {changes}"
        else:
            assert max(changes) > 1e-6, f"{name} is not declared invariant to {invariance} but did not change"


@pytest.mark.parametrize("name", MEASURE_NAMES)
def test_symmetry_as_declared_and_identical_inputs_give_the_extreme(name):
    entry = measure(name)
    x, y = data()
    asymmetry = abs(entry(x, y) - entry(y, x))
    assert (asymmetry < 1e-10) if entry.symmetric else (asymmetry > 1e-6)
    extreme = 1.0 if entry.kind == "similarity" else 0.0
    assert entry(x, x) == pytest.approx(extreme, abs=1e-6)
    if entry.max_tokens is not None:
        assert "n²" in entry.cost


def test_cka_entry_is_unbiased_cka_with_the_shared_signature():
    np.random.seed(1337)
    x = np.random.randn(100, 10)
    y = np.random.randn(100, 10) + x
    assert measure("cka")(x, y) == pytest.approx(0.51346, abs=1e-5)  # Kornblith's demo, debiased
    assert unbiased_cka(x, y) == cka(x, y, estimator="unbiased")
    with pytest.raises(ValueError, match="n: cka needs at least 4 tokens"):
        unbiased_cka(x[:3], y[:3])


def test_options_are_passed_through():
    x, y = data()
    assert measure("angular_shape")(x, y, alpha=0.0) != pytest.approx(measure("angular_shape")(x, y), abs=1e-3)
    assert measure("mutual_knn")(x, y, k=3) != measure("mutual_knn")(x, y)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"name: unknown measure 'cca'; known measures: cka, procrustes, .*pwcca"):
        measure("cca")
    assert MEASURE_NAMES == tuple(MEASURES) and len(set(MEASURE_NAMES)) == len(MEASURE_NAMES)


def test_measure_rejects_unknown_kinds_and_invariances():
    with pytest.raises(ValueError, match="kind: 'score' must be one of"):
        Measure("m", unbiased_cka, "score", False, frozenset(), "n", True)
    with pytest.raises(ValueError, match=r"invariances: \['rotation'\] are not among"):
        Measure("m", unbiased_cka, "similarity", False, frozenset({"rotation"}), "n", True)


def test_subsample_tokens_is_sorted_seeded_and_without_repeats():
    picked = subsample_tokens(1000, 50, seed=3)
    assert picked.shape == (50,) and np.all(np.diff(picked) > 0) and picked.max() < 1000
    np.testing.assert_array_equal(picked, subsample_tokens(1000, 50, seed=3))
    assert not np.array_equal(picked, subsample_tokens(1000, 50, seed=4))
    np.testing.assert_array_equal(subsample_tokens(7, None, seed=0), np.arange(7))
    np.testing.assert_array_equal(subsample_tokens(7, 10, seed=0), np.arange(7))
    with pytest.raises(ValueError, match="max_tokens: 0 must be a positive integer or None"):
        subsample_tokens(10, 0, seed=0)
    with pytest.raises(ValueError, match="n: 0 must be a positive number of tokens"):
        subsample_tokens(0, 5, seed=0)


@pytest.mark.parametrize("name", MEASURE_NAMES)
def test_the_options_model_is_the_functions_keyword_options_with_their_defaults(name):
    """Each measure's options model (what a configuration is checked by) has one field per keyword option of its
    function, with the function's default; and it refuses what the function refuses."""
    import inspect

    entry = measure(name)
    keyword = {
        p.name: p.default for p in list(inspect.signature(entry.function).parameters.values())[2:] if p.name != "name"
    }
    model = {key: field.default for key, field in entry.options.model_fields.items()}
    assert model == keyword
    if "k" in model:
        with pytest.raises(ValueError, match="must be an integer"):
            entry.options.model_validate({"k": 0})
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        entry.options.model_validate({"no_such_option": 1})
