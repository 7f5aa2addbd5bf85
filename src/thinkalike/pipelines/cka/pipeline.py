"""``cka``: one node per model pair (namespace ``models.cka.<a>__<b>``), then distances and groups.

``kedro run --pipelines cka --namespaces models.cka.solu_2l__gelu_2l`` compares one pair;
``--namespaces models.cka`` every pair and the summary (its node is in ``models.cka``). Naming:
:mod:`thinkalike.pipelines.namespaces`.

``cka.mode: stored`` (default) reads the ``activations`` pipeline's stores; ``streaming`` runs
both models batch by batch inside the pair's node and writes nothing but the CKA results
(memory: one batch of each model), for models whose activations would not fit on disk.

``cka.measures`` (stored mode): the measures beyond CKA (:mod:`thinkalike.cka.measure_tables`) on the same
rows, one ``compare_measures`` node per pair beside ``compare_pair`` and ``summarise_measures`` after them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.pipeline import (
    ExtractionSource,
    external_n_ctx,
    extraction_source,
)
from thinkalike.pipelines.activations.schema import activations_section, configured_models_of
from thinkalike.pipelines.cka import nodes
from thinkalike.pipelines.cka.pairs import (
    all_cka_pairs,
    pair_dataset,
    pair_namespace,
)
from thinkalike.pipelines.cka.schema import CKAParameters, cka_section
from thinkalike.pipelines.corpus.schema import corpus_section
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import (
    group_namespace,
    model_dataset,
)
from thinkalike.pipelines.run_settings import RunSettings

logger = logging.getLogger(__name__)

PAIR_OUTPUT = "cka_table"  # the summary reads it and draws the pair's heatmaps
MEASURES_OUTPUT = "measures_table"  # every measure of cka.measures, every layer pair
CALIBRATION_OUTPUT = "calibration_table"  # their permutation null (pairs of different models)
CALIBRATION_SUMMARY = "similarity_calibration"
MEASURES_SUMMARY_OUTPUTS = [
    "similarity_measures",
    "similarity_heatmaps",
    "dimension_shares",
    "dimension_shares_figure",
    "rogue_remedies",
    "measure_grounding",
    "measure_grounding_figure",
]
SUMMARY_OUTPUTS = [
    "cka_distances",
    "cka_distance_figure",
    "cka_group_distances",
    "cka_group_curves",
    "cka_group_curves_figure",
    "cka_heatmaps",
    "cka_heatmaps_plotly",
]


def pair_node(function: Callable[..., Any], inputs: list[str], model_a: str, model_b: str) -> Node:
    """``compare_pair`` in the pair's namespace, writing its one output ``models.cka.<a>__<b>.cka_table``."""
    return Node(
        function,
        inputs,
        pair_dataset(model_a, model_b, PAIR_OUTPUT),
        name="compare_pair",
        namespace=pair_namespace(model_a, model_b),
    )


def pair_pipeline(
    model_a: str, model_b: str, settings: CKAParameters, with_measures: bool = False, calibrated: bool = False
) -> Pipeline:
    """CKA of one pair in its own namespace, from the two models' activation stores; with ``with_measures`` also
    every measure of ``cka.measures`` (``compare_measures``, writing ``models.cka.<a>__<b>.measures_table``), and
    with ``calibrated`` (pairs of different models) their permutation null (``calibrate_measures``)."""
    inputs = [
        model_dataset(model, dataset) for model in (model_a, model_b) for dataset in ("activations", "activation_index")
    ]
    pair = {"settings": settings, "model_a": model_a, "model_b": model_b}
    nodes_ = [pair_node(with_fixed_arguments(nodes.compare_pair, **pair), inputs, model_a, model_b)]
    if with_measures:
        nodes_.append(
            Node(
                with_fixed_arguments(nodes.compare_measures, **pair),
                inputs,
                pair_dataset(model_a, model_b, MEASURES_OUTPUT),
                name="compare_measures",
                namespace=pair_namespace(model_a, model_b),
            )
        )
    if calibrated and model_a != model_b:
        nodes_.append(
            Node(
                with_fixed_arguments(nodes.calibrate_measures, **pair),
                inputs,
                pair_dataset(model_a, model_b, CALIBRATION_OUTPUT),
                name="calibrate_measures",
                namespace=pair_namespace(model_a, model_b),
            )
        )
    return Pipeline(nodes_)


def streaming_pair_pipeline(
    model_a: str, model_b: str, settings: CKAParameters, source_a: ExtractionSource, source_b: ExtractionSource
) -> Pipeline:
    """CKA of one pair straight from the two models' forward passes (``cka.mode: streaming``): nothing is stored."""
    inputs = list(dict.fromkeys([*source_a.inputs, *source_b.inputs]))
    function = with_fixed_arguments(
        nodes.compare_streamed_pair,
        settings=settings,
        model_a=model_a,
        model_b=model_b,
        extract_a=source_a.function,
        inputs_a=[inputs.index(name) for name in source_a.inputs],
        extract_b=source_b.function,
        inputs_b=[inputs.index(name) for name in source_b.inputs],
    )
    return Pipeline([pair_node(function, inputs, model_a, model_b)])


def create_pipeline(run: RunSettings) -> Pipeline:
    """One namespace per configured pair (stored or streaming, per ``cka.mode``), then ``summarise_cka``
    (namespace ``models.cka``), which also draws every pair's heatmap (``cka_heatmaps``, ``cka_heatmaps_plotly``):
    the pairs' tables are read there, so kedro-viz draws each pair's output inside its box. The ``cka`` section is
    parsed once per run (:func:`~thinkalike.pipelines.cka.schema.cka_section`) and bound to every node; in streaming
    mode the ``activations`` section too, bound to the extractions."""
    parameters = run.parameters
    if not parameters.get("cka"):
        return Pipeline([])
    models = run.parsed(configured_models_of)
    settings = run.parsed(cka_section)
    if settings.pairs is None:
        logger.info("cka.pairs is not set: every pair of the %d configured models and each with itself", len(models))
    pairs = all_cka_pairs(run, settings.pairs, models)
    streaming = settings.mode == "streaming"
    measure_settings = settings.measures
    with_measures = bool(measure_settings.names)
    if streaming and with_measures:
        others = [name for name in measure_settings.names if name != "cka"]
        logger.warning(
            "cka.measures.names: streaming mode (cka.mode: streaming) computes CKA only — its minibatch "
            "HSIC is the one measure here that streams; %s need every row of a pair at once, i.e. the "
            "stored activations (cka.mode: stored), and are left out",
            ", ".join(others) or "none",
        )
        with_measures = False
    if streaming:
        activations = run.parsed(activations_section)
        n_ctx = external_n_ctx(activations, run.parsed(corpus_section))
        sources = {name: extraction_source(name, spec, activations, n_ctx) for name, spec in models.items()}
        per_pair = sum(
            (streaming_pair_pipeline(a, b, settings, sources[a], sources[b]) for a, b in pairs), Pipeline([])
        )
    else:
        per_pair = sum(
            (
                pair_pipeline(a, b, settings, with_measures, with_measures and measure_settings.calibrated)
                for a, b in pairs
            ),
            Pipeline([]),
        )
    tables = [pair_dataset(a, b, "cka_table") for a, b in pairs]
    summaries = [
        Node(
            with_fixed_arguments(nodes.summarise_cka, settings=settings),
            tables,
            SUMMARY_OUTPUTS,
            name="summarise_cka",
            namespace=group_namespace("cka"),
        )
    ]
    if with_measures:
        summaries.append(
            Node(
                with_fixed_arguments(nodes.summarise_measures, settings=settings),
                [pair_dataset(a, b, MEASURES_OUTPUT) for a, b in pairs],
                MEASURES_SUMMARY_OUTPUTS,
                name="summarise_measures",
                namespace=group_namespace("cka"),
            )
        )
        calibrated_pairs = [(a, b) for a, b in pairs if a != b]
        if measure_settings.calibrated and calibrated_pairs:
            summaries.append(
                Node(
                    nodes.summarise_calibration,
                    [pair_dataset(a, b, CALIBRATION_OUTPUT) for a, b in calibrated_pairs],
                    CALIBRATION_SUMMARY,
                    name="summarise_calibration",
                    namespace=group_namespace("cka"),
                )
            )
    return per_pair + Pipeline(summaries)
