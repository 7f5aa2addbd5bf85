"""What MLflow gets from the ``report`` pipeline (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Mapping
from typing import Any

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, metric, named

#: The scorecard's module, added on its own (its ``scorecard_metrics(findings) -> dict[str, float]`` gives one number
#: per row); until it exists a run has no ``scorecard/`` metrics.
SCORECARD_MODULE = "thinkalike.reports.findings.scorecard"


def scorecard_metrics(findings: Mapping[str, Any]) -> dict[str, float]:
    """``{scorecard/<row id>: value}`` from the scorecard module's ``scorecard_metrics``; empty while that module (or
    its function) does not exist. A plain presence check, so an error inside the scorecard is raised, not hidden."""
    if importlib.util.find_spec(SCORECARD_MODULE) is None:  # the scorecard is not in this version of the package yet
        return {}
    rows = getattr(importlib.import_module(SCORECARD_MODULE), "scorecard_metrics", None)
    if rows is None:  # the module exists without its metrics function yet
        return {}
    return {
        metric("scorecard", str(row).removeprefix("scorecard/")): float(value) for row, value in rows(findings).items()
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
    """``{claims/<id>: margin}``, one per claim of the run (> 0: it holds in this run; undecided ones left out)."""
    return {metric("claims", c["id"]): float(c["margin"]) for c in claims if c.get("margin") is not None}


def _log_claims(recorder: Recorder, output: SavedOutput) -> None:
    """Each claim's margin as the metric ``claims/<id>``, so comparing runs in the MLflow UI starts from the findings;
    the claims themselves as ``reports/claims.json``."""
    recorder.log_metrics(claim_metrics(output.data.get("claims") or []), what="claims")
    recorder.log_text(json.dumps(output.data, indent=1, ensure_ascii=False), "reports/claims.json")


#: The report, as the artifact ``reports/report.html``, with the scorecard's rows as metrics ``scorecard/<row>`` (read
#: from the findings the report embeds); the run's claims as metrics ``claims/<id>``.
RULES: tuple[OutputRule, ...] = (named(["report"], _log_report), named(["run_claims"], _log_claims))
