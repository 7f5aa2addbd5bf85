"""kedro-datasets file datasets that never leave a half-written latest version.

Each class here is the kedro-datasets class of the same name with one change: ``save`` writes
to ``<file>.partial`` inside the version folder and renames it to ``<file>`` only when the
write finished (``os.replace``, atomic on one filesystem). Kedro finds versions by globbing
``<filepath>/*/<file>``, so a write killed half-way (even by SIGKILL) leaves a ``.partial``
file that is never taken for the latest version, nor for an existing output by
``kedro run --only-missing-outputs``. Saved files get the process's default permissions
(0644 under the usual umask), whatever the writer used for its temporary file.

Each class also has a kedro-viz ``preview()`` (:mod:`thinkalike.io.previews`) that never fails:
tables with list columns preview as text cells, JSON without NaN, safetensors files as a table
of their tensors, and a dataset not saved yet previews as a message saying so.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io.core import get_filepath_str
from kedro_datasets.json import JSONDataset as _JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset as _MatplotlibDataset
from kedro_datasets.pandas import ParquetDataset as _ParquetDataset
from kedro_datasets.plotly import JSONDataset as _PlotlyJSONDataset
from kedro_datasets.text import TextDataset as _TextDataset
from kedro_datasets_experimental.safetensors import (
    SafetensorsDataset as _SafetensorsDataset,
)

from thinkalike.io.figures import rendered_png
from thinkalike.io.previews import (
    ImagePreview,
    JSONPreview,
    PlotlyPreview,
    TablePreview,
    cell_text,
    jsonable,
    jsonable_table,
    message_image,
    message_json,
    message_plotly,
    message_table,
    preview_or_message,
)

PARTIAL_SUFFIX = ".partial"


def default_file_mode(directory: bool = False) -> int:
    """0o666 (a directory: 0o777) less the process umask: the mode ``open()`` (``mkdir()``) gives a new one."""
    mask = os.umask(0o022)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


class AtomicSaveMixin:
    """Put first in the bases of a versioned kedro-datasets file dataset (see module docstring)."""

    def _get_save_path(self) -> PurePosixPath:
        final = super()._get_save_path()  # type: ignore[misc]
        return final.with_name(final.name + PARTIAL_SUFFIX)

    def _write(self, data: Any) -> None:
        """The kedro-datasets class's own save, without its (already applied) wrapper."""
        base = next(cls for cls in type(self).__mro__ if "save" in vars(cls) and not issubclass(cls, AtomicSaveMixin))
        save = vars(base)["save"]
        getattr(save, "__wrapped__", save)(self, data)

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


def natural_order(name: str) -> list[tuple[int, int | str]]:
    """Sort key putting ``blocks.2`` before ``blocks.10``."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)]


class ParquetDataset(AtomicSaveMixin, _ParquetDataset):
    """``pandas.ParquetDataset``, saved atomically."""

    def preview(self, nrows: int = 5) -> TablePreview:
        """The first ``nrows`` rows; list columns (``words``, ``pos`` …) as text cells."""
        first_rows = super().preview
        return preview_or_message(self, lambda: jsonable_table(first_rows(nrows=nrows)), message_table)


class JSONDataset(AtomicSaveMixin, _JSONDataset):
    """``json.JSONDataset``, saved atomically."""

    def preview(self) -> JSONPreview:
        """The saved JSON, with NaN and infinities as ``null`` (the browser's JSON parser rejects them)."""
        saved = super().preview
        return preview_or_message(
            self, lambda: JSONPreview(json.dumps(jsonable(json.loads(saved())), allow_nan=False)), message_json
        )


class MatplotlibDataset(AtomicSaveMixin, _MatplotlibDataset):
    """``matplotlib.MatplotlibDataset``, saved atomically: one figure as one file, or a dict ``{file name: figure}``
    (a list: ``0.png``, ``1.png`` …) as a folder of files, staged as ``<folder>.partial`` and renamed whole."""

    def save(self, data: Any) -> None:
        if not isinstance(data, (dict, list)):
            super().save(data)
            return
        staging = Path(str(self._get_save_path()))
        final = staging.with_name(staging.name.removesuffix(PARTIAL_SUFFIX))
        try:
            self._write(data)
            staging.mkdir(parents=True, exist_ok=True)  # an empty dict still saves a (empty) version
            for path in [staging, *staging.rglob("*")]:
                os.chmod(path, default_file_mode() if path.is_file() else default_file_mode(directory=True))
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _save_to_fs(self, full_key_path: str, plot: Any) -> None:
        """As kedro-datasets writes a figure; with its default save arguments and a ``.png`` name, from the bytes
        :func:`thinkalike.io.figures.rendered_png` keeps (MLflow's copy is then not rendered again)."""
        if self._save_args or not full_key_path.removesuffix(PARTIAL_SUFFIX).lower().endswith(".png"):
            super()._save_to_fs(full_key_path, plot)
            return
        with self._fs.open(full_key_path, **self._fs_open_args_save) as file:
            file.write(rendered_png(plot))

    def load(self) -> bytes | dict[str, bytes]:
        """The saved image's bytes; of a folder of figures, ``{file name: bytes}`` (what a report embeds: the
        figure as drawn once, by the node that made it)."""
        path = Path(get_filepath_str(self._get_load_path(), self._protocol))
        if path.is_dir():
            return {
                str(file.relative_to(path)): file.read_bytes()
                for file in sorted(path.rglob("*"), key=lambda file: natural_order(file.name))
                if file.is_file()
            }
        return path.read_bytes()

    def preview(self) -> ImagePreview:
        """The saved PNG; of a folder of figures, its first file (in natural order)."""
        return preview_or_message(self, self._first_image, message_image)

    def _first_image(self) -> ImagePreview:
        path = Path(get_filepath_str(self._get_load_path(), self._protocol))
        if not path.is_dir():
            return super().preview()
        files = sorted((file for file in path.rglob("*") if file.is_file()), key=lambda file: natural_order(file.name))
        if not files:
            return message_image(f"{path} holds no figure")
        return ImagePreview(base64.b64encode(files[0].read_bytes()).decode("ascii"))


class PlotlyJSONDataset(AtomicSaveMixin, _PlotlyJSONDataset):
    """``plotly.JSONDataset``, saved atomically."""

    def preview(self) -> PlotlyPreview:
        """The saved figure, drawn by kedro-viz."""
        return preview_or_message(self, super().preview, message_plotly)


class TextDataset(AtomicSaveMixin, _TextDataset):
    """``text.TextDataset`` (a markdown or plain-text report), saved atomically."""

    def preview(self, nchars: int = 4000) -> JSONPreview:
        """The first ``nchars`` characters of the saved text (kedro-viz shows JSON previews as text)."""
        saved = super().load
        return preview_or_message(self, lambda: JSONPreview(json.dumps({"text": saved()[:nchars]})), message_json)


class SafetensorsDataset(AtomicSaveMixin, _SafetensorsDataset):
    """``safetensors.SafetensorsDataset`` (kedro-datasets experimental), saved atomically."""

    def preview(self, nrows: int = 12, nvalues: int = 8) -> TablePreview:
        """One row per tensor (the first ``nrows``): name, dtype, shape and its first ``nvalues`` values."""
        return preview_or_message(self, lambda: self._tensor_table(nrows, nvalues), message_table)

    def _tensor_table(self, nrows: int, nvalues: int) -> TablePreview:
        """The tensor table of the latest saved file, read lazily (one row of each tensor at most)."""
        from safetensors import safe_open

        path = get_filepath_str(self._get_load_path(), self._protocol)
        if self._protocol != "file":
            raise NotImplementedError(f"previews read local safetensors files only, not {self._protocol}://{path}")
        rows = []
        with safe_open(path, framework="pt") as handle:
            names = sorted(handle.keys(), key=natural_order)
            for name in names[:nrows]:
                tensor = handle.get_slice(name)
                shape = list(tensor.get_shape())
                values = leading_values(tensor, shape, nvalues) if shape else [handle.get_tensor(name).item()]
                rows.append(
                    [name, tensor.get_dtype(), cell_text(shape), cell_text([f"{value:.4g}" for value in values])]
                )
        if len(names) > nrows:
            rows.append([f"… {len(names) - nrows} more tensors", "", "", ""])
        return TablePreview(
            {
                "columns": ["tensor", "dtype", "shape", f"first {nvalues} values"],
                "index": list(range(len(rows))),
                "data": rows,
            }
        )


def leading_values(tensor, shape: list[int], count: int) -> list[float]:
    """The first ``count`` values of a safetensors slice: of its first row when it has several dimensions."""
    head = tensor[:1] if len(shape) > 1 else tensor[:count]
    return head.float().flatten()[:count].tolist()
