"""``report``: one node, ``models.report.write_experiments_report``, reading the saved outputs of every experiment (the findings'
tables, every zoo model's config, the scaling summary and the figures of
:data:`thinkalike.reports.report.FIGURES`, then the summaries' other outputs for its index) and writing ``report``
(data/08_reporting/report.html) and ``run_claims`` (the run's claims with their margins, logged to MLflow as
``claim.<id>``). In a full run it
comes last (it reads every pipeline's outputs); alone (``kedro run --pipelines report``) it reads the latest saved
versions, and :class:`~thinkalike.pipelines.report.hooks.MissingReportInputsHooks` stands in for any that
was never saved, which the report lists instead of failing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.schema import zoo_model_names
from thinkalike.pipelines.cka.pipeline import CALIBRATION_SUMMARY, MEASURES_SUMMARY_OUTPUTS
from thinkalike.pipelines.cka.schema import parse_cka
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import group_namespace, model_dataset
from thinkalike.pipelines.report import nodes
from thinkalike.pipelines.scaling.family import scaling_plan
from thinkalike.reports.findings import TABLES
from thinkalike.reports.report import FIGURES

NODE_NAME = f"{group_namespace('report')}.write_experiments_report"  # the node's full name
#: Saved after the last node by the timing hook, so never this run's: the report leaves it out.
NOT_READ = ("run_timings",)


def _measures_left_out(parameters: Mapping[str, Any]) -> set[str]:
    """The measures' summaries nothing makes: all without ``cka.measures`` (or in streaming mode), the calibration's
    without ``cka.measures.calibration`` (the ``cka`` section parsed:
    :func:`~thinkalike.pipelines.cka.schema.parse_cka`)."""
    everything = {*MEASURES_SUMMARY_OUTPUTS, CALIBRATION_SUMMARY}
    if not parameters.get("cka"):
        return everything
    try:
        cka = parse_cka(parameters["cka"])
    except ValueError:  # broken settings: the cka pipeline names the error; the report reads what was saved
        return set()
    if not cka.measures.names or cka.mode == "streaming":
        return everything
    return set() if cka.measures.calibrated else {CALIBRATION_SUMMARY}


def report_inputs(parameters: Mapping[str, Any]) -> list[str]:
    """The catalog datasets the report reads (besides ``parameters``), in the node's order. Without a scaling family
    (:func:`~thinkalike.pipelines.scaling.family.scaling_plan`) the scaling outputs are left out: nothing makes
    them, and the report says there is no family; likewise the measures' summaries without ``cka.measures``."""
    zoo = zoo_model_names(parameters)
    try:
        scaling = scaling_plan(parameters) is not None
    except ValueError:  # a broken scaling section: its pipeline names the error; the report reads what was saved
        scaling = True
    left_out = set(NOT_READ) | (set() if scaling else {"scaling_summary"})
    left_out |= _measures_left_out(parameters)
    tables = [name for name in TABLES if name not in left_out]
    figures = [name for name, _, pipeline in FIGURES if (scaling or pipeline != "scaling") and name not in left_out]
    return tables + [model_dataset(model, "model_config") for model in zoo] + figures


def create_pipeline(parameters: Mapping[str, Any], indexed: Sequence[str] = ()) -> Pipeline:
    """The report node; ``indexed``: the run's other outputs, which it lists in its index (see
    :func:`thinkalike.pipelines.builders.build_pipelines`: the summaries' outputs no other node reads)."""
    inputs = report_inputs(parameters)
    listed = [name for name in indexed if name not in inputs]
    return Pipeline([Node(with_fixed_arguments(nodes.write_report, names=inputs, indexed=listed), ["parameters", *inputs, *listed],
                          ["report", "run_claims"], name="write_experiments_report", namespace=group_namespace("report"))])
