"""What MLflow gets from each saved output: rules that each pipeline registers (no Kedro).

A :class:`OutputRule` matches saved outputs by name (the project's ``models.`` dropped by the caller, so that
MLflow names read ``gelu_2l.train_loss``, ``cka.<a>__<b>.<metric>``: ``gelu_2l.training_curve``,
``cka.a__b.cka_table``, ``nli.copy_00.accuracy``) or by kind of data, and records them with a
:class:`Recorder` (:class:`thinkalike.tracking.RunRecorder`, or the :class:`~thinkalike.tracking.DeferredRecorder`
of a worker process). Each pipeline package lists its rules in its ``metrics`` module (``RULES``);
:func:`thinkalike.pipelines.builders.all_output_rules` gathers them after the generic rules here, so a new
method adds its rules without touching a shared if-chain. :func:`apply_rules` applies the first
rule that matches; the rules of different pipelines match disjoint outputs (tested on every dataset of
the configured pipelines), so their order does not decide anything but for the generic rules first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Recorder(Protocol):
    """The logging calls a rule may make (both recorders of :mod:`thinkalike.tracking` have them)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0, what: str = "metrics") -> None: ...

    def log_metric_history(self, histories: Mapping[str, tuple[list[float], list[int]]], what: str) -> None: ...

    def log_figure(self, figure: Any, artifact_file: str) -> None: ...

    def log_table(self, table: Any, artifact_file: str) -> None: ...

    def log_text(self, text: str, artifact_file: str) -> None: ...


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
    from thinkalike.run_clock import timing_metrics

    log_table(recorder, output)
    recorder.log_metrics(timing_metrics(output.data), what="run timings")


#: Rules for any pipeline's outputs, tried first: a figure becomes ``figures/<name>.png``, a folder of figures one
#: PNG per file; the run's ``run_timings`` table (saved by the timing hook, not a node) its CSV and per-pipeline
#: totals (``timing.<pipeline>.seconds`` …).
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
