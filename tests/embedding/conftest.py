"""Fixtures of the embedding-space tests: a tiny zoo-style TransformerLens bridge (4 layers, d_model 32,
V 256), an exact copy with its residual basis permuted (the same function), and a tiny Mamba."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from tests.stitching.toys import bridge_handle, permuted_state
from thinkalike.embedding.weights import ModelParameters

VOCAB = 256
#: The shapes of :func:`toy_parameters`: width, heads, head width, FF width.
TOY_D, TOY_HEADS, TOY_D_HEAD, TOY_D_MLP = 16, 2, 4, 12
D_MODEL = 32


def zoo_bridge_config(name: str = "zoo-gelu", d_model: int = D_MODEL, n_layers: int = 4, seed: int = 0) -> dict:
    """A zoo config of a tiny TransformerLens-native bridge (as the zoo builds them), vocabulary of 256."""
    return {
        "name": name,
        "family": "bridge",
        "objective": "causal",
        "bridge_config": {
            "n_layers": n_layers,
            "d_model": d_model,
            "n_heads": 2,
            "d_head": d_model // 2,
            "d_mlp": 2 * d_model,
            "act_fn": "gelu",
            "d_vocab": VOCAB,
            "n_ctx": 16,
            "seed": seed,
        },
    }


@pytest.fixture(scope="session")
def zoo_model():
    return bridge_handle("zoo-gelu", zoo_bridge_config())


@pytest.fixture(scope="session")
def zoo_permuted(zoo_model):
    """``(copy, perm)``: ``zoo_model`` with residual dimension i of the copy = dimension ``perm[i]`` of the
    original; every weight reading or writing the residual (E included) permuted — the same function."""
    perm = torch.randperm(D_MODEL, generator=torch.Generator().manual_seed(11))
    state = permuted_state(zoo_model.module, perm)
    return bridge_handle("zoo-gelu-permuted", zoo_bridge_config(), state), perm


@pytest.fixture(scope="session")
def tiny_mamba():
    from thinkalike.models.architectures import build_zoo_module, hf_zoo_config
    from thinkalike.models.hf import HFModelHandle

    config = hf_zoo_config(
        "tiny-mamba",
        "mamba",
        "causal",
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=2,
        state_size=4,
        expand=2,
        conv_kernel=4,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return HFModelHandle("tiny-mamba", "zoo:tiny-mamba", build_zoo_module(config, seed=0).eval())


def toy_parameters(
    layers: int = 2, seed: int = 0, *, d: int = TOY_D, n_mlp: int = TOY_D_MLP, n_heads: int = TOY_HEADS
) -> ModelParameters:
    """Random float64 weights in the handles' shapes: FF_in (d, d_mlp), FF_out (d_mlp, d), W_Q/K/V (H, d, d_head),
    W_O (H, d_head, d); the draws in that order, layer by layer, from one generator seeded with ``seed``."""
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    groups = tuple(
        {
            "FF_in": normal(d, n_mlp),
            "FF_out": normal(n_mlp, d),
            "W_Q": normal(n_heads, d, TOY_D_HEAD),
            "W_K": normal(n_heads, d, TOY_D_HEAD),
            "W_V": normal(n_heads, d, TOY_D_HEAD),
            "W_O": normal(n_heads, TOY_D_HEAD, d),
        }
        for _ in range(layers)
    )
    return ModelParameters("toy", tuple(range(layers)), groups)
