"""The measures-beyond-CKA paragraph of the findings and the guide to which measure to trust for what, from
``similarity_measures``, ``rogue_remedies``, ``similarity_calibration`` and ``measure_grounding``
(:mod:`thinkalike.reports.findings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from thinkalike.reports.findings.claims import Claim, best_of, every, mirrored
from thinkalike.reports.findings.text import (
    as_float,
    missing_section,
    not_run_sentence,
    number_text,
    pair_row,
    span_of,
    table_of,
)

if TYPE_CHECKING:
    import pandas as pd


def collect_measures(tables: Mapping[str, Any], roles: Mapping[str, Any]) -> dict[str, Any]:
    """Per measure: seed replicas against SoLU vs GeLU (different seeds); rogue-dimension shares; what the remedies
    change on CKA; the permutation calibration (per statistic and measure: z span, pairs at p ≤ 0.05, smallest and
    largest p, pairs); the grounding tests."""
    summary = table_of(tables, "similarity_measures")
    if summary is None or summary.empty:
        return missing_section("similarity_measures")
    return {
        "n_tokens": int(summary["n_tokens"].max()),
        "n_measures": int(summary["measure"].nunique()),
        "per_measure": _per_measure(summary, roles),
        "rogue": _rogue(table_of(tables, "dimension_shares")),
        "remedies": _remedies(table_of(tables, "rogue_remedies")),
        "calibration": _calibrated(table_of(tables, "similarity_calibration")),
        "grounding": _grounded(table_of(tables, "measure_grounding")),
    }


def _per_measure(summary: pd.DataFrame, roles: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per measure of ``similarity_measures``: the seed replicas' span against SoLU vs GeLU's (different seeds), and
    whether they separate (measures missing either are left out)."""
    replica_pairs = [
        (a, b) for group in roles["replicas"] for i, a in enumerate(group["models"]) for b in group["models"][i + 1 :]
    ]
    solu_gelu = [(p["solu"], p["gelu"]) for p in roles["solu_gelu"]]

    def values(rows: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> list[float]:
        found = (pair_row(rows, a, b) for a, b in pairs)
        return [float(row["matched_mean"]) for row in found if row is not None]

    per_measure = []
    for name, rows in summary.groupby("measure", sort=False):
        replicas, different = values(rows, replica_pairs), values(rows, solu_gelu)
        if not replicas or not different:
            continue
        distance = rows["kind"].iloc[0] == "distance"
        separates = (max(replicas) < min(different)) if distance else (min(replicas) > max(different))
        per_measure.append(
            {
                "measure": name,
                "kind": rows["kind"].iloc[0],
                "replicas": span_of(replicas),
                "solu_gelu": span_of(different),
                "separates": bool(separates),
            }
        )
    return per_measure


def _rogue(shares: pd.DataFrame | None) -> dict[str, Any] | None:
    """The largest top-1 dimension share of ``dimension_shares`` and where it is (``None`` without the table)."""
    if shares is None or not len(shares):
        return None
    top = shares.loc[shares["top1_share"].idxmax()]
    return {
        "max_top1": as_float(top["top1_share"]),
        "model": str(top["model"]),
        "layer": int(top["layer"]),
        "n_layers": int(len(shares)),
        "n_above_half": int((shares["top1_share"] > 0.5).sum()),
        "n_tokens": int(shares["n_tokens"].max()),
    }


def _remedies(remedies: pd.DataFrame | None) -> dict[str, Any] | None:
    """Per remedy of ``rogue_remedies``: the largest change it makes to CKA between two different models, against
    the raw representations (``None`` without the table)."""
    if remedies is None or not len(remedies):
        return None
    cross = remedies[(remedies["model_a"] != remedies["model_b"]) & (remedies["measure"] == "cka")]
    raw = cross[cross["variant"] == "raw"].set_index(["model_a", "model_b"])["matched_mean"]
    changes = {}
    for variant in sorted(set(cross["variant"]) - {"raw"}):
        other = cross[cross["variant"] == variant].set_index(["model_a", "model_b"])["matched_mean"]
        delta = (other - raw).dropna()
        if len(delta):
            pair = delta.abs().idxmax()
            changes[variant] = {
                "max_abs_change": as_float(abs(delta[pair])),
                "change": as_float(delta[pair]),
                "pair": list(pair),
                "n_pairs": int(len(delta)),
            }
    return changes


def _calibrated(calibration: pd.DataFrame | None) -> dict[str, Any] | None:
    """``similarity_calibration`` per statistic and measure: z span, pairs at p ≤ 0.05, smallest and largest p,
    pairs (``None`` without the table)."""
    if calibration is None or not len(calibration):
        return None
    calibrated: dict[str, Any] = {
        "n_pairs": int(calibration[["model_a", "model_b"]].drop_duplicates().shape[0]),
        "n_permutations": int(calibration["n_permutations"].max()),
        "statistics": {},
    }
    for (statistic, name), rows in calibration.groupby(["statistic", "measure"], sort=False):
        calibrated["statistics"].setdefault(statistic, []).append(
            {
                "measure": name,
                "z": span_of(rows["z"]),
                "n_significant": int((rows["p_value"] <= 0.05).sum()),
                "min_p": as_float(rows["p_value"].min()),
                "max_p": as_float(rows["p_value"].max()),
                "n_pairs": int(rows[["model_a", "model_b"]].drop_duplicates().shape[0]),
            }
        )
    return calibrated


def _grounded(grounding: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    """One entry per row of ``measure_grounding``: the grounding tests' scores (``None`` without the table)."""
    if grounding is None or not len(grounding):
        return None
    return [
        {
            "measure": str(row["measure"]),
            "kind": str(row["kind"]),
            "n_models": int(row["n_models"]),
            "monotonicity": as_float(row["monotonicity"]),
            "specificity": as_float(row["specificity"]),
            "chance": as_float(row["specificity_chance"]),
            "sensitivity": as_float(row.get("sensitivity")),
            "null_permuted": as_float(row.get("null_permuted")),
            "null_independent": as_float(row.get("null_independent")),
            "trained_vs_untrained": as_float(row.get("trained_vs_untrained")),
            "untrained_chance": as_float(row.get("trained_vs_untrained_chance")),
            "n_untrained_pairs": int(row.get("n_untrained_pairs") or 0),
        }
        for row in grounding.to_dict("records")
    ]


#: What a measure must score to be trusted for a test in the guide (:func:`_guide_tests`, :func:`_guide_claims`).
RANK_PASS = 0.7  # Spearman ρ of layer monotonicity and of sensitivity (the zoo's 2–8-layer models cap
#                  monotonicity near 0.8 for most measures: 0.7 separates the two that fall behind)
NULL_PASS = 0.05  # |mean alikeness| on inputs with no correspondence
AP_PASS = 0.99  # average precision of a ranking test (specificity, trained vs untrained)


# ---- claims ---------------------------------------------------------------------------------------------------------

#: The one-sided standard normal quantile of p = 0.05: a calibration z above it is significant at that level
#: (scipy.stats.norm.ppf(0.95)).
Z_SIGNIFICANCE = 1.6448536269514722
_STATISTIC_LABELS = {"matched_mean": "matched-layer means", "best": "best layer pairs"}


def _separations(entry: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(replicas closer, SoLU/GeLU closer) for one measure's spans: the gap between the nearer side's worst pair and
    the other side's best pair, in the measure's own units (a distance is closer when smaller); ``None`` when a
    span is missing."""
    replicas, solu_gelu = entry.get("replicas"), entry.get("solu_gelu")
    if not replicas or not solu_gelu or None in (*replicas, *solu_gelu):
        return None, None
    if entry.get("kind") == "distance":
        return float(solu_gelu[0]) - float(replicas[1]), float(replicas[0]) - float(solu_gelu[1])
    return float(replicas[0]) - float(solu_gelu[1]), float(solu_gelu[0]) - float(replicas[1])


def _separation_claims(per_measure: Sequence[Mapping[str, Any]]) -> list[Claim]:
    """Per measure ``m``, three claims of which at most one holds:

    * ``measures.replicas_vs_solu_gelu.<m>.replicas_closer``: every seed-replica pair is more alike than every SoLU
      vs GeLU pair; margin ``min(replicas) − max(SoLU/GeLU)`` for a similarity, ``min(SoLU/GeLU) − max(replicas)``
      for a distance;
    * ``….solu_gelu_closer``: the reverse; margin the same gap the other way round;
    * ``….overlap``: neither side more alike than every pair of the other; margin
      ``min(−replicas_closer, −solu_gelu_closer)``;

    and ``measures.replicas_vs_solu_gelu.every_measure``: replicas closer by every measure, margin the smallest
    ``replicas_closer`` margin."""
    claims: list[Claim] = []
    closer: list[float | None] = []
    lead = "Seed replicas are more alike than every SoLU vs GeLU pair (different seeds)"
    for entry in per_measure:
        name = str(entry["measure"])
        values = {
            "name": name,
            "kind": str(entry.get("kind")),
            "replicas": entry.get("replicas"),
            "solu_gelu": entry.get("solu_gelu"),
        }
        replicas_closer, solu_gelu_closer = _separations(entry)
        overlap = (
            None if replicas_closer is None or solu_gelu_closer is None else min(-replicas_closer, -solu_gelu_closer)
        )
        closer.append(replicas_closer)
        prefix = f"measures.replicas_vs_solu_gelu.{name}"
        item = "`{name}` (replicas {replicas}, SoLU vs GeLU {solu_gelu})"
        claims.append(
            Claim(
                f"{prefix}.replicas_closer",
                lead + " by `{name}` ({kind}: replicas {replicas}, SoLU vs GeLU {solu_gelu})",
                replicas_closer,
                values,
                group="Measures by which seed replicas are more alike than every SoLU vs GeLU pair (different seeds)",
                item=item,
            )
        )
        claims.append(
            Claim(
                f"{prefix}.solu_gelu_closer",
                "Every SoLU vs GeLU pair (different seeds) is more alike "
                "than every pair of seed replicas by `{name}` ({kind}: SoLU vs GeLU {solu_gelu}, replicas "
                "{replicas})",
                solu_gelu_closer,
                values,
                group="Measures by which every SoLU vs GeLU pair (different seeds) is more alike than "
                "every pair of seed replicas",
                item=item,
            )
        )
        claims.append(
            Claim(
                f"{prefix}.overlap",
                "By `{name}` seed replicas ({replicas}) and SoLU vs GeLU pairs "
                "({solu_gelu}) overlap: the replicas are not more alike than every SoLU vs GeLU pair",
                overlap,
                values,
                group="Measures by which seed replicas and SoLU vs GeLU pairs "
                "(different seeds) overlap, neither side more alike than every "
                "pair of the other",
                item=item,
            )
        )
    if per_measure:
        claims.append(
            every(
                "measures.replicas_vs_solu_gelu.every_measure",
                lead + " by every one of the {n:d} measures",
                closer,
                n=len(per_measure),
            )
        )
    return claims


def _rogue_claims(rogue: Mapping[str, Any] | None) -> list[Claim]:
    """``measures.rogue.none_above_half``: no layer's largest dimension carries more than half its variance, margin
    ``0.5 − max top-1 share``; ``measures.rogue.some_above_half``: the reverse, margin ``max share − 0.5``."""
    if not rogue:
        return []
    share = rogue.get("max_top1")
    values = {key: rogue.get(key) for key in ("max_top1", "model", "layer", "n_layers", "n_above_half")}
    layers = "{n_above_half:d} of {n_layers:d} layers are above one half"
    return [
        Claim(
            "measures.rogue.none_above_half",
            "Rogue dimensions: the largest dimension of any layer carries at "
            "most {max_top1:%} of its variance (`{model}`, layer {layer:d}), below one half: " + layers,
            None if share is None else 0.5 - float(share),
            values,
        ),
        Claim(
            "measures.rogue.some_above_half",
            "Rogue dimensions: the largest dimension of some layer carries "
            "more than one half of its variance, up to {max_top1:%} (`{model}`, layer {layer:d}); " + layers,
            None if share is None else float(share) - 0.5,
            values,
        ),
    ]


def _grounding_claims(grounding: Sequence[Mapping[str, Any]]) -> list[Claim]:
    """``measures.grounding.monotonicity_highest.<m>`` / ``monotonicity_lowest.<m>`` (:func:`best_of`: the gap to
    the runner-up); ``measures.grounding.specificity_lowest.<m>`` (:func:`best_of`). (Whether a measure's
    specificity passes is the guide's claim, :func:`_guide_claims`, with its size over the criterion.)"""
    if not grounding:
        return []
    models = max((g.get("n_models") or 0) for g in grounding)
    chance = next((g["chance"] for g in grounding if g.get("chance") is not None), None)
    monotonicity = {str(g["measure"]): g.get("monotonicity") for g in grounding}
    specificity = {str(g["measure"]): g.get("specificity") for g in grounding}
    extra = {str(g["measure"]): {"n_models": models, "chance": chance} for g in grounding}
    lead = (
        "Grounding: layer monotonicity within the {n_models:d} models compared with themselves (Spearman of "
        "alikeness against layer distance; chance 0) is "
    )
    claims = best_of(
        "measures.grounding.monotonicity_highest",
        lead + "highest for `{name}` ({score})",
        monotonicity,
        higher=True,
        values=extra,
    )
    claims += best_of(
        "measures.grounding.monotonicity_lowest",
        lead + "lowest for `{name}` ({score})",
        monotonicity,
        higher=False,
        values=extra,
    )
    about = "specificity (average precision of seed replicas above other architectures, chance {chance})"
    claims += best_of(
        "measures.grounding.specificity_lowest",
        "Grounding: " + about + " is lowest for `{name}` ({score})",
        specificity,
        higher=False,
        values=extra,
    )
    return claims


def _calibration_claims(calibration: Mapping[str, Any] | None) -> list[Claim]:
    """Per statistic ``s`` and measure ``m`` against the permutation null: ``measures.calibration.<s>.<m>.
    every_pair_significant``, margin ``smallest z − z₀.₀₅`` (the pairs' smallest z against the null's mean and
    spread, less the one-sided normal quantile 1.645 of p = 0.05) — a size, where the permutation p stops at its
    floor ``1 / (1 + shuffles)``; ``….some_pair_not_significant``, its negative."""
    if not calibration:
        return []
    claims: list[Claim] = []
    n_pairs, n_permutations = calibration.get("n_pairs"), calibration.get("n_permutations")
    statistics = calibration.get("statistics") or {}
    # the render's order (matched-layer means first), not the dict's: a JSON round trip may sort its keys
    for statistic in sorted(statistics, key=lambda s: (s != "matched_mean", s)):
        entries = statistics[statistic]
        label = _STATISTIC_LABELS.get(statistic, statistic)
        for entry in entries:
            name = str(entry["measure"])
            largest = None if entry.get("max_p") is None else float(entry["max_p"])
            z_span = entry.get("z")
            smallest_z = as_float(min(z_span) if isinstance(z_span, list) and z_span else z_span)
            values = {
                "name": name,
                "statistic": label,
                "z": entry.get("z"),
                "n_significant": entry.get("n_significant"),
                "n_pairs": entry.get("n_pairs", n_pairs),
                "n_permutations": n_permutations,
                "max_p": largest,
            }
            prefix = f"measures.calibration.{statistic}.{name}"
            against = "Against a permutation null of the token correspondence ({n_permutations:d} shuffles), "
            claims.append(
                Claim(
                    f"{prefix}.every_pair_significant",
                    against + "every one of the {n_pairs:d} pairs of different models lies above the null by "
                    "z > 1.64 (the one-sided 5 % normal quantile) by the {statistic} of `{name}` (z {z:+1}; "
                    "largest permutation p {max_p:3}, its floor with these shuffles being 1/(1 + shuffles))",
                    None if smallest_z is None else smallest_z - Z_SIGNIFICANCE,
                    values,
                    group=f"Measures whose {label} lie above a permutation null of the token correspondence by "
                    "z > 1.64 (one-sided 5 %) for every pair of different models",
                    item="`{name}` (z {z:+1}, {n_significant:d} of {n_pairs:d} pairs)",
                )
            )
            claims.append(
                Claim(
                    f"{prefix}.some_pair_not_significant",
                    against + "some pair of different models lies above the null by z ≤ 1.64 (the one-sided 5 % "
                    "normal quantile) by the {statistic} of `{name}` (z {z:+1}; {n_significant:d} of {n_pairs:d} "
                    "pairs have permutation p ≤ 0.05)",
                    None if smallest_z is None else Z_SIGNIFICANCE - smallest_z,
                    values,
                )
            )
    return claims


def _guide_tests(grounding: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Callable[[float], float], str, bool]]:
    """The guide's tests, in the guide's order: (key, what a measure passing it is to be trusted for, its excess
    over the criterion, the criterion in words, whether its scores are signed)."""
    chance = next((g["chance"] for g in grounding if g.get("chance") is not None), None)
    untrained = next((g for g in grounding if g.get("trained_vs_untrained") is not None), None)
    over_rank: Callable[[float], float] = lambda v: v - RANK_PASS  # noqa: E731
    near_zero: Callable[[float], float] = lambda v: NULL_PASS - abs(v)  # noqa: E731
    over_ap: Callable[[float], float] = lambda v: v - AP_PASS  # noqa: E731
    untrained_criterion = (
        f"average precision ≥ {number_text(AP_PASS)} over {untrained['n_untrained_pairs']} "
        f"trained-vs-untrained pairs; chance {number_text(untrained['untrained_chance'])}"
        if untrained
        else f"average precision ≥ {number_text(AP_PASS)}"
    )
    return [
        (
            "monotonicity",
            "to follow a model's layers in order",
            over_rank,
            f"layer monotonicity ρ ≥ {number_text(RANK_PASS, 1)}",
            False,
        ),
        (
            "sensitivity",
            "to register the loss of a layer's main directions",
            over_rank,
            f"ρ ≥ {number_text(RANK_PASS, 1)} as the top 1 … 5 principal components go",
            False,
        ),
        (
            "null_permuted",
            "to read 0 on rows with no correspondence",
            near_zero,
            f"|alikeness| ≤ {number_text(NULL_PASS)} with the rows shuffled",
            True,
        ),
        (
            "null_independent",
            "to read 0 on other inputs",
            near_zero,
            f"|alikeness| ≤ {number_text(NULL_PASS)} on other tokens",
            True,
        ),
        (
            "specificity",
            "to tell seed replicas from other architectures",
            over_ap,
            f"average precision ≥ {number_text(AP_PASS)}; chance {number_text(chance)}",
            False,
        ),
        ("trained_vs_untrained", "to tell a trained model from an untrained one", over_ap, untrained_criterion, False),
    ]


def _guide_claims(grounding: Sequence[Mapping[str, Any]]) -> list[Claim]:
    """Per guide test ``t`` and measure ``m`` (the criteria of :func:`_guide_tests`): ``measures.guide.<t>.
    passes.<m>``, margin ``score − threshold`` (ρ ≥ 0.7, average precision ≥ 0.99) or ``0.05 − |score|`` for
    the tests that must read 0 (a score exactly at the threshold passes in the guide's words, margin 0 here);
    ``measures.guide.<t>.fails.<m>``, its negation. Per measure, ``measures.guide.every_test.<m>``: it passes every
    test it was scored on, margin the smallest of those excesses (:func:`every`);
    ``measures.guide.no_measure_passes_every_test``: margin ``−max`` of those."""
    claims: list[Claim] = []
    names = [str(g["measure"]) for g in grounding]
    excesses: dict[str, list[float]] = {name: [] for name in names}
    for key, what, excess, criterion, signed in _guide_tests(grounding):
        score_spec = "{score:+2}" if signed else "{score}"
        for g in grounding:
            name, score = str(g["measure"]), g.get(key)
            margin = None if score is None else excess(float(score))
            if margin is not None:
                excesses[name].append(margin)
            values = {"name": name, "score": score}
            passes = Claim(
                f"measures.guide.{key}.passes.{name}",
                f"`{{name}}` is to be trusted {what} ({criterion}): {score_spec}",
                margin,
                values,
                group=f"{what[:1].upper()}{what[1:]} ({criterion})",
                item=f"`{{name}}` ({score_spec})",
            )
            claims += mirrored(
                passes,
                f"measures.guide.{key}.fails.{name}",
                f"`{{name}}` is not to be trusted {what} ({criterion}): {score_spec}",
                group=f"Not to be trusted {what} ({criterion})",
                item=f"`{{name}}` ({score_spec})",
            )
    passes_all: list[float | None] = []
    for name in names:
        claim = every(
            f"measures.guide.every_test.{name}",
            "`{name}` passes every one of the {n_tests:d} tests of the guide it was scored on",
            excesses[name],
            name=name,
            n_tests=len(excesses[name]),
        )
        claims.append(Claim(claim.id, claim.template, claim.margin, claim.values, group="Every test", item="`{name}`"))
        passes_all.append(claim.margin)
    known = [m for m in passes_all if m is not None]
    claims.append(
        Claim(
            "measures.guide.no_measure_passes_every_test",
            "No measure passes every test of the guide",
            -max(known) if known else None,
            {},
        )
    )
    return claims


def claims_measures(findings: Mapping[str, Any]) -> list[Claim]:
    """The claims of the measures-beyond-CKA section (replicas against SoLU/GeLU per measure, rogue dimensions,
    grounding, calibration) and of the guide to which measure to trust for what, from the whole findings dict;
    ``[]`` when the section is missing or errored.
    Each claim's margin is stated where it is built: :func:`_separation_claims` (replicas against SoLU/GeLU per
    measure), :func:`_rogue_claims`, :func:`_grounding_claims`, :func:`_calibration_claims`, :func:`_guide_claims`.
    What the remedies change on CKA ("by at most …") compares with nothing and is not a claim."""
    measures = findings.get("measures") or missing_section("similarity_measures")
    if not_run_sentence("Measures beyond CKA", measures):
        return []
    grounding = measures.get("grounding") or []
    return [
        *_separation_claims(measures.get("per_measure") or []),
        *_rogue_claims(measures.get("rogue")),
        *_grounding_claims(grounding),
        *_calibration_claims(measures.get("calibration")),
        *_guide_claims(grounding),
    ]
