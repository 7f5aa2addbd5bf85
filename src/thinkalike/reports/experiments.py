"""The report's outline (no Kedro): its sections, each declared by the pipeline whose outputs it reads (a
``report.py`` in the pipeline's folder, named by its ``SPEC``), and the types they are declared with.

* :class:`ReportSection` — one part of the findings: the tables it reads, its ``collect`` (tables → the numbers kept
  under its ``section`` key of the run's findings), its ``claims`` (findings → the sentences that hold, with their
  margins) and, where it is shown, its :class:`Experiment`: the question, the pipelines that make its outputs, the
  datasets whose absence it reports, its figures (:class:`Shown`) and its key numbers (:class:`KeyNumber`: paths into
  the findings).
* :class:`ReportOutline` — every section in the pipelines' stage order, and every pipeline's name in that order (the
  timing paragraph's order); :func:`thinkalike.pipelines.specs.report_outline` makes the project's. The findings
  (:mod:`thinkalike.reports.findings`), the findings page and the HTML report (:mod:`thinkalike.reports.report`) loop
  over it: no list of sections is written anywhere else.

A claim is shown beside the figure whose ``reads`` prefix matches its id the longest (:func:`claims_by_figure`); the
claims no figure reads follow the figures. A figure is a saved PNG (its catalog name) or, ``interactive``, a plotly
figure its ``draw`` makes from the loaded tables (:mod:`thinkalike.reports.interactive`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The ``cka`` pipeline's interactive layer × layer heatmaps of every pair (drawn from the pairs' ``cka_table`` s).
CKA_HEATMAPS = "cka_heatmaps_plotly"
#: Every pair's measures table (``dims_a``, ``dims_b``, ``options``, ``n_tokens``: :mod:`.measure_space`).
MEASURE_PAIR_TABLES = "models.cka.*.measures_table"


@dataclass(frozen=True)
class Shown:
    """A figure of a section: ``name`` (a PNG's catalog name, or an interactive figure's key), its caption, the
    pipeline that makes what it shows, the claim id prefixes of the sentences shown beside it, and whether it is
    interactive: then ``draw(tables)`` makes it from the loaded tables named in ``drawn_from`` (None: its data is
    missing; a figure without ``draw`` is drawn when the run ends, :mod:`thinkalike.reports.run_timings`)."""

    name: str
    caption: str
    pipeline: str
    reads: tuple[str, ...] = ()
    interactive: bool = False
    drawn_from: tuple[str, ...] = ()
    draw: Callable[[Mapping[str, Any]], Any] | None = None


@dataclass(frozen=True)
class KeyNumber:
    """A row of a section's key numbers: its label, the findings paths whose values it pools (a number, a span, a
    list of numbers or of names) and how they are written (:func:`thinkalike.reports.findings.claims.value_text`:
    ``d``, ``%``, ``2`` …)."""

    label: str
    paths: tuple[str, ...]
    spec: str = ""


@dataclass(frozen=True)
class Experiment:
    """One section of the report: ``key`` is its anchor and its claims' id prefix, ``section`` its part of the
    collected findings; ``inputs`` the datasets (names or ``fnmatch`` patterns) whose absence it reports;
    ``details(tables)``: HTML shown after its claims, from the loaded tables (None: nothing more)."""

    key: str
    title: str
    question: str
    pipelines: tuple[str, ...]
    section: str
    inputs: tuple[str, ...]
    figures: tuple[Shown, ...] = ()
    numbers: tuple[KeyNumber, ...] = ()
    details: Callable[[Mapping[str, Any]], str] | None = None

    def reads(self, name: str) -> bool:
        """Whether dataset ``name`` is one of this section's inputs (its figures included)."""
        patterns = (*self.inputs, *(figure.name for figure in self.figures if not figure.interactive))
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


TIMING = "timing"  # the run-timings section: written when the run ends (:mod:`thinkalike.reports.run_timings`)


def findings_dataset(section: str) -> str:
    """The catalog dataset of one section's collected numbers, ``<section>_findings``: saved by a node of the pipeline
    that declares the section (:mod:`thinkalike.pipelines.section_findings`) and read by the report and the findings
    command, which collect nothing themselves."""
    return f"{section}_findings"


def estimates_dataset(section: str) -> str:
    """The catalog dataset of one method pipeline's per-run estimates, ``<section>_estimates``: every scorecard part
    that section's numbers measure, with its within-run interval where the method has one
    (:func:`thinkalike.reports.findings.scorecard.section_estimates`), saved beside :func:`findings_dataset`."""
    return f"{section}_estimates"


@dataclass(frozen=True)
class RunTables:
    """What a section's ``collect`` reads: the loaded ``tables`` (catalog name → data; any may be missing), the run's
    ``parameters``, the zoo's ``roles`` (:func:`thinkalike.models.zoo_record.family_roles`, worked out once per run) and
    the ``untrained`` controls among the models (zoo initialisations: kept out of the findings about trained models)."""

    tables: Mapping[str, Any]
    parameters: Mapping[str, Any]
    roles: Mapping[str, Any]
    untrained: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportSection:
    """One part of the findings and the report, declared in the folder of the pipeline that makes its outputs:

    - ``section``: its key in the run's findings (and its claims' id prefix);
    - ``experiment``: its section of the HTML report, or None (numbers only, shown by another section);
    - ``tables``: the catalog datasets its ``collect`` reads (the report loads them; one never saved is missing);
    - ``collect``: ``collect(run: RunTables) -> dict``, its numbers (an error becomes the section's ``error``);
    - ``claims``: ``claims(findings) -> [Claim]``, its sentences with their margins (ids start with ``section``);
    - ``heading``: its heading on the findings page (None: the experiment's title);
    - ``listed_without_claims``: whether the findings page lists it when no claim of it holds in any replicate.
    """

    section: str
    experiment: Experiment | None = None
    tables: tuple[str, ...] = ()
    collect: Callable[[RunTables], dict[str, Any]] | None = None
    claims: Callable[[Mapping[str, Any]], list[Any]] | None = None
    heading: str | None = None
    listed_without_claims: bool = True

    @property
    def title(self) -> str:
        """Its heading on the findings page."""
        return self.heading or (self.experiment.title if self.experiment else self.section)


@dataclass(frozen=True)
class ReportOutline:
    """The report's sections in the pipelines' stage order, every pipeline's name in that order and how the timing
    paragraph names each pipeline's time (``timing_labels``: pipeline → findings → (words before, words after))."""

    sections: tuple[ReportSection, ...]
    pipelines: tuple[str, ...] = ()
    timing_labels: Mapping[str, Callable[[Mapping[str, Any]], tuple[str, str]]] = field(default_factory=dict)

    @property
    def experiments(self) -> list[Experiment]:
        """The report's experiments, in order."""
        return [section.experiment for section in self.sections if section.experiment is not None]

    @property
    def tables(self) -> tuple[str, ...]:
        """Every table a section's ``collect`` reads, once each, in order."""
        return tuple(dict.fromkeys(name for section in self.sections for name in section.tables))

    def figures(self) -> list[Shown]:
        """Every figure of every experiment, in order."""
        return [figure for experiment in self.experiments for figure in experiment.figures]

    def png_figures(self) -> list[Shown]:
        """Every saved PNG the report shows, in order."""
        return [figure for figure in self.figures() if not figure.interactive]

    @property
    def saved_sections(self) -> tuple[ReportSection, ...]:
        """The sections whose numbers a pipeline node collects and saves (:func:`findings_dataset`): every section with
        a ``collect`` but the run's timings, which are saved only when the run ends."""
        return tuple(section for section in self.sections if section.collect is not None and section.section != TIMING)

    def experiment_of(self, name: str) -> Experiment | None:
        """The experiment that reads dataset ``name``: the one that names it, else the first with a pattern that
        matches it, else ``None``."""
        named = [experiment for experiment in self.experiments if name in experiment.inputs]
        matched = named or [experiment for experiment in self.experiments if experiment.reads(name)]
        return matched[0] if matched else None

    def section(self, key: str) -> ReportSection:
        """The section whose findings key is ``key`` (a ``KeyError`` naming the keys when there is none)."""
        for section in self.sections:
            if section.section == key:
                return section
        raise KeyError(f"no report section {key!r} (sections: {', '.join(s.section for s in self.sections)})")


def claims_by_figure(claims: Sequence[Mapping[str, Any]], figures: Sequence[Shown]) -> dict[str | None, list]:
    """The claims grouped by the figure whose ``reads`` prefix matches their id the longest (``None``: no figure
    reads them), each group in the claims' order."""
    grouped: dict[str | None, list] = {}
    for claim in claims:
        matches = [
            (len(prefix), figure.name)
            for figure in figures
            for prefix in figure.reads
            if claim["id"] == prefix or claim["id"].startswith(prefix + ".") or claim["id"].startswith(prefix + "_")
        ]
        grouped.setdefault(max(matches)[1] if matches else None, []).append(claim)
    return grouped
