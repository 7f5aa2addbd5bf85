"""``report``: one node, ``models.report.write_experiments_report``, reading the saved outputs of every experiment
(the findings' tables, every zoo model's config, the scaling summary, every CKA pair's ``measures_table``, the
figures and the interactive figures' tables that the pipelines' report sections declare, then the
summaries' other outputs for its index) and writing ``report`` (data/08_reporting/report.html) and ``run_claims``
(the run's claims with their margins, logged to MLflow as ``claims/<id>``). In a full run it comes last (it reads
every pipeline's outputs); alone (``kedro run --pipelines report``) it reads the latest saved versions, and
:class:`~thinkalike.pipelines.report.hooks.MissingReportInputsHooks` stands in for any that was never saved, which
the report lists instead of failing. The run's timings are saved after it, when the run ends:
:mod:`thinkalike.pipelines.report.timings` then renders them into the report this run wrote."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.schema import configured_models_of, zoo_model_names
from thinkalike.pipelines.cka.pairs import all_cka_pairs, pair_dataset
from thinkalike.pipelines.cka.pipeline import CALIBRATION_SUMMARY, MEASURES_OUTPUT, MEASURES_SUMMARY_OUTPUTS
from thinkalike.pipelines.cka.schema import CKAParameters, cka_section, cka_settings
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import group_namespace, model_dataset
from thinkalike.pipelines.report import nodes
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.scaling.plan import scaling_plan
from thinkalike.pipelines.specs import report_outline
from thinkalike.reports.experiments import findings_dataset

NODE_NAME = f"{group_namespace('report')}.write_experiments_report"  # the node's full name
#: Saved after the last node by the timing hook, so never this run's: the report leaves it out, and the hook renders
#: it into the report afterwards (:mod:`thinkalike.pipelines.report.timings`).
NOT_READ = ("run_timings",)


def _measured(cka: CKAParameters) -> bool:
    """Whether the ``cka`` pipeline computes the measures beyond CKA (``cka.measures.names``, stored mode)."""
    return bool(cka.measures.names) and cka.mode != "streaming"


def _measures_left_out(run: RunSettings) -> set[str]:
    """The measures' summaries nothing makes: all without ``cka.measures`` (or in streaming mode), the calibration's
    without ``cka.measures.calibration`` (the ``cka`` section parsed:
    :func:`~thinkalike.pipelines.cka.schema.cka_settings`)."""
    everything = {*MEASURES_SUMMARY_OUTPUTS, CALIBRATION_SUMMARY}
    if not run.raw("cka"):
        return everything
    try:
        cka = run.parsed(cka_settings)
    except ValueError:  # broken settings: the cka pipeline names the error; the report reads what was saved
        return set()
    if not _measured(cka):
        return everything
    return set() if cka.measures.calibrated else {CALIBRATION_SUMMARY}


def measures_tables(run: RunSettings) -> list[str]:
    """Every CKA pair's ``measures_table`` where the measures are computed (the dimensions each measure compared,
    :mod:`thinkalike.reports.measure_space`): the pairs of :func:`~thinkalike.pipelines.cka.pairs.all_cka_pairs`.
    None without measures, or with a ``cka`` section that cannot be read (the cka pipeline names its error).
    kedro-viz draws these tables in the ``models`` box, beside the summaries, as both ``models.cka`` and the report
    read them."""
    if not run.raw("cka"):
        return []
    try:
        models = run.parsed(configured_models_of)
        cka = run.parsed(cka_section)
        pairs = all_cka_pairs(run, cka.pairs, models)
    except ValueError:
        return []
    return [pair_dataset(a, b, MEASURES_OUTPUT) for a, b in pairs] if _measured(cka) else []


def saved_findings(left_out: Collection[str] = ()) -> list[str]:
    """Every section's saved numbers (:mod:`thinkalike.pipelines.section_findings`), in the outline's order: the
    report's findings, collected by the pipelines that make the tables. A section all of whose tables are
    ``left_out`` (nothing makes them in this configuration, as the scaling summary without a family) gets no node
    that saves it, so the report does not read it."""
    return [
        findings_dataset(section.section)
        for section in report_outline().saved_sections
        if any(name not in left_out for name in section.tables)
    ]


def report_inputs(run: RunSettings) -> list[str]:
    """The catalog datasets the report reads (besides ``parameters``), in the node's order: each section's saved
    numbers (:func:`saved_findings`), the tables the pipelines' report sections read (:func:`~thinkalike.pipelines.specs.report_outline`), the zoo's configs, the CKA
    pairs' measures tables (:func:`measures_tables`), the saved PNGs the sections show and the tables their interactive
    figures are drawn from. Without a scaling
    family (:func:`~thinkalike.pipelines.scaling.plan.scaling_plan`) the scaling outputs are left out: nothing makes
    them, and the report says there is no family; likewise the measures' summaries without ``cka.measures``."""
    zoo = zoo_model_names(run.parameters)
    try:
        scaling = scaling_plan(run) is not None
    except ValueError:  # a broken scaling section: its pipeline names the error; the report reads what was saved
        scaling = True
    left_out = set(NOT_READ) | (set() if scaling else {"scaling_summary"})
    left_out |= _measures_left_out(run)
    outline = report_outline()
    tables = [name for name in outline.tables if name not in left_out]
    pngs = [f.name for f in outline.png_figures() if (scaling or f.pipeline != "scaling") and f.name not in left_out]
    drawn = [name for figure in outline.figures() for name in figure.drawn_from]
    configs = [model_dataset(model, "model_config") for model in zoo]
    inputs = saved_findings(left_out) + tables + configs + measures_tables(run) + pngs
    return inputs + [name for name in dict.fromkeys(drawn) if name not in inputs and name not in left_out]


#: The committed replicates' document (docs/findings.json, read only): its verdicts go beside this run's estimates.
COMMITTED_FINDINGS = f"{group_namespace('report')}.committed_findings"  # inside the report's box in kedro-viz


def create_pipeline(run: RunSettings, indexed: Sequence[str] = ()) -> Pipeline:
    """The report node; ``indexed``: the run's other outputs, which it lists in its index (see
    :func:`thinkalike.pipelines.builders.build_pipelines`: the summaries' outputs no other node reads)."""
    inputs = report_inputs(run)
    listed = [name for name in indexed if name not in inputs]
    return Pipeline(
        [
            Node(
                with_fixed_arguments(nodes.write_report, names=inputs, indexed=listed),
                ["parameters", COMMITTED_FINDINGS, *inputs, *listed],
                ["report", "run_claims"],
                name="write_experiments_report",
                namespace=group_namespace("report"),
            )
        ]
    )
