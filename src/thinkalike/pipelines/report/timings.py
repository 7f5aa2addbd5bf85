"""The run's timings, rendered into the report this run wrote (the Kedro side of
:mod:`thinkalike.reports.run_timings`).

Why this way, and not the report reading ``run_timings``: the table is saved when the run ends, after every node —
the report's included (:mod:`thinkalike.run_record.timing_hooks`) — so no node of the run can read it. Once the hook has
saved it, :func:`add_run_timings` reads the saved table back and renders the report's run-timings section from it,
then writes the report file again through a temporary file beside it and a rename
(:func:`thinkalike.provenance.write_text_atomically`: a reader sees the old file or the new one, never half of one).

Only the report this very run saved is rewritten: the one at the run's save version, the version its ``run_timings``
was just saved at (Kedro saves every versioned dataset of a run at one version). A partial run that did not run the
report, a failed run that stopped before it, a report saved elsewhere than on the local disk or one written before
the report had a run-timings region are left as they are, with a log line; nothing here raises, so the run's own
outcome never depends on its report.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from thinkalike.pipelines.specs import report_outline
from thinkalike.provenance import write_text_atomically
from thinkalike.reports.run_timings import with_run_timings

logger = logging.getLogger(__name__)

REPORT = "report"


def saved_file(catalog: Any, name: str, version: str) -> Path | None:
    """The local file of versioned dataset ``name`` at ``version`` if it was saved there, else ``None`` (Kedro has no
    public API for a version's path: its file datasets' own ``_get_versioned_path`` and ``_protocol``)."""
    dataset = catalog.get(name)
    if (
        dataset is None
        or getattr(dataset, "_protocol", "file") != "file"
        or not hasattr(dataset, "_get_versioned_path")
    ):
        return None
    path = Path(str(dataset._get_versioned_path(version)))
    return path if path.is_file() else None


def add_run_timings(catalog: Any, timings: str) -> str | None:
    """Renders the ``timings`` table just saved (its save version's) into the report saved at that version, and
    returns the report's new text; ``None`` when there is no such report or it could not be rewritten (logged)."""
    try:
        version = catalog.get(timings).resolve_save_version()
        path = saved_file(catalog, REPORT, version)
        if path is None:
            logger.debug("No %s saved at version %s: the run's timings go into no report", REPORT, version)
            return None
        text = with_run_timings(
            path.read_text(encoding="utf-8"), catalog.load(timings, version=version), report_outline()
        )
        write_text_atomically(path, text)
    except Exception as error:  # noqa: BLE001 - the run's outputs are saved; its report must not turn it into a failure
        logger.warning("The run's timings could not be added to its report: %s", error)
        return None
    logger.info("The run's timings are in its report (%s)", path)
    return text


def report_after_timings(catalog: Any, timings: str) -> tuple[str, str] | None:
    """The report pipeline's step once the run's timings are saved (its spec's ``after_timings``): the report this
    run saved gets its run-timings section (:func:`add_run_timings`), and MLflow gets the report again."""
    report = add_run_timings(catalog, timings)
    return None if report is None else (REPORT, report)
