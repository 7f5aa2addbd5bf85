"""Activation stores and the versioned Kedro datasets around them."""

import numpy as np
import pytest
from kedro.io.core import DatasetError, Version

from thinkalike.io.datasets import ActivationStoreDataset
from thinkalike.models.activation_store import (
    ActivationBatch,
    ActivationStore,
    ActivationStream,
    write_activation_store,
)


def batches(n_batches=3, layers=3, batch=2, n_ctx=5, width=4, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for index in range(n_batches):
        mask = np.ones((batch, n_ctx), dtype=np.int64)
        mask[-1, -2:] = 0
        residual = rng.standard_normal((layers, batch, n_ctx, width)).astype(np.float32)
        out.append(ActivationBatch.from_padded(residual, mask, index * batch))
    return out


def test_store_round_trip_and_token_selection(tmp_path):
    written = batches()
    store = write_activation_store(tmp_path / "store", written, model="m")
    assert (store.model, store.n_layers, store.d_model, store.n_shards) == ("m", 2, 4, 3)
    for original, loaded in zip(written, store):
        np.testing.assert_array_equal(original.residual, loaded.residual)
        assert loaded.sequence_start == original.sequence_start
        tokens = loaded.tokens()
        assert tokens.shape == (3, 2 * 5 - 2, 4)
        np.testing.assert_array_equal(tokens[:, 5], original.residual[:, 1, 0])


def test_store_refuses_to_overwrite_and_empty_input(tmp_path):
    write_activation_store(tmp_path / "s", batches(1), model="m")
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        write_activation_store(tmp_path / "s", batches(1), model="m")
    with pytest.raises(ValueError, match="no activation batches"):
        write_activation_store(tmp_path / "empty", [], model="m")
    with pytest.raises(FileNotFoundError, match="no activation store"):
        ActivationStore(tmp_path / "missing")


def test_inconsistent_batches_are_refused(tmp_path):
    bad = batches(1) + batches(1, width=3)
    with pytest.raises(ValueError, match="batch 1"):
        write_activation_store(tmp_path / "s", bad, model="m")


def test_versioned_dataset_streams_and_keeps_versions(tmp_path):
    path = str(tmp_path / "acts")
    first = ActivationStoreDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z"))
    first.save(ActivationStream("m", batches(2, seed=1)))
    second = ActivationStoreDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z"))
    second.save(ActivationStream("m", batches(2, seed=2)))
    latest = ActivationStoreDataset(filepath=path, version=Version(None, None)).load()
    np.testing.assert_array_equal(latest.batch(0).residual, batches(2, seed=2)[0].residual)
    older = ActivationStoreDataset(filepath=path, version=Version("2026-01-01T00.00.00.000Z", None)).load()
    np.testing.assert_array_equal(older.batch(0).residual, batches(2, seed=1)[0].residual)
    with pytest.raises(DatasetError, match="ActivationStream"):
        ActivationStoreDataset(filepath=path, version=Version(None, "2026-01-03T00.00.00.000Z")).save({"x": 1})


def test_a_figure_is_rendered_once_for_the_catalog_and_mlflow(tmp_path, monkeypatch):
    """The catalog's PNG and the bytes MLflow gets are one rendering (savefig's defaults), byte for byte."""
    from matplotlib.figure import Figure

    from thinkalike.io.atomic import MatplotlibDataset
    from thinkalike.run_record.tracking import png_bytes

    figure = Figure()
    figure.subplots().plot([0, 1], [1, 0])
    renders = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (renders.append(1), original(self, *a, **k))[1])
    MatplotlibDataset(filepath=str(tmp_path / "one.png")).save(figure)
    MatplotlibDataset(filepath=str(tmp_path / "folder")).save({"a.png": figure})
    assert png_bytes(figure) == (tmp_path / "one.png").read_bytes() == (tmp_path / "folder" / "a.png").read_bytes()
    assert len(renders) == 1
    other = Figure()
    other.subplots().plot([0, 1], [0, 1])
    MatplotlibDataset(filepath=str(tmp_path / "other.jpg"), save_args={"format": "jpg"}).save(other)
    assert len(renders) == 2 and (tmp_path / "other.jpg").read_bytes()[:2] == b"\xff\xd8"  # other args: their own
