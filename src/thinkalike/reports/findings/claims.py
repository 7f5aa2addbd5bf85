"""Claims: every comparative sentence of the findings as a proposition with a signed margin (no Kedro).

A **claim** is one sentence whose truth is decided by numbers of a run. Its **margin** is one signed number that is
> 0 exactly when the claim holds in that run:

* "A is more alike than B": ``margin = A − B`` (:func:`greater`);
* "above its floor at every layer": the smallest excess over the floor's interval (:func:`every`);
* "X is the closest of several": the gap to the runner-up, ``score(X) − max(others)`` (:func:`best_of`), one claim
  per candidate, so exactly one of them holds in a run without ties;
* "reproduced": the paper's proposition as a margin (a correlation above its threshold, …).

A claim's ``id`` is built from configuration names only (models, measures, layers), never from which way a result
came out, so it is stable across runs and replicates. Each section emits every candidate proposition of a
comparison (both directions of "A above B", every candidate of "closest"); a proposition whose margin is ≤ 0 is
simply not stated. Across replicates (:func:`merge_claims`) a claim **holds** when its margin is > 0 in every
replicate and is **mixed** otherwise; propositions that hold in no replicate are dropped (nobody states them).

A claim's text is a ``template`` with ``{field}`` or ``{field:spec}`` placeholders, filled from its ``values``
(:func:`fill`): a value is a number, a span ``[low, high]`` or a string. With several replicates each field shows the
range of its numbers over every replicate (``0.78–0.81``). ``spec``: ``2`` (decimals, the default), ``+3`` (signed,
3 decimals), ``d`` (an integer with thousands separators), ``%`` (a percentage, no decimals).

Claims that read best as one list (one criterion, several measures) share a ``group`` (the list's lead words) and
each has an ``item`` template (its entry in the list); :func:`render_claims` joins them.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinkalike.reports.findings.text import MINUS, int_text, list_text, number_text, signed_text
from thinkalike.reports.findings.text import as_float as finite  # a finite float or None: claims.finite

HOLDS = "holds"  # a finding (merge_claims: every replicate, clear of its noise)
MIXED = "mixed"


@dataclass(frozen=True)
class Claim:
    """One proposition of one run: ``id`` (stable), ``template`` (its sentence), ``margin`` (> 0 exactly when it
    holds; ``None``: could not be decided, i.e. does not hold), ``values`` (the numbers the sentence quotes) and,
    for listed claims, ``group`` (the list's lead) and ``item`` (the entry's template)."""

    id: str
    template: str
    margin: float | None
    values: Mapping[str, Any] = field(default_factory=dict)
    group: str | None = None
    item: str | None = None

    @property
    def holds(self) -> bool:
        return holds(self.margin)

    @property
    def text(self) -> str:
        return fill(self.template, [self.values])

    def as_json(self) -> dict[str, Any]:
        """The claim as one run's JSON: ``text`` filled with this run's values, ``margin`` a number or ``None``."""
        document = {
            "id": self.id,
            "text": self.text,
            "template": self.template,
            "margin": finite(self.margin),
            "values": dict(self.values),
        }
        if self.group is not None:
            document["group"] = self.group
            document["item"] = self.item or self.template
        return document


def holds(margin: float | None) -> bool:
    """Whether a margin says the claim holds (> 0; ``None`` and NaN do not)."""
    return margin is not None and math.isfinite(float(margin)) and float(margin) > 0


# ---- building claims ----------------------------------------------------------------------------------------------


def greater(claim_id: str, template: str, a: float | None, b: float | None, **values: Any) -> Claim:
    """ "A is above B": ``margin = a − b`` (``None`` when either is missing)."""
    margin = None if a is None or b is None else float(a) - float(b)
    return Claim(claim_id, template, margin, values)


def every(claim_id: str, template: str, excesses: Iterable[float | None], **values: Any) -> Claim:
    """ "At every one of them": ``margin = min(excesses)`` (``None`` when there are none or one is missing)."""
    found = list(excesses)
    defined = [float(v) for v in found if v is not None]
    margin = min(defined) if found and len(defined) == len(found) else None
    return Claim(claim_id, template, margin, values)


def best_of(
    prefix: str,
    template: str,
    scores: Mapping[str, float | None],
    higher: bool = True,
    values: Mapping[str, Mapping[str, Any]] | None = None,
    group: str | None = None,
    item: str | None = None,
) -> list[Claim]:
    """ "``name`` is the highest (``higher``) or lowest of ``scores``": one claim per candidate, id
    ``<prefix>.<name>``, margin the gap to the best of the others (``score − max(others)``, or ``min(others) −
    score``). The template may use ``{name}`` and ``{score}`` besides ``values[name]``."""
    known = {name: float(score) for name, score in scores.items() if score is not None and math.isfinite(score)}
    claims = []
    for name, score in scores.items():
        others = [v for other, v in known.items() if other != name]
        if name not in known or not others:
            margin = None
        else:
            margin = (known[name] - max(others)) if higher else (min(others) - known[name])
        claims.append(
            Claim(
                f"{prefix}.{name}",
                template,
                margin,
                {"name": name, "score": finite(score), **dict((values or {}).get(name) or {})},
                group,
                item,
            )
        )
    return claims


def mirrored(
    claim: Claim, twin_id: str, twin_template: str, group: str | None = None, item: str | None = None
) -> list[Claim]:
    """A claim and its mirrored twin, the statement that holds exactly when it does not: the twin has the same
    ``values`` and the negated margin (``None`` stays ``None``); ``group`` and ``item`` are the twin's."""
    margin = None if claim.margin is None else -claim.margin
    return [claim, Claim(twin_id, twin_template, margin, claim.values, group, item)]


def either_way(
    claim_id: str, template: str, twin_id: str, twin_template: str, a: float | None, b: float | None, **values: Any
) -> list[Claim]:
    """ "A is above B" and "B is above A" (:func:`greater` both ways, same ``values``): margins ``a − b`` and
    ``b − a``."""
    return [greater(claim_id, template, a, b, **values), greater(twin_id, twin_template, b, a, **values)]


def spread_margins(excesses: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """The margins of "in every case" (``min``), "in some cases but not all" (``min(max, −min)``) and "in none of
    them" (``−max``) over per-case excesses (> 0: the case holds); all ``None`` when there are no cases or one is
    missing or not finite."""
    found = [float(v) for v in excesses if v is not None and math.isfinite(float(v))]
    if not found or len(found) != len(excesses):
        return None, None, None
    return min(found), min(max(found), -min(found)), -max(found)


def every_some_none(
    ids: tuple[str, str, str],
    templates: tuple[str, str, str],
    excesses: Sequence[float | None],
    values: Mapping[str, Any],
) -> list[Claim]:
    """The three verdicts over per-case excesses (> 0: the case holds): "in every case", "in some but not every case"
    and "in none of them" (``ids`` and ``templates`` in that order, one ``values`` for the three), margins from
    :func:`spread_margins`."""
    margins = spread_margins(excesses)
    return [Claim(i, t, m, values) for i, t, m in zip(ids, templates, margins, strict=True)]


# ---- text -----------------------------------------------------------------------------------------------------------


def _numbers(value: Any) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value if v is not None and math.isfinite(float(v))]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
        return [float(value)]
    return []


def value_text(values: Sequence[Any], spec: str = "") -> str:
    """One field's text over replicates: the range of every number (a single number when they all read the same
    at this precision), or the string (joined with " / " when replicates differ); ``n/a`` when there is none."""
    strings = [v for v in values if isinstance(v, str)]
    if strings:
        distinct = list(dict.fromkeys(strings))
        return " / ".join(distinct)
    numbers = [n for v in values for n in _numbers(v)]
    if not numbers:
        return "n/a"
    low, high = min(numbers), max(numbers)
    spec = spec or "2"
    if spec == "d":
        a, b = int_text(round(low)), int_text(round(high))
        return a if a == b else f"{a}–{b}"
    if spec == "%":
        a, b = number_text(low * 100, 0), number_text(high * 100, 0)
        return f"{a} %" if a == b else f"{a}–{b} %"
    signed = spec.startswith("+")
    digits = int(spec.lstrip("+") or 2)
    show = (lambda v: signed_text(v, digits)) if signed else (lambda v: number_text(v, digits))
    a, b = show(low), show(high)
    if a == b:
        return a
    if signed or a.startswith(MINUS):
        return f"{signed_text(low, digits)} to {signed_text(high, digits)}"
    return f"{a}–{b}"


def fill(template: str, values_per_replicate: Sequence[Mapping[str, Any]]) -> str:
    """``template`` with each ``{field}`` / ``{field:spec}`` replaced by :func:`value_text` of that field over the
    replicates' ``values``; a field no replicate has reads ``n/a``."""
    parts = []
    for literal, name, spec, _ in string.Formatter().parse(template):
        parts.append(literal)
        if name is not None:
            parts.append(value_text([v[name] for v in values_per_replicate if name in v], spec or ""))
    return "".join(parts)


# ---- replicates ----------------------------------------------------------------------------------------------------

#: A finding must clear its noise by this factor: every replicate's margin above ``NOISE_FACTOR`` × the standard
#: deviation of the margin across the replicates (for k = 4 replicates, a mean over 2 standard deviations from zero:
#: a one-sided t of at least 4 on 3 degrees of freedom, p < 0.015). Fixed here, before any number is read.
NOISE_FACTOR = 2.0
#: Status of a proposition that holds in every replicate but not by more than its noise (or with a margin that is
#: the same in every replicate, so it carries no size): not stated as a finding.
UNRESOLVED = "unresolved"
#: Two margins are one proposition and its negation (or the same proposition twice) when they agree to this, in
#: every replicate.
SAME_MARGIN = 1e-9


def noise_scale(margins: Sequence[float | None]) -> float | None:
    """The spread of a claim's margin across replicates: the sample standard deviation of its defined margins
    (``None`` with fewer than two). ``σ = sqrt(Σ (m_r − m̄)² / (k − 1))``."""
    defined = [float(m) for m in margins if m is not None and math.isfinite(float(m))]
    if len(defined) < 2:
        return None
    mean = sum(defined) / len(defined)
    return math.sqrt(sum((m - mean) ** 2 for m in defined) / (len(defined) - 1))


def status_of(margins: Sequence[float | None]) -> tuple[str, str]:
    """A proposition's status over replicates, and why: :data:`HOLDS` (a finding: the margin > 0 in every replicate
    and, with two or more replicates, every margin above :data:`NOISE_FACTOR` × :func:`noise_scale`),
    :data:`UNRESOLVED` (> 0 in every replicate, but within its noise, or the same in every replicate — a margin that
    does not vary carries no size) or :data:`MIXED` (not > 0 in every replicate)."""
    if not all(holds(m) for m in margins):
        held = sum(holds(m) for m in margins)
        return MIXED, f"holds in {held} of {len(margins)}"
    noise = noise_scale(margins)
    if noise is None:
        return HOLDS, "one replicate"
    smallest = min(float(m) for m in margins if m is not None)
    if noise <= SAME_MARGIN * max(1.0, abs(smallest)):
        return UNRESOLVED, "the same margin in every replicate: it carries no size"
    if smallest <= NOISE_FACTOR * noise:
        return UNRESOLVED, f"smallest margin {smallest:.3g} within {NOISE_FACTOR:g} × its spread {noise:.3g}"
    return HOLDS, f"smallest margin {smallest:.3g} = {smallest / noise:.1f} × its spread {noise:.3g}"


def _key(margins: Sequence[float | None], sign: float = 1.0) -> tuple[float, ...] | None:
    """The margins rounded to :data:`SAME_MARGIN`, for matching twins; ``None`` (never matched) when one is missing,
    with fewer than two replicates, or when the margin is the same in every replicate: margins that do not vary could
    match an unrelated claim's by coincidence (and cannot be findings either way: :func:`status_of`)."""
    if len(margins) < 2 or any(m is None for m in margins):
        return None
    defined = [float(m) for m in margins if m is not None]
    if max(defined) - min(defined) <= SAME_MARGIN:
        return None
    return tuple(round(sign * float(m) / SAME_MARGIN) * SAME_MARGIN for m in margins if m is not None)


def propositions(ids: Sequence[str], margins: Mapping[str, Sequence[float | None]]) -> dict[str, tuple[str, str]]:
    """Which claims are the same proposition as an earlier one of their section: ``{id: (earlier id, relation)}``
    with relation ``"negation"`` (its margin is the earlier one's negative in every replicate: a statement and its
    negation, or the two sides of one choice) or ``"same"`` (the same margin in every replicate: one proposition
    written twice). Only margins that vary across two or more replicates are matched (:func:`_key`)."""
    seen: dict[tuple[str, tuple[float, ...]], str] = {}
    relations: dict[str, tuple[str, str]] = {}
    for claim_id in ids:
        section = section_of(claim_id)
        key = _key(margins[claim_id])
        if key is None:
            continue
        negative = _key(margins[claim_id], -1.0)
        if (section, key) in seen:
            relations[claim_id] = (seen[(section, key)], "same")
        elif negative is not None and (section, negative) in seen:
            relations[claim_id] = (seen[(section, negative)], "negation")
        else:
            seen[(section, key)] = claim_id
    return relations


def merge_claims(runs: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The propositions of ``runs`` (each replicate's claims as JSON, :meth:`Claim.as_json`) across replicates, one
    entry each, in first-seen order:

    * a claim whose margin is another's negative in every replicate is that claim's negation, and one whose margin
      equals another's is that claim again (:func:`propositions`): the pair is one proposition, stated from the side
      that holds in more replicates (the first on a tie): ``negation`` names the first id that negates it
      (``negations`` all of them, when several do) and ``same_as`` the ids that repeat it;
    * a proposition that holds in no replicate is dropped (nobody states it);
    * ``margin`` and ``values`` one per replicate (``None`` / ``{}`` where a replicate lacks it), ``noise`` the
      margin's spread (:func:`noise_scale`), ``text`` filled with the ranges over replicates, ``status`` from
      :func:`status_of` (:data:`HOLDS`, :data:`UNRESOLVED` or :data:`MIXED`) and ``why`` its reason."""
    order: list[str] = []
    by_id: dict[str, list[Mapping[str, Any] | None]] = {}
    for index, claims in enumerate(runs):
        for claim in claims:
            if claim["id"] not in by_id:
                order.append(claim["id"])
                by_id[claim["id"]] = [None] * len(runs)
            by_id[claim["id"]][index] = claim
    margins = {i: [None if c is None else finite(c.get("margin")) for c in by_id[i]] for i in order}
    relations = propositions(order, margins)
    partners: dict[str, list[tuple[str, str]]] = {}
    for claim_id, (earlier, relation) in relations.items():
        partners.setdefault(earlier, []).append((claim_id, relation))
    merged = []
    for claim_id in order:
        if claim_id in relations:
            continue
        same = [other for other, relation in partners.get(claim_id, []) if relation == "same"]
        negations = [other for other, relation in partners.get(claim_id, []) if relation == "negation"]
        stated = claim_id
        if negations and sum(holds(m) for m in margins[negations[0]]) > sum(holds(m) for m in margins[claim_id]):
            # stated from its negation's side: the claim and its repeats negate it, its other negations repeat it
            stated, same, negations = negations[0], negations[1:], [claim_id, *same]
        per_run = by_id[stated]
        stated_margins = margins[stated]
        if not any(holds(m) for m in stated_margins):
            continue
        first = next(c for c in per_run if c is not None)
        values = [dict(c.get("values") or {}) if c is not None else {} for c in per_run]
        status, why = status_of(stated_margins)
        entry = {
            "id": stated,
            "template": first["template"],
            "text": fill(first["template"], values),
            "margin": stated_margins,
            "noise": None if (noise := noise_scale(stated_margins)) is None else round(noise, 9),
            "values": values,
            "status": status,
            "why": why,
        }
        if negations:
            entry["negation"] = negations[0]
        if len(negations) > 1:
            entry["negations"] = negations
        if same:
            entry["same_as"] = same
        if first.get("group") is not None:
            entry["group"] = first["group"]
            entry["item"] = first.get("item") or first["template"]
        merged.append(entry)
    return merged


def single_run(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """One run's claims as JSON (every proposition, holding or not: a run on another machine is checked against
    the committed claims by their margins)."""
    return [claim.as_json() for claim in claims]


# ---- rendering ------------------------------------------------------------------------------------------------------


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".") if text else text


def render_claims(
    claims: Sequence[Mapping[str, Any]], replicate_word: str = "replicates", withheld: frozenset[str] = frozenset()
) -> list[str]:
    """Sentences for merged claims (:func:`merge_claims`), in their order: those that hold as findings (grouped
    claims joined into one list per group), then one sentence naming the mixed ones (their ids without the section,
    and in how many replicates they hold). With one replicate, ``replicate_word`` names what was run ("run").
    ``withheld``: ids of claims that hold but are not stated (they hold by no more than round-off moves them)."""
    held = [c for c in claims if c["status"] == HOLDS and c["id"] not in withheld]
    mixed = [c for c in claims if c["status"] == MIXED]
    unresolved = [c for c in claims if c["status"] == UNRESOLVED or (c["status"] == HOLDS and c["id"] in withheld)]
    sentences: list[str] = []
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for claim in held:
        if claim.get("group"):
            if claim["group"] not in groups:
                groups[claim["group"]] = []
                sentences.append(f"\0{claim['group']}")
            groups[claim["group"]].append(claim)
        else:
            sentences.append(_sentence(claim["text"]))
    for index, sentence in enumerate(sentences):
        if sentence.startswith("\0"):
            group = sentence[1:]
            items = [fill(c["item"], c["values"]) for c in groups[group]]
            sentences[index] = _sentence(f"{group}: {list_text(items)}")
    if unresolved:
        listed = [f"`{c['id'].split('.', 1)[-1]}`" for c in unresolved]
        sentences.append(
            f"Unresolved — these hold in every {replicate_word[:-1] if replicate_word.endswith('s') else replicate_word}"
            f" but not by more than {NOISE_FACTOR:g} × the spread of their margin (or with the same margin in every "
            "one, which carries no size), so they are not findings: " + ", ".join(listed) + "."
        )
    if mixed:
        listed = [
            f"`{c['id'].split('.', 1)[-1]}` ({sum(holds(m) for m in c['margin'])} of {len(c['margin'])})" for c in mixed
        ]
        sentences.append(
            f"Not findings — these claims hold in some {replicate_word} only (how many in brackets; "
            "`docs/findings.json` has their sentences and margins): " + ", ".join(listed) + "."
        )
    return sentences


def section_of(claim_id: str) -> str:
    """The section a claim belongs to: its id up to the first dot."""
    return claim_id.split(".", 1)[0]


def by_section(claims: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Claims grouped by :func:`section_of`, in first-seen order."""
    sections: dict[str, list[Mapping[str, Any]]] = {}
    for claim in claims:
        sections.setdefault(section_of(claim["id"]), []).append(claim)
    return sections
