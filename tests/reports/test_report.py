"""The experiments report (thinkalike.reports.report): verdict sentences computed from the scaling numbers, figures
embedded so the file stands alone, missing inputs named."""

from __future__ import annotations

import base64

import pytest

from thinkalike.reports.report import MissingInput, report_html
from thinkalike.reports.scaling import scaling_sentences


def _summary(off_trend_flagged: bool, twin_flagged: bool, rho: float = 0.9) -> dict:
    return {
        "family": ["a", "b", "c", "d", "e"], "trend_head_dim": 16, "band": [0.25, 0.75],
        "early": {"0.0": {"mean": 0.9, "min": 0.85, "max": 0.95}, "0.25": {"mean": 0.7, "min": 0.6, "max": 0.8}},
        "band_mean_between_members": 0.5, "intra_vs_size_spearman": rho,
        "intra_mean": {"a": 0.3, "b": 0.4, "c": 0.5, "d": 0.55, "e": 0.6},
        "structured_members": ["c", "d", "e"], "structured_pairs": ["c–e"], "n_member_pairs": 10, "outliers": ["d"] if off_trend_flagged else [],
        "robust_z": {"a": 0.1, "b": -0.5, "c": 0.0, "d": -6.0 if off_trend_flagged else -1.0, "e": 0.7},
        "twins": [{"off_trend": "d", "twin": "d_twin", "d_head_off_trend": 40, "d_head_twin": 16,
                   "band_mean_off_trend": 0.2, "band_mean_twin": 0.5, "difference": 0.3,
                   "z_off_trend": -6.0 if off_trend_flagged else -1.0, "z_twin": -4.0 if twin_flagged else 0.2,
                   "off_trend_flagged": off_trend_flagged, "twin_flagged": twin_flagged,
                   "band_mean_off_trend_vs_twin": 0.45}],
    }


def test_the_sentences_follow_the_numbers():
    text = " ".join(scaling_sentences(_summary(off_trend_flagged=True, twin_flagged=False)))
    assert "Early layers across scale (reproduced" in text and "0.90 at relative depth 0.0" in text
    assert "Block structure (partly reproduced" in text and "3 of 5 members" in text
    assert "between members, 1 of 10 pairs' CKA matrices have matched blocks" in text
    assert "Intra-model similarity vs scale (reproduced" in text and "ρ = 0.90" in text
    assert "`d` (robust z -6.00) — the off-trend member" in text
    assert "the dissimilarity follows the head dimension" in text
    both = " ".join(scaling_sentences(_summary(off_trend_flagged=True, twin_flagged=True, rho=-0.2)))
    assert "the head dimension is not the cause" in both and "Intra-model similarity vs scale (not reproduced" in both
    neither = " ".join(scaling_sentences(_summary(off_trend_flagged=False, twin_flagged=False)))
    assert "Outlier (not reproduced" in neither and "changes the statistic by +0.30" in neither
    assert scaling_sentences(None)[0].startswith("Scaling family: not in these outputs")


@pytest.mark.parametrize(("lowest", "mean", "verdict"), [
    (0.55, 0.9, "reproduced"),        # every pair's early layers above the pairs' intermediate band (0.5)
    (0.45, 0.9, "inconclusive"),      # the mean above it, one pair below
    (0.30, 0.5, "not reproduced"),    # no depth's mean above it
])
def test_the_early_layer_verdict_has_three_outcomes(lowest, mean, verdict):
    summary = _summary(off_trend_flagged=False, twin_flagged=False)
    summary["early"] = {"0.0": {"mean": mean, "min": lowest, "max": 0.95},
                        "0.25": {"mean": min(mean, 0.5), "min": lowest, "max": 0.6}}
    assert f"Early layers across scale ({verdict};" in scaling_sentences(summary)[0]


def test_the_report_stands_alone_and_names_what_is_missing():
    image = b"\x89PNG\r\n\x1a\nfake"
    html = report_html("T", "Some `code` and **bold**.\n\nA *finding*.", {"scaling_figure": image,
                                                                            "stitching_figure": None},
                       [MissingInput("stitching_penalties", "stitching")])
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert f"data:image/png;base64,{base64.b64encode(image).decode()}" in html
    assert html.count("<figure>") == 1  # a figure that was not saved is left out, not broken
    assert "<code>code</code>" in html and "<strong>bold</strong>" in html and "<em>finding</em>" in html
    assert "<code>stitching_penalties</code> (pipeline <code>stitching</code>)" in html
    assert "http" not in html.replace("http-equiv", "")  # nothing fetched from the network
