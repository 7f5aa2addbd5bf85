"""The newest report at one stable path: ``data/08_reporting/latest/report.html``, beside the versioned ones.

The ``report`` dataset is versioned (conf/base/catalog.yml): each run saves ``report.html/<timestamp>/report.html``.
When a run ends, :class:`LatestReportHooks` copies the report this very run saved (the one at the run's save version,
after :mod:`thinkalike.pipelines.report.timings` rendered the run's timings into it) to ``latest/report.html`` in the
folder of the dataset's path, through a temporary file beside it and a rename
(:func:`thinkalike.provenance.write_text_atomically`: a reader sees the old copy or the new one, never half of one),
and logs its path as the run's last line. A copy, not a link: it opens the same way everywhere (a browser, a zip, an
MLflow artifact, Windows) and outlives the versioned folder it came from.

A run that saved no report (``--pipelines`` without ``report``, a failure before it) leaves the copy as it was: the
newest report is still the one there. Nothing here raises, so the run's own outcome never depends on the copy.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from thinkalike.pipelines.report.timings import REPORT, saved_file
from thinkalike.provenance import write_text_atomically

logger = logging.getLogger(__name__)

#: The folder, beside the report's versioned folder, that holds the newest report under the same file name.
LATEST = "latest"


def latest_path(versioned: Path) -> Path:
    """``<dir>/latest/report.html`` for the versioned report ``<dir>/report.html/<version>/report.html``."""
    return versioned.parent.parent.parent / LATEST / versioned.name


def shown(path: Path) -> str:
    """``path`` relative to the working directory (the project's, in a ``kedro run``) when it lies under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def publish_latest(catalog: Any) -> Path | None:
    """Copies the report saved at the run's save version to :func:`latest_path` and returns that path; ``None`` (and
    a log line) when the run saved no report on the local disk or the copy failed."""
    try:
        if REPORT not in catalog:
            return None
        version = catalog.get(REPORT).resolve_save_version()
        saved = saved_file(catalog, REPORT, version)
        if saved is None:
            logger.debug("No %s saved at version %s: %s/ keeps the newest one", REPORT, version, LATEST)
            return None
        latest = latest_path(saved)
        write_text_atomically(latest, saved.read_text(encoding="utf-8"))
    except Exception as error:  # noqa: BLE001 - the run's outputs are saved; the copy must not turn it into a failure
        logger.warning("The newest report could not be copied to %s/: %s", LATEST, error)
        return None
    logger.info("The report: %s (this run's: %s)", shown(latest), shown(saved))
    return latest


class LatestReportHooks:
    """At the very end of a run (``trylast``; registered after the other hooks, so called after them all, MLflow's
    closing of its run included): :func:`publish_latest`, whose log line is the run's last."""

    @hook_impl(trylast=True)
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        publish_latest(catalog)

    @hook_impl(trylast=True)
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        publish_latest(catalog)
