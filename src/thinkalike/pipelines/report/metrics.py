"""What MLflow gets from the ``report`` pipeline (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import json

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, named


def _log_report(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_text(output.data, "reports/report.html")


def _log_claims(recorder: Recorder, output: SavedOutput) -> None:
    """Each claim's margin as the metric ``claim.<id>`` (> 0: it holds in this run; undecided ones left out), so
    comparing runs in the MLflow UI starts from the findings; the claims themselves as ``reports/claims.json``."""
    claims = output.data.get("claims") or []
    recorder.log_metrics(
        {f"claim.{c['id']}": float(c["margin"]) for c in claims if c.get("margin") is not None}, what="claims"
    )
    recorder.log_text(json.dumps(output.data, indent=1, ensure_ascii=False), "reports/claims.json")


#: The report, as the artifact ``reports/report.html``; the run's claims as metrics ``claim.<id>``.
RULES: tuple[OutputRule, ...] = (named(["report"], _log_report), named(["run_claims"], _log_claims))
