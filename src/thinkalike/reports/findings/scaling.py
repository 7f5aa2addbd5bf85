"""The scaling family's claims (Brown et al. 2023 §5), from the saved ``scaling_summary`` as collected
(``findings["scaling"]``): one claim per answer to each question of Brown et al. 2023 §5 (early layers, blocks,
intra-model similarity vs scale, the outlier and its cause; :mod:`thinkalike.scaling.analysis`), each verdict a claim
(:mod:`thinkalike.reports.findings.claims`) whose margin decides it.

The summary does not save the robust-z threshold of its outlier flags: it is read from ``outlier_z`` when a summary
has it, else the analysis's default :data:`thinkalike.measures.scaling_summaries.OUTLIER_Z` (``scaling.outlier_z`` in the
parameters). A robust z of ±∞ (a family whose MAD is 0) is saved as ``null``: a member the summary flags then counts
as :data:`INFINITE_Z`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from thinkalike.measures.scaling_summaries import OUTLIER_Z
from thinkalike.reports.findings.claims import Claim, best_of, either_way, every, every_some_none, mirrored
from thinkalike.reports.findings.text import as_float, missing_section, not_run_sentence

#: Spearman ρ of intra-model similarity against size from which the paper's rise is "reproduced".
RHO_REPRODUCED = 0.7
#: |robust z| standing for an infinite one (saved as ``null``) of a member the summary flags.
INFINITE_Z = 1e6

_PAPER_EARLY = "the paper finds early layers highly similar across Pythia sizes"
_PAPER_BLOCKS = "the paper sees blocks of consecutive similar layers"
_PAPER_INTRA = "the paper finds it rising with scale, fig. 10"
_PAPER_OUTLIER = "the paper finds pythia-2.8b unlike every other member"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _abs_z(z: Any, flagged: bool) -> float | None:
    """``|z|``; for a ``null`` z (±∞ saved as JSON), :data:`INFINITE_Z` when the summary flags the member, else
    ``None``."""
    number = _number(z)
    if number is not None:
        return abs(number)
    return INFINITE_Z if flagged else None


def _both(a: float | None, b: float | None) -> float | None:
    """``min(a, b)``: the margin of "a and b" (``None`` when either is)."""
    return None if a is None or b is None else min(a, b)


def _neg(value: float | None) -> float | None:
    return None if value is None else -value


def _early_claims(summary: Mapping[str, Any]) -> list[Claim]:
    """Per early relative depth ``d`` (``early_depths``), with ``band`` the pairs' mean intermediate-band CKA:

    * ``scaling.early.<d>.mean_above_band``: margin ``mean − band`` (the mean over pairs of members of their matched
      early layers' CKA); ``….mean_below_band``: ``band − mean``;
    * ``scaling.early.<d>.every_pair_above_band``: margin ``min − band`` (the lowest pair);
      ``….some_pair_below_band``: ``band − min``;

    and the verdict: ``scaling.early.reproduced``, margin
    ``lowest − band`` (every pair at every depth above the band); ``scaling.early.not_reproduced``, margin
    ``band − highest mean`` (no depth's mean above it); ``scaling.early.inconclusive``, margin
    ``min(highest mean − band, band − lowest)`` (a mean above it, some pair not)."""
    early = summary.get("early") or {}
    band = _number(summary.get("band_mean_between_members"))
    if not early:
        return []
    claims: list[Claim] = []
    for depth, entry in sorted(early.items(), key=lambda item: float(item[0])):
        claims += _early_depth_claims(str(depth), entry, band)
    return claims + _early_verdicts(early, band)


def _early_depth_claims(depth: str, entry: Mapping[str, Any], band: float | None) -> list[Claim]:
    """One early relative depth's claims: its mean (and its lowest pair) above or below ``band`` (margins:
    :func:`_early_claims`)."""
    mean, low = _number(entry.get("mean")), _number(entry.get("min"))
    values = {"depth": depth, "mean": mean, "min": low, "max": _number(entry.get("max")), "band": band}
    at = (
        "At relative depth {depth} matched early layers have mean CKA {mean} over the pairs of members (lowest {min}), "
    )
    prefix = f"scaling.early.{depth}"
    return [
        *either_way(
            f"{prefix}.mean_above_band",
            at + "above the {band} of their intermediate layers",
            f"{prefix}.mean_below_band",
            at + "below the {band} of their intermediate layers",
            mean,
            band,
            **values,
        ),
        *either_way(
            f"{prefix}.every_pair_above_band",
            "At relative depth {depth} every pair of members has "
            "matched early-layer CKA above the {band} of their intermediate layers (lowest {min})",
            f"{prefix}.some_pair_below_band",
            "At relative depth {depth} some pair of members has "
            "matched early-layer CKA below the {band} of their intermediate layers (lowest {min})",
            low,
            band,
            **values,
        ),
    ]


def _early_verdicts(early: Mapping[str, Any], band: float | None) -> list[Claim]:
    """Early layers across scale: reproduced, inconclusive or not reproduced (margins: :func:`_early_claims`)."""
    lows = [v for entry in early.values() if (v := _number(entry.get("min"))) is not None]
    means = [v for entry in early.values() if (v := _number(entry.get("mean"))) is not None]
    lowest = min(lows) if len(lows) == len(early) else None
    highest = max(means) if len(means) == len(early) else None
    values = {"lowest": lowest, "highest_mean": highest, "band": band}
    reproduced = None if lowest is None or band is None else lowest - band
    not_reproduced = None if highest is None or band is None else band - highest
    return [
        Claim(
            "scaling.early.reproduced",
            f"Early layers across scale: reproduced ({_PAPER_EARLY}): at "
            "every early depth every pair of members has matched early-layer CKA above the {band} of their "
            "intermediate layers (lowest {lowest})",
            reproduced,
            values,
        ),
        Claim(
            "scaling.early.inconclusive",
            f"Early layers across scale: inconclusive ({_PAPER_EARLY}): "
            "matched early layers of the members have mean CKA up to {highest_mean}, above the {band} of "
            "their intermediate layers, but some pair is below it (lowest {lowest})",
            _both(_neg(not_reproduced), _neg(reproduced)),
            values,
        ),
        Claim(
            "scaling.early.not_reproduced",
            f"Early layers across scale: not reproduced ({_PAPER_EARLY}): "
            "at no early depth is the mean CKA of matched early layers ({highest_mean} at most) above the "
            "{band} of their intermediate layers",
            not_reproduced,
            values,
        ),
    ]


def _block_claims(summary: Mapping[str, Any]) -> list[Claim]:
    """Block structure as contrasts (``within − between`` of the best split, in CKA; the summary's
    ``block_contrast`` and ``pair_block_contrast``) over the threshold ``min_contrast``:

    * ``scaling.blocks.member.<m>``: ``m``'s intra-model CKA has blocks, margin its contrast − the threshold;
    * ``scaling.blocks.pair.<a>.<b>`` (every pair of members, family order): their CKA matrix has matched blocks,
      margin the matched contrast − the threshold;
    * the verdict: ``scaling.blocks.reproduced`` (every member), margin the smallest member margin;
      ``scaling.blocks.partly_reproduced`` (some but not all), ``min(largest, −smallest)``;
      ``scaling.blocks.not_reproduced`` (none), ``−largest``."""
    family = [str(m) for m in summary.get("family") or []]
    if not family:
        return []
    threshold = as_float(summary.get("min_contrast"))
    contrasts, pair_contrasts = summary["block_contrast"], summary["pair_block_contrast"]

    def over(contrast: Any) -> float | None:
        value = as_float(contrast)
        return None if value is None or threshold is None else value - threshold

    claims: list[Claim] = []
    members: list[float | None] = []
    for model in family:
        margin = over(contrasts.get(model))
        members.append(margin)
        claims.append(
            Claim(
                f"scaling.blocks.member.{model}",
                "`{name}`'s intra-model CKA has blocks of consecutive similar layers (contrast {contrast:3} ≥ "
                "{threshold})",
                margin,
                {"name": model, "contrast": as_float(contrasts.get(model)), "threshold": threshold},
                group="Members of the family whose intra-model CKA has blocks of consecutive similar "
                "layers (within − between, against the threshold)",
                item="`{name}` ({contrast:3})",
            )
        )
    for i, a in enumerate(family):
        for b in family[i + 1 :]:
            contrast = pair_contrasts.get(f"{a}–{b}", pair_contrasts.get(f"{b}–{a}"))
            claims.append(
                Claim(
                    f"scaling.blocks.pair.{a}.{b}",
                    "Between `{a}` and `{b}` the CKA matrix has matched blocks (a's early block with b's early block, "
                    "and so on; contrast {contrast:3} ≥ {threshold})",
                    over(contrast),
                    {"a": a, "b": b, "contrast": as_float(contrast), "threshold": threshold},
                    group="Pairs of members whose CKA matrices have matched blocks (a's early block with "
                    "b's early block, and so on; contrast against the threshold)",
                    item="`{a}` and `{b}` ({contrast:3})",
                )
            )
    return claims + _block_verdicts(members, threshold)


def _block_verdicts(members: list[float | None], threshold: float | None) -> list[Claim]:
    """Block structure's verdicts from the members' margins (contrast − threshold): reproduced (every member, the
    smallest margin), partly (``min(largest, −smallest)``), not reproduced (``−largest``): :func:`every_some_none`."""
    known = [m for m in members if m is not None]
    values = {
        "n_structured": sum(m > 0 for m in known),
        "n_members": len(members),
        "contrast": [min(known) + (threshold or 0.0), max(known) + (threshold or 0.0)] if known else None,
        "threshold": threshold,
    }
    counts = "{n_structured:d} of {n_members:d} members have blocks (contrast {contrast:3}; threshold {threshold})"
    return every_some_none(
        ("scaling.blocks.reproduced", "scaling.blocks.partly_reproduced", "scaling.blocks.not_reproduced"),
        (
            f"Block structure: reproduced ({_PAPER_BLOCKS}): " + counts,
            f"Block structure: partly reproduced ({_PAPER_BLOCKS}): " + counts,
            f"Block structure: not reproduced ({_PAPER_BLOCKS}): " + counts,
        ),
        members,
        values,
    )


def _intra_claims(summary: Mapping[str, Any]) -> list[Claim]:
    """Spearman ρ of each member's mean off-diagonal intra-model CKA against its size; the verdict is *reproduced*
    from :data:`RHO_REPRODUCED` on, *inconclusive* when positive below it, else *not reproduced*:
    ``scaling.intra_vs_size.reproduced``, margin ``ρ − 0.7``; ``scaling.intra_vs_size.inconclusive``,
    ``min(ρ, 0.7 − ρ)``; ``scaling.intra_vs_size.not_reproduced``, ``−ρ``."""
    if "intra_vs_size_spearman" not in summary:
        return []
    rho = _number(summary.get("intra_vs_size_spearman"))
    intra = summary.get("intra_mean") or {}
    values: dict[str, Any] = {"rho": rho}
    parts = []
    for index, (model, value) in enumerate(intra.items()):
        values[f"intra_{index}"] = _number(value)
        parts.append(f"`{model}` {{intra_{index}}}")
    members = f" ({', '.join(parts)})" if parts else ""

    def text(verdict: str, bound: str) -> str:
        return (
            f"Intra-model similarity vs scale: {verdict} ({_PAPER_INTRA}): Spearman ρ = {{rho}} ({bound}) between "
            f"size and mean off-diagonal CKA{members}"
        )

    return [
        Claim(
            "scaling.intra_vs_size.reproduced",
            text("reproduced", f"≥ {RHO_REPRODUCED}"),
            None if rho is None else rho - RHO_REPRODUCED,
            values,
        ),
        Claim(
            "scaling.intra_vs_size.inconclusive",
            text("inconclusive", f"between 0 and {RHO_REPRODUCED}"),
            None if rho is None else min(rho, RHO_REPRODUCED - rho),
            values,
        ),
        Claim("scaling.intra_vs_size.not_reproduced", text("not reproduced", "≤ 0"), _neg(rho), values),
    ]


def _outlier_claims(summary: Mapping[str, Any], threshold: float) -> list[Claim]:
    """Each member's robust z of its mean intermediate-band CKA against the other members:

    * ``scaling.outlier.member.<m>``: ``m`` lies beyond the threshold, margin ``|z| − outlier_z``;
    * ``scaling.outlier.reproduced`` (in kind: some member beyond it), margin ``max |z| − outlier_z``;
      ``scaling.outlier.none`` (not reproduced: every member within), margin ``outlier_z − max |z|`` (:func:`every`);
    * ``scaling.outlier.most_extreme.<m>``: ``m`` has the largest ``|z|`` (:func:`best_of`, the gap to the next);
    * per off-trend member ``o`` (of ``twins``): ``scaling.outlier.off_trend.<o>``: the off-trend member is an
      outlier, as pythia-2.8b in the paper, margin ``|z_o| − outlier_z``; ``scaling.outlier.not_off_trend.<o>``: some
      other member is and ``o`` is not, margin ``min(max_{m≠o} |z_m| − outlier_z, outlier_z − |z_o|)``."""
    family = [str(m) for m in summary.get("family") or []]
    z = summary.get("robust_z") or {}
    if not family or not z:
        return []
    flagged = set(summary.get("outliers") or [])
    sizes = {m: _abs_z(z.get(m), m in flagged) for m in family}
    beyond = {m: None if size is None else size - threshold for m, size in sizes.items()}
    claims: list[Claim] = []
    for model in family:
        claims.append(
            Claim(
                f"scaling.outlier.member.{model}",
                "`{name}`'s intermediate-layer CKA against the other "
                "members lies beyond the robust-z threshold {threshold:1} (z {z})",
                beyond[model],
                {"name": model, "z": _number(z.get(model)), "threshold": threshold},
                group="Outlier: reproduced in kind — members whose intermediate-layer CKA against the "
                "others lies beyond the robust-z threshold",
                item="`{name}` (robust z {z})",
            )
        )
    claims += _outlier_verdicts(family, z, sizes, beyond, threshold)
    for twin in summary.get("twins") or []:
        claims += _off_trend_claims(str(twin["off_trend"]), z, beyond, threshold)
    return claims


def _outlier_verdicts(
    family: Sequence[str],
    z: Mapping[str, Any],
    sizes: Mapping[str, float | None],
    beyond: Mapping[str, float | None],
    threshold: float,
) -> list[Claim]:
    """The outlier reproduced in kind (some member beyond the threshold) or not (none), and which member has the
    most extreme robust z (margins: :func:`_outlier_claims`)."""
    known = [v for v in sizes.values() if v is not None]
    largest = max(known) if known and len(known) == len(sizes) else None
    values: dict[str, Any] = {"threshold": threshold, "max_abs_z": largest}
    beyond_text = (
        "intermediate-layer CKA against the others lies beyond the robust-z threshold {threshold:1} "
        "(largest |z| {max_abs_z})"
    )
    return [
        Claim(
            "scaling.outlier.reproduced",
            f"Outlier: reproduced in kind ({_PAPER_OUTLIER}): some member's " + beyond_text,
            None if largest is None else largest - threshold,
            values,
        ),
        every(
            "scaling.outlier.none",
            f"Outlier: not reproduced ({_PAPER_OUTLIER}): no member's " + beyond_text,
            [_neg(v) for v in beyond.values()],
            **values,
        ),
        *best_of(
            "scaling.outlier.most_extreme",
            "Of the family's members, `{name}` has the most extreme robust z "
            "of intermediate-layer CKA against the others (z {z})",
            sizes,
            higher=True,
            values={m: {"z": _number(z.get(m))} for m in family},
        ),
    ]


def _off_trend_claims(
    odd: str, z: Mapping[str, Any], beyond: Mapping[str, float | None], threshold: float
) -> list[Claim]:
    """The off-trend member ``odd`` is the outlier, or some other member is and it is not (margins:
    :func:`_outlier_claims`)."""
    others = [v for m, v in beyond.items() if m != odd and v is not None]
    other = max(others) if others and len(others) == len(beyond) - (odd in beyond) else None
    values = {"name": odd, "z": _number(z.get(odd)), "threshold": threshold}
    return [
        Claim(
            f"scaling.outlier.off_trend.{odd}",
            "The outlier is the off-trend member `{name}` (z {z}, beyond {threshold:1}), as pythia-2.8b in the paper",
            beyond.get(odd),
            values,
        ),
        Claim(
            f"scaling.outlier.not_off_trend.{odd}",
            "Some member lies beyond the robust-z threshold "
            "{threshold:1}, but not the off-trend member `{name}` (z {z})",
            _both(other, _neg(beyond.get(odd))),
            values,
        ),
    ]


def _twin_claims(summary: Mapping[str, Any], threshold: float) -> list[Claim]:
    """Per off-trend member ``o`` and its twin ``t`` (the cause, tested here, not in the paper), with
    ``a = |z_o| − outlier_z`` and ``b = |z_t| − outlier_z`` (each z in the family, the twin in its sibling's place):

    * ``scaling.twin.<o>.follows_head_dimension``: ``o`` is an outlier and ``t`` is not, margin ``min(a, −b)``;
    * ``scaling.twin.<o>.twin_as_unlike``: both are (the head dimension is not the cause), margin ``min(a, b)``;
    * ``scaling.twin.<o>.neither_outlier``: neither is, margin ``min(−a, −b)``;
    * ``scaling.twin.<o>.only_twin_outlier``: only the twin is, margin ``min(−a, b)``;
    * ``scaling.twin.<o>.twin_closer``: the twin's mean intermediate-band CKA against the other members is above
      ``o``'s, margin ``difference`` (twin − off-trend); ``scaling.twin.<o>.off_trend_closer``: ``−difference``."""
    claims: list[Claim] = []
    for twin in summary.get("twins") or []:
        claims += _one_twin_claims(twin, threshold)
    return claims


def _twin_values(twin: Mapping[str, Any], threshold: float) -> dict[str, Any]:
    """The numbers a twin's claims quote: head dimensions, mean intermediate-band CKA against the other members,
    robust z, their difference and the two members' CKA with each other."""
    return {
        "off_trend": str(twin["off_trend"]),
        "twin": str(twin["twin"]),
        "d_head_off_trend": twin.get("d_head_off_trend"),
        "d_head_twin": twin.get("d_head_twin"),
        "band_off_trend": _number(twin.get("band_mean_off_trend")),
        "band_twin": _number(twin.get("band_mean_twin")),
        "z_off_trend": _number(twin.get("z_off_trend")),
        "z_twin": _number(twin.get("z_twin")),
        "difference": _number(twin.get("difference")),
        "with_each_other": _number(twin.get("band_mean_off_trend_vs_twin")),
        "threshold": threshold,
    }


def _one_twin_claims(twin: Mapping[str, Any], threshold: float) -> list[Claim]:
    """One off-trend member and its twin: which of the two lie beyond the robust-z threshold, and which is closer to
    the other members (margins: :func:`_twin_claims`)."""
    size_odd = _abs_z(twin.get("z_off_trend"), bool(twin.get("off_trend_flagged")))
    size_twin = _abs_z(twin.get("z_twin"), bool(twin.get("twin_flagged")))
    a = None if size_odd is None else size_odd - threshold
    b = None if size_twin is None else size_twin - threshold
    values = _twin_values(twin, threshold)
    facts = (
        "`{off_trend}` (head dimension {d_head_off_trend:d}) has mean intermediate-layer CKA {band_off_trend} "
        "against the other members (z {z_off_trend}), its twin `{twin}` (head dimension {d_head_twin:d}, all "
        "else equal) {band_twin} (z {z_twin}); the two have {with_each_other} with each other"
    )
    cause = "The cause (tested here, not in the paper): " + facts + " — "
    prefix = f"scaling.twin.{values['off_trend']}"
    verdicts = (
        (
            "follows_head_dimension",
            "only `{off_trend}` lies beyond the robust-z threshold {threshold:1}: the dissimilarity follows the head "
            "dimension",
            _both(a, _neg(b)),
        ),
        (
            "twin_as_unlike",
            "both lie beyond the robust-z threshold {threshold:1}: the twin is as unlike the family, the head "
            "dimension is not the cause",
            _both(a, b),
        ),
        (
            "neither_outlier",
            "neither lies beyond the robust-z threshold {threshold:1}, so there is no dissimilarity to explain",
            _both(_neg(a), _neg(b)),
        ),
        (
            "only_twin_outlier",
            "only the twin `{twin}` lies beyond the robust-z threshold {threshold:1}",
            _both(_neg(a), b),
        ),
    )
    claims = [Claim(f"{prefix}.{name}", cause + text, margin, values) for name, text, margin in verdicts]
    closer = Claim(
        f"{prefix}.twin_closer",
        "With the head dimension of the family's trend, `{twin}`'s mean "
        "intermediate-layer CKA against the other members ({band_twin}) is above `{off_trend}`'s "
        "({band_off_trend}) by {difference:+3}",
        _number(twin.get("difference")),
        values,
    )
    return claims + mirrored(
        closer,
        f"{prefix}.off_trend_closer",
        "With its own head dimension, `{off_trend}`'s mean "
        "intermediate-layer CKA against the other members ({band_off_trend}) is above its twin "
        "`{twin}`'s ({band_twin})",
    )


def claims_scaling(findings: Mapping[str, Any]) -> list[Claim]:
    """The scaling family's claims from the whole findings dict (``findings["scaling"]``: the saved
    ``scaling_summary``); ``[]`` when it is missing or errored. Per question of Brown et al. §5, each verdict
    (*reproduced*, *inconclusive*, …) is a claim of its own whose margin decides it; margins in
    :func:`_early_claims`, :func:`_block_claims`, :func:`_intra_claims`, :func:`_outlier_claims` and
    :func:`_twin_claims`."""
    summary = findings.get("scaling") or missing_section("scaling_summary")
    if not_run_sentence("Scaling family (Brown et al. §5)", summary):
        return []
    threshold = _number(summary.get("outlier_z")) or OUTLIER_Z
    return [
        *_early_claims(summary),
        *_block_claims(summary),
        *_intra_claims(summary),
        *_outlier_claims(summary, threshold),
        *_twin_claims(summary, threshold),
    ]
