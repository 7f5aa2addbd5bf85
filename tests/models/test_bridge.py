"""TransformerBridge models: native zoo builds, the BridgeHandle view, and the tl: source."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from thinkalike.models.bridge import (  # noqa: E402
    DEFAULT_BRIDGE_CONFIG,
    BridgeHandle,
    bridge_logits,
    build_bridge_module,
    load_bridge_handle,
    resolve_bridge_config,
)
from thinkalike.models.handle import PARAMETER_GROUPS, ModelSourceError  # noqa: E402

VOCAB, N_CTX, D_MODEL, N_LAYERS, N_HEADS, D_MLP = 50, 16, 32, 2, 4, 64
D_HEAD = D_MODEL // N_HEADS


def tiny_config(act_fn: str = "gelu", seed: int = 0, **extra) -> dict:
    return {
        "d_model": D_MODEL,
        "n_layers": N_LAYERS,
        "n_heads": N_HEADS,
        "d_mlp": D_MLP,
        "d_vocab": VOCAB,
        "n_ctx": N_CTX,
        "act_fn": act_fn,
        "seed": seed,
        **extra,
    }


def perturb(module: torch.nn.Module, seed: int = 1, scale: float = 0.05) -> None:
    """Move every parameter (norm gains, biases included) off its initial value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))


@pytest.fixture(scope="module")
def tokens() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, VOCAB, (3, 12), generator=g)
    return input_ids, torch.ones_like(input_ids)


@pytest.fixture(scope="module", params=["gelu", "solu_ln"])
def handle(request) -> BridgeHandle:
    module = build_bridge_module(tiny_config(request.param, seed=7))
    perturb(module)
    module.eval()
    return BridgeHandle.from_module(f"tiny-{request.param}", f"zoo:tiny-{request.param}", module, None)


# --------------------------------------------------------------------------- native builds


def test_resolve_config_defaults_and_validation():
    cfg = resolve_bridge_config({"d_vocab": 400})
    assert set(DEFAULT_BRIDGE_CONFIG) <= set(cfg)
    assert cfg["d_head"] == cfg["d_model"] // cfg["n_heads"] and cfg["d_mlp"] == 4 * cfg["d_model"]
    with pytest.raises(ValueError, match="d_vocab"):
        resolve_bridge_config({})
    with pytest.raises(ValueError, match="unknown"):
        resolve_bridge_config({"d_vocab": 10, "n_layer": 3})
    with pytest.raises(ValueError, match="act_fn"):
        resolve_bridge_config({"d_vocab": 10, "act_fn": "swishy"})


@pytest.mark.parametrize("act_fn", ["gelu", "solu_ln"])
def test_build_is_deterministic_and_leaves_global_rng_alone(act_fn, tokens):
    input_ids, mask = tokens
    rng = torch.get_rng_state()
    a, b = build_bridge_module(tiny_config(act_fn, seed=3)), build_bridge_module(tiny_config(act_fn, seed=3))
    assert torch.equal(rng, torch.get_rng_state())
    c = build_bridge_module(tiny_config(act_fn, seed=4))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert list(sa) == list(sb) == list(sc)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["blocks.0.attn.q.weight"], sc["blocks.0.attn.q.weight"])
    logits = bridge_logits(a, input_ids, mask)
    assert logits.shape == (*input_ids.shape, VOCAB)
    assert torch.equal(logits, bridge_logits(b, input_ids, mask))


def test_solu_and_gelu_differ_in_structure():
    solu = build_bridge_module(tiny_config("solu_ln")).state_dict()
    gelu = build_bridge_module(tiny_config("gelu")).state_dict()
    assert "blocks.0.mlp.ln.weight" in solu and "blocks.0.mlp.ln.weight" not in gelu
    assert solu["blocks.0.mlp.ln.weight"].shape == (D_MLP,)
    for key in (
        "embed.weight",
        "pos_embed.weight",
        "blocks.1.attn.o.weight",
        "blocks.1.mlp.in.weight",
        "ln_final.weight",
        "unembed.weight",
        "unembed.bias",
    ):
        assert key in solu and key in gelu
    assert not any("_original_component" in k for k in solu)


@pytest.mark.parametrize("act_fn", ["gelu", "solu_ln"])
def test_state_dict_round_trip_through_safetensors(act_fn, tokens, tmp_path):
    input_ids, mask = tokens
    config = tiny_config(act_fn, seed=11)
    module = build_bridge_module(config)
    perturb(module)
    path = tmp_path / "model.safetensors"
    save_file({k: v.detach().contiguous() for k, v in module.state_dict().items()}, str(path))
    restored = build_bridge_module({**config, "seed": 12})  # different init: the load must matter
    assert not torch.equal(bridge_logits(restored, input_ids, mask), bridge_logits(module, input_ids, mask))
    restored.load_state_dict(load_file(str(path)), strict=True)
    assert torch.equal(bridge_logits(restored, input_ids, mask), bridge_logits(module, input_ids, mask))
    # Parameters, not copies, were loaded: the optimiser sees the restored values.
    assert any(torch.equal(p, module.state_dict()["embed.weight"]) for p in restored.parameters())
    with pytest.raises(RuntimeError):
        restored.load_state_dict({k: v for k, v in load_file(str(path)).items() if k != "embed.weight"}, strict=True)


@pytest.mark.parametrize("act_fn", ["gelu", "solu_ln"])
def test_adamw_reduces_the_loss(act_fn):
    torch.manual_seed(0)
    module = build_bridge_module(tiny_config(act_fn, seed=5))
    module.train()
    params = list(module.parameters())
    assert len({id(p) for p in params}) == len(params) and all(p.requires_grad for p in params)
    input_ids = torch.randint(0, VOCAB, (8, N_CTX), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.AdamW(params, lr=3e-3)

    def loss_fn() -> torch.Tensor:
        logits = bridge_logits(module, input_ids, torch.ones_like(input_ids))
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), input_ids[:, 1:].reshape(-1))

    first = loss_fn().item()
    assert abs(first - math.log(VOCAB)) < 1.0
    for _ in range(15):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    assert loss_fn().item() < first - 0.3


def test_attention_mask_padding_does_not_change_real_positions(tokens):
    input_ids, _ = tokens
    module = build_bridge_module(tiny_config(seed=2))
    mask = torch.ones_like(input_ids)
    mask[0, 8:] = 0  # right padding
    full = bridge_logits(module, input_ids, None)
    padded = bridge_logits(module, input_ids, mask)
    torch.testing.assert_close(padded[0, :8], full[0, :8])
    torch.testing.assert_close(padded[1:], full[1:])


# --------------------------------------------------------------------------- handle on native models


def test_handle_dimensions(handle):
    assert handle.dims.n_layers == N_LAYERS and handle.dims.d_model == D_MODEL and handle.dims.d_vocab == VOCAB
    assert handle.dims.n_heads == N_HEADS and handle.dims.d_head == D_HEAD and handle.dims.d_mlp == D_MLP
    assert handle.is_causal


def test_residual_streams(handle, tokens):
    input_ids, mask = tokens
    module = handle.module
    with torch.no_grad():
        streams = handle.residual_streams(input_ids, mask)
        logits = bridge_logits(module, input_ids, mask)
        _, cache = module.run_with_cache(input_ids, attention_mask=mask, names_filter=["hook_embed", "hook_pos_embed"])
    assert streams.shape == (N_LAYERS + 1, *input_ids.shape, D_MODEL)
    torch.testing.assert_close(streams[0], cache["hook_embed"] + cache["hook_pos_embed"])
    W_E, W_U = handle.embedding_matrix(), handle.unembedding_matrix()
    assert W_E.shape == (VOCAB, D_MODEL) and W_U.shape == (D_MODEL, VOCAB)
    positions = torch.arange(input_ids.shape[1])
    torch.testing.assert_close(streams[0], W_E[input_ids] + module.W_pos[positions])
    with torch.no_grad():
        recomputed = handle.final_norm(streams[-1]) @ W_U + handle.unembedding_bias()
    torch.testing.assert_close(recomputed, logits)


def test_logits_from_layer_reproduces_logits_and_lets_gradients_through(handle, tokens):
    input_ids, mask = tokens
    with torch.no_grad():
        streams = handle.residual_streams(input_ids, mask)
        logits = bridge_logits(handle.module, input_ids, mask)
    for layer in range(N_LAYERS + 1):
        residual = streams[layer].clone().requires_grad_(True)
        out = handle.logits_from_layer(residual, layer, input_ids, mask)
        torch.testing.assert_close(out, logits)
        out[:, -1].logsumexp(-1).sum().backward()
        assert residual.grad is not None and residual.grad.abs().sum() > 0
        with torch.no_grad():
            changed = handle.logits_from_layer(streams[layer] + 1.0, layer, input_ids, mask)
        assert not torch.allclose(changed, logits)
    # Hooks are temporary: the plain forward is unchanged afterwards.
    with torch.no_grad():
        torch.testing.assert_close(bridge_logits(handle.module, input_ids, mask), logits)
    with pytest.raises(IndexError):
        handle.logits_from_layer(streams[0], N_LAYERS + 1, input_ids, mask)


def test_layer_parameters_shapes_and_values(handle, tokens):
    input_ids, mask = tokens
    params = [handle.layer_parameters(b) for b in range(N_LAYERS)]
    for p in params:
        assert set(p) == set(PARAMETER_GROUPS)
        assert p["W_Q"].shape == p["W_K"].shape == p["W_V"].shape == (N_HEADS, D_MODEL, D_HEAD)
        assert p["W_O"].shape == (N_HEADS, D_HEAD, D_MODEL)
        assert p["FF_in"].shape == (D_MODEL, D_MLP) and p["FF_out"].shape == (D_MLP, D_MODEL)
    assert not torch.equal(params[0]["W_Q"], params[1]["W_Q"])

    block = 1
    p, attn, mlp = params[block], handle.module.blocks[block].attn, handle.module.blocks[block].mlp
    names = [
        f"blocks.{block}.{n}"
        for n in ("ln1.hook_out", "attn.hook_pattern", "hook_attn_out", "ln2.hook_out", "mlp.hook_pre")
    ]
    with torch.no_grad():
        _, cache = handle.module.run_with_cache(input_ids, attention_mask=mask, names_filter=names)
        x = cache[names[0]]  # the normalized input the attention reads
        q = torch.einsum("bsd,hde->bhse", x, p["W_Q"]) + attn.b_Q[None, :, None]
        k = torch.einsum("bsd,hde->bhse", x, p["W_K"]) + attn.b_K[None, :, None]
        v = torch.einsum("bsd,hde->bhse", x, p["W_V"]) + attn.b_V[None, :, None]
        scores = q @ k.transpose(-1, -2) / math.sqrt(D_HEAD)
        seq = input_ids.shape[1]
        scores = scores.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), float("-inf"))
        pattern = scores.softmax(-1)
        torch.testing.assert_close(pattern, cache[names[1]])
        attn_out = torch.einsum("bhse,hed->bsd", pattern @ v, p["W_O"]) + attn.b_O
        torch.testing.assert_close(attn_out, cache[names[2]])
        torch.testing.assert_close(cache[names[3]] @ p["FF_in"] + mlp.b_in, cache[names[4]])
    # FF_out is the MLP's output projection (d_mlp -> d_model).
    raw = handle.module.state_dict()[f"blocks.{block}.mlp.out.weight"]
    torch.testing.assert_close(p["FF_out"], raw.T)


# --------------------------------------------------------------------------- tl: source (local GPT-2)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-gpt2")
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=32, bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(config).save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="module")
def gpt2_handle(gpt2_dir) -> BridgeHandle:
    return load_bridge_handle("GPT2LMHeadModel", str(gpt2_dir), None, "tiny-gpt2")


def test_load_bridge_handle_matches_hugging_face(gpt2_dir, gpt2_handle):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(gpt2_dir, local_files_only=True, attn_implementation="eager").eval()
    h = gpt2_handle
    assert h.spec == "tl:GPT2LMHeadModel" and h.n_layers == 2 and h.d_model == 32 and h.dims.d_vocab == 100
    input_ids = torch.randint(0, 100, (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(input_ids)
    with torch.no_grad():
        ref = hf(input_ids, attention_mask=mask, output_hidden_states=True)
        streams = h.residual_streams(input_ids, mask)
    assert streams.shape == (3, 2, 9, 32)
    # HF's hidden_states[-1] has the final LayerNorm applied; ours is the raw residual stream.
    for layer in range(2):
        torch.testing.assert_close(streams[layer], ref.hidden_states[layer])
    torch.testing.assert_close(hf.transformer.ln_f(streams[2]), ref.hidden_states[2])
    for layer in range(3):
        out = h.logits_from_layer(streams[layer], layer, input_ids, mask)
        torch.testing.assert_close(out, ref.logits, atol=1e-5, rtol=1e-5)
    # Parameter views against HF's Conv1D layout (weight is (in, out)).
    p = h.layer_parameters(1)
    c_attn = hf.transformer.h[1].attn.c_attn.weight
    torch.testing.assert_close(p["W_Q"][2], c_attn[:, 2 * 8 : 3 * 8])
    torch.testing.assert_close(p["W_V"][0], c_attn[:, 64:72])
    torch.testing.assert_close(p["W_O"].reshape(32, 32), hf.transformer.h[1].attn.c_proj.weight)
    torch.testing.assert_close(p["FF_in"], hf.transformer.h[1].mlp.c_fc.weight)
    torch.testing.assert_close(p["FF_out"], hf.transformer.h[1].mlp.c_proj.weight)
    torch.testing.assert_close(h.embedding_matrix(), hf.transformer.wte.weight)
    torch.testing.assert_close(h.unembedding_matrix(), hf.lm_head.weight.T)


def test_load_bridge_handle_by_model_type_keeps_the_given_tokenizer(gpt2_dir):
    sentinel = object()
    h = load_bridge_handle("gpt2", str(gpt2_dir), sentinel, "by-type")
    assert h.tokenizer is sentinel and h.spec == "tl:gpt2"


def test_load_bridge_handle_errors_name_the_architecture(gpt2_dir, tmp_path):
    with pytest.raises(ModelSourceError, match="NoSuchArchitecture"):
        load_bridge_handle("NoSuchArchitecture", None, None, "x")
    with pytest.raises(ModelSourceError, match="GPT2LMHeadModel"):  # no weights, not in any cache
        load_bridge_handle("GPT2LMHeadModel", None, None, "x")
    with pytest.raises(ModelSourceError, match="GPT2LMHeadModel"):
        load_bridge_handle("GPT2LMHeadModel", str(tmp_path / "missing"), None, "x")
    with pytest.raises(ModelSourceError, match="LlamaForCausalLM"):  # weights of another architecture
        load_bridge_handle("LlamaForCausalLM", str(gpt2_dir), None, "x")
    with pytest.raises(ModelSourceError, match="someone/not-cached-model"):
        load_bridge_handle("someone/not-cached-model", None, None, "x")
