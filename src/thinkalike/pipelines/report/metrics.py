"""What MLflow gets from the ``report`` pipeline (rules of :mod:`thinkalike.records`; no Kedro)."""

from __future__ import annotations

from thinkalike.records import OutputRule, Recorder, SavedOutput, named


def _log_report(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_text(output.data, "reports/report.html")


#: The report, as the artifact ``reports/report.html``.
RULES: tuple[OutputRule, ...] = (named(["report"], _log_report),)
