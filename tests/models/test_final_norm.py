"""``final_norm``: the final norm's output as one more layer, equal to transformers' ``hidden_states[-1]``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.models.bridge import BridgeHandle, build_bridge_module, load_bridge_handle
from thinkalike.models.extraction import check_layers, iter_activation_batches
from thinkalike.models.handle import NoFinalNormError
from thinkalike.models.hf import HFModelHandle
from thinkalike.models.sources import load_model


def _reference_hidden_states(module: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> tuple:
    with torch.no_grad():
        return module(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("model_type", ["gpt2", "gpt_neox", "llama", "mamba"])
def test_final_norm_layer_is_transformers_last_hidden_state(model_type, loaded_handles, batch):
    handle = loaded_handles[model_type]
    ids, mask = batch
    with torch.no_grad():
        plain = handle.residual_streams(ids, mask)
        streams = handle.layer_streams(ids, mask, final_norm=True)
    reference = _reference_hidden_states(handle.module, ids, mask)
    assert handle.has_final_norm
    assert streams.shape[0] == handle.n_layers + 2 == len(reference) + 1
    torch.testing.assert_close(streams[:-1], plain, rtol=0, atol=0)
    torch.testing.assert_close(streams[-1], reference[-1], rtol=1e-5, atol=1e-5)
    # the last residual stream is pre-final-norm: not what transformers calls the last hidden state
    assert (streams[-2] - reference[-1]).abs().max() > 0.1


def test_gguf_final_norm_layer_is_its_last_hidden_state(tiny_llama_gguf, batch):
    path, module = tiny_llama_gguf
    handle = load_model(f"gguf:{path}", name="gguf", device="cpu")
    ids, mask = batch
    with torch.no_grad():
        streams = handle.layer_streams(ids, mask, final_norm=True)
    torch.testing.assert_close(
        streams[-1], _reference_hidden_states(module.eval(), ids, mask)[-1], rtol=1e-4, atol=1e-4
    )


def test_tl_source_final_norm_layer_is_transformers_last_hidden_state(tiny_checkpoints, batch):
    from transformers import AutoModelForCausalLM

    directory = tiny_checkpoints["gpt2"]
    handle = load_bridge_handle("gpt2", str(directory), None, "tl-gpt2")
    hf = AutoModelForCausalLM.from_pretrained(directory, local_files_only=True, attn_implementation="eager").eval()
    ids = batch[0]
    mask = torch.ones_like(ids)
    with torch.no_grad():
        streams = handle.layer_streams(ids, mask, final_norm=True)
    torch.testing.assert_close(streams[-1], _reference_hidden_states(hf, ids, mask)[-1], rtol=1e-5, atol=1e-5)


def test_zoo_bridge_final_norm_layer_is_its_ln_final_output():
    module = build_bridge_module({"d_model": 16, "n_layers": 2, "n_heads": 2, "d_vocab": 40, "n_ctx": 12, "seed": 3})
    with torch.no_grad():
        for parameter in module.parameters():  # move norm gains and biases off 1 and 0
            parameter.add_(0.1 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(4)))
    module.eval()
    handle = BridgeHandle.from_module("zoo-gelu", "zoo:zoo-gelu", module, None)
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        streams = handle.layer_streams(ids, None, final_norm=True)
        _, cache = module.run_with_cache(ids)
    assert streams.shape[0] == 4
    torch.testing.assert_close(streams[-1], cache["ln_final.hook_out"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(streams[-2], cache["blocks.1.hook_resid_post"], rtol=1e-6, atol=1e-6)


def test_models_without_a_final_norm_say_so(build_tiny, batch):
    bert = HFModelHandle("enc", "hf:enc", build_tiny("bert"))
    assert not bert.has_final_norm
    with pytest.raises(NoFinalNormError, match=r"activations\.final_norm.*'enc'.*post-LN"):
        bert.layer_streams(*batch, final_norm=True)
    no_norm = build_bridge_module(
        {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_vocab": 40, "n_ctx": 12, "normalization_type": None}
    )
    handle = BridgeHandle.from_module("plain", "zoo:plain", no_norm.eval(), None)
    with pytest.raises(NoFinalNormError, match="normalization_type is null"):
        list(iter_activation_batches(handle, np.zeros((1, 4), dtype=np.int64), np.ones((1, 4)), final_norm=True))


def test_extraction_stores_the_final_norm_layer_only_when_asked(loaded_handles, batch):
    handle = loaded_handles["gpt2"]
    ids, mask = batch
    top = handle.n_layers + 1
    with pytest.raises(ValueError, match=r"activations\.layers.*before the final norm"):
        check_layers([top], handle.n_layers, handle.name)
    assert check_layers([0, top], handle.n_layers, handle.name, final_norm=True) == [0, top]
    (stored,) = list(
        iter_activation_batches(
            handle, ids.numpy(), mask.numpy(), batch_size=4, progress=False, layers=[top], final_norm=True
        )
    )
    reference = _reference_hidden_states(handle.module, ids, mask)[-1]
    real = mask.numpy().reshape(-1).astype(bool)
    np.testing.assert_allclose(
        stored.tokens()[0], reference.reshape(-1, handle.d_model).numpy()[real], rtol=1e-5, atol=1e-5
    )
