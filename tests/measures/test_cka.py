"""CKA against an independent float64 numpy reference written from the formulas."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from tests.reference_cka import ref_aggregate, ref_grid, ref_hsic  # noqa: E402
from thinkalike.measures.cka import (
    FLOAT32_GRAMS_FROM,
    CKAAccumulator,
    choose_form,
    cka,
    cka_matrix,
    default_gram_dtype,
    hsic_terms,
)
from thinkalike.measures.significance import aggregate, bootstrap_ci


def related_pair(rng: np.random.Generator, n: int, la: int = 3, lb: int = 2, da: int = 6, db: int = 5):
    """Two models' activations sharing a latent signal (so CKA is far from 0 and 1)."""
    latent = rng.standard_normal((n, 4))
    a = np.stack([latent @ rng.standard_normal((4, da)) + s * rng.standard_normal((n, da)) for s in (0.5, 1, 2)[:la]])
    b = np.stack([latent @ rng.standard_normal((4, db)) + s * rng.standard_normal((n, db)) for s in (1, 3)[:lb]])
    return a + 3.0, b - 1.0


ESTIMATORS = ("unbiased", "biased")


# --------------------------------------------------------------------------- single batch


def test_kornblith_demo_values():
    np.random.seed(1337)
    x = np.random.randn(100, 10)
    y = np.random.randn(100, 10) + x
    assert cka(x, y, estimator="biased") == pytest.approx(0.55761, abs=1e-5)
    assert cka(x, y, estimator="unbiased") == pytest.approx(0.51346, abs=1e-5)
    assert cka(x, y) == pytest.approx(0.51346, abs=1e-5)  # unbiased is the default


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("form", ["auto", "gram", "feature"])
@pytest.mark.parametrize("n,da,db", [(4, 3, 2), (5, 3, 7), (6, 9, 12), (23, 4, 5), (40, 50, 3)])
def test_grid_matches_reference(estimator, form, n, da, db):
    rng = np.random.default_rng(n * 100 + da)
    a, b = related_pair(rng, n, da=da, db=db)
    got = cka_matrix(a, b, estimator=estimator, form=form)
    np.testing.assert_allclose(got, ref_grid(a, b, estimator), rtol=0, atol=1e-10)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_grid_equals_per_pair_loop_and_forms_agree(estimator):
    rng = np.random.default_rng(1)
    a, b = related_pair(rng, 30, da=8, db=5)
    grid = cka_matrix(a, b, estimator=estimator)
    loop = np.array([[cka(x, y, estimator=estimator) for y in b] for x in a])
    np.testing.assert_allclose(grid, loop, atol=1e-12)
    gram = hsic_terms(a, b, estimator=estimator, form="gram", block_rows=7)  # several blocks, ragged last
    feature = hsic_terms(a, b, estimator=estimator, form="feature")
    assert (gram.form, feature.form) == ("gram", "feature")
    for name in ("cross", "self_a", "self_b"):
        np.testing.assert_allclose(getattr(gram, name), getattr(feature, name), rtol=1e-11)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_self_similarity_is_one_and_intra_model_grid(estimator):
    rng = np.random.default_rng(2)
    a, _ = related_pair(rng, 12)
    assert cka(a[0], a[0], estimator=estimator) == pytest.approx(1.0, abs=1e-12)
    intra = cka_matrix(a, estimator=estimator, form="gram")
    np.testing.assert_allclose(np.diag(intra), 1.0, atol=1e-12)
    np.testing.assert_allclose(intra, intra.T, atol=1e-12)
    np.testing.assert_allclose(intra, cka_matrix(a, a.copy(), estimator=estimator), atol=1e-12)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_invariant_to_orthogonal_transform_and_isotropic_scaling(estimator):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((25, 6))
    y = x @ rng.standard_normal((6, 8)) + rng.standard_normal((25, 8))
    q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    base = cka(x, y, estimator=estimator)
    assert cka(x, 3.7 * y @ q, estimator=estimator) == pytest.approx(base, abs=1e-12)
    assert cka(0.01 * x, y, estimator=estimator) == pytest.approx(base, abs=1e-12)


@pytest.mark.parametrize("form", ["gram", "feature"])
def test_float32_input_accumulates_in_float64(form):
    rng = np.random.default_rng(4)
    a, b = related_pair(rng, 64, da=40, db=30)
    a, b = 100.0 + a.astype(np.float32), b.astype(np.float32)  # a large offset is harmless
    expected = ref_grid(a.astype(np.float64), b.astype(np.float64), "unbiased")
    got = cka_matrix(torch.from_numpy(a), torch.from_numpy(b), form=form)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_choose_form_cost_model():
    assert choose_form(1024, 12, 768, 12, 768) == "gram"
    assert choose_form(10_000, 2, 16, 2, 16) == "feature"
    assert choose_form(100, 1, 10, 1, 10) == "feature"
    # permutations: a permuted Gram is a memory-bound gather, so the zoo's widths take the feature form (measured 3.6×
    # faster at these shapes with 50 permutations) and wide models still the gram form
    assert choose_form(512, 7, 80, 9, 96, n_permutations=50) == "feature"
    assert choose_form(512, 33, 4096, 33, 4096, n_permutations=50) == "gram"
    assert hsic_terms(np.ones((1, 8, 300)) + np.eye(8, 300)).form == "gram"


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("aggregation", ["mean_of_ratios", "ratio_of_means"])
@pytest.mark.parametrize("form", ["gram", "feature"])
def test_accumulator_matches_reference(estimator, aggregation, form):
    rng = np.random.default_rng(5)
    batches = [related_pair(rng, n) for n in (9, 14, 6)]
    acc = CKAAccumulator(3, 2, estimator=estimator, aggregation=aggregation, form=form, block_rows=4)
    for i, (a, b) in enumerate(batches):
        acc.update(torch.from_numpy(a) if i % 2 else a, b)
    result = acc.result()
    np.testing.assert_allclose(result.cka, ref_aggregate(batches, estimator, aggregation), atol=1e-10)
    assert (result.n_batches, result.n_tokens) == (3, 29)
    assert result.cross.shape == (3, 3, 2) and result.self_a.shape == (3, 3) and result.self_b.shape == (3, 2)
    assert result.cross.dtype == np.float64
    np.testing.assert_allclose(aggregate(result.cross, result.self_a, result.self_b, aggregation), result.cka)
    np.testing.assert_allclose(result.self_a[0], [ref_hsic(x, x, estimator) for x in batches[0][0]], rtol=1e-10)


def test_accumulator_intra_model_and_store_batches_off():
    rng = np.random.default_rng(6)
    acts = [related_pair(rng, 10)[0] for _ in range(2)]
    intra = CKAAccumulator(3, 3, store_batches=False)
    paired = CKAAccumulator(3, 3)
    for a in acts:
        intra.update(a)
        paired.update(a, a.copy())
    r_intra, r_paired = intra.result(), paired.result()
    np.testing.assert_allclose(r_intra.cka, r_paired.cka, atol=1e-12)
    np.testing.assert_allclose(np.diag(r_intra.cka), 1.0, atol=1e-12)
    assert r_intra.cross is None
    with pytest.raises(ValueError, match="not stored"):
        r_intra.bootstrap_ci()


# --------------------------------------------------------------------------- bad input


def test_too_few_tokens_names_minimum():
    with pytest.raises(ValueError, match="at least 4 tokens"):
        cka(np.random.randn(3, 5), np.random.randn(3, 5))
    cka(np.random.randn(4, 5), np.random.randn(4, 5))  # 4 is enough


def test_mismatched_token_counts_name_both():
    acc = CKAAccumulator(1, 1, model_a="gpt", model_b="bert")
    with pytest.raises(ValueError, match=r"'gpt' has 10 tokens.*'bert' has 12"):
        acc.update(np.random.randn(1, 10, 4), np.random.randn(1, 12, 4))
    with pytest.raises(ValueError, match="declared with 1 layers; got 2"):
        acc.update(np.random.randn(2, 10, 4), np.random.randn(1, 10, 4))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_activations_name_model_and_layer(bad):
    a = np.random.randn(3, 8, 4)
    b = np.random.randn(2, 8, 5)
    b[1, 3, 2] = bad
    acc = CKAAccumulator(3, 2, model_a="gpt", model_b="bert")
    with pytest.raises(ValueError, match=r"model 'bert' contain NaN or Inf at layer\(s\) \[1\]"):
        acc.update(a, b)
    assert acc.n_batches == 0


@pytest.mark.parametrize("form", ["gram", "feature"])
def test_constant_layer_gives_nan_and_warning(form):
    rng = np.random.default_rng(7)
    a, b = related_pair(rng, 12)
    b[1] = 0.37  # constant layer (not exactly representable: centring must still be exact)
    acc = CKAAccumulator(3, 2, model_a="gpt", model_b="bert", form=form)
    with pytest.warns(RuntimeWarning, match=r"layer 1 of model 'bert' is constant"):
        acc.update(a, b)
    got = acc.result().cka
    assert np.isnan(got[:, 1]).all()
    np.testing.assert_allclose(got[:, 0], ref_grid(a, b[:1], "unbiased")[:, 0], atol=1e-10)


# --------------------------------------------------------------------------- significance


def _accumulate(n_batches: int, noise: float, data_seed: int, **kwargs) -> CKAAccumulator:
    rng = np.random.default_rng(data_seed)
    acc = CKAAccumulator(1, 1, **kwargs)
    for _ in range(n_batches):
        x = rng.standard_normal((20, 5))
        acc.update(x[None], (x @ rng.standard_normal((5, 5)) + noise * rng.standard_normal((20, 5)))[None])
    return acc


@pytest.mark.parametrize("aggregation", ["mean_of_ratios", "ratio_of_means"])
def test_bootstrap_ci_contains_estimate_and_narrows(aggregation):
    widths = []
    for n_batches in (5, 40):
        result = _accumulate(n_batches, 2.0, 8, aggregation=aggregation).result()
        low, high = result.bootstrap_ci(n_bootstrap=300, seed=1)
        assert low[0, 0] <= result.cka[0, 0] <= high[0, 0]
        widths.append(high[0, 0] - low[0, 0])
        same = bootstrap_ci(
            result.cross, result.self_a, result.self_b, aggregation=aggregation, n_bootstrap=300, seed=1
        )
        np.testing.assert_array_equal(same.ci_low, low)
    assert widths[1] < widths[0]


def test_permutation_p_values():
    related = _accumulate(3, 1.0, 9, n_permutations=50, seed=3).result()
    assert related.p_values[0, 0] == pytest.approx(1 / 51)
    assert related.null.shape == (50, 1, 1)
    rng = np.random.default_rng(10)
    independent = CKAAccumulator(1, 1, n_permutations=50, seed=3)
    for _ in range(3):
        independent.update(rng.standard_normal((1, 20, 5)), rng.standard_normal((1, 20, 5)))
    assert independent.result().p_values[0, 0] > 0.05


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_permutation_null_same_in_both_forms_and_matches_reference(estimator):
    rng = np.random.default_rng(11)
    a, b = related_pair(rng, 10)
    results = {}
    for form in ("gram", "feature"):
        acc = CKAAccumulator(3, 2, estimator=estimator, n_permutations=4, seed=5, form=form, block_rows=3)
        acc.update(a, b)
        results[form] = acc.result()
    # the feature form draws its null in float32 (module docstring): within 1e-6 of the float64 draws, the same
    # p-values
    np.testing.assert_allclose(results["gram"].null, results["feature"].null, atol=1e-6)
    assert not np.array_equal(results["gram"].null, results["feature"].null)  # float32 really was used
    np.testing.assert_array_equal(results["gram"].p_values, results["feature"].p_values)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(5)).numpy()
    np.testing.assert_allclose(results["gram"].null[0], ref_grid(a, b[:, perm], estimator), atol=1e-10)


def test_no_warnings_on_clean_input():
    rng = np.random.default_rng(12)
    a, b = related_pair(rng, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cka_matrix(a, b)


# --------------------------------------------------------------------------- precision at every n


def _float32_pair(n: int, seed: int, d: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """One layer per model, float32, shared latent + noise + column offsets (residual-stream-like)."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 8))
    x = latent @ rng.standard_normal((8, d)) + 0.5 * rng.standard_normal((n, d)) + 5.0 * rng.standard_normal(d)
    y = latent @ rng.standard_normal((8, d)) + 2.0 * rng.standard_normal((n, d)) - 5.0
    return x[None].astype(np.float32), y[None].astype(np.float32)


@pytest.mark.parametrize("form", ["gram", "auto"])
@pytest.mark.parametrize("n", [4, 5, 8, 64, 255, 256, 1024])
def test_float32_input_is_within_1e8_of_the_float64_reference_at_every_n(n, form):
    """The docstring's claim: float64 Grams below FLOAT32_GRAMS_FROM tokens, float32 from there on."""
    worst = 0.0
    for seed in range(3 if n < 1024 else 1):
        a, b = _float32_pair(n, seed)
        expected = ref_grid(a.astype(np.float64), b.astype(np.float64), "unbiased")
        got = hsic_terms(torch.from_numpy(a), torch.from_numpy(b), form=form).cka
        worst = max(worst, float(np.abs(got - expected).max()))
    assert worst <= 1e-8


def test_gram_dtype_is_float64_below_the_threshold_only():
    cpu = torch.device("cpu")
    assert default_gram_dtype(torch.float32, cpu, FLOAT32_GRAMS_FROM - 1) == torch.float64
    assert default_gram_dtype(torch.float32, cpu, FLOAT32_GRAMS_FROM) == torch.float32  # the fast path stays
    assert default_gram_dtype(torch.float32, cpu) == torch.float32
    assert default_gram_dtype(torch.float16, cpu, 4) == torch.float64
    assert default_gram_dtype(torch.float64, cpu, 4096) == torch.float64


# --------------------------------------------------------------------------- constant layers


def _batches_with_constant(n_batches: int = 4, constant_in: tuple[int, ...] = (1,), seed: int = 20):
    """Batches of related_pair(3, 2 layers); layer 1 of b is constant in the batches ``constant_in``."""
    rng = np.random.default_rng(seed)
    batches = [related_pair(rng, n) for n in (9, 12, 10, 11, 8)[:n_batches]]
    for index in constant_in:
        batches[index][1][1] = 0.37
    return batches


def _run(batches, **kwargs):
    acc = CKAAccumulator(3, 2, model_a="gpt", model_b="bert", **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for a, b in batches:
            acc.update(a, b)
    return acc.result(), [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("aggregation", ["mean_of_ratios", "ratio_of_means"])
def test_one_constant_batch_makes_the_layer_nan_and_the_warning_says_so(aggregation):
    result, messages = _run(_batches_with_constant(), aggregation=aggregation, n_permutations=5)
    assert np.isnan(result.cka[:, 1]).all()  # ratio_of_means used to give a biased finite value
    assert np.isfinite(result.cka[:, 0]).all()
    assert len(messages) == 1
    assert "layer 1 of model 'bert' is constant (zero variance) in batch 1" in messages[0]
    assert "NaN for the whole run" in messages[0] and "skip_constant_layers=True" in messages[0]
    low, high = result.bootstrap_ci(n_bootstrap=50)
    assert np.isnan(low[:, 1]).all() and np.isnan(high[:, 1]).all() and np.isfinite(low[:, 0]).all()
    assert np.isnan(result.p_values[:, 1]).all()
    assert (result.n_batches_per_cell[:, 1] == 3).all() and (result.n_batches_per_cell[:, 0] == 4).all()


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("aggregation", ["mean_of_ratios", "ratio_of_means"])
def test_skip_constant_layers_leaves_out_only_that_batch_for_that_layer(estimator, aggregation):
    batches = _batches_with_constant(constant_in=(1, 3))
    result, messages = _run(batches, estimator=estimator, aggregation=aggregation, skip_constant_layers=True)
    kept = [batches[i] for i in (0, 2)]
    with np.errstate(invalid="ignore", divide="ignore"):  # the reference's own NaN for the constant layer
        all_batches = ref_aggregate(batches, estimator, aggregation)
    np.testing.assert_allclose(result.cka[:, 0], all_batches[:, 0], atol=1e-10)
    np.testing.assert_allclose(result.cka[:, 1], ref_aggregate(kept, estimator, aggregation)[:, 1], atol=1e-10)
    assert result.n_batches_per_cell.tolist() == [[4, 2]] * 3
    assert [m.split(";")[0] for m in messages] == [
        "layer 1 of model 'bert' is constant (zero variance) in batch 1",
        "layer 1 of model 'bert' is constant (zero variance) in batch 3",
    ]
    assert all("left out" in m for m in messages)
    valid = result.valid_batches()
    np.testing.assert_allclose(
        aggregate(result.cross, result.self_a, result.self_b, aggregation, valid=valid), result.cka, atol=1e-12
    )
    low, high = result.bootstrap_ci(n_bootstrap=100, seed=2)
    assert np.isfinite(low).all() and np.isfinite(high).all() and (low <= high).all()


def test_skip_constant_layers_keeps_nan_for_a_layer_constant_in_every_batch():
    result, _ = _run(_batches_with_constant(n_batches=2, constant_in=(0, 1)), skip_constant_layers=True)
    assert np.isnan(result.cka[:, 1]).all() and np.isfinite(result.cka[:, 0]).all()
    assert (result.n_batches_per_cell[:, 1] == 0).all()


def test_skip_constant_layers_must_be_a_bool():
    with pytest.raises(ValueError, match="skip_constant_layers must be true or false"):
        CKAAccumulator(1, 1, skip_constant_layers="yes")
