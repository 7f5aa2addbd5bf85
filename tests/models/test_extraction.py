"""Batched residual-stream extraction."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.extraction import iter_residual_batches  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402


@pytest.fixture
def corpus():
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(5, 100, (5, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[3, 4:] = 0
    return ids, mask


@pytest.mark.parametrize("mt", ["gpt_neox", "bert"])
def test_batches_cover_the_corpus_and_match_the_handle(loaded_handles, corpus, mt):
    handle = loaded_handles[mt]
    ids, mask = corpus
    batches = list(iter_residual_batches(handle, ids.numpy(), mask.numpy(), batch_size=2, progress=False))
    assert [b["sequence_start"] for b in batches] == [0, 2, 4]
    assert [b["residual"].shape for b in batches] == [(3, 2, 6, handle.d_model)] * 2 + [(3, 1, 6, handle.d_model)]
    full = np.concatenate([b["residual"] for b in batches], axis=1)
    assert full.dtype == np.float32
    with torch.no_grad():
        expected = handle.residual_streams(ids, mask).numpy()
    np.testing.assert_allclose(full, expected, rtol=1e-4, atol=1e-5)


def test_float16_output_and_default_mask(loaded_handles, corpus):
    handle = loaded_handles["gpt2"]
    ids, _ = corpus
    (only,) = iter_residual_batches(handle, ids, None, batch_size=8, dtype=torch.float16, progress=True)
    assert only["residual"].dtype == np.float16 and only["residual"].shape == (3, 5, 6, 32)
    with pytest.raises(ValueError, match="dtype"):
        next(iter_residual_batches(handle, ids, None, batch_size=8, dtype=torch.int64))
    with pytest.raises(ValueError, match="shape"):
        next(iter_residual_batches(handle, ids, ids[:, :3], batch_size=8))


def test_no_grad_and_lazy(loaded_handles, corpus):
    handle = loaded_handles["llama"]
    ids, mask = corpus
    calls = []
    original = handle.residual_streams

    def spy(*args):
        out = original(*args)
        calls.append(out.requires_grad)
        return out

    handle.residual_streams = spy
    try:
        it = iter_residual_batches(handle, ids, mask, batch_size=2, progress=False)
        assert calls == []
        next(it)
        assert calls == [False]  # one batch at a time, without autograd
    finally:
        del handle.residual_streams


def test_non_finite_values_name_the_model_and_layer(build_tiny, corpus):
    module = build_tiny("gpt2")
    with torch.no_grad():
        module.transformer.h[1].mlp.c_proj.weight[0, 0] = float("nan")  # block 1 -> layer 2
    handle = HFModelHandle("broken-gpt2", "test", module)
    ids, mask = corpus
    with pytest.raises(ValueError, match=r"'broken-gpt2'.*NaN/Inf.*layer 2"):
        next(iter_residual_batches(handle, ids, mask, batch_size=2, progress=False))
    with torch.no_grad():
        module.transformer.h[1].mlp.c_proj.weight[0, 0] = 0.0
        module.transformer.h[0].mlp.c_proj.bias[0] = 1e6  # finite in float32, overflows float16 at layer 1
    assert next(iter_residual_batches(handle, ids, mask, batch_size=2, progress=False))["residual"].shape[0] == 3
    with pytest.raises(ValueError, match=r"'broken-gpt2'.*overflow.*layer 1"):
        next(iter_residual_batches(handle, ids, mask, batch_size=2, dtype=torch.float16, progress=False))


def test_activation_batches_carry_their_attention_mask(loaded_handles):
    from thinkalike.models.extraction import iter_activation_batches

    handle = loaded_handles["gpt2"]
    ids = torch.randint(5, 60, (5, 7), generator=torch.Generator().manual_seed(0))
    mask = np.ones((5, 7), dtype=np.int64)
    mask[3, 4:] = 0
    batches = list(iter_activation_batches(handle, ids, mask, batch_size=2, progress=False))
    assert [b.sequence_start for b in batches] == [0, 2, 4]
    np.testing.assert_array_equal(np.concatenate([b.attention_mask for b in batches]), mask)
    assert sum(b.tokens().shape[1] for b in batches) == mask.sum()


def test_only_a_narrowing_cast_is_checked_for_overflow():
    from thinkalike.models.extraction import narrows

    assert narrows(torch.float32, torch.float16) and narrows(torch.bfloat16, torch.float16)
    assert not narrows(torch.bfloat16, torch.float32) and not narrows(torch.float16, torch.float32)
    assert not narrows(torch.float32, torch.float32) and not narrows(torch.float32, torch.float64)
