"""A zoo model's configuration entry (``zoo.models.<name>``), read the one way every reader reads it (no Kedro): its
training objective, its seed and its depth.

* :func:`objective_of` — ``causal`` (next-token prediction; :data:`DEFAULT_OBJECTIVE`) or ``masked`` (masked-LM);
* :func:`seed_of` — its ``seed`` (:data:`DEFAULT_SEED` when it names none);
* :func:`zoo_depth` — its number of blocks: TransformerLens' ``n_layers`` or transformers' ``num_hidden_layers`` of
  its ``architecture`` (:func:`depth_of`), None when neither is given.

The record every reader shares (its kind, seed, width, heads, signature) is :mod:`thinkalike.models.zoo_record`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

CAUSAL = "causal"
MASKED = "masked"
#: The training objectives a zoo model may have.
OBJECTIVES: tuple[str, ...] = (CAUSAL, MASKED)
Objective = Literal["causal", "masked"]
#: A zoo entry without ``objective`` is trained causally.
DEFAULT_OBJECTIVE: Objective = "causal"
#: The architecture keys of a model's depth: TransformerLens' and transformers'.
DEPTH_KEYS: tuple[str, ...] = ("n_layers", "num_hidden_layers")


#: A zoo entry without ``seed`` is seeded with 0.
DEFAULT_SEED = 0


def seed_of(entry: Mapping[str, Any]) -> int:
    """The entry's ``seed``, :data:`DEFAULT_SEED` when it names none."""
    return int(entry.get("seed", DEFAULT_SEED))


def objective_of(entry: Mapping[str, Any]) -> str:
    """The entry's ``objective``, :data:`DEFAULT_OBJECTIVE` when it names none."""
    return str(entry.get("objective", DEFAULT_OBJECTIVE))


def depth_of(architecture: Mapping[str, Any]) -> int | None:
    """An architecture's number of blocks (TransformerLens' ``n_layers`` or transformers' ``num_hidden_layers``, of
    an entry's ``architecture`` or a saved ``bridge_config`` / ``hf_config``); None when it gives neither as an
    integer."""
    depth = next((architecture[key] for key in DEPTH_KEYS if key in architecture), None)
    return int(depth) if isinstance(depth, int) and not isinstance(depth, bool) else None


def zoo_depth(entry: Any) -> int | None:
    """The entry's number of blocks (:func:`depth_of` its ``architecture``); None when its architecture gives none
    (or the entry is no mapping)."""
    return depth_of((entry.get("architecture") or {}) if isinstance(entry, Mapping) else {})
