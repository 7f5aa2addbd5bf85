"""The default run, idle and beside one busy process: where its time goes, per pipeline.

Runs the README's ``kedro run --runner thinkalike.runners.DaskRunner`` (the default pipeline;
``--runner``, ``--env`` and ``--pipelines`` are passed through: ``--runner SequentialRunner`` for one
process, ``--env test`` for a smaller trial) twice, each in a fresh copy of the project (``pyproject.toml``, ``.telemetry`` and
``conf/`` without ``conf/local``; no ``data/``, no ``mlflow.db``; the package itself is the
installed one, i.e. this checkout's ``src/``):

1. **idle**: nothing else started by this script;
2. **busy**: beside one process spinning on one core (``python -c "while True: pass"``, in a session of its own),
   started just before the run and killed just after it.

Each run saves its ``run_timings`` table (:mod:`thinkalike.run_record.clock`); the script reads the saved
parquet of both and prints, per pipeline, the seconds attributed to it (its nodes' loads,
functions, saves and the hooks between them), the CPU seconds of its node functions and its
highest peak RSS, with the ratio busy / idle, then the whole run (``run_seconds``) and the
``kedro run`` process's wall time measured here (which adds Kedro's start-up: imports,
configuration, building the pipelines), and a probe of the machine's speed just before and just after each
run (:func:`machine_probe`: the same node code has taken 20 % more CPU on a slow patch of one machine).

Run (from the project root, in its virtual environment):

    python benchmarks/default_run.py                                  # default sizes: about 2 × 10 min
    python benchmarks/default_run.py --env test                       # smoke run: about 2 × 2-3 min
    python benchmarks/default_run.py --env test --pipelines corpus    # seconds
    python benchmarks/default_run.py --env real --pipelines corpus,activations,cka,mlem,embedding,report \
        --conditions idle                                             # the real checkpoints (docs/real-models.md)

The machine should be otherwise idle: the 1-minute load average is printed before each run and
a warning is printed when it is above 0.5 before the idle one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil

PROJECT = Path(__file__).resolve().parents[1]
TIMINGS = Path("data/08_reporting/run_timings.parquet")
CONDITIONS = ("idle", "busy")
BUSY_LOOP = "while True: pass"
DEFAULT_RUNNER = "thinkalike.runners.DaskRunner"


def fresh_copy(destination: Path) -> Path:
    """The project's configuration in ``destination``, with no data and no MLflow store."""
    destination.mkdir(parents=True)
    shutil.copy(PROJECT / "pyproject.toml", destination / "pyproject.toml")
    if (PROJECT / ".telemetry").exists():
        shutil.copy(PROJECT / ".telemetry", destination / ".telemetry")
    shutil.copytree(PROJECT / "conf", destination / "conf", ignore=shutil.ignore_patterns("local"))
    (destination / "conf" / "local").mkdir()
    (destination / "src").mkdir()  # the package is installed (pip install -e .)
    return destination


def kedro_command(env: str | None, pipelines: str | None, runner: str | None = None) -> list[str]:
    script = Path(sys.executable).with_name("kedro")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "kedro"]
    command.append("run")
    if runner:
        command += ["--runner", runner]
    if env:
        command += ["--env", env]
    if pipelines:
        command += ["--pipelines", pipelines]
    return command


PROBE = """
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(1024, 64)
weights = [torch.randn(64, 256, requires_grad=True), torch.randn(256, 64, requires_grad=True)]
def step():
    hidden = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (64,)) @ weights[0])
    (hidden @ weights[1]).square().mean().backward()
for _ in range(20):
    step()
times = []
for _ in range(7):
    start = time.perf_counter()
    for _ in range(100):
        step()
    times.append((time.perf_counter() - start) / 100 * 1000)
print(sorted(times)[len(times) // 2])
"""


def machine_probe() -> float:
    """The machine's speed now: median ms of a fixed one-thread step (a 1,024 × 64 LayerNorm, two products with a
    GELU between them — a zoo model's MLP at its sizes — and the backward pass), in a fresh process. The same node
    code's CPU time has varied by more than 20 % between runs on one machine; runs are comparable as multiples of
    this probe, not as seconds."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def machine_description() -> dict:
    """The machine a result was measured on: system, architecture, cores, the CPU's model name and which of the
    vector extensions torch's CPU kernels pick from it has (``/proc/cpuinfo``; ``None`` where there is none)."""
    import platform

    model, flags = None, None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model is None:
                model = value.strip()
            elif key.strip() == "flags" and flags is None:
                present = set(value.split())
                flags = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if flag in present]
    return {
        "system": platform.system(),
        "architecture": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "cpu_flags": flags,
    }


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished (waited-for) child processes and theirs: read before and
    after a ``kedro run``, the CPU of every process of the run (driver, pool or Dask workers, nannies) — the
    DaskRunner's workers are children of a forkserver that its driver never waits for, so this process adopts and
    reaps the run's orphans (:func:`adopt_orphans`, :func:`reap_orphans`)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def adopt_orphans() -> bool:
    """Makes this process the parent of its descendants' orphans (Linux's ``PR_SET_CHILD_SUBREAPER``): a process the
    ``kedro run`` started and left running when it exited (the DaskRunner's forkserver, the parent of its workers)
    becomes this process's child, so waiting for it counts its CPU and its own children's. False where the system
    has no such call (the orphans' CPU then goes uncounted)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_orphans(keep: set[int], timeout: float = 60.0) -> None:
    """Waits (up to ``timeout`` seconds in all) for every child of this process but those in ``keep``: the orphans
    of a finished ``kedro run`` that :func:`adopt_orphans` made ours, which exit once their parent has gone."""
    deadline = time.monotonic() + timeout
    for child in psutil.Process().children():
        if child.pid in keep:
            continue
        with contextlib.suppress(psutil.Error):
            child.wait(timeout=max(0.0, deadline - time.monotonic()))


class OwnCpuSampler:
    """The CPU seconds (user + system) of one process itself, not its children, read every ``interval`` seconds
    in a thread until the process ends: the last reading before it exits (at most ``interval`` seconds stale). For
    a ``kedro run``, the driver's own CPU — with the DaskRunner the scheduler, the nannies and the MLflow logging;
    with the ParallelRunner the scheduling — apart from its workers'."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.seconds = 0.0
        self._process, self._interval, self._stop = psutil.Process(pid), interval, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                times = self._process.cpu_times()
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                return
            self.seconds = times.user + times.system
            self._stop.wait(self._interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.seconds


def run_once(
    project: Path,
    command: list[str],
    busy: bool,
    timeout: float | None = None,
    extra_environment: dict[str, str] | None = None,
) -> dict:
    """One ``kedro run`` in ``project`` (beside a busy process when ``busy``, with ``extra_environment`` on top of this
    process's); its wall time and outcome. After ``timeout`` seconds the run and every process it started are killed
    (``returncode`` None)."""
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
        **(extra_environment or {}),
    }
    probe_before = machine_probe()
    adopt_orphans()
    spinner = (
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True)  # its own session, as
        if busy
        else None
    )  # another user's job: Linux's per-session fairness weighs it against the run
    load_before = os.getloadavg()[0]
    try:
        with open(project / "run.log", "w") as log:
            start, cpu_before = time.perf_counter(), children_cpu_seconds()
            process = subprocess.Popen(
                command, cwd=project, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            driver = OwnCpuSampler(process.pid)
            try:
                returncode = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                returncode = None
            wall = time.perf_counter() - start
            reap_orphans(keep={spinner.pid} if spinner is not None else set())
            cpu = children_cpu_seconds() - cpu_before
            driver_cpu = driver.stop()
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    load_after = os.getloadavg()[0]
    return {
        "returncode": returncode,
        "process_seconds": wall,
        "cpu_seconds": cpu,
        "driver_cpu_seconds": driver_cpu,
        "load_before": load_before,
        "load_after": load_after,
        "probe_ms_before": probe_before,
        "probe_ms_after": machine_probe(),
        "log": str(project / "run.log"),
    }


def saved_timings(project: Path) -> pd.DataFrame | None:
    """The run_timings table the (single) run in ``project`` saved, or None."""
    versions = sorted((project / TIMINGS).glob("*/run_timings.parquet"))
    return pd.read_parquet(versions[-1]) if versions else None


def ordered_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per-pipeline totals (:func:`thinkalike.run_record.clock.pipeline_totals`) in the registry's order, (run) first."""
    from thinkalike.pipelines.specs import pipeline_specs
    from thinkalike.run_record.clock import RUN_PIPELINE, TOTAL, pipeline_totals

    totals = pipeline_totals(table).set_index("pipeline")
    order = [RUN_PIPELINE, *pipeline_specs()]
    order = (
        [name for name in order if name in totals.index]
        + [name for name in totals.index if name not in order and name != TOTAL]
        + [TOTAL]
    )
    return totals.loc[order]


def ratio(busy: float, idle: float) -> str:
    return f"{busy / idle:.2f}×" if idle > 0 else "–"


def comparison(tables: dict[str, pd.DataFrame], runs: dict[str, dict]) -> str:
    """The markdown table: per pipeline, idle and busy seconds, their ratio, CPU seconds and peak RSS."""
    from thinkalike.run_record.clock import RUN_PIPELINE, TOTAL, format_seconds

    totals = {condition: ordered_totals(table) for condition, table in tables.items()}
    idle = totals["idle"]
    busy = totals.get("busy", idle.iloc[0:0])  # --conditions idle: no busy run
    names = list(idle.index) + [name for name in busy.index if name not in idle.index]
    lines = [
        "| pipeline | nodes | idle | busy | busy / idle | CPU s idle | CPU s busy | peak RSS idle (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        row_idle = idle.loc[name] if name in idle.index else None
        row_busy = busy.loc[name] if name in busy.index else None
        label = {RUN_PIPELINE: "(start: validation, MLflow run, catalog)", TOTAL: "**run** (run_seconds)"}.get(
            name, name
        )
        seconds_idle = row_idle["seconds"] if row_idle is not None else float("nan")
        seconds_busy = row_busy["seconds"] if row_busy is not None else float("nan")
        nodes = int((row_idle if row_idle is not None else row_busy)["nodes"])
        peak = row_idle["peak_rss_mb"] if row_idle is not None else float("nan")
        lines.append(
            f"| {label} | {nodes} | {format_seconds(seconds_idle)} | {format_seconds(seconds_busy)} | "
            f"{ratio(seconds_busy, seconds_idle)} | "
            f"{row_idle['cpu_seconds'] if row_idle is not None else float('nan'):.1f} | "
            f"{row_busy['cpu_seconds'] if row_busy is not None else float('nan'):.1f} | "
            f"{'–' if pd.isna(peak) else f'{peak:.0f}'} |"
        )
    process_idle = runs["idle"]["process_seconds"]
    process_busy = runs["busy"]["process_seconds"] if "busy" in runs else float("nan")
    lines.append(
        f"| `kedro run` process (measured here) | | {format_seconds(process_idle)} | "
        f"{format_seconds(process_busy)} | {ratio(process_busy, process_idle)} | | | |"
    )
    probes = {condition: (run["probe_ms_before"], run["probe_ms_after"]) for condition, run in runs.items()}
    lines.append("")
    readings = "; ".join(f"{condition} {before:.2f} → {after:.2f}" for condition, (before, after) in probes.items())
    lines.append(
        f"machine probe (`machine_probe`, ms a step, just before → just after each run, no spinner running): {readings}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", help="Kedro environment, passed to kedro run (e.g. test for a smoke run)")
    parser.add_argument("--pipelines", help="passed to kedro run --pipelines (e.g. corpus,zoo)")
    parser.add_argument(
        "--runner",
        default=DEFAULT_RUNNER,
        help=f"passed to kedro run --runner (default {DEFAULT_RUNNER}, the README's command; "
        "SequentialRunner for one process)",
    )
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help="which runs, in order (default idle,busy; idle alone for a long environment such as --env real)",
    )
    parser.add_argument("--workdir", type=Path, help="where the two project copies go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the project copies (data, mlflow.db, run.log)")
    parser.add_argument("--json", type=Path, help="also write the results (runs and per-pipeline totals) here")
    args = parser.parse_args()
    conditions = [c for c in args.conditions.split(",") if c]
    if "idle" not in conditions or not set(conditions) <= set(CONDITIONS):
        parser.error(f"--conditions: a comma-separated list of {', '.join(CONDITIONS)}, idle included")

    from thinkalike.provenance import git_state

    command = kedro_command(args.env, args.pipelines, args.runner)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="thinkalike-default-run-"))
    print(
        f"{os.cpu_count()} CPU cores; command: kedro {' '.join(command[command.index('run') :])}; copies in {workdir}"
    )
    runs: dict[str, dict] = {}
    tables: dict[str, pd.DataFrame] = {}
    try:
        for condition in conditions:
            project = fresh_copy(workdir / condition)
            load = os.getloadavg()[0]
            if condition == "idle" and load > 0.5:
                print(f"warning: 1-minute load average {load:.2f} before the idle run: the machine is not idle")
            print(f"{condition}: running (load average {load:.2f}) …", flush=True)
            runs[condition] = run_once(project, command, busy=condition == "busy")
            table = saved_timings(project)
            outcome = "ok" if runs[condition]["returncode"] == 0 else f"FAILED (exit {runs[condition]['returncode']})"
            print(
                f"{condition}: {outcome}, {runs[condition]['process_seconds']:.1f} s "
                f"(load average {runs[condition]['load_before']:.2f} → {runs[condition]['load_after']:.2f}); "
                f"log {runs[condition]['log']}",
                flush=True,
            )
            if table is None:
                print(f"{condition}: no run_timings table was saved")
                return 1
            tables[condition] = table
        print()
        print(comparison(tables, runs))
        failed = {
            condition: sorted(table.loc[table["status"] == "failed", "node"]) for condition, table in tables.items()
        }
        if any(failed.values()):
            print(f"\nfailed nodes: {failed}")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "command": command,
                        "cpu_count": os.cpu_count(),
                        "provenance": {
                            **git_state(PROJECT),
                            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "machine": machine_description(),
                        },
                        "runs": runs,
                        "totals": {
                            condition: ordered_totals(table).reset_index().to_dict("records")
                            for condition, table in tables.items()
                        },
                    },
                    indent=2,
                    default=str,
                )
            )
        return 0 if all(run["returncode"] == 0 for run in runs.values()) else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        elif runs:
            print(f"\nproject copies kept in {workdir}")


if __name__ == "__main__":
    sys.exit(main())
