"""Which pipelines a run uses, and so which parameter sections it must validate.

A section is checked only when a pipeline that reads it is part of the run: a run of
``--pipelines corpus,activations,cka`` never fails on the ``embedding`` section, however it names
models. What each pipeline reads (upstream sections included, since it consumes their outputs)
is each spec's ``section`` and those of its ``upstream`` pipelines (:func:`thinkalike.pipelines.specs.sections_read`).

The pipelines of a run: those named with ``--pipelines`` (``__default__``, or none, means every
one), narrowed — when nodes are filtered (``--namespaces``, ``--nodes``, ``--tags``, ``--from-nodes``
…) — to those with at least one node left in the run; a named pipeline that has no node at all
stays in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kedro.pipeline import Pipeline

from thinkalike.pipelines.specs import pipeline_specs, sections_read

DEFAULT = "__default__"


def named_pipelines(pipeline_names: Iterable[str] | None, known: Iterable[str]) -> list[str]:
    """The project pipelines named by ``--pipelines`` (every one of ``known`` for none or ``__default__``)."""
    known = [name for name in known if name != DEFAULT]
    names = list(pipeline_names or [DEFAULT])
    if DEFAULT in names:
        return known
    return [name for name in known if name in names]


def pipelines_in_run(
    pipeline_names: Iterable[str] | None, registered: Mapping[str, Pipeline], running: Pipeline | None = None
) -> list[str]:
    """The project pipelines a run uses: :func:`named_pipelines`, and when ``running`` (the pipeline actually
    run, after node filters) is given, only those with a node in it — or with no node at all."""
    named = named_pipelines(pipeline_names, registered)
    if running is None:
        return named
    running_nodes = {node.name for node in running.nodes}
    return [
        name
        for name in named
        if not registered[name].nodes or running_nodes & {node.name for node in registered[name].nodes}
    ]


def sections_in_run(pipelines: Iterable[str]) -> set[str]:
    """The parameter sections that the given pipelines read (:func:`thinkalike.pipelines.specs.sections_read`)."""
    known = pipeline_specs()
    return {section for name in pipelines if name in known for section in sections_read(name)}
