"""``stitching``: one namespaced node per ordered zoo-model pair (``stitch_<f>__<g>``), then a summary.

Pairs, directions, self baselines and the layer grid come from ``stitching`` in config
(:mod:`thinkalike.pipelines.stitching.plan`). ``kedro run --pipeline stitching --namespaces
stitch_solu_2l__gelu_2l`` runs one ordered pair. Only zoo models are stitched for now: with no
``zoo.models`` (a run of hub models only) the pipeline is empty and says so in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.stitching import nodes
from thinkalike.pipelines.stitching.plan import ordered_pairs, stitch_namespace, stitching_pairs

PAIR_OUTPUTS = ["stitch_table", "stitch_curves"]
SUMMARY_OUTPUTS = ["stitching_penalties", "stitching_curves", "stitching_figure"]
SEQUENCES = "heldout_sequences"

logger = logging.getLogger(__name__)


def model_inputs(model: str) -> list[str]:
    """The catalog datasets of one zoo model."""
    return [f"{model}.model_weights", f"{model}.model_config"]


def ordered_pair_pipeline(model_f: str, model_g: str) -> Pipeline:
    """Every configured stitch of f → g in namespace ``stitch_<f>__<g>`` (a self baseline when f = g)."""
    if model_f == model_g:
        function = bind(nodes.stitch_self, model=model_f)
        models = model_inputs(model_f)
    else:
        function = bind(nodes.stitch_pair, model_f=model_f, model_g=model_g)
        models = model_inputs(model_f) + model_inputs(model_g)
    inputs = [SEQUENCES, "tokenizer", *models]
    node = Node(function, [*inputs, "params:stitching"], PAIR_OUTPUTS, name="stitch_pair")
    return Pipeline([node], namespace=stitch_namespace(model_f, model_g), inputs=set(inputs),
                    parameters={"params:stitching": "params:stitching"})


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    """One namespace per ordered pair of :func:`ordered_pairs`, then ``summarise_stitching``."""
    stitching = section(parameters, "stitching")
    zoo_models = section(parameters, "zoo").get("models") or {}
    if not stitching:
        return Pipeline([])
    if not zoo_models:
        logger.warning("stitching: no zoo models are configured, so nothing is stitched (only zoo models can be)")
        return Pipeline([])
    pairs = stitching_pairs(stitching, zoo_models)
    ordered = ordered_pairs(pairs, stitching.get("directions", "both"), bool(stitching.get("self_baselines", True)))
    per_pair = sum((ordered_pair_pipeline(f, g) for f, g in ordered), Pipeline([]))
    namespaces = [stitch_namespace(f, g) for f, g in ordered]
    tables = [f"{name}.stitch_table" for name in namespaces]
    curves = [f"{name}.stitch_curves" for name in namespaces]
    summary = Node(bind(nodes.summarise_stitching, pairs=pairs), [*tables, *curves], SUMMARY_OUTPUTS,
                   name="summarise_stitching")
    return per_pair + Pipeline([summary])
