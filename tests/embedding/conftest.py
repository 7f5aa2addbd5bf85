"""Fixtures of the embedding-space tests: a tiny zoo-style TransformerLens bridge (4 layers, d_model 32,
V 256), an exact copy with its residual basis permuted (the same function), and a tiny Mamba."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from tests.stitching.toys import bridge_handle, permuted_state

VOCAB = 256
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
