"""The DaskRunner's settings: ``conf/<env>/dask.yml`` (key ``dask``), overridden by ``--runner-params`` (no Dask
import here); a setting that cannot be used is one ``Error: …`` line of ``kedro run`` (:class:`ClusterSettingsError`).

``cluster``: ``local`` (a ``LocalCluster`` on this machine), ``slurm`` (``dask_jobqueue.SLURMCluster``, one worker
process per job, started and stopped adaptively between ``slurm.minimum_jobs`` and ``slurm.maximum_jobs``), or the
address of a running scheduler (``tcp://host:8786``). ``workers`` (local; default one per core),
``threads_per_worker`` (default 1), ``gpu_resources``: GPU work (nodes tagged
``gpu``: training, extraction, stitching, fine-tuning) asks for ``resources={"GPU": 1}`` and only workers
advertising a GPU take it (default: on for ``slurm`` when ``slurm.gpus_per_job`` > 0, off elsewhere). ``slurm``:
``queue`` (partition), ``account``, ``cores``, ``memory``, ``walltime``, ``gpus_per_job`` (→ ``#SBATCH --gres=gpu:<n>`` and worker resources
``GPU=<n>``), ``job_extra_directives``, ``job_script_prologue`` (e.g. ``module load cuda``, ``source
.venv/bin/activate``), ``python``, ``minimum_jobs``, ``maximum_jobs``, ``cluster_class`` (default
``dask_jobqueue.SLURMCluster``; any dask-jobqueue cluster class, e.g. ``dask_jobqueue.local.LocalCluster`` to try the
settings on one machine: options its jobs do not know are left out, and named in the log).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from click import ClickException

LOCAL = "local"
SLURM = "slurm"
GPU_RESOURCE = "GPU"
#: The tag of nodes that train or run models: a cluster run with gpu_resources sends them to GPU workers.
GPU_WORK = "gpu"
DEFAULT_SLURM_CLASS = "dask_jobqueue.SLURMCluster"
SLURM_DEFAULTS: dict[str, Any] = {
    "queue": None,
    "account": None,
    "cores": 4,
    "memory": "32GB",
    "walltime": "02:00:00",
    "gpus_per_job": 1,
    "job_extra_directives": [],
    "job_script_prologue": [],
    "python": None,
    "minimum_jobs": 0,
    "maximum_jobs": 4,
    "cluster_class": DEFAULT_SLURM_CLASS,
}


class ClusterSettingsError(ValueError, ClickException):
    """A DaskRunner setting that cannot be used; the message names it and where it came from. A click exception, so
    that the ``kedro`` command line shows it as one line (``Error: …``), not a traceback."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


@dataclass(frozen=True)
class ClusterSettings:
    """Resolved DaskRunner settings (see the module docstring). The defaults here are the only ones: what
    :meth:`resolve` uses for a key that neither ``dask.yml`` nor ``--runner-params`` sets (``conf/base/dask.yml``
    states the same values; a test keeps them equal)."""

    cluster: str = LOCAL
    workers: int | None = None  # None: one per core
    threads_per_worker: int = 1
    gpu_resources: bool = False
    slurm: dict[str, Any] = field(default_factory=lambda: dict(SLURM_DEFAULTS))

    @classmethod
    def resolve(
        cls, config: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
    ) -> ClusterSettings:
        """``config`` (dask.yml's ``dask`` mapping) with ``overrides`` (``--runner-params``) on top; every value
        checked, an error naming the key and its source."""
        known = {item.name for item in fields(cls)}
        merged: dict[str, Any] = {}
        for source, values in (("dask.yml", config or {}), ("--runner-params", overrides or {})):
            unknown = sorted(set(values) - known)
            if unknown:
                raise ClusterSettingsError(f"{source}: unknown DaskRunner setting(s) {unknown}; known: {sorted(known)}")
            merged.update({key: (value, source) for key, value in values.items() if value is not None})

        defaults = {item.name: item.default for item in fields(cls) if item.default is not MISSING}

        def value(key: str, default: Any = MISSING) -> tuple[Any, str]:
            return merged.get(key, (defaults[key] if default is MISSING else default, "default"))

        cluster, where = value("cluster")
        cluster = str(cluster).strip()
        if cluster not in (LOCAL, SLURM) and "://" not in cluster:
            raise ClusterSettingsError(
                f"{where}: DaskRunner cluster: expected {LOCAL!r}, {SLURM!r} or a scheduler "
                f"address (tcp://host:port), got {cluster!r}"
            )
        workers = _positive(*value("workers"), "workers")
        threads = _positive(*value("threads_per_worker"), "threads_per_worker")
        slurm_values, slurm_where = value("slurm", {})
        if not isinstance(slurm_values, Mapping):
            raise ClusterSettingsError(f"{slurm_where}: DaskRunner slurm: expected a mapping, got {slurm_values!r}")
        unknown = sorted(set(slurm_values) - set(SLURM_DEFAULTS))
        if unknown:
            raise ClusterSettingsError(
                f"{slurm_where}: unknown DaskRunner slurm setting(s) {unknown}; known: {sorted(SLURM_DEFAULTS)}"
            )
        slurm = {**SLURM_DEFAULTS, **{key: item for key, item in slurm_values.items() if item is not None}}
        for key in ("cores", "maximum_jobs"):
            _positive(slurm[key], slurm_where, f"slurm.{key}")
        for key in ("gpus_per_job", "minimum_jobs"):
            _count(slurm[key], slurm_where, f"slurm.{key}")
        if slurm["minimum_jobs"] > slurm["maximum_jobs"]:
            raise ClusterSettingsError(
                f"{slurm_where}: DaskRunner slurm.minimum_jobs ({slurm['minimum_jobs']}) is "
                f"above slurm.maximum_jobs ({slurm['maximum_jobs']})"
            )
        gpu_default = cluster == SLURM and slurm["gpus_per_job"] > 0
        gpu_resources, gpu_where = value("gpu_resources", gpu_default)
        if not isinstance(gpu_resources, bool):
            raise ClusterSettingsError(
                f"{gpu_where}: DaskRunner gpu_resources: expected true or false, got {gpu_resources!r}"
            )
        return cls(
            cluster=cluster,
            workers=workers,
            threads_per_worker=threads or 1,
            gpu_resources=gpu_resources,
            slurm=slurm,
        )

    def local_workers(self, cores: int | None = None) -> int:
        """A local cluster's worker processes: one per core, or ``workers``."""
        return self.workers or cores or os.cpu_count() or 1

    def slurm_cluster_options(self) -> dict[str, Any]:
        """Keyword arguments of a dask-jobqueue cluster class: one worker process per job, the GPU directive and the
        worker's ``GPU`` resource when ``slurm.gpus_per_job`` > 0."""
        slurm = self.slurm
        gpus = int(slurm["gpus_per_job"])
        directives = list(slurm["job_extra_directives"]) + ([f"--gres=gpu:{gpus}"] if gpus else [])
        options = {
            "queue": slurm["queue"],
            "account": slurm["account"],
            "cores": int(slurm["cores"]),
            "processes": 1,
            "memory": str(slurm["memory"]),
            "walltime": slurm["walltime"],
            "job_extra_directives": directives,
            "job_script_prologue": list(slurm["job_script_prologue"]),
            "worker_extra_args": ["--resources", f"{GPU_RESOURCE}={gpus}"] if gpus else [],
            "python": slurm["python"],
        }
        return {key: item for key, item in options.items() if item is not None}


def _positive(value: Any, where: str, key: str) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise ClusterSettingsError(f"{where}: DaskRunner {key}: expected a positive integer, got {value!r}")
    return int(text)


def _count(value: Any, where: str, key: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ClusterSettingsError(f"{where}: DaskRunner {key}: expected an integer >= 0, got {value!r}")
    return int(text)
