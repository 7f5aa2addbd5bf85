"""What MLflow gets from the ``cka`` pipeline's outputs, the measures beyond CKA included (rules of
:mod:`thinkalike.output_rules`; no Kedro): every table as CSV; a handful of run metrics from the summaries (``cka/…``
over the pairs of two models in ``cka_distances``, ``measures/<measure>.…`` from ``similarity_measures`` and
``similarity_calibration``); each pair's own summary numbers as details (``cka.<a>__<b>.<key>``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, metric, named, tables


def _between_models(output: SavedOutput) -> bool:
    """A pair of two models (not a model with itself: CKA 1 and distance 0 by construction)."""
    table = output.data
    return len(table) > 0 and table["model_a"].iloc[0] != table["model_b"].iloc[0]


def _pairs_of_two_models(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["model_a"] != table["model_b"]]


def _finite(metrics: Mapping[str, float]) -> dict[str, float]:
    return {key: float(value) for key, value in metrics.items() if value is not None and math.isfinite(float(value))}


def _log_pair_details(recorder: Recorder, output: SavedOutput, metrics: Mapping[str, float]) -> None:
    """``metrics`` under the pair's namespace, ``cka.<a>__<b>.<key>``, as details."""
    recorder.log_details({f"{output.namespace}.{key}": value for key, value in metrics.items()}, output.name)


def _log_cka_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.cka.compute import pair_summary

    log_table(recorder, output)
    if _between_models(output):
        _log_pair_details(recorder, output, pair_summary(output.data))


def _log_calibration_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.cka.measure_tables import calibration_metrics

    log_table(recorder, output)
    _log_pair_details(recorder, output, calibration_metrics(output.data))


def _log_measures_table(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.cka.measure_tables import measure_metrics

    log_table(recorder, output)
    if _between_models(output):
        _log_pair_details(recorder, output, measure_metrics(output.data))


def cka_metrics(distances: pd.DataFrame) -> dict[str, float]:
    """``cka/pairs`` (pairs of two models), ``cka/mean_matched_cka.mean`` / ``.min`` / ``.max`` and
    ``cka/arccos_distance.mean`` over them (finite values only)."""
    pairs = _pairs_of_two_models(distances)
    metrics = {metric("cka", "pairs"): float(len(pairs))}
    if len(pairs):
        cka = pairs["mean_matched_cka"].astype(float)
        metrics[metric("cka", "mean_matched_cka.mean")] = cka.mean()
        metrics[metric("cka", "mean_matched_cka.min")] = cka.min()
        metrics[metric("cka", "mean_matched_cka.max")] = cka.max()
        metrics[metric("cka", "arccos_distance.mean")] = pairs["arccos_distance"].astype(float).mean()
    return _finite(metrics)


def measures_metrics(measures: pd.DataFrame) -> dict[str, float]:
    """``measures/<measure>.matched_mean``: each measure's matched-layer mean, averaged over the pairs of two
    models."""
    means = _pairs_of_two_models(measures).groupby("measure", sort=True)["matched_mean"].mean()
    return _finite({metric("measures", f"{name}.matched_mean"): value for name, value in means.items()})


def calibration_summary_metrics(calibration: pd.DataFrame) -> dict[str, float]:
    """``measures/<measure>.matched_mean_z``: each calibrated measure's z of its matched-layer mean against its
    permutation null, averaged over the pairs."""
    rows = calibration[calibration["statistic"] == "matched_mean"]
    means = rows.groupby("measure", sort=True)["z"].mean()
    return _finite({metric("measures", f"{name}.matched_mean_z"): value for name, value in means.items()})


def _summary_rule(name: str, metrics) -> OutputRule:
    def record(recorder: Recorder, output: SavedOutput) -> None:
        log_table(recorder, output)
        recorder.log_metrics(metrics(output.data), what=output.name)

    return named([name], record)


#: Each pair's ``cka_table`` / ``measures_table`` / ``calibration_table`` as CSV with its summary numbers as details
#: (pairs of two models only, but the calibration's); the summaries as CSV, three with the run's ``cka/`` and
#: ``measures/`` metrics.
RULES: tuple[OutputRule, ...] = (
    ending(["cka_table"], _log_cka_table),
    ending(["calibration_table"], _log_calibration_table),
    ending(["measures_table"], _log_measures_table),
    _summary_rule("cka_distances", cka_metrics),
    _summary_rule("similarity_measures", measures_metrics),
    _summary_rule("similarity_calibration", calibration_summary_metrics),
    tables(
        [
            "cka_group_distances",
            "cka_group_curves",
            "dimension_shares",
            "rogue_remedies",
            "measure_grounding",
        ]
    ),
)
