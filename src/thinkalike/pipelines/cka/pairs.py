"""Which model pairs the ``cka`` pipeline compares, from ``cka.pairs`` in config (parsed:
:attr:`~thinkalike.pipelines.cka.schema.CKAParameters.pairs`).

``cka.pairs`` keys (all optional, combined, duplicates dropped, order kept):

* ``intra: true`` — every model with itself;
* ``explicit: [[a, b], ...]`` — given pairs;
* ``all_pairs_of: [m1, m2, ...]`` — every unordered pair of the list;
* ``against: {reference: [m1, m2, ...]}`` — each listed model against the reference.

Without ``pairs`` (absent or null) the default adapts to the models configured: every model with
itself and every pair of them (:func:`cka_pairs`). The ``scaling`` family's pairs are added to them
(:func:`all_cka_pairs`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

from thinkalike.pipelines import namespaces
from thinkalike.scaling.membership import family_plan

logger = logging.getLogger(__name__)

PAIR_KEYS = ("intra", "explicit", "all_pairs_of", "against")


def pair_namespace(model_a: str, model_b: str) -> str:
    """Namespace of a pair's node and datasets, ``models.cka.<a>__<b>`` (``kedro run --namespaces models.cka.a__b``)."""
    return namespaces.pair_namespace("cka", model_a, model_b)


def pair_dataset(model_a: str, model_b: str, dataset: str) -> str:
    """Catalog name of one of a pair's datasets, e.g. ``models.cka.gelu_2l__solu_2l.cka_table``."""
    return f"{pair_namespace(model_a, model_b)}.{dataset}"


def default_pairs(models: Iterable[str]) -> dict[str, Any]:
    """``cka.pairs`` when it is not set: every configured model with itself and every pair of them."""
    return {"intra": True, "all_pairs_of": list(models)}


def cka_pairs(pairs: Mapping[str, Any] | None, models: Iterable[str]) -> list[tuple[str, str]]:
    """The pairs of ``cka.pairs``: :func:`configured_pairs`, or of :func:`default_pairs` when it is absent or
    null."""
    return configured_pairs(default_pairs(models) if pairs is None else dict(pairs), models)


def all_cka_pairs(
    parameters: Mapping[str, Any], pairs: Mapping[str, Any] | None, models: dict[str, str]
) -> list[tuple[str, str]]:
    """The pairs the ``cka`` pipeline computes: :func:`cka_pairs` of ``pairs`` (``cka.pairs``) over ``models`` (the
    configured models), then the ``scaling`` family's pairs that are not among them (in either order). A
    ``scaling`` section that cannot be resolved adds nothing here (the ``scaling`` pipeline reports its error)."""
    configured = cka_pairs(pairs, models)
    try:
        plan = family_plan(parameters, models)
    except ValueError as error:
        logger.debug("cka: no scaling pairs (%s)", error)
        return configured
    known = set(configured) | {pair[::-1] for pair in configured}
    return configured + [pair for pair in (plan.pairs() if plan else []) if pair not in known]


def configured_pairs(pairs: dict[str, Any], models: Iterable[str]) -> list[tuple[str, str]]:
    """The ordered, de-duplicated list of pairs; unknown models and an empty list are errors."""
    models = list(models)
    unknown_keys = sorted(set(pairs) - set(PAIR_KEYS))
    if unknown_keys:
        raise ValueError(f"unknown key(s) {unknown_keys} in cka.pairs; known: {list(PAIR_KEYS)}")
    result: list[tuple[str, str]] = []
    if pairs.get("intra"):
        result += [(model, model) for model in models]
    for pair in pairs.get("explicit") or []:
        if len(pair) != 2:
            raise ValueError(f"cka.pairs.explicit entries must be [model_a, model_b], got {pair!r}")
        result.append((str(pair[0]), str(pair[1])))
    result += list(combinations([str(m) for m in pairs.get("all_pairs_of") or []], 2))
    for reference, others in (pairs.get("against") or {}).items():
        result += [(str(other), str(reference)) for other in others if other != reference]
    seen: set[tuple[str, str]] = set()
    unique = []
    for pair in result:
        if pair not in seen and pair[::-1] not in seen:
            seen.add(pair)
            unique.append(pair)
    missing = sorted({m for pair in unique for m in pair} - set(models))
    if missing:
        raise ValueError(
            f"cka.pairs names model(s) {missing} that have no activations; configured models: {sorted(models)}"
        )
    if not unique:
        raise ValueError("cka.pairs gives no model pair to compare (set intra, explicit, all_pairs_of or against)")
    return unique
