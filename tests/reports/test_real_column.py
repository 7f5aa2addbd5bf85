"""The scorecard's real-model column (issue 48): each row answered on the real checkpoints' replicates by the same
rule as the zoo's, rows they cannot ask saying what they need, and the CLI writing the column into docs/findings.json
without touching the default replicates' findings and claims. Also the block structure of a model's own CKA matrix
(:func:`thinkalike.cka.compute.intra_blocks`) that the blocks row reads for them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinkalike.cka.compute import distance_table, intra_blocks
from thinkalike.findings_cli import write_real_column
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.findings import findings_document, render_document
from thinkalike.reports.findings.cka import intra_block_findings
from thinkalike.reports.findings.scorecard import QUESTIONS, render_scorecard, scorecard

OUTLINE = report_outline()  # the project's report sections

ROOT = Path(__file__).resolve().parents[2]


def _long_table(matrix: np.ndarray, model: str = "m") -> pd.DataFrame:
    n = matrix.shape[0]
    return pd.DataFrame(
        [
            {"model_a": model, "model_b": model, "layer_a": i, "layer_b": j, "cka": matrix[i, j], "n_tokens": 100}
            for i in range(n)
            for j in range(n)
        ]
    )


def test_a_models_own_cka_is_cut_into_its_blocks_with_the_contrast_computed_by_hand():
    # two blocks of 3 and 5 layers: 0.9 within, 0.2 between
    n, cut = 8, 3
    matrix = np.full((n, n), 0.2)
    matrix[:cut, :cut] = matrix[cut:, cut:] = 0.9
    np.fill_diagonal(matrix, 1.0)
    found = intra_blocks(_long_table(matrix))
    assert found["blocks"] == "0–2, 3–7"
    # k = 2 at the true cut gives W − B = 0.9 − 0.2; any other split mixes 0.2 cells into W or 0.9 cells into B
    assert found["block_contrast"] == pytest.approx(0.7, abs=1e-12)
    flat = np.full((n, n), 0.5)
    np.fill_diagonal(flat, 1.0)
    assert intra_blocks(_long_table(flat)) == {
        "block_contrast": pytest.approx(0.0, abs=1e-12),
        "block_contrast_null": pytest.approx(0.0, abs=1e-12),  # every order of a flat matrix: no blocks either
        "blocks": "",
    }
    # the distance table carries them for a model with itself only
    other = _long_table(matrix).assign(model_b="n")
    table = distance_table([_long_table(matrix), other])
    assert (
        table.loc[0, "blocks"] == "0–2, 3–7"
        and table.loc[1, "blocks"] == ""
        and np.isnan(table.loc[1, "block_contrast"])
    )
    found = intra_block_findings(table)
    assert found == {
        "m": {"n_layers": 8, "contrast": pytest.approx(0.7), "null": found["m"]["null"], "blocks": "0–2, 3–7"}
    }
    # the layer-order null of planted consecutive blocks: below the contrast, above 0 (a best split's maximum)
    assert 0.0 < found["m"]["null"] < found["m"]["contrast"] - 0.2


def _real_findings(shift: float) -> dict:
    """One real replicate's findings, shaped as collect_findings makes them, for two rows."""
    return {
        "cka": {
            "intra_blocks": {"smollm2": {"n_layers": 31, "contrast": 0.35 + shift, "null": 0.1, "blocks": "0–3, 4–30"}}
        },
        "embedding": {
            "keep_k": {
                "V": 49152,
                "k_paper": 983,
                "by_k": [{"k": 10, "min_gap": -0.4 + shift}, {"k": 50, "min_gap": shift}],
            }
        },
    }


def test_each_row_gets_a_real_column_by_the_same_rule_and_unaskable_rows_say_what_they_need():
    real = [_real_findings(s) for s in (0.0, 0.01, -0.01)]
    for findings, shift in zip(real, (0.0, 0.01, -0.01)):
        findings["embedding"]["keep_k"]["by_k"].append(
            {
                "k": 1000,
                "min_gap": -0.4 + shift,
                "mean_gap_by_distribution": {d: -0.4 + shift for d in ("normal", "ff_values", "residual")},
                "n_ahead": 0,
                "n_cases": 3,
            }
        )
    rows = scorecard([{}, {}, {}], real)
    by_key = {row["key"]: row for row in rows}
    assert len(rows) == len(QUESTIONS) and all("real" in row for row in rows)
    blocks = by_key["brown_blocks"]["real"]
    part = blocks["parts"]["smollm2"]
    assert part["effects"] == pytest.approx([0.35 - 0.1 + s for s in (0.0, 0.01, -0.01)])  # less its null
    assert part["verdict"] == "reproduced" and blocks["n_replicates"] == 3
    assert blocks["parts"]["minilm"]["why"] == "measured in 0 of 3 replicates"
    assert blocks["verdict_word"] == "partly" and blocks["holm"] == ["smollm2"]  # minilm unmeasured: not all
    keep = by_key["dar_keep_k"]["real"]
    assert keep["parts"]["normal, k = 1000"]["verdict"] == "opposite"  # −0.4 ± 0.01: its 95 % interval below 0
    assert keep["parts"]["residual, k = 1000"]["verdict"] == "opposite"
    assert keep["robustness"]["smallest gap, k = 10 (the pilot's)"]["verdict"] == "opposite"
    assert keep["verdict_word"] == "not reproduced"
    nli = by_key["brown_nli_groups"]["real"]
    assert nli["verdict"].startswith("not testable: needs NLI fine-tunes of one encoder")
    assert by_key["mlem_mamba_position"]["real"]["verdict"].startswith("not testable: needs a Mamba model")
    table = render_scorecard(rows)
    assert "Real checkpoints (SmolLM2-135M-Instruct" in table
    assert all(line.count(" | ") == 4 for line in table.split("\n") if line.startswith("| ") and "---" not in line)


def test_without_real_replicates_the_scorecard_has_no_real_column():
    rows = scorecard([{}, {}])
    assert not any("real" in row for row in rows)
    assert "real checkpoints" not in render_scorecard(rows)


def test_the_cli_writes_the_real_column_and_keeps_the_default_replicates(tmp_path):
    source = ROOT / "docs" / "findings.json"
    if not source.is_file():
        pytest.skip("docs/findings.json is not generated yet")
    (tmp_path / "docs").mkdir()
    shutil.copy(source, tmp_path / "docs" / "findings.json")
    shutil.copy(ROOT / "docs" / "findings.md", tmp_path / "docs" / "findings.md")
    before = json.loads(source.read_text(encoding="utf-8"))
    real = [_real_findings(s) for s in (0.0, 0.02)]
    assert write_real_column(real, [None, None], tmp_path, write=True) == 0
    after = json.loads((tmp_path / "docs" / "findings.json").read_text(encoding="utf-8"))
    assert [r["findings"] for r in after["real_replicates"]] == real
    assert "claims" not in after and after["replicates"] == before["replicates"]
    assert [row["verdict"] for row in after["scorecard"]] == [
        row["verdict"]
        for row in findings_document(
            [r["findings"] for r in before["replicates"] if not (r.get("run") or {}).get("roundoff")], OUTLINE
        )["scorecard"]
    ]
    assert all(row["real"]["n_replicates"] == 2 for row in after["scorecard"])
    page = (tmp_path / "docs" / "findings.md").read_text(encoding="utf-8")
    assert render_document(after, OUTLINE) in page and "Real checkpoints (" in page


def _real_nli_findings(offset: float, generalizing_low: float) -> dict:
    """One conf/real_nli replicate's NLI findings: 6 layers, every layer's stitching and CKA gap, the groups' OOD
    non-entailed accuracy ranges (generalizing lowest, heuristic highest 0.1)."""
    stitching = [{"layer": layer, "means": 0.01 * layer + offset} for layer in range(7)]
    cka = [{"layer": depth, "means": 0.01 * depth + offset} for depth in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return {
        "nli": {
            "encoder_layers": 6,
            "encoder_source": "packaged:minilm",
            "n_copies": 10,
            "finetune_steps": [150],
            "test": [0.9, 0.95],
            "ood_non_entailed": [0.05, 0.6],
            "groups": {"generalizing": [generalizing_low, 0.6], "heuristic": [0.05, 0.1], "k": 3},
            "stitching": {"gaps": stitching},
            "cka": {"gaps": cka},
        }
    }


def test_the_real_nli_replicates_answer_the_nli_row_of_the_real_column_at_its_later_layers():
    """conf/real_nli's replicates answer the real column's NLI row (and only that row) with the plan's real parts:
    layers 5 and 6 of 6 and the curves' depths 0.75 and 1.0; a gate the groups fail makes it not testable, with its value."""
    from thinkalike.reports.findings.scorecard import REAL_NLI_COPIES

    differ = [_real_nli_findings(0.001 * i, 0.5) for i in range(3)]
    rows = {row["key"]: row for row in scorecard([{}, {}], None, None, differ)}
    answer = rows["brown_nli_groups"]["real"]
    assert answer["checkpoints"] == REAL_NLI_COPIES
    assert answer["primary"] == [
        "stitching, layer 5 of 6",
        "stitching, layer 6 of 6",
        "CKA, depth 0.75",
        "CKA, depth 1.0",
    ]
    # every planned part is one the findings produce (a label no run makes would stay empty)
    assert all(None not in part["effects"] for part in answer["parts"].values())
    assert answer["parts"]["stitching, layer 6 of 6"]["effects"] == pytest.approx([0.06, 0.061, 0.062])
    assert answer["verdict_word"] == "reproduced" and answer["gates"]["nli_groups_differ"]["verdict"] == "passes"
    assert all("real" not in row for key, row in rows.items() if key != "brown_nli_groups")
    alike = [_real_nli_findings(0.001 * i, 0.12 + 0.01 * i) for i in range(3)]
    answer = {row["key"]: row for row in scorecard([{}, {}], None, None, alike)}["brown_nli_groups"]["real"]
    assert answer["verdict_word"] == "not testable"
    assert answer["gates"]["nli_groups_differ"]["mean"] == pytest.approx(0.03)
    assert "nli_groups_differ" in answer["verdict"]


def test_the_cli_keeps_real_nli_replicates_beside_the_real_ones(tmp_path):
    """write_real_column with the real_nli key stores conf/real_nli's replicates as ``real_nli_replicates`` and leaves
    the default replicates (and any ``real_replicates``) as they were."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("site", "*.png"))
    before = json.loads((tmp_path / "docs" / "findings.json").read_text(encoding="utf-8"))
    found = [_real_nli_findings(0.001 * i, 0.5) for i in range(2)]
    assert write_real_column(found, [None, None], tmp_path, False, "real_nli_replicates") == 0
    after = json.loads((tmp_path / "docs" / "findings.json").read_text(encoding="utf-8"))
    assert [r["findings"] for r in after["real_nli_replicates"]] == found
    assert after["replicates"] == before["replicates"]
    assert after.get("real_replicates") == before.get("real_replicates")
    row = next(r for r in after["scorecard"] if r["key"] == "brown_nli_groups")
    assert row["real"]["n_replicates"] == 2
