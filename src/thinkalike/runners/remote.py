"""What a worker process does with one task group: run its nodes with Kedro's ``SequentialRunner``.

The driver's hooks do not run in a worker. A driver hook that wants to see the worker's nodes (the
run's timing table, the MLflow records of saved outputs) implements the small protocol of
:class:`RemoteHookProvider`: ``remote_hooks()`` gives a picklable hook object that the worker
registers for the task, whose ``report()`` goes back to the driver and into ``merge_remote(report)``.
So MLflow is written by the driver alone, from what the worker's nodes saved (one writer, whatever
the tracking store), and the timing table holds every node of every worker.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Protocol, runtime_checkable

from kedro.framework.hooks.markers import HOOK_NAMESPACE
from kedro.framework.hooks.specs import DatasetSpecs, NodeSpecs
from kedro.io import DataCatalog
from kedro.pipeline import Node, Pipeline
from kedro.runner import SequentialRunner
from pluggy import PluginManager

from thinkalike.threads import limited_threads

WORKER_LOG_FORMAT = "%(asctime)s %(levelname)-7s [%(processName)s] %(name)s: %(message)s"


@runtime_checkable
class RemoteHookProvider(Protocol):
    """A driver hook that follows its nodes into worker processes (see the module docstring)."""

    def remote_hooks(self) -> Any | None:  # a picklable hook object with ``report()``; None: nothing to follow
        ...

    def merge_remote(self, report: Any) -> None: ...


@dataclass
class TaskReport:
    """What a task group sends back: where it ran, its nodes, how long, and each remote hook's report."""

    group: str
    worker: str
    nodes: list[str]
    seconds: float
    hook_reports: list[Any] = field(default_factory=list)


def worker_name() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def task_modules(nodes: Iterable[Node], objects: Iterable[Any] = ()) -> list[str]:
    """The modules that define the nodes' functions (through ``functools.partial``) and the classes of ``objects``
    (the datasets the nodes read and write, the hooks sent with a task): what a worker imports when it unpickles
    its first task."""
    modules = set()
    for node in nodes:
        function = node.func
        while isinstance(function, functools.partial):
            function = function.func
        modules.add(getattr(function, "__module__", None))
    modules |= {type(item).__module__ for item in objects}
    return sorted(module for module in modules if module)


def task_catalog(catalog, nodes: Iterable[Node]) -> DataCatalog:
    """The datasets of ``catalog`` that ``nodes`` read or write (parameters included), as a catalog of their own: what
    a task carries to its worker. The same dataset objects, so their versions are the run's. The whole catalog (every
    dataset of the run) would go with every task, pickled by the driver's client, unpickled by its scheduler and again
    by the worker; one task's part is a few datasets."""
    part = DataCatalog()
    for name in sorted({name for node in nodes for name in (*node.inputs, *node.outputs)}):
        part[name] = catalog.get(name, fallback_to_runtime_pattern=True)
    return part


def import_modules(names: Sequence[str]) -> list[str]:
    """Imports ``names`` in this process (a worker, before its first task); returns them."""
    for name in names:
        importlib.import_module(name)
    return list(names)


def run_task_group(
    group: str,
    nodes: Sequence[Node],
    catalog,
    hooks: Sequence[Any],
    produced_in_run: Iterable[str],
    threads: int | None,
    log_level: int = logging.INFO,
) -> TaskReport:
    """Runs ``nodes`` in order in this process, with ``hooks`` registered, and returns their reports.

    Outputs of this run read here are loaded at this run's version: the version cache of every input
    that the run writes is released first (a version resolved earlier, before the run wrote it, would be an
    older file). ``threads``: the run's thread policy for torch and the BLAS pools (:mod:`thinkalike.threads`).
    """
    _configure_worker_logging(log_level)
    produced = set(produced_in_run)
    for dataset in {name for node in nodes for name in node.inputs} & produced:
        if dataset in catalog:
            catalog.release(dataset)
    manager = PluginManager(HOOK_NAMESPACE)
    manager.add_hookspecs(NodeSpecs)
    manager.add_hookspecs(DatasetSpecs)
    for hook in hooks:
        manager.register(hook)
    started = perf_counter()
    with limited_threads(threads):
        SequentialRunner().run(Pipeline(list(nodes)), catalog, manager)
    _free_accelerator_memory()
    return TaskReport(
        group=group,
        worker=worker_name(),
        nodes=[node.name for node in nodes],
        seconds=perf_counter() - started,
        hook_reports=[hook.report() for hook in hooks],
    )


def _configure_worker_logging(level: int) -> None:
    """The nodes' own log lines (progress, estimates) at the driver's level, with the worker's process name."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format=WORKER_LOG_FORMAT, datefmt="%H:%M:%S")
    root.setLevel(level)
    for noisy in ("kedro.io.data_catalog", "kedro.runner"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # the worker's own lines (closing, connections) and its copy of a failed task's traceback, which the driver
    # raises with the node's error
    for name in [
        "distributed",
        *(other for other in logging.root.manager.loggerDict if other.startswith("distributed.")),
    ]:
        logging.getLogger(name).setLevel(logging.ERROR)


def _free_accelerator_memory() -> None:
    """A GPU worker gives back its cached CUDA memory after each task (the next task may be another model's)."""
    with contextlib.suppress(ImportError):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
