"""Namespaces and dataset names of the per-model and per-pair work: what kedro-viz draws as boxes.

Everything computed per model or per model pair lives under one top-level namespace, ``models``:

* ``models.<model>`` — one model's training (zoo models) and activation extraction; its datasets
  are ``models.<model>.<dataset>`` (``models.gelu_2l.model_weights``, ``….activations``);
* ``models.cka.<a>__<b>`` — one CKA pair (``models.cka.<a>__<b>.cka_table``); the CKA summary
  node is in ``models.cka``;
* ``models.stitching.<f>__<g>`` — one ordered stitching pair; the stitching summary in
  ``models.stitching``;
* ``models.mlem.<model>`` — one model's MLEM fits; the MLEM summary in ``models.mlem``;
* the zoo summary is in ``models``.

``kedro run --namespaces models.gelu_2l`` trains and extracts one model, ``--namespaces
models.cka`` runs every CKA pair and the summary.

Why a single top-level namespace:

* kedro-viz (``ModularPipelinesRepository``) draws a dataset inside the innermost box that holds
  its producer and every reader; a dataset no node reads is an output of every box around it and
  sits on the top level. The CKA, stitching and MLEM nodes read the models' activation stores
  and weights, so with separate top-level boxes all of those would sit on the top-level graph.
  kedro-viz also orders the layers through the boxes (a box's every input layer before its every
  output layer): ``corpus_statistics``, read by the zoo summary in ``models``, has layer
  ``model_input`` for that reason (conf/base/catalog.yml).
* Kedro warns ("dataset names contain '.'", once a process) when a node reads a dotted name
  whose namespace does not begin with the node's top-level namespace: a pair in ``cka.<pair>``
  reading ``models.<m>.activations`` would warn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kedro.pipeline import Node

from thinkalike.pipelines.errors import ParameterError

MODELS = "models"
CORPUS = "corpus"  # the corpus's nodes: the language, its tokenizer and packed sequences (a box of its own)


def model_namespace(model: str) -> str:
    """``models.<model>``: the box of one model's training and extraction."""
    return f"{MODELS}.{model}"


def model_dataset(model: str, dataset: str) -> str:
    """Catalog name of one of ``model``'s datasets, e.g. ``models.gelu_2l.model_weights``."""
    return f"{model_namespace(model)}.{dataset}"


def group_namespace(group: str) -> str:
    """``models.<group>`` (a pipeline spec's ``viz_group``): the pairs (or models) of one method and its summary."""
    if not group or "." in group:
        raise ValueError(f"group {group!r}: must be a non-empty name without '.'")
    return f"{MODELS}.{group}"


def pair_namespace(group: str, first: str, second: str) -> str:
    """``models.<group>.<first>__<second>``: the box of one model pair of method ``group``."""
    return f"{group_namespace(group)}.{first}__{second}"


def check_model_names(names: Iterable[str], key: str) -> None:
    """A :class:`ParameterError` naming ``<key>.<name>`` for a model name that cannot be a namespace.

    A name with a ``.`` would nest its box under another; a method's box name
    (:func:`thinkalike.pipelines.specs.viz_groups`) would be merged with that method's pairs.
    """
    from thinkalike.pipelines.specs import viz_groups  # the specs import the pipelines, which import this module

    groups = viz_groups()
    for name in names:
        if not name or "." in name or name in groups:
            raise ParameterError(
                f"{key}.{name}: a model name must be non-empty, without '.', and not one of "
                f"{list(groups)} (it names the model's namespace {MODELS}.<name>)"
            )


def namespaced_node(
    function: Callable[..., Any],
    inputs: list[str] | None,
    outputs: list[str],
    *,
    name: str,
    namespace: str,
    tags: Iterable[str] = (),
) -> Node:
    """Node ``name`` in ``namespace`` whose ``outputs`` are named ``<namespace>.<output>`` (with ``tags``, e.g.
    :data:`GPU_WORK`).

    ``inputs`` are catalog names as they are; the node is created in its namespace, so the dotted
    names it reads (all under ``models.``) never trigger Kedro's dotted-name warning.
    """
    return Node(
        function,
        inputs,
        [f"{namespace}.{output}" for output in outputs],
        name=name,
        namespace=namespace,
        tags=list(tags),
    )
