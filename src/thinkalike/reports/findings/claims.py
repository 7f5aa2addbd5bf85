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

HOLDS = "holds"
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


def merge_claims(runs: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The claims of ``runs`` (each replicate's claims as JSON, :meth:`Claim.as_json`) across replicates: every
    proposition that holds in at least one replicate, in first-seen order, with ``margin`` and ``values`` one per
    replicate (``None`` / ``{}`` where a replicate lacks it), ``text`` filled with the ranges over replicates and
    ``status`` :data:`HOLDS` (margin > 0 in every replicate) or :data:`MIXED`."""
    order: list[str] = []
    by_id: dict[str, list[Mapping[str, Any] | None]] = {}
    for index, claims in enumerate(runs):
        for claim in claims:
            if claim["id"] not in by_id:
                order.append(claim["id"])
                by_id[claim["id"]] = [None] * len(runs)
            by_id[claim["id"]][index] = claim
    merged = []
    for claim_id in order:
        per_run = by_id[claim_id]
        margins = [None if c is None else finite(c.get("margin")) for c in per_run]
        if not any(holds(m) for m in margins):
            continue
        first = next(c for c in per_run if c is not None)
        values = [dict(c.get("values") or {}) if c is not None else {} for c in per_run]
        entry = {
            "id": claim_id,
            "template": first["template"],
            "text": fill(first["template"], values),
            "margin": margins,
            "values": values,
            "status": HOLDS if all(holds(m) for m in margins) else MIXED,
        }
        if first.get("group") is not None:
            entry["group"] = first["group"]
            entry["item"] = first.get("item") or first["template"]
        merged.append(entry)
    return merged


def single_run(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """One run's claims as JSON (every proposition, holding or not: a run on another machine is checked against
    the committed claims by their margins)."""
    return [claim.as_json() for claim in claims]


def check_against(committed: Sequence[Mapping[str, Any]], run: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For every committed claim that holds: its margin in ``run`` (one run's claims) and whether it holds there."""
    margins = {c["id"]: finite(c.get("margin")) for c in run}
    return [
        {"id": c["id"], "text": c["text"], "margin": margins.get(c["id"]), "holds": holds(margins.get(c["id"]))}
        for c in committed
        if c.get("status") == HOLDS
    ]


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
