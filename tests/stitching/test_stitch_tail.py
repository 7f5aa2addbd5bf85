"""``ModelHandle.logits_from_layer`` runs only the blocks after the layer (both families), reproduces the plain
forward pass exactly from the model's own residual stream, and lets gradients into the residual."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from tests.stitching.toys import (
    HF_TINY,
    N_CTX,
    VOCAB,
    bridge_config,
    bridge_handle,
    hf_handle,
)
from thinkalike.models.bridge import BridgeHandle
from thinkalike.models.native_forward import bridge_path, native_forward


def _block_calls(blocks):
    calls = [0] * len(blocks)
    handles = [
        block.register_forward_hook(lambda _m, _a, _o, i=i: calls.__setitem__(i, calls[i] + 1))
        for i, block in enumerate(blocks)
    ]
    return calls, handles


def _handles():
    out = [(mt, hf_handle(mt)) for mt in HF_TINY]
    out += [
        ("bridge-gelu", bridge_handle("gelu", bridge_config(32, "gelu"))),
        ("bridge-solu", bridge_handle("solu", bridge_config(32, "solu_ln"))),
        ("bridge-bidirectional", bridge_handle("enc", bridge_config(32, "gelu", attention_dir="bidirectional"))),
    ]
    return out


HANDLES = _handles()


def _blocks(handle):
    return handle.blocks if hasattr(handle, "blocks") else handle.module.blocks


@pytest.fixture(scope="module")
def tl_gpt2(tmp_path_factory):
    """A TransformerBridge wrapping a transformers GPT-2 (the ``tl:`` source)."""
    from thinkalike.models.bridge import load_bridge_handle

    directory = tmp_path_factory.mktemp("tl_gpt2")
    hf_handle("gpt2").module.save_pretrained(directory)
    return load_bridge_handle("GPT2LMHeadModel", str(directory), None, "tl-gpt2")


def test_tail_only_on_a_bridge_over_transformers(tl_gpt2):
    _check_tail_only("tl-gpt2", tl_gpt2)


@pytest.mark.parametrize("name,handle", HANDLES, ids=[n for n, _ in HANDLES])
def test_tail_only_exact_and_differentiable(name, handle):
    """Through each model's own modules (for a native bridge: the bridge itself, not the fast path)."""
    with bridge_path(handle.module) if isinstance(handle, BridgeHandle) else nullcontext():
        _check_tail_only(name, handle)


@pytest.mark.parametrize(
    "name,handle",
    [(n, h) for n, h in HANDLES if n.startswith("bridge")],
    ids=[n for n, _ in HANDLES if n.startswith("bridge")],
)
def test_tail_only_on_the_native_fast_path(name, handle):
    """The fast path (thinkalike.models.native_forward) runs native bridges without hooks: its tail from the
    stream it computed reproduces its own forward pass exactly, gradients reach the residual, and it agrees with
    the bridge's tail to float round-off."""
    ids = torch.randint(0, VOCAB, (3, N_CTX), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[2, -3:] = 0
    assert native_forward(handle.module, N_CTX, mask) is not None
    with torch.no_grad():
        streams = handle.residual_streams(ids, mask)
        reference = handle.logits(ids, mask)
        with bridge_path(handle.module):
            bridge_streams = handle.residual_streams(ids, mask)
    torch.testing.assert_close(streams, bridge_streams, rtol=1e-5, atol=1e-5)
    for layer in range(handle.n_layers + 1):
        residual = streams[layer].clone().requires_grad_(True)
        out = handle.logits_from_layer(residual, layer, ids, mask)
        assert torch.equal(out, reference), (name, layer, float((out - reference).abs().max()))
        out[mask.bool()].logsumexp(-1).sum().backward()
        assert residual.grad is not None and residual.grad.abs().sum() > 0
        with bridge_path(handle.module), torch.no_grad():
            through_bridge = handle.logits_from_layer(streams[layer], layer, ids, mask)
        torch.testing.assert_close(out.detach(), through_bridge, rtol=1e-5, atol=1e-5)


def _check_tail_only(name, handle):
    ids = torch.randint(0, VOCAB, (3, N_CTX), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[2, -3:] = 0  # right padding
    with torch.no_grad():
        streams = handle.residual_streams(ids, mask)
        reference = handle.logits(ids, mask)
    blocks = _blocks(handle)
    for layer in range(handle.n_layers + 1):
        calls, hooks = _block_calls(blocks)
        residual = streams[layer].clone().requires_grad_(True)
        try:
            out = handle.logits_from_layer(residual, layer, ids, mask)
        finally:
            for hook in hooks:
                hook.remove()
        # only blocks layer … n_layers − 1 ran, each once
        assert calls == [0] * layer + [1] * (handle.n_layers - layer), (name, layer, calls)
        # exactly the plain forward pass (same operations from the same residual)
        assert torch.equal(out, reference), (name, layer, float((out - reference).abs().max()))
        out[mask.bool()].logsumexp(-1).sum().backward()
        assert residual.grad is not None and residual.grad.abs().sum() > 0
    # the block list is restored: a plain forward runs every block again
    calls, hooks = _block_calls(blocks)
    with torch.no_grad():
        torch.testing.assert_close(handle.logits(ids, mask), reference)
    for hook in hooks:
        hook.remove()
    assert calls == [1] * handle.n_layers


def test_tail_substitution_changes_logits_and_restores_after_errors():
    handle = hf_handle("gpt2")
    ids = torch.randint(0, VOCAB, (2, N_CTX), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        streams = handle.residual_streams(ids, mask)
        changed = handle.logits_from_layer(streams[1] + 1.0, 1, ids, mask)
        assert not torch.allclose(changed, handle.logits(ids, mask))
        with pytest.raises(ValueError, match="shape"):
            handle.logits_from_layer(streams[1][:, :-1], 1, ids, mask)
    assert len(handle.blocks) == handle.n_layers
    assert not handle.blocks[1]._forward_pre_hooks
