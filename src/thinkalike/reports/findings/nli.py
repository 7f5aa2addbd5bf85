"""The NLI paragraph of the findings (Brown et al. 2023 §4, offline): the copies' accuracies, their groups,
identity stitching within and between groups, CKA and the counterexample sweep
(:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from thinkalike.reports.findings.text import (as_float, guarded, int_list, int_text, ints_text, list_text,
                                              missing_section, not_run_sentence, number_text, range_text, span_of,
                                              table_of)


#: OOD penalties / fractions: an NLI copy is "mostly heuristic" below this OOD non-entailed accuracy.
HEURISTIC_BELOW = 0.5


RELATION_LABELS = {"between": "between groups", "within_generalizing": "within the generalizing copies",
                   "within_heuristic": "within the heuristic ones"}


SUBCASE_LABELS = {"passive": "passives", "relative_clause": "relative clauses", "preposition": "prepositional phrases",
                  "conjunction": "conjunctions", "swap": "swaps"}


def collect_nli(tables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The NLI paragraph's numbers: the copies' accuracies, the groups, identity stitching, CKA and the sweep."""
    groups, accuracy = table_of(tables, "models.nli.groups"), table_of(tables, "models.nli.accuracy")
    if groups is None or accuracy is None:
        return missing_section(*[n for n in ("models.nli.groups", "models.nli.accuracy") if table_of(tables,
                                                                                                     n) is None])
    from thinkalike.nli.analysis import BASELINE, GENERALIZING, HEURISTIC, accuracy_summary

    nli = parameters.get("nli") or {}
    result: dict[str, Any] = {}
    pairs = table_of(tables, "models.nli.pairs")
    pair_settings = nli.get("pairs") or {}
    if pairs is not None:
        sizes = pairs.groupby("split").size()
        ood = pairs[pairs["split"] == "ood"].groupby(["subcase", "label"]).size()
        result["pairs"] = {"train": int(sizes.get("train", 0)), "test": int(sizes.get("test", 0)),
                           "ood_subcases": int(pairs.loc[pairs["split"] == "ood", "subcase"].nunique()),
                           "ood_per_subcase_label": int_list(ood.values)}
    result["counterexample_fraction"] = as_float(pair_settings.get("counterexample_fraction"))
    result["counterexample_subcases"] = list(pair_settings.get("counterexample_subcases") or [])
    encoder = tables.get("models.nli.encoder.model_config")
    arch = (encoder.get("bridge_config") or encoder.get("architecture") or {}) if isinstance(encoder, Mapping) else {}
    result["encoder_layers"] = arch.get("n_layers") or ((nli.get("encoder") or {}).get("architecture") or {}).get("n_layers")
    curves = table_of(tables, "models.nli.training_curves")
    if curves is not None and "stage" in curves:
        tuned = curves[curves["stage"] == "fine-tuning"]
        result["finetune_steps"] = int_list(tuned.groupby("model")["step"].max()) if len(tuned) else []
    copies = groups
    baseline = accuracy_summary(accuracy[accuracy["model"] == BASELINE])
    base = baseline.iloc[0] if len(baseline) else None
    result["n_copies"] = int(len(copies))
    result["test"] = span_of(copies["test_accuracy"])
    result["ood_non_entailed"] = span_of(copies["ood_non_entailed_accuracy"])
    result["mostly_heuristic"] = bool((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).all())
    result["n_heuristic"] = int((copies["ood_non_entailed_accuracy"] < HEURISTIC_BELOW).sum())
    result["baseline"] = (None if base is None else
                          {"test": as_float(base["test_accuracy"]),
                           "ood_non_entailed": as_float(base["ood_non_entailed_accuracy"]),
                           "ood_entailed": as_float(base["ood_entailed_accuracy"])})
    ood = accuracy[(accuracy["split"] == "ood") & (accuracy["model"].isin(copies["model"]))]
    subcases = ood[(ood["subcase"] != "all") & (ood["label"] == "non_entailed")]
    by_subcase = subcases.groupby("subcase")["accuracy"]
    means = by_subcase.mean().sort_values(ascending=False, kind="mergesort")
    result["subcases"] = {str(s): {"span": span_of(by_subcase.get_group(s)),
                                   "mean": as_float(m)} for s, m in means.items()}
    result["highest_subcase"] = str(means.index[0]) if len(means) else None
    result["lowest_subcase"] = str(means.index[-1]) if len(means) else None
    overall = ood[ood["subcase"] == "all"].pivot_table(index="model", columns="label", values=["accuracy", "n_pairs"],
                                                        aggfunc="first")
    if {"entailed", "non_entailed"} <= set(overall["accuracy"].columns):
        said = ((overall["accuracy"]["entailed"] * overall["n_pairs"]["entailed"]
                 + (1 - overall["accuracy"]["non_entailed"]) * overall["n_pairs"]["non_entailed"])
                / (overall["n_pairs"]["entailed"] + overall["n_pairs"]["non_entailed"]))
        result["ood_said_entailed"] = span_of(said)
    gen = copies[copies["group"] == GENERALIZING]["ood_non_entailed_accuracy"]
    heur = copies[copies["group"] == HEURISTIC]["ood_non_entailed_accuracy"]
    result["groups"] = {"k": int(len(gen)), "generalizing": span_of(gen), "heuristic": span_of(heur)}
    result["stitching"] = guarded(_collect_nli_stitching, table_of(tables, "models.nli.stitching_groups"),
                                   table_of(tables, "models.nli.stitching"))
    result["cka"] = guarded(_collect_nli_cka, table_of(tables, "models.nli.cka_group_curves"))
    result["sweep"] = guarded(_collect_sweep, table_of(tables, "models.nli.sweep"))
    return result


def _collect_nli_stitching(by_group: pd.DataFrame | None, stitches: pd.DataFrame | None) -> dict[str, Any]:
    if by_group is None:
        return missing_section("models.nli.stitching_groups")
    from thinkalike.nli.analysis import RELATIONS
    from thinkalike.reports.nli import stitching_divergence

    test = by_group[by_group["data"] == "test"]
    if test.empty or not set(RELATIONS) <= set(test["relation"]):
        return {"empty": True}
    layers = int_list(test["layer"])
    curves = {relation: [as_float(test.loc[(test["relation"] == relation) & (test["layer"] == layer),
                                           "mean_penalty"].mean())
                         for layer in layers] for relation in RELATIONS}
    increasing = [r for r, values in curves.items() if all(b >= a for a, b in zip(values, values[1:]))]
    means = {r: float(np.nanmean([v for v in values if v is not None])) for r, values in curves.items()}
    strict, means_only = stitching_divergence(by_group, "test")
    ood = by_group[by_group["data"] == "ood"]
    ood_strict, ood_means_only = stitching_divergence(by_group, "ood") if len(ood) else ([], [])
    n_ordered = (int(len(stitches[["model_f", "model_g"]].drop_duplicates()))
                 if stitches is not None and len(stitches) else None)
    return {"layers": layers, "curves": curves, "increasing": increasing,
            "most_interchangeable": min(means, key=means.get), "diverge": strict, "diverge_means_only": means_only,
            "ood_span": span_of(ood["mean_penalty"]) if len(ood) else None,
            "ood_diverge": ood_strict, "ood_diverge_means_only": ood_means_only, "n_ordered_pairs": n_ordered}


def _collect_nli_cka(curves: pd.DataFrame | None) -> dict[str, Any]:
    if curves is None:
        return missing_section("models.nli.cka_group_curves")
    from thinkalike.reports.nli import cka_divergence

    deep = curves[curves["relative_depth"] > 0]
    if deep.empty:
        return {"empty": True}
    between = deep[deep["group_a"] != deep["group_b"]]
    within = deep[(deep["group_a"] == deep["group_b"]) & (deep["group_a"] != "middle")]
    strict, means_only = cka_divergence(curves)
    return {"depths": span_of(deep["relative_depth"]), "between": span_of(between["mean"]),
            "within": span_of(within["mean"]), "diverge": strict, "diverge_means_only": means_only}


def _collect_sweep(sweep: pd.DataFrame | None) -> dict[str, Any]:
    if sweep is None:
        return missing_section("models.nli.sweep")
    if sweep.empty:
        return {"empty": True}
    status = str(sweep["status"].iloc[0])
    if status != "swept":
        return {"status": status, "note": str(sweep["note"].iloc[0])}
    by_fraction = sweep.groupby("counterexample_fraction")["ood_non_entailed_accuracy"]
    return {"status": status, "fractions": [{"fraction": as_float(fraction), "span": span_of(values)}
                                            for fraction, values in by_fraction]}


def render_nli(findings: Mapping[str, Any]) -> str:
    """The NLI paragraph from the collected numbers."""
    nli = findings["nli"]
    if (message := not_run_sentence("NLI (Brown et al. §4 offline)", nli)):
        return message
    pairs = nli.get("pairs") or {}
    fraction = nli.get("counterexample_fraction")
    subcases = list_text(nli.get("counterexample_subcases") or [])
    per_label = ints_text(pairs.get("ood_per_subcase_label"))
    steps = ints_text(nli.get("finetune_steps"))
    head = (f"NLI (Brown et al. §4 offline; {int_text(pairs.get('train'))} training pairs with "
            f"{number_text((fraction or 0) * 100, 0)} % {subcases} counterexamples, {int_text(pairs.get('test'))} test pairs, "
            f"{pairs.get('ood_subcases', 'n/a')} × {per_label} OOD pairs per label; {nli['n_copies']} copies of one "
            f"{nli.get('encoder_layers') or 'n/a'}-layer encoder, {steps} fine-tuning steps each).")
    base = nli.get("baseline") or {}
    mccoy = findings["literature"]["mccoy_ood_non_entailed"]
    mostly = ("are all mostly heuristic out of distribution" if nli["mostly_heuristic"]
              else f"{nli['n_heuristic']} of {nli['n_copies']} are mostly heuristic out of distribution")
    text = (f"The copies score {range_text(nli['test'], 3)} in distribution (the lexical-overlap rule: "
            f"{number_text(base.get('test'), 3)}) and {mostly}: OOD non-entailed accuracy {range_text(nli['ood_non_entailed'])} "
            f"(the rule: {number_text(base.get('ood_non_entailed'))}; McCoy et al.'s 100 BERTs: {range_text(mccoy)})")
    if nli.get("highest_subcase") and nli["highest_subcase"] != nli["lowest_subcase"]:
        hi, lo = nli["highest_subcase"], nli["lowest_subcase"]
        text += (f", highest on {SUBCASE_LABELS.get(hi, hi)} ({range_text(nli['subcases'][hi]['span'])}) and lowest "
                 f"on {SUBCASE_LABELS.get(lo, lo)} ({range_text(nli['subcases'][lo]['span'])})")
    text += "."
    groups = nli["groups"]
    st = nli["stitching"]
    split = (f"Split into the top and bottom {groups['k']} of {nli['n_copies']} by that accuracy (generalizing "
             f"{range_text(groups['generalizing'])}, heuristic {range_text(groups['heuristic'])})")
    if (message := not_run_sentence("identity stitching", st)):
        text += f" {split}; {message}"
    else:
        layers = st["layers"]
        order = ["between", "within_generalizing", "within_heuristic"]
        curves = "; ".join(f"{RELATION_LABELS[r]} " + " / ".join(number_text(v) for v in st["curves"][r])
                           for r in order)
        if len(st["increasing"]) == len(order):
            deeper = "costs more accuracy the deeper it is for every relation"
        elif st["increasing"]:
            deeper = ("costs more accuracy the deeper it is " + list_text([RELATION_LABELS[r]
                                                                           for r in st["increasing"]])
                      + " but not for every relation")
        else:
            deeper = "does not cost more accuracy the deeper it is"
        most = st["most_interchangeable"]
        interchangeable = {"within_heuristic": "the heuristic copies are the most interchangeable",
                           "within_generalizing": "the generalizing copies are the most interchangeable",
                           "between": "copies of different groups are the most interchangeable"}[most]
        if st["diverge"]:
            verdict = (f"at layer(s) {list_text([str(v) for v in st['diverge']])} stitching *between* the groups is worse "
                       "than within both with separated intervals: the groups diverge there, as Brown et al. found")
        elif st["diverge_means_only"]:
            verdict = (f"stitching *between* the groups is worse than within both by the means only (an interval "
                       f"is undefined) at layer(s) {list_text([str(v) for v in st['diverge_means_only']])}")
        else:
            verdict = ("at no layer is stitching *between* the groups worse than within both with separated "
                       "intervals: the groups do not diverge as Brown et al. found")
        text += (f" {split}, identity stitching on in-distribution test pairs {deeper} — at layers "
                 f"{layers[0]}–{layers[-1]}: {curves} — so {interchangeable}, but {verdict}.")
        if st["ood_span"]:
            text += f" On OOD pairs the penalties are {range_text(st['ood_span'], 2, signed=True)}"
            said = nli.get("ood_said_entailed")
            if said and said[0] > 0.5:
                text += (f" (every copy answers \"entailed\" to most of them: "
                         f"{number_text(said[0] * 100, 0)}–{number_text(said[1] * 100, 0)} %)")
            text += "."
    cka = nli["cka"]
    if (message := not_run_sentence("CKA of the copies", cka)):
        text += " " + message
    else:
        separated = bool(cka["diverge"])
        text += (f" CKA {'separates the groups' if separated else 'does not separate the groups either'} "
                 f"(between {range_text(cka['between'])} vs within {range_text(cka['within'])} at relative depths "
                 f"{range_text(cka['depths'], 2)}"
                 + (f"; separated at {list_text([number_text(d) for d in cka['diverge']])}" if separated else "") +
                 ").")
    sweep = nli["sweep"]
    if (message := not_run_sentence("Counterexample-fraction sweep", sweep)):
        text += " " + message
    elif sweep["status"] == "swept":
        values = list_text([f"{range_text(f['span'])} at {number_text(f['fraction'], 2).rstrip('0').rstrip('.')}"
                        for f in sweep["fractions"]])
        text += f" A sweep of the counterexample fraction gives OOD non-entailed accuracy {values}."
    else:
        text += (" The counterexample-fraction sweep did not run (" + sweep["note"].replace(">=", "≥")
                 + "); `kedro run --pipelines nli --nodes models.nli.sweep_fractions --params "
                   "\"nli.min_spread=1.0,nli.sweep.n_copies=3\"` runs it.")
    text += (" How the encoder's pretraining masking decides how well the copies learn the task is measured by "
             "`benchmarks/nli_pretraining.py`, outside the default run.")
    return head + " " + text
