"""What a project pipeline says about itself, and the pipelines found in ``thinkalike.pipelines``.

A pipeline is one folder, ``thinkalike/pipelines/<name>/``, whose ``__init__.py`` exports ``SPEC``, a
:class:`PipelineSpec`: its builder, the parameter section it owns and the pipelines upstream of it (whose
sections it reads too, as it consumes their outputs), the check of its section, the keys of its section that an
environment replaces whole, the MLflow rules of its outputs and its kedro-viz box. The registry (:mod:`thinkalike.pipelines.builders`), the run's scope
(:mod:`thinkalike.pipelines.run_selection`), validation (:mod:`thinkalike.pipelines.validation`), the namespaces
(:mod:`thinkalike.pipelines.namespaces`) and the MLflow records loop over :func:`pipeline_specs`; adding a
pipeline is adding its folder.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kedro.pipeline import Pipeline

from thinkalike.output_rules import OutputRule
from thinkalike.pipelines.run_settings import RunSettings
from thinkalike.reports.experiments import ReportOutline, ReportSection

logger = logging.getLogger(__name__)

#: The builder of a pipeline from the run's settings (:class:`~thinkalike.pipelines.run_settings.RunSettings`).
Builder = Callable[..., Pipeline]
#: The check of a pipeline's own section, given the run's settings: raises a ParameterError naming the full key.
SectionCheck = Callable[[RunSettings], None]
#: The CKA pairs a pipeline reads beyond ``cka.pairs``: ``(the run's settings) -> [(a, b), ...]``.
CKAPairsNeeded = Callable[[RunSettings], list[tuple[str, str]]]
#: How the timing paragraph names a pipeline's time: findings → (the words before its time, the words after it).
TimingLabel = Callable[[Mapping[str, Any]], tuple[str, str]]
#: A pipeline's step once the run's timings are saved: ``(catalog, timings dataset) -> (dataset, data) | None``.
AfterTimings = Callable[[Any, str], "tuple[str, Any] | None"]


@dataclass(frozen=True)
class PipelineSpec:
    """One project pipeline, as its folder declares it.

    - ``name``: the pipeline's name (``kedro run --pipelines <name>``): its folder's name;
    - ``build``: ``build(run) -> Pipeline`` (``run``: the run's :class:`~thinkalike.pipelines.run_settings.RunSettings`,
      whose sections each builder and check reads as ``run.parsed(<section parser>)``, parsed once); with ``summarises``, also ``indexed=`` (the other pipelines'
      unread summary outputs, :func:`thinkalike.pipelines.builders.summaries_unread`);
    - ``stage``: its place in the flow corpus → models → activations → methods → report (orders registration,
      ``kedro registry list`` and validation; ties by name);
    - ``section``: the parameter section it owns, or None;
    - ``upstream``: the pipelines whose outputs it reads: their sections are checked when it runs;
    - ``check``: the check of ``section`` (None: nothing to check beyond Kedro's own);
    - ``replaced_whole``: keys of ``section`` (dotted, below it) whose value an environment's file replaces whole
      where every other mapping merges key by key with ``conf/base``'s (:mod:`thinkalike.config_loader`): the
      collections named by the user (models, pair selections, groups), so ``conf/base``'s entries do not survive
      beside an environment's own;
    - ``rules``: what MLflow gets from its saved outputs (:mod:`thinkalike.output_rules`);
    - ``viz_group``: its box inside ``models`` in kedro-viz (``models.<viz_group>``), or None;
    - ``summarises``: it reads every other pipeline's summaries (the report);
    - ``dataset_prefixes``: the name prefixes of the datasets it saves (the report lists a dataset under the pipeline
      of its longest matching prefix: :func:`producing_pipeline`);
    - ``report``: its parts of the findings and the experiments report
      (:class:`~thinkalike.reports.experiments.ReportSection`: the tables each reads, its collect and claims, its
      section of the report), declared in its folder's ``report_section.py``;
    - ``cka_pairs``: the CKA pairs it reads from the ``cka`` pipeline beyond ``cka.pairs``
      (``cka_pairs(run) -> [(a, b), ...]``; a ``ValueError`` adds none, its own pipeline
      names the error): the ``cka`` pipeline computes them too (:func:`cka_pairs_needed`);
    - ``timing_label``: how the findings' timing paragraph names its time: ``timing_label(findings) -> (words
      before the time, words after it)`` (None: its name);
    - ``after_timings``: a step run once the run's ``run_timings`` table is saved
      (:mod:`thinkalike.run_record.timing_hooks`): ``after_timings(catalog, timings_dataset)`` returns a
      ``(dataset, data)`` that MLflow gets again (the report, its timings section added), or None.
    """

    name: str
    build: Builder
    stage: int
    section: str | None = None
    upstream: tuple[str, ...] = ()
    check: SectionCheck | None = None
    replaced_whole: tuple[str, ...] = ()
    rules: tuple[OutputRule, ...] = ()
    viz_group: str | None = None
    summarises: bool = False
    dataset_prefixes: tuple[str, ...] = ()
    report: tuple[ReportSection, ...] = ()
    cka_pairs: CKAPairsNeeded | None = None
    timing_label: TimingLabel | None = None
    after_timings: AfterTimings | None = None


def _discovered() -> list[PipelineSpec]:
    """``SPEC`` of every subpackage of ``thinkalike.pipelines`` that has one."""
    package = importlib.import_module("thinkalike.pipelines")
    found = []
    for module in pkgutil.iter_modules(package.__path__):
        if not module.ispkg:
            continue
        spec = getattr(importlib.import_module(f"{package.__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, PipelineSpec):
            if spec.name != module.name:
                raise ValueError(
                    f"thinkalike.pipelines.{module.name}: its SPEC is named {spec.name!r}, not its folder's name"
                )
            found.append(spec)
    return found


@functools.cache
def pipeline_specs() -> dict[str, PipelineSpec]:
    """Every project pipeline's spec by name, in stage order; each upstream name checked to be a pipeline."""
    specs = {spec.name: spec for spec in sorted(_discovered(), key=lambda spec: (spec.stage, spec.name))}
    for spec in specs.values():
        unknown = sorted(set(spec.upstream) - set(specs))
        if unknown:
            raise ValueError(
                f"thinkalike.pipelines.{spec.name}: upstream {unknown} are not pipelines ({', '.join(specs)})"
            )
    return specs


def sections_read(name: str) -> tuple[str, ...]:
    """The parameter sections pipeline ``name`` reads: its own and every upstream pipeline's, in stage order."""
    specs = pipeline_specs()
    seen: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current not in seen:
            seen.add(current)
            pending.extend(specs[current].upstream)
    return tuple(spec.section for spec in specs.values() if spec.name in seen and spec.section)


def keys_replaced_whole() -> frozenset[str]:
    """The full keys (``section.key``) that an environment replaces whole: every spec's ``replaced_whole``."""
    return frozenset(
        f"{spec.section}.{key}" for spec in pipeline_specs().values() if spec.section for key in spec.replaced_whole
    )


def viz_groups() -> tuple[str, ...]:
    """The method boxes inside ``models`` (each spec's ``viz_group``): no model may be named so."""
    return tuple(spec.viz_group for spec in pipeline_specs().values() if spec.viz_group)


def output_rules() -> tuple[OutputRule, ...]:
    """Every pipeline's MLflow rules, in stage order (after :data:`thinkalike.output_rules.GENERIC_RULES`)."""
    return tuple(rule for spec in pipeline_specs().values() for rule in spec.rules)


def producing_pipeline(name: str) -> str:
    """The pipeline that saves dataset ``name``: the one whose ``dataset_prefixes`` match it the longest (``?``
    when none does)."""
    matches = [
        (len(prefix), spec.name)
        for spec in pipeline_specs().values()
        for prefix in spec.dataset_prefixes
        if name.startswith(prefix)
    ]
    return max(matches)[1] if matches else "?"


def cka_pairs_needed(run: RunSettings) -> list[tuple[str, str]]:
    """Every pipeline's :attr:`PipelineSpec.cka_pairs`, in stage order (a pipeline whose settings cannot be read adds
    none: its own check names the error)."""
    needed: list[tuple[str, str]] = []
    for spec in pipeline_specs().values():
        if spec.cka_pairs is None:
            continue
        try:
            needed += spec.cka_pairs(run)
        except ValueError as error:
            logger.debug("%s: no CKA pairs of its own (%s)", spec.name, error)
    return needed


def report_outline() -> ReportOutline:
    """The report's outline: every pipeline's report sections (:attr:`PipelineSpec.report`) in stage order, and every
    pipeline's name in that order (the timing paragraph's). The findings, the findings page and the report loop over
    it, and the timing paragraph names each pipeline by its spec's ``timing_label``."""
    specs = pipeline_specs().values()
    return ReportOutline(
        tuple(section for spec in specs for section in spec.report),
        tuple(spec.name for spec in specs),
        {spec.name: spec.timing_label for spec in specs if spec.timing_label is not None},
    )
