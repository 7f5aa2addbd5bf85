"""What MLflow gets from the ``mlem`` pipeline's outputs (rules of :mod:`thinkalike.output_rules`; no Kedro)."""

from __future__ import annotations

import pandas as pd

from thinkalike.output_rules import OutputRule, Recorder, SavedOutput, ending, log_table, metric, named


def _heldout_by_layer(profile: pd.DataFrame, keys: list[str]) -> pd.Series:
    """The held-out Spearman over all folds, by ``keys`` (``["layer"]``, ``["model", "layer"]``)."""
    from thinkalike.mlem.fit import ALL_FOLDS

    return profile[profile["fold"] == ALL_FOLDS].groupby(keys)["spearman_heldout"].first()


def _log_profile(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_details(
        {
            f"{output.namespace}.spearman_heldout_layer_{layer}": float(value)
            for layer, value in _heldout_by_layer(output.data, ["layer"]).items()
        },
        output.name,
    )


def profile_metrics(profiles: pd.DataFrame) -> dict[str, float]:
    """``mlem/<model>.spearman_heldout_max``: each model's best held-out Spearman over its layers (all folds)."""
    best = _heldout_by_layer(profiles, ["model", "layer"]).groupby(level="model").max()
    return {
        metric("mlem", f"{model}.spearman_heldout_max"): float(value)
        for model, value in best.items()
        if pd.notna(value)
    }


def _log_profiles(recorder: Recorder, output: SavedOutput) -> None:
    log_table(recorder, output)
    recorder.log_metrics(profile_metrics(output.data), what=output.name)


#: Each model's ``mlem_profile`` as CSV, its held-out Spearman per layer as details
#: (``mlem.<model>.spearman_heldout_layer_<l>``); ``mlem_profiles`` (every model's, one table) as CSV with each
#: model's best as the run's ``mlem/`` metrics.
RULES: tuple[OutputRule, ...] = (ending(["mlem_profile"], _log_profile), named(["mlem_profiles"], _log_profiles))
