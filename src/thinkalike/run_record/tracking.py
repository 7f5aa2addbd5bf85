"""MLflow as a record of each run, never a single point of failure (no Kedro import).

Policy (``conf/base/mlflow.yml``):

* ``strict: false`` (default): the store is probed before the run in seconds (a SQLite file
  must be a writable file in an existing directory; a tracking server must accept a TCP
  connection within ``probe_timeout_s``). If it is unusable — or fails later — the run goes on
  and saves every catalog output; one warning names the store and, at the end, what was not
  logged.
* ``strict: true``: the same probe, but an unusable store stops the run before any node.

Relative ``sqlite:///`` paths are anchored at the project root, so ``kedro run`` from a
sub-folder uses the same database. Creating the database and the experiment is serialised
with a file lock (two runs started at once on a fresh project otherwise race in MLflow's
schema migration). Each run is tagged with its host and process id; a run left RUNNING by a
killed process on this host is marked FAILED when the next run starts.

Written here rather than with kedro-mlflow because kedro-mlflow's metric datasets make every
``--only-missing-outputs`` run retrain (their existence is the *new* run's), its store set-up
retries for minutes without naming the store, and it cannot degrade to a warning.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkalike.io.figures import rendered_png
from thinkalike.output_rules import DETAILS_ARTIFACT

logger = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 6000
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"  # the UI opens on the runs table, not GenAI traces
HOST_TAG = "thinkalike.host"
PID_TAG = "thinkalike.pid"
ARTIFACT_FOLDER = "mlartifacts"
#: MLflow's tag for a run's description (the markdown shown above its page).
DESCRIPTION_TAG = "mlflow.note.content"
#: The tag shared by the runs of one batch of replicates and their ``replicates`` summary run (filter the runs table
#: with ``tags.`thinkalike.replicate_group` = '<workdir>'``); :mod:`thinkalike.replicates` passes it to each
#: replicate's ``kedro run`` in the environment variable :data:`REPLICATE_GROUP_VARIABLE`.
REPLICATE_GROUP_TAG = "thinkalike.replicate_group"
REPLICATE_GROUP_VARIABLE = "THINKALIKE_REPLICATE_GROUP"


class TrackingStoreError(RuntimeError):
    """The MLflow store cannot be used; the message names it."""


class TrackingSettings(BaseModel):
    """The ``mlflow`` block of ``conf/<env>/mlflow.yml``: where the runs go (``tracking_uri``, ``experiment``), whether
    a run records at all (``enabled``), whether an unusable store stops it (``strict``) and how long the store's probe
    may take (``probe_timeout_s``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tracking_uri: str = Field("sqlite:///mlflow.db", min_length=1)
    experiment: str = Field("thinkalike", min_length=1)
    enabled: bool = True
    strict: bool = False
    probe_timeout_s: float = Field(5.0, gt=0)


def tracking_settings(config: Mapping[str, Any] | None) -> TrackingSettings:
    """The loaded ``mlflow`` config (``{"mlflow": {...}}`` or the block itself) as :class:`TrackingSettings`; a
    ``ValueError`` naming each bad key (``mlflow.<key>: …``, an unknown one as "unknown parameter") otherwise."""
    block = dict((config or {}).get("mlflow", config or {}))
    try:
        return TrackingSettings.model_validate(block)
    except ValidationError as error:
        problems = [
            f"mlflow.{'.'.join(str(part) for part in e['loc'])}: "
            + ("unknown parameter" if e["type"] == "extra_forbidden" else f"{e['msg']} (got {e['input']!r})")
            for e in error.errors()
        ]
        raise ValueError("; ".join(problems) + " (mlflow.yml)") from None


def anchored_tracking_uri(uri: str, project_root: str | Path) -> str:
    """``uri`` with a relative ``sqlite:///`` path made absolute against ``project_root``."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        relative = uri.removeprefix("sqlite:///")
        if relative and relative != ":memory:":
            return f"sqlite:///{(Path(project_root) / relative).resolve()}"
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?")[0])


def probe_store(uri: str, timeout_s: float) -> None:
    """Raises :class:`TrackingStoreError` naming ``uri`` when the store is unusable (seconds, no retries)."""
    database = sqlite_path(uri)
    if database is not None:
        if database.is_dir():
            raise TrackingStoreError(f"MLflow store {uri}: {database} is a directory, not a SQLite database file")
        if not database.parent.is_dir():
            raise TrackingStoreError(f"MLflow store {uri}: folder {database.parent} does not exist")
        if database.exists() and not os.access(database, os.R_OK | os.W_OK):
            raise TrackingStoreError(f"MLflow store {uri}: {database} is not readable and writable")
        if not database.exists() and not os.access(database.parent, os.W_OK):
            raise TrackingStoreError(f"MLflow store {uri}: cannot create {database} (folder not writable)")
        _probe_sqlite(uri, database)
        return
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
                pass
        except OSError as error:
            raise TrackingStoreError(f"MLflow tracking server {uri} is unreachable ({error})") from error


def _probe_sqlite(uri: str, database: Path) -> None:
    """Opens an existing database and takes (then releases) its write lock."""
    if not database.exists():
        return
    import sqlite3

    try:
        with sqlite3.connect(database, timeout=5) as connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
    except sqlite3.Error as error:
        raise TrackingStoreError(f"MLflow store {uri}: {database} is not a usable SQLite database ({error})") from error


#: Every setting of a run, flattened (``{"a.b": "1"}``), as one artifact: what the run used, changed or not.
SETTINGS_ARTIFACT = "settings/parameters.json"


def flatten_parameters(parameters: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` → ``{"a.b": "1"}``, values truncated to MLflow's parameter length."""
    flat: dict[str, str] = {}
    for key, value in parameters.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_parameters(value, f"{name}."))
        else:
            flat[name] = str(value)[:MAX_PARAM_LENGTH]
    return flat


def runner_name(runner: Any) -> str:
    """``SequentialRunner`` from a runner, its class, or its repr (``<kedro...SequentialRunner object at …>``)."""
    if runner is None or runner == "None":
        return "SequentialRunner"  # what a Kedro session runs when no runner is given
    if isinstance(runner, str):
        match = re.search(r"([A-Za-z_][A-Za-z0-9_]*)(?: object at 0x[0-9a-f]+)?>?$", runner.strip())
        return match.group(1) if match else runner
    return runner.__name__ if isinstance(runner, type) else type(runner).__name__


def git_commit(root: str | Path) -> str:
    """The commit checked out at ``root`` (``+dirty`` when tracked files changed), or ``unknown``."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def package_root() -> Path:
    """The folder the installed ``thinkalike`` package was imported from, two levels up (the repository of an
    editable install)."""
    return Path(__file__).resolve().parents[2]


def git_tags(root: str | Path) -> dict[str, str]:
    """``git_commit`` (the full hash), ``git_dirty`` (``true`` when tracked files differ from it) and MLflow's own
    ``mlflow.source.git.commit`` (shown on the run's page) of the work tree at ``root``, else of the installed
    package's repository (a project folder outside the repository: the tests' copies), else ``unknown``."""
    for folder in (Path(root), package_root()):
        described = git_commit(folder)
        if described != "unknown":
            commit = described.removesuffix("+dirty")
            return {
                "git_commit": commit,
                "git_dirty": str(described.endswith("+dirty")).lower(),
                "mlflow.source.git.commit": commit,
            }
    return {"git_commit": "unknown", "git_dirty": "unknown"}


def short_commit(tags: Mapping[str, str]) -> str:
    """``8d02eac`` (``8d02eac+dirty`` with uncommitted changes) from :func:`git_tags`, else ``unknown``."""
    commit = tags.get("git_commit", "unknown")
    if commit == "unknown":
        return commit
    return commit[:7] + ("+dirty" if tags.get("git_dirty") == "true" else "")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else the platform's processor or machine)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")) and ":" in line:
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_name() -> str:
    """The GPUs torch sees (``2 × NVIDIA H200``), or ``none``."""
    try:
        import torch
    except ImportError:  # no torch: no GPU the project could use
        return "none"
    if not torch.cuda.is_available():
        return "none"
    names = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    return ", ".join(sorted({f"{names.count(name)} × {name}" for name in names}))


def machine_tags() -> dict[str, str]:
    """Where the run ran: ``machine.cpu`` (model), ``machine.cores``, ``machine.gpu``."""
    return {"machine.cpu": cpu_model(), "machine.cores": str(os.cpu_count() or "unknown"), "machine.gpu": gpu_name()}


def process_is_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class TrackingStore:
    """The MLflow store of a project: where it is (relative ``sqlite:///`` paths anchored at the project root),
    whether it can be used, and the experiment and runs in it."""

    settings: TrackingSettings
    project_root: Path

    @property
    def uri(self) -> str:
        return anchored_tracking_uri(self.settings.tracking_uri, self.project_root)

    def probe(self) -> None:
        """Raises :class:`TrackingStoreError` naming the store when it is unusable (:func:`probe_store`)."""
        probe_store(self.uri, self.settings.probe_timeout_s)

    def client(self):
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def open_run(self, run_name: str, tags: Mapping[str, str]) -> tuple[Any, str]:
        """A new run in the experiment (created or restored when needed; stale runs of this host marked FAILED),
        tagged with ``tags`` and this host and process: ``(client, run_id)``."""
        with self._creation_lock():  # creating the client creates (migrates) the database
            client = self.client()
            experiment_id = self._experiment_id(client)
        self._fail_stale_runs(client, experiment_id)
        all_tags = {**tags, HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
        return client, client.create_run(experiment_id, run_name=run_name, tags=all_tags).info.run_id

    def _experiment_id(self, client) -> str:
        """The experiment's id, created (runs-table kind, local artifacts) or restored when needed."""
        experiment = client.get_experiment_by_name(self.settings.experiment)
        if experiment is None:
            return client.create_experiment(
                self.settings.experiment,
                artifact_location=self._artifact_location(),
                tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
            )
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        if experiment.tags.get(EXPERIMENT_KIND_TAG) is None:
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return experiment.experiment_id

    def _artifact_location(self) -> str | None:
        """``<project root>/mlartifacts`` beside a local SQLite store; the server's default otherwise."""
        if sqlite_path(self.uri) is None:
            return None
        return (Path(self.project_root).resolve() / ARTIFACT_FOLDER).as_uri()

    @contextmanager
    def _creation_lock(self) -> Iterator[None]:
        database = sqlite_path(self.uri)
        if database is None:
            yield
            return
        from filelock import FileLock

        with FileLock(str(database) + ".lock", timeout=120):
            yield

    def _fail_stale_runs(self, client, experiment_id: str) -> None:
        host = socket.gethostname()
        for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000):
            tags = run.data.tags
            if (
                tags.get(HOST_TAG) == host
                and tags.get(PID_TAG, "").isdigit()
                and not process_is_alive(int(tags[PID_TAG]))
            ):
                client.set_terminated(run.info.run_id, "FAILED")
                logger.warning(
                    "MLflow run %s was left RUNNING by a process that no longer exists; marked FAILED", run.info.run_id
                )


@dataclass
class StoreFailures:
    """The failure policy: the first store failure (a warning, or in strict mode an error) and what was not logged
    after it (reported once at the run's end)."""

    store: TrackingStore
    failure: str | None = None
    not_logged: list[str] = field(default_factory=list)

    def fail(self, error: BaseException, what: str) -> None:
        if self.store.settings.strict:
            raise TrackingStoreError(
                f"{error} (mlflow.strict is true, so the run stops; set it to false to run without MLflow)"
            ) from error
        if self.failure is None:
            self.failure = str(error)
            unlogged = (
                "nothing of this run (parameters, metrics, tables, figures) is logged"
                if what == "the whole run"
                else f"from {what} on, nothing more is logged"
            )
            logger.warning(
                "MLflow store %s is unusable: %s. The run goes on and saves every catalog output, but %s "
                "to MLflow (set mlflow.strict: true to stop instead).",
                self.store.uri,
                error,
                unlogged,
            )
        self.not_logged.append(what)

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Any store failure inside becomes :meth:`fail` (a strict-mode error passes through)."""
        try:
            yield
        except TrackingStoreError:
            raise
        except Exception as error:  # noqa: BLE001 - any store failure degrades to a warning (or strict error)
            self.fail(error, what)

    def report(self) -> None:
        """One log line listing what was not logged, when anything was."""
        if self.failure is not None and self.not_logged:
            shown = ", ".join(self.not_logged[:8]) + (" …" if len(self.not_logged) > 8 else "")
            logger.info(
                "Not logged to MLflow (%d items): %s. Every catalog output was saved.", len(self.not_logged), shown
            )


class RunRecorder:
    """One MLflow run of a ``kedro run`` in its :class:`TrackingStore`; after a store failure every call is a
    recorded no-op (:class:`StoreFailures`)."""

    def __init__(self, settings: TrackingSettings, project_root: Path) -> None:
        self.settings = settings
        self.store = TrackingStore(settings, Path(project_root))
        self.failures = StoreFailures(self.store)
        self.run_id: str | None = None
        self.details: list[dict[str, Any]] = []

    @property
    def tracking_uri(self) -> str:
        return self.store.uri

    @property
    def active(self) -> bool:
        return self.run_id is not None and self.failures.failure is None

    def check(self) -> None:
        """Probes the store: raises in strict mode, else warns once and disables logging."""
        if not self.settings.enabled:
            return
        try:
            self.store.probe()
        except TrackingStoreError as error:
            self.failures.fail(error, "the whole run")

    def start(
        self,
        run_name: str,
        parameters: Mapping[str, Any],
        tags: Mapping[str, str],
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """Opens the run (experiment created if needed), marks stale runs failed, logs params and tags. Params are
        the flattened settings that differ from ``defaults`` (conf/base's; all of them without ``defaults``) and
        ``settings.unchanged``, how many did not; every setting, changed or not, is the artifact
        :data:`SETTINGS_ARTIFACT`, so a run's params say what was changed and its artifact what was used."""
        if not self.settings.enabled or self.failures.failure is not None:
            return
        with self.failures.guard("the run itself"):
            from mlflow.entities import Param

            client, self.run_id = self.store.open_run(run_name, tags)
            flat = flatten_parameters(parameters)
            base = flatten_parameters(defaults) if defaults is not None else {}
            changed = {key: value for key, value in flat.items() if defaults is None or base.get(key) != value}
            params = [Param(key, value) for key, value in changed.items()]
            params.append(Param("settings.unchanged", str(len(flat) - len(changed))))
            for start in range(0, len(params), 100):
                client.log_batch(self.run_id, params=params[start : start + 100])
            client.log_text(self.run_id, json.dumps(flat, indent=1, sort_keys=True), SETTINGS_ARTIFACT)
        if self.run_id is not None:
            logger.info("MLflow run %s (%s) in %s", run_name, self.run_id, self.tracking_uri)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0, what: str = "metrics") -> None:
        """Logs ``{name: value}`` at ``step``."""
        self.log_metric_history({name: ([value], [step]) for name, value in metrics.items()}, what)

    def log_metric_history(self, histories: Mapping[str, tuple[list[float], list[int]]], what: str) -> None:
        """Logs each metric's values at their steps (e.g. a loss curve)."""
        if histories:
            self._when_active(what, lambda client: self._log_metric_batches(client, histories))

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        """A matplotlib figure as a PNG artifact: the bytes the catalog saved (:func:`png_bytes`), not a second
        rendering (MLflow's ``log_figure`` draws the figure again, so every figure would be drawn twice)."""
        self.log_image_bytes(png_bytes(figure), artifact_file)

    def log_image_bytes(self, image: bytes, artifact_file: str) -> None:
        """An image already encoded (a figure rendered where it was made: :func:`png_bytes`) as an artifact."""

        def log(client: Any) -> None:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / Path(artifact_file).name
                path.write_bytes(image)
                folder_name = str(Path(artifact_file).parent)
                client.log_artifact(self.run_id, str(path), None if folder_name == "." else folder_name)

        self._when_active(artifact_file, log)

    def log_table(self, table: Any, artifact_file: str) -> None:
        """A pandas table as a CSV artifact."""
        self.log_text(table.to_csv(index=False), artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        """A text (markdown report, CSV) as an artifact."""
        self._when_active(artifact_file, lambda client: client.log_text(self.run_id, text, artifact_file))

    def set_description(self, text: str) -> None:
        """The run's description: MLflow's ``mlflow.note.content`` tag, shown above the run's page."""
        self._when_active("the run's description", lambda client: client.set_tag(self.run_id, DESCRIPTION_TAG, text))

    def log_details(self, metrics: Mapping[str, float], dataset: str) -> None:
        """Numbers of ``dataset`` that are not run metrics, kept for the table :data:`DETAILS_ARTIFACT` (``dataset``,
        ``name``, ``value``) that :meth:`end` logs."""
        self.details.extend(
            {"dataset": dataset, "name": name, "value": float(value)} for name, value in metrics.items()
        )

    def end(self, status: str) -> None:
        """Logs the details' table, closes the run with ``status`` (FINISHED / FAILED); says once what was not
        logged."""
        if self.details:
            import pandas as pd

            self.log_table(pd.DataFrame(self.details, columns=["dataset", "name", "value"]), DETAILS_ARTIFACT)
            self.details = []
        if self.active:
            with self.failures.guard("the run's end"):
                self.store.client().set_terminated(self.run_id, status)
        self.failures.report()

    def _when_active(self, what: str, log: Callable[[Any], None]) -> None:
        """Calls ``log(client)`` when the run is open; records ``what`` as not logged after a failure."""
        if not self.settings.enabled:
            return
        if not self.active:
            if self.failures.failure is not None:
                self.failures.not_logged.append(what)
            return
        with self.failures.guard(what):
            log(self.store.client())

    def _log_metric_batches(self, client, histories: Mapping[str, tuple[list[float], list[int]]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(name, float(value), now, int(step))
            for name, (values, steps) in histories.items()
            for value, step in zip(values, steps)
        ]
        for start in range(0, len(metrics), 1000):
            client.log_batch(self.run_id, metrics=metrics[start : start + 1000])


def png_bytes(figure: Any) -> bytes:
    """A matplotlib figure as PNG bytes, rendered as MLflow's ``log_figure`` renders it (``savefig`` defaults),
    once: the catalog's copy and MLflow's share the bytes (:func:`thinkalike.io.figures.rendered_png`)."""
    return rendered_png(figure)


@dataclass
class DeferredRecorder:
    """Stands in for a :class:`RunRecorder` in a worker process: keeps each logging call (figures, tables,
    metrics) to be replayed by the driver's recorder in the same order (:meth:`replay`), so MLflow has one
    writer whatever the cluster."""

    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0, what: str = "metrics") -> None:
        self.calls.append(("log_metrics", (dict(metrics), step, what)))

    def log_metric_history(self, histories: Mapping[str, tuple[list[float], list[int]]], what: str) -> None:
        self.calls.append(("log_metric_history", (dict(histories), what)))

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        """Rendered here, in the worker, while the driver does other work: the driver logs the PNG's bytes."""
        self.calls.append(("log_image_bytes", (png_bytes(figure), artifact_file)))

    def log_table(self, table: Any, artifact_file: str) -> None:
        self.calls.append(("log_table", (table, artifact_file)))

    def log_text(self, text: str, artifact_file: str) -> None:
        self.calls.append(("log_text", (text, artifact_file)))

    def log_details(self, metrics: Mapping[str, float], dataset: str) -> None:
        self.calls.append(("log_details", (dict(metrics), dataset)))

    def set_description(self, text: str) -> None:
        self.calls.append(("set_description", (text,)))

    def replay(self, recorder: RunRecorder) -> None:
        """Every kept call, in order, on the driver's ``recorder``."""
        for method, arguments in self.calls:
            getattr(recorder, method)(*arguments)
