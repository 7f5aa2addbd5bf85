"""How a local cluster's worker processes start: forked from a server that has imported the project once.

Dask spawns each worker as a fresh interpreter by default, so every worker imports torch, transformers and the
project again (seconds of CPU each) and does so only when the cluster starts — after Kedro has built the
pipelines, checked the parameters and opened the MLflow run, while the machine's other cores sat idle. Python's
forkserver (``multiprocessing``'s ``forkserver`` start method, which Dask supports through
``distributed.worker.multiprocessing-method``) is a single-threaded process that imports a list of modules once and
then forks a child for each process asked of it: the DaskRunner starts that server when the runner is made (the
imports then run beside Kedro's own start-up) and its workers are forks of it (a worker is ready in a fraction of a
second, its imported modules' pages shared).

A forked worker keeps the server's environment, not the driver's at the time of the fork, and glibc and OpenMP read
theirs when a process starts: so the server starts under the environment Dask gives its workers
(:func:`worker_environment`: one thread for OpenMP / MKL / OpenBLAS, a fixed ``PYTHONHASHSEED``, without Dask's
``MALLOC_TRIM_THRESHOLD_``), and each worker is handed the driver's environment of the moment on top
(``LocalCluster(env=...)``), as a spawned worker would inherit it. The working directory and ``sys.path`` follow the
driver as with a spawned process (``multiprocessing`` sends both). The server imports and runs nothing else: CUDA is
first initialised in a worker, after its fork (a CUDA context does not survive a fork). No Kedro import here.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from multiprocessing import forkserver

FORKSERVER = "forkserver"

#: Dask's nanny gives its worker processes this hash seed when none is set (distributed.nanny), so that workers hash
#: alike; a forkserver's children share the server's, so the server gets the same.
DASK_HASH_SEED = "6640"

#: Dask's default environment for a worker process that this project leaves out: setting it turns off glibc's dynamic
#: mmap threshold, so every tensor buffer over 128 KiB is mapped and unmapped at each training step: system calls
#: and fresh zeroed pages, in the kernel, for buffers that glibc would otherwise keep and reuse.
LEFT_OUT = ("MALLOC_TRIM_THRESHOLD_",)


def worker_environment(pre_spawn: Mapping[str, object] | None) -> dict[str, str]:
    """The variables a local worker process starts with, from Dask's ``distributed.nanny.pre-spawn-environ``
    (``pre_spawn``): those of :data:`LEFT_OUT` dropped, ``PYTHONHASHSEED`` = :data:`DASK_HASH_SEED` when it is unset or
    ``0`` there, as Dask's nanny does; values as strings."""
    environment = {
        key: str(value) for key, value in (pre_spawn or {}).items() if key not in LEFT_OUT and value is not None
    }
    if environment.get("PYTHONHASHSEED") in (None, "0"):
        environment["PYTHONHASHSEED"] = DASK_HASH_SEED
    return environment


@contextlib.contextmanager
def environment_kept(keys: Iterable[str]) -> Iterator[None]:
    """The variables ``keys`` of ``os.environ`` put back after the block as they were before it (removed when they
    were unset), whatever set them inside."""
    before = {key: os.environ.get(key) for key in keys}
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def environment_set(variables: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` set inside the block, each put back after (:func:`environment_kept`)."""
    with environment_kept(variables):
        os.environ.update(variables)
        yield


def start_forkserver(modules: Sequence[str], environment: Mapping[str, str]) -> None:
    """Starts this process's forkserver, if it is not running yet, importing ``modules`` once, under ``environment``
    on top of this process's own. Returns at once: the server imports while this process goes on, and the first
    process asked of it waits for the imports. A module whose import raises ``ImportError`` there is skipped by the
    server (the worker imports it itself, as a spawned one would). A server already running is left as it is."""
    multiprocessing.set_forkserver_preload(list(dict.fromkeys(modules)))
    with environment_set(environment):
        forkserver.ensure_running()


def project_modules(package_name: str | None) -> list[str]:
    """What a worker of this project imports before its first task, known before the pipelines are built: Dask's
    worker, this runner's task code, and the Kedro project's settings (its hooks) and pipeline registry (every
    pipeline's nodes and the libraries they import)."""
    modules = ["distributed", "thinkalike.runners.remote"]
    if package_name:
        modules += [f"{package_name}.settings", f"{package_name}.pipeline_registry"]
    return modules
