"""What MLflow gets from the ``report`` pipeline (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, metric, named
from thinkalike.reports.findings.claims import holds
from thinkalike.reports.findings.scorecard import scorecard_metrics as run_scorecard


def scorecard_metrics(findings: Mapping[str, Any]) -> dict[str, float]:
    """``{scorecard/<row>.verdict: code, scorecard/<row>.<part>.effect_min: effect}`` of the run's scorecard
    (:func:`thinkalike.reports.findings.scorecard.scorecard_metrics`), in the ``scorecard`` group."""
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


def claim_metrics(claims: list[Mapping[str, Any]]) -> dict[str, float]:
    """``{claims/<id>: margin}``, one per proposition the run states: the claims whose margin is > 0 (a claim's
    negation, or the other candidates of a choice, have margins ≤ 0 in the same run, so each proposition is logged
    once, from the side that holds). Every claim, holding or not, is in the run's ``reports/claims.json``."""
    return {metric("claims", c["id"]): float(c["margin"]) for c in claims if holds(c.get("margin"))}


def _log_claims(recorder: Recorder, output: SavedOutput) -> None:
    """Each claim's margin as the metric ``claims/<id>``, so comparing runs in the MLflow UI starts from the findings;
    the claims themselves as ``reports/claims.json``."""
    recorder.log_metrics(claim_metrics(output.data.get("claims") or []), what="claims")
    recorder.log_text(json.dumps(output.data, indent=1, ensure_ascii=False), "reports/claims.json")


#: The report, as the artifact ``reports/report.html``, with the scorecard's rows as metrics ``scorecard/<row>`` (read
#: from the findings the report embeds); the run's claims as metrics ``claims/<id>``.
RULES: tuple[OutputRule, ...] = (named(["report"], _log_report), named(["run_claims"], _log_claims))
