"""The experiments report's scaling verdicts: claims computed from the scaling numbers
(thinkalike.reports.findings.scaling.claims_scaling) follow planted summaries (the page itself:
tests/reports/test_report_page.py)."""

from __future__ import annotations

import pytest

from thinkalike.reports.findings.claims import Claim
from thinkalike.reports.findings.scaling import claims_scaling

#: The verdicts of each question of Brown et al. §5: exactly one of each holds on the planted summaries.
EARLY = {f"scaling.early.{v}" for v in ("reproduced", "inconclusive", "not_reproduced")}
BLOCKS = {f"scaling.blocks.{v}" for v in ("reproduced", "partly_reproduced", "not_reproduced")}
INTRA = {f"scaling.intra_vs_size.{v}" for v in ("reproduced", "inconclusive", "not_reproduced")}
OUTLIER = {"scaling.outlier.reproduced", "scaling.outlier.none"}
CAUSE = {
    f"scaling.twin.d.{v}" for v in ("follows_head_dimension", "twin_as_unlike", "neither_outlier", "only_twin_outlier")
}


def _summary(off_trend_flagged: bool, twin_flagged: bool, rho: float = 0.9) -> dict:
    return {
        "family": ["a", "b", "c", "d", "e"],
        "trend_head_dim": 16,
        "band": [0.25, 0.75],
        "early": {"0.0": {"mean": 0.9, "min": 0.85, "max": 0.95}, "0.25": {"mean": 0.7, "min": 0.6, "max": 0.8}},
        "band_mean_between_members": 0.5,
        "intra_vs_size_spearman": rho,
        "intra_mean": {"a": 0.3, "b": 0.4, "c": 0.5, "d": 0.55, "e": 0.6},
        "structured_members": ["c", "d", "e"],
        "structured_pairs": ["c–e"],
        "min_contrast": 0.1,  # blocks where the contrast is at least 0.1: c, d and e; the pair c–e
        "block_contrast": {"a": 0.02, "b": 0.05, "c": 0.3, "d": 0.2, "e": 0.15},
        "pair_block_contrast": {
            f"{x}–{y}": (0.25 if (x, y) == ("c", "e") else 0.04)
            for i, x in enumerate("abcde")
            for y in "abcde"[i + 1 :]
        },
        "n_member_pairs": 10,
        "outliers": ["d"] if off_trend_flagged else [],
        "robust_z": {"a": 0.1, "b": -0.5, "c": 0.0, "d": -6.0 if off_trend_flagged else -1.0, "e": 0.7},
        "twins": [
            {
                "off_trend": "d",
                "twin": "d_twin",
                "d_head_off_trend": 40,
                "d_head_twin": 16,
                "band_mean_off_trend": 0.2,
                "band_mean_twin": 0.5,
                "difference": 0.3,
                "z_off_trend": -6.0 if off_trend_flagged else -1.0,
                "z_twin": -4.0 if twin_flagged else 0.2,
                "off_trend_flagged": off_trend_flagged,
                "twin_flagged": twin_flagged,
                "band_mean_off_trend_vs_twin": 0.45,
            }
        ],
    }


def _claims(summary: dict | None) -> dict[str, Claim]:
    claims = claims_scaling({"scaling": summary})
    found = {c.id: c for c in claims}
    assert len(found) == len(claims), "claim ids are unique"
    return found


def _verdicts(claims: dict[str, Claim]) -> set[str]:
    """The verdicts that hold, one per question."""
    held = {i for i, c in claims.items() if c.holds}
    for question in (EARLY, BLOCKS, INTRA, OUTLIER, CAUSE):
        assert len(held & question) == 1, (question, held & question)
    return held & (EARLY | BLOCKS | INTRA | OUTLIER | CAUSE)


def test_the_verdicts_follow_the_numbers():
    claims = _claims(_summary(off_trend_flagged=True, twin_flagged=False))
    assert _verdicts(claims) == {
        "scaling.early.reproduced",
        "scaling.blocks.partly_reproduced",
        "scaling.intra_vs_size.reproduced",
        "scaling.outlier.reproduced",
        "scaling.twin.d.follows_head_dimension",
    }
    assert claims["scaling.early.reproduced"].margin == pytest.approx(0.6 - 0.5)  # the lowest pair over the band
    assert "mean CKA 0.90" in claims["scaling.early.0.0.mean_above_band"].text
    assert "3 of 5 members" in claims["scaling.blocks.partly_reproduced"].text
    # between members, 1 of 10 pairs' CKA matrices have matched blocks
    pairs = {i: c for i, c in claims.items() if i.startswith("scaling.blocks.pair.")}
    assert len(pairs) == 10 and {i for i, c in pairs.items() if c.holds} == {"scaling.blocks.pair.c.e"}
    assert claims["scaling.intra_vs_size.reproduced"].margin == pytest.approx(0.9 - 0.7)
    assert "ρ = 0.90" in claims["scaling.intra_vs_size.reproduced"].text
    # `d` (robust z −6.00) is the outlier, and it is the off-trend member
    assert claims["scaling.outlier.member.d"].holds and claims["scaling.outlier.off_trend.d"].holds
    assert not claims["scaling.outlier.not_off_trend.d"].holds
    assert "(z −6.00, beyond 3.5)" in claims["scaling.outlier.off_trend.d"].text
    assert "the dissimilarity follows the head dimension" in claims["scaling.twin.d.follows_head_dimension"].text

    both = _claims(_summary(off_trend_flagged=True, twin_flagged=True, rho=-0.2))
    assert {"scaling.twin.d.twin_as_unlike", "scaling.intra_vs_size.not_reproduced"} <= _verdicts(both)
    assert "the head dimension is not the cause" in both["scaling.twin.d.twin_as_unlike"].text

    neither = _claims(_summary(off_trend_flagged=False, twin_flagged=False))
    assert {"scaling.outlier.none", "scaling.twin.d.neither_outlier"} <= _verdicts(neither)
    # the head dimension changes the statistic by +0.30: the twin's mean over the off-trend member's
    assert neither["scaling.twin.d.twin_closer"].holds
    assert neither["scaling.twin.d.twin_closer"].margin == pytest.approx(0.3)
    assert "by +0.300" in neither["scaling.twin.d.twin_closer"].text

    # no summary (no family configured, or the scaling pipeline not run): no claims
    assert claims_scaling({"scaling": None}) == [] and claims_scaling({}) == []
    assert claims_scaling({"scaling": {"missing": ["scaling_summary"]}}) == []


def _early(lowest: float, mean: float) -> dict[str, Claim]:
    summary = _summary(off_trend_flagged=False, twin_flagged=False)
    summary["early"] = {
        "0.0": {"mean": mean, "min": lowest, "max": 0.95},
        "0.25": {"mean": min(mean, 0.5), "min": lowest, "max": 0.6},
    }
    return _claims(summary)


@pytest.mark.parametrize(
    ("lowest", "mean", "verdict", "margin"),
    [
        (0.55, 0.9, "reproduced", 0.05),  # every pair's early layers above the pairs' intermediate band (0.5)
        (0.45, 0.9, "inconclusive", 0.05),  # the mean above it, one pair below: min(0.9 − 0.5, 0.5 − 0.45)
        (0.30, 0.45, "not_reproduced", 0.05),  # no depth's mean above it
    ],
)
def test_the_early_layer_verdict_has_three_outcomes(lowest, mean, verdict, margin):
    claims = _early(lowest, mean)
    assert _verdicts(claims) & EARLY == {f"scaling.early.{verdict}"}
    assert claims[f"scaling.early.{verdict}"].margin == pytest.approx(margin)


def test_an_early_mean_level_with_the_band_decides_no_verdict():
    """The highest early mean exactly at the band (0.5): not above it, not below it — every verdict's margin is at
    most 0, so none holds (the prose called this "not reproduced")."""
    claims = _early(0.30, 0.5)
    assert claims["scaling.early.not_reproduced"].margin == pytest.approx(0.0)
    assert not any(claims[i].holds for i in EARLY)
