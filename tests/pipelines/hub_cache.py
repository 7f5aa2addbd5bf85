"""A local Hugging Face hub cache laid out as ``huggingface_hub`` writes it, holding configs and tokenizers only.

``models--<org>--<name>/refs/main`` names a snapshot, ``snapshots/<commit>/`` holds ``config.json`` and the
tokenizer files: what validation reads of a hub id (no weights). With ``HF_HUB_OFFLINE=1`` the project's
hub-loading code finds them through ``huggingface_hub``'s own cache lookup, unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from thinkalike.language.grammar import generate_sentences
from thinkalike.language.tokenizer import train_tokenizer


def hub_ids(specs) -> list[str]:
    """The hub ids among model specs (``hf:<org>/<name>`` that is not a local path)."""
    ids = []
    for spec in specs:
        target = spec.removeprefix("hf:").split("?", 1)[0]
        if spec.startswith("hf:") and target.count("/") == 1 and not target.startswith((".", "/", "~")):
            ids.append(target)
    return ids


def cache_config_and_tokenizer(cache: Path, repo_id: str) -> Path:
    """Writes a config and tokenizer into ``cache`` for ``repo_id``; returns the snapshot folder. A
    ``sentence-transformers/`` id gets a BERT sentence encoder's (``architectures: [BertModel]``: no LM head;
    ``[CLS] … [SEP]``), any other a GPT-NeoX causal LM's (``[GPTNeoXForCausalLM]``, as Pythia's) with a
    tokenizer trained on the grammar."""
    from transformers import BertConfig, GPTNeoXConfig

    from tests.models.conftest import make_encoder_tokenizer

    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    if repo_id.startswith("sentence-transformers/"):
        tokenizer = make_encoder_tokenizer()
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=512,
        )
        config.architectures = ["BertModel"]
    else:
        tokenizer = train_tokenizer(generate_sentences(300, seed=3)["text"].tolist(), vocab_size=120)
        config = GPTNeoXConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            vocab_size=len(tokenizer),
            max_position_embeddings=2048,
        )
        config.architectures = ["GPTNeoXForCausalLM"]
    tokenizer.save_pretrained(snapshot)
    config.save_pretrained(snapshot)
    return snapshot


def use_hub_cache(monkeypatch, cache: Path, repo_ids) -> None:
    """Points ``huggingface_hub`` at ``cache`` (read at call time) after caching each of ``repo_ids``."""
    import huggingface_hub.constants

    for repo_id in repo_ids:
        cache_config_and_tokenizer(cache, repo_id)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
