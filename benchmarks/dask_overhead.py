"""What Dask's own periodic work costs a node: one training loop in a Dask worker against the same loop in a forked
process.

The loop is the kind of work the default run is made of: a 2-layer transformer encoder (d = 128, 4 heads, a
500-token head), batch 16 × 64 tokens, forward, cross-entropy, backward and an AdamW step, at one torch thread,
then 30 small numpy eigendecompositions. Contenders, each a fresh process per round:

* **fork**: a ``multiprocessing`` process forked from this one (what Kedro's ParallelRunner's workers are);
* **dask_defaults**: the only worker of a ``LocalCluster`` (one thread, a nanny, as the DaskRunner starts it)
  with Dask's configuration as installed, less ``MALLOC_TRIM_THRESHOLD_`` (which the runner has removed since an
  earlier change, measured separately);
* **dask_runner**: the same worker under the DaskRunner's cluster configuration
  (:data:`thinkalike.runners.dask_runner.QUIET_CLUSTER_CONFIG`: no statistical profiler, a 1-s event-loop tick,
  slower memory and system monitors).

Printed per contender and round: the loop's wall time, the CPU time of its own thread and of its whole process
over the loop (:func:`time.process_time`: every thread — the worker's event loop, its profiler), and for the Dask
contenders the CPU the driver process spent meanwhile (scheduler and nanny). Then each contender's medians: wall,
process CPU, the CPU of the process's threads other than the loop's (process less thread: what Dask's periodic
work costs in the worker, the number least disturbed by the machine's drifting speed), the driver's, and the process CPU as
a ratio to fork's. Rounds are interleaved so a drift of the machine's speed hits every contender alike.

    python benchmarks/dask_overhead.py                    # 300 steps, 3 rounds: about 5 minutes
    python benchmarks/dask_overhead.py --steps 20 --rounds 1   # smoke run
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import statistics
import time


def training_loop(steps: int) -> dict[str, float]:
    """``steps`` training steps and 30 eigendecompositions; wall, own-thread and whole-process CPU seconds."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True), 2)
    head = torch.nn.Linear(128, 500)
    optimizer = torch.optim.AdamW([*encoder.parameters(), *head.parameters()], 1e-3)
    inputs, targets = torch.randn(16, 64, 128), torch.randint(0, 500, (16, 64))
    matrix = np.random.default_rng(0).standard_normal((400, 300))
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(head(encoder(inputs)).reshape(-1, 500), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for _ in range(30):
        np.linalg.eigh((matrix @ matrix.T)[:200, :200])
    return {
        "wall": time.perf_counter() - wall,
        "thread": time.thread_time() - thread,
        "process": time.process_time() - process,
    }


def in_forked_process(steps: int) -> dict[str, float]:
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return {**pool.apply(training_loop, (steps,)), "driver": 0.0}


def in_dask_worker(steps: int, runner_config: bool) -> dict[str, float]:
    import dask
    from distributed import Client, LocalCluster

    from thinkalike.runners.dask_runner import QUIET_CLUSTER_CONFIG, _cluster_config

    undo = {} if runner_config else {key: dask.config.get(key) for key in QUIET_CLUSTER_CONFIG}
    with (
        _cluster_config(),
        dask.config.set(undo),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.WARNING
        ) as cluster,
        Client(cluster) as client,
    ):
        client.submit(int, pure=False).result()  # the worker is up
        driver = time.process_time()
        result = client.submit(training_loop, steps, pure=False).result()
        return {**result, "driver": time.process_time() - driver}


CONTENDERS = {
    "fork": in_forked_process,
    "dask_defaults": lambda steps: in_dask_worker(steps, runner_config=False),
    "dask_runner": lambda steps: in_dask_worker(steps, runner_config=True),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
    logging.getLogger("distributed").setLevel(logging.ERROR)
    for round_number in range(1, args.rounds + 1):
        for name, contender in CONTENDERS.items():
            result = contender(args.steps)
            results[name].append(result)
            print(
                f"round {round_number} {name:14s} wall {result['wall']:6.2f} s, "
                f"thread CPU {result['thread']:6.2f} s, "
                f"process CPU {result['process']:6.2f} s, driver CPU {result['driver']:5.2f} s",
                flush=True,
            )
    fork = statistics.median(result["process"] for result in results["fork"])
    print(
        "\n| contender | median wall | median process CPU | its other threads' (process − thread) | "
        "median driver CPU | process CPU vs fork |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        cpu = statistics.median(row["process"] for row in rows)
        others = statistics.median(row["process"] - row["thread"] for row in rows)
        print(
            f"| {name} | {statistics.median(row['wall'] for row in rows):.2f} s | {cpu:.2f} s | {others:.2f} s | "
            f"{statistics.median(row['driver'] for row in rows):.2f} s | {cpu / fork:.3f}× |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
