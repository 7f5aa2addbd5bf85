"""``report``: one node, ``write_experiments_report``, reading the saved outputs of every experiment (the findings'
tables, every zoo model's config, the scaling summary and the figures of
:data:`thinkalike.reports.report.FIGURES`) and writing ``report`` (data/08_reporting/report.html). In a full run it
comes last (it reads every pipeline's outputs); alone (``kedro run --pipelines report``) it reads the latest saved
versions, and :class:`~thinkalike.pipelines.report.hooks.MissingReportInputsHooks` stands in for any that
was never saved, which the report lists instead of failing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.namespaces import model_dataset
from thinkalike.pipelines.parameters import section
from thinkalike.pipelines.report import nodes
from thinkalike.reports.findings import TABLES
from thinkalike.reports.report import FIGURES

NODE_NAME = "write_experiments_report"
#: Saved after the last node by the timing hook, so never this run's: the report leaves it out.
NOT_READ = ("run_timings",)


def report_inputs(parameters: Mapping[str, Any]) -> list[str]:
    """The catalog datasets the report reads (besides ``parameters``), in the node's order."""
    zoo = list(section(parameters, "zoo").get("models") or {})
    tables = [name for name in TABLES if name not in NOT_READ] + ["scaling_summary"]
    return tables + [model_dataset(model, "model_config") for model in zoo] + [name for name, _, _ in FIGURES]


def create_pipeline(parameters: Mapping[str, Any]) -> Pipeline:
    inputs = report_inputs(parameters)
    return Pipeline([Node(bind(nodes.write_report, names=inputs), ["parameters", *inputs], "report",
                          name=NODE_NAME)])
