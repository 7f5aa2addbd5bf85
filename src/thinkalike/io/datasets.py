"""Kedro datasets for objects kedro-datasets has no connector for (local filesystem).

* ``ActivationStoreDataset`` — a versioned directory of residual-stream shards
  (:mod:`thinkalike.models.activation_store`); saving streams one batch at a time.
* ``HFTokenizerDataset`` — a versioned Hugging Face tokenizer directory (``save_pretrained``).

Both write atomically: into a ``<name>.partial`` sibling renamed into place when complete, and
a version counts as existing (for loading, ``--only-missing-outputs`` and "latest version")
only when it is complete, so a killed run never leaves a half-written latest version.

Both have a kedro-viz ``preview()`` (JSON: model, layers, shape, dtype and a few rows of a store;
vocabulary and special tokens of a tokenizer), or a message saying why there is none.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractVersionedDataset, DatasetError, Version

from thinkalike.io.previews import JSONPreview, jsonable, message_json, preview_or_message, rounded
from thinkalike.models.activation_store import (
    ActivationStore,
    ActivationStream,
    check_free_space,
    is_complete_store,
    partial_path,
    write_activation_store,
)


class _LocalDirectoryDataset(AbstractVersionedDataset):
    """A versioned dataset stored as a directory on the local filesystem."""

    def __init__(self, *, filepath: str, version: Version | None = None, metadata: dict[str, Any] | None = None):
        super().__init__(filepath=PurePosixPath(filepath), version=version, exists_function=self._is_complete)
        self.metadata = metadata

    @staticmethod
    def _is_complete(path: str) -> bool:
        """Whether the directory at ``path`` holds a complete output (overridden per format)."""
        return os.path.isdir(path)

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}

    def _exists(self) -> bool:
        try:
            return self._is_complete(str(self._get_load_path()))
        except DatasetError:
            return False


class ActivationStoreDataset(_LocalDirectoryDataset):
    """Saves an :class:`ActivationStream` shard by shard; loads an :class:`ActivationStore`."""

    @staticmethod
    def _is_complete(path: str) -> bool:
        return is_complete_store(path)

    def load(self) -> ActivationStore:
        return ActivationStore(Path(self._get_load_path()))

    def save(self, data: ActivationStream) -> None:
        if not isinstance(data, ActivationStream):
            raise DatasetError(f"ActivationStoreDataset saves an ActivationStream, got {type(data).__name__}")
        path = Path(self._get_save_path())
        check_free_space(path, data.estimated_bytes, f"the activation store of {data.model!r} ({path})")
        write_activation_store(
            path,
            data.batches,
            data.model,
            dtype=data.dtype,
            n_layers=data.n_layers,
            layers=data.layer_subset,
            spec=data.spec,
        )

    def preview(self, nrows: int = 4, nvalues: int = 6) -> JSONPreview:
        """For kedro-viz: model, layers, shape, dtype, and the first ``nvalues`` dimensions of the first
        ``nrows`` token rows of every stored layer."""
        return preview_or_message(self, lambda: store_preview(self.load(), nrows, nvalues), message_json)


def store_preview(store: ActivationStore, nrows: int, nvalues: int) -> JSONPreview:
    """The JSON preview of an activation store (see :meth:`ActivationStoreDataset.preview`)."""
    first = store.batch(0).tokens()[:, :nrows, :nvalues] if store.n_shards else None
    n_tokens = store.meta.get("n_tokens")
    summary = {
        "model": store.model,
        "spec": store.spec,
        "version": store.version,
        "dtype": store.dtype,
        "layers (0 = embeddings)": store.layers,
        "d_model": store.d_model,
        "shape (layers, tokens, d_model)": [len(store.layers), n_tokens, store.d_model],
        "n_sequences": store.meta.get("n_sequences"),
        "n_ctx": store.meta.get("n_ctx"),
        "shards": store.n_shards,
        f"first {nrows} tokens, first {nvalues} dimensions": (
            {f"layer {layer}": rounded(rows) for layer, rows in zip(store.layers, first)} if first is not None else {}
        ),
    }
    return JSONPreview(json.dumps(jsonable(summary), allow_nan=False))


TOKENIZER_MARKER = "tokenizer_config.json"


class HFTokenizerDataset(_LocalDirectoryDataset):
    """A Hugging Face fast tokenizer saved with ``save_pretrained`` (tokenizer.json + configs)."""

    @staticmethod
    def _is_complete(path: str) -> bool:
        return os.path.isfile(os.path.join(path, TOKENIZER_MARKER))

    def load(self):
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(self._get_load_path()))

    def save(self, data) -> None:
        path = Path(self._get_save_path())
        if path.exists():
            raise DatasetError(f"tokenizer directory {path} already exists; refusing to overwrite it")
        staging = partial_path(path)
        shutil.rmtree(staging, ignore_errors=True)
        try:
            data.save_pretrained(str(staging))
            if not self._is_complete(str(staging)):
                raise DatasetError(f"save_pretrained wrote no {TOKENIZER_MARKER} in {staging}")
            staging.rename(path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def preview(self, ntokens: int = 20) -> JSONPreview:
        """For kedro-viz: class, vocabulary size, special tokens and the first ``ntokens`` tokens by id."""
        return preview_or_message(self, lambda: tokenizer_preview(self.load(), ntokens), message_json)


def tokenizer_preview(tokenizer, ntokens: int) -> JSONPreview:
    """The JSON preview of a tokenizer (see :meth:`HFTokenizerDataset.preview`)."""
    vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return JSONPreview(
        json.dumps(
            {
                "class": type(tokenizer).__name__,
                "vocab_size": len(tokenizer),
                "special_tokens": tokenizer.all_special_tokens,
                f"first {ntokens} tokens (by id)": [token for token, _ in vocabulary[:ntokens]],
            }
        )
    )
