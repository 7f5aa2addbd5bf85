"""Tiny random Hugging Face checkpoints (and a GGUF file) saved locally, loaded with the hub offline."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

VOCAB = 100
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# model_type -> (objective, config kwargs); hidden 80 / 5 heads = head dim 16 for NeoX, partial rotary.
TINY_CONFIGS: dict[str, tuple[str, dict]] = {
    "gpt2": (
        "causal",
        dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32, bos_token_id=2, eos_token_id=3),
    ),
    "gpt_neox": (
        "causal",
        dict(
            vocab_size=VOCAB,
            hidden_size=80,
            num_hidden_layers=2,
            num_attention_heads=5,
            intermediate_size=96,
            max_position_embeddings=32,
            rotary_pct=0.5,
            bos_token_id=2,
            eos_token_id=3,
        ),
    ),
    "bert": (
        "masked",
        dict(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=32,
        ),
    ),
    "llama": (
        "causal",
        dict(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=48,
            max_position_embeddings=32,
            tie_word_embeddings=False,
            bos_token_id=2,
            eos_token_id=3,
        ),
    ),
    "mamba": (
        "causal",
        dict(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            state_size=4,
            expand=2,
            conv_kernel=4,
            bos_token_id=2,
            eos_token_id=3,
            pad_token_id=0,
        ),
    ),
}


def make_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = SPECIALS + [f"w{i}" for i in range(VOCAB - len(SPECIALS))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def build_module(model_type: str, seed: int = 0) -> torch.nn.Module:
    from thinkalike.models.architectures import build_zoo_module, hf_zoo_config

    objective, kwargs = TINY_CONFIGS[model_type]
    module = build_zoo_module(hf_zoo_config(f"tiny-{model_type}", model_type, objective, **kwargs), seed=seed)
    # Move every parameter off its initial value (LayerNorm gains 1, biases 0 would hide mistakes).
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return module.eval()


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """``model_type -> local directory`` with safetensors weights, config.json and a tokenizer."""
    root = tmp_path_factory.mktemp("hf_checkpoints")
    tokenizer = make_tokenizer()
    out = {}
    for model_type in TINY_CONFIGS:
        directory = root / model_type
        build_module(model_type).save_pretrained(directory, safe_serialization=True)
        tokenizer.save_pretrained(directory)
        out[model_type] = directory
    return out


@pytest.fixture(scope="session")
def loaded_handles(tiny_checkpoints):
    from thinkalike.models.sources import load_model

    return {mt: load_model(f"hf:{path}", name=f"tiny-{mt}", device="cpu") for mt, path in tiny_checkpoints.items()}


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, VOCAB, (2, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0  # right padding on the second sequence
    return ids, mask


def _llama_cpp_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf ``permute`` of q/k rows (transformers reverses it on load)."""
    return (
        weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def write_llama_gguf(path: Path, module: torch.nn.Module) -> None:
    """Write a Llama ``LlamaForCausalLM`` as an F32 GGUF file, with llama.cpp's tensor names, metadata
    and a tiny sentencepiece-style ("llama") vocabulary."""
    import gguf

    cfg = module.config
    n_vocab = cfg.vocab_size
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = ["<unk>", "<s>", "</s>", "\u2581"] + list(letters) + ["\u2581" + c for c in letters]
    tokens += [f"<extra_{i}>" for i in range(n_vocab - len(tokens))]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0, 0.0, 0.0] + [-float(i) for i in range(n_vocab - 3)])
    writer.add_token_types([2, 3, 3] + [1] * (n_vocab - 3))
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    sd = {k: v.detach().float().numpy() for k, v in module.state_dict().items()}
    writer.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        writer.add_tensor(
            f"blk.{i}.attn_q.weight", _llama_cpp_permute(sd[p + "self_attn.q_proj.weight"], cfg.num_attention_heads)
        )
        writer.add_tensor(
            f"blk.{i}.attn_k.weight", _llama_cpp_permute(sd[p + "self_attn.k_proj.weight"], cfg.num_key_value_heads)
        )
        writer.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        writer.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        writer.add_tensor(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
    writer.add_tensor("output_norm.weight", sd["model.norm.weight"])
    writer.add_tensor("output.weight", sd["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="session")
def build_tiny():
    """``build_tiny(model_type, seed=0)`` -> a fresh tiny module (same weights as the checkpoint for seed 0)."""
    return build_module


@pytest.fixture(scope="session")
def tiny_llama_gguf(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    """``(path of a GGUF file, the LlamaForCausalLM it was written from)``."""
    module = build_module("llama", seed=5)
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    write_llama_gguf(path, module)
    return path, module


# ---------------------------------------------------------------------- sentence encoders
ENCODER_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ENCODER_WORDS = (
    "the a an of to and in on is was it that this with for as at by from cat dog sat ran "
    "mat house tree river long sentence word words text here there one two three four five six "
    "seven eight nine ten quick brown fox jumps over lazy , . ! ?"
).split()


def make_encoder_tokenizer():
    """A BERT-style fast tokenizer as sentence-transformers ship it: lower-casing BERT normaliser (it
    deletes zero-width spaces), BERT pre-tokenizer, ``[CLS] $A [SEP]`` post-processor, no bos/eos."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(ENCODER_SPECIALS + ENCODER_WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def encoder_config(vocab_size: int):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )


def _save_bert(directory: Path, class_name: str, seed: int, drop: tuple[str, ...]) -> Path:
    """Save a tiny random ``transformers.<class_name>`` and the BERT-style tokenizer; ``drop``: state-dict keys
    removed from the saved safetensors file (to simulate checkpoints that lack them)."""
    import transformers
    from safetensors.torch import load_file, save_file

    tokenizer = make_encoder_tokenizer()
    torch.manual_seed(seed)
    getattr(transformers, class_name)(encoder_config(len(tokenizer))).save_pretrained(
        directory, safe_serialization=True
    )
    tokenizer.save_pretrained(directory)
    if drop:
        weights = load_file(directory / "model.safetensors")
        unknown = set(drop) - set(weights)
        assert not unknown, f"not in the checkpoint: {unknown}"
        save_file(
            {k: v for k, v in weights.items() if k not in drop},
            directory / "model.safetensors",
            metadata={"format": "pt"},
        )
    return directory


def save_sentence_encoder(directory: Path, seed: int = 0, drop: tuple[str, ...] = ()) -> Path:
    """A sentence-encoder directory: ``BertModel`` weights only (no LM head, ``architectures:
    ["BertModel"]``, as sentence-transformers ship), with the BERT-style tokenizer."""
    return _save_bert(directory, "BertModel", seed, drop)


def save_masked_lm(directory: Path, seed: int = 0, drop: tuple[str, ...] = ()) -> Path:
    """A ``BertForMaskedLM`` directory (with its MLM head) and the BERT-style tokenizer."""
    return _save_bert(directory, "BertForMaskedLM", seed, drop)


@pytest.fixture(scope="session")
def sentence_encoder_dir(tmp_path_factory) -> Path:
    """A BERT sentence encoder saved as sentence-transformers do: BertModel weights, [CLS]/[SEP], no bos/eos."""
    return save_sentence_encoder(tmp_path_factory.mktemp("sentence_encoder"))
