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
from typing import Annotated, Any

from click import ClickException
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

LOCAL = "local"
SLURM = "slurm"
GPU_RESOURCE = "GPU"
#: The tag of nodes that train or run models: a cluster run with gpu_resources sends them to GPU workers.
GPU_WORK = "gpu"
DEFAULT_SLURM_CLASS = "dask_jobqueue.SLURMCluster"


class ClusterSettingsError(ValueError, ClickException):
    """A DaskRunner setting that cannot be used; the message names it and where it came from. A click exception, so
    that the ``kedro`` command line shows it as one line (``Error: …``), not a traceback."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


def _integer(minimum: int, what: str) -> BeforeValidator:
    """An integer ≥ ``minimum``, also as the digits ``--runner-params`` hands over (``"2"``); never a bool."""

    def check(value: Any) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) < minimum:
            raise ValueError(f"expected {what}, got {value!r}")
        return int(text)

    return BeforeValidator(check)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _cluster(value: Any) -> str:
    cluster = str(value).strip()
    if cluster not in (LOCAL, SLURM) and "://" not in cluster:
        raise ValueError(f"expected {LOCAL!r}, {SLURM!r} or a scheduler address (tcp://host:port), got {value!r}")
    return cluster


Positive = Annotated[int, _integer(1, "a positive integer")]
Count = Annotated[int, _integer(0, "an integer >= 0")]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlurmSettings(_Settings):
    """``slurm``: the jobs of a dask-jobqueue cluster (module docstring)."""

    queue: str | None = None  # the partition
    account: str | None = None
    cores: Positive = 4
    memory: str = "32GB"
    walltime: str = "02:00:00"
    gpus_per_job: Count = 1  # → #SBATCH --gres=gpu:<n> and the workers' GPU=<n> resource
    job_extra_directives: tuple[str, ...] = ()
    job_script_prologue: tuple[str, ...] = ()  # e.g. module load cuda, source .venv/bin/activate
    python: str | None = None
    minimum_jobs: Count = 0
    maximum_jobs: Positive = 4
    cluster_class: str = DEFAULT_SLURM_CLASS  # any dask-jobqueue cluster class

    @model_validator(mode="after")
    def _jobs_in_order(self) -> SlurmSettings:
        if self.minimum_jobs > self.maximum_jobs:
            raise ValueError(
                f"slurm.minimum_jobs ({self.minimum_jobs}) is above slurm.maximum_jobs ({self.maximum_jobs})"
            )
        return self


class ClusterSettings(_Settings):
    """Resolved DaskRunner settings (see the module docstring). The defaults here are the only ones: what
    :meth:`resolve` uses for a key that neither ``dask.yml`` nor ``--runner-params`` sets (``conf/base/dask.yml``
    states the same values; a test keeps them equal)."""

    cluster: Annotated[str, BeforeValidator(_cluster)] = LOCAL
    workers: Positive | None = None  # None: one per core
    threads_per_worker: Positive = 1
    gpu_resources: Annotated[bool, BeforeValidator(_boolean)] = False  # not given: on for slurm with GPU jobs
    slurm: SlurmSettings = SlurmSettings()

    @classmethod
    def resolve(
        cls, config: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None
    ) -> ClusterSettings:
        """``config`` (dask.yml's ``dask`` mapping) with ``overrides`` (``--runner-params``) on top (a null is not
        set); every value checked, an error naming the key and its source."""
        merged: dict[str, Any] = {}
        source: dict[str, str] = {}
        for where, values in (("dask.yml", config or {}), ("--runner-params", overrides or {})):
            _refuse_unknown(values, cls, where, "setting(s)")
            for key, value in values.items():
                if value is not None:
                    merged[key], source[key] = value, where
        slurm = merged.get("slurm", {})
        if not isinstance(slurm, Mapping):
            raise ClusterSettingsError(f"{source['slurm']}: DaskRunner slurm: expected a mapping, got {slurm!r}")
        _refuse_unknown(slurm, SlurmSettings, source.get("slurm", "default"), "slurm setting(s)")
        merged["slurm"] = {key: value for key, value in slurm.items() if value is not None}
        try:
            settings = cls.model_validate(merged)
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(str(part) for part in first["loc"])
            message = str(first["msg"]).removeprefix("Value error, ")
            raise ClusterSettingsError(
                f"{source.get(str(first['loc'][0]), 'default')}: DaskRunner {key}: {message}"
            ) from None
        if "gpu_resources" not in merged:
            gpu = settings.cluster == SLURM and settings.slurm.gpus_per_job > 0
            settings = settings.model_copy(update={"gpu_resources": gpu})
        return settings

    def local_workers(self, cores: int | None = None) -> int:
        """A local cluster's worker processes: one per core, or ``workers``."""
        return self.workers or cores or os.cpu_count() or 1

    def slurm_cluster_options(self) -> dict[str, Any]:
        """Keyword arguments of a dask-jobqueue cluster class: one worker process per job, the GPU directive and the
        worker's ``GPU`` resource when ``slurm.gpus_per_job`` > 0."""
        slurm = self.slurm
        gpus = slurm.gpus_per_job
        options = {
            "queue": slurm.queue,
            "account": slurm.account,
            "cores": slurm.cores,
            "processes": 1,
            "memory": slurm.memory,
            "walltime": slurm.walltime,
            "job_extra_directives": [*slurm.job_extra_directives, *([f"--gres=gpu:{gpus}"] if gpus else [])],
            "job_script_prologue": list(slurm.job_script_prologue),
            "worker_extra_args": ["--resources", f"{GPU_RESOURCE}={gpus}"] if gpus else [],
            "python": slurm.python,
        }
        return {key: item for key, item in options.items() if item is not None}


def _refuse_unknown(values: Mapping[str, Any], model: type[BaseModel], where: str, what: str) -> None:
    unknown = sorted(set(values) - set(model.model_fields))
    if unknown:
        raise ClusterSettingsError(f"{where}: unknown DaskRunner {what} {unknown}; known: {sorted(model.model_fields)}")
