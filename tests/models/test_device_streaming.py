"""Streaming CKA with the streams kept on the model's device, and extraction whose host copies overlap the next
forward pass: the device code path run on the CPU (``device: cpu``), against the host path and float64."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tests.stitching.toys import VOCAB, hf_handle  # noqa: E402
from thinkalike.cka.compute import compute_cka  # noqa: E402
from thinkalike.cka.settings import CKASettings  # noqa: E402
from thinkalike.models import extraction  # noqa: E402
from thinkalike.models.activation_store import ActivationBatch, ActivationStream  # noqa: E402
from thinkalike.models.extraction import ResidualBatches, overlapped_host_copies  # noqa: E402

N_SEQUENCES, N_CTX = 12, 16


def sequences(padded: bool) -> dict[str, np.ndarray]:
    """Random ids; with ``padded`` every third sequence ends in 5 padding positions."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, size=(N_SEQUENCES, N_CTX))
    mask = np.ones_like(ids)
    if padded:
        mask[::3, -5:] = 0
        ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def index_table(data: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per real token: each sequence is one sentence, words of 3 tokens, the first token special."""
    sequence, position = np.nonzero(data["attention_mask"])
    return pd.DataFrame(
        {
            "sequence": sequence,
            "position": position,
            "token_id": data["input_ids"][sequence, position],
            "sentence_id": sequence,
            "word_index": np.where(position == 0, -1, (position - 1) // 3),
            "is_special": position == 0,
        }
    )


def stream(handle, data, dtype=torch.float32, on_device=False) -> ActivationStream:
    batches = ResidualBatches(handle, data, batch_size=5, dtype=dtype, progress=False, on_device=on_device)
    return ActivationStream(handle.name, batches, n_layers=handle.n_layers)


def cka_of(stream_a, stream_b, index, pooling="token") -> np.ndarray:
    settings = CKASettings(batch_tokens=40, n_bootstrap=0, n_permutations=0, pooling=pooling)
    return compute_cka(stream_a, index, stream_b, index, settings, model_a="a", model_b="b", device="cpu").cka


@pytest.fixture(scope="module")
def handles():
    return hf_handle("gpt_neox", seed=0), hf_handle("llama", seed=1)


@pytest.mark.parametrize("pooling", ["token", "word", "sequence"])
def test_on_device_streams_give_the_host_paths_cka_and_float64s_within_the_cpu_tolerance(handles, pooling):
    data = sequences(padded=True)
    index = index_table(data)
    host = cka_of(stream(handles[0], data), stream(handles[1], data), index, pooling)
    device = cka_of(
        stream(handles[0], data).kept_on_device(), stream(handles[1], data).kept_on_device(), index, pooling
    )
    reference = cka_of(stream(handles[0], data, torch.float64), stream(handles[1], data, torch.float64), index, pooling)
    assert np.isfinite(host).all() and host.shape == (4, 4)
    np.testing.assert_allclose(device, host, rtol=0, atol=1e-12)
    np.testing.assert_allclose(device, reference, rtol=0, atol=1e-6)  # float32 activations, float64 reductions
    assert np.ptp(device) > 0.05  # the layers differ: the comparison is not between constants


def test_streams_kept_on_the_device_never_copy_to_the_host(handles, monkeypatch):
    def refuse(*_, **__):
        raise AssertionError("a batch was copied to the host")

    monkeypatch.setattr(extraction, "overlapped_host_copies", refuse)
    monkeypatch.setattr(extraction, "to_host", refuse)
    data = sequences(padded=True)
    on_device = stream(handles[0], data).kept_on_device()
    assert all(isinstance(batch.token_rows, torch.Tensor) for batch in on_device)
    assert np.isfinite(cka_of(on_device, stream(handles[1], data).kept_on_device(), index_table(data))).all()
    with pytest.raises(AssertionError, match="copied to the host"):
        list(stream(handles[0], data))  # the host path does copy: the patch is in the path


def test_a_batch_without_padding_keeps_its_rows_in_place_on_the_device():
    residual = torch.randn(3, 2, 4, 5)
    unpadded = ActivationBatch.from_padded(residual, np.ones((2, 4), dtype=np.int64), 0)
    assert unpadded.token_rows.data_ptr() == residual.data_ptr()
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    padded = ActivationBatch.from_padded(residual, mask, 0)
    expected = residual.numpy().reshape(3, 8, 5)[:, mask.reshape(-1).astype(bool)]
    np.testing.assert_array_equal(padded.token_rows.numpy(), expected)


def test_host_copies_with_lookahead_take_the_next_batch_before_handing_over_this_one():
    pulled: list[int] = []

    def batches():
        for start in range(4):
            pulled.append(start)
            yield start, torch.full((2, 3), float(start), dtype=torch.bfloat16)

    handed = []
    for copy in overlapped_host_copies(batches(), torch.float32, lookahead=1):
        handed.append((copy.start, list(pulled)))
        assert copy.streams.dtype == torch.float32 and float(copy.streams[0, 0]) == copy.start
        assert copy.source_dtype == torch.bfloat16 and copy.sums.tolist() == [3.0 * copy.start] * 2
    assert handed == [(0, [0, 1]), (1, [0, 1, 2]), (2, [0, 1, 2, 3]), (3, [0, 1, 2, 3])]
    plain = [copy.start for copy in overlapped_host_copies(batches(), torch.float32)]
    assert plain == [0, 1, 2, 3]  # no lookahead on the CPU by default


def test_a_nan_is_still_named_by_layer_through_the_overlapped_copies(handles):
    handle = hf_handle("gpt_neox", seed=0)
    with torch.no_grad():
        handle.module.gpt_neox.layers[1].mlp.dense_4h_to_h.bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="NaN/Inf in the residual stream at layer 2"):
        list(stream(handle, sequences(padded=False)))
    with pytest.raises(ValueError, match="NaN/Inf in the residual stream at layer 2"):
        list(stream(handle, sequences(padded=False)).kept_on_device())
