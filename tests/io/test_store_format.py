"""The activation store keeps only real tokens, in the asked dtype and layers, and refuses what will not fit."""

from collections import namedtuple

import numpy as np
import pytest
import torch
from kedro.io.core import DatasetError, Version

from thinkalike.io.datasets import ActivationStoreDataset
from thinkalike.models.activation_store import (
    ActivationBatch,
    ActivationStoreError,
    ActivationStream,
    write_activation_store,
)


def padded_batches(n_batches=3, layers=4, batch=3, n_ctx=6, width=5, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for index in range(n_batches):
        mask = np.ones((batch, n_ctx), dtype=np.int64)
        mask[1, 4:] = 0
        mask[2, 2:] = 0
        out.append((rng.standard_normal((layers, batch, n_ctx, width)).astype(np.float32), mask, index * batch))
    return out


def test_only_real_tokens_are_stored(tmp_path):
    raw = padded_batches()
    store = write_activation_store(tmp_path / "s", [ActivationBatch.from_padded(*b) for b in raw], model="m")
    real = sum(int(mask.sum()) for _, mask, _ in raw)
    padded = sum(residual.size for residual, _, _ in raw)
    on_disk = sum(path.stat().st_size for path in (tmp_path / "s").glob("shard_*"))
    assert store.meta["n_tokens"] == real
    assert real * 4 * 5 * 4 < on_disk < padded * 4  # float32 real tokens (+ headers and masks), not padding
    for (residual, mask, _), loaded in zip(raw, store):
        keep = mask.astype(bool)
        np.testing.assert_array_equal(loaded.residual[:, keep], residual[:, keep])
        np.testing.assert_array_equal(loaded.tokens(), residual[:, keep])


@pytest.mark.parametrize(("dtype", "tolerance"), [("float16", 1e-3), ("bfloat16", 8e-3)])
def test_smaller_store_dtypes_round_trip(tmp_path, dtype, tolerance):
    raw = padded_batches(1)
    store = write_activation_store(tmp_path / "s", [ActivationBatch.from_padded(*raw[0])], model="m", dtype=dtype)
    loaded = store.batch(0).tokens()
    expected = ActivationBatch.from_padded(*raw[0]).tokens()
    assert store.dtype == dtype and loaded.dtype in (np.float16, np.float32)
    exact = torch.from_numpy(expected).to(getattr(torch, dtype)).float().numpy()
    np.testing.assert_array_equal(loaded.astype(np.float32), exact)  # exactly the rounded values
    assert np.abs(loaded - expected).max() <= tolerance * np.abs(expected).max()


def test_a_subset_of_layers_is_named_in_the_store(tmp_path):
    raw = padded_batches(2)
    batches = [ActivationBatch.from_padded(residual[[0, 3]], mask, start) for residual, mask, start in raw]
    store = write_activation_store(tmp_path / "s", batches, model="m", n_layers=3, layers=[0, 3])
    assert store.layers == [0, 3] and store.n_layers == 3
    np.testing.assert_array_equal(store.batch(1).tokens()[1], ActivationBatch.from_padded(*raw[1]).tokens()[3])


def test_a_store_that_would_not_fit_is_refused_before_writing(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    dataset = ActivationStoreDataset(filepath=str(tmp_path / "acts"), version=Version(None, None))
    stream = ActivationStream("big", [ActivationBatch.from_padded(*b) for b in padded_batches()],
                              estimated_bytes=5 * 2**30)
    with pytest.raises(DatasetError, match=r"5\.00 GiB .* 0\.00 GiB free") as raised:
        dataset.save(stream)
    assert isinstance(raised.value.__cause__, ActivationStoreError)
    assert not any(path.is_file() for path in tmp_path.rglob("*"))
