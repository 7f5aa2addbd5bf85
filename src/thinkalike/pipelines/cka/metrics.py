"""What MLflow gets from the ``cka`` pipeline's outputs, the measures beyond CKA included (rules of
:mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

from collections.abc import Mapping

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, tables


def _between_models(output: SavedOutput) -> bool:
    """A pair of two models (not a model with itself: CKA 1 and distance 0 by construction)."""
    table = output.data
    return len(table) > 0 and table["model_a"].iloc[0] != table["model_b"].iloc[0]


def _log_pair_metrics(recorder: Recorder, output: SavedOutput, metrics: Mapping[str, float], what: str) -> None:
    """``metrics`` under the pair's namespace: ``cka.<a>__<b>.<key>``."""
    recorder.log_metrics(
        {f"{output.namespace}.{key}": value for key, value in metrics.items()}, what=f"{output.namespace} {what}"
    )


def _log_cka_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.cka.compute import pair_summary

    log_table(recorder, output)
    if _between_models(output):
        _log_pair_metrics(recorder, output, pair_summary(output.data), "summary")


def _log_calibration_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.measures.tables import calibration_metrics

    log_table(recorder, output)
    _log_pair_metrics(recorder, output, calibration_metrics(output.data), "calibration")


def _log_measures_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.measures.tables import measure_metrics

    log_table(recorder, output)
    if _between_models(output):
        _log_pair_metrics(recorder, output, measure_metrics(output.data), "measures")


#: Each pair's ``cka_table`` / ``measures_table`` as CSV with its summary metrics (pairs of two models only),
#: ``calibration_table`` as CSV with its calibrated scores; the summaries' tables as CSV.
RULES: tuple[OutputRule, ...] = (
    ending(["cka_table"], _log_cka_table),
    ending(["calibration_table"], _log_calibration_table),
    ending(["measures_table"], _log_measures_table),
    tables(
        [
            "cka_distances",
            "cka_group_distances",
            "cka_group_curves",
            "similarity_measures",
            "dimension_shares",
            "rogue_remedies",
            "measure_grounding",
            "similarity_calibration",
        ]
    ),
)
