"""The plan's estimands read from one replicate's collected findings (reports/findings/scorecard.py), each against
the arithmetic done here by hand on a small planted findings dict."""

from __future__ import annotations

import pytest

from thinkalike.reports.findings.scorecard import (
    _asymmetry,
    _asymmetry_alternatives,
    _asymmetry_within_run,
    _blocks,
    _blocks_alternatives,
    _floor_confound,
    _keep_k,
    _keep_k_alternatives,
    _spearman,
    _spearman_alternatives,
    _zero_shot,
    _zero_shot_alternatives,
    scorecard,
    section_estimates,
)


def test_blocks_are_each_members_contrast_less_its_layer_order_null():
    findings = {
        "roles": {"n_layers": {"neox_2l": 2, "neox_4l": 4, "neox_8l": 8}},
        "scaling": {
            "min_contrast": 0.1,
            "block_contrast": {"neox_2l": 0.5, "neox_4l": 0.30, "neox_8l": 0.12},
            "block_contrast_null": {"neox_2l": 0.4, "neox_4l": 0.10, "neox_8l": 0.15},
            "pair_block_contrast": {"neox_4l–neox_8l": 0.2, "neox_2l–neox_4l": 0.05},
        },
    }
    assert _blocks(findings) == pytest.approx({"neox_4l": 0.20, "neox_8l": -0.03})  # neox_2l: too few layers
    assert _blocks_alternatives(findings) == pytest.approx(
        {
            "neox_4l less 0.1 (the pilot's)": 0.20,
            "neox_8l less 0.1 (the pilot's)": 0.02,
            "smallest pair of members less 0.1 (the pilot's)": -0.05,
        }
    )
    del findings["scaling"]["block_contrast_null"]  # outputs saved before the null was measured
    assert _blocks(findings) == {"neox_4l": None, "neox_8l": None}
    real = {"cka": {"intra_blocks": {"smollm2": {"contrast": 0.4, "null": 0.25}, "minilm": {"contrast": 0.2}}}}
    assert _blocks(real) == pytest.approx({"minilm": None, "smollm2": 0.15})


def test_keep_k_is_read_at_two_percent_of_v_per_distribution():
    by_k = [
        {"k": 8, "mean_gap_by_distribution": {"normal": 0.3, "ff_values": -0.1}, "n_ahead": 3, "n_cases": 4},
        {"k": 10, "min_gap": -0.2, "mean_gap_by_distribution": {"normal": 0.2}, "n_ahead": 1, "n_cases": 4},
        {"k": 394, "min_gap": 0.0},
    ]
    findings = {"embedding": {"keep_k": {"V": 394, "k_paper": 8, "by_k": by_k}}}
    assert _keep_k(findings) == pytest.approx(
        {"ff_values, k = 8": -0.1, "normal, k = 8": 0.3, "share of cases with Eᵀ ahead less 1/2, k = 8": 0.25}
    )
    assert _keep_k_alternatives(findings) == {"smallest gap, k = 10 (the pilot's)": -0.2}
    # an explicit grid without round(0.02 V): the nearest grid k (SmolLM2: 983 → 1000)
    findings["embedding"]["keep_k"]["k_paper"] = 11
    assert set(_keep_k(findings)) == {"normal, k = 10", "share of cases with Eᵀ ahead less 1/2, k = 10"}


def test_zero_shot_is_read_by_auroc_with_accuracy_secondary():
    cases = [
        {"accuracy": 0.70, "auroc": 0.80, "balanced_accuracy": 0.60},
        {"accuracy": 0.74, "auroc": 0.45, "balanced_accuracy": 0.50},
    ]
    findings = {"embedding": {"zero_shot": {"chance": 0.735, "balanced_chance": 0.5, "cases": cases}}}
    assert _zero_shot(findings) == pytest.approx(
        {
            "mean AUROC over stitches above 0.5": 0.125,
            "share of stitches with AUROC above 0.5, less 1/2": 0.0,
            "mean balanced accuracy above chance": 0.05,
            "mean accuracy above majority": -0.015,
        }
    )
    assert _zero_shot_alternatives(findings) == pytest.approx(
        {
            "mean accuracy over stitches above majority (the pilot's)": -0.015,
            "best stitch above majority (the pilot's)": 0.005,
        }
    )
    for case in cases:  # a table saved before AUROC was measured
        case.pop("auroc")
    assert _zero_shot(findings) == {}


def test_mlem_spearman_is_the_mean_over_trained_layers_and_the_best_layer_its_robustness_row():
    findings = {"mlem": {"spearman_mean_trained": 0.42, "spearman": [0.1, 0.61]}, "literature": {"mlem_spearman": 0.7}}
    assert _spearman(findings) == pytest.approx({"mean over layers": -0.28})
    assert _spearman_alternatives(findings) == pytest.approx({"best layer (the pilot's)": -0.09})


def test_one_runs_scorecard_shows_its_estimates_beside_the_committed_verdicts_labelled_theirs():
    from thinkalike.reports.findings.scorecard import render_run_beside_committed

    run = [
        {"key": "q1", "question": "Q one", "paper": "A 2020", "ours": "x +0.5 [+0.1, +0.9]"},
        {"key": "q2", "question": "Q two", "paper": "B 2021", "ours": "not measured: why"},
    ]
    committed = {
        "git_commit": "0123456789abcdef",
        "scorecard": [
            {
                "key": "q1",
                "verdict_word": "reproduced",
                "primary": ["x"],
                "parts": {"x": {"verdict": "reproduced"}},
                "n_replicates": 8,
            }
        ],
    }
    text = render_run_beside_committed(run, committed)
    lines = text.splitlines()
    assert "the committed replicates' verdict" in lines[0]
    assert lines[2] == "| Q one (A 2020) | x +0.5 [+0.1, +0.9] | **reproduced** (1 of 1 primary parts reproduced) | 8 |"
    assert lines[3] == "| Q two (B 2021) | not measured: why | — (not in docs/findings.json) | — |"
    assert "commit 0123456789ab" in text and "theirs, not this run's" in text
    assert "committed replicates" not in render_run_beside_committed(run[:0], None)  # none committed: the run alone


def test_a_row_whose_n_needed_is_more_than_a_night_of_two_cores_says_so():
    from thinkalike.reports.findings.scorecard import OVERNIGHT_HOURS, beyond_two_cores

    row = {"n_replicates": 8, "parts": {"a": {"n_needed": 100}, "b": {"n_needed": None}, "c": {}}}
    said = beyond_two_cores(row, 600.0)
    assert "about 92 more replicates (n needed up to 100), about 15 h" in said and "--parallel" in said
    affordable = 8 + int(OVERNIGHT_HOURS * 3600 / 600)  # exactly a night's replicates more
    assert beyond_two_cores({**row, "parts": {"a": {"n_needed": affordable}}}, 600.0) == ""
    assert beyond_two_cores(row, None) == ""  # no run time recorded: nothing said


def _stitching_findings() -> dict:
    """One SoLU/GeLU pair at 2 layers, affine_ln only: per cell [l, l], the penalty, its excess over g's floor and the
    intervals [low, high, floor low, floor high]; the same-seed control is left out of every estimand."""

    def direction(penalty, floor, half, floor_half):
        return {
            "layers": [[0, 0], [1, 1], [2, 2]],
            "penalty": penalty,
            "excess": [p - f for p, f in zip(penalty, floor)],
            "intervals": [[p - half, p + half, f - floor_half, f + floor_half] for p, f in zip(penalty, floor)],
        }

    pair = {
        "solu": "s",
        "gelu": "g",
        "depth": 2,
        "kinds": {
            "affine_ln": {
                "s_to_g": direction([0.5, 0.30, 0.20], [-0.04, -0.02, -0.01], 0.02, 0.01),
                "g_to_s": direction([0.4, 0.10, 0.12], [-0.03, -0.03, 0.00], 0.03, 0.01),
            }
        },
    }
    control = {**pair, "same_seed": True, "solu": "s2"}
    stitching = {"ci_level": [0.95, 0.95], "solu_gelu": [pair, control], "self": {"n": 6, "n_negative": 5}}
    return {"stitching": stitching}


def test_the_asymmetry_is_read_after_blocks_over_the_floors_and_raw():
    findings = _stitching_findings()
    # block 1: (0.30 + 0.02) − (0.10 + 0.03); block 2: (0.20 + 0.01) − (0.12 − 0.00); the embeddings' cell left out
    assert _asymmetry(findings) == pytest.approx(
        {
            "affine_ln, 2 layers, block 1": 0.19,
            "affine_ln, 2 layers, block 2": 0.09,
            "affine_ln, mean over cells": 0.14,
            "affine, mean over cells": None,
        }
    )
    raw = _asymmetry_alternatives(findings)["affine_ln: mean over cells, raw penalties (floors not subtracted)"]
    assert raw == pytest.approx(((0.30 - 0.10) + (0.20 - 0.12)) / 2)


def test_the_floor_confound_counts_floors_below_zero_and_what_they_add():
    text = _floor_confound([_stitching_findings(), _stitching_findings()])
    # floor(S) − floor(G) over the post-block cells: ((−0.03 + 0.02) + (0.00 + 0.01)) / 2 = 0
    assert text.startswith("Confound: 5–5 of 6 self-stitch floors per replicate are below 0")
    assert "+0 to +0 nats/token" in text
    assert _floor_confound([{"stitching": {"solu_gelu": []}}]) == ""


def test_one_runs_asymmetry_has_a_conservative_within_run_interval():
    findings = _stitching_findings()
    within = _asymmetry_within_run(findings)
    se = 0.02 / 1.959964 + 0.01 / 1.959964 + 0.03 / 1.959964 + 0.01 / 1.959964  # the four standard errors, summed
    assert within["affine_ln, 2 layers, block 1"] == pytest.approx((0.19 - 1.96 * se, 0.19 + 1.96 * se), rel=1e-4)
    assert within["affine_ln, mean over cells"] == pytest.approx((0.14 - 1.96 * se, 0.14 + 1.96 * se), rel=1e-4)
    # the estimate of one run's scorecard carries it; a run saved before the intervals has none
    (row,) = [row for row in scorecard([findings]) if row["key"] == "brown_solu_gelu"]
    assert row["parts"]["affine_ln, 2 layers, block 1"]["within_run"] == pytest.approx(
        list(within["affine_ln, 2 layers, block 1"])
    )
    assert "within the run" in row["ours"]
    # the stitching pipeline's saved estimates carry the same interval (the section's numbers and the roles alone)
    rows = {r["part"]: r for r in section_estimates("stitching", findings["stitching"], {}, ["stitching"])}
    assert rows["affine_ln, 2 layers, block 1"]["estimate"] == pytest.approx(0.19)
    assert rows["affine_ln, 2 layers, block 1"]["within_run"] == pytest.approx(
        list(within["affine_ln, 2 layers, block 1"])
    )
    assert section_estimates("cka", {}, {}, ["stitching", "cka"]) == []  # no question reads the CKA numbers first
    for direction in findings["stitching"]["solu_gelu"][0]["kinds"]["affine_ln"].values():
        del direction["intervals"]
    assert _asymmetry_within_run(findings) == {}


def test_the_sections_estimates_over_a_run_are_its_estimates():
    """Each committed replicate's findings (zoo, real, real_nli): every part estimated by exactly one of the sections
    the run saved, and together the run's estimates made from all its findings; the blocks row is the scaling
    family's where a run has one, else the CKA section's."""
    import json
    from pathlib import Path

    from thinkalike.reports.findings.scorecard import CONTEXT, run_estimates

    document = json.loads((Path(__file__).resolve().parents[2] / "docs" / "findings.json").read_text(encoding="utf-8"))
    for key in ("replicates", "real_replicates", "real_nli_replicates"):
        findings = document[key][0]["findings"]
        saved = [name for name, value in findings.items() if name not in CONTEXT and isinstance(value, dict)]
        union: dict[str, float] = {}
        for name in saved:
            for row in section_estimates(name, findings[name], findings, saved):
                assert f"{row['question']}/{row['part']}" not in union
                union[f"{row['question']}/{row['part']}"] = row["estimate"]
        assert union == run_estimates(findings), key
        assert union
