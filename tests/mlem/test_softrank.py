"""The l2 soft rank against an independent projection onto the permutahedron, its limits and its gradient."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.stats import rankdata

from thinkalike.mlem.softrank import pairwise_soft_rank, pearson, soft_rank


def permutahedron_projection(z: np.ndarray) -> np.ndarray:
    """argmin ½‖μ − z‖² over the permutahedron of (n, …, 1), by SLSQP on its subset inequalities
    (Σ_{i∈S} μ_i ≤ sum of the |S| largest of ρ, equality for the full set) — written from the definition."""
    n = len(z)
    rho = np.arange(n, 0, -1, dtype=float)
    constraints = [{"type": "eq", "fun": lambda mu: mu.sum() - rho.sum()}]
    for size in range(1, n):
        bound = rho[:size].sum()
        for subset in itertools.combinations(range(n), size):
            constraints.append({"type": "ineq", "fun": lambda mu, s=list(subset), b=bound: b - mu[s].sum()})
    result = minimize(
        lambda mu: 0.5 * np.sum((mu - z) ** 2),
        np.full(n, rho.mean()),
        jac=lambda mu: mu - z,
        constraints=constraints,
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 500},
    )
    return result.x


@pytest.mark.parametrize("strength", [0.3, 1.0, 3.0])
def test_soft_rank_is_the_projection_onto_the_permutahedron(strength):
    values = np.array([0.3, -1.2, 2.5, 0.31, 1.0])
    expected = permutahedron_projection(values / strength)
    result = soft_rank(torch.tensor(values, dtype=torch.float64), strength).numpy()
    np.testing.assert_allclose(result, expected, atol=1e-5)


def test_small_strength_gives_exact_ranks_with_ties_averaged():
    values = np.array([3.0, 1.0, 2.0, 2.0, 10.0, -4.0])
    result = soft_rank(torch.tensor(values, dtype=torch.float64), 1e-4).numpy()
    np.testing.assert_allclose(result, rankdata(values), atol=1e-9)


def test_large_strength_is_affine_in_the_values():
    values = torch.randn(50, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    result = soft_rank(values, 1e4)
    np.testing.assert_allclose(result.numpy(), (values / 1e4 - (values / 1e4).mean() + 25.5).numpy(), atol=1e-12)
    assert float(pearson(result, values)) == pytest.approx(1.0, abs=1e-12)


def test_gradient_matches_finite_differences():
    values = torch.randn(15, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: soft_rank(v, 0.6), (values,))


def test_pairwise_surrogate_approaches_exact_ranks():
    values = torch.tensor([0.5, -1.0, 3.0, 2.0])
    np.testing.assert_allclose(pairwise_soft_rank(values, 1e-3).numpy(), rankdata(values.numpy()), atol=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="1-D"):
        soft_rank(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="strength"):
        soft_rank(torch.zeros(3), 0.0)
