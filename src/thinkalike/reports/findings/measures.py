"""The measures-beyond-CKA paragraph of the findings and the guide to which measure to trust for what, from
``similarity_measures``, ``rogue_remedies``, ``similarity_calibration`` and ``measure_grounding``
(:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from thinkalike.reports.findings.text import (as_float, code_text, int_text, list_text, missing_section,
                                              not_run_sentence, number_text, pair_row, range_text, signed_text, span_of,
                                              table_of)


def collect_measures(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """Per measure: seed replicas against SoLU vs GeLU (different seeds); rogue-dimension shares; what the remedies
    change on CKA."""
    summary = table_of(tables, "similarity_measures")
    if summary is None or summary.empty:
        return missing_section("similarity_measures")
    replica_pairs = [(a, b) for group in roles["replicas"] for i, a in enumerate(group["models"])
                     for b in group["models"][i + 1:]]
    solu_gelu = [(p["solu"], p["gelu"]) for p in roles["solu_gelu"]]
    per_measure = []
    for name, rows in summary.groupby("measure", sort=False):
        def values(pairs: Sequence[tuple[str, str]]) -> list[float]:
            found = (pair_row(rows, a, b) for a, b in pairs)
            return [float(row["matched_mean"]) for row in found if row is not None]

        replicas, different = values(replica_pairs), values(solu_gelu)
        if not replicas or not different:
            continue
        distance = rows["kind"].iloc[0] == "distance"
        separates = (max(replicas) < min(different)) if distance else (min(replicas) > max(different))
        per_measure.append({"measure": name, "kind": rows["kind"].iloc[0], "replicas": span_of(replicas),
                            "solu_gelu": span_of(different), "separates": bool(separates)})
    shares = table_of(tables, "dimension_shares")
    rogue = None
    if shares is not None and len(shares):
        top = shares.loc[shares["top1_share"].idxmax()]
        rogue = {"max_top1": as_float(top["top1_share"]), "model": str(top["model"]), "layer": int(top["layer"]),
                 "n_layers": int(len(shares)), "n_above_half": int((shares["top1_share"] > 0.5).sum()),
                 "n_tokens": int(shares["n_tokens"].max())}
    remedies = table_of(tables, "rogue_remedies")
    changes = None
    if remedies is not None and len(remedies):
        cross = remedies[(remedies["model_a"] != remedies["model_b"]) & (remedies["measure"] == "cka")]
        raw = cross[cross["variant"] == "raw"].set_index(["model_a", "model_b"])["matched_mean"]
        changes = {}
        for variant in sorted(set(cross["variant"]) - {"raw"}):
            other = cross[cross["variant"] == variant].set_index(["model_a", "model_b"])["matched_mean"]
            delta = (other - raw).dropna()
            if len(delta):
                pair = delta.abs().idxmax()
                changes[variant] = {"max_abs_change": as_float(abs(delta[pair])), "change": as_float(delta[pair]),
                                    "pair": list(pair), "n_pairs": int(len(delta))}
    calibration = table_of(tables, "similarity_calibration")
    calibrated = None
    if calibration is not None and len(calibration):
        calibrated = {"n_pairs": int(calibration[["model_a", "model_b"]].drop_duplicates().shape[0]),
                      "n_permutations": int(calibration["n_permutations"].max()), "statistics": {}}
        for (statistic, name), rows in calibration.groupby(["statistic", "measure"], sort=False):
            calibrated["statistics"].setdefault(statistic, []).append(
                {"measure": name, "z": span_of(rows["z"]), "n_significant": int((rows["p_value"] <= 0.05).sum()),
                 "min_p": as_float(rows["p_value"].min())})
    grounding = table_of(tables, "measure_grounding")
    grounded = None
    if grounding is not None and len(grounding):
        grounded = [{"measure": str(row["measure"]), "kind": str(row["kind"]), "n_models": int(row["n_models"]),
                     "monotonicity": as_float(row["monotonicity"]), "specificity": as_float(row["specificity"]),
                     "chance": as_float(row["specificity_chance"]), "sensitivity": as_float(row.get("sensitivity")),
                     "null_permuted": as_float(row.get("null_permuted")),
                     "null_independent": as_float(row.get("null_independent")),
                     "trained_vs_untrained": as_float(row.get("trained_vs_untrained")),
                     "untrained_chance": as_float(row.get("trained_vs_untrained_chance")),
                     "n_untrained_pairs": int(row.get("n_untrained_pairs") or 0)}
                    for row in grounding.to_dict("records")]
    return {"n_tokens": int(summary["n_tokens"].max()), "n_measures": int(summary["measure"].nunique()),
            "per_measure": per_measure, "rogue": rogue, "remedies": changes, "calibration": calibrated,
            "grounding": grounded}


def _remedy_label(variant: str) -> str:
    """``standardised`` / ``top<k>_removed`` (:mod:`thinkalike.reports.measures`) in words."""
    if variant == "standardised":
        return "standardising every dimension"
    return f"removing each layer's top {variant.removeprefix('top').removesuffix('_removed')} dimensions"


def render_measures(findings: Mapping[str, Any]) -> str:
    """The measures-beyond-CKA paragraph (replicas against SoLU/GeLU per measure, rogue dimensions, grounding,
    calibration) from the collected numbers."""
    measures = findings.get("measures") or missing_section("similarity_measures")
    if (message := not_run_sentence("Measures beyond CKA", measures)):
        return message
    sentences = [f"Measures beyond CKA ({measures['n_measures']} measures on {int_text(measures['n_tokens'])} rows per "
                 "pair)."]
    per = measures["per_measure"]
    if per:
        separating = [m["measure"] for m in per if m["separates"]]
        others = [m["measure"] for m in per if not m["separates"]]
        text = (f"Seed replicas are more alike than every SoLU vs GeLU pair (different seeds) by "
                f"{len(separating)} of {len(per)} measures" + (f" ({list_text([code_text(m) for m in separating])})"
                                                              if separating else ""))
        if others:
            detail = list_text([f"{code_text(m['measure'])} (replicas {range_text(m['replicas'])}, SoLU vs GeLU "
                            f"{range_text(m['solu_gelu'])})" for m in per if not m["separates"]])
            text += f"; not by {detail}"
        sentences.append(text + ".")
    rogue = measures.get("rogue")
    if rogue:
        sentences.append(f"Rogue dimensions: the largest dimension of any layer carries at most "
                         f"{number_text(rogue['max_top1'] * 100, 0)} % of its variance ({code_text(rogue['model'])}, layer "
                         f"{rogue['layer']}); {rogue['n_above_half']} of {rogue['n_layers']} layers are above one half.")
    remedies = measures.get("remedies") or {}
    if remedies:
        parts = [f"{_remedy_label(variant)} by at most {number_text(change['max_abs_change'])} ({code_text(change['pair'][0])} "
                 f"vs {code_text(change['pair'][1])}: {signed_text(change['change'])})"
                 for variant, change in remedies.items()]
        n_pairs = max(change["n_pairs"] for change in remedies.values())
        sentences.append(f"Over the {n_pairs} pairs of different models, matched-layer CKA changes with "
                         f"{list_text(parts)}.")
    grounding = [g for g in measures.get("grounding") or [] if g["monotonicity"] is not None]
    if grounding:
        ranked = sorted(grounding, key=lambda g: -g["monotonicity"])
        models = max(g["n_models"] for g in grounding)
        text = (f"Grounding: layer monotonicity within the {models} models compared with themselves (Spearman of "
                f"alikeness against layer distance; chance 0) is highest for {code_text(ranked[0]['measure'])} "
                f"({number_text(ranked[0]['monotonicity'])}) and lowest for {code_text(ranked[-1]['measure'])} "
                f"({number_text(ranked[-1]['monotonicity'])})")
        specific = [g for g in grounding if g["specificity"] is not None]
        if specific:
            perfect = [g["measure"] for g in specific if g["specificity"] >= 1 - 1e-9]
            worst = min(specific, key=lambda g: g["specificity"])
            text += (f"; specificity (average precision of seed replicas above other architectures, chance "
                     f"{number_text(specific[0]['chance'])}) is 1 for {len(perfect)} of {len(specific)} measures, lowest "
                     f"for {code_text(worst['measure'])} ({number_text(worst['specificity'])})")
        sentences.append(text + ".")
    calibration = measures.get("calibration")
    if calibration:
        parts = []
        for statistic, label in (("matched_mean", "matched-layer means"), ("best", "best layer pairs")):
            entries = calibration["statistics"].get(statistic) or []
            if entries:
                parts.append(f"{label}: "
                             + list_text([f"{code_text(e['measure'])} z {range_text(e['z'], 1, signed=True)}, "
                                                    f"{e['n_significant']} at p ≤ 0.05" for e in entries]))
        sentences.append(f"Against a permutation null of the token correspondence ({calibration['n_permutations']} "
                         f"shuffles, smallest possible p {number_text(1 / (calibration['n_permutations'] + 1), 3)}; "
                         f"{calibration['n_pairs']} pairs of different models): " + "; ".join(parts) + ".")
    return " ".join(sentences)


#: What a measure must score to be trusted for a test in the guide (:func:`render_measure_guide`).
RANK_PASS = 0.7  # Spearman ρ of layer monotonicity and of sensitivity (the zoo's 2–8-layer models cap


#                  monotonicity near 0.8 for most measures: 0.7 separates the two that fall behind)
NULL_PASS = 0.05  # |mean alikeness| on inputs with no correspondence


AP_PASS = 0.99  # average precision of a ranking test (specificity, trained vs untrained)


def _scores(grounding: Sequence[Mapping[str, Any]], test: str) -> list[tuple[str, float]]:
    return [(g["measure"], g[test]) for g in grounding if g.get(test) is not None]


def _guide_line(what: str, scored: list[tuple[str, float]], passes: Any, criterion: str, signed: bool = False) -> str:
    """"<what> (<criterion>): <passing measures>; not <failing ones, worst first, with their scores>"."""
    good = [name for name, value in scored if passes(value)]
    bad = sorted([(name, value) for name, value in scored if not passes(value)], key=lambda item: abs(item[1]),
                 reverse=True)
    text = f"{what} ({criterion}): " + (list_text([code_text(name) for name in good]) if good else "no measure")
    if bad:
        text += "; not " + list_text([f"{code_text(name)} ({signed_text(value, 2) if signed else number_text(value)})"
                                 for name, value in bad])
    return text


def render_measure_guide(findings: Mapping[str, Any]) -> str | None:
    """**Which measure to trust for what**: per grounding test, the measures that pass it (criteria above) and
    the scores of those that do not; then the measures that pass every test that was run."""
    measures = findings.get("measures") or {}
    grounding = measures.get("grounding") or []
    if not grounding or "error" in measures:
        return None
    lines, passed = [], {g["measure"]: True for g in grounding}

    def test(key: str, what: str, passes: Any, criterion: str, signed: bool = False) -> None:
        scored = _scores(grounding, key)
        if scored:
            lines.append(_guide_line(what, scored, passes, criterion, signed))
            for name, value in scored:
                passed[name] = passed[name] and bool(passes(value))

    test("monotonicity", "to follow a model's layers in order", lambda v: v >= RANK_PASS,
         f"layer monotonicity ρ ≥ {number_text(RANK_PASS, 1)}")
    test("sensitivity", "to register the loss of a layer's main directions", lambda v: v >= RANK_PASS,
         f"ρ ≥ {number_text(RANK_PASS, 1)} as the top 1 … 5 principal components go")
    test("null_permuted", "to read 0 on rows with no correspondence", lambda v: abs(v) <= NULL_PASS,
         f"|alikeness| ≤ {number_text(NULL_PASS)} with the rows shuffled", signed=True)
    test("null_independent", "to read 0 on other inputs", lambda v: abs(v) <= NULL_PASS,
         f"|alikeness| ≤ {number_text(NULL_PASS)} on other tokens", signed=True)
    chance = next((g["chance"] for g in grounding if g.get("chance") is not None), None)
    test("specificity", "to tell seed replicas from other architectures", lambda v: v >= AP_PASS,
         f"average precision ≥ {number_text(AP_PASS)}; chance {number_text(chance)}")
    untrained = next((g for g in grounding if g.get("trained_vs_untrained") is not None), None)
    if untrained:
        test("trained_vs_untrained", "to tell a trained model from an untrained one", lambda v: v >= AP_PASS,
             f"average precision ≥ {number_text(AP_PASS)} over {untrained['n_untrained_pairs']} trained-vs-untrained pairs; "
             f"chance {number_text(untrained['untrained_chance'])}")
    if not lines:
        return None
    every = [name for name, ok in passed.items() if ok]
    closing = (f"Every test: {list_text([code_text(name) for name in every])}." if every
               else "No measure passes every test.")
    return ("**Which measure to trust for what** (from `measure_grounding` of this run; the criteria are ours, "
            "the scores the table's): " + "; ".join(lines) + ". " + closing)
