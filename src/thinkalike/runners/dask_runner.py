"""``kedro run --runner thinkalike.runners.DaskRunner``: the same run on a Dask cluster.

The pipeline is cut into task groups (:mod:`thinkalike.runners.grouping`: one per namespace group, its
nodes run in order by Kedro's ``SequentialRunner`` inside one worker process); a group is submitted
when every group it reads from has finished, the one with the most work waiting on it first. Every
dataset that crosses tasks is a saved file, so workers share nothing but the project's folders.

Settings (:mod:`thinkalike.runners.settings`): ``conf/<env>/dask.yml``, overridden by ``--runner-params``:
``cluster`` — ``local`` (default: a ``LocalCluster`` of one single-threaded worker process per core, or
``workers`` of them, in the ``kedro run``'s session, so the run never takes more than the scheduler's fair share of
a shared machine; the nodes' own torch / BLAS threads follow the run's thread policy,
:mod:`thinkalike.threads`), ``slurm`` (dask-jobqueue, ``pip install -e ".[slurm]"``) or a scheduler address
(``tcp://host:8786``). With ``gpu_resources`` on, task groups holding GPU work (nodes tagged ``gpu``) ask for
``resources={"GPU": 1}``; a cluster without a GPU worker is an error at start, not a hang.

The driver's hooks see the workers' nodes through :class:`thinkalike.runners.remote.RemoteHookProvider`
(the run's timing table, MLflow records written by the driver alone). The driver merges the tasks' reports
in one background thread, in the order the tasks finished (:class:`ReportMerges`), so that logging a
summary's dozens of figures never delays handing the next ready task to a free worker; the run ends
after the last report is merged. A task that fails stops the
run with the node's own error and Kedro's resume hint; nothing downstream of it starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from click import ClickException
from kedro.io import MemoryDataset
from kedro.pipeline import Node, Pipeline
from kedro.runner import AbstractRunner

from thinkalike.runners.grouping import TaskGroup, in_memory_crossings, task_groups
from thinkalike.runners.processes import (
    FORKSERVER,
    environment_kept,
    project_modules,
    start_forkserver,
    worker_environment,
)
from thinkalike.runners.remote import (
    RemoteHookProvider,
    TaskReport,
    import_modules,
    run_task_group,
    task_catalog,
    task_modules,
)
from thinkalike.runners.settings import GPU_RESOURCE, GPU_WORK, LOCAL, SLURM, ClusterSettings, ClusterSettingsError
from thinkalike.threads import thread_policy


@runtime_checkable
class ClusterSettingsSource(Protocol):
    """A hook that read the environment's ``dask.yml`` (:class:`thinkalike.hooks.ClusterSettingsHooks`)."""

    def cluster_settings(self) -> dict[str, Any] | None: ...


class ClusterError(RuntimeError, ClickException):
    """A pipeline or cluster that this runner refuses before any task runs. A click exception, so that the ``kedro``
    command line shows it as one line (``Error: …``), not a traceback."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


class DaskRunner(AbstractRunner):
    """Runs a Kedro pipeline's task groups on a Dask cluster (see the module docstring).

    Keyword settings (``--runner-params cluster=…,workers=…``) override ``conf/<env>/dask.yml``
    (:mod:`thinkalike.runners.settings`); they are checked here, the merged settings when the run starts.
    """

    def __init__(self, is_async: bool = False, **settings: Any) -> None:
        super().__init__(is_async=is_async)
        self.overrides = {key: value for key, value in settings.items() if value is not None}
        self.settings = ClusterSettings.resolve(None, self.overrides)
        if _cluster_known_now(self.overrides) == LOCAL:  # the workers' imports run beside Kedro's own start-up
            from kedro.framework.project import PACKAGE_NAME

            start_forkserver(project_modules(PACKAGE_NAME), _local_worker_environment())

    def _get_executor(self, max_workers: int) -> None:  # the Dask client is the executor (see _run)
        return None

    def _run(self, pipeline: Pipeline, catalog, hook_manager=None, run_id: str | None = None) -> None:
        """Runs ``pipeline`` on the cluster of the run's settings (the environment's ``dask.yml`` read by a hook,
        overridden by this runner's keyword settings), its task groups submitted as they become ready
        (:meth:`_schedule`) and their reports merged in the background (:class:`ReportMerges`). Refused before any
        task (:class:`ClusterError`) when an in-memory dataset would cross tasks or GPU work finds no GPU worker."""
        plugins = _plugins(hook_manager)
        self.settings = ClusterSettings.resolve(_configured_settings(plugins), self.overrides)
        groups = task_groups(pipeline)
        crossings = in_memory_crossings(pipeline, groups, lambda name: _is_in_memory(catalog, name))
        if crossings:
            raise ClusterError(
                "DaskRunner: in-memory datasets cannot cross worker processes; give them a catalog "
                "entry that saves to a file: " + "; ".join(crossings)
            )
        providers = [
            plugin for plugin in plugins if isinstance(plugin, RemoteHookProvider) and plugin.remote_hooks() is not None
        ]
        plan = _TaskPlan.of(pipeline, groups, providers, self.settings)
        self._logger.info(
            "DaskRunner: %d nodes in %d tasks (%d asking for a GPU)",
            len(pipeline.nodes),
            len(groups),
            sum(bool(item) for item in plan.resources.values()),
        )
        # what a local cluster's workers import at once (another cluster's: each at its first task)
        modules = (
            task_modules(pipeline.nodes, [*_datasets(catalog, pipeline), *providers])
            if self.settings.cluster == LOCAL
            else []
        )
        with self._client(modules) as (client, cluster), ReportMerges(self._logger) as merges:
            if any(plan.resources.values()):
                _check_gpu_capacity(client, cluster)
            if modules:
                self._import_on_workers(client, modules)
            self._schedule(pipeline, catalog, _Schedule(client, lambda: _cluster_threads(client), plan), merges)

    def _schedule(self, pipeline: Pipeline, catalog, schedule: _Schedule, merges: ReportMerges) -> None:
        """Until every task group has run: submits the ready groups, waits for the first running one to finish,
        collects the finished ones' reports (:meth:`_collect`), submits again, then puts the reports to ``merges``:
        the freed workers get their next tasks before the driver logs these ones (MLflow: seconds for a summary with
        dozens of figures, during which a worker would otherwise wait)."""
        from distributed import wait

        plan = schedule.plan
        while schedule.pending or schedule.running:
            schedule.submit_ready(catalog)
            if not schedule.running:
                raise ClusterError(f"DaskRunner: tasks {sorted(schedule.pending)} wait on tasks that never finish")
            finished = wait(list(schedule.running), return_when="FIRST_COMPLETED").done
            reports = self._collect(pipeline, catalog, schedule, finished)
            schedule.submit_ready(catalog)
            for name, report in reports:
                progress = (
                    f"{len(schedule.done_groups)} of {len(plan.groups)} tasks, "
                    f"{len(schedule.done_nodes)} of {len(pipeline.nodes)} nodes"
                )
                merges.put(
                    name,
                    report,
                    lambda report=report, name=name: self._merge(report, plan.providers, plan.groups[name], catalog),
                    progress,
                )

    def _collect(self, pipeline: Pipeline, catalog, schedule: _Schedule, finished: Any) -> list[tuple[str, TaskReport]]:
        """The finished tasks' reports, each task's group marked done and its outputs released from the driver's
        catalog (:meth:`_release`). A failed task cancels the running ones, logs Kedro's resume hint and raises its
        error."""
        reports: list[tuple[str, TaskReport]] = []
        for future in finished:
            name = schedule.running.pop(future)
            try:
                report: TaskReport = future.result()
            except Exception:
                schedule.client.cancel(list(schedule.running))
                self._suggest_resume_scenario(pipeline, schedule.done_nodes, catalog)
                raise
            group = schedule.plan.groups[name]
            self._release(group, catalog)
            schedule.done_groups.add(name)
            schedule.done_nodes += group.nodes
            reports.append((name, report))
        return reports

    def _import_on_workers(self, client: Any, modules: list[str]) -> None:
        """Every worker imports the modules of the tasks' nodes, datasets and hooks now, all at once (torch,
        transformers, MLflow, the project: seconds of CPU each), instead of each at its first task — at the start of a
        run the tasks are a chain (the corpus), and each hop to a worker that had not imported them waited for it."""
        started = time.perf_counter()
        client.run(import_modules, modules)
        self._logger.info(
            "DaskRunner: %d worker(s) imported the tasks' %d modules (%.1f s)",
            len(client.nthreads()),
            len(modules),
            time.perf_counter() - started,
        )

    @staticmethod
    def _release(group: TaskGroup, catalog) -> None:
        """Drops the driver's cached versions of the task's outputs, before any task that reads them is submitted
        (a version cached on the driver must not make a worker read an older file)."""
        for node in group.nodes:
            for output in node.outputs:
                if output in catalog:
                    catalog.release(output)

    @staticmethod
    def _merge(report: TaskReport, providers: list[RemoteHookProvider], group: TaskGroup, catalog) -> None:
        """The task's hook reports to their driver hooks (MLflow logging, the timing table)."""
        for provider, hook_report in zip(providers, report.hook_reports):
            provider.merge_remote(hook_report)

    @contextlib.contextmanager
    def _client(self, modules: list[str]) -> Iterator[tuple[Any, Any]]:
        """The client and the cluster this runner started (None for a scheduler address); a local cluster's workers
        are forks of a server that imported ``modules`` (:mod:`thinkalike.runners.processes`)."""
        with _quiet_logger("distributed"), self._connected(modules) as connection:
            yield connection

    @contextlib.contextmanager
    def _connected(self, modules: list[str]) -> Iterator[tuple[Any, Any]]:
        from distributed import Client, LocalCluster

        settings = self.settings
        if settings.cluster == LOCAL:
            workers = settings.local_workers()
            environment = _local_worker_environment()
            start_forkserver(["distributed", *modules], environment)  # running already when the runner started it
            with (
                _cluster_config(local=True),
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=settings.threads_per_worker,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.WARNING,
                    env={**os.environ, **environment},
                ) as cluster,
                Client(cluster) as client,
            ):
                self._logger.info(
                    "DaskRunner: local cluster of %d worker processes, %d thread(s) each",
                    workers,
                    settings.threads_per_worker,
                )
                yield client, cluster
        elif settings.cluster == SLURM:
            with jobqueue_cluster(settings, self._logger) as cluster, Client(cluster) as client:
                yield client, cluster
        else:
            with Client(settings.cluster) as client:
                self._logger.info("DaskRunner: scheduler %s", settings.cluster)
                yield client, None


@dataclass(frozen=True)
class _TaskPlan:
    """What every task submission of a run shares (:meth:`of`): the task groups, the remote hook providers, the
    run's thread policy and log level, the datasets the run produces, each group's priority (the work waiting on
    it) and resources."""

    groups: dict[str, TaskGroup]
    providers: list[RemoteHookProvider]
    threads: int | None
    produced: set[str]
    priority: dict[str, int]
    resources: dict[str, dict[str, int]]
    log_level: int

    @classmethod
    def of(
        cls,
        pipeline: Pipeline,
        groups: dict[str, TaskGroup],
        providers: list[RemoteHookProvider],
        settings: ClusterSettings,
    ) -> _TaskPlan:
        """The plan of ``pipeline``'s task ``groups`` under ``settings``."""
        return cls(
            groups=groups,
            providers=providers,
            threads=thread_policy(),
            produced=set(pipeline.all_outputs()),
            priority=_waiting_work(groups),
            resources={name: _resources(group, settings) for name, group in groups.items()},
            log_level=logging.getLogger().getEffectiveLevel(),
        )

    def submit(self, client: Any, catalog, name: str, group: TaskGroup) -> Any:
        """Task group ``name`` submitted to ``client`` (:func:`~thinkalike.runners.remote.run_task_group`, with the
        hooks the providers hand out now and the inputs made in this run); its future."""
        hooks = [provider.remote_hooks() for provider in self.providers]
        inputs_made_in_run = sorted({dataset for node in group.nodes for dataset in node.inputs} & self.produced)
        return client.submit(
            run_task_group,
            name,
            group.nodes,
            task_catalog(catalog, group.nodes),
            hooks,
            inputs_made_in_run,
            self.threads,
            self.log_level,
            key=f"{_key(name)}-{uuid.uuid4().hex[:8]}",
            priority=self.priority[name],
            resources=self.resources[name] or None,
            pure=False,
        )


class _Schedule:
    """The state of a run's scheduling: the groups still pending, the running futures (→ group name), the groups
    and nodes done; ``slots``: how many tasks may run now (the cluster's worker threads)."""

    def __init__(self, client: Any, slots: Callable[[], int], plan: _TaskPlan) -> None:
        self.client, self.slots, self.plan = client, slots, plan
        self.pending: dict[str, TaskGroup] = dict(plan.groups)
        self.running: dict[Any, str] = {}
        self.done_groups: set[str] = set()
        self.done_nodes: list[Node] = []

    def submit_ready(self, catalog) -> None:
        """Submits the pending groups whose every upstream group is done, the most waited-on first, as many as there
        are free slots (the rest wait here)."""
        ready = sorted(
            (name for name, group in self.pending.items() if group.depends_on <= self.done_groups),
            key=lambda name: -self.plan.priority[name],
        )
        for name in ready[: max(0, self.slots() - len(self.running))]:  # the rest wait here
            group = self.pending.pop(name)
            self.running[self.plan.submit(self.client, catalog, name, group)] = name


class ReportMerges:
    """The driver's one MLflow writer: merges finished tasks' reports in a background thread, in the order
    they were put, while the scheduling loop goes on. Leaving the ``with`` block waits for every merge; the
    first merge that raised is raised there (after the rest were merged, so that nothing finished is lost),
    unless the block itself is raising."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="thinkalike-report-merges", daemon=True)

    def __enter__(self) -> ReportMerges:
        self._thread.start()
        return self

    def put(self, name: str, report: TaskReport, merge, progress: str) -> None:
        """Queues ``merge()`` (the task ``name``'s hook reports to the driver's hooks)."""
        self._queue.put((name, report, merge, progress))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            name, report, merge, progress = item
            try:
                merge()
            except BaseException as error:  # noqa: BLE001 - raised on the driver's thread when the block ends
                self._error = self._error or error
                self._logger.error("Merging the reports of task %s failed: %r", name, error)
            else:
                self._logger.info(
                    "Completed task %s on %s in %.1f s (%s)", name, report.worker, report.seconds, progress
                )

    def __exit__(self, kind, value, traceback) -> None:
        self._queue.put(None)
        self._thread.join()
        if kind is None and self._error is not None:
            raise self._error


@contextlib.contextmanager
def jobqueue_cluster(settings: ClusterSettings, logger: logging.Logger) -> Iterator[Any]:
    """The dask-jobqueue cluster of ``settings.slurm`` (``slurm.cluster_class``, default SLURMCluster), adapting
    between ``minimum_jobs`` and ``maximum_jobs``; options its job class does not take are left out and logged."""
    cluster_class = _import_object(settings.slurm.cluster_class, "slurm.cluster_class")
    options = settings.slurm_cluster_options()
    accepted = _job_options(cluster_class)
    dropped = sorted(set(options) - accepted)
    if dropped:
        logger.info("DaskRunner: %s jobs take no %s; left out", settings.slurm.cluster_class, ", ".join(dropped))
    with (
        _cluster_config(),
        cluster_class(
            **{key: value for key, value in options.items() if key in accepted}, silence_logs=logging.WARNING
        ) as cluster,
    ):
        cluster.adapt(minimum_jobs=settings.slurm.minimum_jobs, maximum_jobs=settings.slurm.maximum_jobs)
        logger.info(
            "DaskRunner: %s, %d to %d jobs of %s cores, %s, %d GPU(s) each",
            type(cluster).__name__,
            settings.slurm.minimum_jobs,
            settings.slurm.maximum_jobs,
            settings.slurm.cores,
            settings.slurm.memory,
            settings.slurm.gpus_per_job,
        )
        yield cluster


def _job_options(cluster_class: type) -> set[str]:
    """The keyword arguments the cluster class's jobs accept (dask-jobqueue passes them to its ``job_cls``)."""
    import inspect

    job_class = getattr(cluster_class, "job_cls", None)
    accepted: set[str] = set()
    for klass in job_class.__mro__ if job_class is not None else ():
        init = klass.__dict__.get("__init__")
        if init is not None:
            accepted |= {
                name
                for name, parameter in inspect.signature(init).parameters.items()
                if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            }
    return accepted - {"self", "scheduler", "name"}


def _import_object(path: str, key: str) -> Any:
    import importlib

    module, _, attribute = str(path).rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError) as error:
        extra = ' (pip install -e ".[slurm]")' if module.startswith("dask_jobqueue") else ""
        raise ClusterSettingsError(f"DaskRunner {key}: cannot import {path!r}{extra}: {error}") from None


def _resources(group: TaskGroup, settings: ClusterSettings) -> dict[str, int]:
    """``{"GPU": 1}`` for a group holding GPU work when ``gpu_resources`` is on, else none."""
    if settings.gpu_resources and any(GPU_WORK in node.tags for node in group.nodes):
        return {GPU_RESOURCE: 1}
    return {}


def _check_gpu_capacity(client, cluster) -> None:
    """GPU tasks need a worker that advertises ``GPU``: a connected one, or one the cluster will start."""
    workers = client.scheduler_info().get("workers", {}).values()
    if any(worker.get("resources", {}).get(GPU_RESOURCE, 0) >= 1 for worker in workers):
        return
    arguments = getattr(cluster, "_job_kwargs", {}).get("worker_extra_args") or []
    if any(str(argument).startswith(f"{GPU_RESOURCE}=") for argument in arguments):
        return
    raise ClusterError(
        "DaskRunner: the pipeline has GPU tasks (gpu_resources: true) but no worker of the cluster "
        f"advertises a {GPU_RESOURCE} resource; start GPU workers with --resources {GPU_RESOURCE}=1, "
        "set slurm.gpus_per_job, or set gpu_resources: false to run GPU work anywhere"
    )


#: Dask's periodic work in the processes of a cluster this runner starts, turned down. With Dask's defaults every
#: worker's statistical profiler samples each thread's stack every 10 ms (for a dashboard this runner does not start),
#: every event loop checks its own health every 20 ms (it warns only after 3 s), the memory monitor runs every
#: 100 ms and the system monitor every 500 ms: each wakes the worker's event-loop thread, which takes the GIL from
#: the thread computing the node. ``benchmarks/dask_overhead.py`` measures what that costs a node: a training loop
#: in a one-worker ``LocalCluster`` with Dask's defaults and with these, against the same loop in a forked process.
QUIET_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.memory.monitor-interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
}


@contextlib.contextmanager
def _cluster_config(local: bool = False) -> Iterator[None]:
    """Dask's configuration while this runner starts and runs a cluster: :data:`QUIET_CLUSTER_CONFIG` (a local
    cluster's nannies hand it to their worker processes; a dask-jobqueue
    cluster's workers read their own configuration on their nodes, so there it reaches the scheduler only) and the
    workers' environment of :func:`_local_worker_environment`; with ``local``, worker processes forked from this
    process's forkserver (:mod:`thinkalike.runners.processes`) instead of spawned. A nanny writes that environment
    into this process's own ``os.environ`` before each start and leaves it there; it is put back as it was when the
    cluster closes, so that nothing this process starts afterwards inherits it."""
    import dask

    environment = _local_worker_environment()
    method = {"distributed.worker.multiprocessing-method": FORKSERVER} if local else {}
    with (
        environment_kept(environment),
        dask.config.set({**QUIET_CLUSTER_CONFIG, **method, "distributed.nanny.pre-spawn-environ": environment}),
    ):
        yield


def _local_worker_environment() -> dict[str, str]:
    """The environment a worker process starts with: Dask's ``distributed.nanny.pre-spawn-environ`` (one thread for
    OpenMP / MKL / OpenBLAS) without its ``MALLOC_TRIM_THRESHOLD_``, which turns off glibc's dynamic mmap threshold
    (:func:`thinkalike.runners.processes.worker_environment`)."""
    import dask

    return worker_environment(dask.config.get("distributed.nanny.pre-spawn-environ", default={}))


def _cluster_known_now(overrides: dict[str, Any]) -> str | None:
    """The cluster a run will use, as far as it is known when the runner is made (before the session reads
    ``dask.yml``): ``--runner-params cluster=…``, else the ``dask.yml`` of the ``kedro run`` command's environment
    read with the project's configuration loader; None when neither can be read (the runner made outside ``kedro
    run``): nothing is started early then."""
    if overrides.get("cluster") is not None:
        return str(overrides["cluster"]).strip()
    import click

    command = click.get_current_context(silent=True)
    if command is None:
        return None
    try:
        from kedro.config import MissingConfigException
        from kedro.framework.project import settings
        from kedro.utils import find_kedro_project

        project = find_kedro_project(Path.cwd())
        if project is None:
            return None
        conf_source = command.params.get("conf_source") or str(project / settings.CONF_SOURCE)
        environment = command.params.get("env") or os.environ.get("KEDRO_ENV")  # as the session reads it
        loader = settings.CONFIG_LOADER_CLASS(conf_source=conf_source, env=environment, **settings.CONFIG_LOADER_ARGS)
        try:
            config = loader["dask"]
        except (KeyError, MissingConfigException):  # no dask.yml: the defaults
            config = {}
    except Exception:  # noqa: BLE001 - a configuration this cannot read is read, and its error raised, by the session
        return None
    return str(((config or {}).get("dask") or {}).get("cluster") or LOCAL).strip()


@contextlib.contextmanager
def _quiet_logger(name: str, level: int = logging.WARNING) -> Iterator[None]:
    """Dask's own INFO lines (workers starting and closing, connections) kept out of the run's log: ``name`` and
    every logger below it that has a level of its own (Dask's logging configuration sets some)."""
    import distributed  # noqa: F401 - its logging configuration first, then ours on top

    names = [name] + [other for other in logging.root.manager.loggerDict if other.startswith(f"{name}.")]
    loggers = [logging.getLogger(other) for other in names]
    previous = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(level, logger.level))
    try:
        yield
    finally:
        for logger, old in zip(loggers, previous):
            logger.setLevel(old)


def _is_in_memory(catalog, name: str) -> bool:
    if name.startswith("params:") or name == "parameters":
        return False  # given to every task with the catalog, never written
    dataset = catalog.get(name, fallback_to_runtime_pattern=True)
    return isinstance(dataset, MemoryDataset)


def _datasets(catalog, pipeline: Pipeline) -> list[Any]:
    """The catalog's datasets of the pipeline (parameters left out)."""
    names = [name for name in sorted(pipeline.datasets()) if not name.startswith("params:") and name != "parameters"]
    return [catalog.get(name, fallback_to_runtime_pattern=True) for name in names]


def _plugins(hook_manager) -> list[Any]:
    """The session's hook objects (none for Kedro's null manager, whose every attribute returns None)."""
    return list((hook_manager.get_plugins() if hasattr(hook_manager, "get_plugins") else None) or ())


def _configured_settings(plugins: list[Any]) -> dict[str, Any] | None:
    """conf/<env>/dask.yml's ``dask`` mapping, from the project hook that read it (:class:`ClusterSettingsSource`)."""
    for plugin in plugins:
        if isinstance(plugin, ClusterSettingsSource):
            return plugin.cluster_settings()
    return None


def _cluster_threads(client: Any) -> int:
    """The threads of the cluster's workers now (an adaptive cluster's grow and shrink): how many tasks run at once.
    The runner keeps every other ready task itself, most downstream work first, and submits one when a task ends:
    a task handed to Dask early is placed on a worker at once (tasks of distinct keys are not queued by the
    scheduler) and can wait there behind a long one while another worker is idle (a short task behind the NLI
    encoder's pretraining, say). Before any worker has joined: 1."""
    return max(1, sum(client.nthreads().values()))


def _waiting_work(groups: dict[str, TaskGroup]) -> dict[str, int]:
    """Per group, its nodes plus every node of every group that waits on it (directly or not): the work it frees."""
    children: dict[str, set[str]] = {name: set() for name in groups}
    for name, group in groups.items():
        for dependency in group.depends_on:
            children[dependency].add(name)
    memo: dict[str, set[str]] = {}

    def downstream(name: str) -> set[str]:
        if name not in memo:
            found = set()
            for child in children[name]:
                found |= {child} | downstream(child)
            memo[name] = found
        return memo[name]

    return {
        name: len(groups[name].nodes) + sum(len(groups[other].nodes) for other in downstream(name)) for name in groups
    }


def _key(name: str) -> str:
    return "".join(character if character.isalnum() or character in "._-" else "_" for character in name)
