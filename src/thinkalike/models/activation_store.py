"""Residual-stream activations on disk, one safetensors shard per extraction batch.

Layout of a store directory::

    meta.json                 {"model", "n_layers", "d_model", "n_sequences", "n_ctx", "dtype", "shards"}
    shard_00000.safetensors   "residual": (n_layers + 1, batch, n_ctx, d_model), "attention_mask": (batch, n_ctx)
    shard_00001.safetensors   ...

Writing consumes an iterable of batches and keeps one batch in memory; reading maps one shard
at a time (``safetensors.safe_open``), so consumers (CKA, MLEM…) stream the corpus in bounded
memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

META_FILE = "meta.json"


@dataclass(frozen=True)
class ActivationBatch:
    """One extraction batch: residual streams and the attention mask of its sequences."""

    residual: np.ndarray  # (n_layers + 1, batch, n_ctx, d_model)
    attention_mask: np.ndarray  # (batch, n_ctx)
    sequence_start: int

    def tokens(self) -> np.ndarray:
        """Residual streams of the real tokens only, ``(n_layers + 1, n_tokens, d_model)``, in sequence order."""
        keep = self.attention_mask.reshape(-1).astype(bool)
        layers, batch, n_ctx, width = self.residual.shape
        return self.residual.reshape(layers, batch * n_ctx, width)[:, keep]


class ActivationStore:
    """Read access to a store directory (see module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no activation store at {self.path} (missing {META_FILE})")
        self.meta: dict = json.loads(meta_path.read_text())

    @property
    def model(self) -> str:
        return self.meta["model"]

    @property
    def n_layers(self) -> int:
        """Number of blocks; the store holds ``n_layers + 1`` residual streams (0 = embeddings)."""
        return int(self.meta["n_layers"])

    @property
    def d_model(self) -> int:
        return int(self.meta["d_model"])

    @property
    def n_shards(self) -> int:
        return len(self.meta["shards"])

    def batch(self, shard: int) -> ActivationBatch:
        """Loads shard number ``shard``."""
        name = self.meta["shards"][shard]
        with safe_open(self.path / name, framework="numpy") as handle:
            meta = handle.metadata() or {}
            return ActivationBatch(handle.get_tensor("residual"), handle.get_tensor("attention_mask"),
                                   int(meta.get("sequence_start", 0)))

    def __iter__(self) -> Iterator[ActivationBatch]:
        for shard in range(self.n_shards):
            yield self.batch(shard)

    def __repr__(self) -> str:
        return f"ActivationStore({self.path}, model={self.model!r}, layers={self.n_layers + 1}, shards={self.n_shards})"


def write_activation_store(path: str | Path, batches: Iterable[ActivationBatch], model: str) -> ActivationStore:
    """Writes ``batches`` as shards under ``path`` (created); returns the store opened for reading.

    Refuses to write into a directory that already holds a store, so nothing saved is overwritten.
    """
    path = Path(path)
    if (path / META_FILE).exists():
        raise FileExistsError(f"an activation store already exists at {path}; refusing to overwrite it")
    path.mkdir(parents=True, exist_ok=True)
    shards: list[str] = []
    shape = None
    n_sequences = 0
    for index, batch in enumerate(batches):
        current = batch.residual.shape[:1] + batch.residual.shape[2:]
        if shape is not None and current != shape:
            raise ValueError(f"batch {index} of {model!r} has residual shape {batch.residual.shape}, "
                             f"inconsistent with the first batch")
        shape = current
        name = f"shard_{index:05d}.safetensors"
        save_file({"residual": np.ascontiguousarray(batch.residual),
                   "attention_mask": np.ascontiguousarray(batch.attention_mask)},
                  str(path / name), metadata={"sequence_start": str(batch.sequence_start)})
        shards.append(name)
        n_sequences += batch.residual.shape[1]
        last_dtype = str(batch.residual.dtype)
    if shape is None:
        raise ValueError(f"no activation batches to write for {model!r}")
    meta = {"model": model, "n_layers": shape[0] - 1, "n_ctx": shape[1], "d_model": shape[2],
            "n_sequences": n_sequences, "dtype": last_dtype, "shards": shards}
    (path / META_FILE).write_text(json.dumps(meta, indent=2))
    return ActivationStore(path)


@dataclass(frozen=True)
class ActivationStream:
    """What an extraction node returns: the model's name and a lazy iterable of batches.

    It is not a generator, so Kedro hands it whole to the dataset, which writes it shard by shard.
    """

    model: str
    batches: Iterable[ActivationBatch]
