"""Rows enough for each measure (issue 39, item 1): the CCA family on wide layers and few rows.

Independent X (512 × 576) and Y (512 × 384), the widths of a small Llama-family model and a BERT
sentence encoder on the pipeline's default 512 rows: the textbook mean CCA and PWCCA are 1 whatever
the data (r_x + r_y > n − 1). Fitted to the rows (at most n // 10 = 51 principal components) they sit
at the chance level of 51 correlations of 512 rows, about sqrt(51/512) ≈ 0.32, and a permutation null
puts them at z ≈ 0; a planted shared subspace is still found.
"""

from __future__ import annotations

import numpy as np
import pytest

from thinkalike.measures.calibration import calibrate
from thinkalike.measures.cca import ROWS_PER_DIMENSION, mean_cca, prepare_cca, pwcca
from thinkalike.measures.layerwise import fit_to_rows, measure_table
from thinkalike.measures.predictivity import linear_predictivity
from thinkalike.measures.registry import MEASURES

N, D_X, D_Y, SHARED = 512, 576, 384, 8
CCA_FAMILY = ["mean_cca", "svcca", "pwcca"]


@pytest.fixture(scope="module")
def independent():
    rng = np.random.default_rng(0)
    return rng.standard_normal((N, D_X)), rng.standard_normal((N, D_Y))


@pytest.fixture(scope="module")
def planted():
    """X and Y share an 8-dimensional signal carrying most of their variance, hidden in rotated coordinates."""
    rng = np.random.default_rng(1)
    signal = rng.standard_normal((N, SHARED)) * np.array([6, 5, 5, 4, 4, 3, 3, 3])
    rotation = np.linalg.qr(rng.standard_normal((D_X, D_X)))[0]
    x = np.hstack([signal, rng.standard_normal((N, D_X - SHARED))]) @ rotation
    y = np.hstack([signal @ rng.standard_normal((SHARED, SHARED)), rng.standard_normal((N, D_Y - SHARED))])
    return x, y


def fitted_table(x, y, names):
    kept, options, notes = fit_to_rows(names, {}, N, D_X)
    return measure_table([x], [y], kept, options).set_index("measure")["value"], options, notes


def test_the_textbook_cca_family_reads_one_on_independent_wide_data(independent):
    x, y = independent
    assert mean_cca(x, y) == pytest.approx(1.0, abs=1e-9) and pwcca(x, y) == pytest.approx(1.0, abs=1e-9)


def test_fitted_to_the_rows_independent_wide_data_read_chance_not_one(independent):
    values, options, notes = fitted_table(*independent, CCA_FAMILY)
    assert all(options[name]["max_dims"] == N // ROWS_PER_DIMENSION for name in CCA_FAMILY)
    chance = np.sqrt((N // ROWS_PER_DIMENSION) / N)
    for name in CCA_FAMILY:
        assert 0.5 * chance < values[name] < 1.1 * chance, name
    assert notes == [
        "mean_cca, svcca, pwcca compare each layer's top 51 principal components, not all 576 "
        "dimensions: 512 rows support 51 (10 rows per dimension; more rows: max_tokens)"
    ]


def test_a_permutation_null_puts_independent_data_near_zero_and_planted_far_above(independent, planted):
    kept, options, _ = fit_to_rows(["mean_cca", "pwcca"], {}, N, D_X)
    z = {}
    for label, (x, y) in (("independent", independent), ("planted", planted)):
        scores = calibrate([x], [y], kept, options, n_permutations=12, seed=0).scores
        z[label] = scores[scores.statistic == "cell"].set_index("measure")["z"]
    assert (z["independent"].abs() < 3.5).all(), z["independent"]
    assert (z["planted"] > 8.0).all(), z["planted"]


def test_the_planted_subspace_is_found_in_the_reduced_space(independent, planted):
    x, y = planted
    limit = N // ROWS_PER_DIMENSION
    rho = np.linalg.svd(prepare_cca(x, limit).basis.T @ prepare_cca(y, limit).basis, compute_uv=False)
    assert (rho[: SHARED - 1] > 0.95).all() and rho[SHARED] < 0.7  # 7 of the 8 shared directions, clearly apart
    fitted, _, _ = fitted_table(x, y, CCA_FAMILY)
    chance, _, _ = fitted_table(*independent, CCA_FAMILY)
    assert (fitted - chance > 0.05).all() and fitted["pwcca"] - chance["pwcca"] > 0.15


def test_cross_validated_predictivity_needs_no_reduction(independent, planted):
    assert MEASURES["linear_predictivity"].rows_per_dimension is None
    assert abs(linear_predictivity(*independent)) < 0.02
    assert linear_predictivity(*planted) > 0.5


def test_too_few_rows_leave_the_cca_family_out_with_a_note_and_a_set_max_dims_is_kept():
    kept, options, notes = fit_to_rows(["cka", "mean_cca", "pwcca"], {}, 9, 64)
    assert kept == ["cka"] and options == {}
    assert notes == ["mean_cca, pwcca left out: 9 rows are fewer than 10 per dimension (more rows: max_tokens)"]
    kept, options, notes = fit_to_rows(["mean_cca"], {"mean_cca": {"max_dims": 3}}, 512, 64)
    assert kept == ["mean_cca"] and options == {"mean_cca": {"max_dims": 3}} and notes == []
    kept, options, notes = fit_to_rows(["svcca"], {}, 640, 64)  # 64 dims on 640 rows: nothing to reduce
    assert options == {"svcca": {"max_dims": 64}} and notes == []
