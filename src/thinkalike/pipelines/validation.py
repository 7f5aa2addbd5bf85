"""Checks of the run's configuration, made before any node runs (cheap: no weights are loaded).

Every section that a pipeline of the run reads (:func:`thinkalike.pipelines.run_selection.sections_in_run`) is checked by
the check its owner declares (:attr:`thinkalike.pipelines.specs.PipelineSpec.check`), in stage order, before the
first node, so a bad setting never surfaces after earlier models trained; a section that no pipeline of the run
reads is not looked at, so it cannot stop the run. Errors are
:class:`~thinkalike.pipelines.errors.ParameterError` s naming the full key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kedro.pipeline import Pipeline

from thinkalike.pipelines.builders import has_configuration_error
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.run_selection import sections_in_run
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.specs import pipeline_specs


def validate_parameters(
    parameters: dict[str, Any], pipelines: Iterable[str] | None = None, built: Mapping[str, Pipeline] | None = None
) -> None:
    """Raises a :class:`ParameterError` naming the parameter for any bad setting (a missing file included) of
    the sections that ``pipelines`` read (every project pipeline when ``None``). ``built``: the registered
    pipelines; those of ``pipelines`` that stand for a configuration error (or all, without ``built``) must
    build (:func:`check_builds`)."""
    specs = pipeline_specs()
    pipelines = list(specs if pipelines is None else pipelines)
    sections = sections_in_run(pipelines)
    run = RunSettings(parameters)  # each section parsed once, for every check and build
    for spec in specs.values():
        if spec.section in sections and spec.check is not None:
            spec.check(run)
    check_builds(run, [name for name in pipelines if built is None or has_configuration_error(built[name])])


def check_builds(run: RunSettings, pipelines: Iterable[str]) -> None:
    """Each of ``pipelines`` builds from the run's settings: the error that left it empty at registration
    (:func:`thinkalike.pipelines.builders.build_pipeline`) is raised here, naming the parameter."""
    specs = pipeline_specs()
    for name in pipelines:
        try:
            specs[name].build(run)
        except ParameterError:
            raise
        except ValueError as error:
            message = str(error)
            raise ParameterError(message if message.startswith(f"{name}.") else f"{name}: {message}") from None
