"""The MLEM and embedding-space claims (:func:`claims_mlem`, :func:`claims_embedding`): on a default run's findings
(conftest: the fixture file) the claims that hold are pinned, with margins and wording; on planted findings the
margins' signs follow the numbers while the set of ids stays the same; every claim's text fills; and on findings
collected from tables shaped like the default run's (with the keys the claims added to the collection) the claims
that hold are the paragraphs' decisions, made from the same numbers by the rules the prose used."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from tests.reports.claims.conftest import default_run_findings
from thinkalike.reports.findings import model_facts, model_roles, untrained_models
from thinkalike.reports.findings.claims import Claim, fill, merge_claims, render_claims, single_run
from thinkalike.reports.findings.embedding import FRACTION_MARGIN, claims_embedding, collect_embedding
from thinkalike.reports.findings.mlem import FEATURE_LABELS, claims_mlem, collect_mlem
from thinkalike.reports.findings.text import LITERATURE, jsonable, without_models


def _committed() -> dict[str, Any]:
    return default_run_findings()


def _claims(findings: dict[str, Any]) -> list[Claim]:
    return claims_mlem(findings) + claims_embedding(findings)


def _by_id(findings: dict[str, Any]) -> dict[str, Claim]:
    claims = _claims(findings)
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    return {c.id: c for c in claims}


def _holding(findings: dict[str, Any]) -> set[str]:
    return {c.id for c in _claims(findings) if c.holds}


# --------------------------------------------------------------------------- (1) the default run's findings


#: The MLEM and embedding claims that hold on the default run of the fixture file (every one of its claims is decided).
COMMITTED_HOLDING = {
    "mlem.spearman_below_paper",  # below the > 0.7 the paper reports
    "mlem.bridges_rise_after_first_block",
    "mlem.neox_highest_at_embeddings",  # GPT-NeoX highest at the embeddings and lower after
    "mlem.most_layers_on_top.pos",  # part of speech on top at 78 of 79 layers
    "mlem.last_layer_top.mamba_2l.word_role",  # mamba_2l's last layer switches to the word's syntactic role
    "mlem.runner_up.bridges_blocks.word_position",
    "mlem.runner_up.neox_embeddings.word_role",
    "mlem.runner_up.neox_blocks.in_relative_clause",
    "mlem.odd_one_out.feature.mamba_2l.layer2",
    "mlem.odd_one_out.rsa.encoder_2l.layer0",
    "mlem.near_zero.number",
    "mlem.near_zero.tense",
    "mlem.untrained_below_trained.gelu_2l_untrained",
    "embedding.keep_k.level.k10",
    *(f"embedding.keep_k.behind.k{k}" for k in (50, 100, 200, 300)),
    "embedding.keep_k.transpose_peaks_before_end",  # Eᵀ peaks at k = 10–100 and ends at 0.18–0.88 at k = V
    "embedding.alignment.projected_above_raw",  # 54 % vs 19 %: the paper's finding
    "embedding.alignment.projected_above_chance",  # 54 % vs chance 25 %
    "embedding.alignment.raw_below_chance",  # not projected 19 % vs chance 25 %
    "embedding.alignment.most_on_diagonal.FF_value",
    "embedding.finetune.above_majority",
    *(
        f"embedding.finetune.above_random.{cell}"
        for cell in (
            "FF_key.layer2",
            "FF_key.layer3",
            "FF_value.layer3",
            "W_K.layer2",
            "W_K.layer3",
            "W_Q.layer3",
            "W_V.layer2",
            "W_V.layer3",
        )
    ),
    *(
        f"embedding.finetune.not_above_random.{cell}"
        for cell in ("FF_value.layer2", "W_O.layer2", "W_O.layer3", "W_Q.layer2")
    ),
    "embedding.finetune.classifier_level_with_chance",
    "embedding.overlap.above_random.FF_key-FF_value",
    "embedding.overlap.above_random.W_Q-W_K",
    "embedding.zero_shot.at_or_above_majority.gelu_3l.layers3",
    "embedding.zero_shot.at_or_above_majority.gelu_4l_seed2.layers3",
    *(f"embedding.zero_shot.below_majority.gelu_3l.layers{n}" for n in (1, 2)),
    *(f"embedding.zero_shot.below_majority.gelu_4l_seed1.layers{n}" for n in (1, 2, 3, 4)),
    *(f"embedding.zero_shot.below_majority.gelu_4l_seed2.layers{n}" for n in (1, 2, 4)),
}


def test_committed_findings_hold_the_run_statements():
    findings = _committed()
    assert _holding(findings) == COMMITTED_HOLDING
    claims = _by_id(findings)
    assert all(claim.margin is not None for claim in claims.values())
    assert claims["mlem.spearman_below_paper"].margin == pytest.approx(0.7 - 0.585004)
    assert claims["mlem.most_layers_on_top.pos"].margin == 77  # 78 layers against 1
    assert claims["embedding.alignment.most_on_diagonal.FF_value"].margin == pytest.approx(1.0 - 0.833333)
    # the run's numbers appear in the claims' text
    assert "0.24–0.59 over the 18 models" in claims["mlem.spearman_below_paper"].text
    assert "at 78 of 79 layers of the 18 models (0.21–0.41 there)" in claims["mlem.most_layers_on_top.pos"].text
    assert "(0.41; part of speech 0.02)" in claims["mlem.last_layer_top.mamba_2l.word_role"].text
    assert (
        "54 % of layers on the diagonal, not projected 19 %" in claims["embedding.alignment.projected_above_raw"].text
    )
    assert (
        "(0.38) is above that of random rows of the same matrix (0.29)"
        in claims["embedding.finetune.above_random.W_V.layer3"].text
    )


def test_committed_zero_shot_is_not_below_the_majority_every_time():
    """9 of 11 block cases are below the majority rate (0.735), the highest is just above it (0.7375): neither
    "every time" nor "never"."""
    claims = _by_id(_committed())
    assert claims["embedding.zero_shot.blocks_below_majority_every_time"].margin == pytest.approx(0.735 - 0.7375)
    assert not claims["embedding.zero_shot.blocks_below_majority_every_time"].holds
    assert not claims["embedding.zero_shot.blocks_never_below_majority"].holds


# --------------------------------------------------------------------------- (3) every text fills


def test_every_claim_text_fills_on_the_committed_findings():
    claims = _claims(_committed())
    assert len(claims) > 40
    for claim in claims:
        assert "n/a" not in claim.text, (claim.id, claim.text)
        if claim.item:
            assert "n/a" not in fill(claim.item, [claim.values]), (claim.id, claim.item)
    merged = merge_claims([single_run(claims)] * 3)
    for sentence in render_claims(merged):
        assert "n/a" not in sentence


def test_missing_or_errored_sections_give_no_claims():
    findings = _committed()
    assert claims_mlem({**findings, "mlem": {"error": "KeyError: 'x'"}}) == []
    assert claims_mlem({**findings, "mlem": {"missing": ["mlem_profiles"]}}) == []
    assert claims_mlem({**findings, "mlem": {"empty": True}}) == []
    assert claims_mlem({k: v for k, v in findings.items() if k != "mlem"}) == []
    assert claims_embedding({k: v for k, v in findings.items() if k != "embedding"}) == []
    parts = {
        "keep_k": {"missing": ["embedding_keep_k"]},
        "alignment": {"error": "KeyError: 'space'"},
        "finetune": {"empty": True},
        "zero_shot": {"missing": ["embedding_zero_shot"]},
    }
    assert claims_embedding({**findings, "embedding": parts}) == []
    only_alignment = {**parts, "alignment": findings["embedding"]["alignment"]}
    assert {c.id.split(".")[1] for c in claims_embedding({**findings, "embedding": only_alignment})} == {"alignment"}


# --------------------------------------------------------------------------- (2) planted findings


def _planted(findings: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    planted = copy.deepcopy(findings)
    change(planted)
    return planted


def _swap(mapping: dict[str, Any], a: str, b: str) -> None:
    mapping[a], mapping[b] = mapping[b], mapping[a]


def _cell(finetune: dict[str, Any], group: str, layer: int) -> dict[str, Any]:
    return next(c for c in finetune["cells"] if c["group"] == group and c["layer"] == layer)


def _set_group_fraction(alignment: dict[str, Any], group: str, fraction: float) -> None:
    for g in alignment["by_group"]:
        if g["group"] == group:
            g["fraction"] = fraction


PLANTS: dict[str, tuple[Callable[[dict[str, Any]], None], set[str], set[str]]] = {
    # name: (change, ids that must hold after it, ids that must not)
    "spearman reaches the paper": (
        lambda f: f["mlem"].__setitem__("spearman", [0.24, 0.75]),
        {"mlem.spearman_reaches_paper"},
        {"mlem.spearman_below_paper"},
    ),
    "bridges fall": (
        lambda f: _swap(f["mlem"]["spearman_groups"], "bridges_embeddings", "bridges_first_block"),
        {"mlem.bridges_fall_after_first_block"},
        {"mlem.bridges_rise_after_first_block"},
    ),
    "GPT-NeoX highest after its embeddings": (
        lambda f: _swap(f["mlem"]["spearman_groups"], "neox_embeddings", "neox_blocks"),
        {"mlem.neox_highest_after_embeddings"},
        {"mlem.neox_highest_at_embeddings"},
    ),
    "GPT-NeoX neither": (
        lambda f: f["mlem"]["spearman_groups"].update(neox_embeddings=[0.30, 0.50], neox_blocks=[0.35, 0.45]),
        set(),
        {"mlem.neox_highest_after_embeddings", "mlem.neox_highest_at_embeddings"},
    ),
    "number explains something": (
        lambda f: f["mlem"]["minor"].__setitem__("number", [-0.02, 0.09]),
        {"mlem.beyond_near_zero.number", "mlem.near_zero.tense"},
        {"mlem.near_zero.number"},
    ),
    "untrained control above": (
        lambda f: f["mlem"]["untrained"][0].__setitem__("spearman", [0.61, 0.65]),
        {"mlem.untrained_above_trained.gelu_2l_untrained"},
        {"mlem.untrained_below_trained.gelu_2l_untrained"},
    ),
    "mamba keeps part of speech": (
        lambda f: f["mlem"]["mamba"][0]["importances"].update(word_role=0.5, pos=0.6),
        {"mlem.last_layer_top.mamba_2l.pos"},
        {"mlem.last_layer_top.mamba_2l.word_role"},
    ),
    "projection does not help": (
        lambda f: _swap(f["embedding"]["alignment"]["by_space"], "projected", "raw"),
        {
            "embedding.alignment.raw_above_projected",
            "embedding.alignment.projected_below_chance",
            "embedding.alignment.raw_above_chance",
        },
        {"embedding.alignment.projected_above_raw", "embedding.alignment.projected_above_chance"},
    ),
    "W_Q most on the diagonal": (
        lambda f: (
            _set_group_fraction(f["embedding"]["alignment"], "W_Q", 1.0)
            or _set_group_fraction(f["embedding"]["alignment"], "FF_value", 0.166667)
        ),
        {"embedding.alignment.most_on_diagonal.W_Q"},
        {"embedding.alignment.most_on_diagonal.FF_value"},
    ),
    "fine-tuning below the majority": (
        lambda f: f["embedding"]["finetune"].update(accuracy=0.7),
        {"embedding.finetune.at_or_below_majority"},
        {"embedding.finetune.above_majority"},
    ),
    "W_V's ΔW rows level with random": (
        lambda f: _cell(f["embedding"]["finetune"], "W_V", 3).update(finetune=0.30),
        {"embedding.finetune.not_above_random.W_V.layer3"},
        {"embedding.finetune.above_random.W_V.layer3"},
    ),
    "classifier rows above chance": (
        lambda f: f["embedding"]["finetune"]["classifier"].update(fraction=0.4),
        {"embedding.finetune.classifier_above_chance"},
        {"embedding.finetune.classifier_level_with_chance", "embedding.finetune.classifier_below_chance"},
    ),
    "classifier rows below chance": (
        lambda f: f["embedding"]["finetune"]["classifier"].update(fraction=0.05),
        {"embedding.finetune.classifier_below_chance"},
        {"embedding.finetune.classifier_level_with_chance"},
    ),
    "zero-shot below the majority every time": (
        lambda f: f["embedding"]["zero_shot"].update(blocks=[0.32, 0.70], blocks_below_chance=11),
        {"embedding.zero_shot.blocks_below_majority_every_time"},
        {"embedding.zero_shot.blocks_never_below_majority"},
    ),
    "zero-shot never below the majority": (
        lambda f: f["embedding"]["zero_shot"].update(blocks=[0.74, 0.80], blocks_below_chance=0),
        {"embedding.zero_shot.blocks_never_below_majority"},
        {"embedding.zero_shot.blocks_below_majority_every_time"},
    ),
    "E^T peaks at the largest k": (
        lambda f: f["embedding"]["keep_k"].update(transpose_peak_k=[10.0, 394.0], transpose_end_gap=-0.02),
        {"embedding.keep_k.transpose_highest_at_end"},
        {"embedding.keep_k.transpose_peaks_before_end"},
    ),
}


@pytest.mark.parametrize("name", list(PLANTS))
def test_planted_committed_findings(name: str):
    findings = _committed()
    change, holding, not_holding = PLANTS[name]
    planted = _planted(findings, change)
    assert set(_by_id(planted)) == set(_by_id(findings)), "the set of ids must not depend on the numbers"
    now = _holding(planted)
    assert holding <= now, holding - now
    assert not (not_holding & now), not_holding & now
    for claim in _claims(planted):
        assert "n/a" not in claim.text, (claim.id, claim.text)


def test_pairs_of_directions_have_opposite_margins():
    findings = _committed()
    claims = _by_id(findings)
    for a, b in [
        ("mlem.spearman_below_paper", "mlem.spearman_reaches_paper"),
        ("mlem.bridges_rise_after_first_block", "mlem.bridges_fall_after_first_block"),
        ("mlem.near_zero.number", "mlem.beyond_near_zero.number"),
        ("embedding.alignment.projected_above_raw", "embedding.alignment.raw_above_projected"),
        ("embedding.alignment.raw_above_chance", "embedding.alignment.raw_below_chance"),
        ("embedding.finetune.above_random.W_K.layer2", "embedding.finetune.not_above_random.W_K.layer2"),
    ]:
        assert claims[a].margin == pytest.approx(-claims[b].margin), (a, b)
    for a, b in [("embedding.finetune.above_majority", "embedding.finetune.at_or_below_majority")]:
        assert not (claims[a].holds and claims[b].holds)


def test_dominant_feature_swapped_in_committed_findings():
    """Word position on top at most layers: the count claims follow, their ids do not change."""
    findings = _committed()

    def change(f: dict[str, Any]) -> None:
        f["mlem"]["dominant"] = "word_position"
        f["mlem"]["top_counts"].update(word_position=70, pos=9, word_role=0)
        f["mlem"]["top_spans"].update(word_position=[0.2, 0.3])

    planted = _planted(findings, change)
    assert set(_by_id(planted)) == set(_by_id(findings))
    now = _holding(planted)
    assert "mlem.most_layers_on_top.word_position" in now and "mlem.most_layers_on_top.pos" not in now
    assert _by_id(planted)["mlem.most_layers_on_top.word_position"].margin == 70 - 9


# --------------------------------------------------------------------------- collected findings (the claims' keys)


def _collected(change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    from tests.reports.test_findings import default_shaped_tables

    tables = default_shaped_tables()
    if change is not None:
        change(tables)
    roles = model_roles(model_facts(tables))
    untrained = untrained_models(tables.get("parameters") or {})
    findings = {
        "literature": LITERATURE,
        "mlem": collect_mlem(tables, roles, untrained),
        "embedding": collect_embedding(without_models(tables, untrained), roles),
    }
    return json.loads(json.dumps(jsonable(findings), allow_nan=False))


@pytest.fixture(scope="module")
def collected() -> dict[str, Any]:
    return _collected()


def test_collected_findings_have_the_claims_keys(collected: dict[str, Any]):
    mlem, emb = collected["mlem"], collected["embedding"]
    assert set(mlem["top_counts"]) == set(FEATURE_LABELS) and sum(mlem["top_counts"].values()) == mlem["n_layers"]
    assert set(mlem["group_importance"]) >= {"bridges_blocks", "neox_embeddings", "neox_blocks"}
    assert all("importances" in m for m in mlem["mamba"])
    assert all(o["layers"] for o in mlem["odd_one_out"].values())
    assert [e["k"] for e in emb["keep_k"]["by_k"]] == emb["keep_k"]["ks"]
    assert len(emb["finetune"]["cells"]) == emb["finetune"]["n_cells"]
    assert len(emb["zero_shot"]["cases"]) == emb["zero_shot"]["n_blocks"] and emb["zero_shot"]["n_sentences"] == 400
    for claim in _claims(collected):
        assert claim.margin is not None or claim.id.startswith("mlem.on_top_at_every_layer"), claim.id
        assert "n/a" not in claim.text, (claim.id, claim.text)


def _decisions_agree(findings: dict[str, Any]) -> None:
    """The claims that hold are what the MLEM and embedding paragraphs decided from the same numbers, by the rules
    their prose used (the spans' ends and sums, the collected counts)."""
    holding = _holding(findings)
    mlem, emb = findings["mlem"], findings["embedding"]
    paper = findings["literature"]["mlem_spearman"]
    assert ("mlem.spearman_below_paper" in holding) == (mlem["spearman"][1] < paper)
    assert ("mlem.spearman_reaches_paper" in holding) == (mlem["spearman"][1] > paper)
    groups = mlem["spearman_groups"]
    low, high = groups["bridges_embeddings"], groups["bridges_first_block"]
    assert ("mlem.bridges_rise_after_first_block" in holding) == (sum(high) > sum(low))
    assert ("mlem.bridges_fall_after_first_block" in holding) == (sum(high) < sum(low))
    emb_spearman, blocks = groups["neox_embeddings"], groups["neox_blocks"]
    assert ("mlem.neox_highest_at_embeddings" in holding) == (
        emb_spearman[0] > blocks[1] or (sum(emb_spearman) > sum(blocks) and emb_spearman[1] > blocks[1])
    )
    dominant = mlem["dominant"]
    assert {c for c in holding if c.startswith("mlem.most_layers_on_top.")} == {f"mlem.most_layers_on_top.{dominant}"}
    assert (f"mlem.on_top_at_every_layer.{dominant}" in holding) == (mlem["dominant_top"] == mlem["n_layers"])
    for group, runner in mlem["runner_up"].items():
        held = {c.split(".")[-1] for c in holding if c.startswith(f"mlem.runner_up.{group}.")}
        assert held == ({runner["feature"]} if runner else set()), group
    for m in mlem["mamba"]:
        assert f"mlem.last_layer_top.{m['model']}.{m['top']}" in holding
    for method, odd in mlem["odd_one_out"].items():
        assert f"mlem.odd_one_out.{method}.{odd['model']}.layer{odd['layer']}" in holding
    keep = emb["keep_k"]
    # no keep-k claim at k = V: keeping every entry makes E⁺ exact there, true by construction
    below_vocabulary = {k for k in keep["ks"] if k < keep["V"]}
    assert below_vocabulary and max(keep["ks"]) == keep["V"]  # the tables do run k = V
    keep_ids = {
        c.id for c in _claims(findings) if c.id.startswith(("embedding.keep_k.level.", "embedding.keep_k.behind."))
    }
    assert keep_ids == {f"embedding.keep_k.{side}.k{k}" for side in ("level", "behind") for k in below_vocabulary}
    assert {int(c.rsplit(".k", 1)[1]) for c in holding if c.startswith("embedding.keep_k.level.")} == set(
        keep["level_ks"]
    ) & below_vocabulary
    assert {
        int(c.rsplit(".k", 1)[1]) for c in holding if c.startswith("embedding.keep_k.behind.")
    } == below_vocabulary - set(keep["level_ks"])
    # key-value overlap (Dar et al. fig. 6): one claim per pair kind when its table was collected, none without it
    overlap = emb.get("overlap") or {}
    overlap_ids = {c.id for c in _claims(findings) if c.id.startswith("embedding.overlap.")}
    difference = overlap.get("difference") or {}
    assert overlap_ids == {f"embedding.overlap.above_random.{pair}" for pair in difference}
    assert {c for c in holding if c.startswith("embedding.overlap.")} == {
        f"embedding.overlap.above_random.{pair}" for pair, d in difference.items() if d > 0
    }
    by_space = emb["alignment"]["by_space"]
    assert ("embedding.alignment.projected_above_raw" in holding) == (by_space["projected"] > by_space["raw"])
    assert ("embedding.alignment.raw_above_projected" in holding) == (by_space["projected"] < by_space["raw"])
    best = emb["alignment"]["by_group"][0]["group"]
    if emb["alignment"]["by_group"][0]["fraction"] > emb["alignment"]["by_group"][1]["fraction"]:
        assert f"embedding.alignment.most_on_diagonal.{best}" in holding
    above = {f"embedding.finetune.above_random.{c['group']}.layer{c['layer']}" for c in emb["finetune"]["above"]}
    assert {c for c in holding if c.startswith("embedding.finetune.above_random.")} == above
    assert len([c for c in holding if c.startswith("embedding.finetune.not_above_random.")]) == emb["finetune"][
        "n_cells"
    ] - len(above)
    zero = emb["zero_shot"]
    assert (
        len([c for c in holding if c.startswith("embedding.zero_shot.below_majority.")]) == zero["blocks_below_chance"]
    )
    assert ("embedding.zero_shot.blocks_below_majority_every_time" in holding) == (
        zero["blocks_below_chance"] == zero["n_blocks"]
    )
    assert ("embedding.zero_shot.blocks_never_below_majority" in holding) == (zero["blocks_below_chance"] == 0)


def test_collected_claims_are_the_paragraphs_decisions(collected: dict[str, Any]):
    _decisions_agree(collected)
    # the default-shaped tables' answers, so the rules above are checked on a known outcome
    holding = _holding(collected)
    assert {
        "mlem.spearman_below_paper",
        "mlem.bridges_rise_after_first_block",
        "mlem.neox_highest_at_embeddings",
        "mlem.most_layers_on_top.pos",
        "embedding.alignment.projected_above_raw",
        "embedding.zero_shot.blocks_below_majority_every_time",
    } <= holding
    assert "mlem.on_top_at_every_layer.pos" not in holding  # on top at 78 of 79 layers
    # the default-shaped tables run k = V (394) but have no key-value overlap table
    assert "embedding.keep_k.level.k394" not in _by_id(collected) and "embedding.keep_k.behind.k394" not in _by_id(
        collected
    )
    assert "embedding.keep_k.behind.k300" in holding
    assert collected["embedding"]["overlap"] == {"missing": ["embedding_key_value_overlap"]}
    assert not any(c.startswith("embedding.overlap.") for c in _by_id(collected))


def _plant_tables(tables: dict[str, Any]) -> None:
    """Word position on top everywhere, projection not helping, zero-shot at or above the majority rate, E^T
    behind E^+ at every k but the largest."""
    profiles = tables["mlem_profiles"]
    profiles.loc[profiles["feature"] == "word_position", "importance"] = 0.5
    profiles.loc[profiles["feature"] == "in_relative_clause", "importance"] = 0.31
    alignment = tables["embedding_alignment"]
    alignment["diagonal_fraction"] = alignment["diagonal_fraction"].where(alignment["space"] == "raw", 0.2)
    zero = tables["embedding_zero_shot"]
    zero.loc[zero["layers_from_b"] >= 1, "accuracy"] = 0.8
    keep = tables["embedding_keep_k"]
    transpose = keep["e_prime"] == "transpose"
    keep.loc[transpose, "score"] = 0.1 + keep.loc[transpose, "k"] / 1000


def test_planted_tables_move_the_claims_not_their_ids(collected: dict[str, Any]):
    planted = _collected(_plant_tables)
    assert set(_by_id(planted)) == set(_by_id(collected))
    before, now = _holding(collected), _holding(planted)
    assert "mlem.most_layers_on_top.pos" in before and "mlem.most_layers_on_top.word_position" in now
    assert "mlem.on_top_at_every_layer.word_position" in now
    assert "mlem.runner_up.neox_blocks.in_relative_clause" in now  # second to word position, above pos's 0.3
    assert "mlem.last_layer_top.mamba_2l.word_position" in now
    assert "embedding.alignment.raw_above_projected" in now and "embedding.alignment.projected_above_raw" in before
    assert "embedding.zero_shot.blocks_never_below_majority" in now
    assert not any(c.startswith("embedding.zero_shot.below_majority.") for c in now)
    assert "embedding.keep_k.transpose_highest_at_end" in now
    assert "embedding.keep_k.transpose_peaks_before_end" in before
    _decisions_agree(planted)


def _overlap_table(differences: dict[str, list[float]]) -> pd.DataFrame:
    """A key-value overlap table (:mod:`thinkalike.embedding.overlap`'s columns): per pair kind, one row per model
    and layer with the planted matched − random difference over a random mean of 0.1."""
    rows = []
    for pair, values in differences.items():
        for index, difference in enumerate(values):
            matched, random = 0.1 + difference, 0.1
            rows.append(
                {
                    "model": ("gelu_2l", "solu_2l")[index % 2],
                    "layer": index // 2,
                    "pair": pair,
                    "k": 20,
                    "n_pairs": 64,
                    "n_random": 4,
                    "matched_mean": matched,
                    "random_mean": random,
                    "random_sd": 0.01,
                    "difference": difference,
                    "ratio": matched / random,
                }
            )
    return pd.DataFrame(rows)


OVERLAP = {
    "FF_key-FF_value": [0.05, 0.07, 0.02, 0.06],  # above random in every model layer
    "W_V-W_O": [-0.01, -0.03, -0.02, -0.02],  # below in every one
    "W_Q-W_K": [0.04, -0.01, 0.03, -0.02],  # above on average, not everywhere
}


def test_overlap_claims_follow_the_table():
    planted = _collected(lambda tables: tables.__setitem__("embedding_key_value_overlap", _overlap_table(OVERLAP)))
    claims = _by_id(planted)
    ids = {f"embedding.overlap.above_random.{pair}" for pair in OVERLAP}
    assert {c for c in claims if c.startswith("embedding.overlap.")} == ids
    for pair, differences in OVERLAP.items():
        claim = claims[f"embedding.overlap.above_random.{pair}"]
        assert claim.margin == pytest.approx(sum(differences) / len(differences)), pair
        assert claim.holds == (pair != "W_V-W_O"), pair
        above = sum(d > 0 for d in differences)
        assert "top-20 Jaccard" in claim.text and f"higher in {above} of 4 model layers" in claim.text, claim.text
        assert "n/a" not in claim.text, claim.text
    assert claims["embedding.overlap.above_random.FF_key-FF_value"].text == (
        "`FF_key` and `FF_value` vectors read in the vocabulary overlap more than random pairings (Dar et al. fig. 6): "
        "top-20 Jaccard 0.150 against 0.100, higher in 4 of 4 model layers"
    )
    _decisions_agree(planted)
    # reversed, the same ids and the opposite decisions
    reversed_ = {pair: [-d for d in values] for pair, values in OVERLAP.items()}
    flipped = _collected(lambda tables: tables.__setitem__("embedding_key_value_overlap", _overlap_table(reversed_)))
    assert set(_by_id(flipped)) == set(claims)
    assert {c for c in _holding(flipped) if c.startswith("embedding.overlap.")} == {
        "embedding.overlap.above_random.W_V-W_O"
    }
    _decisions_agree(flipped)


def test_zero_shot_at_the_majority_rate_is_at_or_above():
    """A stitched model that answers the majority class scores exactly the majority rate: not below it."""

    def change(tables: dict[str, Any]) -> None:
        zero = tables["embedding_zero_shot"]
        zero.loc[zero["layers_from_b"] >= 1, "accuracy"] = zero["chance"]

    claims = _by_id(_collected(change))
    cases = [c for c in claims if c.startswith("embedding.zero_shot.at_or_above_majority.")]
    assert cases and all(claims[c].holds for c in cases)
    assert not any(claims[c.replace("at_or_above", "below")].holds for c in cases)
    assert claims["embedding.zero_shot.blocks_never_below_majority"].holds


def test_fraction_margin_is_the_cells_threshold(collected: dict[str, Any]):
    claims = _by_id(collected)
    for cell in collected["embedding"]["finetune"]["cells"]:
        claim = claims[f"embedding.finetune.above_random.{cell['group']}.layer{cell['layer']}"]
        assert claim.margin == pytest.approx(cell["finetune"] - cell["random"] - FRACTION_MARGIN)
