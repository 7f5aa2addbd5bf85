"""What MLflow gets from the models' training (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, tables

CURVE_COLUMNS = ("train_loss", "heldout_loss")


def curve_histories(model: str, curve: pd.DataFrame) -> dict[str, tuple[list[float], list[int]]]:
    """``{<model>.train_loss: (values, steps), <model>.heldout_loss: …}`` of a training curve (NaN rows left out)."""
    histories = {}
    for column in CURVE_COLUMNS:
        if column in curve:
            rows = curve[["step", column]].dropna()
            histories[f"{model}.{column}"] = (rows[column].tolist(), rows["step"].astype(int).tolist())
    return histories


def _log_curve(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_metric_history(curve_histories(output.namespace, output.data), what=output.name)
    log_table(recorder, output)


#: Every model's ``training_curve`` (the zoo's, the NLI encoder's and copies'): step-indexed metric histories
#: ``<model>.train_loss`` / ``<model>.heldout_loss`` and the CSV; ``zoo_summary`` as CSV.
RULES: tuple[OutputRule, ...] = (ending(["training_curve"], _log_curve), tables(["zoo_summary"]))
