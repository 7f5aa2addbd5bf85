"""Residual-stream activations on disk, one safetensors shard per extraction batch.

Layout of a store directory::

    meta.json                 {"model", "n_layers", "layers", "d_model", "n_sequences", "n_tokens", "n_ctx",
                               "dtype", "format": 2, "shards"}
    shard_00000.safetensors   "tokens": (len(layers), n_real_tokens, d_model)  real tokens only, in ``dtype``
                              "attention_mask": (batch, n_ctx)                   which positions they are
    shard_00001.safetensors   ...

Only real tokens are stored (no padding), row-major in (sequence, position) order, in
``dtype`` (float32, float16 or bfloat16), and only the residual streams listed in ``layers``
(0 = embeddings; all ``n_layers + 1`` by default). Layer ``n_layers`` is the last block's
output *before* the final norm (not transformers' ``hidden_states[-1]``); only when the
activations were extracted with ``activations.final_norm: true`` is there a layer
``n_layers + 1``, the final norm's output (``n_layers`` still counts the blocks). Reading
gives float32 for bfloat16 stores (numpy has no bfloat16; the conversion is exact).
``format`` 1 stores (padded ``residual`` arrays, written before format 2) are still read.

Writing consumes an iterable of batches and keeps one batch in memory; reading maps one shard
at a time (``safetensors.safe_open``), so consumers (CKA, MLEM…) stream the corpus in bounded
memory.

Writing is atomic: shards go to a sibling ``<name>.partial`` directory, which is renamed to
``<name>`` only after ``meta.json`` is written. A crash (even SIGKILL) leaves at most a
``.partial`` directory that no reader takes for a store; a failure inside Python removes it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

META_FILE = "meta.json"
FORMAT = 2
STORE_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class ActivationStoreError(OSError):
    """A store on disk that cannot be read, or that would not fit: the message names the file or folder."""


@dataclass(frozen=True)
class ActivationBatch:
    """One batch of sequences: the residual streams of its real tokens and its attention mask.

    ``token_rows`` is ``(layers, n_tokens, d_model)`` for the ``attention_mask == 1`` positions in
    (sequence, position) order. :meth:`from_padded` builds one from a padded extraction output.
    """

    token_rows: np.ndarray | torch.Tensor  # (layers, n_real_tokens, d_model); a torch tensor when kept on a device
    attention_mask: np.ndarray  # (batch, n_ctx)
    sequence_start: int

    @classmethod
    def from_padded(
        cls, residual: np.ndarray | torch.Tensor, attention_mask: np.ndarray, sequence_start: int
    ) -> ActivationBatch:
        """From ``residual`` ``(layers, batch, n_ctx, d_model)`` (numpy, or a torch tensor on its device): keeps the
        positions where the mask is 1. A batch without padding keeps its rows as they are (a view: packed
        sequences); otherwise the kept rows are gathered, on the residual's own device."""
        keep = np.asarray(attention_mask).reshape(-1).astype(bool)
        layers, batch, n_ctx, width = residual.shape
        rows = residual.reshape(layers, batch * n_ctx, width)
        if keep.all():
            return cls(rows, np.asarray(attention_mask), sequence_start)
        if isinstance(rows, torch.Tensor):
            return cls(rows[:, torch.from_numpy(keep).to(rows.device)], np.asarray(attention_mask), sequence_start)
        return cls(rows[:, keep], np.asarray(attention_mask), sequence_start)

    def tokens(self) -> np.ndarray | torch.Tensor:
        """Residual streams of the real tokens only, ``(layers, n_tokens, d_model)``, in sequence order."""
        return self.token_rows

    @property
    def residual(self) -> np.ndarray:
        """The padded form ``(layers, batch, n_ctx, d_model)``, zeros at padding positions (host batches only)."""
        rows = self.token_rows
        if isinstance(rows, torch.Tensor):
            raise TypeError("the padded form is for batches in host memory; this batch was kept on its device")
        layers, _, width = rows.shape
        batch, n_ctx = self.attention_mask.shape
        padded = np.zeros((layers, batch * n_ctx, width), dtype=rows.dtype)
        padded[:, self.attention_mask.reshape(-1).astype(bool)] = rows
        return padded.reshape(layers, batch, n_ctx, width)


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
        """Number of blocks of the model; residual streams run from 0 (embeddings) to ``n_layers``."""
        return int(self.meta["n_layers"])

    @property
    def layers(self) -> list[int]:
        """The residual streams stored, in order (all ``0 … n_layers`` unless a subset was asked for)."""
        return [int(layer) for layer in self.meta.get("layers", range(self.n_layers + 1))]

    @property
    def d_model(self) -> int:
        return int(self.meta["d_model"])

    @property
    def dtype(self) -> str:
        """The dtype the activations are stored in."""
        return str(self.meta["dtype"])

    @property
    def spec(self) -> str:
        """The spec of the model the activations came from (empty for stores written before it was recorded)."""
        return str(self.meta.get("spec", ""))

    @property
    def version(self) -> str:
        """The store's version: its Kedro version folder's name (a timestamp) for catalog stores."""
        return self.path.parent.name

    @property
    def n_shards(self) -> int:
        return len(self.meta["shards"])

    def batch(self, shard: int) -> ActivationBatch:
        """Loads shard number ``shard`` (bfloat16 is returned as float32)."""
        file = self.path / self.meta["shards"][shard]
        try:
            with safe_open(file, framework="pt") as handle:
                meta = handle.metadata() or {}
                mask = handle.get_tensor("attention_mask").numpy()
                start = int(meta.get("sequence_start", 0))
                if "tokens" in handle.keys():
                    rows = handle.get_tensor("tokens")
                    rows = rows.float() if rows.dtype == torch.bfloat16 else rows
                    return ActivationBatch(rows.numpy(), mask, start)
                return ActivationBatch.from_padded(handle.get_tensor("residual").numpy(), mask, start)  # format 1
        except (OSError, SafetensorError) as error:
            raise ActivationStoreError(
                f"activation shard {file} is unreadable (truncated or corrupt: {error}); "
                "delete this store version and extract again"
            ) from error

    def __iter__(self) -> Iterator[ActivationBatch]:
        for shard in range(self.n_shards):
            yield self.batch(shard)

    def __repr__(self) -> str:
        return (
            f"ActivationStore({self.path}, model={self.model!r}, layers={len(self.layers)}, dtype={self.dtype}, "
            f"shards={self.n_shards})"
        )


def is_complete_store(path: str | Path) -> bool:
    """True when ``path`` holds a finished store (its ``meta.json`` is written last)."""
    return (Path(path) / META_FILE).is_file()


def partial_path(path: str | Path) -> Path:
    """The sibling directory a store (or any directory output) is written to before its rename."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def write_activation_store(
    path: str | Path,
    batches: Iterable[ActivationBatch],
    model: str,
    *,
    dtype: str = "float32",
    n_layers: int | None = None,
    layers: Sequence[int] | None = None,
    spec: str = "",
) -> ActivationStore:
    """Writes ``batches`` as shards of real tokens in ``dtype``, atomically, to ``path``; returns the store.

    ``layers``: the residual-stream indices the batches hold (default ``0 … rows − 1``);
    ``n_layers``: the model's number of blocks (default ``max(layers)``); ``spec``: the model spec
    (``zoo:…``, ``hf:…``), recorded for provenance. Refuses to write where
    a store already exists, so nothing saved is overwritten. The shards are written under
    :func:`partial_path` and renamed into place when ``meta.json`` is written.
    """
    if dtype not in STORE_DTYPES:
        raise ValueError(f"store dtype must be one of {sorted(STORE_DTYPES)}, got {dtype!r}")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"an activation store already exists at {path}; refusing to overwrite it")
    staging = partial_path(path)
    if staging.exists():  # left by a killed writer of this very version
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        meta = _write_shards(staging, batches, model, STORE_DTYPES[dtype])
        meta["dtype"] = dtype
        meta["spec"] = spec
        meta["layers"] = (
            [int(layer) for layer in layers] if layers is not None else list(range(meta["n_stored_layers"]))
        )
        if len(meta["layers"]) != meta["n_stored_layers"]:
            raise ValueError(f"{model!r}: batches hold {meta['n_stored_layers']} layers but layers={meta['layers']}")
        meta["n_layers"] = int(n_layers if n_layers is not None else max(meta["layers"]))
        (staging / META_FILE).write_text(json.dumps(meta, indent=2))
        staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ActivationStore(path)


def _write_shards(directory: Path, batches: Iterable[ActivationBatch], model: str, dtype: torch.dtype) -> dict:
    """Writes one safetensors shard per batch into ``directory``; returns the store's metadata so far."""
    shards: list[str] = []
    shape = None
    n_sequences = n_tokens = 0
    n_ctx = 0
    for index, batch in enumerate(batches):
        rows = batch.tokens()
        current = (rows.shape[0], rows.shape[2])
        if shape is not None and current != shape:
            raise ValueError(
                f"batch {index} of {model!r} holds (layers, d_model) = {current}, "
                f"inconsistent with the first batch's {shape}"
            )
        shape = current
        tokens = torch.from_numpy(np.ascontiguousarray(rows)).to(dtype)
        if tokens.dtype != torch.float32 and not bool(torch.isfinite(tokens.float().sum(dim=(1, 2))).all()):
            raise ValueError(
                f"{model!r}: activations overflow the store dtype {dtype} (batch {index}); "
                "use activations.store_dtype: float32"
            )
        name = f"shard_{index:05d}.safetensors"
        save_file(
            {"tokens": tokens, "attention_mask": torch.from_numpy(np.ascontiguousarray(batch.attention_mask))},
            str(directory / name),
            metadata={"sequence_start": str(batch.sequence_start)},
        )
        shards.append(name)
        n_sequences += batch.attention_mask.shape[0]
        n_tokens += rows.shape[1]
        n_ctx = batch.attention_mask.shape[1]
    if shape is None:
        raise ValueError(f"no activation batches to write for {model!r}")
    return {
        "model": model,
        "format": FORMAT,
        "n_stored_layers": shape[0],
        "d_model": shape[1],
        "n_ctx": n_ctx,
        "n_sequences": n_sequences,
        "n_tokens": n_tokens,
        "shards": shards,
    }


def store_size_bytes(n_tokens: int, n_stored_layers: int, d_model: int, dtype: str) -> int:
    """Bytes a store of ``n_tokens`` real tokens will take: tokens × layers × width × itemsize (masks ignored)."""
    return n_tokens * n_stored_layers * d_model * STORE_DTYPES[dtype].itemsize


def check_free_space(path: str | Path, needed_bytes: int, what: str) -> None:
    """Raises :class:`ActivationStoreError` naming the estimate and the free space if ``needed_bytes`` won't fit."""
    existing = Path(path)
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if needed_bytes > free:
        raise ActivationStoreError(
            f"{what} needs about {needed_bytes / 2**30:.2f} GiB but {existing} has "
            f"{free / 2**30:.2f} GiB free; store fewer layers (activations.layers), a "
            "smaller dtype (activations.store_dtype) or fewer sentences "
            "(corpus.n_evaluation_sentences)"
        )


@dataclass(frozen=True)
class ActivationStream:
    """What an extraction node returns: the model's name, a lazy re-iterable of batches and how to store them.

    It is not a generator, so Kedro hands it whole to the dataset, which writes it shard by shard.
    It reads like an :class:`ActivationStore` (``model``, ``n_layers``, ``layers``, iteration), so
    CKA can also consume it directly, without writing anything (streaming CKA).
    """

    model: str
    batches: Iterable[ActivationBatch]
    dtype: str = "float32"
    n_layers: int | None = None
    layer_subset: Sequence[int] | None = None
    estimated_bytes: int = 0
    spec: str = ""

    @property
    def layers(self) -> list[int]:
        """The residual streams the batches hold (all ``0 … n_layers`` unless a subset was asked for)."""
        if self.layer_subset is not None:
            return [int(layer) for layer in self.layer_subset]
        if self.n_layers is None:
            raise ValueError(f"the activation stream of {self.model!r} does not know its model's depth")
        return list(range(self.n_layers + 1))

    def __iter__(self) -> Iterator[ActivationBatch]:
        return iter(self.batches)

    def kept_on_device(self) -> ActivationStream:
        """This stream with its batches left on the model's device, when its batches can be
        (:class:`thinkalike.models.extraction.ResidualBatches`); any other stream as it is."""
        keep = getattr(self.batches, "kept_on_device", None)
        return self if keep is None else replace(self, batches=keep())


def provenance(source: ActivationStore | ActivationStream) -> dict[str, str]:
    """Where a method's activations came from: ``{"activations_version", "spec"}`` (``streamed`` when not stored)."""
    version = source.version if isinstance(source, ActivationStore) else "streamed"
    return {"activations_version": version, "spec": source.spec}
