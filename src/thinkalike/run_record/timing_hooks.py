"""Every ``kedro run`` saves a ``run_timings`` table: each node's wall, CPU, load and save time and
peak memory (:mod:`thinkalike.run_record.clock` defines the columns).

The table goes through the catalog (``run_timings``, a versioned parquet dataset written
atomically, at the run's version) and to the run's MLflow run through the ``record`` callback
(:meth:`thinkalike.hooks.MlflowTrackingHooks.record_output`): the table as
``tables/run_timings.csv``, the run's cost per pipeline as ``cost/<pipeline>.wall_s`` …, ``cost/total.wall_s``
(:func:`thinkalike.run_record.clock.cost_metrics`), and the other totals as details. It is saved when the run ends, and also when it fails (the node it
stopped in is marked ``failed``); a partial run (``--pipelines``, ``--namespaces``, resume)
records only what ran, and a run in which no node ran (a resume of a complete project, a
failure before the first node) saves no version (MLflow still gets its metrics). Once saved, the
table goes to each pipeline's ``after_timings`` step (:class:`thinkalike.pipelines.specs.PipelineSpec`): the report
pipeline's renders it into the report the same run wrote, if it wrote one (its node ran before the table existed),
and MLflow gets that report again.

Hook order (pluggy calls ``tryfirst`` implementations first, ``trylast`` ones last): the run's
clock starts in the first ``before_pipeline_run`` (so parameter validation and opening the MLflow
run count, in the ``(start)`` row) and stops in the first ``after_pipeline_run`` /
``on_pipeline_error``, which saves and records the table before MLflow's ``trylast`` hook closes
its run. Around loads, node functions and saves this hook is the innermost: its ``before_*`` run
last and its ``after_*`` first, so other hooks' work (MLflow logging each saved output) falls in
the node's ``other_seconds``, not in its load, run or save time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kedro.framework.hooks import hook_impl

from thinkalike.run_record.clock import RunClock

logger = logging.getLogger(__name__)

DATASET = "run_timings"


def pipeline_membership(registry: Mapping[str, Any]) -> dict[str, str]:
    """Node name → the registered pipeline(s) holding it (``__default__`` left out; several joined by ``+``)."""
    members: dict[str, list[str]] = {}
    for name, pipeline in registry.items():
        if name == "__default__" or pipeline is None:
            continue
        for node in pipeline.nodes:
            members.setdefault(node.name, []).append(name)
    return {node: "+".join(names) for node, names in members.items()}


def registered_pipelines() -> dict[str, Any]:
    """Kedro's pipeline registry as the session built it (:class:`thinkalike.pipeline_registry.ProjectContext`)."""
    from kedro.framework.project import pipelines

    try:
        return {name: pipelines[name] for name in pipelines}
    except Exception as error:  # noqa: BLE001 - a registry that cannot load leaves the column unknown, not the run
        logger.warning("run_timings: the pipeline registry could not be read (%s); pipelines are left unknown", error)
        return {}


class RunTimingHooks:
    """Times every node of a run and saves the ``run_timings`` table (see the module docstring).

    ``record(name, table)`` is called with the saved table (the project passes the MLflow
    hooks' :meth:`~thinkalike.hooks.MlflowTrackingHooks.record_output`).
    """

    def __init__(self, record: Callable[[str, Any], None] | None = None) -> None:
        self._record = record
        self._clock: RunClock | None = None
        self.last_table = None  # the last run's table (for tests and notebooks)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        self._clock = RunClock(pipeline_membership(registered_pipelines()))

    # ---- loads, node functions, saves (innermost: before_* last, after_* first)
    @hook_impl(trylast=True)
    def before_dataset_loaded(self, dataset_name: str, node) -> None:
        if self._clock is not None and node is not None:
            self._clock.load_started(node.name, node.namespace, node.outputs)

    @hook_impl(tryfirst=True)
    def after_dataset_loaded(self, dataset_name: str, data: Any, node) -> None:
        if self._clock is not None and node is not None:
            self._clock.load_finished(node.name)

    @hook_impl(trylast=True)
    def before_node_run(self, node, catalog, inputs, is_async, run_id) -> None:
        if self._clock is not None:
            self._clock.function_started(node.name, node.namespace, node.outputs)

    @hook_impl(tryfirst=True)
    def after_node_run(self, node, catalog, inputs, outputs, is_async, run_id) -> None:
        if self._clock is not None:
            self._clock.function_finished(node.name)

    @hook_impl(tryfirst=True)
    def on_node_error(self, error, node, catalog, inputs, is_async, run_id) -> None:
        if self._clock is not None:
            self._clock.function_finished(node.name, failed=True)

    @hook_impl(trylast=True)
    def before_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        if self._clock is not None and node is not None:
            self._clock.save_started(node.name, node.namespace, node.outputs)

    @hook_impl(tryfirst=True)
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        if self._clock is not None and node is not None:
            self._clock.save_finished(node.name, dataset_name)

    # ---- nodes run in worker processes (thinkalike.runners.remote.RemoteHookProvider)
    def remote_hooks(self) -> RunTimingHooks | None:
        """A fresh copy of these hooks for one task in a worker process: it times the task's nodes."""
        if self._clock is None:
            return None
        worker_hooks = RunTimingHooks()
        worker_hooks._clock = RunClock(self._clock.pipeline_of)
        return worker_hooks

    def report(self) -> tuple[str, list]:
        """In the worker, after its task: the process and the spans of the task's nodes."""
        from thinkalike.runners.remote import worker_name

        if self._clock is None:
            return worker_name(), []
        self._clock.finish()
        return worker_name(), self._clock.task_spans()

    def merge_remote(self, report: tuple[str, list]) -> None:
        """On the driver: a task's spans join the run's table."""
        if self._clock is not None:
            worker, spans = report
            self._clock.merge(spans, worker)

    # ---- the end of the run: save and record before MLflow's (trylast) hooks close its run
    @hook_impl(tryfirst=True)
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._finish(catalog, failed=False)

    @hook_impl(tryfirst=True)
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._finish(catalog, failed=True)

    def _finish(self, catalog, failed: bool) -> None:
        clock, self._clock = self._clock, None
        if clock is None:
            return
        clock.finish(failed=failed)
        table = clock.table()
        self.last_table = table
        if not clock.spans:  # nothing ran (a resume of a complete project, a failure before the first node)
            logger.debug("No node ran: no %s version is saved", DATASET)
        elif DATASET in catalog:
            try:
                catalog.save(DATASET, table)
            except Exception as error:  # noqa: BLE001 - the run's outputs are saved; neither hide its own error
                # nor leave its MLflow run open (the MLflow hooks that close it run after this one)
                logger.warning("The run's timing table (%s) could not be saved: %s", DATASET, error)
            else:
                self._after_timings(catalog)
        else:
            logger.info("No %r dataset in the catalog: the run's timing table is not saved", DATASET)
        if self._record is not None:
            self._record(DATASET, table)

    def _after_timings(self, catalog) -> None:
        """Each pipeline's step once the timings are saved (its spec's ``after_timings``: the report gets its
        run-timings section), and MLflow the output it returns again; a step that fails is logged, never raised."""
        from thinkalike.pipelines.specs import pipeline_specs

        for spec in pipeline_specs().values():
            if spec.after_timings is None:
                continue
            try:
                output = spec.after_timings(catalog, DATASET)
            except Exception as error:  # noqa: BLE001 - the run's outputs are saved; a follow-up must not fail it
                logger.warning("%s: its step after the run's timings failed: %s", spec.name, error)
                continue
            if output is not None and self._record is not None:
                self._record(*output)
