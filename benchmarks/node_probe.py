"""Every node's wall and CPU time in whichever process runs it, for any runner: Kedro's ParallelRunner's workers too.

Kedro 1.7's ParallelRunner registers the project's hooks and the installed plugins' hooks in its worker processes
for every node (``kedro.runner.task.Task._run_node_synchronization``), but the project's ``RunTimingHooks`` there
are copies forked from the driver whose rows never reach it, so that runner saves no ``run_timings`` table. This
probe is a Kedro plugin for one run: a hook module and a distribution's metadata naming it under the ``kedro.hooks``
entry point, written to a temporary folder that goes on the run's ``PYTHONPATH`` (nothing is installed). Each process
appends one JSON line per node to its own file; the driver writes which registered pipeline holds each node.
The DaskRunner's workers run only the hooks its driver sends them, so for that runner the ``run_timings`` table is
the record (the same clocks: wall time and ``time.process_time`` around the node function).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

MODULE = "thinkalike_node_probe"
RECORDS = "THINKALIKE_NODE_PROBE_RECORDS"

HOOK_SOURCE = f'''"""Written by benchmarks/node_probe.py: a line per node to ${RECORDS}/<pid>.jsonl."""
import json, os, time

from kedro.framework.hooks import hook_impl


class NodeProbe:
    def __init__(self):
        self.started = {{}}

    @hook_impl
    def before_pipeline_run(self, pipeline):
        from thinkalike.run_record.timing_hooks import pipeline_membership, registered_pipelines

        with open(os.path.join(os.environ["{RECORDS}"], "pipelines.json"), "w") as file:
            json.dump(pipeline_membership(registered_pipelines()), file)

    @hook_impl
    def before_node_run(self, node):
        self.started[node.name] = (time.time(), time.perf_counter(), time.process_time())

    @hook_impl
    def after_node_run(self, node):
        started_at, wall, cpu = self.started.pop(node.name)
        row = {{"node": node.name, "pid": os.getpid(), "started_at": started_at,
               "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}}
        with open(os.path.join(os.environ["{RECORDS}"], f"{{os.getpid()}}.jsonl"), "a") as file:
            file.write(json.dumps(row) + "\\n")


hooks = NodeProbe()
'''


def probe_environment(folder: Path) -> dict[str, str]:
    """Writes the probe plugin to ``folder`` (its records go to ``folder/records``); the variables a ``kedro run``
    needs to load it."""
    records = folder / "records"
    records.mkdir(parents=True, exist_ok=True)
    (folder / f"{MODULE}.py").write_text(HOOK_SOURCE)
    metadata = folder / f"{MODULE}-0.dist-info"
    metadata.mkdir(exist_ok=True)
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {MODULE}\nVersion: 0\n")
    (metadata / "entry_points.txt").write_text(f"[kedro.hooks]\nnode_probe = {MODULE}:hooks\n")
    path = os.pathsep.join(item for item in (str(folder), os.environ.get("PYTHONPATH", "")) if item)
    return {"PYTHONPATH": path, RECORDS: str(records)}


def probe_records(folder: Path) -> pd.DataFrame | None:
    """The nodes the probe saw (node, pid, started_at, seconds, cpu_seconds, pipeline); None when it saw none."""
    records = folder / "records"
    rows = [json.loads(line) for file in sorted(records.glob("*.jsonl")) for line in file.read_text().splitlines()]
    if not rows:
        return None
    table = pd.DataFrame(rows)
    membership_file = records / "pipelines.json"
    membership = json.loads(membership_file.read_text()) if membership_file.exists() else {}
    table["pipeline"] = table["node"].map(membership).fillna("?")
    return table
