"""Project hooks: parameter validation, resume, MLflow records (the pipelines are built by the context class)."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from click import ClickException
from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl

from thinkalike.output_rules import apply_rules
from thinkalike.pipelines.builders import all_output_rules
from thinkalike.pipelines.namespaces import MODELS
from thinkalike.pipelines.parameters import configured_parameters, run_parameters
from thinkalike.pipelines.resume import mark_for_rerun, nodes_to_rerun
from thinkalike.pipelines.run_selection import pipelines_in_run
from thinkalike.pipelines.schema import ParameterError
from thinkalike.pipelines.specs import pipeline_specs
from thinkalike.pipelines.validation import validate_parameters
from thinkalike.run_record.tracking import (
    REPLICATE_GROUP_TAG,
    REPLICATE_GROUP_VARIABLE,
    DeferredRecorder,
    RunRecorder,
    TrackingSettings,
    TrackingStoreError,
    git_tags,
    machine_tags,
    runner_name,
    short_commit,
    tracking_settings,
)
from thinkalike.threads import DEFAULT_THREADS, ENVIRONMENT_VARIABLE, limited_threads, thread_policy

logger = logging.getLogger(__name__)


class BadParameter(ParameterError, ClickException):
    """A :class:`ParameterError` that the ``kedro`` command line shows as one line (``Error: …``), not a traceback."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


class UnusableTrackingStore(TrackingStoreError, ClickException):
    """A :class:`TrackingStoreError` (``mlflow.strict: true``) shown as one line by the ``kedro`` command line."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


class ParameterHooks:
    """Validates the run's parameters (with ``--env`` and ``--params``) before any node runs, and
    prepares ``--only-missing-outputs`` resumes.

    The pipelines themselves are built from the same parameters by the project's context class
    (:class:`thinkalike.pipeline_registry.ProjectContext`), without hooks.
    """

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        """Bad configuration fails here, before any compute and before an MLflow run is opened."""
        try:
            validate_parameters(run_parameters(catalog), *run_pipelines(run_params, pipeline))
        except ParameterError as error:
            raise BadParameter(str(error)) from None
        if run_params.get("only_missing_outputs"):
            rerun = nodes_to_rerun(pipeline, catalog)
            mark_for_rerun(rerun, catalog)
            logger.info(
                "Resume: %d of %d nodes to run%s",
                len(rerun),
                len(pipeline.nodes),
                f" ({', '.join(node.name for node in rerun[:6])}{' …' if len(rerun) > 6 else ''})" if rerun else "",
            )


def base_environment() -> str:
    """The configuration environment every other merges into (``CONFIG_LOADER_ARGS["base_env"]`` of the project's
    settings): the run's params are what differs from it."""
    from kedro.framework.project import settings

    return str(settings.CONFIG_LOADER_ARGS.get("base_env", "base"))


def run_pipelines(run_params: dict[str, Any], pipeline) -> tuple[list[str], dict[str, Any]]:
    """The project pipelines this run uses (:func:`thinkalike.pipelines.run_selection.pipelines_in_run`: those named
    with ``--pipelines``, all for the default, narrowed to those with a node in the filtered ``pipeline``), and
    the registered pipelines."""
    from kedro.framework.project import pipelines as registered

    built = {name: registered[name] for name in pipeline_specs()}
    return pipelines_in_run(run_params.get("pipeline_names"), built, pipeline), built


class ThreadPolicyHooks:
    """Every node of a run on CPU uses :func:`thinkalike.threads.thread_policy` threads (torch's intra-op pool and
    the BLAS / OpenMP pools; ``THINKALIKE_THREADS``, default 1), restored when the run ends."""

    def __init__(self) -> None:
        self._limits: contextlib.ExitStack | None = None

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        try:
            threads = thread_policy()
        except ValueError as error:
            raise BadParameter(str(error)) from None
        self._limits = contextlib.ExitStack()
        self._limits.enter_context(limited_threads(threads))
        logger.info(
            "Threads: %s per pool (%s=%s)",
            threads or "each library's default",
            ENVIRONMENT_VARIABLE,
            os.environ.get(ENVIRONMENT_VARIABLE, f"unset: {DEFAULT_THREADS}"),
        )

    @hook_impl
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._release()

    def _release(self) -> None:
        if self._limits is not None:
            self._limits.close()
            self._limits = None


class ClusterSettingsHooks:
    """Reads ``conf/<env>/dask.yml`` (key ``dask``) when the context is created, for
    :class:`thinkalike.runners.DaskRunner` (which finds it among the session's hooks); other runners ignore it.
    The settings are checked when a DaskRunner run starts (:mod:`thinkalike.runners.settings`)."""

    def __init__(self) -> None:
        self._settings: dict[str, Any] | None = None

    @hook_impl
    def after_context_created(self, context) -> None:
        try:
            config = context.config_loader["dask"]
        except (KeyError, MissingConfigException):  # no dask.yml in this configuration: the defaults
            config = {}
        self._settings = dict((config or {}).get("dask") or {})

    def cluster_settings(self) -> dict[str, Any] | None:
        return None if self._settings is None else dict(self._settings)


class MlflowTrackingHooks:
    """One MLflow run per ``kedro run`` (see :mod:`thinkalike.run_record.tracking` for the failure policy).

    Parameters, a run name that says what ran (:func:`run_name`) and tags (:func:`run_tags`: git commit and dirty
    state, the kedro command, env, replicate, runner, machine) at the start; metrics, tables and figures from each *saved* output, so what MLflow shows is
    what the catalog holds and resuming never depends on MLflow.
    """

    def __init__(self, recorder: RunRecorder | DeferredRecorder | None = None) -> None:
        self._recorder = recorder
        self._settings: TrackingSettings | None = None
        self._project_root: Path | None = None

    @hook_impl
    def after_context_created(self, context) -> None:
        self._recorder = None
        self._project_root = Path(context.project_path)
        try:
            config = context.config_loader["mlflow"]
        except (KeyError, MissingConfigException):  # no mlflow.yml in this configuration: the defaults
            config = {}
        self._settings = tracking_settings(config)

    @hook_impl(trylast=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        if self._settings is None or self._project_root is None:
            return
        self._recorder = RunRecorder(self._settings, self._project_root)
        try:
            self._recorder.check()
        except TrackingStoreError as error:  # strict mode: stop before any node, in one line
            self._recorder = None
            raise UnusableTrackingStore(str(error)) from None
        tags = run_tags(run_params, self._project_root)
        self._recorder.start(
            run_name(run_params, short_commit(tags)),
            run_parameters(catalog),
            tags,
            defaults=configured_parameters(self._project_root, base_environment()),
        )

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:
        if self._recorder is not None:
            record_saved_output(self._recorder, dataset_name, data)

    def record_output(self, name: str, data: Any) -> None:
        """Records an output saved outside a node (the run's ``run_timings`` table) in the open MLflow run.

        Called by :class:`thinkalike.run_record.timing_hooks.RunTimingHooks` from its ``tryfirst``
        ``after_pipeline_run`` / ``on_pipeline_error``, before this class's ``trylast`` ones end the run.
        """
        if self._recorder is not None:
            record_saved_output(self._recorder, name, data)

    # ---- nodes run in worker processes (thinkalike.runners.remote.RemoteHookProvider)
    def remote_hooks(self) -> MlflowTrackingHooks | None:
        """For one task in a worker process: hooks that keep what each saved output would log
        (:class:`thinkalike.run_record.tracking.DeferredRecorder`) for the driver, MLflow's one writer."""
        if self._recorder is None:
            return None
        return MlflowTrackingHooks(DeferredRecorder())

    def report(self) -> DeferredRecorder | None:
        return self._recorder if isinstance(self._recorder, DeferredRecorder) else None

    def merge_remote(self, report: DeferredRecorder | None) -> None:
        if report is not None and isinstance(self._recorder, RunRecorder):  # the driver's (workers' defer)
            report.replay(self._recorder)

    @hook_impl(trylast=True)
    def after_pipeline_run(self, run_params, run_result, pipeline, catalog) -> None:
        self._end("FINISHED")

    @hook_impl(trylast=True)
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        self._end("FAILED")

    def _end(self, status: str) -> None:
        if isinstance(self._recorder, RunRecorder):  # a worker's DeferredRecorder has no run to end
            self._recorder.end(status)
        self._recorder = None


def replicate_of(run_params: dict[str, Any]) -> Any:
    """The run's ``replicate`` runtime parameter (``--params replicate=<r>``), or ``None``."""
    runtime = run_params.get("runtime_params") or run_params.get("extra_params") or {}
    return runtime.get("replicate")


def run_name(run_params: dict[str, Any], commit: str = "unknown") -> str:
    """``default · test · 8d02eac`` — what ran: the pipelines (``default`` for the default one), the environment, the
    namespaces, ``resume``, the replicate, and the short commit (:func:`thinkalike.run_record.tracking.short_commit`)."""
    pipelines_ = run_params.get("pipeline_names") or [run_params.get("pipeline_name") or "__default__"]
    parts = [
        "+".join("default" if name == "__default__" else name for name in pipelines_),
        run_params.get("env") or "local",
    ]
    namespaces = run_params.get("namespaces") or ([run_params["namespace"]] if run_params.get("namespace") else [])
    if namespaces:
        parts.append("+".join(namespaces))
    if run_params.get("only_missing_outputs"):
        parts.append("resume")
    if replicate_of(run_params) is not None:
        parts.append(f"replicate {replicate_of(run_params)}")
    parts.append(commit)
    return " · ".join(parts)


def kedro_command(run_params: dict[str, Any]) -> str:
    """The command line when launched by the ``kedro`` CLI, else the equivalent ``kedro run``."""
    if sys.argv and Path(sys.argv[0]).name == "kedro":
        return shlex.join(["kedro", *sys.argv[1:]])
    words = ["kedro", "run"]
    if run_params.get("env"):
        words += ["--env", run_params["env"]]
    if run_params.get("pipeline_names"):
        words += ["--pipelines", ",".join(run_params["pipeline_names"])]
    if run_params.get("namespaces"):
        words += ["--namespaces", ",".join(run_params["namespaces"])]
    if run_params.get("node_names"):
        words += ["--nodes", ",".join(run_params["node_names"])]
    if run_params.get("only_missing_outputs"):
        words.append("--only-missing-outputs")
    if run_params.get("extra_params"):
        words += ["--params", repr(run_params["extra_params"])]
    return shlex.join(words)


def run_tags(run_params: dict[str, Any], project_root: Path) -> dict[str, str]:
    """What ran, where: git commit and dirty state (:func:`thinkalike.run_record.tracking.git_tags`), the kedro command, env,
    runner, session, the replicate and its batch (:data:`~thinkalike.run_record.tracking.REPLICATE_GROUP_TAG`) when there is one,
    and the machine (:func:`thinkalike.run_record.tracking.machine_tags`)."""
    tags = {
        **git_tags(project_root),
        "kedro_command": kedro_command(run_params),
        "kedro_env": str(run_params.get("env") or "local"),
        "runner": runner_name(run_params.get("runner", "")),
        "kedro_session": str(run_params.get("session_id") or run_params.get("run_id", "")),
        **machine_tags(),
    }
    if replicate_of(run_params) is not None:
        tags["replicate"] = str(replicate_of(run_params))
    if os.environ.get(REPLICATE_GROUP_VARIABLE):
        tags[REPLICATE_GROUP_TAG] = os.environ[REPLICATE_GROUP_VARIABLE]
    return tags


def record_saved_output(recorder: RunRecorder | DeferredRecorder, name: str, data: Any) -> None:
    """What MLflow gets from one saved output: the first of the pipelines' rules that matches it
    (:func:`thinkalike.pipelines.builders.all_output_rules`; figures, loss curves, corpus statistics, CKA summaries,
    tables, the run's timings …)."""
    apply_rules(all_output_rules(), recorder, name.removeprefix(f"{MODELS}."), data)
