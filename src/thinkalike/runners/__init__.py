"""Runners beyond Kedro's own: :class:`DaskRunner` runs the project's task groups on a Dask cluster.

``DaskRunner`` is imported when first asked for (``--runner thinkalike.runners.DaskRunner`` does), so that reading
this package's settings (the pipelines' GPU tag, :data:`thinkalike.runners.settings.GPU_WORK`) imports neither Dask
nor Kedro's project machinery."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinkalike.runners.dask_runner import DaskRunner

__all__ = ["DaskRunner"]


def __getattr__(name: str) -> Any:
    if name == "DaskRunner":
        from thinkalike.runners.dask_runner import DaskRunner

        return DaskRunner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
