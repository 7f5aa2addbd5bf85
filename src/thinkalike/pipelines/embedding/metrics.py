"""What MLflow gets from the ``embedding`` pipeline's tables: their summary numbers (rules of
:mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import math

import pandas as pd

from thinkalike.embedding.overlap import summarise_overlap
from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, log_table

#: Short dataset names whose tables give metrics.
METRIC_TABLES = frozenset(
    {"keep_k_scores", "alignment_matches", "zero_shot_accuracy", "feature_fractions", "key_value_overlap"}
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
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


def _log_metric_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_metrics(
        embedding_metrics(output.short, output.namespace, output.data), what=f"{output.namespace} {output.short}"
    )


#: The tables of :data:`METRIC_TABLES` (per model or pair) as CSV with their summary numbers.
RULES: tuple[OutputRule, ...] = (
    OutputRule(
        f"ending {sorted(METRIC_TABLES)}, a table",
        lambda output: output.short in METRIC_TABLES and isinstance(output.data, pd.DataFrame),
        _log_metric_table,
    ),
)
