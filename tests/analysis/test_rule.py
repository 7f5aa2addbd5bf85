"""The verdict rule by simulation (fixed seed, normal effects, 20,000 draws a case): each estimated probability lies
within 4 Monte-Carlo standard errors of its exact value — the non-central t's power, the test's size, TOST's power —
and the answer converges as replicates are added."""

import math

import numpy as np
import pytest

from thinkalike.analysis import rule

DRAWS = 20_000


def _within(estimate: float, exact: float) -> bool:
    se = math.sqrt(max(exact * (1 - exact), 1e-12) / DRAWS)
    return abs(estimate - exact) <= 4 * se + 1e-12


def _rate(codes: np.ndarray, word: str) -> float:
    return float(np.mean(codes == rule.CODE_WORDS.index(word)))


def _normal(seed: int, n: int, mu: float, sigma: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(mu, sigma, size=(DRAWS, n))


@pytest.mark.parametrize(("n", "exact"), [(4, 0.289), (8, 0.681), (16, 0.962), (64, 1.000)])
def test_power_at_one_sigma_is_the_noncentral_t_and_rises_with_n(n, exact):
    codes, _ = rule.classify(_normal(n, n, 1.0), delta=0.5)
    estimate = _rate(codes, rule.REPRODUCED)
    assert rule.power_reproduced(n, 1.0, 1.0) == pytest.approx(exact, abs=0.0015)
    assert _within(estimate, rule.power_reproduced(n, 1.0, 1.0))


def test_power_rises_with_n_unlike_a_minimum_over_replicates():
    rates = [_rate(rule.classify(_normal(100 + n, n, 1.0), delta=0.5)[0], rule.REPRODUCED) for n in (4, 8, 16, 64)]
    assert rates == sorted(rates) and rates[-1] > 0.99


@pytest.mark.parametrize("n", [3, 4, 8, 16, 64])
def test_size_is_alpha_in_each_tail(n):
    codes, _ = rule.classify(_normal(200 + n, n, 0.0), delta=0.5)
    assert _within(_rate(codes, rule.REPRODUCED), 0.025)
    assert _within(_rate(codes, rule.OPPOSITE), 0.025)


@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("sign", [1, -1])
def test_absent_is_rare_at_the_edge_of_equivalence(delta, sign):
    codes, _ = rule.classify(_normal(int(300 + 10 * delta) + sign, 8, sign * delta), delta=delta)
    rate = _rate(codes, rule.ABSENT)
    assert rate <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / DRAWS)


@pytest.mark.parametrize(("delta", "exact"), [(2.0, 0.950), (1.0, 0.621)])
def test_absent_at_zero(delta, exact):
    """At μ = 0, n = 8: the verdict "absent" (TOST passes and ci95 holds 0: "reproduced/opposite, smaller than δ"
    come first) at the issue's rates; TOST's own power (absent or smaller than δ) is :func:`rule.power_absent`."""
    codes, smaller = rule.classify(_normal(400 + int(delta), 8, 0.0), delta=delta)
    assert _within(_rate(codes, rule.ABSENT), exact)
    tost = float(np.mean((codes == rule.CODE_WORDS.index(rule.ABSENT)) | smaller))
    assert _within(tost, rule.power_absent(8, delta, 1.0))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_a_row_of_null_parts_is_rarely_reproduced_or_partly(k):
    rng = np.random.default_rng(500 + k)
    parts = [rng.normal(0.0, 1.0, size=(DRAWS, 8)) for _ in range(k)]
    codes = np.stack([rule.classify(p, delta=0.5)[0] for p in parts], axis=1)
    p_values = np.stack([rule.one_sided_p_values(p) for p in parts], axis=1)
    words = [[rule.CODE_WORDS[c] for c in row] for row in codes]
    rows = [rule.row_word(w, p.min() < rule.ALPHA / k) for w, p in zip(words, p_values)]
    rate = float(np.mean([r in (rule.REPRODUCED, rule.PARTLY) for r in rows]))
    assert rate <= 0.025 + 4 * math.sqrt(0.025 * 0.975 / DRAWS)


def test_a_skewed_effect_reports_its_error_rates(record_property):
    """A centred exponential (mean 0, n = 8): the t-test's tails are unequal. The rates are reported, and each stays
    reported against their nominal 0.025: the right skew makes "opposite" too frequent and "reproduced" too rare."""
    draws = np.random.default_rng(600).exponential(1.0, size=(DRAWS, 8)) - 1.0
    codes, _ = rule.classify(draws, delta=0.5)
    reproduced, opposite = _rate(codes, rule.REPRODUCED), _rate(codes, rule.OPPOSITE)
    record_property("skewed_reproduced_rate", reproduced)
    record_property("skewed_opposite_rate", opposite)
    print(f"centred exponential, n = 8: P(reproduced) = {reproduced:.4f}, P(opposite) = {opposite:.4f}")
    assert reproduced < 0.025 < opposite  # a right-skewed effect: the t-test's lower tail is too heavy


def test_no_effect_is_decided_as_absent():
    """The zero-shot case of the issue: ±one sentence in 400 around the majority, δ one sentence: TOST decides it."""
    result = rule.decide_part([0.0025, 0.0025, -0.0025, 0.0, 0.0, 0.0025, -0.0025, 0.0], delta=0.0125)
    assert result.verdict == rule.ABSENT and result.n_needed is None


def test_a_fact_has_point_intervals():
    result = rule.decide_part([0.3, 0.3, 0.3], delta=0.5)
    assert result.fact and result.ci95 == (0.3, 0.3) and result.ci90 == (0.3, 0.3)
    assert result.verdict == rule.REPRODUCED and result.smaller_than_delta
    assert rule.decide_part([0.0, 0.0], delta=0.5).verdict == rule.ABSENT
    assert rule.decide_part([-2.0, -2.0], delta=0.5).verdict == rule.OPPOSITE


def test_intervals_match_scipy():
    effects = [0.1, 0.4, 0.25, 0.3, 0.05]
    result = rule.decide_part(effects, delta=0.1)
    from scipy import stats

    low, high = stats.t.interval(0.95, 4, loc=np.mean(effects), scale=stats.sem(effects))
    assert result.ci95 == pytest.approx((low, high), rel=1e-12)
    assert result.p == pytest.approx(stats.ttest_1samp(effects, 0.0, alternative="greater").pvalue, rel=1e-10)


def test_n_needed_gives_the_planned_power():
    effects = [0.3, -0.1, 0.5, 0.2]
    result = rule.decide_part(effects, delta=0.2)
    assert result.verdict == rule.INCONCLUSIVE and result.n_needed is not None
    sigma = rule.sigma_upper(float(np.std(effects, ddof=1)), 4)
    n = result.n_needed
    assert min(rule.power_reproduced(n, 0.2, sigma), rule.power_absent(n, 0.2, sigma)) >= rule.TARGET_POWER
    assert min(rule.power_reproduced(n - 1, 0.2, sigma), rule.power_absent(n - 1, 0.2, sigma)) < rule.TARGET_POWER


def test_gates_decide_before_the_effects():
    failed = rule.decide_gate("ood spread", [0.02, 0.03, 0.025], threshold=0.2)
    assert failed.verdict == rule.GATE_FAILS
    result = rule.decide_part([1.0, 1.1, 0.9], delta=0.1, gates=[failed])
    assert result.verdict == rule.NOT_TESTABLE and result.gate == "ood spread"
    undecided = rule.decide_gate("ood spread", [0.1, 0.3], threshold=0.2)
    assert rule.decide_part([1.0, 1.1], delta=0.1, gates=[undecided]).why == "gate undecided: ood spread"
    assert rule.decide_row({"a": rule.decide_part([1.0, 1.1, 0.9], 0.1, [failed])}).verdict == rule.NOT_TESTABLE


def test_row_verdicts():
    up = rule.decide_part([1.0, 1.2, 0.9, 1.1], delta=0.1)
    flat = rule.decide_part([0.001, -0.002, 0.0, 0.001], delta=0.1)
    down = rule.decide_part([-1.0, -1.2, -0.9, -1.1], delta=0.1)
    assert rule.decide_row({"a": up, "b": up}).verdict == rule.REPRODUCED
    row = rule.decide_row({"a": up, "b": flat})
    assert row.verdict == rule.PARTLY and row.holm == ("a",)
    assert rule.decide_row({"a": down, "b": flat}).verdict == rule.NOT_REPRODUCED
    assert "a: opposite" in rule.decide_row({"a": down, "b": flat}).text


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="delta"):
        rule.decide_part([1.0, 2.0], delta=0.0)
    with pytest.raises(ValueError, match="n ≥ 2"):
        rule.decide_part([1.0], delta=0.1)
    with pytest.raises(ValueError, match="finite"):
        rule.decide_part([1.0, float("nan")], delta=0.1)
