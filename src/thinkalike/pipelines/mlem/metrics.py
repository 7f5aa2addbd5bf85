"""What MLflow gets from the ``mlem`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table


def _log_profile(recorder: Recorder, output: SavedOutput) -> None:
    from thinkalike.mlem.fit import ALL_FOLDS

    log_table(recorder, output)
    profile = output.data
    overall = profile[profile["fold"] == ALL_FOLDS].groupby("layer")["spearman_heldout"].first()
    recorder.log_metrics(
        {f"{output.namespace}.spearman_heldout_layer_{layer}": float(value) for layer, value in overall.items()},
        what=f"{output.namespace} held-out Spearman",
    )


#: Each model's ``mlem_profile`` as CSV and its held-out Spearman per layer
#: (``mlem.<model>.spearman_heldout_layer_<l>``).
RULES: tuple[OutputRule, ...] = (ending(["mlem_profile"], _log_profile),)
