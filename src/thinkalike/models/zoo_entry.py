"""A zoo model's configuration entry (``zoo.models.<name>``), read the one way every reader reads it (no Kedro): its
training objective and its depth.

* :func:`objective_of` — ``causal`` (next-token prediction; :data:`DEFAULT_OBJECTIVE`) or ``masked`` (masked-LM);
* :func:`zoo_depth` — its number of blocks: TransformerLens' ``n_layers`` or transformers' ``num_hidden_layers`` of
  its ``architecture``, None when neither is given.
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


def objective_of(entry: Mapping[str, Any]) -> str:
    """The entry's ``objective``, :data:`DEFAULT_OBJECTIVE` when it names none."""
    return str(entry.get("objective", DEFAULT_OBJECTIVE))


def zoo_depth(entry: Any) -> int | None:
    """The entry's number of blocks (``architecture.n_layers`` or ``architecture.num_hidden_layers``); None when its
    architecture gives neither as an integer (or the entry is no mapping)."""
    architecture = (entry.get("architecture") or {}) if isinstance(entry, Mapping) else {}
    depth = architecture.get("n_layers", architecture.get("num_hidden_layers"))
    return int(depth) if isinstance(depth, int) and not isinstance(depth, bool) else None
