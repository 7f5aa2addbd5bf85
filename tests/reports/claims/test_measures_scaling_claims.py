"""Claims of the measures-beyond-CKA paragraph, the measure guide and the scaling family
(:func:`thinkalike.reports.findings.measures.claims_measures`, :func:`thinkalike.reports.findings.scaling.
claims_scaling`): on a default run's findings (conftest: the fixture file) the claims that hold are pinned, with
their margins and wording; on planted findings the margins' signs follow the planted answer while the set of ids stays the
same."""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import pytest

from tests.reports.claims.conftest import default_run_findings
from thinkalike.reports.findings.claims import HOLDS, MIXED, UNRESOLVED, Claim, merge_claims, render_claims, single_run
from thinkalike.reports.findings.measures import claims_measures, collect_measures
from thinkalike.reports.findings.scaling import INFINITE_Z, claims_scaling

MEASURES = [
    "cka",
    "procrustes",
    "angular_shape",
    "mean_cca",
    "svcca",
    "pwcca",
    "rsa",
    "mutual_knn",
    "cknna",
    "knn_jaccard",
    "linear_predictivity",
]
SEPARATING = {"cka", "mean_cca", "pwcca", "rsa", "mutual_knn", "cknna", "knn_jaccard"}
GUIDE_PASSES = {
    "monotonicity": {
        "cka",
        "procrustes",
        "angular_shape",
        "mean_cca",
        "pwcca",
        "rsa",
        "mutual_knn",
        "cknna",
        "knn_jaccard",
    },
    "sensitivity": {
        "cka",
        "procrustes",
        "angular_shape",
        "mean_cca",
        "svcca",
        "pwcca",
        "rsa",
        "mutual_knn",
        "cknna",
        "knn_jaccard",
        "linear_predictivity",
    },
    "null_permuted": {"cka", "rsa", "mutual_knn", "cknna", "knn_jaccard", "linear_predictivity"},
    "null_independent": {"cka", "rsa", "mutual_knn", "cknna", "knn_jaccard", "linear_predictivity"},
    "specificity": {"cka", "mean_cca", "pwcca", "rsa", "mutual_knn", "cknna", "knn_jaccard"},
    "trained_vs_untrained": {
        "cka",
        "procrustes",
        "angular_shape",
        "pwcca",
        "rsa",
        "mutual_knn",
        "cknna",
        "knn_jaccard",
        "linear_predictivity",
    },
}
EVERY_TEST = {"cka", "rsa", "mutual_knn", "cknna", "knn_jaccard"}
#: Verdicts of one question: at most one holds in a run.
VERDICTS = [
    {f"scaling.early.{v}" for v in ("reproduced", "inconclusive", "not_reproduced")},
    {f"scaling.blocks.{v}" for v in ("reproduced", "partly_reproduced", "not_reproduced")},
    {f"scaling.intra_vs_size.{v}" for v in ("reproduced", "inconclusive", "not_reproduced")},
    {"scaling.outlier.reproduced", "scaling.outlier.none"},
    {
        f"scaling.twin.neox_6l.{v}"
        for v in ("follows_head_dimension", "twin_as_unlike", "neither_outlier", "only_twin_outlier")
    },
]
#: The scaling verdicts on the default run of the fixture file, each as the claim that holds.
PROSE_VERDICTS = {
    "scaling.early.inconclusive": "Early layers across scale (inconclusive; …)",
    "scaling.blocks.partly_reproduced": "Block structure (partly reproduced; …)",
    "scaling.intra_vs_size.reproduced": "Intra-model similarity vs scale (reproduced; …)",
    "scaling.outlier.none": "Outlier (not reproduced; …)",
    "scaling.twin.neox_6l.neither_outlier": "… neither is an outlier, so there is no dissimilarity to explain",
}
#: The one-sided normal quantile of p = 0.05 (the calibration's z criterion), computed here independently.
Z_05 = statistics.NormalDist().inv_cdf(0.95)
#: The block threshold (``min_contrast``) the planted contrasts are measured against.
MIN_CONTRAST = 0.1


@pytest.fixture(scope="module")
def findings() -> dict[str, Any]:
    return default_run_findings()


def _plant_contrasts(
    summary: dict[str, Any], members: Mapping[str, float], pairs: Mapping[str, float] | None = None
) -> None:
    """Block contrasts (and the threshold :data:`MIN_CONTRAST`) planted in a scaling summary."""
    summary.update(min_contrast=MIN_CONTRAST, block_contrast=dict(members), pair_block_contrast=dict(pairs or {}))


def _held(claims: list[Claim]) -> set[str]:
    return {c.id for c in claims if c.holds}


def _margins(claims: list[Claim]) -> dict[str, float | None]:
    return {c.id: c.margin for c in claims}


# --------------------------------------------------------------------------- (1) the default run


def test_measures_claims_that_hold_on_the_default_run(findings: dict[str, Any]) -> None:
    claims = claims_measures(findings)
    assert len({c.id for c in claims}) == len(claims), "ids are unique"
    expected = {
        f"measures.replicas_vs_solu_gelu.{m}.{'replicas_closer' if m in SEPARATING else 'overlap'}" for m in MEASURES
    }
    expected |= {
        "measures.rogue.none_above_half",
        "measures.grounding.monotonicity_highest.rsa",
        "measures.grounding.monotonicity_lowest.linear_predictivity",
        "measures.grounding.specificity_lowest.svcca",
    }
    expected |= {
        f"measures.calibration.{s}.{m}.every_pair_significant"
        for s in ("matched_mean", "best")
        for m in ("cka", "procrustes", "mutual_knn")
    }
    expected |= {
        f"measures.guide.{test}.{'passes' if m in passing else 'fails'}.{m}"
        for test, passing in GUIDE_PASSES.items()
        for m in MEASURES
    }
    expected |= {f"measures.guide.every_test.{m}" for m in EVERY_TEST}
    assert _held(claims) == expected
    # specificity 1 is said once, by the guide (with its size over the criterion), not again by the grounding
    assert not any(c.id.startswith("measures.grounding.specificity_perfect.") for c in claims)
    margins = _margins(claims)
    assert margins["measures.guide.specificity.passes.cka"] == pytest.approx(1.0 - 0.99)
    assert margins["measures.rogue.none_above_half"] == pytest.approx(0.5 - 0.148363)
    assert margins["measures.replicas_vs_solu_gelu.cka.replicas_closer"] == pytest.approx(0.790294 - 0.780786)
    # a distance: replicas closer means smaller; procrustes' spans overlap by 0.601483 - 0.597909
    assert margins["measures.replicas_vs_solu_gelu.procrustes.overlap"] == pytest.approx(0.601483 - 0.597909)
    assert margins["measures.guide.monotonicity.fails.svcca"] == pytest.approx(0.7 - 0.611214)
    assert margins["measures.guide.null_permuted.passes.cka"] == pytest.approx(0.05 - 7.8e-05)
    assert margins["measures.grounding.monotonicity_highest.rsa"] == pytest.approx(0.826678 - 0.809439)
    # significance as a size: the pairs' smallest z over the one-sided normal quantile of p = 0.05 (the permutation
    # p of these findings sits at its floor 1/21 for every pair, so it carries no size)
    assert margins["measures.calibration.best.cka.every_pair_significant"] == pytest.approx(153.726709 - Z_05)
    assert margins["measures.calibration.best.cka.some_pair_not_significant"] == pytest.approx(Z_05 - 153.726709)
    assert margins["measures.calibration.matched_mean.procrustes.every_pair_significant"] == pytest.approx(
        70.295704 - Z_05
    )


def test_measures_claims_render_what_the_readme_said(findings: dict[str, Any]) -> None:
    sentences = render_claims(merge_claims([single_run(claims_measures(findings))]), "run")
    text = " ".join(sentences)
    assert "Not findings" not in text
    # the guide's lists, item for item (its failures sorted by |score|)
    assert (
        "To follow a model's layers in order (layer monotonicity ρ ≥ 0.7): `cka` (0.77), `procrustes` (0.80), "
        "`angular_shape` (0.80), `mean_cca` (0.81), `pwcca` (0.80), `rsa` (0.83), `mutual_knn` (0.80), `cknna` "
        "(0.80) and `knn_jaccard` (0.80)."
    ) in sentences
    assert (
        "Not to be trusted to follow a model's layers in order (layer monotonicity ρ ≥ 0.7): `svcca` (0.61) and "
        "`linear_predictivity` (0.48)."
    ) in sentences
    assert "Every test: `cka`, `rsa`, `mutual_knn`, `cknna` and `knn_jaccard`." in sentences
    # phrases of that run's findings
    for phrase in (
        "is highest for `rsa` (0.83)",
        "lowest for `linear_predictivity` (0.48)",
        "lowest for `svcca` (0.64)",
        "at most 15 % of its variance (`neox_2l`, layer 1)",
        "0 of 82 layers are above one half",
        "`procrustes` (replicas 0.57–0.60, SoLU vs GeLU 0.60–0.64)",
        "`cka` z +109.7 to +594.1",
        "(average precision ≥ 0.99; chance 0.60)",
        "0.99 over 3 trained-vs-untrained pairs; chance 0.50",
    ):
        assert phrase.replace("`cka` z", "`cka` (z") in text, phrase


def test_scaling_claims_that_hold_on_the_default_run(findings: dict[str, Any]) -> None:
    # the collected block contrasts agree with the summary's structured members and pairs
    summary = findings["scaling"]
    assert summary["min_contrast"] == MIN_CONTRAST
    contrasts, pair_contrasts = summary["block_contrast"], summary["pair_block_contrast"]
    assert set(summary["structured_members"]) == {m for m, c in contrasts.items() if c >= MIN_CONTRAST}
    assert set(summary["structured_pairs"]) == {p for p, c in pair_contrasts.items() if c >= MIN_CONTRAST}
    claims = claims_scaling(findings)
    assert len({c.id for c in claims}) == len(claims), "ids are unique"
    assert _held(claims) == {
        "scaling.early.0.0.mean_above_band",
        "scaling.early.0.25.mean_above_band",
        "scaling.early.0.0.some_pair_below_band",
        "scaling.early.0.25.some_pair_below_band",
        "scaling.early.inconclusive",
        "scaling.blocks.member.neox_3l",
        "scaling.blocks.member.neox_4l",
        "scaling.blocks.member.neox_6l",
        "scaling.blocks.member.neox_8l",
        "scaling.blocks.pair.neox_3l.neox_4l",
        "scaling.blocks.pair.neox_4l.neox_8l",
        "scaling.blocks.pair.neox_6l.neox_8l",
        "scaling.blocks.partly_reproduced",
        "scaling.intra_vs_size.reproduced",
        "scaling.outlier.none",
        "scaling.outlier.most_extreme.neox_6l",
        "scaling.twin.neox_6l.neither_outlier",
        "scaling.twin.neox_6l.twin_closer",
    }
    margins = _margins(claims)
    assert margins["scaling.early.inconclusive"] == pytest.approx(min(0.880632 - 0.850119, 0.850119 - 0.831166))
    assert margins["scaling.intra_vs_size.reproduced"] == pytest.approx(0.9 - 0.7)
    assert margins["scaling.outlier.none"] == pytest.approx(3.5 - 2.470605)
    assert margins["scaling.outlier.most_extreme.neox_6l"] == pytest.approx(2.470605 - 2.026917)
    assert margins["scaling.twin.neox_6l.neither_outlier"] == pytest.approx(3.5 - 2.470605)
    assert margins["scaling.twin.neox_6l.twin_closer"] == pytest.approx(0.002982)
    # block margins are contrasts over the threshold; the verdicts' follow the members'
    for member, contrast in contrasts.items():
        assert margins[f"scaling.blocks.member.{member}"] == pytest.approx(contrast - MIN_CONTRAST), member
    for pair, contrast in pair_contrasts.items():
        a, b = pair.split("–")
        assert margins[f"scaling.blocks.pair.{a}.{b}"] == pytest.approx(contrast - MIN_CONTRAST), pair
    assert margins["scaling.blocks.reproduced"] == pytest.approx(0.031149 - MIN_CONTRAST)
    assert margins["scaling.blocks.partly_reproduced"] == pytest.approx(
        min(0.158448 - MIN_CONTRAST, MIN_CONTRAST - 0.031149)
    )
    assert margins["scaling.blocks.not_reproduced"] == pytest.approx(MIN_CONTRAST - 0.158448)
    # each verdict is the one claim of its question that holds
    held = _held(claims)
    for family in VERDICTS:
        assert held & family == set(PROSE_VERDICTS) & family, family
    text = " ".join(render_claims(merge_claims([single_run(claims)]), "run"))
    for phrase in (
        "Early layers across scale: inconclusive",
        "Block structure: partly reproduced",
        "4 of 5 members have blocks (contrast 0.031–0.158; threshold 0.10)",
        "`neox_3l` (0.141), `neox_4l` (0.147), `neox_6l` (0.142) and `neox_8l` (0.158)",
        "`neox_3l` and `neox_4l` (0.101), `neox_4l` and `neox_8l` (0.121) and `neox_6l` and `neox_8l` (0.115)",
        "Intra-model similarity vs scale: reproduced",
        "Spearman ρ = 0.90",
        "`neox_2l` 0.84, `neox_3l` 0.88, `neox_4l` 0.87, `neox_6l` 0.89, `neox_8l` 0.90",
        "Outlier: not reproduced",
        "`neox_6l` has the most extreme robust z",
        "(z −2.47)",
        "neither lies beyond the robust-z threshold 3.5, so there is no dissimilarity to explain",
    ):
        assert phrase in text, phrase


@pytest.mark.parametrize("claims_of", [claims_measures, claims_scaling])
def test_every_text_fills_on_the_default_run(
    findings: dict[str, Any], claims_of: Callable[[Mapping[str, Any]], list[Claim]]
) -> None:
    claims = claims_of(findings)
    assert claims
    unfilled = [(c.id, c.text) for c in claims if "n/a" in c.text or "{" in c.text]
    assert not unfilled
    for claim in claims:
        if claim.group is not None:
            assert (
                "n/a"
                not in render_claims(
                    [{**claim.as_json(), "margin": [1.0], "values": [claim.values], "status": "holds"}]
                )[0]
            )


# --------------------------------------------------------------------------- (2) planted answers


def _planted(findings: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    planted = copy.deepcopy(findings)
    change(planted)
    return planted


def _measure(section: dict[str, Any], key: str, name: str) -> dict[str, Any]:
    return next(e for e in section[key] if e["measure"] == name)


def _plant_measures(f: dict[str, Any]) -> None:
    m = f["measures"]
    cka = _measure(m, "per_measure", "cka")
    cka["replicas"], cka["solu_gelu"] = [0.70, 0.72], [0.75, 0.80]  # SoLU/GeLU now closer
    procrustes = _measure(m, "per_measure", "procrustes")  # a distance: replicas closer
    procrustes["replicas"], procrustes["solu_gelu"] = [0.40, 0.45], [0.60, 0.64]
    m["rogue"]["max_top1"] = 0.62
    svcca = _measure(m, "grounding", "svcca")
    svcca.update(
        monotonicity=0.95, specificity=1.0, null_permuted=0.01, null_independent=-0.02, trained_vs_untrained=1.0
    )  # now passes every test
    _measure(m, "grounding", "rsa")["null_permuted"] = -0.08  # |−0.08| > 0.05: fails
    _measure(m, "grounding", "linear_predictivity")["specificity"] = 0.2  # now the lowest
    for entry in m["calibration"]["statistics"]["best"]:
        entry["z"] = [2.5, 300.0]  # every pair still significant, now by a small size
    _measure(m["calibration"]["statistics"], "matched_mean", "procrustes").update(
        z=[1.2, 250.0], max_p=0.142857, n_significant=20
    )  # some pair's z below the quantile


def test_planted_measures_margins_follow_and_ids_stay(findings: dict[str, Any]) -> None:
    real = claims_measures(findings)
    planted = claims_measures(_planted(findings, _plant_measures))
    assert [c.id for c in planted] == [c.id for c in real]
    held = _held(planted)
    assert "measures.replicas_vs_solu_gelu.cka.solu_gelu_closer" in held
    assert "measures.replicas_vs_solu_gelu.cka.replicas_closer" not in held
    assert "measures.replicas_vs_solu_gelu.procrustes.replicas_closer" in held
    assert _margins(planted)["measures.replicas_vs_solu_gelu.procrustes.replicas_closer"] == pytest.approx(0.15)
    assert {"measures.rogue.some_above_half"} <= held and "measures.rogue.none_above_half" not in held
    assert "measures.grounding.monotonicity_highest.svcca" in held
    assert "measures.grounding.monotonicity_highest.rsa" not in held
    assert "measures.grounding.specificity_lowest.linear_predictivity" in held
    assert "measures.guide.specificity.passes.svcca" in held and "measures.guide.specificity.fails.svcca" not in held
    assert _margins(planted)["measures.guide.specificity.passes.svcca"] == pytest.approx(1.0 - 0.99)
    assert "measures.guide.every_test.svcca" in held and "measures.guide.every_test.rsa" not in held
    assert "measures.guide.null_permuted.fails.rsa" in held
    assert _margins(planted)["measures.guide.null_permuted.fails.rsa"] == pytest.approx(0.03)
    assert "measures.calibration.matched_mean.procrustes.some_pair_not_significant" in held
    assert "measures.calibration.matched_mean.procrustes.every_pair_significant" not in held
    assert _margins(planted)["measures.calibration.matched_mean.procrustes.some_pair_not_significant"] == pytest.approx(
        Z_05 - 1.2
    )
    assert _margins(planted)["measures.calibration.best.cka.every_pair_significant"] == pytest.approx(2.5 - Z_05)
    assert _margins(planted)["measures.calibration.best.cka.some_pair_not_significant"] == pytest.approx(Z_05 - 2.5)
    # the z decides, not the count: 20 of 24 significant quotes the collected largest p, while the margin stays the
    # smallest z's
    counted = _planted(
        findings,
        lambda f: _measure(f["measures"]["calibration"]["statistics"], "matched_mean", "cka").update(
            n_significant=20, max_p=2 / 21
        ),
    )
    by_id = {c.id: c for c in claims_measures(counted)}
    some = by_id["measures.calibration.matched_mean.cka.some_pair_not_significant"]
    assert some.values["max_p"] == pytest.approx(2 / 21)
    assert some.margin == pytest.approx(Z_05 - 109.693133)
    # a single z (not a span) is its own smallest; no z at all leaves both undecided
    single = _planted(
        findings,
        lambda f: _measure(f["measures"]["calibration"]["statistics"], "best", "procrustes").update(z=1.0),
    )
    assert _margins(claims_measures(single))[
        "measures.calibration.best.procrustes.some_pair_not_significant"
    ] == pytest.approx(Z_05 - 1.0)
    no_z = _planted(
        findings, lambda f: _measure(f["measures"]["calibration"]["statistics"], "best", "procrustes").pop("z")
    )
    margins = _margins(claims_measures(no_z))
    assert margins["measures.calibration.best.procrustes.every_pair_significant"] is None
    assert margins["measures.calibration.best.procrustes.some_pair_not_significant"] is None


def test_no_measure_passes_every_test(findings: dict[str, Any]) -> None:
    def fail_all(f: dict[str, Any]) -> None:
        for g in f["measures"]["grounding"]:
            g["monotonicity"] = 0.5

    claims = claims_measures(_planted(findings, fail_all))
    held = _held(claims)
    assert "measures.guide.no_measure_passes_every_test" in held
    assert not any(i.startswith("measures.guide.every_test.") for i in held)
    assert {c.id for c in claims} == {c.id for c in claims_measures(findings)}


def _plant_scaling(f: dict[str, Any]) -> None:
    s = f["scaling"]
    for entry in s["early"].values():
        entry["min"] = 0.86  # every pair above the band (0.85)
    s["structured_members"] = list(s["family"])
    s["structured_pairs"] = []
    # every member's contrast above the threshold (0.12 to 0.20), every pair's below it
    _plant_contrasts(
        s,
        {m: 0.12 + 0.02 * i for i, m in enumerate(s["family"])},
        {f"{a}–{b}": 0.08 for i, a in enumerate(s["family"]) for b in s["family"][i + 1 :]},
    )
    s["intra_vs_size_spearman"] = 0.3
    s["robust_z"]["neox_6l"] = -5.0
    s["outliers"] = ["neox_6l"]
    s["twins"][0].update(z_off_trend=-5.0, off_trend_flagged=True, z_twin=-0.5, difference=-0.02)


def test_planted_scaling_margins_follow_and_ids_stay(findings: dict[str, Any]) -> None:
    real = claims_scaling(findings)
    planted = claims_scaling(_planted(findings, _plant_scaling))
    assert [c.id for c in planted] == [c.id for c in real]
    held, margins = _held(planted), _margins(planted)
    assert {
        "scaling.early.reproduced",
        "scaling.early.0.0.every_pair_above_band",
        "scaling.early.0.25.every_pair_above_band",
        "scaling.blocks.reproduced",
        "scaling.intra_vs_size.inconclusive",
        "scaling.outlier.reproduced",
        "scaling.outlier.member.neox_6l",
        "scaling.outlier.off_trend.neox_6l",
        "scaling.twin.neox_6l.follows_head_dimension",
        "scaling.twin.neox_6l.off_trend_closer",
    } <= held
    assert not held & {
        "scaling.early.inconclusive",
        "scaling.blocks.partly_reproduced",
        "scaling.outlier.none",
        "scaling.intra_vs_size.reproduced",
        "scaling.twin.neox_6l.neither_outlier",
        "scaling.outlier.not_off_trend.neox_6l",
    }
    assert not any(i.startswith("scaling.blocks.pair.") for i in held)
    assert margins["scaling.early.reproduced"] == pytest.approx(0.86 - 0.850119)
    assert margins["scaling.intra_vs_size.inconclusive"] == pytest.approx(0.3)
    assert margins["scaling.outlier.reproduced"] == pytest.approx(1.5)
    assert margins["scaling.twin.neox_6l.follows_head_dimension"] == pytest.approx(1.5)
    # the block margins follow the planted contrasts
    assert margins["scaling.blocks.reproduced"] == pytest.approx(0.12 - MIN_CONTRAST)
    assert margins["scaling.blocks.member.neox_8l"] == pytest.approx(0.20 - MIN_CONTRAST)
    assert margins["scaling.blocks.partly_reproduced"] == pytest.approx(-(0.12 - MIN_CONTRAST))
    assert margins["scaling.blocks.not_reproduced"] == pytest.approx(-(0.20 - MIN_CONTRAST))
    assert margins["scaling.blocks.pair.neox_2l.neox_3l"] == pytest.approx(0.08 - MIN_CONTRAST)


@pytest.mark.parametrize(
    ("change", "verdicts"),
    [
        (
            lambda s: (
                s.update(intra_vs_size_spearman=-0.4, structured_members=[]),
                _plant_contrasts(s, {m: 0.05 for m in s["family"]}),
            ),
            {"scaling.intra_vs_size.not_reproduced", "scaling.blocks.not_reproduced"},
        ),
        (
            lambda s: _plant_contrasts(
                s, {**{m: 0.05 for m in s["family"]}, "neox_2l": 0.3}, {"neox_2l–neox_8l": 0.25}
            ),
            {
                "scaling.blocks.partly_reproduced",
                "scaling.blocks.member.neox_2l",
                "scaling.blocks.pair.neox_2l.neox_8l",
            },
        ),
        (lambda s: [e.update(mean=0.80, min=0.70) for e in s["early"].values()], {"scaling.early.not_reproduced"}),
        (
            lambda s: (
                s["twins"][0].update(z_off_trend=-5.0, off_trend_flagged=True, z_twin=-4.0, twin_flagged=True),
                s["robust_z"].update(neox_6l=-5.0),
                s.update(outliers=["neox_6l"]),
            ),
            {"scaling.twin.neox_6l.twin_as_unlike", "scaling.outlier.off_trend.neox_6l"},
        ),
        (
            lambda s: (s["robust_z"].update(neox_4l=6.0), s.update(outliers=["neox_4l"])),
            {
                "scaling.outlier.not_off_trend.neox_6l",
                "scaling.outlier.member.neox_4l",
                "scaling.outlier.most_extreme.neox_4l",
            },
        ),
        (
            lambda s: (s["robust_z"].update(neox_4l=None), s.update(outliers=["neox_4l"])),  # ±∞ saved as null
            {"scaling.outlier.member.neox_4l", "scaling.outlier.reproduced"},
        ),
        (lambda s: s["twins"][0].update(z_twin=4.0, twin_flagged=True), {"scaling.twin.neox_6l.only_twin_outlier"}),
    ],
)
def test_planted_scaling_verdicts(
    findings: dict[str, Any], change: Callable[[dict[str, Any]], Any], verdicts: set[str]
) -> None:
    planted = claims_scaling(_planted(findings, lambda f: change(f["scaling"])))
    assert verdicts <= _held(planted)
    assert {c.id for c in planted} == {c.id for c in claims_scaling(findings)}
    held = _held(planted)
    for family in VERDICTS:
        assert len(held & family) <= 1, held & family


def test_infinite_z_margin_is_large_and_finite(findings: dict[str, Any]) -> None:
    planted = _planted(
        findings, lambda f: (f["scaling"]["robust_z"].update(neox_4l=None), f["scaling"].update(outliers=["neox_4l"]))
    )
    margin = _margins(claims_scaling(planted))["scaling.outlier.member.neox_4l"]
    assert margin == pytest.approx(INFINITE_Z - 3.5)


@pytest.mark.parametrize("section", [{"missing": ["x"]}, {"error": "KeyError: 'z'"}, None])
def test_missing_or_errored_sections_give_no_claims(findings: dict[str, Any], section: Any) -> None:
    planted = {**findings, "measures": section, "scaling": section}
    assert claims_measures(planted) == [] and claims_scaling(planted) == []
    assert claims_measures({}) == [] and claims_scaling({}) == []


def test_replicates_state_only_what_holds_in_all(findings: dict[str, Any]) -> None:
    runs = [claims_measures(findings), claims_measures(_planted(findings, _plant_measures)), claims_measures(findings)]
    merged_list = merge_claims([single_run(r) for r in runs])
    merged = {c["id"]: c for c in merged_list}
    assert merged["measures.replicas_vs_solu_gelu.cka.replicas_closer"]["status"] == MIXED
    # the same margin in every replicate carries no size: it holds everywhere, yet is no finding
    same = merged["measures.replicas_vs_solu_gelu.mean_cca.replicas_closer"]
    assert same["status"] == UNRESOLVED and "same margin" in same["why"]
    assert same["noise"] == pytest.approx(0.0)
    assert "0.53" in same["text"]
    # a statement and its negation (margins each other's negative in every replicate) are one entry, stated from
    # the side that holds in more replicates
    rogue = merged["measures.rogue.none_above_half"]
    assert rogue["status"] == MIXED and rogue["negation"] == "measures.rogue.some_above_half"
    assert "measures.rogue.some_above_half" not in merged
    assert rogue["margin"] == pytest.approx([0.5 - 0.148363, 0.5 - 0.62, 0.5 - 0.148363])
    every = "measures.calibration.matched_mean.procrustes.every_pair_significant"
    assert merged[every]["status"] == MIXED
    assert merged[every]["negation"] == "measures.calibration.matched_mean.procrustes.some_pair_not_significant"
    assert "measures.calibration.matched_mean.procrustes.some_pair_not_significant" not in merged
    # held everywhere, but the planted replicate's small z is within 2 × the spread of the margin
    best = merged["measures.calibration.best.cka.every_pair_significant"]
    assert best["status"] == UNRESOLVED and "within" in best["why"]
    assert best["noise"] == pytest.approx(statistics.stdev([153.726698 - Z_05, 2.5 - Z_05, 153.726698 - Z_05]))
    # the unresolved are named before the claims that hold in some replicates only
    sentences = render_claims(merged_list, "replicates")
    unresolved = next(i for i, t in enumerate(sentences) if t.startswith("Unresolved — "))
    mixed = next(i for i, t in enumerate(sentences) if t.startswith("Not findings — "))
    assert unresolved < mixed
    assert "`replicas_vs_solu_gelu.mean_cca.replicas_closer`" in sentences[unresolved]
    assert "`calibration.best.cka.every_pair_significant`" in sentences[unresolved]
    assert "`rogue.none_above_half` (2 of 3)" in sentences[mixed] and "some_above_half" not in " ".join(sentences)


@pytest.mark.parametrize(
    ("top1", "status", "why"),
    [
        ((0.148363, 0.16, 0.17), HOLDS, "× its spread"),  # margins 0.35, 0.34, 0.33: far clear of their spread
        ((0.10, 0.30, 0.45), UNRESOLVED, "within 2 × its spread"),  # 0.40, 0.20, 0.05: the last within 2 sd
        ((0.10, 0.30, 0.55), MIXED, "holds in 2 of 3"),
    ],
)
def test_a_finding_clears_twice_its_noise_in_every_replicate(
    findings: dict[str, Any], top1: tuple[float, float, float], status: str, why: str
) -> None:
    runs = [
        single_run(claims_measures(_planted(findings, lambda f, t=t: f["measures"]["rogue"].update(max_top1=t))))
        for t in top1
    ]
    merged = {c["id"]: c for c in merge_claims(runs)}
    entry = merged["measures.rogue.none_above_half"]
    margins = [0.5 - t for t in top1]
    assert entry["margin"] == pytest.approx(margins)
    assert entry["noise"] == pytest.approx(statistics.stdev(margins))
    assert entry["status"] == status and why in entry["why"]
    assert entry["negation"] == "measures.rogue.some_above_half"


# --------------------------------------------------------------------------- collection


def test_collect_measures_keeps_the_largest_p_and_pairs() -> None:
    roles = {"replicas": [{"models": ["g", "g1", "g2"]}], "solu_gelu": [{"solu": "s", "gelu": "g"}]}
    pairs = [("g", "g1"), ("g", "g2"), ("g1", "g2"), ("s", "g")]
    summary = pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "measure": "cka",
                "kind": "similarity",
                "matched_mean": 0.9 if a != "s" else 0.5,
                "n_tokens": 64,
            }
            for a, b in pairs
        ]
    )
    calibration = pd.DataFrame(
        [
            {
                "model_a": a,
                "model_b": b,
                "measure": "cka",
                "statistic": "matched_mean",
                "z": 5.0 + i,
                "p_value": [1 / 21, 1 / 21, 3 / 21, 1 / 21][i],
                "n_permutations": 20,
            }
            for i, (a, b) in enumerate(pairs)
        ]
    )
    collected = collect_measures({"similarity_measures": summary, "similarity_calibration": calibration}, roles)
    entry = collected["calibration"]["statistics"]["matched_mean"][0]
    assert entry["max_p"] == pytest.approx(3 / 21, abs=1e-6) and entry["min_p"] == pytest.approx(1 / 21, abs=1e-6)
    assert entry["n_pairs"] == 4 and entry["n_significant"] == 3
    margins = _margins(claims_measures({"measures": collected}))
    # the margin is the pairs' smallest z over the normal quantile, not the permutation p
    assert entry["z"] == pytest.approx([5.0, 8.0])
    assert margins["measures.calibration.matched_mean.cka.every_pair_significant"] == pytest.approx(5.0 - Z_05)
    assert margins["measures.calibration.matched_mean.cka.some_pair_not_significant"] == pytest.approx(Z_05 - 5.0)
    # the largest p is kept for the text
    calibration = {c.id: c for c in claims_measures({"measures": collected})}
    assert calibration["measures.calibration.matched_mean.cka.every_pair_significant"].values["max_p"] == pytest.approx(
        3 / 21, abs=1e-6
    )
    assert margins["measures.replicas_vs_solu_gelu.cka.replicas_closer"] == pytest.approx(0.4)
