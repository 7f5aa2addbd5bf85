"""Kedro datasets for objects kedro-datasets has no connector for (local filesystem).

* ``ActivationStoreDataset`` — a versioned directory of residual-stream shards
  (:mod:`thinkalike.models.activation_store`); saving streams one batch at a time.
* ``HFTokenizerDataset`` — a versioned Hugging Face tokenizer directory (``save_pretrained``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import AbstractVersionedDataset, DatasetError, Version

from thinkalike.models.activation_store import ActivationStore, ActivationStream, write_activation_store


class _LocalDirectoryDataset(AbstractVersionedDataset):
    """A versioned dataset stored as a directory on the local filesystem."""

    def __init__(self, *, filepath: str, version: Version | None = None, metadata: dict[str, Any] | None = None):
        super().__init__(filepath=PurePosixPath(filepath), version=version)
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}

    def _exists(self) -> bool:
        try:
            return Path(self._get_load_path()).exists()
        except DatasetError:
            return False


class ActivationStoreDataset(_LocalDirectoryDataset):
    """Saves an :class:`ActivationStream` shard by shard; loads an :class:`ActivationStore`."""

    def load(self) -> ActivationStore:
        return ActivationStore(Path(self._get_load_path()))

    def save(self, data: ActivationStream) -> None:
        if not isinstance(data, ActivationStream):
            raise DatasetError(f"ActivationStoreDataset saves an ActivationStream, got {type(data).__name__}")
        write_activation_store(Path(self._get_save_path()), data.batches, data.model)


class HFTokenizerDataset(_LocalDirectoryDataset):
    """A Hugging Face fast tokenizer saved with ``save_pretrained`` (tokenizer.json + configs)."""

    def load(self):
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(self._get_load_path()))

    def save(self, data) -> None:
        path = Path(self._get_save_path())
        if path.exists():
            raise DatasetError(f"tokenizer directory {path} already exists; refusing to overwrite it")
        data.save_pretrained(str(path))
