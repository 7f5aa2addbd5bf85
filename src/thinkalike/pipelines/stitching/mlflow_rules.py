"""What MLflow gets from the stitching outputs (rules of :mod:`thinkalike.output_rules`; no Kedro).

The run's metrics are a handful from ``stitching_penalties``: per kind of stitch, its mean penalty between two
models and of a model with itself (``stitching/<kind>.penalty_between`` / ``…penalty_self``). Every stitch is a row
of the tables: each ordered pair's ``stitch_table`` and the summaries ``stitching_penalties`` and ``stitching_curves``
(every pair's learning curves), as CSV. Each stitch's penalty is also a detail
``<pair>.<kind>.penalty_<layer_f>_<layer_g>`` (a row of the run's metric details,
:data:`thinkalike.output_rules.DETAILS_ARTIFACT`); :func:`curve_histories` gives the learning curves' values as
step-indexed histories named ``<pair>.<kind>.<value>_<layer_f>_<layer_g>`` (the first φ seed's), which these rules do
not log: the curves are the ``stitching_curves`` table.

With several φ seeds (``stitching.phi_seeds``) the penalty is the table's ``penalty`` column (the first seed's,
whose evaluation-bootstrap interval is ``ci_low`` / ``ci_high``; the seeds' mean and spread are the
table's ``penalty_seed_*`` columns).
"""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, metric, named

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
    recorder.log_details(
        {
            f"{output.namespace}.{row.stitch}.penalty_{row.layer_f}_{row.layer_g}": float(row.penalty)
            for row in output.data.itertuples()
        },
        output.name,
    )


def penalty_metrics(penalties: pd.DataFrame) -> dict[str, float]:
    """``stitching/<kind>.penalty_between`` (mean over stitches between two models) and ``…penalty_self`` (a model
    with itself), finite means only."""
    metrics: dict[str, float] = {}
    if penalties.empty:
        return metrics
    between = penalties["model_f"] != penalties["model_g"]
    for label, rows in (("between", penalties[between]), ("self", penalties[~between])):
        for kind, mean in rows.groupby("stitch", sort=True)["penalty"].mean().items():
            if pd.notna(mean):
                metrics[metric("stitching", f"{kind}.penalty_{label}")] = float(mean)
    return metrics


def _log_penalties(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_metrics(penalty_metrics(output.data), what=output.name)


#: Each ordered pair's ``stitch_table`` as CSV (the penalties also as details); ``stitching_penalties`` as CSV with
#: the run's ``stitching/`` metrics; ``stitching_curves`` (every pair's ``stitch_curves``, one table) as CSV.
RULES: tuple[OutputRule, ...] = (
    ending(["stitch_table"], _log_stitch_table),
    named(["stitching_penalties"], _log_penalties),
    named(["stitching_curves"], log_table),
)
