"""``stitching``: one namespace per ordered zoo-model pair (``models.stitching.<f>__<g>``), then a summary.

Pairs, directions, self baselines and the layer grid come from ``stitching`` in config, parsed once here
(:func:`~thinkalike.pipelines.stitching.schema.validate_stitching`) and planned by
:mod:`thinkalike.pipelines.stitching.plan`; every pair's node gets the parsed section
(:class:`~thinkalike.pipelines.stitching.schema.StitchingParameters`). ``kedro run --pipeline stitching --namespaces
models.stitching.solu_2l__gelu_2l`` runs one ordered pair. Per pair: the penalty table, learning curves, the
trained φ's and the evaluation split (to re-evaluate them). The summary lists the φ's, draws every pair's
learning curves and, for the ``all`` grid, penalty heatmaps. Only zoo models are stitched for now: with no
``zoo.models`` (a run of hub models only) the pipeline is empty and says so in the log.
"""

from __future__ import annotations

import logging

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.schema import zoo_model_names
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import group_namespace, model_dataset
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.stitching import nodes
from thinkalike.pipelines.stitching.plan import (
    ordered_pairs,
    stitch_namespace,
    stitching_pairs,
)
from thinkalike.pipelines.stitching.schema import StitchingParameters, stitching_section
from thinkalike.runners.settings import GPU_WORK

PAIR_OUTPUTS = ["stitch_table", "stitch_curves", "stitch_phi", "stitch_phi_config", "stitch_eval_split"]
SUMMARY_OUTPUTS = [
    "stitching_penalties",
    "stitching_curves",
    "stitching_figure",
    "stitching_figure_plotly",
    "stitching_phis",
    "stitching_curves_figures",
]
HEATMAP_OUTPUTS = ["stitching_heatmaps", "stitching_heatmaps_plotly"]  # layers: all
SEQUENCES = "heldout_sequences"
TRAINING_SEQUENCES = "train_sequences"

logger = logging.getLogger(__name__)


def model_inputs(model: str) -> list[str]:
    """The catalog datasets of one zoo model."""
    return [model_dataset(model, "model_weights"), model_dataset(model, "model_config")]


def ordered_pair_pipeline(model_f: str, model_g: str, settings: StitchingParameters) -> Pipeline:
    """Every configured stitch of f → g in namespace ``models.stitching.<f>__<g>`` (a self baseline when f = g)."""
    inputs = {"sequences": SEQUENCES, "tokenizer": "tokenizer"}
    if model_f == model_g:
        function = with_fixed_arguments(nodes.stitch_self, settings=settings, model=model_f)
        inputs.update(zip(["weights", "config"], model_inputs(model_f)))
    else:
        function = with_fixed_arguments(nodes.stitch_pair, settings=settings, model_f=model_f, model_g=model_g)
        inputs.update(
            zip(["weights_f", "config_f", "weights_g", "config_g"], model_inputs(model_f) + model_inputs(model_g))
        )
    if settings.train_source == "train_sequences":
        inputs["training_sequences"] = TRAINING_SEQUENCES
    # the node reads its arguments' own (undotted) names, mapped to the catalog names by ``inputs=``:
    # a node created outside a namespace with a dotted input would trigger Kedro's dotted-name warning
    built = [
        Node(function, {argument: argument for argument in inputs}, PAIR_OUTPUTS, name="stitch_pair", tags=[GPU_WORK])
    ]
    return Pipeline(built, namespace=stitch_namespace(model_f, model_g), inputs=inputs)


def create_pipeline(run: RunSettings) -> Pipeline:
    """One namespace per ordered pair of :func:`ordered_pairs`, then ``summarise_stitching``, which reads every
    pair output (so kedro-viz draws them inside the pairs' boxes) and draws the pairs' figures."""
    parameters = run.parameters
    zoo_models = zoo_model_names(parameters)
    if not parameters.get("stitching"):
        return Pipeline([])
    if not zoo_models:
        logger.warning("stitching: no zoo models are configured, so nothing is stitched (only zoo models can be)")
        return Pipeline([])
    settings = run.parsed(stitching_section)
    pairs = stitching_pairs(settings.pairs, zoo_models)
    ordered = ordered_pairs(pairs, settings.directions, settings.self_baselines)
    heatmaps = settings.layers == "all"
    per_pair = sum((ordered_pair_pipeline(f, g, settings) for f, g in ordered), Pipeline([]))
    namespaces = [stitch_namespace(f, g) for f, g in ordered]
    inputs = [f"{name}.{output}" for output in PAIR_OUTPUTS for name in namespaces]
    summary = Node(
        with_fixed_arguments(
            nodes.summarise_stitching, pairs=pairs, names=[f"{f}__{g}" for f, g in ordered], heatmaps=heatmaps
        ),
        inputs,
        SUMMARY_OUTPUTS + (HEATMAP_OUTPUTS if heatmaps else []),
        name="summarise_stitching",
        namespace=group_namespace("stitching"),
    )
    return per_pair + Pipeline([summary])
