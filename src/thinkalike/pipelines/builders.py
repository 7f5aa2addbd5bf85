"""Every project pipeline, built from the parameters alone (no Kedro session, no hooks).

Building never fails for a section that a run may not use: a pipeline whose section cannot be
built (a model it names is not configured, a malformed pair list…) is registered as one node,
``<pipeline>_configuration_error``, that would raise the error; a run that includes it stops
before any node with that error, naming the parameter
(:func:`thinkalike.pipelines.validation.validate_parameters`), and kedro-viz shows where the
configuration is broken.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.activations.pipeline import (
    create_pipeline as activations_pipeline,
)
from thinkalike.pipelines.bind import bind
from thinkalike.pipelines.cka import metrics as cka_metrics
from thinkalike.pipelines.cka.pipeline import create_pipeline as cka_pipeline
from thinkalike.pipelines.corpus import metrics as corpus_metrics
from thinkalike.pipelines.corpus.pipeline import create_pipeline as corpus_pipeline
from thinkalike.pipelines.embedding import metrics as embedding_metrics
from thinkalike.pipelines.embedding.pipeline import (
    create_pipeline as embedding_pipeline,
)
from thinkalike.pipelines.errors import ParameterError
from thinkalike.pipelines.mlem import metrics as mlem_metrics
from thinkalike.pipelines.mlem.pipeline import create_pipeline as mlem_pipeline
from thinkalike.pipelines.namespaces import CORPUS, GROUPS, MODELS, group_namespace
from thinkalike.pipelines.nli import metrics as nli_metrics
from thinkalike.pipelines.nli.pipeline import create_pipeline as nli_pipeline
from thinkalike.pipelines.report import metrics as report_metrics
from thinkalike.pipelines.report.pipeline import create_pipeline as report_pipeline
from thinkalike.pipelines.scaling import metrics as scaling_metrics
from thinkalike.pipelines.scaling.pipeline import create_pipeline as scaling_pipeline
from thinkalike.pipelines.stitching import metrics as stitching_metrics
from thinkalike.pipelines.stitching.pipeline import (
    create_pipeline as stitching_pipeline,
)
from thinkalike.pipelines.zoo import metrics as zoo_metrics
from thinkalike.pipelines.zoo.pipeline import create_pipeline as zoo_pipeline
from thinkalike.records import GENERIC_RULES, OutputRule

logger = logging.getLogger(__name__)

PIPELINE_BUILDERS: dict[str, Callable[[Mapping[str, Any]], Pipeline]] = {
    "corpus": corpus_pipeline,
    "zoo": zoo_pipeline,
    "activations": activations_pipeline,
    "cka": cka_pipeline,
    "scaling": scaling_pipeline,
    "stitching": stitching_pipeline,
    "mlem": mlem_pipeline,
    "embedding": embedding_pipeline,
    "nli": nli_pipeline,
    "report": report_pipeline,
}

#: What MLflow gets from each pipeline's saved outputs (its ``metrics.RULES``, see :mod:`thinkalike.records`);
#: a pipeline without an entry logs only its figures.
PIPELINE_RULES: dict[str, tuple[OutputRule, ...]] = {
    "corpus": corpus_metrics.RULES,
    "zoo": zoo_metrics.RULES,
    "cka": cka_metrics.RULES,
    "scaling": scaling_metrics.RULES,
    "stitching": stitching_metrics.RULES,
    "mlem": mlem_metrics.RULES,
    "embedding": embedding_metrics.RULES,
    "nli": nli_metrics.RULES,
    "report": report_metrics.RULES,
}
#: The rules :func:`thinkalike.records.apply_rules` applies in a run (called by
#: :func:`thinkalike.hooks.record_saved_output`): the generic ones, then every pipeline's.
OUTPUT_RULES: tuple[OutputRule, ...] = (*GENERIC_RULES, *(rule for rules in PIPELINE_RULES.values() for rule in rules))


CONFIGURATION_ERROR = "configuration_error"


def raise_configuration_error(message: str) -> None:
    """The function of a configuration-error node: raises its pipeline's build error."""
    raise ParameterError(message)


def configuration_error_pipeline(name: str, message: str) -> Pipeline:
    """One node, ``<name>_configuration_error`` (tag ``configuration_error``), standing for pipeline ``name``."""
    return Pipeline([Node(bind(raise_configuration_error, message=message), None, f"{name}_{CONFIGURATION_ERROR}",
                          name=f"{name}_{CONFIGURATION_ERROR}", tags=[CONFIGURATION_ERROR])])


def has_configuration_error(pipeline: Pipeline) -> bool:
    """Whether ``pipeline`` stands for a section that could not be built (:func:`configuration_error_pipeline`)."""
    return any(CONFIGURATION_ERROR in node.tags for node in pipeline.nodes)


def build_pipeline(name: str, parameters: Mapping[str, Any]) -> Pipeline:
    """Pipeline ``name`` for ``parameters``; when its section cannot be built (a ``ValueError``, which
    :class:`~thinkalike.pipelines.errors.ParameterError` is), the :func:`configuration_error_pipeline` saying why."""
    try:
        return PIPELINE_BUILDERS[name](parameters)
    except ValueError as error:
        logger.debug("pipeline %r cannot be built: %s", name, error)
        return configuration_error_pipeline(name, str(error))


def build_pipelines(parameters: Mapping[str, Any]) -> dict[str, Pipeline]:
    """Every project pipeline for ``parameters``; ``__default__`` is the sum of all of them.

    Per-model and per-pair nodes are namespaced under ``models``
    (:mod:`thinkalike.pipelines.namespaces`), so Kedro's dotted-name warning has no cause here.
    """
    built = {name: build_pipeline(name, parameters) for name in PIPELINE_BUILDERS}
    if not has_configuration_error(built["report"]):
        others = sum((pipeline for name, pipeline in built.items() if name != "report"), Pipeline([]))
        built["report"] = report_pipeline(parameters, indexed=summaries_unread(others))
    built["__default__"] = sum(built.values(), Pipeline([]))
    return built


def summaries_unread(pipeline: Pipeline) -> list[str]:
    """The outputs of ``pipeline``'s summary nodes (in a method's namespace ``models.<group>``, the zoo's ``models``
    or the corpus's) that no node of it reads: what the report lists in its index, so that every summary output is
    read inside the ``models`` box and kedro-viz's first view is the corpus, the models box and the report.
    Per-model and per-pair outputs (activation stores …) are never listed: the report would load them."""
    summary_namespaces = {CORPUS, MODELS, *(group_namespace(group) for group in GROUPS)}
    read = pipeline.all_inputs()
    return sorted({name for node in pipeline.nodes if node.namespace in summary_namespaces
                   and CONFIGURATION_ERROR not in node.tags for name in node.outputs} - read)
