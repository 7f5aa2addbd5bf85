"""What the ``stitching`` pipeline stitches, from the parsed ``stitching`` section
(:class:`~thinkalike.pipelines.stitching.schema.StitchingParameters`): ordered model pairs and layer grids.

``stitching.pairs`` has the syntax of ``cka.pairs`` (:func:`~thinkalike.pipelines.cka.pairs.configured_pairs`:
``intra``, ``explicit``, ``all_pairs_of``, ``against``). Each configured pair ``(a, b)`` gives the
ordered pair ``a → b`` (f = a, g = b), also ``b → a`` with ``directions: both``, and ``a → a``,
``b → b`` with ``self_baselines: true``. Layers (``stitching.layers``): ``diagonal`` (l → l),
``relative`` (by relative depth, :func:`~thinkalike.measures.distances.match_layers_by_relative_depth`)
or ``all`` (every l, m); layer 0 is the embeddings, ``n_layers`` the last block's output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import product
from typing import Any

from thinkalike.measures.distances import match_layers_by_relative_depth
from thinkalike.pipelines.cka.pairs import configured_pairs
from thinkalike.pipelines.namespaces import pair_namespace

DIRECTIONS = ("forward", "both")
LAYER_GRIDS = ("diagonal", "relative", "all")


def stitch_namespace(model_f: str, model_g: str) -> str:
    """Namespace of one ordered pair's nodes and datasets, ``models.stitching.<f>__<g>``
    (``kedro run --namespaces models.stitching.f__g``)."""
    return pair_namespace("stitching", model_f, model_g)


def stitching_pairs(pairs: Mapping[str, Any], models: Iterable[str]) -> list[tuple[str, str]]:
    """The configured (unordered) pairs of ``stitching.pairs``; ``ValueError`` for unknown models or none."""
    try:
        return configured_pairs(dict(pairs), models)
    except ValueError as error:  # configured_pairs speaks of cka.pairs and activations
        message = (
            str(error).replace("cka.pairs", "stitching.pairs").replace("have no activations", "are not zoo models")
        )
        raise ValueError(message) from None


def ordered_pairs(pairs: list[tuple[str, str]], directions: str, self_baselines: bool) -> list[tuple[str, str]]:
    """(f, g) of every stitch to run, de-duplicated in order: a → b, then b → a (``both``), then a → a and
    b → b (``self_baselines``), pair after pair."""
    if directions not in DIRECTIONS:
        raise ValueError(f"stitching.directions must be one of {DIRECTIONS}, got {directions!r}")
    result: list[tuple[str, str]] = []
    for a, b in pairs:
        result.append((a, b))
        if directions == "both":
            result.append((b, a))
        if self_baselines:
            result += [(a, a), (b, b)]
    return list(dict.fromkeys(result))


def layer_grid(grid: str, n_layers_f: int, n_layers_g: int) -> list[tuple[int, int]]:
    """(layer_f, layer_g) pairs of residual-stream indices 0..n_layers for the grid kind."""
    if grid == "diagonal":
        return [(layer, layer) for layer in range(min(n_layers_f, n_layers_g) + 1)]
    if grid == "relative":
        return match_layers_by_relative_depth(n_layers_f + 1, n_layers_g + 1)
    if grid == "all":
        return list(product(range(n_layers_f + 1), range(n_layers_g + 1)))
    raise ValueError(f"stitching.layers must be one of {LAYER_GRIDS}, got {grid!r}")
