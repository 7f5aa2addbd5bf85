"""The DaskRunner's local workers: forks of a forkserver that imported the project once, started when the runner is
made when the run's configuration names a local cluster, with the environment a spawned worker would have."""

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline, node
from kedro_datasets.pickle import PickleDataset

from thinkalike.runners import DaskRunner
from thinkalike.runners.dask_runner import _cluster_known_now
from thinkalike.runners.processes import DASK_HASH_SEED, environment_set, project_modules, worker_environment


def test_the_worker_environment_is_dasks_without_the_trim_threshold_and_with_a_fixed_hash_seed():
    dask_default = {"MALLOC_TRIM_THRESHOLD_": 65536, "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1}
    assert worker_environment(dask_default) == {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": DASK_HASH_SEED,
    }
    assert worker_environment({"PYTHONHASHSEED": 0})["PYTHONHASHSEED"] == DASK_HASH_SEED  # 0: random, as Dask reads it
    assert worker_environment({"PYTHONHASHSEED": 12})["PYTHONHASHSEED"] == "12"
    assert worker_environment(None) == {"PYTHONHASHSEED": DASK_HASH_SEED}


def test_an_environment_set_for_a_block_is_put_back_as_it_was(monkeypatch):
    monkeypatch.setenv("THINKALIKE_SET_BEFORE", "before")
    monkeypatch.delenv("THINKALIKE_UNSET_BEFORE", raising=False)
    with environment_set({"THINKALIKE_SET_BEFORE": "inside", "THINKALIKE_UNSET_BEFORE": "inside"}):
        assert os.environ["THINKALIKE_SET_BEFORE"] == os.environ["THINKALIKE_UNSET_BEFORE"] == "inside"
    assert os.environ["THINKALIKE_SET_BEFORE"] == "before"
    assert "THINKALIKE_UNSET_BEFORE" not in os.environ


def test_the_preloaded_modules_are_the_runners_task_code_and_the_projects_hooks_and_pipelines():
    assert project_modules(None) == ["distributed", "thinkalike.runners.remote"]
    assert project_modules("thinkalike")[-2:] == ["thinkalike.settings", "thinkalike.pipeline_registry"]


def process_facts(_):
    import torch

    return {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "probe": os.environ.get("THINKALIKE_PROBE"),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
        "cwd": os.getcwd(),
        "torch_threads": torch.get_num_threads(),
    }


def test_local_workers_are_forks_of_the_forkserver_with_the_drivers_environment_of_the_moment(tmp_path, monkeypatch):
    """The workers are not children of this process (a spawned worker would be) but of its forkserver; a variable set
    here after that server started still reaches them, and so does the working directory; Dask's one-thread settings
    apply and glibc's trim threshold is not set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THINKALIKE_PROBE", "set after the server started")
    names = ["a", "b"]
    catalog = DataCatalog(
        {
            **{f"{name}.out": PickleDataset(filepath=str(tmp_path / f"{name}.pkl")) for name in names},
            "params:x": MemoryDataset(0),
        }
    )
    pipeline = Pipeline(
        [node(process_facts, "params:x", f"{name}.out", name="facts", namespace=name) for name in names]
    )
    DaskRunner(workers=2).run(pipeline, catalog)
    facts = [catalog.load(f"{name}.out") for name in names]
    for fact in facts:
        assert fact["pid"] != os.getpid() and fact["parent"] != os.getpid()
        assert fact["probe"] == "set after the server started"
        assert fact["cwd"] == str(tmp_path)
        assert fact["omp"] == "1" and fact["trim"] is None
        assert fact["torch_threads"] == 1
    assert len({fact["parent"] for fact in facts}) == 1  # one server forked both


def test_the_cluster_is_known_when_the_runner_is_made_from_the_run_commands_configuration(tmp_path, monkeypatch):
    """``--runner-params cluster=…`` first, then the ``dask.yml`` of the command's ``--env``; outside a ``kedro run``
    command, not known (nothing started early)."""
    from kedro.framework.startup import bootstrap_project

    project = Path(__file__).resolve().parents[2]
    bootstrap_project(project)
    monkeypatch.chdir(project)
    assert _cluster_known_now({"cluster": "tcp://host:8786"}) == "tcp://host:8786"
    assert _cluster_known_now({}) is None  # not inside a click command

    @click.command()
    @click.option("--env", default=None)
    @click.option("--conf-source", default=None)
    def run(env, conf_source):
        click.echo(str(_cluster_known_now({})))

    monkeypatch.delenv("KEDRO_ENV", raising=False)
    conf = tmp_path / "conf"
    for env, cluster in (("base", None), ("local", None), ("cluster", "slurm")):
        (conf / env).mkdir(parents=True)
        if cluster:
            (conf / env / "dask.yml").write_text(f"dask:\n  cluster: {cluster}\n")
    runner = CliRunner()
    assert runner.invoke(run, ["--conf-source", str(conf)]).output.strip() == "local"
    assert runner.invoke(run, ["--conf-source", str(conf), "--env", "cluster"]).output.strip() == "slurm"
    monkeypatch.setenv("KEDRO_ENV", "cluster")
    assert runner.invoke(run, ["--conf-source", str(conf)]).output.strip() == "slurm"
    (conf / "broken").mkdir()
    (conf / "broken" / "dask.yml").write_text("dask: [\n")  # the session raises its own error about this file
    result = runner.invoke(run, ["--conf-source", str(conf), "--env", "broken"])
    assert result.output.strip() == "None", repr(result.exception)


@pytest.mark.parametrize("cluster, started", [("local", True), ("tcp://host:8786", False)])
def test_the_runner_starts_the_forkserver_when_made_only_for_a_local_cluster(monkeypatch, cluster, started):
    import thinkalike.runners.dask_runner as dask_runner

    calls = []
    monkeypatch.setattr(dask_runner, "start_forkserver", lambda modules, environment: calls.append(modules))
    DaskRunner(cluster=cluster)
    assert bool(calls) == started
    assert not calls or calls[0][:2] == ["distributed", "thinkalike.runners.remote"]
