"""Thin nodes of the ``cka`` pipeline. Their settings are the ``cka`` section parsed once by the pipeline's builder
(:class:`~thinkalike.pipelines.cka.schema.CKAParameters`, bound as ``settings``): how CKA is estimated
(``settings.estimation``, a :class:`~thinkalike.cka.settings.CKASettings`, its ``pooling: auto`` resolved per pair
here), the measures beyond it (``settings.measures``), the device and the groups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from thinkalike.cka.compute import cka_long_table, cka_matrix_from_table, compute_cka, distance_table
from thinkalike.cka.figures import distance_matrix_figure, group_curves_figure, heatmap_figure, heatmap_plotly
from thinkalike.cka.measure_figures import dimension_shares_figure, grounding_figure, measures_heatmap_figure
from thinkalike.cka.measure_tables import (
    aligned_rows,
    calibration_long_table,
    calibration_summary,
    dimension_shares,
    grounding_table,
    measures_long_table,
    measures_summary,
    remedy_summary,
)
from thinkalike.cka.settings import CKA_RANGES, resolve_pooling
from thinkalike.figures import dropdown_figure, figure_files
from thinkalike.measures.distances import group_distance_table, layer_cka_curves
from thinkalike.models.activation_store import ActivationStore, provenance
from thinkalike.pipelines.cka.schema import CKAParameters

GROUP_DISTANCE_COLUMNS = ["group_a", "group_b", "kind", "mean", "std", "n", "n_finite"]
CURVE_COLUMNS = ["group_a", "group_b", "relative_depth", "mean", "ci_low", "ci_high", "n"]


def compare_pair(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    *,
    settings: CKAParameters,
    model_a: str,
    model_b: str,
):
    """CKA of every layer pair of two models: the long table (MLflow metrics come from it; the summary draws
    its heatmaps).

    The table records where the activations came from: ``activations_version_a/_b`` (the store
    versions, ``streamed`` in streaming mode) and ``spec_a/_b`` (the model specs).
    ``cka.pooling: auto`` is resolved per pair (see :func:`resolve_pooling`)."""
    estimation = resolve_pooling(settings.estimation, index_a, index_b)
    result = compute_cka(
        store_a, index_a, store_b, index_b, estimation, model_a=model_a, model_b=model_b, device=settings.device
    )
    table = cka_long_table(result, estimation, store_a.layers, store_b.layers)
    table = table.assign(
        **{f"{key}_a": value for key, value in provenance(store_a).items()},
        **{f"{key}_b": value for key, value in provenance(store_b).items()},
    )
    return table


def compare_measures(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    *,
    settings: CKAParameters,
    model_a: str,
    model_b: str,
) -> pd.DataFrame:
    """Every measure of ``cka.measures`` for every layer pair, on the CKA pipeline's rows
    (:mod:`thinkalike.cka.measure_tables`), with the same provenance columns as the CKA table."""
    estimation = resolve_pooling(settings.estimation, index_a, index_b)
    acts_a, acts_b = aligned_rows(store_a, index_a, store_b, index_b, estimation)
    table = measures_long_table(
        acts_a,
        None if model_a == model_b else acts_b,
        settings.measures,
        estimation,
        model_a=model_a,
        model_b=model_b,
        layer_ids_a=store_a.layers,
        layer_ids_b=store_b.layers,
    )
    return table.assign(
        **{f"{key}_a": value for key, value in provenance(store_a).items()},
        **{f"{key}_b": value for key, value in provenance(store_b).items()},
    )


def calibrate_measures(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    *,
    settings: CKAParameters,
    model_a: str,
    model_b: str,
) -> pd.DataFrame:
    """The permutation null of ``cka.measures.calibration``'s measures for a pair of different models, on the rows
    the measures saw (:func:`thinkalike.cka.measure_tables.calibration_long_table`)."""
    estimation = resolve_pooling(settings.estimation, index_a, index_b)
    acts_a, acts_b = aligned_rows(store_a, index_a, store_b, index_b, estimation)
    return calibration_long_table(
        acts_a,
        acts_b,
        settings.measures,
        model_a=model_a,
        model_b=model_b,
        layer_ids_a=store_a.layers,
        layer_ids_b=store_b.layers,
    )


def summarise_calibration(*tables: pd.DataFrame) -> pd.DataFrame:
    """The calibrated pair statistics of every calibrated pair."""
    return calibration_summary(tables)


def summarise_measures(*tables: pd.DataFrame, settings: CKAParameters):
    """Every pair's matched-layer mean (and product distance, for metrics) per measure, every pair's panel of
    heatmaps (``<a>__<b>.png``), every model's layers' rogue-dimension shares (table and figure), what the
    remedies change (``rogue_remedies``) and each measure's grounding scores (``measure_grounding``, and its
    figure; ``cka.groups`` labels the seed replicas)."""
    by_pair = {pair_name(table): table for table in tables}
    shares = dimension_shares(tables)
    grounding = grounding_table(tables, settings.groups)
    return (
        measures_summary(tables),
        figure_files(by_pair, measures_heatmap_figure),
        shares,
        dimension_shares_figure(shares),
        remedy_summary(tables),
        grounding,
        grounding_figure(grounding),
    )


def pair_name(table: pd.DataFrame) -> str:
    """``<a>__<b>``: a pair's namespace name, from its CKA table."""
    return f"{table['model_a'].iloc[0]}__{table['model_b'].iloc[0]}"


def summarise_cka(*tables: pd.DataFrame, settings: CKAParameters):
    """Distances of every compared pair (table and figure); within/between-group distances and CKA curves; every
    pair's heatmap (``<a>__<b>.png`` files, and one plotly figure with a dropdown of the pairs).

    Means are reported with their counts (``n_finite_layers`` of ``n_matched_layers`` per pair,
    ``n_finite`` of ``n`` pairs per group); ``cka.skip_constant_layers`` decides whether NaN
    layers/pairs make a mean NaN or are left out. Curve intervals are clipped to the
    estimator's CKA range. Groups: ``cka.groups``.
    """
    estimation = settings.estimation
    skip = estimation.skip_constant_layers
    distances = distance_table(tables, skip)
    groups = settings.groups
    labelled = distances[
        distances["model_a"].isin(groups)
        & distances["model_b"].isin(groups)
        & (distances["model_a"] != distances["model_b"])
    ]
    group_distances = (
        group_distance_table(labelled.rename(columns={"arccos_distance": "distance"}), groups, skip_undefined=skip)
        if len(labelled)
        else pd.DataFrame(columns=GROUP_DISTANCE_COLUMNS)
    )
    matrices = {
        (t["model_a"].iloc[0], t["model_b"].iloc[0]): cka_matrix_from_table(t)
        for t in tables
        if t["model_a"].iloc[0] in groups and t["model_b"].iloc[0] in groups
    }
    value_range = CKA_RANGES[estimation.estimator]
    curves = (
        layer_cka_curves(matrices, groups, confidence=estimation.confidence, n_points=5, value_range=value_range)
        if any(a != b for a, b in matrices)
        else pd.DataFrame(columns=CURVE_COLUMNS)
    )
    by_pair = {pair_name(table): table for table in tables}
    return (
        distances,
        distance_matrix_figure(distances),
        group_distances,
        curves,
        group_curves_figure(curves, value_range),
        figure_files(by_pair, heatmap_figure),
        dropdown_figure({pair: heatmap_plotly(table) for pair, table in by_pair.items()}, "CKA heatmaps"),
    )


def compare_streamed_pair(
    *data: Any,
    settings: CKAParameters,
    model_a: str,
    model_b: str,
    extract_a: Callable[..., Any],
    inputs_a: list[int],
    extract_b: Callable[..., Any],
    inputs_b: list[int],
):
    """:func:`compare_pair` on the two models' lazy extraction streams (``cka.mode: streaming``).

    ``data`` is the catalog inputs; ``inputs_a`` / ``inputs_b`` pick each model's extraction inputs from them
    (``extract_a`` / ``extract_b`` have the parsed ``activations`` section bound). Each stream runs its model batch
    by batch as CKA consumes it, so nothing but one batch of each model is held; the batches stay on the models'
    device (:meth:`~thinkalike.models.activation_store.ActivationStream.kept_on_device`: on a GPU, nothing but the
    per-minibatch HSIC terms reaches the host).
    """
    stream_a, index_a = extract_a(*[data[i] for i in inputs_a])
    stream_b, index_b = (stream_a, index_a) if model_a == model_b else extract_b(*[data[i] for i in inputs_b])
    stream_a, stream_b = stream_a.kept_on_device(), stream_b.kept_on_device()
    return compare_pair(stream_a, index_a, stream_b, index_b, settings=settings, model_a=model_a, model_b=model_b)
