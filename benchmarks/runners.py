"""The default run with Kedro's SequentialRunner, Kedro's ParallelRunner and the DaskRunner, side by side.

Each runner runs ``kedro run --runner <runner>`` once, one after the other, in a fresh copy of the project
(:func:`default_run.fresh_copy`), on an otherwise idle machine. Printed per runner: the ``kedro run`` process's
wall time measured here, the CPU time of every process of the run (:func:`default_run.children_cpu_seconds`) and of
the driver process alone (:class:`default_run.OwnCpuSampler`), the run's own ``run_seconds`` and the nodes' summed
time from its ``run_timings`` table (the sum exceeds the run's time when nodes ran at once), and the wall time's
ratio to the SequentialRunner's.
Kedro's documentation says its ParallelRunner runs no node or dataset hooks in its worker processes, but Kedro 1.7's
does: each worker registers the project's hooks for every node (``kedro.runner.task.Task``), so its workers log
every node output to MLflow themselves (several processes writing one store) — only the ``run_timings`` table is
missing, its rows kept by hook copies in the workers that never reach the driver; the table says "no table" rather
than guess. With ``--node-probe`` each run also loads a probe plugin (:mod:`node_probe`) that records every node's
wall and CPU time in whichever process runs it, and a second table gives the nodes' CPU per pipeline and runner
(the DaskRunner's from its ``run_timings``, the same clocks). The ParallelRunner's workers are forked from the
``kedro run`` process after the run's hooks set the thread policy, so they compute with the run's threads and start
with every module already imported; the DaskRunner's are forks of a server that imported the project once
(:mod:`thinkalike.runners.processes`).

    python benchmarks/runners.py                          # default sizes: about 20 + 10 + 10 min
    python benchmarks/runners.py --env test               # smoke run: about 3 × 1 min
    python benchmarks/runners.py --runners SequentialRunner,thinkalike.runners.DaskRunner
    python benchmarks/runners.py --runners thinkalike.runners.DaskRunner,ParallelRunner --node-probe
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
from node_probe import probe_environment, probe_records  # noqa: E402

RUNNERS = ("SequentialRunner", "ParallelRunner", "thinkalike.runners.DaskRunner")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", default=",".join(RUNNERS), help="comma-separated, run in this order")
    parser.add_argument("--env", help="Kedro environment (e.g. test for a smoke run)")
    parser.add_argument("--pipelines", help="passed to kedro run --pipelines")
    parser.add_argument("--workdir", type=Path, help="where the project copies go (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, help="stop a run after this many seconds (reported as stopped)")
    parser.add_argument(
        "--node-probe",
        action="store_true",
        help="record every node's CPU in the process that runs it (node_probe.py) and compare",
    )
    args = parser.parse_args()
    from thinkalike.run_record.clock import START_ROW, format_seconds

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="thinkalike-runners-"))
    rows, probed = [], {}
    try:
        for runner in args.runners.split(","):
            project = fresh_copy(workdir / runner.rsplit(".", 1)[-1])
            load = os.getloadavg()[0]
            if load > 0.5:
                print(f"warning: 1-minute load average {load:.2f} before {runner}: the machine is not idle")
            print(f"{runner}: running …", flush=True)
            probe = probe_environment(project / "node-probe") if args.node_probe else None
            run = run_once(
                project,
                kedro_command(args.env, args.pipelines, runner),
                busy=False,
                timeout=args.timeout,
                extra_environment=probe,
            )
            table = saved_timings(project)
            nodes = None if table is None else table[table["node"] != START_ROW]
            rows.append((runner, run, table, nodes))
            if probe is not None:
                probed[runner] = probe_records(project / "node-probe")
            print(f"{runner}: exit {run['returncode']}, {run['process_seconds']:.1f} s; log {run['log']}", flush=True)
        base = next((run["process_seconds"] for runner, run, _, _ in rows if runner == "SequentialRunner"), None)
        print(
            "\n| runner | `kedro run` process | processes' CPU | the driver's own CPU | run_seconds | "
            "nodes' summed time | workers | vs Sequential | machine probe (ms) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for runner, run, table, nodes in rows:
            ratio = f"{run['process_seconds'] / base:.2f}×" if base else "–"
            probe = f"{run['probe_ms_before']:.2f} → {run['probe_ms_after']:.2f}"
            cpu = f"{format_seconds(run['cpu_seconds'])} | {format_seconds(run['driver_cpu_seconds'])}"
            if run["returncode"] is None:
                print(
                    f"| {runner} | stopped after {format_seconds(run['process_seconds'])} | {cpu} | – | – | – | "
                    f"> {ratio} | {probe} |"
                )
                continue
            if table is None:
                print(
                    f"| {runner} | {format_seconds(run['process_seconds'])} | {cpu} | no table | no table | – | "
                    f"{ratio} | {probe} |"
                )
                continue
            workers = nodes["worker"].replace("", "(driver)").nunique() if "worker" in nodes else 1
            print(
                f"| {runner} | {format_seconds(run['process_seconds'])} | {cpu} | "
                f"{format_seconds(float(table['run_seconds'].iloc[0]))} | "
                f"{format_seconds(float(nodes['span_seconds'].sum()))} | {workers} | {ratio} | {probe} |"
            )
        if args.node_probe:
            print_node_cpu(rows, probed)
        return 0 if all(run["returncode"] == 0 for _, run, _, _ in rows) else 1
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def print_node_cpu(rows: list, probed: dict) -> None:
    """The nodes' CPU seconds per pipeline, one column per runner: what the probe saw in the runner's processes, or
    the run's ``run_timings`` where the probe saw no node (the DaskRunner's workers)."""
    import pandas as pd

    columns = {}
    for runner, _, _, nodes in rows:
        table = probed.get(runner)
        if table is None:
            table = nodes
        if table is not None:
            columns[runner.rsplit(".", 1)[-1]] = table.groupby("pipeline")["cpu_seconds"].sum()
    if not columns:
        return
    frame = pd.DataFrame(columns).fillna(0.0)
    frame.loc["(all nodes)"] = frame.sum()
    print("\n| pipeline | " + " | ".join(f"nodes' CPU, {name}" for name in frame.columns) + " |")
    print("|---|" + "---:|" * len(frame.columns))
    for pipeline, values in frame.iterrows():
        print(f"| {pipeline} | " + " | ".join(f"{value:,.1f} s" for value in values) + " |")


if __name__ == "__main__":
    sys.exit(main())
