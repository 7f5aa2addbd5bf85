"""The CPU that processes outside this run use, and how many tasks a local cluster runs at once because of it.

Why: on a machine of ``c`` cores, a local cluster of ``c`` single-threaded workers beside one other CPU-bound
process (a second job, a browser tab, another user's script) does not get ``c − 1`` cores but fewer: Linux keeps
three CPU-bound processes on two cores as one core for the outsider and one shared by the two workers (measured on
the default run: outsider 99 %, workers 48.5 % each; the run took 2.2× its idle time). A spare worker process that
is given a task only while such a process runs makes it four processes on two cores, 50 % each: the run gets 1.5
cores instead of 1 (measured with three workers: 15 min 48 s instead of 21 min 16 s beside one busy process). On an
idle machine the spare stays idle, because three single-threaded workers on two idle cores are slower than two
(two of them share a core, the critical path's tasks included: 12 min 28 s against 9 min 47 s).

That is per-process fairness, and Linux's default on desktops is not per process but per session: with *autogroup*
(``/proc/sys/kernel/sched_autogroup_enabled``, on in most distributions) every session gets an equal share of the
CPU, whatever its number of processes. A run whose workers share the ``kedro run``'s session gets one session's
share — beside one busy process in another session, one core of two, two workers or three (measured with ``top``:
spinner 98 %, three workers 33 % each). :func:`start_own_session` makes each worker the leader of its own session,
so the run's processes count as the processes they are: three workers and one spinner, 50 % each (measured). Dask
already ends a worker at once when the ``kedro run`` process goes away (a pipe it watches), so a worker in its own
session is not left behind.

Both are opt-in (``dask.spare_workers``, default 0; ``dask.own_sessions``, default false;
:mod:`thinkalike.runners.settings`): each wins the run CPU time by taking it from the other processes (the outsider
above: 99 % of a core to 50 %, 98 % to 50 %), more than the run's fair share of a shared machine.

The reading (:class:`OutsideLoad`), over the window ``Δt`` since the previous reading::

    outside cores = (Δ busy CPU time of the machine − Δ CPU time of this process and its descendants) / Δt

with the machine's busy time ``user + nice + system + irq + softirq`` over every CPU (``psutil.cpu_times``; steal
and idle left out; ``user`` includes guests on Linux) and a process's time ``user + system`` (``psutil``; a
process that started inside the window counts from zero, one that ended inside it is not counted, so the estimate
errs towards "outside" only in the window where a worker exits). In a container, ``/proc/stat`` is the host's: the
other containers on the host count as outside.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import psutil

__all__ = [
    "BUSY_CORES",
    "CpuReading",
    "OutsideLoad",
    "machine_busy_seconds",
    "process_tree_seconds",
    "start_own_session",
    "task_slots",
]

#: Outside CPU use, in cores, from which the spare workers get tasks (a process spinning on one core reads 0.5 to
#: 1.0 depending on how many of our workers share its core; an idle desktop reads about 0.05).
BUSY_CORES = 0.3


@dataclass(frozen=True)
class CpuReading:
    """One reading: wall-clock seconds, the machine's busy CPU seconds, and each of our processes' CPU seconds."""

    wall: float
    machine_busy: float
    own: Mapping[int, float]


def machine_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine since boot: ``user + nice + system + irq + softirq`` over every CPU."""
    times = psutil.cpu_times()
    return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))


def process_tree_seconds(root: int | None = None) -> dict[int, float]:
    """CPU seconds (``user + system``) of the process ``root`` (default: this one) and of every descendant alive,
    by pid. A process that ends while it is read is left out."""
    parent = psutil.Process(root if root is not None else os.getpid())
    seconds: dict[int, float] = {}
    for process in [parent, *parent.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        seconds[process.pid] = times.user + times.system
    return seconds


def _read() -> CpuReading:
    return CpuReading(time.monotonic(), machine_busy_seconds(), process_tree_seconds())


@dataclass
class OutsideLoad:
    """Cores' worth of CPU used by processes outside this process tree, over the time since the last reading.

    :meth:`cores` takes a new reading when at least ``min_window`` seconds have passed since the previous one, and
    otherwise returns the previous estimate (0.0 before the first full window) without reading: a reading walks our
    process tree through ``/proc`` (~19 ms, and the DaskRunner asks after every finished task). ``read`` and
    ``clock`` (the readings' wall clock) are injectable for tests.
    The window is 5 s by default: a brief burst averages out, where a one-second window once read 0.7 cores at a
    run's start (nothing else running, 1 of 13 idle runs) and started the spare worker for the whole run; a
    process spinning outside reads about 1.0 core over any window.
    """

    min_window: float = 5.0
    read: Callable[[], CpuReading] = _read
    clock: Callable[[], float] = time.monotonic
    _last: CpuReading = field(init=False)  # read in __post_init__
    _estimate: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._last = self.read()

    def cores(self) -> float:
        last = self._last
        if self.clock() - last.wall < self.min_window:
            return self._estimate
        now = self.read()
        elapsed = now.wall - last.wall
        if elapsed < self.min_window:
            return self._estimate
        machine = now.machine_busy - last.machine_busy
        own = sum(seconds - last.own.get(pid, 0.0) for pid, seconds in now.own.items())
        self._estimate = max(0.0, (machine - own) / elapsed)
        self._last = now
        return self._estimate


def task_slots(base: int, spare: int, outside_cores: float, busy_cores: float = BUSY_CORES) -> int:
    """Tasks to run at once: ``base`` (one per core's worker), plus the ``spare`` workers' while processes outside
    the run use at least ``busy_cores`` cores."""
    if base < 1 or spare < 0:
        raise ValueError(f"task_slots: base must be >= 1 and spare >= 0, got base={base}, spare={spare}")
    return base + (spare if outside_cores >= busy_cores else 0)


def start_own_session() -> bool:
    """Makes this process the leader of a new session (``os.setsid``) unless it leads one already (module
    docstring); returns whether it leads one now (False where sessions do not exist, or for a process-group leader,
    which cannot start one)."""
    if not hasattr(os, "setsid"):
        return False
    if os.getsid(0) == os.getpid():
        return True
    try:
        os.setsid()
    except OSError:
        return False
    return True
