"""What MLflow gets from the ``scaling`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, named, tables


def _log_summary(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.scaling.analysis import scaling_metrics

    recorder.log_metrics(scaling_metrics(output.data), what="scaling summary")


#: ``scaling_summary``'s numbers as metrics; the members' and pairs' tables as CSV.
RULES: tuple[OutputRule, ...] = (named(["scaling_summary"], _log_summary), tables(["scaling_members", "scaling_pairs"]))
