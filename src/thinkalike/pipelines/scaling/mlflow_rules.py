"""What MLflow gets from the ``scaling`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import json

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, metric, named, tables

#: The family's numbers that are run metrics (``scaling/<name>``): its trend and its mean between members; also each
#: early depth's mean (``early_<depth>_mean``) and each twin's z off the trend (``twin.<model>.z_off_trend``). The
#: per-member numbers are details.
HEADLINE = ("intra_vs_size_spearman", "band_mean_between_members")


def _is_headline(name: str) -> bool:
    """Whether ``name`` (of :func:`~thinkalike.scaling.analysis.scaling_metrics`, without ``scaling.``) is a run
    metric."""
    early = name.startswith("early_") and name.endswith("_mean")
    twin = name.startswith("twin.") and name.endswith(".z_off_trend")
    return name in HEADLINE or early or twin


def _log_summary(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.scaling.analysis import scaling_metrics

    metrics = scaling_metrics(output.data)
    short = {name: name.removeprefix("scaling.") for name in metrics}
    recorder.log_metrics(
        {metric("scaling", short[name]): value for name, value in metrics.items() if _is_headline(short[name])},
        what="scaling summary",
    )
    recorder.log_details(metrics, output.name)
    recorder.log_text(json.dumps(output.data, indent=1, default=str), f"tables/{output.name}.json")


#: ``scaling_summary``: a handful of its numbers as the run's ``scaling/`` metrics, all of them as details, the summary
#: as ``tables/scaling_summary.json``; the members' and pairs' tables as CSV.
RULES: tuple[OutputRule, ...] = (named(["scaling_summary"], _log_summary), tables(["scaling_members", "scaling_pairs"]))
