"""Tiny models for the stitching tests: TransformerLens-native bridges (GeLU / SoLU), tiny transformers
models, a residual-stream permutation that preserves a bridge's function, data sampled from a model, and a
toy sequence classifier handle (the label objective)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.architectures import build_zoo_module, hf_zoo_config  # noqa: E402
from thinkalike.models.bridge import BridgeHandle  # noqa: E402
from thinkalike.models.handle import ModelDimensions, ModelHandle  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402

VOCAB = 48
N_CTX = 16


def bridge_config(
    d_model: int = 32, act_fn: str = "gelu", seed: int = 0, n_layers: int = 2, attention_dir: str = "causal"
) -> dict:
    """A zoo config of a tiny TransformerLens-native bridge (the brief's tiny SoLU/GeLU shape at d_model 32)."""
    return {
        "name": f"{act_fn}-{d_model}",
        "family": "bridge",
        "objective": "causal",
        "bridge_config": {
            "n_layers": n_layers,
            "d_model": d_model,
            "n_heads": 2,
            "d_head": d_model // 2,
            "d_mlp": 2 * d_model,
            "act_fn": act_fn,
            "d_vocab": VOCAB,
            "n_ctx": N_CTX,
            "seed": seed,
            "attention_dir": attention_dir,
        },
    }


def bridge_handle(
    name: str, config: dict, state: dict | None = None, *, sharpen: float = 1.0, tokenizer=None
) -> BridgeHandle:
    """A bridge built from ``config`` (and ``state``); ``sharpen`` scales its unembedding, so that its predictions
    are confident and depend on the context (a random bridge is close to uniform)."""
    module = build_zoo_module(config)
    if state is not None:
        module.load_state_dict(state)
    with torch.no_grad():
        module.unembed.weight.mul_(sharpen)
    return BridgeHandle.from_module(name, f"zoo:{name}", module.eval(), tokenizer)


_READS = ("attn.q.weight", "attn.k.weight", "attn.v.weight", "mlp.in.weight")  # (out, d_model): permute columns
_WRITES = ("attn.o.weight", "mlp.out.weight")  # (d_model, in): permute rows
_VECTORS = ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "attn.o.bias", "mlp.out.bias")


def permuted_state(module: torch.nn.Module, perm: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state dict of the same bridge with its residual-stream dimensions permuted: new dimension ``i`` is old
    dimension ``perm[i]``. Every weight that reads the residual (embeddings write it: permuted columns; Q, K, V,
    MLP-in, unembedding: columns) or writes it (attention output, MLP-out: rows and biases) is permuted, and so
    are the LayerNorm gains and biases (LayerNorm commutes with a permutation)."""
    out = {}
    for key, value in module.state_dict().items():
        value = value.clone()
        if key in ("embed.weight", "pos_embed.weight", "unembed.weight") or key.endswith(_READS):
            value = value[:, perm]
        elif key.endswith(_WRITES):
            value = value[perm, :]
        elif key.endswith(_VECTORS) or key in ("ln_final.weight", "ln_final.bias"):
            value = value[perm]
        out[key] = value
    return out


def sample_sequences(handle: ModelHandle, n: int, seq: int = N_CTX, seed: int = 0) -> np.ndarray:
    """``n`` sequences drawn from ``handle`` itself (first token uniform, then ancestral sampling): data for
    which the model is the true distribution, so no stitch can beat its own loss in expectation."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (n, 1), generator=generator)
    with torch.no_grad():
        for _ in range(seq - 1):
            probabilities = torch.softmax(handle.logits(ids, torch.ones_like(ids))[:, -1].double(), dim=-1)
            ids = torch.cat([ids, torch.multinomial(probabilities, 1, generator=generator)], dim=1)
    return ids.numpy()


HF_TINY: dict[str, tuple[str, dict]] = {
    "gpt2": (
        "causal",
        {"n_embd": 32, "n_layer": 3, "n_head": 4, "n_positions": N_CTX, "bos_token_id": 0, "eos_token_id": 0},
    ),
    "gpt_neox": (
        "causal",
        {
            "hidden_size": 32,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "intermediate_size": 48,
            "max_position_embeddings": N_CTX,
            "rotary_pct": 0.5,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
    "llama": (
        "causal",
        {
            "hidden_size": 32,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 48,
            "max_position_embeddings": N_CTX,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
    "bert": (
        "masked",
        {
            "hidden_size": 32,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "intermediate_size": 48,
            "max_position_embeddings": N_CTX,
            "pad_token_id": 0,
        },
    ),
}


def hf_handle(model_type: str, seed: int = 0, tokenizer=None) -> HFModelHandle:
    """A tiny random transformers model (3 blocks, width 32), its parameters moved off their initial values."""
    objective, kwargs = HF_TINY[model_type]
    module = build_zoo_module(
        hf_zoo_config(f"tiny-{model_type}", model_type, objective, vocab_size=VOCAB, **kwargs), seed=seed
    )
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    return HFModelHandle(f"tiny-{model_type}", f"zoo:tiny-{model_type}", module.eval(), tokenizer)


# --------------------------------------------------------------------------- toy classifier (label objective)


class ToyClassifier(torch.nn.Module):
    """Embedding, residual MLP blocks ``h ← h + W₂ gelu(W₁ LN(h))``, mean over real tokens, linear head."""

    def __init__(self, d_model: int = 16, n_layers: int = 2, n_classes: int = 3, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Embedding(VOCAB, d_model)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.LayerNorm(d_model),
                torch.nn.Linear(d_model, 2 * d_model),
                torch.nn.GELU(),
                torch.nn.Linear(2 * d_model, d_model),
            )
            for _ in range(n_layers)
        )
        self.head = torch.nn.Linear(d_model, n_classes)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * (0.5 if p.ndim > 1 else 0.1))

    def tail(self, h: torch.Tensor, start: int, attention_mask: torch.Tensor) -> torch.Tensor:
        for block in self.blocks[start:]:
            h = h + block(h)
        weights = attention_mask.to(h.dtype).unsqueeze(-1)
        return self.head((h * weights).sum(1) / weights.sum(1).clamp(min=1))


class ToyClassifierHandle(ModelHandle):
    """:class:`ModelHandle` of a :class:`ToyClassifier`; ``logits`` are ``(batch, n_classes)``."""

    def __init__(self, name: str, module: ToyClassifier) -> None:
        d = module.embed.embedding_dim
        dims = ModelDimensions(
            n_layers=len(module.blocks), d_model=d, d_vocab=module.head.out_features, n_heads=0, d_head=0, d_mlp=2 * d
        )
        super().__init__(name, f"toy:{name}", module.eval(), None, dims, is_causal=False)

    def residual_streams(self, input_ids, attention_mask):
        h = self.module.embed(input_ids)
        streams = [h]
        for block in self.module.blocks:
            h = h + block(h)
            streams.append(h)
        return torch.stack(streams)

    def logits_from_layer(self, residual, layer, input_ids, attention_mask):
        if not 0 <= layer <= self.n_layers:
            raise IndexError(layer)
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        return self.module.tail(residual, layer, mask)

    def logits(self, input_ids, attention_mask=None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        return self.module.tail(self.module.embed(input_ids), 0, mask)

    def embedding_matrix(self):
        return self.module.embed.weight.detach()

    def unembedding_matrix(self):
        return self.module.head.weight.detach().T

    def layer_parameters(self, block):
        raise NotImplementedError("the toy classifier has no attention")
