"""The stitching paragraph's claims (claims_stitching): on a default run's findings (conftest: the fixture file) the
claims that hold are exactly the statements its stitching prose makes on that run; on planted findings the
margins' signs follow the numbers and the set of ids does not depend on which way they come out."""

from __future__ import annotations

import copy
from typing import Any

import pandas as pd
import pytest

from tests.reports.claims.conftest import default_run_findings
from thinkalike.reports.findings.claims import HOLDS, UNRESOLVED, Claim, merge_claims, render_claims, single_run
from thinkalike.reports.findings.stitching import claims_stitching, collect_stitching

#: The stitching claims that hold on the default run of the fixture file, as its stitching prose states them: the
#: asymmetry at every layer, with both φ kinds and at both depths; the same-seed control keeping it, smaller; each
#: direction against its floor; the self-stitching floors; identity stitching.
HOLDING_ON_COMMITTED = {
    "stitching.asymmetry.every_cell",
    "stitching.control_asymmetry.every_cell",
    "stitching.control_asymmetry.smaller",
    *(
        f"stitching.asymmetry.{kind}.{pair}"
        for kind in ("affine", "affine_ln")
        for pair in ("solu_2l.gelu_2l", "solu_3l.gelu_3l", "solu_2l_shared_seed.gelu_2l")
    ),
    "stitching.floor.between.affine.solu_to_gelu.above_every",
    "stitching.floor.between.affine.gelu_to_solu.above_partly",
    "stitching.floor.between.affine_ln.solu_to_gelu.above_every",
    "stitching.floor.between.affine_ln.gelu_to_solu.below_partly",
    "stitching.floor.control.affine.solu_to_gelu.above_every",
    "stitching.floor.control.affine.gelu_to_solu.below_partly",
    "stitching.floor.control.affine_ln.solu_to_gelu.above_every",
    "stitching.floor.control.affine_ln.gelu_to_solu.below_partly",
    "stitching.self_floor.mostly_below_zero",
    "stitching.self_floor.lowest_at_embeddings",
    "stitching.self_floor.gain_at_embeddings",
    "stitching.identity.control_below_between",
}


def _committed() -> dict[str, Any]:
    return default_run_findings()


def _by_id(claims: list[Claim]) -> dict[str, Claim]:
    found = {c.id: c for c in claims}
    assert len(found) == len(claims), "claim ids are not unique"
    return found


def _holding(claims: list[Claim]) -> set[str]:
    return {c.id for c in claims if c.holds}


# --------------------------------------------------------------------------- (1), (3): the committed run


def test_committed_run_holds_exactly_what_the_prose_states():
    findings = _committed()
    claims = claims_stitching(findings)
    by_id = _by_id(claims)
    assert _holding(claims) == HOLDING_ON_COMMITTED
    # the direction of each binary comparison
    assert by_id["stitching.asymmetry.every_cell"].margin > 0 > by_id["stitching.asymmetry.no_cell"].margin
    assert by_id["stitching.asymmetry.some_cells"].margin < 0
    assert by_id["stitching.control_asymmetry.smaller"].margin > 0 > by_id["stitching.control_asymmetry.larger"].margin
    assert by_id["stitching.identity.control_below_between"].margin == pytest.approx(3.182661 - 0.222907)
    assert by_id["stitching.self_floor.mostly_below_zero"].margin == pytest.approx(33 / 34 - 0.5)
    assert by_id["stitching.self_floor.gain_at_embeddings"].margin == pytest.approx(0.013237)
    # worded as the prose the claims replace
    assert (
        "at every layer, with both φ kinds and at both depths — the asymmetry Brown et al. report"
        in by_id["stitching.asymmetry.every_cell"].text
    )
    assert by_id["stitching.control_asymmetry.every_cell"].text.startswith(
        "The same-seed control (`solu_2l_shared_seed` and `gelu_2l`) keeps the asymmetry over the floors at every layer"
    )
    assert (
        "The same-seed control's asymmetry over the floors is smaller"
        in by_id["stitching.control_asymmetry.smaller"].text
    )
    assert "measures mostly their initialisation" in by_id["stitching.identity.control_below_between"].text


def test_committed_texts_fill_without_gaps():
    claims = claims_stitching(_committed())
    assert claims
    for claim in claims:
        assert "n/a" not in claim.text, claim.id
        assert "{" not in claim.text and "}" not in claim.text, claim.id
        if claim.item is not None:
            assert "n/a" not in Claim(claim.id, claim.item, claim.margin, claim.values).text, claim.id
    texts = {c.id: c.text for c in claims}
    assert texts["stitching.floor.between.affine.gelu_to_solu.above_partly"] == (
        "Between SoLU and GeLU with different seeds, affine φ stitching GeLU→SoLU costs −0.023 to +0.228 nats/token "
        "(−0.020 to +0.253 relative to SoLU's floor), its interval above SoLU's floor at 3 of 7 layers"
    )
    assert texts["stitching.identity.control_below_between"].startswith(
        "Identity stitching costs exactly 0 for a model with itself and 3.18–5.78 nats/token between SoLU and GeLU "
        "with different seeds, 0.04–0.22 for the same-seed control"
    )


def test_replicates_merge_into_ranges():
    findings = _committed()
    other = copy.deepcopy(findings)
    other["stitching"]["identity_between"] = [3.0, 5.9]
    runs = [single_run(claims_stitching(findings)), single_run(claims_stitching(other))]
    merged_list = merge_claims(runs)
    merged = {c["id"]: c for c in merged_list}
    identity = merged["stitching.identity.control_below_between"]
    assert identity["status"] == HOLDS and "3.00–5.90 nats/token" in identity["text"]
    margins = [3.182661 - 0.222907, 3.0 - 0.222907]
    assert identity["margin"] == pytest.approx(margins)
    assert identity["noise"] == pytest.approx(abs(margins[0] - margins[1]) / 2**0.5)  # two replicates' sample SD
    # its negation (the same margin, negated, in both replicates) is merged into it, not stated on its own
    assert identity["negation"] == "stitching.identity.control_not_below_between"
    assert "stitching.identity.control_not_below_between" not in merged
    # only the identity margin moved between the replicates: the other statements hold in both with the same margin,
    # which carries no size — unresolved, not findings
    assert {c["id"] for c in merged.values() if c["status"] == HOLDS} == {"stitching.identity.control_below_between"}
    unresolved = {c["id"] for c in merged.values() if c["status"] == UNRESOLVED}
    assert unresolved == HOLDING_ON_COMMITTED - {"stitching.identity.control_below_between"}
    assert all("same margin" in merged[i]["why"] and merged[i]["noise"] == 0 for i in unresolved)
    assert all("n/a" not in c["text"] for c in merged.values())
    sentences = render_claims(merged_list, "replicates")
    named = next(t for t in sentences if t.startswith("Unresolved — "))
    assert all(f"`{i.split('.', 1)[1]}`" in named for i in unresolved)
    assert "identity.control_below_between" not in named
    assert any(t.startswith("Identity stitching costs exactly 0") for t in sentences)
    # a replicate where between-pair identity stitching barely clears the control: > 0 in both, but the smaller
    # margin is within 2 × the spread, so it is no longer a finding
    close = copy.deepcopy(findings)
    close["stitching"]["identity_between"] = [0.3, 5.9]
    noisy = merge_claims([runs[0], single_run(claims_stitching(close))])
    entry = next(c for c in noisy if c["id"] == "stitching.identity.control_below_between")
    assert min(entry["margin"]) > 0
    assert entry["status"] == UNRESOLVED and "within 2 × its spread" in entry["why"]


# --------------------------------------------------------------------------- (2): planted findings


def _swap_directions(findings: dict[str, Any]) -> dict[str, Any]:
    """Every pair's SoLU→GeLU and GeLU→SoLU exchanged (same layers: the grid is diagonal), so every asymmetry and
    every direction's floor relation changes sides."""
    flipped = copy.deepcopy(findings)
    for population in ("solu_gelu", "control"):
        for pair in flipped["stitching"][population]:
            for entry in pair["kinds"].values():
                entry["s_to_g"], entry["g_to_s"] = entry["g_to_s"], entry["s_to_g"]
                entry["asymmetric"], entry["reversed"] = entry["reversed"], entry["asymmetric"]
                if entry["mean_asymmetry"] is not None:
                    entry["mean_asymmetry"] = -entry["mean_asymmetry"]
    return flipped


def test_swapped_directions_reverse_the_asymmetry_with_the_same_ids():
    findings = _committed()
    before, after = claims_stitching(findings), claims_stitching(_swap_directions(findings))
    assert [c.id for c in before] == [c.id for c in after]
    held = _holding(after)
    assert "stitching.asymmetry.no_cell" in held and "stitching.asymmetry.every_cell" not in held
    assert "stitching.control_asymmetry.no_cell" in held
    for kind in ("affine", "affine_ln"):
        for pair in ("solu_2l.gelu_2l", "solu_3l.gelu_3l", "solu_2l_shared_seed.gelu_2l"):
            assert f"stitching.asymmetry_reversed.{kind}.{pair}" in held
            assert f"stitching.asymmetry.{kind}.{pair}" not in held
    # the floor relations follow their directions
    assert "stitching.floor.between.affine.gelu_to_solu.above_every" in held
    assert "stitching.floor.between.affine.solu_to_gelu.above_partly" in held
    assert "stitching.floor.control.affine_ln.solu_to_gelu.below_partly" in held
    margins = {c.id: c.margin for c in before}
    for claim in after:
        if claim.id.startswith("stitching.asymmetry.") and claim.id.count(".") > 2:
            reversed_id = claim.id.replace("stitching.asymmetry.", "stitching.asymmetry_reversed.")
            assert claim.margin == pytest.approx(margins[reversed_id])


def test_a_partial_asymmetry_is_some_cells():
    findings = copy.deepcopy(_committed())
    entry = findings["stitching"]["solu_gelu"][0]["kinds"]["affine"]  # solu_2l / gelu_2l
    entry["g_to_s"]["excess"][1] = entry["s_to_g"]["excess"][1] + 0.05  # GeLU→SoLU over its floor costs more at 1
    claims = claims_stitching(findings)
    by_id = _by_id(claims)
    assert by_id["stitching.asymmetry.some_cells"].margin == pytest.approx(0.05)  # min(0.147 at most, −(−0.05))
    assert by_id["stitching.asymmetry.every_cell"].margin == pytest.approx(-0.05)
    assert by_id["stitching.asymmetry.no_cell"].margin < 0
    assert by_id["stitching.asymmetry.some_cells"].text.startswith(
        "Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU at 13 of 14 layer "
        "cells (φ kinds × depths × layers) and less at 1"
    )
    assert not by_id["stitching.asymmetry.affine.solu_2l.gelu_2l"].holds
    assert not by_id["stitching.asymmetry_reversed.affine.solu_2l.gelu_2l"].holds
    assert {c.id for c in claims} == {c.id for c in claims_stitching(_committed())}


def test_a_larger_control_asymmetry_and_identity_overlap_and_positive_floors():
    findings = copy.deepcopy(_committed())
    st = findings["stitching"]
    for entry in st["control"][0]["kinds"].values():
        entry["mean_asymmetry"] = 0.2
    st["identity_control"] = [0.05, 3.5]
    st["self"]["n_negative"] = 10
    for kind in st["self"]["trained"].values():
        kind["layer0"] = [-0.01, 0.004]
        kind["by_layer"] = [[0, -0.01], [1, -0.02], [2, -0.015]]  # lowest past the embeddings
    claims = claims_stitching(findings)
    held = _holding(claims)
    assert {
        "stitching.control_asymmetry.larger",
        "stitching.identity.control_not_below_between",
        "stitching.self_floor.mostly_not_below_zero",
        "stitching.self_floor.lowest_past_embeddings",
        "stitching.self_floor.no_gain_at_embeddings",
    } <= held
    assert not held & {
        "stitching.control_asymmetry.smaller",
        "stitching.identity.control_below_between",
        "stitching.self_floor.mostly_below_zero",
        "stitching.self_floor.lowest_at_embeddings",
        "stitching.self_floor.gain_at_embeddings",
    }
    by_id = _by_id(claims)
    assert by_id["stitching.identity.control_not_below_between"].margin == pytest.approx(3.5 - 3.182661)
    assert by_id["stitching.control_asymmetry.larger"].margin == pytest.approx(0.2 - (0.058963 + 0.075628) / 2)
    assert by_id["stitching.self_floor.lowest_past_embeddings"].margin == pytest.approx(0.01)
    assert {c.id for c in claims} == {c.id for c in claims_stitching(_committed())}


@pytest.mark.parametrize("section", [{"missing": ["stitching_penalties"]}, {"error": "KeyError: 'x'"}, {"empty": True}])
def test_a_section_not_run_has_no_claims(section):
    assert claims_stitching({"stitching": section}) == []
    assert claims_stitching({}) == []


# --------------------------------------------------------------------------- planted tables through collect_stitching


SOLU, GELU, SHARED = "solu_2l", "gelu_2l", "solu_2l_shared_seed"
ROLES = {
    "solu_gelu": [{"solu": SOLU, "gelu": GELU, "depth": 2, "same_seed": False}],
    "control": [{"solu": SHARED, "gelu": GELU, "depth": 2, "same_seed": True}],
}


def _tables(penalty: dict[tuple[str, str], list[float]], half: float = 0.01) -> dict[str, Any]:
    """A diagonal penalty table (layers 0–2) of the pairs in ``penalty`` (trained kinds: the listed penalties,
    affine + LayerNorm 0.005 lower; identity: 1.0 between models, 0 for a model with itself)."""
    rows = []
    for (f, g), values in penalty.items():
        for layer, value in enumerate(values):
            for kind, p in (
                ("affine", value),
                ("affine_ln", value - 0.005),
                ("identity", 0.0 if f == g else 1.0 + 0.1 * layer + 0.5 * (f == SHARED or g == SHARED)),
            ):
                h = 0.0 if kind == "identity" and f == g else half
                rows.append(
                    {
                        "model_f": f,
                        "layer_f": layer,
                        "model_g": g,
                        "layer_g": layer,
                        "stitch": kind,
                        "penalty": p,
                        "ci_low": p - h,
                        "ci_high": p + h,
                        "steps": 150,
                        "tokens_per_step": 1024,
                        "train_tokens": 74688,
                        "eval_tokens": 2496,
                        "ci_level": 0.95,
                        "train_source": "train_sequences",
                    }
                )
    return {"stitching_penalties": pd.DataFrame(rows)}


def _planted(s_to_g: list[float], g_to_s: list[float], control_s_to_g: list[float]) -> dict[str, Any]:
    floors = [-0.03, -0.01, -0.012]
    tables = _tables(
        {
            (SOLU, GELU): s_to_g,
            (GELU, SOLU): g_to_s,
            (SHARED, GELU): control_s_to_g,
            (GELU, SHARED): g_to_s,
            (SOLU, SOLU): floors,
            (GELU, GELU): floors,
            (SHARED, SHARED): floors,
        }
    )
    return {"stitching": collect_stitching(tables, ROLES, {})}


def test_collected_gaps_decide_the_floor_claims():
    findings = _planted(s_to_g=[0.10, 0.08, 0.06], g_to_s=[-0.03, 0.02, -0.012], control_s_to_g=[0.04, 0.03, 0.02])
    st = findings["stitching"]
    side = st["solu_gelu"][0]["kinds"]["affine"]["g_to_s"]
    assert side["above_floor"] == 1 and side["below_floor"] == 0
    assert side["above_gap"] == pytest.approx([-0.02, 0.01, -0.02])  # ci_low − floor's ci_high per layer
    assert side["below_gap"] == pytest.approx([-0.02, -0.05, -0.02])
    assert st["self"]["trained"]["affine"]["by_layer"] == [[0, -0.03], [1, -0.01], [2, -0.012]]
    by_id = _by_id(claims_stitching(findings))
    assert by_id["stitching.floor.between.affine.gelu_to_solu.above_partly"].margin == pytest.approx(0.01)
    assert by_id["stitching.floor.between.affine.gelu_to_solu.above_every"].margin == pytest.approx(-0.02)
    assert by_id["stitching.floor.between.affine.gelu_to_solu.within"].margin == pytest.approx(-0.01)
    assert by_id["stitching.floor.between.affine.solu_to_gelu.above_every"].margin == pytest.approx(0.052)  # layer 2
    assert by_id["stitching.self_floor.lowest_at_embeddings"].margin == pytest.approx(0.018)
    # the margins agree with the collected counts above / below the floor, for every population, kind and direction
    for population, key in (("between", "solu_gelu"), ("control", "control")):
        for kind in ("affine", "affine_ln"):
            for direction, word in (("s_to_g", "solu_to_gelu"), ("g_to_s", "gelu_to_solu")):
                counted = st[key][0]["kinds"][kind][direction]
                above, below, n = counted["above_floor"], counted["below_floor"], counted["n"]
                prefix = f"stitching.floor.{population}.{kind}.{word}."
                assert by_id[prefix + "above_every"].holds == (above == n)
                assert by_id[prefix + "above_partly"].holds == (0 < above < n)
                assert by_id[prefix + "below_every"].holds == (below == n)
                assert by_id[prefix + "below_partly"].holds == (0 < below < n)
                assert by_id[prefix + "within"].holds == (above == below == 0)


def test_planted_asymmetry_and_its_reverse_from_tables():
    ahead = claims_stitching(
        _planted(s_to_g=[0.10, 0.08, 0.06], g_to_s=[0.0, -0.01, 0.0], control_s_to_g=[0.05, 0.04, 0.03])
    )
    behind = claims_stitching(
        _planted(s_to_g=[0.0, -0.01, 0.0], g_to_s=[0.10, 0.08, 0.06], control_s_to_g=[-0.02, -0.03, -0.02])
    )
    assert [c.id for c in ahead] == [c.id for c in behind]
    held_ahead, held_behind = _holding(ahead), _holding(behind)
    assert {
        "stitching.asymmetry.every_cell",
        "stitching.control_asymmetry.every_cell",
        "stitching.control_asymmetry.smaller",
        "stitching.asymmetry.affine.solu_2l.gelu_2l",
        "stitching.identity.control_not_below_between",
    } <= held_ahead
    assert {
        "stitching.asymmetry.no_cell",
        "stitching.control_asymmetry.no_cell",
        "stitching.asymmetry_reversed.affine.solu_2l.gelu_2l",
        "stitching.floor.between.affine.gelu_to_solu.above_every",
    } <= held_behind
    assert not held_behind & {
        "stitching.asymmetry.every_cell",
        "stitching.asymmetry.some_cells",
        "stitching.control_asymmetry.every_cell",
    }
    by_id = _by_id(ahead)
    # SoLU→GeLU over GeLU's floor less GeLU→SoLU over SoLU's: layers 0, 1, 2 → 0.10, 0.09, 0.06; the smallest
    assert by_id["stitching.asymmetry.every_cell"].margin == pytest.approx(0.06)
    assert by_id["stitching.asymmetry.every_cell"].text == (
        "Over their floors, SoLU's features stitched into GeLU cost more than GeLU's into SoLU at every layer, with "
        "both φ kinds — the asymmetry Brown et al. report (by +0.060 to +0.100 nats/token per layer cell)"
    )
    assert _by_id(behind)["stitching.asymmetry.no_cell"].text.endswith("— not the asymmetry Brown et al. report")
    for claim in ahead + behind:
        assert "n/a" not in claim.text, claim.id
