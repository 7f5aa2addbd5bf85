"""What MLflow gets from the models' training (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, tables

CURVE_COLUMNS = ("train_loss", "heldout_loss")
#: The loss curves that are run metrics, by the model's namespace: the zoo's models (``zoo/<model>.train_loss`` …)
#: and the NLI encoder (``nli/encoder.…``); the NLI copies' curves are their ``training_curve`` tables only.
CURVE_GROUPS = {"nli.encoder": ("nli", "encoder")}


def curve_histories(model: str, curve: pd.DataFrame) -> dict[str, tuple[list[float], list[int]]]:
    """``{<model>.train_loss: (values, steps), <model>.heldout_loss: …}`` of a training curve (NaN rows left out)."""
    histories = {}
    for column in CURVE_COLUMNS:
        if column in curve:
            rows = curve[["step", column]].dropna()
            histories[f"{model}.{column}"] = (rows[column].tolist(), rows["step"].astype(int).tolist())
    return histories


def curve_metric_prefix(namespace: str) -> str | None:
    """``zoo/<model>`` for a zoo model (a namespace of one part), ``nli/encoder`` for the NLI encoder, else ``None``
    (the curve is a table only)."""
    if namespace in CURVE_GROUPS:
        group, name = CURVE_GROUPS[namespace]
        return f"{group}/{name}"
    return None if "." in namespace else f"zoo/{namespace}"


def _log_curve(recorder: Recorder, output: SavedOutput) -> None:
    prefix = curve_metric_prefix(output.namespace)
    if prefix is not None:
        recorder.log_metric_history(curve_histories(prefix, output.data), what=output.name)
    log_table(recorder, output)


#: Every model's ``training_curve`` as CSV (the zoo's, the NLI encoder's and copies'); the zoo's and the encoder's as
#: step-indexed metric histories ``zoo/<model>.train_loss`` / ``zoo/<model>.heldout_loss``; ``zoo_summary`` as CSV.
RULES: tuple[OutputRule, ...] = (ending(["training_curve"], _log_curve), tables(["zoo_summary"]))
