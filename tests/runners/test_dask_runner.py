"""DaskRunner on a toy pipeline (2 worker processes, seconds): failures stop the run with their own error and a
resume finishes it; what a cluster cannot run is refused before any task."""

import os
import time
from pathlib import Path

import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline, node
from kedro_datasets.pickle import PickleDataset

from thinkalike.runners import DaskRunner
from thinkalike.runners.dask_runner import ClusterError
from thinkalike.runners.settings import ClusterSettingsError


def double(value):
    return 2 * value


def fail_while_flagged(value, flag_file):
    if Path(flag_file).exists():
        raise ValueError(f"refusing {value}: {flag_file} is there")
    return value + 1


def toy_catalog(folder: Path, flag: Path) -> DataCatalog:
    datasets = {name: PickleDataset(filepath=str(folder / f"{name}.pkl")) for name in ("a.one", "a.two", "b.out")}
    return DataCatalog({**datasets, "start": MemoryDataset(3), "params:flag": MemoryDataset(str(flag))})


def toy_pipeline() -> Pipeline:
    return Pipeline(
        [
            node(double, "start", "a.one", name="double", namespace="a"),
            node(double, "a.one", "a.two", name="again", namespace="a"),
            node(fail_while_flagged, ["a.two", "params:flag"], "b.out", name="check", namespace="b"),
        ]
    )


def test_the_workers_import_every_task_module_once_at_the_start(tmp_path):
    """Modules of the node functions (through partials) and of the datasets' and hooks' classes, each once, sorted;
    importing them in a process is what unpickling a first task would do."""
    import functools
    import json

    from thinkalike.runners.remote import import_modules, task_modules

    pipeline = Pipeline(
        [
            node(double, "start", "a.one", name="double", namespace="a"),
            node(
                functools.partial(functools.partial(json.dumps, indent=1)),
                "a.one",
                "a.two",
                name="dumps",
                namespace="a",
            ),
            node(double, "a.two", "b.out", name="again", namespace="b"),
        ]
    )
    assert task_modules(pipeline.nodes) == sorted({__name__, "json"})
    datasets = [PickleDataset(filepath=str(tmp_path / "a.pkl")), MemoryDataset(1)]
    assert task_modules(pipeline.nodes, datasets) == sorted(
        {__name__, "json", type(datasets[0]).__module__, type(datasets[1]).__module__}
    )
    assert import_modules(["json", "thinkalike.runners.grouping"]) == ["json", "thinkalike.runners.grouping"]
    with pytest.raises(ModuleNotFoundError):
        import_modules(["thinkalike.no_such_module"])


def test_a_task_carries_the_datasets_its_nodes_read_and_write_and_no_others(tmp_path):
    """A task's catalog: its nodes' inputs and outputs (parameters, a dataset only a runtime pattern gives, which the
    run would give too) — the very dataset objects of the run's catalog, so their versions — and none of the rest."""
    from thinkalike.runners.remote import task_catalog

    catalog = toy_catalog(tmp_path, tmp_path / "flag")
    catalog["unused"] = PickleDataset(filepath=str(tmp_path / "unused.pkl"))
    nodes = [
        node(fail_while_flagged, ["a.two", "params:flag"], "b.out", name="check", namespace="b"),
        node(double, "b.out", "b.free", name="free", namespace="b"),
    ]
    part = task_catalog(catalog, nodes)
    assert sorted(part.keys()) == ["a.two", "b.free", "b.out", "params:flag"]
    for name in ("a.two", "b.out", "params:flag"):
        assert part.get(name) is catalog.get(name)
    assert part.load("params:flag") == str(tmp_path / "flag")
    assert isinstance(part.get("b.free"), MemoryDataset)


def test_a_failing_node_stops_the_run_with_its_error_and_a_resume_finishes_it(tmp_path, caplog):
    flag = tmp_path / "flag"
    flag.touch()
    with pytest.raises(ValueError, match=r"refusing 12: .*flag is there"):
        DaskRunner(workers=2).run(toy_pipeline(), toy_catalog(tmp_path, flag))
    assert (tmp_path / "a.two.pkl").exists() and not (tmp_path / "b.out.pkl").exists()
    assert "--from-nodes" in caplog.text  # Kedro's resume hint

    flag.unlink()
    catalog = toy_catalog(tmp_path, flag)
    DaskRunner(workers=2).run(toy_pipeline(), catalog, only_missing_outputs=True)
    assert catalog.load("b.out") == 13


def test_a_pipeline_passing_data_in_memory_between_tasks_is_refused_before_any_task(tmp_path):
    catalog = toy_catalog(tmp_path, tmp_path / "flag")
    catalog["a.two"] = MemoryDataset()
    with pytest.raises(ClusterError, match=r"a\.two \(written in task a, read by node b\.check\)"):
        DaskRunner(workers=2).run(toy_pipeline(), catalog)
    assert not (tmp_path / "a.one.pkl").exists()


def test_gpu_work_on_a_cluster_without_a_gpu_worker_is_an_error_at_start_not_a_hang(tmp_path):
    pipeline = Pipeline([node(double, "start", "a.one", name="double", namespace="a", tags=["gpu"])])
    with pytest.raises(ClusterError, match="no worker of the cluster advertises a GPU"):
        DaskRunner(workers=1, gpu_resources=True).run(pipeline, toy_catalog(tmp_path, tmp_path / "flag"))
    assert not (tmp_path / "a.one.pkl").exists()


def test_the_slurm_settings_run_a_node_on_dask_jobqueue_local_cluster(tmp_path):
    """The jobs of conf/slurm's settings, started as local processes by dask-jobqueue (no SLURM here): SLURM-only
    options (partition, walltime, the GPU directive) are left out; the worker runs the node."""
    slurm = {
        "cluster_class": "dask_jobqueue.local.LocalCluster",
        "cores": 1,
        "memory": "2GB",
        "gpus_per_job": 0,
        "minimum_jobs": 1,
        "maximum_jobs": 1,
        "queue": "gpu",
        "walltime": "00:10:00",
    }
    catalog = toy_catalog(tmp_path, tmp_path / "flag")
    DaskRunner(cluster="slurm", slurm=slurm).run(toy_pipeline(), catalog)
    assert catalog.load("b.out") == 13


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"workers": 0}, "--runner-params: DaskRunner workers: expected a positive integer, got 0"),
        ({"threads_per_worker": "x"}, "threads_per_worker"),
        ({"cluster": "slurmm"}, "DaskRunner cluster: expected 'local', 'slurm' or a scheduler address"),
        ({"worker": 2}, r"unknown DaskRunner setting\(s\) \['worker'\]"),
        ({"slurm": {"maximum_jobs": 0}}, "slurm.maximum_jobs"),
        ({"slurm": {"cluster_class": "dask_jobqueue.NoSuchCluster"}}, "slurm.cluster_class: cannot import"),
    ],
)
def test_bad_settings_are_named(tmp_path, settings, message):
    with pytest.raises(ClusterSettingsError, match=message):
        DaskRunner(**({"cluster": "slurm"} if "slurm" in settings else {}), **settings).run(
            toy_pipeline(), toy_catalog(tmp_path, tmp_path / "flag")
        )
    assert not os.listdir(tmp_path)


def test_a_configuration_without_dask_or_mlflow_files_runs_with_the_defaults(tmp_path, monkeypatch):
    """dask.yml and mlflow.yml are optional: a project whose conf/ has neither (an older copy, --conf-source
    elsewhere) runs, sequentially and on the cluster, with the defaults."""
    from tests.pipelines.conftest import make_project_copy, run_project

    project = make_project_copy(tmp_path)
    (project / "conf" / "base" / "dask.yml").unlink()
    (project / "conf" / "base" / "mlflow.yml").unlink()
    monkeypatch.chdir(project)
    run_project(project, pipeline_names=["corpus"])
    catalog = run_project(project, pipeline_names=["corpus"], runner=DaskRunner(workers=1))
    assert len(catalog.load("train_sentences")) > 0


def sleep_then(seconds, label):
    time.sleep(seconds)
    return label


def test_a_ready_task_never_waits_behind_a_long_one_while_a_worker_is_idle(tmp_path, monkeypatch):
    """While ``medium`` runs on one worker, ``quick`` ends on the other and frees ``long`` and ``short`` at once: one
    worker is free, so one of them starts and the other waits for the next free worker — it must not be queued
    behind ``long`` on the same worker while ``medium``'s worker becomes idle (what Dask does with tasks handed to
    it early: measured on the default run, a 0.1 s task waited 58 s)."""
    seconds = {"medium": 1.5, "quick": 0.0, "long": 4.0, "short": 0.1}
    catalog = DataCatalog(
        {
            **{f"{name}.out": PickleDataset(filepath=str(tmp_path / f"{name}.pkl")) for name in seconds},
            **{f"params:{name}_seconds": MemoryDataset(value) for name, value in seconds.items()},
        }
    )
    pipeline = Pipeline(
        [
            node(
                sleep_then,
                ["params:medium_seconds", "params:medium_seconds"],
                "medium.out",
                name="run",
                namespace="medium",
            ),
            node(
                sleep_then, ["params:quick_seconds", "params:quick_seconds"], "quick.out", name="run", namespace="quick"
            ),
            node(sleep_then, ["params:long_seconds", "quick.out"], "long.out", name="run", namespace="long"),
            node(sleep_then, ["params:short_seconds", "quick.out"], "short.out", name="run", namespace="short"),
        ]
    )
    ended, worker_of = {}, {}
    original = DaskRunner._merge

    submitted_before_merge = {}

    def remember(report, providers, group, catalog):
        namespace = group.nodes[0].namespace
        worker_of[namespace], ended[namespace] = report.worker, time.perf_counter()
        submitted_before_merge[namespace] = len(submitted)
        return original(report, providers, group, catalog)

    from distributed import Client

    outstanding, most, submitted = set(), [0], []
    submit = Client.submit

    def counting(client, *args, **kwargs):
        future = submit(client, *args, **kwargs)
        submitted.append(future.key)
        outstanding.add(future.key)
        most[0] = max(most[0], len(outstanding))
        future.add_done_callback(lambda done: outstanding.discard(done.key))
        return future

    runner = DaskRunner(workers=2)  # two tasks at most, whatever else the machine runs
    runner._merge = remember
    monkeypatch.setattr(Client, "submit", counting)
    runner.run(pipeline, catalog)
    assert set(worker_of) == set(seconds)
    assert most[0] <= 2  # never more tasks handed to Dask than it has threads: the rest wait in the runner
    # the task ``quick`` freed was handed out before the driver logged ``quick``'s outputs
    assert submitted_before_merge["quick"] >= 3
    assert worker_of["short"] != worker_of["long"], worker_of
    assert ended["short"] < ended["long"]


def sleep_then_session(seconds):
    """The worker's pid and session, and what of Dask's periodic work runs in it (its periodic callbacks, the
    event-loop tick interval) and glibc's trim setting."""
    import dask
    from distributed import get_worker

    time.sleep(seconds)
    return (
        os.getpid(),
        os.getsid(0),
        sorted(get_worker().periodic_callbacks),
        dask.config.get("distributed.admin.tick.interval"),
        os.environ.get("MALLOC_TRIM_THRESHOLD_"),
    )


def test_a_local_run_has_one_worker_per_core_in_the_runs_session_with_daskss_periodic_work_turned_down(
    tmp_path, monkeypatch, caplog
):
    """Four independent 1-s tasks on two workers: at most two handed to Dask at once (one per worker thread), every
    worker in the kedro run's session (the run's fair share of a shared machine, never more), Dask's periodic work
    turned down (no statistical profiler, a 1-s event-loop tick), no glibc trim setting, the nodes' modules imported
    once by every worker, and the environment the nannies wrote put back."""
    names = ["a", "b", "c", "d"]
    catalog = DataCatalog(
        {
            **{f"{name}.out": PickleDataset(filepath=str(tmp_path / f"{name}.pkl")) for name in names},
            "params:seconds": MemoryDataset(1.0),
        }
    )
    pipeline = Pipeline(
        [node(sleep_then_session, "params:seconds", f"{name}.out", name="run", namespace=name) for name in names]
    )
    from distributed import Client

    outstanding, most = set(), [0]
    submit = Client.submit

    def counting(client, *args, **kwargs):
        future = submit(client, *args, **kwargs)
        outstanding.add(future.key)
        most[0] = max(most[0], len(outstanding))
        future.add_done_callback(lambda done: outstanding.discard(done.key))
        return future

    runner = DaskRunner(workers=2)
    monkeypatch.setattr(Client, "submit", counting)
    dask_environment = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PYTHONHASHSEED")
    monkeypatch.setenv("MKL_NUM_THREADS", "7")  # one set before the run, the others unset
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PYTHONHASHSEED"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level("INFO"):
        runner.run(pipeline, catalog)
    assert {name: os.environ.get(name) for name in dask_environment} == {
        "OMP_NUM_THREADS": None,
        "MKL_NUM_THREADS": "7",
        "OPENBLAS_NUM_THREADS": None,
        "PYTHONHASHSEED": None,
    }
    pids = set()
    for name in names:
        pid, session, callbacks, tick, trim = catalog.load(f"{name}.out")
        pids.add(pid)
        assert "profile" not in callbacks and "heartbeat" in callbacks
        assert tick == "1s"
        assert trim is None
        assert pid != os.getpid()  # it ran in a worker
        assert session == os.getsid(0)  # the kedro run's session
    assert most[0] == 2 and len(pids) <= 2
    assert "local cluster of 2 worker processes, 1 thread(s) each" in caplog.text
    assert caplog.text.count("imported the tasks' ") == 1


def sleep_and_clock(seconds, label):
    time.sleep(seconds)
    return time.time()


def test_a_slow_merge_does_not_hold_back_the_tasks_other_tasks_freed(tmp_path):
    """``first`` ends at once and the driver spends 4 s merging its report (MLflow logging a summary's figures);
    meanwhile ``second`` ends and frees ``after_second``, which must be handed out and end while that merge still
    runs (the merges happen in a background thread), and every report is merged before the run returns."""
    seconds = {"first": 0.0, "second": 0.5, "after_second": 0.1}
    catalog = DataCatalog(
        {
            **{f"{name}.out": PickleDataset(filepath=str(tmp_path / f"{name}.pkl")) for name in seconds},
            **{f"params:{name}_seconds": MemoryDataset(value) for name, value in seconds.items()},
        }
    )
    pipeline = Pipeline(
        [
            node(
                sleep_and_clock,
                ["params:first_seconds", "params:first_seconds"],
                "first.out",
                name="run",
                namespace="first",
            ),
            node(
                sleep_and_clock,
                ["params:second_seconds", "params:second_seconds"],
                "second.out",
                name="run",
                namespace="second",
            ),
            node(
                sleep_and_clock,
                ["params:after_second_seconds", "second.out"],
                "after_second.out",
                name="run",
                namespace="after_second",
            ),
        ]
    )
    merged = {}

    def slow_merge(report, providers, group, catalog):
        namespace = group.nodes[0].namespace
        if namespace == "first":
            time.sleep(4.0)  # room for a loaded machine (other tests' clusters) to run the two other tasks meanwhile
        merged[namespace] = time.time()

    runner = DaskRunner(workers=2)  # tasks in a fixed order, whatever else the machine runs
    runner._merge = slow_merge
    runner.run(pipeline, catalog)
    assert set(merged) == set(seconds)  # all merged before run() returned
    after_second_ended = catalog.load("after_second.out")
    assert after_second_ended < merged["first"], (after_second_ended, merged)
    assert list(merged) == ["first", "second", "after_second"]  # in the order the tasks finished


def test_a_failing_merge_fails_the_run_after_the_other_reports_are_merged(tmp_path):
    catalog = DataCatalog(
        {
            "a.out": PickleDataset(filepath=str(tmp_path / "a.pkl")),
            "b.out": PickleDataset(filepath=str(tmp_path / "b.pkl")),
            "params:wait": MemoryDataset(0.0),
        }
    )
    pipeline = Pipeline(
        [
            node(sleep_and_clock, ["params:wait", "params:wait"], "a.out", name="run", namespace="a"),
            node(sleep_and_clock, ["params:wait", "a.out"], "b.out", name="run", namespace="b"),
        ]
    )
    merged = []

    def failing_merge(report, providers, group, catalog):
        namespace = group.nodes[0].namespace
        if namespace == "a":
            raise OSError("the tracking database is locked")
        merged.append(namespace)

    runner = DaskRunner(workers=2)  # tasks in a fixed order, whatever else the machine runs
    runner._merge = failing_merge
    with pytest.raises(OSError, match="database is locked"):
        runner.run(pipeline, catalog)
    assert merged == ["b"]
