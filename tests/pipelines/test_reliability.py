"""Reliability: atomic outputs under SIGKILL, resume, every setting checked first, MLflow as a record."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click import ClickException

from tests.pipelines.conftest import make_project_copy, run_project
from thinkalike.pipelines.schema import ParameterError

ACTIVATIONS = Path("data/07_model_output/activations")


def _versions(project: Path) -> set[Path]:
    """Every non-empty version folder (``<dataset path>/<timestamp>``) under data/, but the run's own timing table
    (``run_timings``: every run that runs a node saves one)."""
    return {
        path
        for path in (project / "data").rglob("*")
        if path.is_dir()
        and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d.]+Z", path.name)
        and any(path.iterdir())
        and path.parent.name != "run_timings.parquet"
    }


@pytest.fixture()
def project_copy(tiny_project_as_run, tmp_path, monkeypatch):
    """A private copy of the complete tiny project as its run left it (data and MLflow database included)."""
    project = tmp_path / "project"
    shutil.copytree(tiny_project_as_run, project)
    monkeypatch.chdir(project)
    return project


# ---------------------------------------------------------------- 1. atomic outputs
KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from kedro.io.core import Version
    from thinkalike.io.datasets import ActivationStoreDataset
    from thinkalike.models.activation_store import ActivationStore, ActivationStream

    complete = ActivationStore(sys.argv[2])

    def batches():
        for index, batch in enumerate(complete):
            yield batch
            if index == 0:
                print("first shard written", flush=True)
                time.sleep(600)

    dataset = ActivationStoreDataset(filepath=sys.argv[1], version=Version(None, None))
    dataset.save(ActivationStream(complete.model, batches()))
""")


def test_sigkill_mid_extraction_leaves_the_last_complete_version_in_use(project_copy):
    project = project_copy
    store_folder = project / ACTIVATIONS / "neox_xs"
    complete = sorted(path for path in store_folder.iterdir())[-1]
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(store_folder), str(complete / "neox_xs")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=project,
    )
    try:
        assert writer.stdout.readline().strip() == "first shard written"
        os.kill(writer.pid, signal.SIGKILL)  # a real kill, mid-write
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    newest = sorted(store_folder.iterdir())[-1]
    assert newest != complete and list(newest.glob("*.partial/shard_00000.safetensors"))  # the half-written one

    catalog = run_project(project, pipeline_names=["cka"], namespaces=["models.cka.neox_xs__neox_xs"])
    table = catalog.load("models.cka.neox_xs__neox_xs.cka_table")
    assert len(table) == 9 and np.allclose(
        np.diag(table.pivot(index="layer_a", columns="layer_b", values="cka").to_numpy()), 1.0
    )
    index = catalog.load("models.neox_xs.activation_index")
    assert int(table["n_tokens"].iloc[0]) == int((~index["is_special"]).sum())  # special tokens left out


def test_a_failed_file_save_leaves_no_version(tmp_path):
    from kedro.io.core import DatasetError, Version

    from thinkalike.io.atomic import ParquetDataset

    dataset = ParquetDataset(filepath=str(tmp_path / "table.parquet"), version=Version(None, None))
    dataset.save(pd.DataFrame({"a": [1, 2]}))
    failing = ParquetDataset(filepath=str(tmp_path / "table.parquet"), version=Version(None, None))
    with pytest.raises(DatasetError):
        failing.save(pd.DataFrame({"a": [object(), object()]}))  # pyarrow cannot write plain objects
    assert not list(tmp_path.rglob("*.partial"))
    reader = ParquetDataset(filepath=str(tmp_path / "table.parquet"), version=Version(None, None))
    assert reader.load()["a"].tolist() == [1, 2]


def test_a_half_written_file_is_never_the_latest_version(tmp_path):
    import torch
    from kedro.io.core import Version

    from thinkalike.io.atomic import SafetensorsDataset

    path = tmp_path / "weights.safetensors"
    SafetensorsDataset(filepath=str(path), backend="torch", version=Version(None, None)).save({"w": torch.ones(3)})
    later = path / "9999-01-01T00.00.00.000Z"
    later.mkdir()
    (later / "weights.safetensors.partial").write_bytes(b"\x00" * 10)  # what a SIGKILL mid-write leaves
    reader = SafetensorsDataset(filepath=str(path), backend="torch", version=Version(None, None))
    assert reader.exists() and torch.equal(reader.load()["w"], torch.ones(3))
    saved = next(path.glob("2*/weights.safetensors"))
    assert saved.stat().st_mode & 0o777 == 0o666 & ~_umask()  # like every other output (was 0600)


def test_a_folder_of_figures_is_saved_whole_or_not_at_all(tmp_path):
    from kedro.io.core import Version
    from matplotlib.figure import Figure

    from thinkalike.io.atomic import MatplotlibDataset

    def figure(title: str) -> Figure:
        drawn = Figure(figsize=(2, 2))
        drawn.add_subplot().set_title(title)
        return drawn

    path = tmp_path / "heatmaps"
    dataset = MatplotlibDataset(filepath=str(path), version=Version(None, None))
    dataset.save({"a__b.png": figure("a"), "c__d.png": figure("c")})
    (folder,) = path.glob("*/heatmaps")
    assert sorted(file.name for file in folder.iterdir()) == ["a__b.png", "c__d.png"]
    assert folder.stat().st_mode & 0o777 == 0o777 & ~_umask()
    assert all(file.stat().st_mode & 0o777 == 0o666 & ~_umask() for file in folder.iterdir())
    first = base64.b64decode(dataset.preview())
    assert first == (folder / "a__b.png").read_bytes()

    class Broken(Figure):
        def savefig(self, *args, **kwargs):
            raise RuntimeError("disk full")

    failing = MatplotlibDataset(filepath=str(path), version=Version(None, None))
    with pytest.raises(Exception, match="disk full"):
        failing.save({"a__b.png": figure("a"), "c__d.png": Broken()})  # the first file was written
    assert not list(tmp_path.rglob("*.partial")) and list(path.glob("*/heatmaps")) == [folder]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_half_written_tokenizer_or_store_is_not_a_version(tmp_path):
    from kedro.io.core import Version

    from thinkalike.io.datasets import ActivationStoreDataset, HFTokenizerDataset

    for dataset_class, name in ((ActivationStoreDataset, "acts"), (HFTokenizerDataset, "tokenizer")):
        folder = tmp_path / name
        (folder / "2026-01-01T00.00.00.000Z" / name).mkdir(parents=True)  # no meta.json / tokenizer_config.json
        dataset = dataset_class(filepath=str(folder), version=Version(None, None))
        assert not dataset.exists()


def test_a_truncated_shard_is_named(tmp_path):
    from thinkalike.models.activation_store import (
        ActivationBatch,
        ActivationStoreError,
        write_activation_store,
    )

    rng = np.random.default_rng(0)
    batches = [
        ActivationBatch.from_padded(rng.standard_normal((2, 2, 3, 4)).astype(np.float32), np.ones((2, 3)), 2 * i)
        for i in range(2)
    ]
    store = write_activation_store(tmp_path / "store", batches, model="m")
    shard = tmp_path / "store" / "shard_00001.safetensors"
    shard.write_bytes(shard.read_bytes()[:-20])
    store.batch(0)
    with pytest.raises(ActivationStoreError, match="shard_00001.safetensors"):
        store.batch(1)


# ---------------------------------------------------------------- 2. resume
def test_only_missing_outputs_resumes_exactly_what_is_missing(project_copy):
    project = project_copy
    before = _versions(project)
    run_project(project, only_missing_outputs=True)
    assert _versions(project) == before, "a complete project re-ran nodes"

    shutil.rmtree(project / ACTIVATIONS / "gelu_1l")
    run_project(project, only_missing_outputs=True)
    new = {str(path.parent.relative_to(project / "data")) for path in _versions(project) - before}
    # MLEM and embedding read the activation stores too: gelu_1l's fits and their summaries re-ran, no other model's
    downstream = {path for path in new if "mlem" in path or "embedding" in path}
    assert any("mlem/gelu_1l" in path for path in downstream), downstream
    assert not any("neox_xs" in path for path in downstream), downstream
    assert new - downstream == {
        "07_model_output/activations/gelu_1l",
        "07_model_output/activation_index/gelu_1l.parquet",
        *(
            f"08_reporting/cka/{pair}/{file}"
            for pair in ("gelu_1l__gelu_1l", "gelu_1l__neox_xs")
            for file in ("cka.parquet", "measures.parquet")
        ),
        "08_reporting/cka/gelu_1l__neox_xs/calibration.parquet",  # pairs of different models only
        *(
            f"08_reporting/{file}"
            for file in (
                "cka_distances.parquet",
                "cka_distances.png",
                "cka_group_distances.parquet",
                "cka_group_curves.parquet",
                "cka_group_curves.png",
                "cka_heatmaps",
                "cka_heatmaps.json",
                "similarity_measures.parquet",
                "similarity_heatmaps",
                "dimension_shares.parquet",
                "dimension_shares.png",
                "rogue_remedies.parquet",
                "similarity_calibration.parquet",
                "measure_grounding.parquet",
                "measure_grounding.png",
                "report.html",
                "run_claims.json",
                "findings/cka.json",  # each section's numbers, saved by its pipeline
                "findings/measures.json",
                "estimates/cka.json",  # and the estimates those numbers measure
                "estimates/measures.json",
            )
        ),  # the report reads the CKA outputs
    }, new - downstream


# ---------------------------------------------------------------- 3. every setting checked first
BAD_SETTINGS = [
    ({"zoo": {"training": {"lr": 0.1}}}, "zoo.training.lr"),
    ({"zoo": {"training": {"eval_every": 0}}}, "zoo.training"),
    ({"zoo": {"models": {"neox_xs": {"family": "keras"}}}}, "zoo.models.neox_xs.family"),
    ({"zoo": {"models": {"gelu_1l": {"training": {"steps": "many"}}}}}, "zoo.models.gelu_1l.training.steps"),
    ({"zoo": {"models": {"gelu_1l": {"architecture": {"n_layer": 2}}}}}, "zoo.models.gelu_1l.architecture"),
    ({"activations": {"batch_size": 0}}, "activations.batch_size"),
    ({"activations": {"dtype": "int8"}}, "activations.dtype"),
    ({"activations": {"device": "cuda"}}, "activations.device"),
    ({"activations": {"devices": {"gelu_1l": "cuda:0"}}}, "activations.devices"),
    ({"activations": {"n_ctx": 0}}, "activations.n_ctx"),
    ({"corpus": {"n_ctx": 2}}, "corpus.n_ctx"),
    ({"cka": {"batch_tokens": "64"}}, "cka.batch_tokens"),
    ({"cka": {"pooling": "mean"}}, "cka.pooling"),
    ({"corpus": {"natural_text": {"use": "append"}}}, "corpus.natural_text.use"),
    ({"activations": {"models": {"ghost": "tl:NoSuchArchitecture"}}}, "activations.models.ghost"),
]


@pytest.mark.parametrize(("override", "key"), BAD_SETTINGS, ids=[key for _, key in BAD_SETTINGS])
def test_bad_setting_is_named_before_any_node_runs(tmp_path, monkeypatch, override, key):
    if key.startswith("activations.device"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    with pytest.raises(ParameterError) as raised:
        run_project(project, runtime_params=override)
    assert str(raised.value).startswith(key), str(raised.value)
    assert isinstance(raised.value, ClickException)  # the kedro CLI prints "Error: <message>", no traceback
    assert not (project / "data").exists() or not any(p.is_file() for p in (project / "data").rglob("*"))


def test_bfloat16_extraction_runs_and_matches_float32(tiny_project):
    import torch

    from thinkalike.pipelines.activations.nodes import extract_zoo_activations
    from thinkalike.pipelines.activations.schema import validate_activations

    _, catalog = tiny_project
    inputs = [
        catalog.load(name)
        for name in (
            "evaluation_sequences",
            "evaluation_index",
            "tokenizer",
            "models.gelu_1l.model_weights",
            "models.gelu_1l.model_config",
        )
    ]
    settings = {"batch_size": 8, "device": "cpu"}
    bf16, _ = extract_zoo_activations(
        *inputs, settings=validate_activations({**settings, "dtype": "bfloat16"}), model_name="gelu_1l"
    )
    fp32, _ = extract_zoo_activations(
        *inputs, settings=validate_activations({**settings, "dtype": "float32"}), model_name="gelu_1l"
    )
    low, high = next(iter(bf16.batches)), next(iter(fp32.batches))
    assert low.residual.dtype == np.float32
    error = np.abs(low.residual - high.residual).max() / np.abs(high.residual).max()
    assert 0 < error < 0.05  # bfloat16 has an 8-bit mantissa: different, but close
    del torch


# ---------------------------------------------------------------- 4. MLflow is a record
def _corpus_run(project: Path, **kwargs):
    return run_project(project, pipeline_names=["corpus"], **kwargs)


def _set_mlflow(project: Path, **settings) -> None:
    lines = "".join(f"  {key}: {value}\n" for key, value in settings.items())
    (project / "conf" / "test" / "mlflow.yml").write_text(f"mlflow:\n{lines}")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("store", ["directory", "server"])
def test_an_unusable_store_is_one_warning_and_every_output_is_saved(tmp_path, monkeypatch, store):
    from thinkalike.run_record import tracking

    project = make_project_copy(tmp_path, tracking_db=False)
    monkeypatch.chdir(project)
    if store == "directory":
        (project / "mlflow.db").mkdir()
        named = "mlflow.db"
    else:
        named = f"http://127.0.0.1:{_closed_port()}"
        _set_mlflow(project, tracking_uri=named)
    warned: list[str] = []
    real_warning = tracking.logger.warning
    # a log line (Kedro's logging set-up decides where it goes); collect it where it is written
    monkeypatch.setattr(
        tracking.logger,
        "warning",
        lambda message, *args, **kwargs: (warned.append(message % args), real_warning(message, *args, **kwargs)),
    )
    catalog = _corpus_run(project)
    messages = [text for text in warned if "MLflow store" in text]
    assert len(messages) == 1 and named in messages[0] and "saves every catalog output" in messages[0], messages
    assert catalog.load("corpus_statistics")["n_sentences"] == 600  # the outputs are there


def test_strict_mlflow_fails_fast_before_any_node(tmp_path, monkeypatch):
    from thinkalike.run_record.tracking import TrackingStoreError

    project = make_project_copy(tmp_path, tracking_db=False)
    monkeypatch.chdir(project)
    (project / "mlflow.db").mkdir()
    _set_mlflow(project, strict="true")
    with pytest.raises(TrackingStoreError, match="mlflow.db"):
        _corpus_run(project)
    assert not (project / "data").exists() or not any(p.is_file() for p in (project / "data").rglob("*"))


def test_a_killed_run_is_marked_failed_at_the_next_start(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from thinkalike.run_record.tracking import HOST_TAG, PID_TAG

    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    _corpus_run(project)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("thinkalike")
    stale = client.create_run(experiment.experiment_id, tags={HOST_TAG: socket.gethostname(), PID_TAG: str(dead.pid)})
    _corpus_run(project)
    assert client.get_run(stale.info.run_id).info.status == "FAILED"
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # UI opens on the runs table


CONCURRENT_START = textwrap.dedent("""
    import sys
    from pathlib import Path
    from thinkalike.run_record.tracking import RunRecorder, TrackingSettings

    recorder = RunRecorder(TrackingSettings(strict=True), Path(sys.argv[1]))
    recorder.check()
    recorder.start("concurrent", {"a": 1}, {})
    recorder.end("FINISHED")
""")


def test_two_runs_starting_at_once_on_a_fresh_project_both_record(tmp_path):
    starts = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_START, str(tmp_path)], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    errors = [process.communicate(timeout=300)[1] for process in starts]
    assert [process.returncode for process in starts] == [0, 0], errors
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        assert [row[0] for row in db.execute("select status from runs")] == ["FINISHED", "FINISHED"]


def test_the_database_is_anchored_at_the_project_root(tmp_path, monkeypatch):
    project = make_project_copy(tmp_path, tracking_db=False)
    monkeypatch.chdir(project / "conf")
    _corpus_run(project)
    assert (project / "mlflow.db").is_file() and not (project / "conf" / "mlflow.db").exists()


def test_runs_are_named_and_tagged(tiny_project):
    project, _ = tiny_project
    with sqlite3.connect(project / "mlflow.db") as db:
        run_uuid, name = db.execute("select run_uuid, name from runs order by start_time limit 1").fetchone()
        tags = dict(db.execute("select key, value from tags where run_uuid = ?", (run_uuid,)).fetchall())
        metrics = {row[0] for row in db.execute("select key from metrics where run_uuid = ?", (run_uuid,))}
    # what ran, where: the pipelines, the environment and the commit (the package's repository: this copy is none)
    assert re.fullmatch(r"default · test · [0-9a-f]{7}(\+dirty)?", name), name
    assert tags["runner"] == "SequentialRunner" and tags["kedro_env"] == "test"
    assert tags["kedro_command"].startswith("kedro run")
    assert re.fullmatch(r"[0-9a-f]{40}", tags["git_commit"]) and tags["git_dirty"] in ("true", "false")
    assert name.split(" · ")[-1] == tags["git_commit"][:7] + ("+dirty" if tags["git_dirty"] == "true" else "")
    assert tags["machine.cores"] == str(os.cpu_count()) and tags["machine.cpu"] and tags["machine.gpu"]
    assert "replicate" not in tags and "thinkalike.replicate_group" not in tags  # not a replicate
    assert "cka/mean_matched_cka.mean" in metrics and "cka/pairs" in metrics
    assert not any(key.startswith("cka.") for key in metrics)  # the pairs' own numbers are tables and details
    root = project / "mlartifacts" / run_uuid / "artifacts"  # beside the database, at the project root
    artifacts = {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}
    assert {
        "tables/zoo_summary.csv",
        "tables/cka_distances.csv",
        "tables/cka.gelu_1l__neox_xs.cka_table.csv",
        "tables/metric_details.csv",
        "figures/cka_distance_figure.png",
        "figures/cka_heatmaps/gelu_1l__neox_xs.png",
    } <= artifacts, artifacts
    # MLflow's figure is the catalog's PNG to the byte (rendered once, not drawn again for MLflow)
    first_version = min((project / "data" / "08_reporting" / "cka_distances.png").iterdir())
    catalog_png = (first_version / "cka_distances.png").read_bytes()
    assert (root / "figures" / "cka_distance_figure.png").read_bytes() == catalog_png


# ---------------------------------------------------------------- 6. nothing is sent anywhere
GUARDED_RUN = textwrap.dedent("""
    import socket, sys, time
    outside = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in ("localhost", "127.0.0.1", "::1", None):
            outside.append(str(host))
            raise OSError(f"blocked lookup of {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def guarded_connect(sock, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            outside.append(str(address))
            raise OSError(f"blocked connection to {address}")
        return real_connect(sock, address)

    socket.getaddrinfo, socket.socket.connect = guarded_getaddrinfo, guarded_connect
    sys.path.insert(0, sys.argv[2])
    from tests.pipelines.conftest import run_project
    run_project(__import__("pathlib").Path(sys.argv[1]), pipeline_names=["corpus"])
    time.sleep(2.0)  # telemetry runs in background threads
    print("OUTSIDE", outside)
""")
# MLflow switches its telemetry off by itself under pytest and in CI; the guarded run is a
# plain process without those markers, as a user's `kedro run` is.
TESTING_MARKERS = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")


def _guarded_run(project: Path, **environment: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key not in TESTING_MARKERS} | environment
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_RUN, str(project), str(Path(__file__).parents[2])],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return eval(done.stdout.strip().splitlines()[-1].removeprefix("OUTSIDE "))  # a printed list of strings


def test_a_run_opens_no_connection_outside_loopback(tmp_path):
    project = make_project_copy(tmp_path)
    assert _guarded_run(project) == []


@pytest.mark.slow
def test_the_guard_sees_mlflow_telemetry_when_it_is_switched_on(tmp_path):
    """The guard can fail: with telemetry explicitly on, the same run tries to reach MLflow's host."""
    project = make_project_copy(tmp_path)
    assert _guarded_run(project, MLFLOW_DISABLE_TELEMETRY="false") != []
