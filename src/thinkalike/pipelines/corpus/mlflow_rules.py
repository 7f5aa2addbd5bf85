"""What MLflow gets from the ``corpus`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import json

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, metric, named


def _log_statistics(recorder: Recorder, output: SavedOutput) -> None:
    recorder.log_metrics(
        {metric("corpus", key): float(value) for key, value in output.data.items() if isinstance(value, (int, float))},
        what=output.name,
    )
    recorder.log_text(json.dumps(output.data, indent=1, default=str), f"tables/{output.name}.json")


#: ``corpus_statistics``: its numbers as metrics ``corpus/<key>``, all of it as ``tables/corpus_statistics.json``.
RULES: tuple[OutputRule, ...] = (named(["corpus_statistics"], _log_statistics),)
