"""HFModelHandle on tiny random GPT-2, GPT-NeoX, BERT, Llama (GQA) and Mamba checkpoints."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.handle import PARAMETER_GROUPS, UnsupportedArchitectureError  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402

ALL = ["gpt2", "gpt_neox", "bert", "llama", "mamba"]
PRE_LN = ["gpt2", "gpt_neox", "llama", "mamba"]
ATTENTION = ["gpt2", "gpt_neox", "bert", "llama"]


def _run(handle, ids, mask):
    with torch.no_grad():
        return handle.module(input_ids=ids, attention_mask=mask, output_hidden_states=True)


@pytest.mark.parametrize("mt", ALL)
def test_dims_and_residual_shapes(loaded_handles, batch, mt):
    handle = loaded_handles[mt]
    ids, mask = batch
    assert isinstance(handle, HFModelHandle) and handle.n_layers == 2
    assert handle.is_causal == (mt != "bert")
    with torch.no_grad():
        res = handle.residual_streams(ids, mask)
    assert res.shape == (3, 2, 7, handle.d_model)
    assert handle.embedding_matrix().shape == (handle.dims.d_vocab, handle.d_model)
    assert handle.unembedding_matrix().shape == (handle.d_model, handle.dims.d_vocab)
    expected_d = {"gpt2": 32, "gpt_neox": 80, "bert": 32, "llama": 32, "mamba": 32}[mt]
    assert handle.d_model == expected_d and handle.dims.d_vocab == 100
    if mt == "gpt_neox":
        assert (handle.dims.n_heads, handle.dims.d_head, handle.dims.d_mlp) == (5, 16, 96)
    if mt == "mamba":
        assert handle.dims.d_mlp == 64


@pytest.mark.parametrize("mt", ALL)
def test_residuals_match_hidden_states_and_final_one_is_pre_norm(loaded_handles, batch, mt):
    handle = loaded_handles[mt]
    ids, mask = batch
    out = _run(handle, ids, mask)
    with torch.no_grad():
        res = handle.residual_streams(ids, mask)
    hs = out.hidden_states
    assert len(hs) == handle.n_layers + 1
    if mt == "mamba":
        # transformers' Mamba records (block 0 out, ..., block L-1 out, norm_f(last)): no embeddings.
        with torch.no_grad():
            torch.testing.assert_close(res[0], handle.module.backbone.embeddings(ids))
        torch.testing.assert_close(res[-1], hs[-2])  # the raw output of the last block
        hs = (res[0],) + tuple(hs[:-2]) + (hs[-1],)  # re-index like the other models
    for layer in range(handle.n_layers):
        torch.testing.assert_close(res[layer], hs[layer], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        normed = handle.final_norm(res[-1])
        bias = handle.unembedding_bias()
        logits = normed @ handle.unembedding_matrix() + (0 if bias is None else bias)
    torch.testing.assert_close(logits, out.logits, rtol=1e-4, atol=1e-4)
    if mt in PRE_LN:
        # HF's last hidden state is final_norm(residual); ours is the raw residual.
        assert not torch.allclose(res[-1], hs[-1], atol=1e-3)
        torch.testing.assert_close(normed, hs[-1], rtol=1e-5, atol=1e-5)
    else:  # BERT is post-LN: the block outputs are the hidden states; final_norm is the MLM head transform
        torch.testing.assert_close(res[-1], hs[-1], rtol=1e-5, atol=1e-5)


def test_final_residual_equals_running_the_blocks_by_hand(loaded_handles, batch):
    """GPT-2: wte + wpe, then each block, with no final LayerNorm."""
    handle = loaded_handles["gpt2"]
    ids, _ = batch
    tr = handle.module.transformer
    with torch.no_grad():
        x = tr.wte(ids) + tr.wpe(torch.arange(ids.shape[1]))[None]
        states = [x]
        for block in tr.h:
            out = block(x)
            x = out[0] if isinstance(out, tuple) else out
            states.append(x)
        res = handle.residual_streams(ids, torch.ones_like(ids))
    torch.testing.assert_close(res, torch.stack(states), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mt", ALL)
def test_logits_from_layer_identity_modification_and_grad(loaded_handles, batch, mt):
    handle = loaded_handles[mt]
    ids, mask = batch
    reference = _run(handle, ids, mask).logits
    with torch.no_grad():
        res = handle.residual_streams(ids, mask)
    for layer in range(handle.n_layers + 1):
        with torch.no_grad():
            logits = handle.logits_from_layer(res[layer], layer, ids, mask)
        torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-4)
    for layer in (0, handle.n_layers):
        residual = (res[layer] + 0.5 * torch.randn_like(res[layer])).requires_grad_(True)
        logits = handle.logits_from_layer(residual, layer, ids, mask)
        assert not torch.allclose(logits, reference, atol=1e-3)
        logits.square().sum().backward()
        assert residual.grad is not None and torch.isfinite(residual.grad).all()
        assert residual.grad.abs().sum() > 0
    with pytest.raises(IndexError):
        handle.logits_from_layer(res[0], handle.n_layers + 1, ids, mask)


def test_residual_streams_follow_the_callers_grad_mode(loaded_handles, batch):
    handle = loaded_handles["llama"]
    ids, mask = batch
    assert handle.module.get_input_embeddings().weight.requires_grad
    assert handle.residual_streams(ids, mask).requires_grad
    with torch.no_grad():
        assert not handle.residual_streams(ids, mask).requires_grad


# ---------------------------------------------------------------------- parameter groups
def _model_projections(mt: str, blk, x: torch.Tensor, n_heads: int, d_head: int):
    """q, k, v ``(n, heads, d_head)`` from the model's own modules, biases removed; and W_O's map."""

    def nobias(linear, inp):
        return linear(inp) - linear(torch.zeros_like(inp))

    n = x.shape[0]
    if mt == "gpt2":
        qkv = nobias(blk.attn.c_attn, x)
        q, k, v = (t.reshape(n, n_heads, d_head) for t in qkv.split(x.shape[-1], dim=-1))
        out = blk.attn.c_proj
    elif mt == "gpt_neox":
        qkv = nobias(blk.attention.query_key_value, x).view(n, n_heads, 3 * d_head)
        q, k, v = qkv.chunk(3, dim=-1)
        out = blk.attention.dense
    elif mt == "bert":
        att = blk.attention.self
        q, k, v = (nobias(m, x).reshape(n, n_heads, d_head) for m in (att.query, att.key, att.value))
        out = blk.attention.output.dense
    else:  # llama, GQA: repeat kv heads like repeat_kv
        att = blk.self_attn
        q = att.q_proj(x).reshape(n, n_heads, d_head)
        n_kv = att.k_proj.weight.shape[0] // d_head
        k, v = (
            m(x).reshape(n, n_kv, d_head).repeat_interleave(n_heads // n_kv, dim=1) for m in (att.k_proj, att.v_proj)
        )
        out = att.o_proj
    return q, k, v, (lambda z: nobias(out, z))


@pytest.mark.parametrize("mt", ATTENTION)
def test_parameter_groups_shapes_and_values(loaded_handles, mt):
    handle = loaded_handles[mt]
    H, dh, d, dm = handle.dims.n_heads, handle.dims.d_head, handle.d_model, handle.dims.d_mlp
    g = torch.Generator().manual_seed(0)
    for block in range(handle.n_layers):
        params = handle.layer_parameters(block)
        assert set(params) == set(PARAMETER_GROUPS)
        assert params["W_Q"].shape == params["W_K"].shape == params["W_V"].shape == (H, d, dh)
        assert params["W_O"].shape == (H, dh, d)
        assert params["FF_in"].shape == (d, dm) and params["FF_out"].shape == (dm, d)
        x = torch.randn(6, d, generator=g)
        z = torch.randn(6, H * dh, generator=g)
        with torch.no_grad():
            q, k, v, out = _model_projections(mt, handle.blocks[block], x, H, dh)
            for h in range(H):
                torch.testing.assert_close(x @ params["W_Q"][h], q[:, h], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(x @ params["W_K"][h], k[:, h], rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(x @ params["W_V"][h], v[:, h], rtol=1e-5, atol=1e-5)
            via_heads = torch.einsum("nhe,hed->nd", z.view(6, H, dh), params["W_O"])
            torch.testing.assert_close(via_heads, out(z), rtol=1e-5, atol=1e-5)
            # attention scores of one head (pre-rotary for NeoX/Llama) from W_Q / W_K
            scores = (x @ params["W_Q"][1]) @ (x @ params["W_K"][1]).T
            torch.testing.assert_close(scores, q[:, 1] @ k[:, 1].T, rtol=1e-4, atol=1e-4)


def test_parameter_values_against_raw_weight_slices(loaded_handles):
    gpt2, neox, bert, llama = (loaded_handles[m] for m in ("gpt2", "gpt_neox", "bert", "llama"))
    # GPT-2 Conv1D c_attn (d, 3d): W_K of head 2 is columns d + 2*dh .. d + 3*dh
    p, dh, d = gpt2.layer_parameters(1), gpt2.dims.d_head, gpt2.d_model
    w = gpt2.blocks[1].attn.c_attn.weight
    torch.testing.assert_close(p["W_K"][2], w[:, d + 2 * dh : d + 3 * dh])
    torch.testing.assert_close(p["W_O"][3], gpt2.blocks[1].attn.c_proj.weight[3 * dh : 4 * dh])
    torch.testing.assert_close(p["FF_in"], gpt2.blocks[1].mlp.c_fc.weight)
    # NeoX query_key_value rows: [head, (q, k, v), d_head]
    p, dh = neox.layer_parameters(0), neox.dims.d_head
    w = neox.blocks[0].attention.query_key_value.weight
    torch.testing.assert_close(p["W_Q"][4], w[4 * 3 * dh : 4 * 3 * dh + dh].T)
    torch.testing.assert_close(p["W_V"][1], w[1 * 3 * dh + 2 * dh : 2 * 3 * dh].T)
    # BERT
    p, dh = bert.layer_parameters(0), bert.dims.d_head
    torch.testing.assert_close(p["W_Q"][1], bert.blocks[0].attention.self.query.weight[dh : 2 * dh].T)
    torch.testing.assert_close(p["FF_out"], bert.blocks[0].output.dense.weight.T)
    # Llama GQA: 4 query heads share 2 kv heads -> heads 0,1 use kv head 0; 2,3 use kv head 1
    p, dh = llama.layer_parameters(0), llama.dims.d_head
    k = llama.blocks[0].self_attn.k_proj.weight
    for h in range(4):
        torch.testing.assert_close(p["W_K"][h], k[(h // 2) * dh : (h // 2 + 1) * dh].T)
    torch.testing.assert_close(p["FF_in"], llama.blocks[0].mlp.up_proj.weight.T)
    torch.testing.assert_close(p["FF_out"], llama.blocks[0].mlp.down_proj.weight.T)


def test_mamba_has_ff_groups_but_no_attention(loaded_handles):
    handle = loaded_handles["mamba"]
    params = handle.layer_parameters(0)
    mixer = handle.blocks[0].mixer
    d_inner = mixer.out_proj.weight.shape[1]
    assert set(params) == {"FF_in", "FF_out"}
    assert params["FF_in"].shape == (32, d_inner) and params["FF_out"].shape == (d_inner, 32)
    torch.testing.assert_close(params["FF_in"], mixer.in_proj.weight[:d_inner].T)
    with pytest.raises(UnsupportedArchitectureError, match=r"tiny-mamba.*W_Q"):
        params["W_Q"]
    with pytest.raises(IndexError):
        handle.layer_parameters(2)


def test_embedding_and_unembedding(loaded_handles):
    gpt2 = loaded_handles["gpt2"]
    torch.testing.assert_close(gpt2.unembedding_matrix(), gpt2.embedding_matrix().T)  # tied
    llama = loaded_handles["llama"]
    torch.testing.assert_close(llama.unembedding_matrix(), llama.module.lm_head.weight.T)
    assert not torch.allclose(llama.unembedding_matrix(), llama.embedding_matrix().T)
    assert loaded_handles["bert"].unembedding_bias().shape == (100,)


def test_unhookable_model_is_an_unsupported_architecture(build_tiny):
    module = build_tiny("gpt2")
    module.config.num_hidden_layers = 5  # no list of 5 blocks anywhere
    with pytest.raises(UnsupportedArchitectureError, match=r"'odd'.*hf:/some/dir.*5 blocks"):
        HFModelHandle("odd", "hf:/some/dir", module)
