"""Where a run's time and memory go: the ``run_timings`` table (no Kedro import).

:class:`RunClock` is driven by :class:`thinkalike.run_record.timing_hooks.RunTimingHooks` with the events of
a ``kedro run`` (a dataset load starts or ends, a node function starts or ends, a save starts or
ends) and turns them into one row per node that ran, plus one ``(start)`` row:

* ``seconds``: wall time of the node function (``before_node_run`` → ``after_node_run``);
* ``cpu_seconds``: CPU seconds of the whole process over the same interval
  (:func:`time.process_time`: user + system time of every thread, so torch's intra-op threads
  count and a node using 2 cores fully shows about twice its ``seconds``; child processes do
  not count);
* ``load_seconds`` / ``save_seconds``: the node's dataset loads (before the function) and saves
  (after it), each from the ``before_dataset_*`` to the ``after_dataset_*`` hook;
* ``other_seconds``: the rest of the node's span, which runs from its first event to the next
  node's first event (the last node's: to the end of the run) — other hooks (MLflow logging of
  the saved outputs), Kedro releasing datasets and logging;
* ``span_seconds`` = ``load_seconds + seconds + save_seconds + other_seconds``;
* ``peak_rss_mb``: the process's resident-set high-water mark over the node's span, and
  ``peak_rss_growth_mb`` that peak less the resident set at the span's start (what the node
  added at its peak). On Linux the high-water mark is reset at each span's start by writing
  ``5`` to ``/proc/self/clear_refs``, so the peak is the node's own; where that is impossible
  the column holds the process's high-water mark so far (an upper bound). RSS is used because
  :mod:`tracemalloc` sees only allocations made through Python's allocator — torch's tensors
  (and anything else allocated in C/C++) are invisible to it — and slows allocation-heavy code;
* ``started_at``: wall-clock time (UTC) of the span's start;
* ``status``: ``completed``, or ``failed`` for the node a failed run stopped in;
* ``run_seconds``: the run's wall time (``before_pipeline_run`` → ``after_pipeline_run`` or
  ``on_pipeline_error``), the same on every row.

The ``(start)`` row (pipeline ``(run)``) is the time from the run's start to the first node:
parameter validation, opening the MLflow run, Kedro materialising the catalog. For a
sequential run ``span_seconds`` sums to ``run_seconds`` exactly; under a threaded runner nodes
overlap, ``other_seconds`` is clipped at 0 and CPU and memory are shared by the nodes running
at once. Under :class:`thinkalike.runners.DaskRunner` each node is measured in the worker process
that ran it (``worker``: ``host:pid``; empty for the run's own process), spans follow each other per
worker within a task and a task's last span ends with the task (a worker waiting for its next task is not
counted), and the nodes' ``span_seconds`` sum to the busy time of all workers together, which is more
than ``run_seconds`` when they worked at once.
"""

from __future__ import annotations

import math
import resource
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

START_ROW = "(start)"
RUN_PIPELINE = "(run)"
UNREGISTERED = "(unregistered)"
TOTAL = "total"
COMPLETED = "completed"
FAILED = "failed"
METRIC_PREFIX = "timing"
COLUMNS = (
    "node",
    "namespace",
    "pipeline",
    "status",
    "started_at",
    "seconds",
    "cpu_seconds",
    "load_seconds",
    "save_seconds",
    "other_seconds",
    "span_seconds",
    "peak_rss_mb",
    "peak_rss_growth_mb",
    "run_seconds",
    "worker",
)
NUMERIC = COLUMNS[5:-1]
SUMMED = ("span_seconds", "seconds", "cpu_seconds", "load_seconds", "save_seconds", "other_seconds")
_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


# --------------------------------------------------------------------------- memory
def current_rss_mb() -> float:
    """The process's resident set now (MiB), from ``/proc/self/status``; NaN where there is none."""
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    """The process's resident-set high-water mark (MiB) since start or the last :func:`reset_peak_rss`."""
    peak = _status_mb("VmHWM")
    if math.isnan(peak):  # no /proc (macOS): getrusage, in bytes there and KiB on Linux
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024
    return peak


def reset_peak_rss() -> bool:
    """Resets the high-water mark to the current resident set (Linux ≥ 4.0); whether it could."""
    try:
        with open(_CLEAR_REFS, "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _status_mb(key: str) -> float:
    try:
        with open(_STATUS) as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return math.nan


@dataclass(frozen=True)
class Probes:
    """The clocks and memory readings a :class:`RunClock` uses (replaced by fakes in tests)."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time
    epoch: Callable[[], float] = time.time
    rss_mb: Callable[[], float] = current_rss_mb
    peak_rss_mb: Callable[[], float] = peak_rss_mb
    reset_peak: Callable[[], bool] = reset_peak_rss


# --------------------------------------------------------------------------- recording
@dataclass
class NodeSpan:
    """What was measured of one node (times in seconds, memory in MiB)."""

    node: str
    namespace: str
    pipeline: str
    outputs: frozenset[str]
    start: float  # wall clock (perf counter) at the span's first event
    started_at: float  # epoch seconds
    rss_start_mb: float
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    load_seconds: float = 0.0
    save_seconds: float = 0.0
    peak_rss_mb: float = math.nan
    status: str = COMPLETED
    saved: set[str] = field(default_factory=set)
    function_ended: bool = False
    open_kind: str | None = None  # "load", "run" or "save" while one is under way
    open_wall: float = 0.0
    open_cpu: float = 0.0
    worker: str = ""  # the worker process of a cluster run (host:pid); "" in the run's own process
    task_end_offset: float | None = None  # the last span of a worker's task: seconds from its start to the task's end

    @property
    def finished(self) -> bool:
        """Its function returned and every output was saved."""
        return self.function_ended and self.outputs <= self.saved


class RunClock:
    """Records one run's events (see the module docstring) and builds its table.

    Events are keyed by node name, so loads and saves are attributed to their node whatever
    the order; the span, CPU and memory readings assume one node at a time (sequential runs).
    """

    def __init__(self, pipeline_of: Mapping[str, str] | None = None, probes: Probes | None = None) -> None:
        self.pipeline_of = dict(pipeline_of or {})
        self.probes = probes or Probes()
        self.run_start = self.probes.wall()
        self.run_started_at = self.probes.epoch()
        self.run_end: float | None = None
        self.spans: dict[str, NodeSpan] = {}
        self._current: NodeSpan | None = None
        self._peak_is_own = self.probes.reset_peak()

    # ---- events
    def load_started(self, node: str, namespace: str | None = None, outputs: Iterable[str] = ()) -> None:
        self._open(self._span(node, namespace, outputs), "load")

    def load_finished(self, node: str) -> None:
        self._close(node, "load")

    def function_started(self, node: str, namespace: str | None = None, outputs: Iterable[str] = ()) -> None:
        self._open(self._span(node, namespace, outputs), "run")

    def function_finished(self, node: str, failed: bool = False) -> None:
        span = self._close(node, "run")
        if span is not None:
            span.function_ended = not failed
            if failed:
                span.status = FAILED

    def save_started(self, node: str, namespace: str | None = None, outputs: Iterable[str] = ()) -> None:
        self._open(self._span(node, namespace, outputs), "save")

    def save_finished(self, node: str, dataset: str) -> None:
        span = self._close(node, "save")
        if span is not None:
            span.saved.add(dataset)

    def finish(self, failed: bool = False) -> None:
        """The run ended (``failed``: with an error); an unfinished node is marked failed."""
        if self.run_end is not None:
            return
        for span in self.spans.values():
            if span.open_kind is not None:
                self._close(span.node, span.open_kind)
            if failed and not span.finished:
                span.status = FAILED
        self._end_current()
        self.run_end = self.probes.wall()

    def task_spans(self) -> list[NodeSpan]:
        """In a worker, after its task (:meth:`finish` first): the task's spans, the last one marked with the
        task's end (``task_end_offset``), so that the worker's idle time until its next task is not counted."""
        spans = sorted(self.spans.values(), key=lambda span: span.start)
        if spans and self.run_end is not None:
            spans[-1].task_end_offset = self.run_end - spans[-1].start
        return spans

    def merge(self, spans: Iterable[NodeSpan], worker: str) -> None:
        """Adds the spans a worker process measured (its clock's ``start`` is rebased on this clock by the
        wall-clock ``started_at``: perf counters of other processes or machines are not comparable)."""
        for span in spans:
            span.start = self.run_start + (span.started_at - self.run_started_at)
            span.worker = worker
            span.pipeline = self.pipeline_of.get(span.node, span.pipeline)
            self.spans[span.node] = span

    # ---- the table
    def rows(self) -> list[dict[str, Any]]:
        """The table's rows (the run must be finished): ``(start)`` first, then each node in order."""
        if self.run_end is None:
            raise RuntimeError("RunClock.rows() before finish()")
        return span_rows(self.run_start, self.run_end, self.run_started_at, list(self.spans.values()))

    def table(self):
        """:meth:`rows` as a pandas DataFrame with :data:`COLUMNS`."""
        return timing_table(self.rows())

    # ---- internals
    def _span(self, node: str, namespace: str | None, outputs: Iterable[str]) -> NodeSpan:
        span = self.spans.get(node)
        if span is not None:
            return span
        self._end_current()
        self._peak_is_own = self.probes.reset_peak()
        span = NodeSpan(
            node=node,
            namespace=namespace or "",
            pipeline=self.pipeline_of.get(node, UNREGISTERED),
            outputs=frozenset(outputs),
            start=self.probes.wall(),
            started_at=self.probes.epoch(),
            rss_start_mb=self.probes.rss_mb(),
        )
        self.spans[node] = span
        self._current = span
        return span

    def _end_current(self) -> None:
        """Reads the peak memory of the node whose span ends now."""
        if self._current is not None:
            self._current.peak_rss_mb = self.probes.peak_rss_mb()
            self._current = None

    def _open(self, span: NodeSpan, kind: str) -> None:
        span.open_kind, span.open_wall = kind, self.probes.wall()
        if kind == "run":
            span.open_cpu = self.probes.cpu()

    def _close(self, node: str, kind: str) -> NodeSpan | None:
        span = self.spans.get(node)
        if span is None or span.open_kind != kind:
            return None
        elapsed = self.probes.wall() - span.open_wall
        if kind == "load":
            span.load_seconds += elapsed
        elif kind == "save":
            span.save_seconds += elapsed
        else:
            span.seconds += elapsed
            span.cpu_seconds += self.probes.cpu() - span.open_cpu
        span.open_kind = None
        return span


# --------------------------------------------------------------------------- table maths
def span_rows(run_start: float, run_end: float, run_started_at: float, spans: list[NodeSpan]) -> list[dict[str, Any]]:
    """One row per span plus ``(start)``: each span runs to the next span's start in the same process (the last of
    the run's own process: to ``run_end``; the last of a worker: to the end of its measured work)."""
    spans = sorted(spans, key=lambda span: span.start)
    ends = _span_ends(spans, run_end)
    run_seconds = run_end - run_start
    first = spans[0].start if spans else run_end
    rows = [
        {
            "node": START_ROW,
            "namespace": "",
            "pipeline": RUN_PIPELINE,
            "status": COMPLETED,
            "started_at": _utc(run_started_at),
            "seconds": 0.0,
            "cpu_seconds": 0.0,
            "load_seconds": 0.0,
            "save_seconds": 0.0,
            "other_seconds": first - run_start,
            "span_seconds": first - run_start,
            "peak_rss_mb": math.nan,
            "peak_rss_growth_mb": math.nan,
            "run_seconds": run_seconds,
            "worker": "",
        }
    ]
    for span, end in zip(spans, ends):
        measured = span.load_seconds + span.seconds + span.save_seconds
        other = max(0.0, (end - span.start) - measured)
        rows.append(
            {
                "node": span.node,
                "namespace": span.namespace,
                "pipeline": span.pipeline,
                "status": span.status,
                "started_at": _utc(span.started_at),
                "seconds": span.seconds,
                "cpu_seconds": span.cpu_seconds,
                "load_seconds": span.load_seconds,
                "save_seconds": span.save_seconds,
                "other_seconds": other,
                "span_seconds": measured + other,
                "peak_rss_mb": span.peak_rss_mb,
                "peak_rss_growth_mb": max(0.0, span.peak_rss_mb - span.rss_start_mb),
                "run_seconds": run_seconds,
                "worker": span.worker,
            }
        )
    return rows


def _span_ends(spans: list[NodeSpan], run_end: float) -> list[float]:
    """Where each span (sorted by start) ends: the end of its task when it is a worker task's last span, else the
    start of the next span of the same process (see :func:`span_rows`)."""
    ends = []
    for index, span in enumerate(spans):
        if span.task_end_offset is not None:
            ends.append(span.start + span.task_end_offset)
            continue
        later = (other for other in spans[index + 1 :] if other.worker == span.worker)
        following = next(later, None)
        if following is not None:
            ends.append(following.start)
        elif span.worker:
            ends.append(span.start + span.load_seconds + span.seconds + span.save_seconds)
        else:
            ends.append(run_end)
    return ends


def timing_table(rows: list[dict[str, Any]]):
    """The rows as a DataFrame with :data:`COLUMNS` (``started_at`` as UTC timestamps)."""
    import pandas as pd

    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table["started_at"] = pd.to_datetime(table["started_at"], utc=True)
    for column in NUMERIC:
        table[column] = table[column].astype(float)
    return table


def most_at_once(table) -> int:
    """The most worker processes at work at the same moment: the largest number of worker spans
    (``started_at`` … ``started_at + span_seconds``, rows with a ``worker``) that overlap by more than a millisecond;
    0 without workers."""
    import pandas as pd

    if "worker" not in table:
        return 0
    rows = table[table["worker"].fillna("").astype(str) != ""]
    if rows.empty:
        return 0
    started = pd.to_datetime(rows["started_at"], utc=True)
    starts = (started - started.min()).dt.total_seconds().to_numpy()
    # a millisecond's slack: one worker's spans follow each other, and its clock and the epoch agree to microseconds
    ends = starts + rows["span_seconds"].to_numpy(dtype=float) - 1e-3
    # at equal times an end comes before a start: spans that touch do not overlap
    events = sorted([(end, -1) for end in ends] + [(start, 1) for start in starts])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def pipeline_totals(table):
    """Per pipeline (in the table's order, ``(run)`` first) and ``total``: nodes, summed times, peak memory.

    ``span_seconds`` of the ``total`` row is the run's wall time (``run_seconds``); ``peak_rss_mb``
    is the highest of the pipeline's nodes.
    """
    import pandas as pd

    grouped = table.groupby("pipeline", sort=False)
    totals = grouped[list(SUMMED)].sum()
    totals.insert(0, "nodes", (table["node"] != START_ROW).groupby(table["pipeline"], sort=False).sum())
    totals["peak_rss_mb"] = grouped["peak_rss_mb"].max()
    totals["failed"] = grouped["status"].apply(lambda status: int((status == FAILED).sum()))
    total = totals.sum(numeric_only=True)
    total["peak_rss_mb"] = table["peak_rss_mb"].max()
    if len(table):
        total["span_seconds"] = float(table["run_seconds"].iloc[0])
    totals.loc[TOTAL] = total
    totals = totals.reset_index()
    totals["nodes"] = totals["nodes"].astype(int)
    totals["failed"] = totals["failed"].astype(int)
    return pd.DataFrame(totals).rename(columns={"span_seconds": "seconds", "seconds": "node_seconds"})


def timing_metrics(table) -> dict[str, float]:
    """Every per-pipeline total of a ``run_timings`` table, named ``timing.<pipeline>.<measure>`` and
    ``timing.total.…``: rows of the run's ``tables/metric_details.csv``, beside the run metrics of
    :func:`cost_metrics`.

    ``seconds`` is the time attributed to the pipeline (its nodes' spans; for ``total`` the run's
    wall time), ``node_seconds`` its node functions, ``cpu_seconds``, ``load_seconds``,
    ``save_seconds``, ``peak_rss_mb`` (highest of its nodes) and ``nodes``; ``(run)`` is logged
    as ``timing.start.seconds``.
    """
    metrics: dict[str, float] = {}
    for row in pipeline_totals(table).to_dict("records"):
        pipeline = row.pop("pipeline")
        if pipeline == RUN_PIPELINE:
            metrics[f"{METRIC_PREFIX}.start.seconds"] = float(row["seconds"])
            continue
        for measure, value in row.items():
            if measure == "other_seconds" or (measure == "failed" and not value):
                continue
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                metrics[f"{METRIC_PREFIX}.{pipeline}.{measure}"] = float(value)
    return metrics


#: The run-metric name of each measure of :func:`pipeline_totals` that is one (``cost/<pipeline>.<name>``).
COST_MEASURES = {"seconds": "wall_s", "cpu_seconds": "cpu_s", "peak_rss_mb": "peak_rss_mb"}


def cost_metrics(table) -> dict[str, float]:
    """The run's cost as MLflow metrics, per pipeline and for the run (``total``): ``cost/<pipeline>.wall_s`` (the
    time attributed to it; the run's wall time for ``total``), ``cost/<pipeline>.cpu_s`` and
    ``cost/<pipeline>.peak_rss_mb`` (the highest of its nodes). Its other totals are :func:`timing_metrics`."""
    metrics: dict[str, float] = {}
    for row in pipeline_totals(table).to_dict("records"):
        if row["pipeline"] == RUN_PIPELINE:
            continue
        for measure, name in COST_MEASURES.items():
            value = row.get(measure)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                metrics[f"cost/{row['pipeline']}.{name}"] = float(value)
    return metrics


def format_seconds(seconds: float) -> str:
    """``2 min 47 s``, ``4.2 s``."""
    if math.isnan(seconds):
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)
