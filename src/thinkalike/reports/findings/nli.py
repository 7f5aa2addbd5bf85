"""The NLI paragraph of the findings (Brown et al. 2023 §4, offline): the copies' accuracies, their groups,
identity stitching within and between groups, CKA and the counterexample sweep
(:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.claims import Claim, best_of, every, finite, greater
from thinkalike.reports.findings.text import (
    LITERATURE,
    as_float,
    guarded,
    int_list,
    list_text,
    missing_section,
    not_run_sentence,
    number_text,
    span_of,
    table_of,
)

#: OOD penalties / fractions: an NLI copy is "mostly heuristic" below this OOD non-entailed accuracy.
HEURISTIC_BELOW = 0.5

#: A copy answers "entailed" to *most* OOD pairs above this fraction.
MAJORITY = 0.5

#: The pipeline's defaults (:class:`thinkalike.pipelines.nli.schema.NLIParameters`) where the parameters leave them
#: out: ``nli.min_spread`` and ``nli.sweep.fractions``.
DEFAULT_MIN_SPREAD = 0.1
DEFAULT_SWEEP_FRACTIONS = (0.0, 0.1, 0.2)


RELATION_LABELS = {
    "between": "between groups",
    "within_generalizing": "within the generalizing copies",
    "within_heuristic": "within the heuristic ones",
}


SUBCASE_LABELS = {
    "passive": "passives",
    "relative_clause": "relative clauses",
    "preposition": "prepositional phrases",
    "conjunction": "conjunctions",
    "swap": "swaps",
}


def collect_nli(tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The NLI paragraph's numbers: the copies' accuracies, the groups, identity stitching, CKA and the sweep."""
    groups, accuracy = table_of(tables, "models.nli.groups"), table_of(tables, "models.nli.accuracy")
    if groups is None or accuracy is None:
        return missing_section(
            *[n for n in ("models.nli.groups", "models.nli.accuracy") if table_of(tables, n) is None]
        )
    result: dict[str, Any] = {**_nli_settings(tables, parameters.get("nli") or {}), **_accuracies(groups, accuracy)}
    result["stitching"] = guarded(
        _collect_nli_stitching,
        table_of(tables, "models.nli.stitching_groups"),
        table_of(tables, "models.nli.stitching"),
    )
    result["cka"] = guarded(_collect_nli_cka, table_of(tables, "models.nli.cka_group_curves"))
    result["sweep"] = guarded(_collect_sweep, table_of(tables, "models.nli.sweep"))
    return result


def _nli_settings(tables: Mapping[str, Any], nli: Mapping[str, Any]) -> dict[str, Any]:
    """How the NLI copies were made: the pairs per split, the counterexamples, the groups' least spread, the sweep's
    fractions, the encoder's depth and the fine-tuning steps (``nli``: the ``nli`` parameters)."""
    result: dict[str, Any] = {}
    pairs = table_of(tables, "models.nli.pairs")
    pair_settings = nli.get("pairs") or {}
    if pairs is not None:
        sizes = pairs.groupby("split").size()
        ood = pairs[pairs["split"] == "ood"].groupby(["subcase", "label"]).size()
        result["pairs"] = {
            "train": int(sizes.get("train", 0)),
            "test": int(sizes.get("test", 0)),
            "ood_subcases": int(pairs.loc[pairs["split"] == "ood", "subcase"].nunique()),
            "ood_per_subcase_label": int_list(ood.values),
        }
    result["counterexample_fraction"] = as_float(pair_settings.get("counterexample_fraction"))
    result["counterexample_subcases"] = list(pair_settings.get("counterexample_subcases") or [])
    result["min_spread"] = as_float(nli.get("min_spread", DEFAULT_MIN_SPREAD))
    result["sweep_fractions"] = [
        as_float(f) for f in ((nli.get("sweep") or {}).get("fractions") or DEFAULT_SWEEP_FRACTIONS)
    ]
    encoder = tables.get("models.nli.encoder.model_config")
    arch = (encoder.get("bridge_config") or encoder.get("architecture") or {}) if isinstance(encoder, Mapping) else {}
    imported = (encoder.get("hf_config") or {}) if isinstance(encoder, Mapping) else {}  # a real checkpoint
    configured = nli.get("encoder") or {}
    source = (encoder.get("source") if isinstance(encoder, Mapping) else None) or configured.get("source") or "zoo"
    result["encoder_layers"] = (
        arch.get("n_layers")
        or imported.get("num_hidden_layers")
        # without the saved config, conf's architecture is the depth only of the zoo encoder it describes
        or ((configured.get("architecture") or {}).get("n_layers") if source == "zoo" else None)
    )
    result["encoder_source"] = source
    curves = table_of(tables, "models.nli.training_curves")
    if curves is not None and "stage" in curves:
        tuned = curves[curves["stage"] == "fine-tuning"]
        result["finetune_steps"] = int_list(tuned.groupby("model")["step"].max()) if len(tuned) else []
    return result


def _accuracies(copies: pd.DataFrame, accuracy: pd.DataFrame) -> dict[str, Any]:
    """The copies' test and OOD accuracies (``models.nli.groups``, ``models.nli.accuracy``): spans, the baseline's,
    per OOD subcase, how often they say "entailed" out of distribution, and the two groups."""
    from thinkalike.nli.analysis import BASELINE, GENERALIZING, HEURISTIC, accuracy_summary

    result: dict[str, Any] = {}
    baseline = accuracy_summary(accuracy[accuracy["model"] == BASELINE])
    base = baseline.iloc[0] if len(baseline) else None
    result["n_copies"] = int(len(copies))
    result["test"] = span_of(copies["test_accuracy"])
    result["ood_non_entailed"] = span_of(copies["ood_non_entailed_accuracy"])
    result["mostly_heuristic"] = bool((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).all())
    result["n_heuristic"] = int((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).sum())
    result["baseline"] = (
        None
        if base is None
        else {
            "test": as_float(base["test_accuracy"]),
            "ood_non_entailed": as_float(base["ood_non_entailed_accuracy"]),
            "ood_entailed": as_float(base["ood_entailed_accuracy"]),
        }
    )
    ood = accuracy[(accuracy["split"] == "ood") & (accuracy["model"].isin(copies["model"]))]
    result.update(_ood_subcases(ood))
    gen = copies[copies["group"] == GENERALIZING]["ood_non_entailed_accuracy"]
    heur = copies[copies["group"] == HEURISTIC]["ood_non_entailed_accuracy"]
    result["groups"] = {"k": int(len(gen)), "generalizing": span_of(gen), "heuristic": span_of(heur)}
    return result


def _ood_subcases(ood: pd.DataFrame) -> dict[str, Any]:
    """The copies' OOD non-entailed accuracy per subcase (highest mean first), the highest and lowest subcase, and
    the share of OOD pairs they say "entailed" to (when both labels are there)."""
    result: dict[str, Any] = {}
    subcases = ood[(ood["subcase"] != "all") & (ood["label"] == "non_entailed")]
    by_subcase = subcases.groupby("subcase")["accuracy"]
    means = by_subcase.mean().sort_values(ascending=False, kind="mergesort")
    result["subcases"] = {
        str(s): {"span": span_of(by_subcase.get_group(s)), "mean": as_float(m)} for s, m in means.items()
    }
    result["highest_subcase"] = str(means.index[0]) if len(means) else None
    result["lowest_subcase"] = str(means.index[-1]) if len(means) else None
    overall = ood[ood["subcase"] == "all"].pivot_table(
        index="model", columns="label", values=["accuracy", "n_pairs"], aggfunc="first"
    )
    if {"entailed", "non_entailed"} <= set(overall["accuracy"].columns):
        said = (
            overall["accuracy"]["entailed"] * overall["n_pairs"]["entailed"]
            + (1 - overall["accuracy"]["non_entailed"]) * overall["n_pairs"]["non_entailed"]
        ) / (overall["n_pairs"]["entailed"] + overall["n_pairs"]["non_entailed"])
        result["ood_said_entailed"] = span_of(said)
    return result


def _collect_nli_stitching(by_group: pd.DataFrame | None, stitches: pd.DataFrame | None) -> dict[str, Any]:
    if by_group is None:
        return missing_section("models.nli.stitching_groups")
    from thinkalike.nli.analysis import RELATIONS
    from thinkalike.nli.verdicts import stitching_divergence, stitching_gaps

    test = by_group[by_group["data"] == "test"]
    if test.empty or not set(RELATIONS) <= set(test["relation"]):
        return {"empty": True}
    layers = int_list(test["layer"])
    curves = {
        relation: [
            as_float(test.loc[(test["relation"] == relation) & (test["layer"] == layer), "mean_penalty"].mean())
            for layer in layers
        ]
        for relation in RELATIONS
    }
    # a curve with an undefined point (no rows at a layer) is not increasing
    increasing = [
        r
        for r, values in curves.items()
        if all(a is not None and b is not None and b >= a for a, b in zip(values, values[1:]))
    ]
    means = {r: float(np.nanmean([v for v in values if v is not None])) for r, values in curves.items()}
    strict, means_only = stitching_divergence(by_group, "test")
    ood = by_group[by_group["data"] == "ood"]
    ood_strict, ood_means_only = stitching_divergence(by_group, "ood") if len(ood) else ([], [])
    n_ordered = (
        int(len(stitches[["model_f", "model_g"]].drop_duplicates())) if stitches is not None and len(stitches) else None
    )
    return {
        "layers": layers,
        "curves": curves,
        "increasing": increasing,
        "most_interchangeable": min(means, key=means.__getitem__),
        "diverge": strict,
        "diverge_means_only": means_only,
        "ood_span": span_of(ood["mean_penalty"]) if len(ood) else None,
        "ood_diverge": ood_strict,
        "ood_diverge_means_only": ood_means_only,
        "n_ordered_pairs": n_ordered,
        "gaps": _gaps(stitching_gaps(by_group, "test")),
    }


def _gaps(gaps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`thinkalike.nli.verdicts.stitching_gaps` / ``cka_gaps`` as plain JSON (``None`` for undefined)."""
    return [{"layer": g["layer"], "means": as_float(g["means"]), "intervals": as_float(g["intervals"])} for g in gaps]


def _collect_nli_cka(curves: pd.DataFrame | None) -> dict[str, Any]:
    if curves is None:
        return missing_section("models.nli.cka_group_curves")
    from thinkalike.nli.verdicts import cka_divergence, cka_gaps

    deep = curves[curves["relative_depth"] > 0]
    if deep.empty:
        return {"empty": True}
    between = deep[deep["group_a"] != deep["group_b"]]
    within = deep[(deep["group_a"] == deep["group_b"]) & (deep["group_a"] != "middle")]
    strict, means_only = cka_divergence(curves)
    return {
        "depths": span_of(deep["relative_depth"]),
        "between": span_of(between["mean"]),
        "within": span_of(within["mean"]),
        "diverge": strict,
        "diverge_means_only": means_only,
        "gaps": _gaps(cka_gaps(curves)),
    }


def _collect_sweep(sweep: pd.DataFrame | None) -> dict[str, Any]:
    if sweep is None:
        return missing_section("models.nli.sweep")
    if sweep.empty:
        return {"empty": True}
    status = str(sweep["status"].iloc[0])
    if status != "swept":
        return {"status": status, "note": str(sweep["note"].iloc[0])}
    by_fraction = sweep.groupby("counterexample_fraction")["ood_non_entailed_accuracy"]
    return {
        "status": status,
        "fractions": [{"fraction": as_float(fraction), "span": span_of(values)} for fraction, values in by_fraction],
    }


# ---- claims ---------------------------------------------------------------------------------------------------------

#: Who "the most interchangeable" are, per relation.
INTERCHANGEABLE_LABELS = {
    "within_heuristic": "the heuristic copies",
    "within_generalizing": "the generalizing copies",
    "between": "copies of different groups",
}

#: The relations in the order the paragraph lists them.
RELATION_ORDER = ("between", "within_generalizing", "within_heuristic")


def claims_nli(findings: Mapping[str, Any]) -> list[Claim]:
    """The NLI paragraph's claims (:mod:`thinkalike.reports.findings.claims`), ``[]`` when the section was not run.

    Ids (``<…>``: configuration names) and margins, each > 0 exactly when the sentence holds:

    * ``nli.test_below_rule`` / ``nli.test_above_rule``: the copies' in-distribution accuracy against the
      lexical-overlap rule's — ``rule − max(copies)`` / ``min(copies) − rule``;
    * ``nli.all_mostly_heuristic`` / ``nli.some_mostly_heuristic`` / ``nli.none_mostly_heuristic``: OOD non-entailed
      accuracy against :data:`HEURISTIC_BELOW` — ``0.5 − max``, ``min(0.5 − min, max − 0.5)``, ``min − 0.5``;
    * ``nli.mccoy_within`` / ``nli.mccoy_below`` / ``nli.mccoy_above`` / ``nli.mccoy_reaches_below`` /
      ``nli.mccoy_reaches_above``: the copies' OOD non-entailed span ``[lo, hi]`` against McCoy et al.'s ``[a, b]``
      — ``min(lo − a, b − hi)``, ``a − hi``, ``lo − b``, ``min(a − lo, hi − a)``, ``min(hi − b, b − lo)``;
    * ``nli.subcase_highest.<subcase>`` / ``nli.subcase_lowest.<subcase>``: the copies' mean OOD non-entailed
      accuracy per subcase (:func:`~thinkalike.reports.findings.claims.best_of`: the gap to the runner-up);
    * ``nli.stitching_deeper_costs_more.<relation>``: identity stitching's mean penalty on test pairs rises with the
      layer — the smallest step from one layer to the next (:func:`~thinkalike.reports.findings.claims.every`);
    * ``nli.stitching_most_interchangeable.<relation>``: the lowest mean penalty over layers (best_of, lower);
    * ``nli.stitching_groups_diverge`` (Brown et al., reproduced when it holds): the largest, over layers whose
      intervals are defined, of ``min(between − max within mean, between ci_low − max within ci_high)``;
      ``nli.stitching_groups_diverge_means_only``: the largest between − max within mean over layers whose
      intervals are undefined; ``nli.stitching_groups_do_not_diverge``: minus the largest of both (no layer
      diverges either way);
    * ``nli.ood_said_entailed_majority`` / ``nli.ood_said_non_entailed_majority``: the fraction of OOD pairs every
      copy calls "entailed" against half — ``min − 0.5`` / ``0.5 − max``;
    * ``nli.cka_separates_groups`` / ``nli.cka_separates_groups_means_only`` / ``nli.cka_does_not_separate_groups``:
      as for stitching, with CKA *below*: ``min(min within − between mean, min within ci_low − between ci_high)``
      per relative depth;
    * ``nli.copies_spread`` / ``nli.copies_do_not_spread``: the copies' OOD non-entailed range (max − min)
      against ``nli.min_spread`` — ``spread − min_spread`` / ``min_spread − spread`` (the sweep runs exactly when
      the second holds);
    * ``nli.sweep_widest.<fraction>``: the sweep's range of OOD non-entailed accuracy per configured
      counterexample fraction (best_of, higher: the recommended fraction); ``nli.sweep_spreads.<fraction>`` /
      ``nli.sweep_does_not_spread.<fraction>``: that range against ``nli.min_spread`` (both directions; ``None``
      where the fraction was not swept).

    The stitching and CKA divergence margins need the per-layer ``gaps`` (collected since claims exist); findings
    without them leave those three claims each undecided (margin ``None``). Findings without ``min_spread`` use
    :data:`DEFAULT_MIN_SPREAD`, the pipeline's default."""
    nli = findings.get("nli") or {}
    if not nli or not_run_sentence("NLI", nli):
        return []
    mccoy = (findings.get("literature") or {}).get("mccoy_ood_non_entailed") or LITERATURE["mccoy_ood_non_entailed"]
    return [
        *_accuracy_claims(nli, mccoy),
        *_subcase_claims(nli),
        *_stitching_claims(nli),
        *_said_entailed_claims(nli),
        *_cka_claims(nli),
        *_sweep_claims(nli),
    ]


def _span(value: Any) -> tuple[float, float] | None:
    """``(low, high)`` of a collected span with both ends finite, else ``None``."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    low, high = finite(value[0]), finite(value[1])
    return None if low is None or high is None else (low, high)


def _smallest(*margins: float | None) -> float | None:
    """The smallest margin, ``None`` when any is missing ("both hold")."""
    return None if any(m is None for m in margins) else min(float(m) for m in margins if m is not None)


def _accuracy_claims(nli: Mapping[str, Any], mccoy: Sequence[float]) -> list[Claim]:
    """The copies' accuracies: in distribution against the lexical-overlap rule, and out of distribution mostly
    heuristic (all, some or none of them) and against McCoy et al.'s 100 BERTs (``mccoy``: their range)."""
    claims = _rule_claims(nli)
    if (ood := _span(nli.get("ood_non_entailed"))) is None:
        return claims
    base = nli.get("baseline") or {}
    values = {
        "ood": list(ood),
        "rule": finite(base.get("ood_non_entailed")),
        "below": HEURISTIC_BELOW,
        "n_heuristic": nli.get("n_heuristic"),
        "n_copies": nli.get("n_copies"),
        "mccoy": list(mccoy),
    }
    return claims + _heuristic_claims(ood, values) + _mccoy_claims(ood, mccoy, values)


def _rule_claims(nli: Mapping[str, Any]) -> list[Claim]:
    """The copies' test accuracies all below (or all above) the lexical-overlap rule's: margins ``rule − highest``
    and ``lowest − rule``."""
    claims: list[Claim] = []
    base = nli.get("baseline") or {}
    if (test := _span(nli.get("test"))) is not None:
        rule = finite(base.get("test"))
        values = {"test": list(test), "rule": rule}
        claims.append(
            greater(
                "nli.test_below_rule",
                "the copies score {test:3} in distribution, below the lexical-overlap rule ({rule:3})",
                rule,
                test[1],
                **values,
            )
        )
        claims.append(
            greater(
                "nli.test_above_rule",
                "the copies score {test:3} in distribution, above the lexical-overlap rule ({rule:3})",
                test[0],
                rule,
                **values,
            )
        )
    return claims


def _heuristic_claims(ood: tuple[float, float], values: Mapping[str, Any]) -> list[Claim]:
    """All, some or none of the copies mostly heuristic out of distribution (OOD non-entailed accuracy below
    :data:`HEURISTIC_BELOW`), from the span ``ood`` of their accuracies."""
    low, high = ood
    return [
        Claim(
            "nli.all_mostly_heuristic",
            "the copies are all mostly heuristic out of distribution: OOD non-entailed "
            "accuracy {ood}, below {below} (the lexical-overlap rule: {rule})",
            HEURISTIC_BELOW - high,
            values,
        ),
        Claim(
            "nli.some_mostly_heuristic",
            "{n_heuristic:d} of {n_copies:d} copies are mostly heuristic out of "
            "distribution and the others are not: OOD non-entailed accuracy {ood}, on both sides of {below} (the "
            "lexical-overlap rule: {rule})",
            min(HEURISTIC_BELOW - low, high - HEURISTIC_BELOW),
            values,
        ),
        Claim(
            "nli.none_mostly_heuristic",
            "no copy is mostly heuristic out of distribution: OOD non-entailed "
            "accuracy {ood}, above {below} (the lexical-overlap rule: {rule})",
            low - HEURISTIC_BELOW,
            values,
        ),
    ]


def _mccoy_claims(ood: tuple[float, float], mccoy: Sequence[float], values: Mapping[str, Any]) -> list[Claim]:
    """The span ``ood`` of the copies' OOD non-entailed accuracies against McCoy et al.'s 100 BERTs' range ``mccoy``:
    within, below, above, or overlapping it and reaching below or above."""
    low, high = ood
    a, b = float(mccoy[0]), float(mccoy[1])
    return [
        Claim(
            "nli.mccoy_within",
            "the copies' OOD non-entailed accuracies ({ood}) lie within the range of McCoy et "
            "al.'s 100 BERTs ({mccoy}), as they found",
            min(low - a, b - high),
            values,
        ),
        Claim(
            "nli.mccoy_below",
            "the copies' OOD non-entailed accuracies ({ood}) are all below McCoy et al.'s 100 BERTs ({mccoy})",
            a - high,
            values,
        ),
        Claim(
            "nli.mccoy_above",
            "the copies' OOD non-entailed accuracies ({ood}) are all above McCoy et al.'s 100 BERTs ({mccoy})",
            low - b,
            values,
        ),
        Claim(
            "nli.mccoy_reaches_below",
            "the copies' OOD non-entailed accuracies ({ood}) overlap McCoy et al.'s 100 "
            "BERTs ({mccoy}) and reach below the lowest of them",
            min(a - low, high - a),
            values,
        ),
        Claim(
            "nli.mccoy_reaches_above",
            "the copies' OOD non-entailed accuracies ({ood}) overlap McCoy et al.'s 100 "
            "BERTs ({mccoy}) and reach above the highest of them",
            min(high - b, b - low),
            values,
        ),
    ]


def _subcase_claims(nli: Mapping[str, Any]) -> list[Claim]:
    subcases = nli.get("subcases") or {}
    if not subcases:
        return []
    scores = {str(s): finite(v.get("mean")) for s, v in subcases.items()}
    extra = {str(s): {"label": SUBCASE_LABELS.get(str(s), str(s)), "span": v.get("span")} for s, v in subcases.items()}
    return [
        *best_of(
            "nli.subcase_highest",
            "out of distribution the copies are the most accurate on non-entailed {label} ({span}; mean {score:3})",
            scores,
            higher=True,
            values=extra,
        ),
        *best_of(
            "nli.subcase_lowest",
            "out of distribution the copies are the least accurate on non-entailed {label} ({span}; mean {score:3})",
            scores,
            higher=False,
            values=extra,
        ),
    ]


def _divergence_margins(gaps: Sequence[Mapping[str, Any]] | None) -> tuple[float | None, float | None, float | None]:
    """(diverge with separated intervals, diverge by the means only, diverge nowhere) from per-layer ``gaps``
    (:func:`thinkalike.nli.verdicts.stitching_gaps`): a layer's score is ``min(means, intervals)`` where its
    intervals are defined, ``means`` where not; "diverge" is the largest strict score, "means only" the largest
    score of a layer without intervals, "nowhere" minus the largest score of all (``None`` where there is none)."""
    if gaps is None:
        return None, None, None
    strict = [
        _smallest(finite(g.get("means")), finite(g.get("intervals"))) for g in gaps if g.get("intervals") is not None
    ]
    loose = [finite(g.get("means")) for g in gaps if g.get("intervals") is None]

    def largest(scores: list[float | None]) -> float | None:
        return None if not scores or any(s is None for s in scores) else max(s for s in scores if s is not None)

    nowhere = largest(strict + loose)
    return largest(strict), largest(loose), None if nowhere is None else -nowhere


def _layers_text(layers: Sequence[Any] | None) -> str:
    return list_text([number_text(v) if isinstance(v, float) else str(v) for v in layers or []]) or "none"


def _stitching_claims(nli: Mapping[str, Any]) -> list[Claim]:
    """Identity stitching between the NLI copies: per relation its cost rising with depth, the most
    interchangeable relation, and whether the groups diverge (:func:`_divergence_claims`)."""
    st = nli.get("stitching") or {}
    if not st or not_run_sentence("identity stitching", st):
        return []
    layers, curves = list(st.get("layers") or []), st.get("curves") or {}
    if not layers or not set(RELATION_ORDER) <= set(curves):
        return []
    at = f"at layers {layers[0]}–{layers[-1]}"
    points = " / ".join("{layer_" + str(layer) + "}" for layer in layers)
    claims: list[Claim] = []
    for relation in RELATION_ORDER:
        curve = [finite(v) for v in curves[relation]]
        steps = [None if a is None or b is None else b - a for a, b in zip(curve, curve[1:])]
        values = {"label": RELATION_LABELS[relation], **{f"layer_{layer}": v for layer, v in zip(layers, curve)}}
        claim = every(
            f"nli.stitching_deeper_costs_more.{relation}",
            "identity stitching on in-distribution test "
            "pairs {label} costs more accuracy the deeper it is, " + at + ": " + points,
            steps,
            **values,
        )
        claims.append(
            Claim(
                claim.id,
                claim.template,
                claim.margin,
                claim.values,
                group=f"Identity stitching on in-distribution test pairs costs more accuracy the deeper it is, {at}",
                item="{label} " + points,
            )
        )
    means = {
        r: (float(np.nanmean(known)) if (known := [v for v in curves[r] if v is not None]) else None)
        for r in RELATION_ORDER
    }
    claims += best_of(
        "nli.stitching_most_interchangeable",
        "{label} are the most interchangeable: identity "
        "stitching on in-distribution test pairs costs them the least accuracy (mean penalty {score:3} " + at + ")",
        means,
        higher=False,
        values={r: {"label": INTERCHANGEABLE_LABELS[r]} for r in RELATION_ORDER},
    )
    return claims + _divergence_claims(st, layers, curves)


def _divergence_claims(st: Mapping[str, Any], layers: Sequence[Any], curves: Mapping[str, Any]) -> list[Claim]:
    """Whether the groups diverge as Brown et al. found: identity stitching between them costs more than within both,
    with separated intervals, by the means only, or nowhere (margins: :func:`_divergence_margins`)."""
    last = {f"{r}_last": finite(curves[r][-1]) for r in RELATION_ORDER}
    values = {
        **last,
        "layers": _layers_text(st.get("diverge")),
        "means_layers": _layers_text(st.get("diverge_means_only")),
    }
    numbers = (
        f"at layer {layers[-1]}: between {{between_last}} vs within the generalizing copies "
        "{within_generalizing_last} and the heuristic ones {within_heuristic_last}"
    )
    strict, loose, nowhere = _divergence_margins(st.get("gaps"))
    return [
        Claim(
            "nli.stitching_groups_diverge",
            "the groups diverge as Brown et al. found: at layer(s) {layers} identity "
            "stitching *between* the groups costs more accuracy on in-distribution test pairs than within both, "
            "with separated intervals (" + numbers + ")",
            strict,
            values,
        ),
        Claim(
            "nli.stitching_groups_diverge_means_only",
            "identity stitching *between* the groups costs more "
            "accuracy on in-distribution test pairs than within both by the means only (an interval is "
            "undefined) at layer(s) {means_layers}",
            loose,
            values,
        ),
        Claim(
            "nli.stitching_groups_do_not_diverge",
            "the groups do not diverge as Brown et al. found: at no layer "
            "is identity stitching *between* the groups worse than within both on in-distribution test pairs "
            "(" + numbers + ")",
            nowhere,
            values,
        ),
    ]


def _said_entailed_claims(nli: Mapping[str, Any]) -> list[Claim]:
    if (said := _span(nli.get("ood_said_entailed"))) is None:
        return []
    values = {"said": list(said), "said_non": [1 - said[1], 1 - said[0]]}
    return [
        Claim(
            "nli.ood_said_entailed_majority",
            'every copy answers "entailed" to most OOD pairs ({said:%})',
            said[0] - MAJORITY,
            values,
        ),
        Claim(
            "nli.ood_said_non_entailed_majority",
            'every copy answers "non-entailed" to most OOD pairs ({said_non:%})',
            MAJORITY - said[1],
            values,
        ),
    ]


def _cka_claims(nli: Mapping[str, Any]) -> list[Claim]:
    cka = nli.get("cka") or {}
    if not cka or not_run_sentence("CKA of the copies", cka):
        return []
    values = {
        "between": cka.get("between"),
        "within": cka.get("within"),
        "depths": cka.get("depths"),
        "separated": _layers_text(cka.get("diverge")),
        "means_depths": _layers_text(cka.get("diverge_means_only")),
    }
    numbers = "between {between} vs within {within} at relative depths {depths}"
    strict, loose, nowhere = _divergence_margins(cka.get("gaps"))
    return [
        Claim(
            "nli.cka_separates_groups",
            "CKA separates the groups at relative depth(s) {separated}: "
            "between-group CKA is below both within-group CKAs with separated intervals (" + numbers + ")",
            strict,
            values,
        ),
        Claim(
            "nli.cka_separates_groups_means_only",
            "CKA between the groups is below CKA within both by the "
            "means only (an interval is undefined) at relative depth(s) {means_depths} (" + numbers + ")",
            loose,
            values,
        ),
        Claim(
            "nli.cka_does_not_separate_groups",
            "CKA does not separate the groups: at no relative depth is "
            "between-group CKA below both within-group CKAs (" + numbers + ")",
            nowhere,
            values,
        ),
    ]


def _fraction_name(fraction: Any) -> str:
    return f"{float(fraction):g}"


def _sweep_claims(nli: Mapping[str, Any]) -> list[Claim]:
    claims: list[Claim] = []
    min_spread = finite(nli.get("min_spread"))
    min_spread = DEFAULT_MIN_SPREAD if min_spread is None else min_spread
    if (ood := _span(nli.get("ood_non_entailed"))) is not None:
        spread = ood[1] - ood[0]
        values = {"spread": spread, "min_spread": min_spread, "ood": list(ood)}
        claims += [
            Claim(
                "nli.copies_spread",
                "the copies' OOD non-entailed accuracies ({ood:3}) spread by {spread:3}, "
                "at least nli.min_spread = {min_spread}, so the counterexample-fraction sweep is not needed",
                spread - min_spread,
                values,
            ),
            Claim(
                "nli.copies_do_not_spread",
                "the copies' OOD non-entailed accuracies ({ood:3}) spread by only "
                "{spread:3}, less than nli.min_spread = {min_spread}, so the counterexample-fraction sweep "
                "runs",
                min_spread - spread,
                values,
            ),
        ]
    sweep = nli.get("sweep") or {}
    swept = (
        {
            _fraction_name(f["fraction"]): _span(f.get("span"))
            for f in sweep.get("fractions") or []
            if f.get("fraction") is not None
        }
        if not not_run_sentence("sweep", sweep) and sweep.get("status") == "swept"
        else {}
    )
    configured = nli.get("sweep_fractions") or list(swept) or DEFAULT_SWEEP_FRACTIONS
    names = list(dict.fromkeys(_fraction_name(f) for f in configured))
    spreads = {n: (None if (s := swept.get(n)) is None else s[1] - s[0]) for n in names}
    extra = {
        n: {"span": None if (s := swept.get(n)) is None else list(s), "spread": spreads[n], "min_spread": min_spread}
        for n in names
    }
    claims += best_of(
        "nli.sweep_widest",
        "the counterexample-fraction sweep spreads the copies' OOD non-entailed "
        "accuracy the most at fraction {name} (range {score:3}: {span:3}), the recommended "
        "nli.pairs.counterexample_fraction",
        spreads,
        higher=True,
        values=extra,
    )
    for name in names:
        fraction_spread = spreads[name]
        claims += [
            Claim(
                f"nli.sweep_spreads.{name}",
                "at counterexample fraction {fraction} the sweep's copies spread by at "
                "least nli.min_spread = {min_spread} (OOD non-entailed accuracy {span:3}, range {spread:3})",
                None if fraction_spread is None else fraction_spread - min_spread,
                {"fraction": name, **extra[name]},
            ),
            Claim(
                f"nli.sweep_does_not_spread.{name}",
                "at counterexample fraction {fraction} the sweep's copies "
                "spread by less than nli.min_spread = {min_spread} (OOD non-entailed accuracy {span:3}, range "
                "{spread:3})",
                None if fraction_spread is None else min_spread - fraction_spread,
                {"fraction": name, **extra[name]},
            ),
        ]
    return claims
