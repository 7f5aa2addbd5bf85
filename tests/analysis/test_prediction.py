"""``--check``'s prediction intervals: an honest rerun passes (simulated, and by leave-one-out on the committed
replicates' actual values), a planted move of 10 half-widths is named."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from thinkalike.analysis import prediction
from thinkalike.reports.findings.scorecard import committed_effects, run_estimates

FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings.json"


def test_the_half_width_is_the_bonferroni_t_prediction_interval():
    values = [1.0, 1.2, 0.9, 1.1]
    k = 50
    expected = stats.t.ppf(1 - 0.025 / k, 3) * np.std(values, ddof=1) * math.sqrt(1 + 1 / 4)
    assert prediction.half_width(values, k) == pytest.approx(expected, rel=1e-12)
    assert prediction.half_width([2.0, 2.0, 2.0], k, resolution=0.01) == 0.01  # no spread: the resolution
    assert prediction.half_width([5.0, 5.0], k) == pytest.approx(5e-6)  # nor a resolution: round-off


def test_an_honest_rerun_fails_at_most_five_percent_of_the_time():
    """K = 40 normal quantities, n = 4 committed draws and one new draw each, 4,000 times: the share of reruns with
    any quantity flagged is within 4 Monte-Carlo SE of ≤ 5 %."""
    rng = np.random.default_rng(7)
    k, trials = 40, 4000
    flagged = 0
    for _ in range(trials):
        draws = rng.normal(0.0, 1.0, size=(k, 5))
        committed = {f"q{i}": list(draws[i, :4]) for i in range(k)}
        run = {f"q{i}": float(draws[i, 4]) for i in range(k)}
        flagged += any(row.moved for row in prediction.check(committed, run))
    assert flagged / trials <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / trials)


def test_a_planted_move_of_ten_half_widths_is_named():
    committed = {"a": [1.0, 1.1, 0.9, 1.05], "b": [0.2, 0.25, 0.22, 0.21]}
    run = {"a": 1.0, "b": 0.22}
    assert not any(row.moved for row in prediction.check(committed, run))
    half = prediction.half_width(committed["b"], 2)
    moved = prediction.check(committed, {**run, "b": float(np.mean(committed["b"])) + 10 * half})
    assert [row.name for row in moved if row.moved] == ["b"]


@pytest.mark.skipif(not FINDINGS.is_file(), reason="docs/findings.json is not generated yet")
def test_leave_one_out_on_the_committed_replicates_false_alarms_at_most_five_percent():
    document = json.loads(FINDINGS.read_text(encoding="utf-8"))
    committed, resolutions = committed_effects(document["scorecard"])
    assert len(committed) >= 30
    rate = prediction.leave_one_out(committed, resolutions)
    print(f"leave-one-out false alarms on docs/findings.json's replicates: {rate:.3f} over {len(committed)} parts")
    assert rate <= 0.05
    # and each committed replicate's own estimates are what the scorecard stored
    first = document["replicates"][0]["findings"]
    estimates = run_estimates(first)
    assert all(estimates[name] == pytest.approx(values[0], abs=1e-12) for name, values in committed.items())
