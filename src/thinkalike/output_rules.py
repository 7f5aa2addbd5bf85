"""What MLflow gets from each saved output: rules that each pipeline registers (no Kedro).

A :class:`OutputRule` matches saved outputs by name (the project's ``models.`` dropped by the caller:
``gelu_2l.training_curve``, ``cka.a__b.cka_table``, ``nli.copy_00.accuracy``) or by kind of data, and records them with a
:class:`Recorder` (:class:`thinkalike.run_record.tracking.RunRecorder`, or the :class:`~thinkalike.run_record.tracking.DeferredRecorder`
of a worker process). Each pipeline package lists its rules in its ``metrics`` module (``RULES``);
:func:`thinkalike.pipelines.builders.all_output_rules` gathers them after the generic rules here, so a new
method adds its rules without touching a shared if-chain. :func:`apply_rules` applies the first
rule that matches; the rules of different pipelines match disjoint outputs (tested on every dataset of
the configured pipelines), so their order does not decide anything but for the generic rules first.

A run's *metrics* are the few numbers a reader compares between runs, named ``<group>/<name>`` so that MLflow's UI
draws one section per group (:data:`GROUP_BUDGETS`): the scorecard's estimates, the run's cost, the zoo's
losses and a handful of summaries per pipeline; :data:`METRIC_BUDGET` bounds them all. Everything else is a table:
the per-cell values (every layer pair, stitch, MLEM feature × layer) are the catalog's own tables,
``tables/<dataset>.csv``, and every number a rule computed that is not a run metric — under a dotted name of its
own (``cka.<a>__<b>.mean_matched_cka``, ``timing.cka.seconds`` …) — is a row of the run's
``tables/metric_details.csv`` (:meth:`Recorder.log_details`, written when the run ends), so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

#: The most metrics one run logs in each group (MLflow's UI draws one chart section per group; a metric's group is
#: its name up to the first ``/``). ``scorecard``: this run's estimate of each part of the analysis plan
#: (:mod:`thinkalike.reports.findings.scorecard`: 46 in the default configuration; no verdict); ``cost``: wall, CPU and peak memory per pipeline and for the run; ``zoo``: each zoo model's
#: two loss curves; every other group is one pipeline's handful of summaries.
GROUP_BUDGETS: dict[str, int] = {
    "scorecard": 60,
    "cost": 40,
    "zoo": 40,
    "corpus": 10,
    "cka": 10,
    "measures": 20,
    "stitching": 10,
    "mlem": 25,
    "embedding": 30,
    "nli": 15,
    "scaling": 15,
}
#: The most metrics one run logs, all groups together (issue 56: ≤ 300 in a default run).
METRIC_BUDGET = 300
#: The run's table of every number a rule computed that is not one of its metrics (:meth:`Recorder.log_details`).
DETAILS_ARTIFACT = "tables/metric_details.csv"


def metric(group: str, name: str) -> str:
    """The metric ``<group>/<name>`` (``group``: one of :data:`GROUP_BUDGETS`)."""
    if group not in GROUP_BUDGETS:
        raise ValueError(f"unknown metric group {group!r}; known: {sorted(GROUP_BUDGETS)}")
    return f"{group}/{name}"


def metric_group(name: str) -> str:
    """The group of a metric name (what MLflow's UI names its section), ``""`` for a name without one."""
    return name.split("/", 1)[0] if "/" in name else ""


class Recorder(Protocol):
    """The logging calls a rule may make (both recorders of :mod:`thinkalike.run_record.tracking` have them)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0, what: str = "metrics") -> None: ...

    def log_metric_history(self, histories: Mapping[str, tuple[list[float], list[int]]], what: str) -> None: ...

    def log_figure(self, figure: Any, artifact_file: str) -> None: ...

    def log_table(self, table: Any, artifact_file: str) -> None: ...

    def log_text(self, text: str, artifact_file: str) -> None: ...

    def log_details(self, metrics: Mapping[str, float], dataset: str) -> None:
        """Numbers of ``dataset`` that are not run metrics: rows of :data:`DETAILS_ARTIFACT`."""
        ...

    def set_description(self, text: str) -> None:
        """The run's description (MLflow's ``mlflow.note.content`` tag: the text above a run's page)."""
        ...


@dataclass(frozen=True)
class SavedOutput:
    """One saved output as the rules see it: ``name`` without ``models.``, its last part ``short``, the rest
    ``namespace`` (``""`` for a top-level dataset) and the saved ``data``."""

    name: str
    data: Any

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def namespace(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else ""


@dataclass(frozen=True)
class OutputRule:
    """``record(recorder, output)`` for every saved output for which ``matches(output)``; ``description`` says
    which (shown when two rules claim one output)."""

    description: str
    matches: Callable[[SavedOutput], bool]
    record: Callable[[Recorder, SavedOutput], None]


def named(names: Iterable[str], record: Callable[[Recorder, SavedOutput], None]) -> OutputRule:
    """A rule for the outputs called exactly one of ``names`` (after ``models.``)."""
    wanted = frozenset(names)
    return OutputRule(f"named {sorted(wanted)}", lambda output: output.name in wanted, record)


def ending(shorts: Iterable[str], record: Callable[[Recorder, SavedOutput], None]) -> OutputRule:
    """A rule for the outputs whose last name part is one of ``shorts`` (one per model or pair:
    ``<namespace>.<short>``)."""
    wanted = frozenset(shorts)
    return OutputRule(f"ending {sorted(wanted)}", lambda output: output.short in wanted, record)


def log_table(recorder: Recorder, output: SavedOutput) -> None:
    """The table as ``tables/<name>.csv``."""
    recorder.log_table(output.data, f"tables/{output.name}.csv")


def tables(names: Iterable[str]) -> OutputRule:
    """Top-level summary tables logged as CSV (nothing else)."""
    return named(names, log_table)


def _is_figure(output: SavedOutput) -> bool:
    from matplotlib.figure import Figure

    return isinstance(output.data, Figure)


def _is_figure_folder(output: SavedOutput) -> bool:
    from matplotlib.figure import Figure

    data = output.data
    return isinstance(data, dict) and bool(data) and all(isinstance(figure, Figure) for figure in data.values())


def _log_figure(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_figure(output.data, f"figures/{output.name}.png")


def _log_figure_folder(recorder: Recorder, output: SavedOutput) -> None:
    for file, figure in output.data.items():  # a folder of figures (cka_heatmaps …): one PNG each
        recorder.log_figure(figure, f"figures/{output.name}/{file}")


def _log_run_timings(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.run_record.clock import cost_metrics, timing_metrics

    log_table(recorder, output)
    recorder.log_metrics(cost_metrics(output.data), what="run cost")
    recorder.log_details(timing_metrics(output.data), output.name)


#: Rules for any pipeline's outputs, tried first: a figure becomes ``figures/<name>.png``, a folder of figures one
#: PNG per file; the run's ``run_timings`` table (saved by the timing hook, not a node) its CSV, the run's cost per
#: pipeline (``cost/<pipeline>.wall_s`` …) and its other totals as details (``timing.<pipeline>.load_seconds`` …).
GENERIC_RULES: tuple[OutputRule, ...] = (
    OutputRule("a figure", _is_figure, _log_figure),
    OutputRule("a folder of figures", _is_figure_folder, _log_figure_folder),
    named(["run_timings"], _log_run_timings),
)


def matching_rules(rules: Iterable[OutputRule], output: SavedOutput) -> list[OutputRule]:
    """Every rule of ``rules`` that matches ``output``, in order."""
    return [rule for rule in rules if rule.matches(output)]


def apply_rules(rules: Iterable[OutputRule], recorder: Recorder, name: str, data: Any) -> bool:
    """Records the saved output ``name`` (as the rules name it) with the first of ``rules`` that matches it;
    False when none does (the output stays in the catalog only)."""
    output = SavedOutput(name, data)
    for rule in rules:
        if rule.matches(output):
            rule.record(recorder, output)
            return True
    return False
