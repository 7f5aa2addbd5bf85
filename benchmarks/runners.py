"""The default run with Kedro's SequentialRunner, Kedro's ParallelRunner and the DaskRunner, side by side.

Each runner runs ``kedro run --runner <runner>`` once, one after the other, in a fresh copy of the project
(:func:`default_run.fresh_copy`), on an otherwise idle machine. Printed per runner: the ``kedro run`` process's
wall time measured here, the CPU time of every process of the run (:func:`default_run.children_cpu_seconds`) and of
the driver process alone (:class:`default_run.OwnCpuSampler`), the run's own ``run_seconds`` and the nodes' summed
time from its ``run_timings`` table (the sum exceeds the run's time when nodes ran at once), and the wall time's
ratio to the SequentialRunner's.
Kedro's ParallelRunner runs no node or dataset hooks in its worker processes (Kedro's documentation says so):
it saves no ``run_timings`` table and logs no node output to MLflow — the table says "no table" rather than guess.
Its workers are forked from the ``kedro run`` process after the run's hooks set the thread policy, so they compute
with the run's threads and start with every module already imported.

    python benchmarks/runners.py                          # default sizes: about 20 + 10 + 10 min
    python benchmarks/runners.py --env test               # smoke run: about 3 × 1 min
    python benchmarks/runners.py --runners SequentialRunner,thinkalike.runners.DaskRunner
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from default_run import fresh_copy, kedro_command, run_once, saved_timings  # noqa: E402

RUNNERS = ("SequentialRunner", "ParallelRunner", "thinkalike.runners.DaskRunner")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", default=",".join(RUNNERS), help="comma-separated, run in this order")
    parser.add_argument("--env", help="Kedro environment (e.g. test for a smoke run)")
    parser.add_argument("--pipelines", help="passed to kedro run --pipelines")
    parser.add_argument("--workdir", type=Path, help="where the project copies go (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, help="stop a run after this many seconds (reported as stopped)")
    args = parser.parse_args()
    from thinkalike.timings import START_ROW, format_seconds

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="thinkalike-runners-"))
    rows = []
    try:
        for runner in args.runners.split(","):
            project = fresh_copy(workdir / runner.rsplit(".", 1)[-1])
            load = os.getloadavg()[0]
            if load > 0.5:
                print(f"warning: 1-minute load average {load:.2f} before {runner}: the machine is not idle")
            print(f"{runner}: running …", flush=True)
            run = run_once(project, kedro_command(args.env, args.pipelines, runner), busy=False, timeout=args.timeout)
            table = saved_timings(project)
            nodes = None if table is None else table[table["node"] != START_ROW]
            rows.append((runner, run, table, nodes))
            print(f"{runner}: exit {run['returncode']}, {run['process_seconds']:.1f} s; log {run['log']}", flush=True)
        base = next((run["process_seconds"] for runner, run, _, _ in rows if runner == "SequentialRunner"), None)
        print("\n| runner | `kedro run` process | processes' CPU | the driver's own CPU | run_seconds | "
              "nodes' summed time | workers | vs Sequential | machine probe (ms) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for runner, run, table, nodes in rows:
            ratio = f"{run['process_seconds'] / base:.2f}×" if base else "–"
            probe = f"{run['probe_ms_before']:.2f} → {run['probe_ms_after']:.2f}"
            cpu = f"{format_seconds(run['cpu_seconds'])} | {format_seconds(run['driver_cpu_seconds'])}"
            if run["returncode"] is None:
                print(f"| {runner} | stopped after {format_seconds(run['process_seconds'])} | {cpu} | – | – | – | "
                      f"> {ratio} | {probe} |")
                continue
            if table is None:
                print(f"| {runner} | {format_seconds(run['process_seconds'])} | {cpu} | no table | no table | – | "
                      f"{ratio} | {probe} |")
                continue
            workers = nodes["worker"].replace("", "(driver)").nunique() if "worker" in nodes else 1
            print(f"| {runner} | {format_seconds(run['process_seconds'])} | {cpu} | "
                  f"{format_seconds(float(table['run_seconds'].iloc[0]))} | "
                  f"{format_seconds(float(nodes['span_seconds'].sum()))} | {workers} | {ratio} | {probe} |")
        return 0 if all(run["returncode"] == 0 for _, run, _, _ in rows) else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
