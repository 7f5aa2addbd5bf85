"""``kedro run --runner thinkalike.runners.DaskRunner``: the same run on a Dask cluster.

The pipeline is cut into task groups (:mod:`thinkalike.runners.grouping`: one per namespace group, its
nodes run in order by Kedro's ``SequentialRunner`` inside one worker process); a group is submitted
when every group it reads from has finished, the one with the most work waiting on it first. Every
dataset that crosses tasks is a saved file, so workers share nothing but the project's folders.

Settings (``--runner-params``): ``cluster`` — ``local`` (default: a ``LocalCluster`` of one
single-threaded worker process per core, or ``workers`` of them) or a scheduler address
(``tcp://host:8786``); ``workers``; ``threads_per_worker`` (default 1: the nodes' own torch / BLAS
threads follow the run's thread policy, :mod:`thinkalike.threads`).

The driver's hooks see the workers' nodes through :class:`thinkalike.runners.remote.RemoteHookProvider`
(the run's timing table, MLflow records written by the driver alone). A task that fails stops the
run with the node's own error and Kedro's resume hint; nothing downstream of it starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

from kedro.io import MemoryDataset
from kedro.pipeline import Pipeline
from kedro.runner import AbstractRunner

from thinkalike.runners.grouping import TaskGroup, in_memory_crossings, task_groups
from thinkalike.runners.remote import RemoteHookProvider, TaskReport, run_task_group
from thinkalike.threads import thread_policy

LOCAL = "local"


class ClusterError(RuntimeError):
    """A pipeline or setting that this runner refuses before any task runs."""


class DaskRunner(AbstractRunner):
    """Runs a Kedro pipeline's task groups on a Dask cluster (see the module docstring)."""

    def __init__(self, is_async: bool = False, cluster: str = LOCAL, workers: int | str | None = None,
                 threads_per_worker: int | str = 1) -> None:
        super().__init__(is_async=is_async)
        self.cluster = str(cluster).strip() or LOCAL
        if self.cluster != LOCAL and "://" not in self.cluster:
            raise ClusterError(f"DaskRunner cluster: expected {LOCAL!r} or a scheduler address (tcp://host:port), "
                               f"got {cluster!r}")
        self.workers = _positive_or_none(workers, "workers")
        self.threads_per_worker = _positive_or_none(threads_per_worker, "threads_per_worker") or 1

    def _get_executor(self, max_workers: int) -> None:  # the Dask client is the executor (see _run)
        return None

    def _run(self, pipeline: Pipeline, catalog, hook_manager=None, run_id: str | None = None) -> None:
        groups = task_groups(pipeline)
        crossings = in_memory_crossings(pipeline, groups, lambda name: _is_in_memory(catalog, name))
        if crossings:
            raise ClusterError("DaskRunner: in-memory datasets cannot cross worker processes; give them a catalog "
                               "entry that saves to a file: " + "; ".join(crossings))
        providers = _remote_providers(hook_manager)
        threads = thread_policy()
        produced = sorted(pipeline.all_outputs())
        priority = _waiting_work(groups)
        log_level = logging.getLogger().getEffectiveLevel()
        self._logger.info("DaskRunner: %d nodes in %d tasks", len(pipeline.nodes), len(groups))
        done_groups: set[str] = set()
        done_nodes = []
        with self._client() as client:
            from distributed import wait

            pending = dict(groups)
            running: dict[Any, str] = {}
            while pending or running:
                ready = sorted((name for name, group in pending.items() if group.depends_on <= done_groups),
                               key=lambda name: -priority[name])
                for name in ready:
                    group = pending.pop(name)
                    hooks = [provider.remote_hooks() for provider in providers]
                    future = client.submit(run_task_group, name, group.nodes, catalog, hooks, produced, threads,
                                           log_level, key=f"{_key(name)}-{uuid.uuid4().hex[:8]}",
                                           priority=priority[name], pure=False)
                    running[future] = name
                if not running:
                    raise ClusterError(f"DaskRunner: tasks {sorted(pending)} wait on tasks that never finish")
                finished = wait(list(running), return_when="FIRST_COMPLETED").done
                for future in finished:
                    name = running.pop(future)
                    try:
                        report: TaskReport = future.result()
                    except Exception:
                        client.cancel(list(running))
                        self._suggest_resume_scenario(pipeline, done_nodes, catalog)
                        raise
                    self._merge(report, providers, groups[name], catalog)
                    done_groups.add(name)
                    done_nodes += groups[name].nodes
                    self._logger.info("Completed task %s on %s in %.1f s (%d of %d tasks, %d of %d nodes)", name,
                                      report.worker, report.seconds, len(done_groups), len(groups), len(done_nodes),
                                      len(pipeline.nodes))

    @staticmethod
    def _merge(report: TaskReport, providers: list[RemoteHookProvider], group: TaskGroup, catalog) -> None:
        """The task's hook reports to their driver hooks; its outputs' cached versions released on the driver."""
        for provider, hook_report in zip(providers, report.hook_reports):
            provider.merge_remote(hook_report)
        for node in group.nodes:
            for output in node.outputs:
                if output in catalog:
                    catalog.release(output)

    @contextlib.contextmanager
    def _client(self) -> Iterator[Any]:
        with _quiet_logger("distributed"), self._connected() as client:
            yield client

    @contextlib.contextmanager
    def _connected(self) -> Iterator[Any]:
        from distributed import Client, LocalCluster

        if self.cluster == LOCAL:
            workers = self.workers or os.cpu_count() or 1
            with _worker_environment(), LocalCluster(n_workers=workers, threads_per_worker=self.threads_per_worker, processes=True,
                              dashboard_address=None, silence_logs=logging.WARNING) as cluster, \
                    Client(cluster) as client:
                self._logger.info("DaskRunner: local cluster of %d worker processes, %d thread(s) each", workers,
                                  self.threads_per_worker)
                yield client
        else:
            with Client(self.cluster) as client:
                self._logger.info("DaskRunner: scheduler %s", self.cluster)
                yield client


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """Worker processes start without Dask's ``MALLOC_TRIM_THRESHOLD_=65536``: setting it turns off glibc's
    dynamic mmap threshold, so every tensor buffer over 128 KiB is mapped and unmapped at each training step
    (measured here: workers spent 45 % of their time in the kernel, and a zoo model trained 2.7× slower than in
    the driver). Dask's one-thread settings for OpenMP / MKL / OpenBLAS stay."""
    import dask

    environment = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    environment.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environment}):
        yield


@contextlib.contextmanager
def _quiet_logger(name: str, level: int = logging.WARNING) -> Iterator[None]:
    """Dask's own INFO lines (workers starting and closing, connections) kept out of the run's log."""
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


def _positive_or_none(value: int | str | None, name: str) -> int | None:
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ClusterError(f"DaskRunner {name}: expected a positive integer, got {value!r}")
    return int(text)


def _is_in_memory(catalog, name: str) -> bool:
    if name.startswith("params:") or name == "parameters":
        return False  # given to every task with the catalog, never written
    dataset = catalog.get(name, fallback_to_runtime_pattern=True)
    return isinstance(dataset, MemoryDataset)


def _remote_providers(hook_manager) -> list[RemoteHookProvider]:
    plugins = (hook_manager.get_plugins() if hasattr(hook_manager, "get_plugins") else None) or ()  # None: Kedro's
    # null manager (a runner used without a session)
    providers = [plugin for plugin in plugins if isinstance(plugin, RemoteHookProvider)]
    return [provider for provider in providers if provider.remote_hooks() is not None]


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

    return {name: len(groups[name].nodes) + sum(len(groups[other].nodes) for other in downstream(name))
            for name in groups}


def _key(name: str) -> str:
    return "".join(character if character.isalnum() or character in "._-" else "_" for character in name)
