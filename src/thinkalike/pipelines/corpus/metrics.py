"""What MLflow gets from the ``corpus`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, named


def _log_statistics(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_metrics(
        {f"corpus.{key}": float(value) for key, value in output.data.items() if isinstance(value, (int, float))},
        what=output.name,
    )


#: ``corpus_statistics``: its numbers as metrics ``corpus.<key>``.
RULES: tuple[OutputRule, ...] = (named(["corpus_statistics"], _log_statistics),)
