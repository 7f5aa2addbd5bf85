"""Claims (thinkalike.reports.findings.claims): margins > 0 exactly when a sentence holds, stable ids, the merge over
replicates (holds / mixed), and the text with each number's range over replicates."""

from __future__ import annotations

import math

import pytest

from thinkalike.reports.findings.claims import (
    HOLDS,
    MIXED,
    UNRESOLVED,
    Claim,
    best_of,
    every,
    fill,
    greater,
    holds,
    merge_claims,
    noise_scale,
    render_claims,
    single_run,
    status_of,
    value_text,
)


def test_margins_are_positive_exactly_when_the_sentence_holds():
    assert greater("a.more", "A above B", 0.8, 0.7).margin == pytest.approx(0.1)
    assert not greater("a.more", "A above B", 0.7, 0.8).holds
    assert greater("a.more", "A above B", None, 0.8).margin is None and not holds(None) and not holds(math.nan)
    assert every("a.all", "above at every layer", [0.1, 0.02, 0.3]).margin == pytest.approx(0.02)
    assert not every("a.all", "above at every layer", [0.1, -0.01]).holds
    assert every("a.all", "…", []).margin is None
    assert not greater("a.tie", "A above B", 0.5, 0.5).holds  # a tie is not "above"


def test_best_of_gives_one_claim_per_candidate_and_exactly_one_holds():
    claims = best_of("cka.closest", "`{name}` is closest ({score})", {"x": 0.9, "y": 0.7, "z": 0.85})
    assert [c.id for c in claims] == ["cka.closest.x", "cka.closest.y", "cka.closest.z"]
    assert [c.holds for c in claims] == [True, False, False]
    assert claims[0].margin == pytest.approx(0.05) and claims[1].margin == pytest.approx(-0.2)
    lowest = best_of("cka.furthest", "…", {"x": 0.9, "y": 0.7, "z": 0.85}, higher=False)
    assert [c.holds for c in lowest] == [False, True, False] and lowest[1].margin == pytest.approx(0.15)
    # the same ids whichever way the data goes
    flipped = best_of("cka.closest", "…", {"x": 0.1, "y": 0.7, "z": 0.85})
    assert [c.id for c in flipped] == [c.id for c in claims] and [c.holds for c in flipped] == [False, False, True]


def test_text_shows_each_numbers_range_over_replicates():
    template = "A ({a}) above B ({b:+3}; {n:d} rows, {p:%}) in `{model}`"
    assert (
        fill(template, [{"a": 0.81, "b": -0.012, "n": 1024, "p": 0.5, "model": "m"}])
        == "A (0.81) above B (−0.012; 1,024 rows, 50 %) in `m`"
    )
    two = fill(
        template,
        [
            {"a": 0.81, "b": -0.012, "n": 1024, "p": 0.5, "model": "m"},
            {"a": [0.78, 0.9], "b": 0.02, "n": 1024, "p": 0.61, "model": "m"},
        ],
    )
    assert two == "A (0.78–0.90) above B (−0.012 to +0.020; 1,024 rows, 50–61 %) in `m`"
    assert value_text([0.804, 0.8049]) == "0.80"  # equal at the shown precision: one number
    assert value_text([]) == "n/a" and value_text(["a", "b"]) == "a / b"
    assert Claim("x", "{v:3}", 1.0, {"v": 0.1234}).text == "0.123"


def _run(margins: dict[str, float | None]) -> list[dict]:
    return single_run([Claim(cid, "{name} holds ({v})", m, {"name": cid, "v": m}) for cid, m in margins.items()])


def test_merge_keeps_what_holds_somewhere_and_says_holds_or_mixed():
    runs = [
        _run({"a": 0.2, "b": 0.1, "c": -0.1}),
        _run({"a": 0.3, "b": -0.05, "c": -0.2}),
        _run({"a": 0.25, "b": 0.02, "c": -0.3}),
    ]
    merged = merge_claims(runs)
    assert [c["id"] for c in merged] == ["a", "b"]  # c holds in no replicate: nobody states it
    a, b = merged
    assert a["status"] == HOLDS and a["margin"] == [0.2, 0.3, 0.25]
    assert b["status"] == MIXED and b["margin"] == [0.1, -0.05, 0.02]
    assert a["text"] == "a holds (0.20–0.30)"
    # a claim missing from one replicate (its section did not run there) is mixed, its margin None there
    missing = merge_claims([_run({"a": 0.2}), _run({})])
    assert missing[0]["status"] == MIXED and missing[0]["margin"] == [0.2, None]


def test_rendering_states_claims_that_hold_and_lists_the_rest_as_varying():
    merged = merge_claims([_run({"a": 0.2, "b": 0.1}), _run({"a": 0.3, "b": -0.05})])
    sentences = render_claims(merged)
    assert sentences[0] == "A holds (0.20–0.30)."
    assert sentences[1].startswith("Not findings — these claims hold in some replicates only")
    assert sentences[1].endswith(": `b` (1 of 2).")
    grouped = [
        Claim(f"m.pass.{n}", "`{name}` passes", s, {"name": n}, group="To pass", item="`{name}`")
        for n, s in (("x", 0.1), ("y", 0.2))
    ]
    assert render_claims(merge_claims([single_run(grouped)])) == ["To pass: `x` and `y`."]


def test_a_statement_and_its_negation_are_one_proposition():
    negated = [
        _run({"s.a": 0.2, "s.a_not": -0.2, "s.x": 0.1, "s.x_not": -0.1}),
        _run({"s.a": 0.3, "s.a_not": -0.3, "s.x": -0.05, "s.x_not": 0.05}),
        _run({"s.a": 0.25, "s.a_not": -0.25, "s.x": 0.02, "s.x_not": -0.02}),
    ]
    merged = merge_claims(negated)
    assert [(c["id"], c["status"], c.get("negation")) for c in merged] == [
        ("s.a", HOLDS, "s.a_not"),
        ("s.x", MIXED, "s.x_not"),  # stated from the side that holds in more replicates (2 of 3)
    ]
    flipped = merge_claims([_run({"s.b_not": -0.2, "s.b": 0.2}), _run({"s.b_not": -0.3, "s.b": 0.3})])
    assert [(c["id"], c["negation"]) for c in flipped] == [("s.b", "s.b_not")]
    twice = merge_claims([_run({"s.c": 0.2, "s.c_again": 0.2}), _run({"s.c": 0.3, "s.c_again": 0.3})])
    assert [(c["id"], c["same_as"]) for c in twice] == [("s.c", ["s.c_again"])]
    # other sections, or margins that never vary, are never matched (a coincidence, not a negation)
    apart = merge_claims([_run({"s.d": 0.2, "t.d": -0.2}), _run({"s.d": 0.3, "t.d": -0.3})])
    constant = merge_claims([_run({"s.e": 1.0, "s.e_not": -1.0}), _run({"s.e": 1.0, "s.e_not": -1.0})])
    assert [c["id"] for c in apart] == ["s.d"] and "negation" not in constant[0]


def test_a_finding_clears_its_noise_and_a_constant_margin_is_no_finding():
    assert status_of([0.2, 0.3, 0.25])[0] == HOLDS  # 0.2 > 2 x 0.05
    assert status_of([0.01, 0.2, 0.15])[0] == UNRESOLVED  # 0.01 < 2 x 0.1
    assert status_of([1.0, 1.0, 1.0])[0] == UNRESOLVED  # a margin that never varies carries no size
    assert status_of([0.1, -0.1])[0] == MIXED and status_of([0.4])[0] == HOLDS  # one run: no noise to weigh
    assert noise_scale([0.2, 0.3, 0.25]) == pytest.approx(0.05) and noise_scale([0.2]) is None
    merged = merge_claims([_run({"a": 0.2, "u": 0.01}), _run({"a": 0.3, "u": 0.2})])
    assert [c["status"] for c in merged] == [HOLDS, UNRESOLVED]
    sentences = render_claims(merged)
    assert sentences[0] == "A holds (0.20–0.30)." and sentences[1].startswith("Unresolved")
    assert sentences[1].endswith(": `u`.")


def test_claims_that_hold_by_less_than_round_off_moves_them_are_not_stated():
    from thinkalike.reports.findings import at_risk

    merged = merge_claims([_run({"a": 0.2, "b": 0.05}), _run({"a": 0.3, "b": 0.051})])
    roundoff = {"margin_changes": {"a": 0.05, "b": 0.06}}
    assert at_risk(roundoff, merged) == ["b"]  # b's smallest margin (0.05) is within round-off's change of it
    sentences = render_claims(merged, withheld=frozenset(at_risk(roundoff, merged)))
    assert sentences[0] == "A holds (0.20–0.30)." and sentences[1].startswith("Unresolved")
