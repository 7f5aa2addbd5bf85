"""The CPU that processes outside the run use (thinkalike.runners.load): the formula on planted readings, and a real
process outside this one's tree, spinning, read as at least most of the core it used."""

import subprocess
import sys
import time

import psutil
import pytest

from thinkalike.runners.load import (
    BUSY_CORES,
    CpuReading,
    OutsideLoad,
    process_tree_seconds,
    task_slots,
)


def planted(readings):
    values = iter(readings)
    return lambda: next(values)


def test_outside_cores_is_the_machines_busy_time_less_our_processes_per_second():
    readings = [
        CpuReading(0.0, 100.0, {1: 10.0, 2: 5.0}),
        # 2 s later: the machine used 3.6 CPU s, our pid 1 used 1.0 s, pid 2 0.6 s, a new pid 3 0.4 s in all
        CpuReading(2.0, 103.6, {1: 11.0, 2: 5.6, 3: 0.4}),
        CpuReading(2.5, 104.6, {1: 11.5, 2: 5.6, 3: 0.4}),  # under min_window: the previous estimate
        # from t = 2 (the last full window): the machine 1.4 s, ours 2.0 s: never below 0
        CpuReading(4.0, 105.0, {1: 12.0, 2: 6.6, 3: 0.4}),
    ]
    load = OutsideLoad(min_window=1.0, read=planted(readings))
    assert load.cores() == pytest.approx((3.6 - 1.0 - 0.6 - 0.4) / 2.0)  # 0.8 cores
    assert load.cores() == pytest.approx(0.8)
    assert load.cores() == 0.0


def test_asking_within_a_window_reads_nothing_new():
    """Within ``min_window`` of the last reading the estimate is returned without reading (a reading walks the process
    tree); once the window has passed, one reading."""
    reads, now = [], [0.0]

    def read():
        reads.append(now[0])
        return CpuReading(now[0], 100.0 + 0.5 * now[0], {1: 10.0})

    load = OutsideLoad(read=read, clock=lambda: now[0])
    for step in range(1, 50):
        now[0] = 0.1 * step  # 4.9 s in all
        assert load.cores() == 0.0
    now[0] = 5.0
    assert load.cores() == pytest.approx(0.5)
    assert reads == [0.0, 5.0]


def test_a_one_second_burst_outside_does_not_reach_the_threshold_over_the_default_window():
    """A second of 0.7 cores outside at the start, then nothing: over a one-second window it reads 0.7 cores (the
    spare would start); over the default window it is averaged with what follows and stays under the threshold."""
    burst_then_quiet = [
        CpuReading(0.0, 100.0, {1: 10.0}),
        CpuReading(1.0, 101.7, {1: 11.0}),
        CpuReading(5.5, 106.2, {1: 15.5}),
    ]
    assert OutsideLoad(min_window=1.0, read=planted(burst_then_quiet)).cores() == pytest.approx(0.7)
    load = OutsideLoad(read=planted(burst_then_quiet))
    assert load.cores() == 0.0  # under the window: no estimate yet
    averaged = load.cores()
    assert averaged == pytest.approx(0.7 / 5.5)
    assert task_slots(2, 1, averaged) == 2


def test_the_spare_workers_get_tasks_only_while_the_outside_load_reaches_the_threshold():
    assert task_slots(2, 1, 0.0) == 2
    assert task_slots(2, 1, BUSY_CORES - 0.01) == 2
    assert task_slots(2, 1, BUSY_CORES) == 3
    assert task_slots(2, 0, 1.0) == 2
    with pytest.raises(ValueError, match="base must be >= 1"):
        task_slots(0, 1, 0.0)


def test_a_process_spinning_outside_our_tree_reads_as_outside_load():
    """The spinner is started by a shell that exits at once, so it is not our descendant (a real outside process).
    Whatever else the machine runs only adds to the reading, so the spinner's own CPU time is a lower bound."""
    started = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    spinner = psutil.Process(int(started.stdout.strip()))
    try:
        assert spinner.pid not in process_tree_seconds()
        load = OutsideLoad(min_window=0.5)
        before = sum(spinner.cpu_times()[:2])
        start = time.monotonic()
        time.sleep(1.5)
        cores = load.cores()
        spun = (sum(spinner.cpu_times()[:2]) - before) / (time.monotonic() - start)
    finally:
        spinner.kill()
    assert spun > 0.2, spun  # it did run
    assert cores >= 0.8 * spun, (cores, spun)


def test_our_own_child_process_is_not_outside_load():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        first = process_tree_seconds()
        time.sleep(1.0)
        second = process_tree_seconds()
    finally:
        child.kill()
        child.wait()
    assert child.pid in first and child.pid in second
    assert second[child.pid] - first[child.pid] > 0.2  # its CPU time is counted as ours


def test_a_child_process_can_lead_its_own_session_and_a_leader_stays_one():
    code = (
        "import os; from thinkalike.runners.load import start_own_session; "
        "before = os.getsid(0) == os.getpid(); led = start_own_session(); again = start_own_session(); "
        "print(before, led, again, os.getsid(0) == os.getpid())"
    )
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert child.stdout.splitlines()[-1].split() == ["False", "True", "True", "True"]
