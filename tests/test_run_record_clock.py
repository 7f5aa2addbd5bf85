"""The run_timings table's maths (thinkalike.run_record.clock) on scripted events with fake clocks, and the probes."""

import math
import threading
import time

import pytest

from thinkalike.run_record.clock import (
    FAILED,
    RUN_PIPELINE,
    START_ROW,
    Probes,
    RunClock,
    cost_metrics,
    format_seconds,
    pipeline_totals,
    timing_metrics,
)


class FakeMachine:
    """A wall clock, CPU clock and memory that the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 10.0
        self.rss = 500.0
        self.peak = 500.0

    def probes(self) -> Probes:
        return Probes(
            wall=lambda: self.wall,
            cpu=lambda: self.cpu,
            epoch=lambda: 1_700_000_000 + self.wall,
            rss_mb=lambda: self.rss,
            peak_rss_mb=lambda: self.peak,
            reset_peak=self._reset,
        )

    def _reset(self) -> bool:
        self.peak = self.rss
        return True

    def spend(self, seconds: float, cpu: float = 0.0, rss: float | None = None, peak: float | None = None) -> None:
        self.wall += seconds
        self.cpu += cpu
        if peak is not None:
            self.peak = max(self.peak, peak)
        if rss is not None:
            self.rss = rss
            self.peak = max(self.peak, rss)


PIPELINES = {"make": "corpus", "use": "zoo", "report": "zoo"}


def scripted_run(machine: FakeMachine, fail_in: str | None = None) -> RunClock:
    """(start) 2 s; make: load 1, run 3 (6 CPU s), save 0.5, hooks 0.25; use: load 0.5, run 4, save 1, end 0.75."""
    clock = RunClock(PIPELINES, machine.probes())
    machine.spend(2.0)
    clock.load_started("make", "", ["a"])
    machine.spend(1.0)
    clock.load_finished("make")
    clock.function_started("make", "", ["a"])
    machine.spend(3.0, cpu=6.0, peak=900.0)  # two threads busy; a transient peak of 900 MiB
    clock.function_finished("make")
    clock.save_started("make", "", ["a"])
    machine.spend(0.5, cpu=0.5, rss=600.0)
    clock.save_finished("make", "a")
    machine.spend(0.25)  # other hooks (MLflow logging), releases
    clock.load_started("use", "models.m", ["b", "c"])
    machine.spend(0.5)
    clock.load_finished("use")
    clock.function_started("use", "models.m", ["b", "c"])
    machine.spend(4.0, cpu=4.0, peak=700.0)
    if fail_in == "use.run":
        clock.function_finished("use", failed=True)
        machine.spend(0.75)
        clock.finish(failed=True)
        return clock
    clock.function_finished("use")
    clock.save_started("use", "models.m", ["b", "c"])
    machine.spend(1.0)
    clock.save_finished("use", "b")
    if fail_in == "use.save":
        clock.save_started("use", "models.m", ["b", "c"])
        machine.spend(0.25)
        clock.finish(failed=True)  # the save of c raised: no after_dataset_saved, no on_node_error
        return clock
    clock.save_started("use", "models.m", ["b", "c"])
    machine.spend(0.25)
    clock.save_finished("use", "c")
    machine.spend(0.5)
    clock.finish()
    return clock


def test_rows_split_each_node_span_and_sum_to_the_run():
    table = scripted_run(FakeMachine()).table()
    assert list(table["node"]) == [START_ROW, "make", "use"]
    assert list(table["pipeline"]) == [RUN_PIPELINE, "corpus", "zoo"]
    assert list(table["namespace"]) == ["", "", "models.m"]
    start, make, use = (row for _, row in table.iterrows())
    assert start["span_seconds"] == pytest.approx(2.0) and start["seconds"] == 0
    assert (make["load_seconds"], make["seconds"], make["save_seconds"], make["other_seconds"]) == pytest.approx(
        (1.0, 3.0, 0.5, 0.25)
    )
    assert make["cpu_seconds"] == pytest.approx(6.0)  # the function's interval only (not its save's 0.5)
    assert (use["load_seconds"], use["seconds"], use["save_seconds"], use["other_seconds"]) == pytest.approx(
        (0.5, 4.0, 1.25, 0.5)
    )
    assert table["run_seconds"].eq(2 + 4.75 + 6.25).all()
    assert table["span_seconds"].sum() == pytest.approx(table["run_seconds"].iloc[0], rel=1e-12)
    assert set(table["status"]) == {"completed"}
    assert table["started_at"].dt.tz is not None and table["started_at"].is_monotonic_increasing


def test_spans_from_worker_processes_join_the_table_by_their_wall_clock_start():
    """DaskRunner: two workers measured their nodes with their own clocks (perf counters unrelated to the
    driver's); the driver's table places them by epoch time, and each worker's spans follow each other."""
    driver = FakeMachine()
    clock = RunClock({"a": "zoo", "b": "zoo", "c": "cka"}, driver.probes())
    workers = {name: FakeMachine() for name in ("host:1", "host:2")}
    for offset, machine in enumerate(workers.values()):
        machine.wall = 5000.0 * (offset + 1)  # another process's perf counter
        machine.spend(0.0)
    spans = {}
    for name, nodes in (("host:1", [("a", 4.0), ("c", 1.0)]), ("host:2", [("b", 3.0)])):
        machine = workers[name]
        worker_clock = RunClock({}, machine.probes())
        start_epoch_offset = 2.0  # the workers start 2 s after the driver
        for node, seconds in nodes:
            machine.spend(0.0)
            worker_clock.function_started(node)
            worker_clock.spans[node].started_at = driver.probes().epoch() + start_epoch_offset
            machine.spend(seconds)
            worker_clock.function_finished(node)
            start_epoch_offset += seconds + 0.5
        worker_clock.finish()
        spans[name] = list(worker_clock.spans.values())
    for name, worker_spans in spans.items():
        clock.merge(worker_spans, name)
    driver.spend(8.0)
    clock.finish()
    table = clock.table().set_index("node")
    assert list(table.index) == [START_ROW, "a", "b", "c"]  # by wall-clock start
    assert dict(table["worker"]) == {START_ROW: "", "a": "host:1", "b": "host:2", "c": "host:1"}
    assert dict(table["pipeline"].drop(START_ROW)) == {"a": "zoo", "b": "zoo", "c": "cka"}
    assert table.loc[START_ROW, "span_seconds"] == pytest.approx(2.0)
    assert table.loc["a", "span_seconds"] == pytest.approx(4.5)  # to c's start on the same worker, not b's
    assert table.loc["b", "span_seconds"] == pytest.approx(3.0)  # a worker's last: its measured work
    assert table.loc["c", "span_seconds"] == pytest.approx(1.0)
    assert table["span_seconds"].sum() > table["run_seconds"].iloc[0]  # the workers overlapped


def test_a_workers_wait_between_two_tasks_is_not_counted_in_the_first_tasks_last_node():
    """One worker runs task 1 (node a, 4 s, then 0.25 s until the task's report), waits 10 s for a free slot's next
    task, then runs task 2 (node c, 1 s). Each task has its own clock (``remote_hooks``); a's span ends with its
    task, not at c's start."""
    driver = FakeMachine()
    clock = RunClock({"a": "zoo", "c": "cka"}, driver.probes())
    machine = FakeMachine()
    machine.wall = 7000.0
    epoch = driver.probes().epoch()
    for node, seconds, wait_after in (("a", 4.0, 10.0), ("c", 1.0, 0.0)):
        task_clock = RunClock({}, machine.probes())
        task_clock.function_started(node)
        task_clock.spans[node].started_at = epoch
        machine.spend(seconds)
        task_clock.function_finished(node)
        machine.spend(0.25)
        task_clock.finish()
        clock.merge(task_clock.task_spans(), "host:1")
        machine.spend(wait_after)
        epoch += seconds + 0.25 + wait_after
    driver.spend(20.0)
    clock.finish()
    table = clock.table().set_index("node")
    assert table.loc["a", "span_seconds"] == pytest.approx(4.25)  # not 14.25: the wait is nobody's work
    assert table.loc["a", "other_seconds"] == pytest.approx(0.25)
    assert table.loc["c", "span_seconds"] == pytest.approx(1.25)


def test_peak_memory_is_each_nodes_own():
    table = scripted_run(FakeMachine()).table().set_index("node")
    # make peaked at 900 MiB from 500; the high-water mark is reset when use starts (at 600),
    # so use's peak is its own 700, not the process's 900
    assert table.loc["make", "peak_rss_mb"] == 900 and table.loc["make", "peak_rss_growth_mb"] == 400
    assert table.loc["use", "peak_rss_mb"] == 700 and table.loc["use", "peak_rss_growth_mb"] == 100
    assert math.isnan(table.loc[START_ROW, "peak_rss_mb"])


@pytest.mark.parametrize("fail_in", ["use.run", "use.save"])
def test_the_node_a_failed_run_stopped_in_is_marked(fail_in):
    table = scripted_run(FakeMachine(), fail_in=fail_in).table().set_index("node")
    assert table.loc["make", "status"] == "completed" and table.loc["use", "status"] == FAILED
    assert table["span_seconds"].sum() == pytest.approx(table["run_seconds"].iloc[0])
    if fail_in == "use.save":  # the save under way when it failed counts as save time
        assert table.loc["use", "save_seconds"] == pytest.approx(1.25)


def test_a_run_without_nodes_has_only_its_start():
    machine = FakeMachine()
    clock = RunClock({}, machine.probes())
    machine.spend(1.5)
    clock.finish()
    table = clock.table()
    assert list(table["node"]) == [START_ROW] and table["span_seconds"].iloc[0] == pytest.approx(1.5)
    assert timing_metrics(table)["timing.total.seconds"] == pytest.approx(1.5)


def test_nodes_outside_the_registry_are_labelled():
    machine = FakeMachine()
    clock = RunClock({}, machine.probes())
    clock.function_started("loose")
    clock.function_finished("loose")
    clock.finish()
    assert clock.table()["pipeline"].iloc[1] == "(unregistered)"


def test_rows_need_a_finished_run():
    with pytest.raises(RuntimeError, match="before finish"):
        RunClock({}, FakeMachine().probes()).rows()


def test_pipeline_totals_and_metrics():
    table = scripted_run(FakeMachine()).table()
    totals = pipeline_totals(table).set_index("pipeline")
    assert list(totals.index) == [RUN_PIPELINE, "corpus", "zoo", "total"]
    assert totals.loc["corpus", "seconds"] == pytest.approx(4.75)
    assert totals.loc["zoo", "seconds"] == pytest.approx(6.25)
    assert totals.loc["zoo", "node_seconds"] == pytest.approx(4.0)
    assert totals.loc["total", "seconds"] == pytest.approx(13.0)  # the run's wall time
    assert totals.loc["total", "seconds"] == pytest.approx(totals.drop("total")["seconds"].sum())
    assert totals.loc["total", "cpu_seconds"] == pytest.approx(10.0)
    assert totals.loc["total", "peak_rss_mb"] == 900 and totals.loc["zoo", "peak_rss_mb"] == 700
    assert list(totals["nodes"]) == [0, 1, 1, 2]

    metrics = timing_metrics(table)
    assert metrics["timing.start.seconds"] == pytest.approx(2.0)
    assert metrics["timing.corpus.seconds"] == pytest.approx(4.75)
    assert metrics["timing.total.seconds"] == pytest.approx(13.0)
    assert metrics["timing.zoo.load_seconds"] == pytest.approx(0.5)
    assert metrics["timing.total.peak_rss_mb"] == 900
    assert not any(name.endswith(".failed") for name in metrics)
    failed = timing_metrics(scripted_run(FakeMachine(), fail_in="use.run").table())
    assert failed["timing.zoo.failed"] == 1 and failed["timing.total.failed"] == 1


def test_the_runs_cost_is_wall_cpu_and_memory_per_pipeline_and_for_the_run():
    table = scripted_run(FakeMachine()).table()
    cost = cost_metrics(table)
    assert set(cost) == {
        f"cost/{p}.{m}" for p in ("corpus", "zoo", "total") for m in ("wall_s", "cpu_s", "peak_rss_mb")
    }
    assert cost["cost/zoo.wall_s"] == pytest.approx(6.25) and cost["cost/total.wall_s"] == pytest.approx(13.0)
    assert cost["cost/total.cpu_s"] == pytest.approx(10.0)
    assert cost["cost/zoo.peak_rss_mb"] == 700 and cost["cost/total.peak_rss_mb"] == 900


def test_a_pipeline_run_twice_in_a_table_is_grouped_once():
    machine = FakeMachine()
    clock = RunClock({"a": "zoo", "b": "corpus", "c": "zoo"}, machine.probes())
    for node in "abc":
        clock.function_started(node)
        machine.spend(1.0)
        clock.function_finished(node)
    clock.finish()
    totals = pipeline_totals(clock.table()).set_index("pipeline")
    assert totals.loc["zoo", "nodes"] == 2 and totals.loc["zoo", "node_seconds"] == pytest.approx(2.0)


def test_format_seconds():
    assert format_seconds(4.24) == "4.2 s"
    assert format_seconds(167) == "2 min 47 s"
    assert format_seconds(float("nan")) == "–"


# ---------------------------------------------------------------- the real probes
def test_process_time_counts_other_threads():
    """CPU seconds are the process's: work done in another thread (as torch's intra-op threads do) counts."""

    def spin():
        start = time.thread_time()
        while time.thread_time() - start < 0.2:
            pass

    before = time.process_time()
    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    assert time.process_time() - before >= 0.19


PEAK_RSS_PROBE = """
import numpy as np
from thinkalike.run_record.clock import current_rss_mb, peak_rss_mb, reset_peak_rss
if not reset_peak_rss():
    print("no-reset")
    raise SystemExit(0)
baseline = current_rss_mb()
assert peak_rss_mb() < baseline + 32, (peak_rss_mb(), baseline)
block = np.ones(96 * 2**20 // 8)  # 96 MiB allocated by numpy (C), touched
del block
assert peak_rss_mb() >= baseline + 80, (peak_rss_mb(), baseline)
assert current_rss_mb() < baseline + 32, (current_rss_mb(), baseline)  # freed: only the high-water mark remembers
print("ok")
"""


def test_peak_rss_is_reset_and_sees_memory_outside_python():
    """In a fresh process: in the test process, memory freed by earlier tests may serve the block without new pages."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", PEAK_RSS_PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    if result.stdout.strip() == "no-reset":
        pytest.skip("no /proc/self/clear_refs here: the high-water mark cannot be reset")
    assert result.stdout.strip() == "ok"
