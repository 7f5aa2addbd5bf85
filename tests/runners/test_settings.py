"""DaskRunner settings: dask.yml under --runner-params, every bad value named with its source, and the SLURM job
script that conf/slurm's settings make (dask-jobqueue, no SLURM needed)."""

import pytest
import yaml

from tests.pipelines.conftest import PROJECT_ROOT
from thinkalike.runners.settings import ClusterSettings, ClusterSettingsError


def test_runner_params_override_the_configuration():
    settings = ClusterSettings.resolve({"cluster": "local", "workers": 3, "threads_per_worker": 2}, {"workers": "2"})
    assert (settings.cluster, settings.workers, settings.threads_per_worker) == ("local", 2, 2)
    assert settings.gpu_resources is False
    assert ClusterSettings.resolve({"cluster": "tcp://node7:8786"}).cluster == "tcp://node7:8786"


def test_a_local_cluster_has_one_worker_per_core_unless_told_otherwise():
    assert ClusterSettings.resolve({}).local_workers(cores=2) == 2
    assert ClusterSettings.resolve({"workers": 3}).local_workers(cores=2) == 3
    assert ClusterSettings.resolve({}, {"workers": "1"}).local_workers(cores=2) == 1
    with pytest.raises(ClusterSettingsError, match=r"unknown DaskRunner setting\(s\) \['spare_workers'\]"):
        ClusterSettings.resolve({"spare_workers": 1})  # removed: no default used it


def test_the_base_dask_file_states_the_settings_defaults():
    stated = yaml.safe_load((PROJECT_ROOT / "conf/base/dask.yml").read_text())["dask"]
    defaults = ClusterSettings()
    for key in ("cluster", "workers", "threads_per_worker"):
        assert stated[key] == getattr(defaults, key), key
    assert ClusterSettings.resolve(stated) == ClusterSettings.resolve({})


@pytest.mark.parametrize(
    ("config", "overrides", "message"),
    [
        ({"workers": -1}, {}, "dask.yml: DaskRunner workers: expected a positive integer, got -1"),
        ({}, {"gpu_resources": "yes"}, "--runner-params: DaskRunner gpu_resources: expected true or false"),
        ({"slurm": {"partition": "gpu"}}, {}, r"dask.yml: unknown DaskRunner slurm setting\(s\) \['partition'\]"),
        ({"slurm": {"minimum_jobs": 5, "maximum_jobs": 2}}, {}, "minimum_jobs \\(5\\) is above slurm.maximum_jobs"),
        ({"slurm": ["gpu"]}, {}, "slurm: expected a mapping"),
        ({}, {"threads_per_worker": "0"}, "--runner-params: DaskRunner threads_per_worker: expected a positive"),
    ],
)
def test_bad_values_are_named_with_their_source(config, overrides, message):
    with pytest.raises(ClusterSettingsError, match=message):
        ClusterSettings.resolve(config, overrides)


def every_dask_file():
    return sorted(PROJECT_ROOT.glob("conf/*/dask.yml"))


@pytest.mark.parametrize("path", every_dask_file(), ids=lambda path: path.parent.name)
def test_every_environments_dask_file_resolves(path):
    ClusterSettings.resolve(yaml.safe_load(path.read_text())["dask"])


def test_conf_slurm_makes_a_gpu_job_script():
    from dask_jobqueue import SLURMCluster

    config = yaml.safe_load((PROJECT_ROOT / "conf/slurm/dask.yml").read_text())["dask"]
    settings = ClusterSettings.resolve(config, {"slurm": {**config["slurm"], "account": "lab42"}})
    assert settings.cluster == "slurm" and settings.gpu_resources is True  # GPU work goes to the GPU jobs
    with SLURMCluster(**settings.slurm_cluster_options()) as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    for directive in (
        "#SBATCH -p gpu",
        "#SBATCH -A lab42",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH -t 04:00:00",
        "#SBATCH --gres=gpu:1",
    ):
        assert directive in lines, (directive, script)
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    assert "--resources GPU=1" in worker and "--nthreads 8" in worker
