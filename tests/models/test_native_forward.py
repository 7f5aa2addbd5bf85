"""The plain forward pass of native zoo bridges (thinkalike.models.native_forward) against the bridge itself:
the same logits and the same gradient for every parameter, to float round-off, for each covered
configuration; the bridge runs wherever the fast path does not cover a call."""

from __future__ import annotations

import itertools

import pytest
import torch

from thinkalike.models.bridge import bridge_logits, build_bridge_module
from thinkalike.models.native_forward import NativeForward, bridge_path, native_forward

VOCAB, N_CTX = 40, 12


def _module(act_fn="gelu", positions="standard", direction="causal", **extra):
    config = {
        "d_model": 24,
        "n_layers": 2,
        "n_heads": 3,
        "d_head": 8,
        "d_mlp": 48,
        "act_fn": act_fn,
        "d_vocab": VOCAB,
        "n_ctx": N_CTX,
        "seed": 3,
        "positional_embedding_type": positions,
        "attention_dir": direction,
        **extra,
    }
    module = build_bridge_module(config)
    with torch.no_grad():  # non-trivial LayerNorm parameters, so that a swapped scale or bias shows
        for name, parameter in module.named_parameters():
            if parameter.dim() == 1:
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(len(name))))
    return module


def _batch(padded: bool):
    ids = torch.randint(0, VOCAB, (4, N_CTX), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    if padded:
        mask[1, 7:] = 0
        mask[3, 2:] = 0
    return ids, mask


def _loss_and_grads(module, ids, mask, fast: bool):
    module.zero_grad(set_to_none=True)
    if fast:
        logits = bridge_logits(module, ids, mask)
    else:
        with bridge_path(module):
            logits = bridge_logits(module, ids, mask)
    keep = mask.bool()
    # a loss that reaches every logit of a real position, with position-dependent weights
    weights = torch.linspace(0.5, 1.5, VOCAB)
    (logits[keep].log_softmax(-1) * weights).sum().backward()
    return logits.detach(), {name: p.grad.clone() for name, p in module.named_parameters()}


CONFIGS = [
    dict(act_fn=a, positions=p, direction=d)
    for a, p, d in itertools.product(["gelu", "solu_ln", "relu"], ["standard", "rotary"], ["causal", "bidirectional"])
]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "right-padded"])
@pytest.mark.parametrize("config", CONFIGS, ids=["-".join(c.values()) for c in CONFIGS])
def test_fast_path_equals_the_bridge(config, padded):
    module = _module(**config)
    ids, mask = _batch(padded)
    assert native_forward(module, N_CTX, mask) is not None
    fast_logits, fast_grads = _loss_and_grads(module, ids, mask, fast=True)
    bridge_logits_, bridge_grads = _loss_and_grads(module, ids, mask, fast=False)
    keep = mask.bool()
    torch.testing.assert_close(fast_logits[keep], bridge_logits_[keep], rtol=1e-5, atol=2e-5)
    assert fast_grads.keys() == bridge_grads.keys() and len(fast_grads) >= 15
    # round-off relative to the model's gradient scale (the keys' biases have a gradient of exactly 0 in exact
    # arithmetic: softmax ignores a shift shared by a query's scores; both paths leave ~1e-7 of noise there)
    scale = max(float(grad.abs().max()) for grad in bridge_grads.values())
    for name, grad in fast_grads.items():
        difference = float((grad - bridge_grads[name]).abs().max())
        assert difference <= 1e-6 * scale, (name, difference, scale)
        if ".k." not in name or "bias" not in name:
            assert float(grad.abs().max()) > 1e-3 * scale, name  # every other parameter takes part


def test_the_fast_path_is_taken_and_trains_the_bridges_own_parameters():
    module = _module()
    ids, mask = _batch(False)
    fast = native_forward(module, N_CTX, mask)
    parameters = list(module.parameters())
    assert {id(p) for p in fast.weights.values() if isinstance(p, torch.nn.Parameter)} == {id(p) for p in parameters}
    optimizer = torch.optim.SGD(parameters, lr=0.1)
    before = bridge_logits(module, ids, mask).detach()
    bridge_logits(module, ids, mask).logsumexp(-1).mean().backward()
    optimizer.step()
    after_fast = bridge_logits(module, ids, mask).detach()
    with bridge_path(module):
        after_bridge = bridge_logits(module, ids, mask).detach()
    assert not torch.allclose(before, after_fast)
    torch.testing.assert_close(after_fast, after_bridge, rtol=1e-5, atol=2e-5)


def test_the_bridge_runs_where_the_fast_path_does_not_cover_the_call():
    module = _module()
    ids, mask = _batch(False)
    left = mask.clone()
    left[0, :3] = 0  # left padding: the bridge derives other positions
    assert native_forward(module, N_CTX, left) is None
    assert native_forward(module, N_CTX + 1, None) is None  # longer than n_ctx: the bridge raises its own error
    assert not NativeForward.of(module).covers(N_CTX, torch.zeros_like(mask))  # a row without a real token
    seen = []
    module.blocks[0].hook_out.add_hook(lambda value, hook: seen.append(hook.name) or value)
    try:
        assert native_forward(module, N_CTX, mask) is None  # a user's hook must see the forward pass
        bridge_logits(module, ids, mask)
    finally:
        module.reset_hooks()
    assert seen == ["blocks.0.hook_out"]
    assert native_forward(module, N_CTX, mask) is not None
    with bridge_path(module):
        assert native_forward(module, N_CTX, mask) is None
    assert native_forward(module, N_CTX, mask) is not None
    assert NativeForward.of(_module(normalization_type="RMS")) is None  # not covered: RMS norm


def test_the_cache_follows_replaced_parameters():
    module = _module()
    ids, mask = _batch(False)
    first = native_forward(module, N_CTX, mask)
    assert native_forward(module, N_CTX, mask) is first  # built once
    other = _module(act_fn="gelu")
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.mul_(1.5)
    module.load_state_dict(other.state_dict(), assign=True)
    rebuilt = native_forward(module, N_CTX, mask)
    assert rebuilt is not first
    with bridge_path(module):
        expected = bridge_logits(module, ids, mask)
    torch.testing.assert_close(rebuilt.logits(ids, mask), expected, rtol=1e-5, atol=2e-5)
