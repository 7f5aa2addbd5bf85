"""Every project pipeline (:func:`thinkalike.pipelines.specs.pipeline_specs`), built from the parameters alone (no
Kedro session, no hooks).

Building never fails for a section that a run may not use: a pipeline whose section cannot be
built (a model it names is not configured, a malformed pair list…) is registered as one node,
``<pipeline>_configuration_error``, that would raise the error; a run that includes it stops
before any node with that error, naming the parameter
(:func:`thinkalike.pipelines.validation.validate_parameters`), and kedro-viz shows where the
configuration is broken.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.output_rules import GENERIC_RULES, OutputRule
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.fixed_arguments import with_fixed_arguments
from thinkalike.pipelines.namespaces import CORPUS, MODELS, group_namespace
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.pipelines.section_findings import section_findings_pipeline
from thinkalike.pipelines.specs import output_rules, pipeline_specs, viz_groups

logger = logging.getLogger(__name__)


def all_output_rules() -> tuple[OutputRule, ...]:
    """The rules :func:`thinkalike.output_rules.apply_rules` applies in a run (called by
    :func:`thinkalike.hooks.record_saved_output`): the generic ones, then every pipeline's (its spec's ``rules``)."""
    return (*GENERIC_RULES, *output_rules())


CONFIGURATION_ERROR = "configuration_error"


def raise_configuration_error(message: str) -> None:
    """The function of a configuration-error node: raises its pipeline's build error."""
    raise ParameterError(message)


def configuration_error_pipeline(name: str, message: str) -> Pipeline:
    """One node, ``<name>_configuration_error`` (tag ``configuration_error``), standing for pipeline ``name``."""
    return Pipeline(
        [
            Node(
                with_fixed_arguments(raise_configuration_error, message=message),
                None,
                f"{name}_{CONFIGURATION_ERROR}",
                name=f"{name}_{CONFIGURATION_ERROR}",
                tags=[CONFIGURATION_ERROR],
            )
        ]
    )


def has_configuration_error(pipeline: Pipeline) -> bool:
    """Whether ``pipeline`` stands for a section that could not be built (:func:`configuration_error_pipeline`)."""
    return any(CONFIGURATION_ERROR in node.tags for node in pipeline.nodes)


def build_pipeline(name: str, run: RunSettings) -> Pipeline:
    """Pipeline ``name`` for the run's settings ``run``; when its section cannot be built (a ``ValueError``, which
    :class:`~thinkalike.pipelines.errors.ParameterError` is), the :func:`configuration_error_pipeline` saying why."""
    try:
        return pipeline_specs()[name].build(run)
    except ValueError as error:
        logger.debug("pipeline %r cannot be built: %s", name, error)
        return configuration_error_pipeline(name, str(error))


def build_pipelines(parameters: Mapping[str, Any]) -> dict[str, Pipeline]:
    """Every project pipeline for ``parameters``; ``__default__`` is the sum of all of them.

    Per-model and per-pair nodes are namespaced under ``models``
    (:mod:`thinkalike.pipelines.namespaces`), so Kedro's dotted-name warning has no cause here. Each pipeline that
    declares report sections also saves their numbers (:mod:`thinkalike.pipelines.section_findings`).
    """
    specs = pipeline_specs()
    run = RunSettings(parameters)  # each section parsed once, for every builder
    built = {name: build_pipeline(name, run) for name in specs}
    made = set().union(*(pipeline.all_outputs() for pipeline in built.values()))
    for name, spec in specs.items():  # each pipeline saves its report sections' numbers
        if spec.report and not has_configuration_error(built[name]):
            built[name] += section_findings_pipeline(spec, made)
    for name, spec in specs.items():
        if spec.summarises and not has_configuration_error(built[name]):
            others = sum((pipeline for other, pipeline in built.items() if not specs[other].summarises), Pipeline([]))
            built[name] = spec.build(run, indexed=summaries_unread(others))
    built["__default__"] = sum(built.values(), Pipeline([]))
    return built


def summaries_unread(pipeline: Pipeline) -> list[str]:
    """The outputs of ``pipeline``'s summary nodes (in a method's namespace ``models.<group>``, the zoo's ``models``
    or the corpus's) that no node of it reads: what the report lists in its index, so that every summary output is
    read inside the ``models`` box and kedro-viz's first view is the corpus, the models box and the report.
    Per-model and per-pair outputs (activation stores …) are never listed: the report would load them."""
    summary_namespaces = {CORPUS, MODELS, *(group_namespace(group) for group in viz_groups())}
    read = pipeline.all_inputs()
    return sorted(
        {
            name
            for node in pipeline.nodes
            if node.namespace in summary_namespaces and CONFIGURATION_ERROR not in node.tags
            for name in node.outputs
        }
        - read
    )
