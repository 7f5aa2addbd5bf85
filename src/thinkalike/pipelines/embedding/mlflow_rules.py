"""What MLflow gets from the ``embedding`` pipeline's tables (rules of :mod:`thinkalike.output_rules`; no Kedro): each
model's and pair's tables as CSV with their summary numbers as details (:func:`embedding_metrics`), the summaries'
tables as CSV with a handful of run metrics (``embedding/…``: :func:`summary_metrics`)."""

from __future__ import annotations

import math

import pandas as pd

from thinkalike.embedding.overlap import summarise_overlap
from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, log_table, metric, named

#: Short dataset names whose tables give metrics.
METRIC_TABLES = frozenset(
    {
        "keep_k_scores",
        "alignment_matches",
        "zero_shot_accuracy",
        "feature_fractions",
        "key_value_overlap",
        "token_structure",
    }
)
#: The keep-k grid points logged (plus k = V), where the table has them.
LOGGED_KS = (10, 100, 1024)


def embedding_metrics(short: str, namespace: str, table: pd.DataFrame) -> dict[str, float]:
    """``{metric: value}`` of one saved table (``namespace``: ``embedding.<model>`` or ``embedding.<a>__<b>``)."""
    metrics: dict[str, float] = {}
    if short == "keep_k_scores":
        ks = {k for k in LOGGED_KS if k in set(table["k"])} | {int(table["k"].max())}
        for row in table[table["k"].isin(ks)].itertuples():
            metrics[f"{namespace}.keep_k.{row.distribution}.{row.variant}.{row.e_prime}.k{row.k}"] = float(row.score)
        if len(table):
            metrics[f"{namespace}.condition_number"] = float(table["condition_number"].iloc[0])
    elif short == "alignment_matches":
        for row in table.itertuples():
            metrics[f"{namespace}.diagonal_fraction.{row.group}.{row.space}"] = float(row.diagonal_fraction)
    elif short == "zero_shot_accuracy":
        for row in table.itertuples():
            metrics[f"{namespace}.zero_shot_accuracy.b_layers_{row.layers_from_b}"] = float(row.accuracy)
        if len(table):
            metrics[f"{namespace}.own_accuracy"] = float(table["own_accuracy"].iloc[0])
    elif short == "feature_fractions":
        for source, value in table.groupby("source")["feature_fraction"].mean().items():
            metrics[f"{namespace}.feature_fraction.{source}"] = float(value)
    elif short == "key_value_overlap":
        for row in summarise_overlap(table).itertuples():
            for name in ("matched_mean", "random_mean", "difference"):
                metrics[f"{namespace}.key_value_overlap.{row.pair}.{name}"] = float(getattr(row, name))
    elif short == "token_structure" and len(table):
        means = table.groupby("group", sort=True)[["coherence_mean", "chance", "random_vector_mean"]].mean()
        for group, row in means.iterrows():
            for name, value in row.items():
                metrics[f"{namespace}.token_structure.{group}.{name}"] = float(value)
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


def _log_metric_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_details(embedding_metrics(output.short, output.namespace, output.data), output.name)


def _finite(metrics: dict[str, float]) -> dict[str, float]:
    return {key: float(value) for key, value in metrics.items() if math.isfinite(float(value))}


def summary_metrics(name: str, table: pd.DataFrame) -> dict[str, float]:
    """The run's ``embedding/`` metrics from one summary table: ``<model>.condition_number`` (``embedding_keep_k``),
    ``diagonal_fraction.<space>`` (``embedding_alignment``: mean over pairs of two models),
    ``zero_shot_accuracy`` (``embedding_zero_shot``: mean over pairs of two models and layers) and
    ``feature_fraction.<source>`` (``embedding_feature_fractions``: mean)."""
    if table.empty:
        return {}
    if name == "embedding_keep_k":
        numbers = table.groupby("model", sort=True)["condition_number"].first()
        return _finite({metric("embedding", f"{model}.condition_number"): v for model, v in numbers.items()})
    if name == "embedding_alignment":
        pairs = table[table["model_a"] != table["model_b"]]
        means = pairs.groupby("space", sort=True)["diagonal_fraction"].mean()
        return _finite({metric("embedding", f"diagonal_fraction.{space}"): v for space, v in means.items()})
    if name == "embedding_zero_shot":
        pairs = table[table["model_a"] != table["model_b"]]
        return _finite({metric("embedding", "zero_shot_accuracy"): pairs["accuracy"].mean()}) if len(pairs) else {}
    if name == "embedding_feature_fractions":
        means = table.groupby("source", sort=True)["feature_fraction"].mean()
        return _finite({metric("embedding", f"feature_fraction.{source}"): v for source, v in means.items()})
    return {}


#: The summary tables that give run metrics (:func:`summary_metrics`).
SUMMARY_TABLES = ("embedding_keep_k", "embedding_alignment", "embedding_zero_shot", "embedding_feature_fractions")


def _log_summary_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_metrics(summary_metrics(output.name, output.data), what=output.name)


#: The tables of :data:`METRIC_TABLES` (per model or pair) as CSV with their summary numbers as details; the summaries
#: of :data:`SUMMARY_TABLES` as CSV with the run's ``embedding/`` metrics.
RULES: tuple[OutputRule, ...] = (
    OutputRule(
        f"ending {sorted(METRIC_TABLES)}, a table",
        lambda output: output.short in METRIC_TABLES and isinstance(output.data, pd.DataFrame),
        _log_metric_table,
    ),
    named(SUMMARY_TABLES, _log_summary_table),
)
