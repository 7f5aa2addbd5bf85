"""The NLI section's claims (:func:`thinkalike.reports.findings.nli.claims_nli`): on a default run's findings
(conftest: the fixture file) the claims that hold are pinned, on planted findings the margins'
signs follow the numbers while the set of ids stays the same, and the stitching / CKA divergence margins agree with
the verdicts of :mod:`thinkalike.nli.verdicts` on planted tables (no Kedro, no training)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.reports.claims.conftest import default_run_findings
from thinkalike.nli.analysis import BASELINE, RELATIONS, copy_names, split_groups
from thinkalike.nli.verdicts import cka_divergence, cka_gaps, stitching_divergence, stitching_gaps
from thinkalike.reports.findings.claims import Claim, fill
from thinkalike.reports.findings.nli import DEFAULT_MIN_SPREAD, DEFAULT_SWEEP_FRACTIONS, claims_nli, collect_nli
from thinkalike.reports.findings.text import LITERATURE

#: The NLI claims that hold on the default run of the fixture file.
HOLDING_ON_DOCS = {
    "nli.test_below_rule",
    "nli.all_mostly_heuristic",
    "nli.mccoy_within",
    "nli.subcase_highest.relative_clause",
    "nli.subcase_lowest.passive",
    "nli.stitching_deeper_costs_more.between",
    "nli.stitching_deeper_costs_more.within_generalizing",
    "nli.stitching_deeper_costs_more.within_heuristic",
    "nli.stitching_most_interchangeable.within_heuristic",
    "nli.stitching_groups_do_not_diverge",
    "nli.cka_does_not_separate_groups",
    "nli.ood_said_entailed_majority",
    "nli.copies_spread",
}

#: Undecided on those findings: the per-layer gaps' intervals decide the divergence (the means-only claims are for
#: gaps without intervals), and the copies spread, so the counterexample-fraction sweep did not run.
UNDECIDED_ON_DOCS = {
    "nli.stitching_groups_diverge_means_only",
    "nli.cka_separates_groups_means_only",
    *(
        f"nli.sweep_{what}.{fraction}"
        for what in ("widest", "spreads", "does_not_spread")
        for fraction in ("0", "0.1", "0.2")
    ),
}


@pytest.fixture(scope="module")
def docs() -> dict[str, Any]:
    return default_run_findings()


def by_id(claims: list[Claim]) -> dict[str, Claim]:
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    return {c.id: c for c in claims}


def held(claims: list[Claim]) -> set[str]:
    return {c.id for c in claims if c.holds}


# ---- the default run's findings --------------------------------------------------------------------------------------


def test_the_readme_claims_hold_on_the_default_run(docs):
    claims = by_id(claims_nli(docs))
    assert held(list(claims.values())) == HOLDING_ON_DOCS
    assert {i for i, c in claims.items() if c.margin is None} == UNDECIDED_ON_DOCS
    # passives lowest (mean 0.042) just below prepositional phrases (0.047)
    assert claims["nli.subcase_lowest.passive"].margin == pytest.approx(0.005)
    assert claims["nli.subcase_lowest.preposition"].margin == pytest.approx(-0.005)
    assert claims["nli.stitching_most_interchangeable.within_generalizing"].margin == pytest.approx(-0.00896, abs=1e-4)
    assert claims["nli.stitching_deeper_costs_more.within_generalizing"].margin == pytest.approx(0.046875, abs=1e-5)
    # the copies' OOD non-entailed accuracies 0.055–0.2025 spread by 0.1475 over nli.min_spread = 0.1
    assert claims["nli.copies_spread"].margin == pytest.approx(0.0475)
    assert claims["nli.stitching_groups_do_not_diverge"].margin == pytest.approx(0.081019)
    assert claims["nli.cka_does_not_separate_groups"].margin == pytest.approx(0.001092)
    # worded as verdicts
    assert claims["nli.all_mostly_heuristic"].text.startswith("the copies are all mostly heuristic out of distribution")
    assert (
        "the most accurate on non-entailed relative clauses (0.09–0.28"
        in claims["nli.subcase_highest.relative_clause"].text
    )
    assert claims["nli.stitching_most_interchangeable.within_heuristic"].text.startswith(
        "the heuristic copies are the most interchangeable"
    )
    assert "0.03 / 0.10 / 0.15 / 0.22 / 0.38" in claims["nli.stitching_deeper_costs_more.between"].text


def test_every_claim_fills_on_the_default_run(docs):
    for claim in claims_nli(docs):
        if claim.id.startswith("nli.sweep_"):  # the sweep did not run: undecided, never stated
            assert claim.margin is None, claim.id
            continue
        assert "n/a" not in claim.text, claim.id
        assert "{" not in claim.text and "}" not in claim.text, claim.id
        if claim.item is not None:
            assert "n/a" not in fill(claim.item, [claim.values]), claim.id
    texts = by_id(claims_nli(docs))
    assert texts["nli.test_below_rule"].text == (
        "the copies score 0.815–0.875 in distribution, below the lexical-overlap rule (0.950)"
    )
    assert texts["nli.ood_said_entailed_majority"].text == ('every copy answers "entailed" to most OOD pairs (83–96 %)')
    assert "0.02 / 0.13 / 0.13 / 0.18 / 0.36" in texts["nli.stitching_deeper_costs_more.within_heuristic"].text


def test_a_section_that_did_not_run_has_no_claims(docs):
    assert claims_nli({**docs, "nli": {"missing": ["models.nli.groups"]}}) == []
    assert claims_nli({**docs, "nli": {"error": "KeyError: 'x'"}}) == []
    assert claims_nli({"literature": LITERATURE}) == []


# ---- planted findings ------------------------------------------------------------------------------------------------


def planted(docs: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``docs`` with ``changes`` (dotted paths below ``nli``) replaced."""
    findings = copy.deepcopy(dict(docs))
    for path, value in changes.items():
        node = findings["nli"]
        *parents, last = path.split("__")
        for name in parents:
            node = node[name]
        node[last] = value
    return findings


def test_margins_follow_planted_numbers_and_the_ids_stay(docs):
    ids = set(by_id(claims_nli(docs)))
    curves = copy.deepcopy(docs["nli"]["stitching"]["curves"])
    curves["within_heuristic"] = [0.0, 0.05, 0.06, 0.08, 0.1]  # the heuristic copies the most interchangeable
    curves["between"] = [0.01, 0.2, 0.1, 0.3, 0.4]  # not deeper-costs-more between groups
    flipped = planted(
        docs,
        test=[0.96, 0.99],
        ood_non_entailed=[0.6, 0.9],
        n_heuristic=0,
        ood_said_entailed=[0.2, 0.4],
        subcases={
            "passive": {"mean": 0.9, "span": [0.8, 1.0]},
            "relative_clause": {"mean": 0.7, "span": [0.6, 0.8]},
            "preposition": {"mean": 0.5, "span": [0.4, 0.6]},
            "conjunction": {"mean": 0.6, "span": [0.5, 0.7]},
        },
        stitching__curves=curves,
        min_spread=0.2,
        stitching__gaps=[
            {"layer": layer, "means": 0.05, "intervals": 0.01 if layer == 3 else -0.01} for layer in range(5)
        ],
        cka__gaps=[{"layer": d, "means": -0.01, "intervals": -0.02} for d in (0.25, 0.5, 0.75, 1.0)],
        sweep__status="swept",  # the default run's copies spread, so its sweep did not run
        sweep__fractions=[
            {"fraction": 0.0, "span": [0.1, 0.15]},
            {"fraction": 0.1, "span": [0.1, 0.5]},
            {"fraction": 0.2, "span": [0.2, 0.3]},
        ],
    )
    claims = by_id(claims_nli(flipped))
    assert set(claims) == ids
    assert held(list(claims.values())) == {
        "nli.test_above_rule",
        "nli.none_mostly_heuristic",
        "nli.mccoy_above",
        "nli.subcase_highest.passive",
        "nli.subcase_lowest.preposition",
        "nli.stitching_deeper_costs_more.within_generalizing",
        "nli.stitching_deeper_costs_more.within_heuristic",
        "nli.stitching_most_interchangeable.within_heuristic",
        "nli.stitching_groups_diverge",
        "nli.ood_said_non_entailed_majority",
        "nli.cka_does_not_separate_groups",
        "nli.copies_spread",
        "nli.sweep_widest.0.1",
        "nli.sweep_spreads.0.1",
        "nli.sweep_does_not_spread.0",
        "nli.sweep_does_not_spread.0.2",
    }
    assert claims["nli.stitching_deeper_costs_more.between"].margin == pytest.approx(-0.1)
    assert claims["nli.stitching_groups_diverge"].margin == pytest.approx(0.01)
    assert claims["nli.stitching_groups_do_not_diverge"].margin == pytest.approx(-0.01)
    assert claims["nli.stitching_groups_diverge_means_only"].margin is None
    assert claims["nli.cka_does_not_separate_groups"].margin == pytest.approx(0.02)
    assert claims["nli.copies_spread"].margin == pytest.approx(0.1)
    assert claims["nli.sweep_widest.0.1"].margin == pytest.approx(0.3)


@pytest.mark.parametrize(
    "ood, holding",
    [
        ([0.1, 0.3], {"nli.mccoy_within"}),
        ([0.01, 0.04], {"nli.mccoy_below"}),
        ([0.6, 0.7], {"nli.mccoy_above"}),
        ([0.01, 0.6], {"nli.mccoy_reaches_below", "nli.mccoy_reaches_above"}),
    ],
)
def test_the_comparison_with_mccoy_follows_the_span(docs, ood, holding):
    claims = claims_nli(planted(docs, ood_non_entailed=ood))
    assert {i for i in held(claims) if i.startswith("nli.mccoy_")} == holding
    heuristic = {i for i in held(claims) if i.endswith("mostly_heuristic")}
    assert heuristic == (
        {"nli.all_mostly_heuristic"}
        if ood[1] < 0.5
        else {"nli.none_mostly_heuristic"}
        if ood[0] > 0.5
        else {"nli.some_mostly_heuristic"}
    )


def test_means_only_divergence_and_an_unswept_run_keep_the_ids(docs):
    ids = set(by_id(claims_nli(docs)))
    loose = planted(
        docs,
        stitching__gaps=[
            {"layer": 4, "means": 0.02, "intervals": None},
            {"layer": 3, "means": -0.01, "intervals": -0.03},
        ],
        cka__gaps=[{"layer": 1.0, "means": 0.03, "intervals": None}],
        sweep={"status": "not_needed", "note": "the seeds spread"},
        ood_non_entailed=[0.1, 0.4],
        sweep_fractions=list(DEFAULT_SWEEP_FRACTIONS[:1]) + [0.1, 0.2],
    )
    claims = by_id(claims_nli(loose))
    assert set(claims) == ids
    assert claims["nli.stitching_groups_diverge_means_only"].margin == pytest.approx(0.02)
    assert claims["nli.stitching_groups_diverge"].margin == pytest.approx(-0.03)
    assert claims["nli.stitching_groups_do_not_diverge"].margin == pytest.approx(-0.02)
    assert claims["nli.cka_separates_groups_means_only"].holds and claims["nli.cka_separates_groups"].margin is None
    assert claims["nli.copies_spread"].holds
    assert all(claims[i].margin is None for i in ids if i.startswith("nli.sweep_"))


# ---- from tables ----------------------------------------------------------------------------------------------------


def nli_tables(diverging: set[int], rng: np.random.Generator, spread: bool = True) -> dict[str, Any]:
    """Planted NLI tables shaped like a run's: 10 copies, 4 OOD subcases, identity stitching on 5 layers where
    between-group stitching is worse beyond the intervals at ``diverging``, CKA curves and the sweep."""
    copies = copy_names(10)
    rows = []
    for index, model in enumerate([*copies, BASELINE]):
        non = 0.0 if model == BASELINE else (0.05 + (0.03 if spread else 0.005) * index)
        rows.append(
            {
                "model": model,
                "split": "test",
                "subcase": "all",
                "label": "all",
                "n_pairs": 40,
                "accuracy": 0.95 if model == BASELINE else float(rng.uniform(0.82, 0.85)),
            }
        )
        for subcase, shift in (
            ("passive", 0.0),
            ("relative_clause", 0.1),
            ("preposition", -0.04),
            ("conjunction", 0.02),
        ):
            for label, value in (
                ("non_entailed", max(0.0, non + shift) if model != BASELINE else 0.0),
                ("entailed", 1.0),
            ):
                rows.append(
                    {
                        "model": model,
                        "split": "ood",
                        "subcase": subcase,
                        "label": label,
                        "n_pairs": 10,
                        "accuracy": value,
                    }
                )
        for label, value in (("non_entailed", non), ("entailed", 1.0)):
            rows.append(
                {"model": model, "split": "ood", "subcase": "all", "label": label, "n_pairs": 40, "accuracy": value}
            )
    accuracy = pd.DataFrame(rows)
    rows = []
    for layer in range(5):
        for relation in RELATIONS:
            mean = 0.03 + 0.07 * layer + (0.3 if relation == "between" and layer in diverging else 0.0)
            rows.append(
                {
                    "data": "test",
                    "layer": layer,
                    "relative_depth": layer / 4,
                    "relation": relation,
                    "mean_penalty": mean,
                    "ci_low": mean - 0.05,
                    "ci_high": mean + 0.05,
                    "mean_stitched_accuracy": 0.8,
                    "n_pairs": 6,
                }
            )
    cka = [
        {
            "group_a": a,
            "group_b": b,
            "relative_depth": d,
            "mean": 0.9 - (0.2 if a != b and d == 1.0 else 0.0),
            "ci_low": 0.85 - (0.2 if a != b and d == 1.0 else 0.0),
            "ci_high": 0.95 - (0.2 if a != b and d == 1.0 else 0.0),
            "n": 3,
        }
        for a, b in (("generalizing", "generalizing"), ("generalizing", "heuristic"), ("heuristic", "heuristic"))
        for d in (0.0, 0.5, 1.0)
    ]
    sweep = (
        pd.DataFrame([{"status": "not_needed", "note": "the seeds spread"}])
        if spread
        else pd.DataFrame(
            [
                {"status": "swept", "note": "range", "counterexample_fraction": f, "ood_non_entailed_accuracy": v}
                for f, values in ((0.0, (0.1, 0.3)), (0.2, (0.1, 0.15)))
                for v in values
            ]
        )
    )
    return {
        "models.nli.accuracy": accuracy,
        "models.nli.groups": split_groups(accuracy, 3),
        "models.nli.stitching_groups": pd.DataFrame(rows),
        "models.nli.cka_group_curves": pd.DataFrame(cka),
        "models.nli.sweep": sweep,
    }


@pytest.mark.parametrize("diverging", [set(), {3, 4}])
def test_collected_gaps_agree_with_the_verdicts(diverging):
    rng = np.random.default_rng(0)
    tables = nli_tables(diverging, rng)
    by_group = tables["models.nli.stitching_groups"]
    strict = [g["layer"] for g in stitching_gaps(by_group, "test") if g["means"] > 0 and g["intervals"] > 0]
    assert strict == stitching_divergence(by_group, "test")[0] == sorted(diverging)
    curves = tables["models.nli.cka_group_curves"]
    assert [g["layer"] for g in cka_gaps(curves) if g["means"] > 0 and g["intervals"] > 0] == cka_divergence(curves)[0]
    parameters = {"nli": {"min_spread": 0.15, "sweep": {"fractions": [0.0, 0.2]}}}
    nli = collect_nli(tables, parameters)
    assert nli["min_spread"] == 0.15 and nli["sweep_fractions"] == [0.0, 0.2]
    findings = {"nli": nli, "literature": LITERATURE}
    claims = by_id(claims_nli(findings))
    assert claims["nli.stitching_groups_diverge"].holds == bool(diverging)
    assert claims["nli.stitching_groups_do_not_diverge"].holds == (not diverging)
    assert claims["nli.stitching_groups_diverge"].margin == pytest.approx(0.2 if diverging else -0.1)
    assert claims["nli.cka_separates_groups"].holds and claims["nli.cka_separates_groups"].margin == pytest.approx(0.1)
    assert claims["nli.copies_spread"].holds  # 0.05 … 0.32: a range of 0.27 ≥ 0.15
    assert nli["stitching"]["diverge"] == sorted(diverging)  # the collected verdict the paragraph stated
    assert not any(claims[i].holds for i in claims if i.startswith("nli.sweep_"))
    swept = collect_nli(nli_tables(diverging, np.random.default_rng(0), spread=False), parameters)
    swept_claims = by_id(claims_nli({"nli": swept, "literature": LITERATURE}))
    assert set(swept_claims) == set(claims)
    assert held(list(swept_claims.values())) >= {
        "nli.copies_do_not_spread",
        "nli.sweep_widest.0",
        "nli.sweep_spreads.0",
        "nli.sweep_does_not_spread.0.2",
    }


def test_the_defaults_are_the_pipelines():
    from thinkalike.pipelines.nli.schema import NLIParameters, SweepParameters

    assert NLIParameters.model_fields["min_spread"].default == DEFAULT_MIN_SPREAD
    assert tuple(SweepParameters.model_fields["fractions"].default_factory()) == DEFAULT_SWEEP_FRACTIONS
    assert collect_nli({}, {})["missing"]  # no tables: the section is missing, no claims
