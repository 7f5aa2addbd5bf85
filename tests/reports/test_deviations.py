"""The findings page's deviations table (reports/findings/deviations.py): ours read from a replicate's findings."""

from __future__ import annotations

from thinkalike.reports.findings.deviations import PAPERS, deviations_table


def test_ours_is_read_from_the_replicates_findings_and_missing_sections_say_so():
    findings = {
        "roles": {"solu_gelu": [{"solu": "s2", "gelu": "g2", "depth": 2}, {"solu": "s3", "gelu": "g3", "depth": 3}]},
        "zoo": {"steps": {"s2": 300, "g2": 300, "s3": 250, "g3": 300}},
        "stitching": {"kinds": ["identity", "affine"], "steps": [150], "phi_seeds": 2, "n_eval_sequences": [39]},
        "embedding": {"keep_k": {"V": 394, "k_paper": 8, "ks": [8, 10, 394]}, "finetune": {"task": "tense"}},
    }
    lines = deviations_table(findings).splitlines()
    assert len(lines) == 2 + len(PAPERS)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert "4 zoo SoLU and GeLU models of 2–3 layers, trained 250–300 steps" in rows["stitching"]
    assert (
        "φ kinds identity, affine, 150 steps, 2 φ seed(s) a cell, evaluated on 39 held-out sequences"
        in rows["stitching"]
    )
    assert "(V = 394) at k = 8 (2.0 % of V)" in rows["keep-k"]
    assert rows["nli"].endswith("| not run in these replicates |")
    assert rows["mlem"].endswith("| not run in these replicates |")


def test_the_real_nli_copies_are_a_row_of_their_own_with_the_copies_accuracies():
    nli = {
        "n_copies": 10,
        "finetune_steps": [150],
        "encoder_layers": 6,
        "encoder_source": "packaged:minilm",
        "counterexample_fraction": 0.1,
        "test": [0.91, 0.935],
        "ood_non_entailed": [0.02, 0.4],
    }
    lines = deviations_table({}, {"nli": nli}).splitlines()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert rows["nli"].endswith("| not run in these replicates |")
    assert "of one 6-layer pretrained checkpoint (packaged:minilm)" in rows["nli (real column)"]
    assert (
        "in-distribution accuracy 0.910–0.935, their OOD non-entailed accuracy 0.020–0.400" in rows["nli (real column)"]
    )
