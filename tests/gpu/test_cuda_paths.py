"""The CUDA paths against the CPU results: residual streams (float32 and bfloat16), CKA, stitching, the factored
top-k and an MLEM fit. Skipped without a GPU; run on a GPU machine with ``python -m pytest tests/gpu``."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tests.stitching.toys import hf_handle, sample_sequences  # noqa: E402
from thinkalike.embedding.topk import top_k_of_product  # noqa: E402
from thinkalike.measures.cka import cka  # noqa: E402
from thinkalike.stitching import stitch  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SETTINGS = {
    "steps": 30,
    "warmup_steps": 3,
    "tokens_per_step": 256,
    "batch_size": 8,
    "eval_batch_size": 8,
    "eval_every": 10,
    "curve_eval_batches": 1,
    "n_bootstrap": 200,
    "seed": 0,
}


@torch.no_grad()
def _streams(handle, ids: torch.Tensor) -> torch.Tensor:
    return handle.residual_streams(ids.to(handle.device), torch.ones_like(ids).to(handle.device)).float().cpu()


def test_residual_streams_on_cuda_match_the_cpu_in_float32_and_closely_in_bfloat16():
    handle = hf_handle("gpt_neox")
    ids = torch.as_tensor(sample_sequences(handle, 4))
    on_cpu = _streams(handle, ids)
    on_gpu = _streams(handle.to("cuda"), ids)
    assert torch.allclose(on_gpu, on_cpu, atol=1e-4, rtol=1e-4)
    in_bf16 = _streams(handle.to("cuda", torch.bfloat16), ids)
    assert float((in_bf16 - on_cpu).norm() / on_cpu.norm()) < 3e-2


def test_cka_on_cuda_equals_the_cpu_in_float64():
    generator = np.random.default_rng(0)
    x = generator.standard_normal((2000, 64))
    y = x @ generator.standard_normal((64, 48)) + 0.5 * generator.standard_normal((2000, 48))
    on_cpu = cka(x, y)
    on_gpu = cka(
        torch.as_tensor(x, dtype=torch.float32, device="cuda"), torch.as_tensor(y, dtype=torch.float32, device="cuda")
    )
    assert on_gpu == pytest.approx(on_cpu, abs=1e-5)


def test_stitching_on_cuda_identity_is_exact_and_affine_matches_the_cpu():
    f_cpu, g_cpu = hf_handle("gpt_neox", seed=0), hf_handle("gpt_neox", seed=1)
    tokens = sample_sequences(g_cpu, 48)
    train, evaluation = tokens[:32], tokens[32:]
    on_cpu = stitch(f_cpu, g_cpu, 2, 2, "affine", train, evaluation, SETTINGS, progress=False)
    f_gpu, g_gpu = hf_handle("gpt_neox", seed=0).to("cuda"), hf_handle("gpt_neox", seed=1).to("cuda")
    own = stitch(g_gpu, g_gpu, 2, 2, "identity", train, evaluation, SETTINGS, progress=False)
    assert own.evaluation.penalty == pytest.approx(0.0, abs=1e-6)
    on_gpu = stitch(f_gpu, g_gpu, 2, 2, "affine", train, evaluation, SETTINGS, progress=False)
    assert on_gpu.g_loss == pytest.approx(on_cpu.g_loss, abs=1e-4)
    assert on_gpu.stitched_loss == pytest.approx(on_cpu.stitched_loss, abs=2e-3)


def test_factored_top_k_on_cuda_equals_the_dense_product():
    generator = torch.Generator().manual_seed(0)
    left, right = torch.randn(3000, 64, generator=generator), torch.randn(64, 2500, generator=generator)
    found = top_k_of_product(left.cuda(), right.cuda(), 20, block_rows=256)
    dense = torch.topk((left @ right).flatten(), 20)
    assert torch.allclose(torch.as_tensor(found.values).cpu().sort(descending=True).values, dense.values, atol=1e-3)


def test_mlem_fit_on_cuda_recovers_the_planted_ranking():
    from scipy.stats import weightedtau

    from tests.mlem.planted import planted_stimuli, true_scales
    from thinkalike.mlem.features import encode_features
    from thinkalike.mlem.fit import MLEMSettings, fit_layer

    frame, vectors = planted_stimuli()
    features = encode_features(frame, {name: "categorical" for name in frame})
    fit = fit_layer(features, vectors, MLEMSettings(pairs_per_step=512, n_folds=3, heldout_pairs=2000), device="cuda")
    assert weightedtau(fit.weights.mean(axis=0), true_scales(features.names)).statistic >= 0.9
    assert fit.spearman.min() > 0.8


def test_extraction_from_cuda_lands_in_host_memory_with_the_cpu_values():
    from thinkalike.models.extraction import iter_residual_batches

    handle = hf_handle("gpt_neox")
    ids = torch.as_tensor(sample_sequences(handle, 4))
    on_cpu = [batch["residual"] for batch in iter_residual_batches(handle, ids, batch_size=2, progress=False)]
    gpu = handle.to("cuda")
    on_gpu = [batch["residual"] for batch in iter_residual_batches(gpu, ids, batch_size=2, progress=False)]
    assert [a.dtype for a in on_gpu] == [np.float32, np.float32]
    for a, b in zip(on_gpu, on_cpu):
        assert np.allclose(a, b, atol=1e-4, rtol=1e-4)
    in_bf16 = gpu.to("cuda", torch.bfloat16)
    widened = [batch["residual"] for batch in iter_residual_batches(in_bf16, ids, batch_size=2, progress=False)]
    assert widened[0].dtype == np.float32 and np.isfinite(widened[0]).all()


def test_overlapped_host_copies_from_cuda_equal_a_plain_copy_and_look_one_batch_ahead():
    from thinkalike.models.extraction import overlapped_host_copies

    generator = torch.Generator(device="cuda").manual_seed(0)
    device_batches = [
        torch.randn(5, 64, 32, device="cuda", dtype=torch.bfloat16, generator=generator) for _ in range(4)
    ]
    pulled: list[int] = []

    def batches():
        for start, batch in enumerate(device_batches):
            pulled.append(start)
            yield start, batch

    for copy in overlapped_host_copies(batches(), torch.float32):
        assert copy.streams.is_pinned() and copy.streams.dtype == torch.float32
        assert len(pulled) == min(copy.start + 2, 4)  # the next forward pass was queued before this copy was waited
        assert torch.equal(copy.streams, device_batches[copy.start].float().cpu())
        assert torch.allclose(copy.sums, device_batches[copy.start].flatten(1).double().sum(1).cpu())


def test_streaming_cka_kept_on_cuda_equals_the_host_path_on_the_cpu():
    import pandas as pd

    from thinkalike.cka.compute import compute_cka
    from thinkalike.cka.settings import CKASettings
    from thinkalike.models.activation_store import ActivationStream
    from thinkalike.models.extraction import ResidualBatches

    handle_a, handle_b = hf_handle("gpt_neox"), hf_handle("llama", seed=1)
    ids = sample_sequences(handle_a, 8)
    data = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    sequence, position = np.nonzero(data["attention_mask"])
    index = pd.DataFrame(
        {
            "sequence": sequence,
            "position": position,
            "token_id": ids[sequence, position],
            "sentence_id": sequence,
            "word_index": position,
            "is_special": False,
        }
    )
    settings = CKASettings(batch_tokens=64, n_bootstrap=0, n_permutations=0)

    def cka(a, b, device, on_device):
        streams = [
            ActivationStream(h.name, ResidualBatches(h, data, 3, torch.float32, progress=False), n_layers=h.n_layers)
            for h in (a, b)
        ]
        if on_device:
            streams = [stream.kept_on_device() for stream in streams]
        return compute_cka(streams[0], index, streams[1], index, settings, model_a="a", model_b="b", device=device).cka

    on_cpu = cka(handle_a, handle_b, "cpu", on_device=False)
    on_gpu = cka(handle_a.to("cuda"), handle_b.to("cuda"), "cuda", on_device=True)
    assert np.isfinite(on_cpu).all()
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=0, atol=1e-4)  # float32 forward passes on two devices
