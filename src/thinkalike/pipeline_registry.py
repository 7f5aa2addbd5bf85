"""Project pipelines: every folder of ``thinkalike.pipelines`` with a ``create_pipeline``."""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline


def register_pipelines() -> dict[str, Pipeline]:
    """``__default__`` is the offline foundation: corpus → zoo → activations (→ cka when present)."""
    pipelines = find_pipelines(raise_errors=True)
    pipelines["__default__"] = sum(pipelines.values(), Pipeline([]))
    return pipelines
