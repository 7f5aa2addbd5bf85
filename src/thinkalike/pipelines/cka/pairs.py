"""Which model pairs the ``cka`` pipeline compares, from ``cka.pairs`` in config: its model (:class:`CKAPairs`,
parsed once with the section by :func:`~thinkalike.pipelines.cka.schema.parse_cka`, or by :func:`parse_pairs`) and
the pairs it gives for the configured models (:meth:`CKAPairs.pairs`, checked there: they depend on the models).
``stitching.pairs`` and ``embedding.alignment.pairs`` have the same syntax (:func:`configured_pairs`).

``cka.pairs`` keys (all optional, combined, duplicates dropped, order kept; null is the key left out):

* ``intra: true`` — every model with itself;
* ``explicit: [[a, b], ...]`` — given pairs;
* ``all_pairs_of: [m1, m2, ...]`` — every unordered pair of the list;
* ``against: {reference: [m1, m2, ...]}`` — each listed model against the reference.

Without ``pairs`` (absent or null) the default adapts to the models configured: every model with
itself and every pair of them (:func:`cka_pairs`). The ``scaling`` family's pairs are added to them
(:func:`all_cka_pairs`; a pipeline's spec declares the pairs it needs, ``PipelineSpec.cka_pairs``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from thinkalike.pipelines import namespaces
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.schema import _Section, validate_section
from thinkalike.pipelines.specs import cka_pairs_needed

logger = logging.getLogger(__name__)


def _two_models(entry: Any) -> Any:
    """An ``explicit`` entry as a tuple (YAML gives lists); anything but two items is an error."""
    if not isinstance(entry, list | tuple) or len(entry) != 2:
        raise ValueError("must be [model_a, model_b]")
    return tuple(entry)


class CKAPairs(_Section):
    """``cka.pairs`` parsed (:func:`~thinkalike.pipelines.cka.schema.parse_cka`, :func:`parse_pairs`): its keys' types and the shape of each
    ``explicit`` entry; which models they name is checked against the configured ones by :meth:`pairs`."""

    intra: bool = False
    explicit: list[Annotated[tuple[str, str], BeforeValidator(_two_models)]] = Field(default_factory=list)
    all_pairs_of: list[str] = Field(default_factory=list)
    against: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("intra", "explicit", "all_pairs_of", "against", mode="before")
    @classmethod
    def _null_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.field_name is not None:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value

    def pairs(self, models: Iterable[str]) -> list[tuple[str, str]]:
        """The ordered, de-duplicated list of pairs over ``models`` (the configured models); a ``ValueError`` for
        a model not among them, or for no pair at all."""
        models = list(models)
        result: list[tuple[str, str]] = [(model, model) for model in models] if self.intra else []
        result += self.explicit
        result += list(combinations(self.all_pairs_of, 2))
        for reference, others in self.against.items():
            result += [(other, reference) for other in others if other != reference]
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


PAIR_KEYS = tuple(CKAPairs.model_fields)


def parse_pairs(values: Any, key: str = "cka.pairs") -> CKAPairs:
    """``values`` (the pair syntax, under ``key``) as :class:`CKAPairs`; a :class:`ParameterError` naming the key
    (``cka.pairs.explicit.0`` …), an unknown key with the known ones."""
    if isinstance(values, Mapping):
        unknown = sorted(set(values) - set(PAIR_KEYS), key=str)
        if unknown:
            raise ParameterError(f"{key}: unknown key(s) {unknown}; known: {list(PAIR_KEYS)}")
    result: CKAPairs = validate_section(CKAPairs, values, key)
    return result


def pair_namespace(model_a: str, model_b: str) -> str:
    """Namespace of a pair's node and datasets, ``models.cka.<a>__<b>`` (``kedro run --namespaces models.cka.a__b``)."""
    return namespaces.pair_namespace("cka", model_a, model_b)


def pair_dataset(model_a: str, model_b: str, dataset: str) -> str:
    """Catalog name of one of a pair's datasets, e.g. ``models.cka.gelu_2l__solu_2l.cka_table``."""
    return f"{pair_namespace(model_a, model_b)}.{dataset}"


def default_pairs(models: Iterable[str]) -> CKAPairs:
    """``cka.pairs`` when it is not set: every configured model with itself and every pair of them."""
    return CKAPairs(intra=True, all_pairs_of=list(models))


def cka_pairs(pairs: CKAPairs | None, models: Iterable[str]) -> list[tuple[str, str]]:
    """The pairs of ``cka.pairs`` (:meth:`CKAPairs.pairs`), or of :func:`default_pairs` when it is absent or
    null."""
    models = list(models)
    return (default_pairs(models) if pairs is None else pairs).pairs(models)


def all_cka_pairs(run: RunSettings, pairs: CKAPairs | None, models: dict[str, str]) -> list[tuple[str, str]]:
    """The pairs the ``cka`` pipeline computes: :func:`cka_pairs` of ``pairs`` (``cka.pairs``) over ``models`` (the
    configured models), then the pairs other pipelines read from it that are not among them, in either order (each
    spec's ``cka_pairs``, :func:`~thinkalike.pipelines.specs.cka_pairs_needed`: the ``scaling`` family's)."""
    configured = cka_pairs(pairs, models)
    known = set(configured) | {pair[::-1] for pair in configured}
    extra = []
    for pair in cka_pairs_needed(run):
        if pair not in known:
            known |= {pair, pair[::-1]}
            extra.append(pair)
    return configured + extra


def configured_pairs(pairs: Mapping[str, Any], models: Iterable[str]) -> list[tuple[str, str]]:
    """The pairs of ``pairs`` in the ``cka.pairs`` syntax, unparsed (``stitching.pairs``,
    ``embedding.alignment.pairs``): :func:`parse_pairs`, then :meth:`CKAPairs.pairs`. A ``ValueError`` (a
    :class:`ParameterError` for the syntax) speaks of ``cka.pairs``; the callers put their own key in."""
    return parse_pairs(pairs).pairs(models)
