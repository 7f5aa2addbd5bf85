"""Lets the ``report`` node run when some experiments never ran: before the run, every input of the report that is
neither made by the run nor saved on disk gets an in-memory :class:`~thinkalike.pipelines.report.nodes.NeverSaved`
(the report lists it as missing)."""

from __future__ import annotations

import logging
from typing import Any

from kedro.framework.hooks import hook_impl
from kedro.io import MemoryDataset
from kedro.pipeline import Pipeline

from thinkalike.pipelines.report.nodes import NeverSaved
from thinkalike.pipelines.report.pipeline import NODE_NAME

logger = logging.getLogger(__name__)


class MissingReportInputsHooks:
    """``before_pipeline_run``: a :class:`NeverSaved` for each missing input of ``write_experiments_report``."""

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Pipeline, catalog: Any) -> None:
        report = [node for node in pipeline.nodes if node.name == NODE_NAME]
        if not report:
            return
        made = pipeline.all_outputs()
        missing = [
            name
            for name in report[0].inputs
            if name not in made
            and not name.startswith("params:")
            and name != "parameters"
            and not _saved(catalog, name)
        ]
        for name in missing:
            catalog[name] = MemoryDataset(NeverSaved())
        if missing:
            logger.info(
                "report: %d input(s) are neither made by this run nor saved; the report lists them", len(missing)
            )


def _saved(catalog: Any, name: str) -> bool:
    try:
        return bool(catalog.exists(name))
    except Exception:  # noqa: BLE001 - a dataset that cannot even say whether it exists is missing for the report
        return False
