"""The activation store keeps only real tokens, in the asked dtype and layers, and refuses what will not fit."""

from collections import namedtuple

import numpy as np
import pytest
import torch
from kedro.io.core import DatasetError, Version

from tests.io.test_datasets import batches
from thinkalike.io.datasets import ActivationStoreDataset
from thinkalike.models.activation_store import (
    ActivationBatch,
    ActivationStoreError,
    ActivationStream,
    write_activation_store,
)


def test_only_real_tokens_are_stored(tmp_path):
    written = batches(layers=4, width=256)
    store = write_activation_store(tmp_path / "s", written, model="m")
    real = sum(int(batch.attention_mask.sum()) for batch in written)
    token_bytes = real * 4 * 256 * 4  # float32
    padded_bytes = sum(batch.residual.nbytes for batch in written)
    on_disk = sum(path.stat().st_size for path in (tmp_path / "s").glob("shard_*"))
    assert store.meta["n_tokens"] == real
    assert token_bytes < on_disk < token_bytes + 3 * 1024 < padded_bytes  # + masks and headers, no padding
    for original, loaded in zip(written, store):
        keep = original.attention_mask.astype(bool)
        np.testing.assert_array_equal(loaded.residual[:, keep], original.residual[:, keep])
        assert not loaded.residual[:, ~keep].any()
        np.testing.assert_array_equal(loaded.tokens(), original.tokens())


@pytest.mark.parametrize(("dtype", "tolerance"), [("float16", 1e-3), ("bfloat16", 8e-3)])
def test_smaller_store_dtypes_round_trip(tmp_path, dtype, tolerance):
    written = batches(1)
    store = write_activation_store(tmp_path / "s", written, model="m", dtype=dtype)
    loaded = store.batch(0).tokens()
    expected = written[0].tokens()
    assert store.dtype == dtype and loaded.dtype in (np.float16, np.float32)
    exact = torch.from_numpy(expected).to(getattr(torch, dtype)).float().numpy()
    np.testing.assert_array_equal(loaded.astype(np.float32), exact)  # exactly the rounded values
    assert np.abs(loaded - expected).max() <= tolerance * np.abs(expected).max()


def test_a_subset_of_layers_is_named_in_the_store(tmp_path):
    written = batches(2, layers=4)
    subset = [ActivationBatch(batch.tokens()[[0, 3]], batch.attention_mask, batch.sequence_start) for batch in written]
    store = write_activation_store(tmp_path / "s", subset, model="m", n_layers=3, layers=[0, 3])
    assert store.layers == [0, 3] and store.n_layers == 3
    np.testing.assert_array_equal(store.batch(1).tokens()[1], written[1].tokens()[3])


def test_a_store_that_would_not_fit_is_refused_before_writing(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    dataset = ActivationStoreDataset(filepath=str(tmp_path / "acts"), version=Version(None, None))
    stream = ActivationStream("big", batches(), estimated_bytes=5 * 2**30)
    with pytest.raises(DatasetError, match=r"5\.00 GiB .* 0\.00 GiB free") as raised:
        dataset.save(stream)
    assert isinstance(raised.value.__cause__, ActivationStoreError)
    assert not any(path.is_file() for path in tmp_path.rglob("*"))
