"""Runners beyond Kedro's own: :class:`DaskRunner` runs the project's task groups on a Dask cluster."""

from thinkalike.runners.dask_runner import DaskRunner

__all__ = ["DaskRunner"]
