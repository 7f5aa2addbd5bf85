"""DaskRunner on a local cluster of 2 worker processes against the suite's sequential run (``tiny_project``): the
same outputs, one MLflow run written by the driver, the timing table of every worker."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.pipelines.conftest import make_project_copy, run_project
from tests.pipelines.test_run_timings import logged_numbers, mlflow_runs, node_rows, saved_table, saved_versions
from thinkalike.models.activation_store import ActivationStore
from thinkalike.pipeline_registry import build_pipelines
from thinkalike.pipelines.parameters import configured_parameters
from thinkalike.runners import DaskRunner

PARITY_PIPELINES = ["corpus", "zoo", "activations", "cka", "stitching", "mlem"]


def comparable(value):
    """What must be equal between two runs of one dataset (None: not compared, e.g. a figure or a tokenizer)."""
    if isinstance(value, pd.DataFrame):
        run_specific = [
            column for column in value.columns if "second" in column or column.endswith("_at") or "_version" in column
        ]  # times, provenance
        return value.drop(columns=run_specific)
    if isinstance(value, dict) and value and all(isinstance(item, torch.Tensor) for item in value.values()):
        return value
    if isinstance(value, (torch.Tensor, np.ndarray, str, bytes, int, float)):
        return value
    if isinstance(value, ActivationStore):  # every shard's residual streams and attention mask
        return {
            f"{index}.{part}": torch.as_tensor(getattr(batch, part))
            for index, batch in enumerate(value)
            for part in ("token_rows", "attention_mask")
        }
    return None


def assert_same(name, a, b):
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=name)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), name
        for key in a:
            assert torch.equal(a[key], b[key]), f"{name}[{key}]"
    elif isinstance(a, (torch.Tensor, np.ndarray)):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name
    else:
        assert a == b, name


def test_a_cluster_run_equals_the_sequential_run(tiny_project, tmp_path, monkeypatch):
    """corpus → zoo → activations → CKA → stitching → MLEM with the same seeds: every table and tensor equal
    (values, not shapes) to the suite's sequential run, nodes run in 2 worker processes, one MLflow run with
    the sequential run's metrics."""
    sequential_project, sequential_catalog = tiny_project
    project = make_project_copy(tmp_path)
    monkeypatch.chdir(project)
    catalog = run_project(project, pipeline_names=PARITY_PIPELINES, runner=DaskRunner(workers=2))

    pipelines = build_pipelines(configured_parameters(project, "test"))
    outputs = sorted(set().union(*(pipelines[name].all_outputs() for name in PARITY_PIPELINES)))
    compared = []
    for name in outputs:
        if type(catalog.get(name)).__name__ == "MatplotlibDataset":  # write-only: figures are not compared
            continue
        ours = comparable(catalog.load(name))
        if ours is not None:
            assert_same(name, ours, comparable(sequential_catalog.load(name)))
            compared.append(name)
    kinds = {name.rsplit(".", 1)[-1] for name in compared}
    assert {"model_weights", "activations", "cka_table", "stitch_table", "mlem_profile"} <= kinds, kinds
    # the workers read the activations this run wrote (a version resolved before the run would be older)
    run_version = saved_versions(project)[-1]
    assert set(catalog.load("mlem_profiles")["activations_version"]) == {run_version}

    table = saved_table(project, run_version)
    nodes = node_rows(table)
    assert sorted(nodes["node"]) == sorted(node.name for name in PARITY_PIPELINES for node in pipelines[name].nodes)
    assert nodes["worker"].nunique() >= 2 and (nodes["worker"] != "").all()
    assert (nodes["seconds"] > 0).all()

    _, runs = mlflow_runs(project)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.tags["runner"] == "DaskRunner"
    sequential_client, sequential_runs = mlflow_runs(sequential_project)
    # the sequential run also ran nli, embedding and report (whose claims and scorecard read every pipeline); the
    # run's cost differs, and the details hold every pair's and layer's numbers
    client, _ = mlflow_runs(project)
    left_out = ("nli", "embedding", "timing", "claims", "cost", "scorecard")
    expected = {
        key: value
        for key, value in logged_numbers(sequential_client, sequential_runs[0]).items()
        if not key.startswith(left_out)
    }
    metrics = {key: value for key, value in logged_numbers(client, runs[0]).items() if not key.startswith(left_out)}
    assert metrics.keys() == expected.keys()
    assert metrics == pytest.approx(expected, rel=0, abs=0)
    # the figures, rendered in the workers and logged by the driver, under the sequential run's names (that run
    # also ran the pipelines left out here)
    client, _ = mlflow_runs(project)
    figures = _artifacts(client, runs[0].info.run_id, "figures")
    sequential_client, _ = mlflow_runs(sequential_project)
    assert figures <= _artifacts(sequential_client, sequential_runs[0].info.run_id, "figures") and len(figures) > 5
    first = next(iter(sorted(figures)))
    assert (
        Path(client.download_artifacts(runs[0].info.run_id, first, str(tmp_path))).read_bytes()[:8]
        == b"\x89PNG\r\n\x1a\n"
    )


def _artifacts(client, run_id: str, folder: str) -> set[str]:
    found = set()
    for item in client.list_artifacts(run_id, folder):
        found |= _artifacts(client, run_id, item.path) if item.is_dir else {item.path}
    return found
