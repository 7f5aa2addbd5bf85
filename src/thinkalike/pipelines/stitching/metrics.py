"""What MLflow gets from the stitching outputs (rules of :mod:`thinkalike.output_rules`; no Kedro).

Beside the penalties (``<pair>.<kind>.penalty_<layer_f>_<layer_g>``), each learned stitch's learning
curve becomes step-indexed metric histories ``<pair>.<kind>.<value>_<layer_f>_<layer_g>`` for the
values of :data:`CURVE_METRICS`: the training loss at every step, the held-out loss and penalty at
step 0 (initialisation) and every ``eval_every`` steps.

With several φ seeds (``stitching.phi_seeds``) the keys stay the same and hold the **first seed's**
numbers (seed 0 by default): the penalty metric is the table's ``penalty`` column (the first seed's,
whose evaluation-bootstrap interval is ``ci_low`` / ``ci_high``; the seeds' mean and spread are the
table's ``penalty_seed_*`` columns), and each curve history is the first seed's curve — one
history per key, never several seeds' steps interleaved.
"""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table

CURVE_METRICS: tuple[str, ...] = ("train_loss", "heldout_loss", "heldout_penalty")


def curve_histories(pair: str, curves: pd.DataFrame) -> dict[str, tuple[list[float], list[int]]]:
    """``{metric name: (values, steps)}`` of one ordered pair's learning curves (NaN entries left out; with a
    ``phi_seed`` column, each stitch's first seed only)."""
    histories: dict[str, tuple[list[float], list[int]]] = {}
    if curves.empty:
        return histories
    for (kind, layer_f, layer_g), rows in curves.groupby(["kind", "layer_f", "layer_g"], sort=False):
        if "phi_seed" in rows:
            rows = rows[rows["phi_seed"] == rows["phi_seed"].iloc[0]]
        rows = rows.sort_values("step")
        for column in CURVE_METRICS:
            present = rows[["step", column]].dropna()
            if len(present):
                histories[f"{pair}.{kind}.{column}_{layer_f}_{layer_g}"] = (
                    present[column].astype(float).tolist(),
                    present["step"].astype(int).tolist(),
                )
    return histories


def _log_stitch_table(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_metrics(
        {
            f"{output.namespace}.{row.stitch}.penalty_{row.layer_f}_{row.layer_g}": float(row.penalty)
            for row in output.data.itertuples()
        },
        what=f"{output.namespace} penalties",
    )


def _log_stitch_curves(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_metric_history(
        curve_histories(output.namespace, output.data), what=f"{output.namespace} learning curves"
    )


#: Each ordered pair's ``stitch_table`` as CSV and its penalties as metrics, its ``stitch_curves`` as histories.
RULES: tuple[OutputRule, ...] = (
    ending(["stitch_table"], _log_stitch_table),
    ending(["stitch_curves"], _log_stitch_curves),
)
