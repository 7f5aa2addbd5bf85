"""``kedro run --only-missing-outputs`` that also redoes what depends on redone work.

Kedro skips a node when all its persisted outputs exist, and re-runs parents whose outputs a
running child needs — but not children: after one model's activations are deleted it would
re-extract them and keep every CKA table computed from the deleted version. Here a node must
run when

1. one of its persisted outputs is missing (Kedro's own rule), or
2. one of its inputs is produced by a node that must run (so its outputs would be stale), or
3. the latest version of one of its versioned inputs is newer than the oldest latest version of
   its versioned outputs (an input was re-made since, e.g. by an interrupted earlier resume).

:func:`nodes_to_rerun` finds them in topological order; :func:`mark_for_rerun` makes their
outputs read as missing until they are saved again, so Kedro's filter then runs exactly them
(plus the parents of ephemeral inputs, as Kedro does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeGuard

from kedro.io import AbstractDataset, DatasetError
from kedro.io.core import AbstractVersionedDataset, VersionNotFoundError
from kedro.pipeline import Node, Pipeline


def _dataset(catalog, name: str) -> AbstractDataset | None:
    if name.startswith("params:") or name == "parameters" or name not in catalog:
        return None
    return catalog.get(name)


def _is_persisted(dataset: AbstractDataset | None) -> TypeGuard[AbstractDataset]:
    return dataset is not None and not getattr(dataset, "_EPHEMERAL", False)


def latest_version(dataset: AbstractDataset | None) -> str | None:
    """The latest complete version of a versioned dataset (a sortable timestamp), else ``None``."""
    if not isinstance(dataset, AbstractVersionedDataset):
        return None
    try:
        return dataset.resolve_load_version()
    except (VersionNotFoundError, DatasetError):
        return None


def _missing(dataset: AbstractDataset) -> bool:
    try:
        return not dataset.exists()
    except DatasetError:
        return True


def nodes_to_rerun(pipeline: Pipeline, catalog) -> list[Node]:
    """The nodes that must run on resume (rules 1–3 of the module docstring), in topological order."""
    rerun: list[Node] = []
    stale_outputs: set[str] = set()
    for node in pipeline.nodes:  # topologically sorted
        outputs = {name: _dataset(catalog, name) for name in node.outputs}
        persisted_outputs = {name: ds for name, ds in outputs.items() if _is_persisted(ds)}
        must_run = (
            any(_missing(ds) for ds in persisted_outputs.values())
            or any(name in stale_outputs for name in node.inputs)
            or _inputs_newer_than_outputs(node, catalog, persisted_outputs.values())
        )
        if must_run:
            rerun.append(node)
            stale_outputs.update(node.outputs)
    return rerun


def _inputs_newer_than_outputs(node: Node, catalog, outputs: Iterable[AbstractDataset]) -> bool:
    output_versions = [version for version in map(latest_version, outputs) if version is not None]
    if not output_versions:
        return False
    oldest_output = min(output_versions)
    input_versions = [latest_version(_dataset(catalog, name)) for name in node.inputs]
    return any(version is not None and version > oldest_output for version in input_versions)


class MissingUntilSaved(AbstractDataset):
    """Wraps a persisted dataset so that it reads as missing until this run saves it."""

    def __init__(self, dataset: AbstractDataset) -> None:
        self._wrapped = dataset
        self._saved = False

    def load(self) -> Any:
        return self._wrapped.load()

    def save(self, data: Any) -> None:
        self._wrapped.save(data)
        self._saved = True

    def _exists(self) -> bool:
        return self._saved and self._wrapped.exists()

    def _describe(self) -> dict[str, Any]:
        return {"rerun": True, **self._wrapped._describe()}  # noqa: SLF001 - the wrapped dataset's own description

    def release(self) -> None:
        self._wrapped.release()


def mark_for_rerun(nodes: Iterable[Node], catalog) -> list[str]:
    """Replaces the persisted outputs of ``nodes`` in ``catalog`` by :class:`MissingUntilSaved` wrappers.

    Returns the names of the wrapped datasets.
    """
    wrapped = []
    for node in nodes:
        for name in node.outputs:
            dataset = _dataset(catalog, name)
            if _is_persisted(dataset) and not isinstance(dataset, MissingUntilSaved):
                catalog[name] = MissingUntilSaved(dataset)
                wrapped.append(name)
    return wrapped
