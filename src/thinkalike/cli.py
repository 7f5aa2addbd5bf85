"""The project's ``kedro`` commands (Kedro loads ``<package>.cli`` and lets its commands override its own): Kedro's
``run``, unchanged but for one check made before anything else — every name given to ``--pipelines`` (or the
deprecated ``--pipeline``) is a project pipeline. An unknown name is one ``Error: …`` line naming the option, the
name and the project's pipelines, where Kedro's ``KedroSession.run`` would raise a ``ValueError`` (a traceback)
only after building the context. ``python -m thinkalike`` runs this command too (Kedro's ``find_run_command``).

The project's pipeline names do not depend on the configuration (:func:`thinkalike.pipelines.builders.build_pipelines`
builds one pipeline per spec, and ``__default__``), so they are known without reading ``conf/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click
from click import ClickException
from kedro.framework.cli.project import run as kedro_run

from thinkalike.pipelines.run_selection import DEFAULT
from thinkalike.pipelines.specs import pipeline_specs

__all__ = ["UnknownPipeline", "check_pipeline_names", "cli", "run"]


class UnknownPipeline(ValueError, ClickException):
    """An unknown ``--pipelines`` name: the ``kedro`` command line shows it as one line (``Error: …``)."""

    def __init__(self, message: str) -> None:
        ClickException.__init__(self, message)


def known_pipeline_names() -> list[str]:
    """The names ``kedro run --pipelines`` accepts: every project pipeline, in stage order, and ``__default__``."""
    return [*pipeline_specs(), DEFAULT]


def check_pipeline_names(names: Iterable[str], option: str = "--pipelines") -> None:
    """Raise :class:`UnknownPipeline` naming ``option``, the unknown names and the known ones, if any of ``names``
    is not a project pipeline."""
    known = known_pipeline_names()
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if unknown:
        quoted = ", ".join(f"'{name}'" for name in unknown)
        raise UnknownPipeline(
            f"{option}: no pipeline{'s' if len(unknown) > 1 else ''} named {quoted}; the pipelines are "
            f"{', '.join(known)} "
            "(several: comma-separated, e.g. --pipelines corpus,zoo)"
        )


def _checked(callback: Callable[..., Any]) -> Callable[..., Any]:
    def run_checked(**kwargs: Any) -> Any:
        check_pipeline_names(kwargs.get("pipelines") or [])
        if kwargs.get("pipeline"):
            check_pipeline_names([kwargs["pipeline"]], option="--pipeline")
        return callback(**kwargs)

    return run_checked


@click.group(name="ThinkAlike")
def cli() -> None:
    """The ThinkAlike project's commands."""


if kedro_run.callback is None:  # a click command made by a decorator has one
    raise ImportError("kedro.framework.cli.project.run has no callback: this Kedro release is not supported")
run = click.Command(
    name="run",
    callback=_checked(kedro_run.callback),
    params=list(kedro_run.params),
    help=kedro_run.help,
    epilog=kedro_run.epilog,
    short_help=kedro_run.short_help,
    context_settings=kedro_run.context_settings,
)
cli.add_command(run)
