"""What MLflow gets from the nli pipeline's outputs: a handful of run metrics from the copies' accuracies
(``nli/…``), every copy's accuracy table and the summaries as CSV (each copy's accuracies also as details), the report
as text (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import math

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, log_table, metric, named

NAMESPACE = "nli"  # the pipeline's outputs under ``models.``
#: Summary tables of ``models.nli`` logged to MLflow as CSV.
TABLES = frozenset({"accuracy", "groups", "sweep", "stitching_groups", "cka_group_distances", "cka_group_curves"})
#: The accuracies that are run metrics (``<split>_<subcase>_<label>`` of an accuracy table): in distribution, and on
#: the out-of-distribution cases (McCoy et al.'s non-entailed ones separate the heuristic copies).
HEADLINE = ("test_all_all", "ood_all_entailed", "ood_all_non_entailed")


def accuracy_metrics(prefix: str, table: pd.DataFrame) -> dict[str, float]:
    """``{<prefix>.<model>.<split>_<subcase>_<label>: accuracy}`` for every row of an accuracy table, e.g.
    ``nli.copy_00.ood_passive_non_entailed`` (``<prefix>.<model>`` is the namespace for one copy's table)."""
    return {
        f"{prefix}.{row.model}.{row.split}_{row.subcase}_{row.label}": float(row.accuracy) for row in table.itertuples()
    }


def summary_metrics(table: pd.DataFrame) -> dict[str, float]:
    """From the summary ``nli.accuracy``: ``nli/copies.<accuracy>.mean`` / ``.min`` / ``.max`` over the copies and
    ``nli/baseline.<accuracy>`` of the lexical-overlap rule, for each accuracy of :data:`HEADLINE`."""
    from thinkalike.nli.analysis import BASELINE

    table = table.assign(key=table["split"] + "_" + table["subcase"] + "_" + table["label"])
    table = table[table["key"].isin(HEADLINE)]
    metrics: dict[str, float] = {}
    copies = table[table["model"] != BASELINE]
    for key, accuracy in copies.groupby("key", sort=True)["accuracy"]:
        for statistic in ("mean", "min", "max"):
            metrics[metric("nli", f"copies.{key}.{statistic}")] = float(getattr(accuracy, statistic)())
    for row in table[table["model"] == BASELINE].itertuples():
        metrics[metric("nli", f"baseline.{row.key}")] = float(row.accuracy)
    return {key: value for key, value in metrics.items() if math.isfinite(value)}


def _is_copy_accuracy(output: SavedOutput) -> bool:
    """One copy's accuracy table (``nli.<copy>.accuracy``), not the summary ``nli.accuracy``."""
    return output.short == "accuracy" and output.namespace.startswith(f"{NAMESPACE}.")


def _log_copy_accuracy(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_details(accuracy_metrics(NAMESPACE, output.data), output.name)


def _log_summary_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    if output.short == "accuracy":  # the copies' spread and the lexical-overlap baseline as run metrics
        from thinkalike.nli.analysis import BASELINE

        table = output.data
        recorder.log_metrics(summary_metrics(table), what="nli accuracy")
        recorder.log_details(accuracy_metrics(NAMESPACE, table[table["model"] == BASELINE]), output.name)


def _log_report(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_text(output.data, "reports/nli_report.md")


RULES: tuple[OutputRule, ...] = (
    OutputRule("one NLI copy's accuracy table", _is_copy_accuracy, _log_copy_accuracy),
    named([f"{NAMESPACE}.{short}" for short in TABLES], _log_summary_table),
    named([f"{NAMESPACE}.report"], _log_report),
)
