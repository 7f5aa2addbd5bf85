"""What MLflow gets from the nli pipeline's outputs: each copy's accuracy as metrics, the summaries as CSV, the
report as text (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, log_table, named

NAMESPACE = "nli"  # the pipeline's outputs under ``models.``
#: Summary tables of ``models.nli`` logged to MLflow as CSV.
TABLES = frozenset({"accuracy", "groups", "sweep", "stitching_groups", "cka_group_distances", "cka_group_curves"})


def accuracy_metrics(prefix: str, table: pd.DataFrame) -> dict[str, float]:
    """``{<prefix>.<model>.<split>_<subcase>_<label>: accuracy}`` for every row of an accuracy table, e.g.
    ``nli.copy_00.ood_passive_non_entailed`` (``<prefix>.<model>`` is the namespace for one copy's table)."""
    return {
        f"{prefix}.{row.model}.{row.split}_{row.subcase}_{row.label}": float(row.accuracy) for row in table.itertuples()
    }


def _is_copy_accuracy(output: SavedOutput) -> bool:
    """One copy's accuracy table (``nli.<copy>.accuracy``), not the summary ``nli.accuracy``."""
    return output.short == "accuracy" and output.namespace.startswith(f"{NAMESPACE}.")


def _log_copy_accuracy(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_metrics(accuracy_metrics(NAMESPACE, output.data), what=f"{output.name} metrics")


def _log_summary_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    if output.short == "accuracy":  # the lexical-overlap baseline's rows as metrics too
        from thinkalike.nli.analysis import BASELINE

        table = output.data
        recorder.log_metrics(accuracy_metrics(NAMESPACE, table[table["model"] == BASELINE]), what="nli baseline")


def _log_report(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_text(output.data, "reports/nli_report.md")


RULES: tuple[OutputRule, ...] = (
    OutputRule("one NLI copy's accuracy table", _is_copy_accuracy, _log_copy_accuracy),
    named([f"{NAMESPACE}.{short}" for short in TABLES], _log_summary_table),
    named([f"{NAMESPACE}.report"], _log_report),
)
