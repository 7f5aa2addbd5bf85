"""kedro-datasets file datasets that never leave a half-written latest version.

Each class here is the kedro-datasets class of the same name with one change: ``save`` writes
to ``<file>.partial`` inside the version folder and renames it to ``<file>`` only when the
write finished (``os.replace``, atomic on one filesystem). Kedro finds versions by globbing
``<filepath>/*/<file>``, so a write killed half-way (even by SIGKILL) leaves a ``.partial``
file that is never taken for the latest version, nor for an existing output by
``kedro run --only-missing-outputs``. Saved files get the process's default permissions
(0644 under the usual umask), whatever the writer used for its temporary file.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from kedro_datasets.json import JSONDataset as _JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset as _MatplotlibDataset
from kedro_datasets.pandas import ParquetDataset as _ParquetDataset
from kedro_datasets.plotly import JSONDataset as _PlotlyJSONDataset
from kedro_datasets_experimental.safetensors import SafetensorsDataset as _SafetensorsDataset

PARTIAL_SUFFIX = ".partial"


def default_file_mode() -> int:
    """0o666 less the process umask: the mode ``open()`` gives a new file."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


class AtomicSaveMixin:
    """Put first in the bases of a versioned kedro-datasets file dataset (see module docstring)."""

    def _get_save_path(self) -> PurePosixPath:
        final = super()._get_save_path()  # type: ignore[misc]
        return final.with_name(final.name + PARTIAL_SUFFIX)

    def _write(self, data: Any) -> None:
        """The kedro-datasets class's own save, without its (already applied) wrapper."""
        base = next(cls for cls in type(self).__mro__ if "save" in vars(cls) and not issubclass(cls, AtomicSaveMixin))
        getattr(base.save, "__wrapped__", base.save)(self, data)

    def save(self, data: Any) -> None:
        staging = Path(str(self._get_save_path()))
        final = staging.with_name(staging.name.removesuffix(PARTIAL_SUFFIX))
        try:
            self._write(data)
            os.chmod(staging, default_file_mode())
            os.replace(staging, final)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise


class ParquetDataset(AtomicSaveMixin, _ParquetDataset):
    """``pandas.ParquetDataset``, saved atomically."""


class JSONDataset(AtomicSaveMixin, _JSONDataset):
    """``json.JSONDataset``, saved atomically."""


class MatplotlibDataset(AtomicSaveMixin, _MatplotlibDataset):
    """``matplotlib.MatplotlibDataset`` (one figure per file), saved atomically."""


class PlotlyJSONDataset(AtomicSaveMixin, _PlotlyJSONDataset):
    """``plotly.JSONDataset``, saved atomically."""


class SafetensorsDataset(AtomicSaveMixin, _SafetensorsDataset):
    """``safetensors.SafetensorsDataset`` (kedro-datasets experimental), saved atomically."""
