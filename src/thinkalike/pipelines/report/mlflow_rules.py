"""What MLflow gets from the ``report`` pipeline (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, metric, named
from thinkalike.reports.findings.scorecard import scorecard_description
from thinkalike.reports.findings.scorecard import scorecard_metrics as run_scorecard


def scorecard_metrics(findings: Mapping[str, Any]) -> dict[str, float]:
    """``{scorecard/<row>.<part index>: estimate}`` of the run's scorecard (no verdict: one run has none;
    :func:`thinkalike.reports.findings.scorecard.scorecard_metrics`), in the ``scorecard`` group."""
    return {
        metric("scorecard", name.removeprefix("scorecard/")): value for name, value in run_scorecard(findings).items()
    }


def _log_report(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.reports.run_timings import embedded_findings

    recorder.log_text(output.data, "reports/report.html")
    try:
        findings = embedded_findings(output.data)
    except ValueError:  # a report without findings (written before they were): no scorecard to log
        return
    recorder.log_metrics(scorecard_metrics(findings), what="scorecard")
    recorder.set_description(scorecard_description(findings))


def _log_claims(recorder: Recorder, output: SavedOutput) -> None:
    """The run's claims as the artifact ``reports/claims.json`` (descriptive; no verdict rests on them, so they are
    not metrics: a run's metrics are its estimates)."""
    recorder.log_text(json.dumps(output.data, indent=1, ensure_ascii=False), "reports/claims.json")


#: The report, as the artifact ``reports/report.html``, with the scorecard's estimates as metrics
#: ``scorecard/<row>.<part index>`` (read from the findings the report embeds) and as the run's description; the
#: run's claims as an artifact.
RULES: tuple[OutputRule, ...] = (named(["report"], _log_report), named(["run_claims"], _log_claims))
