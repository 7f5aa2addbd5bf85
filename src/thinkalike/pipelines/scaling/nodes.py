"""The ``scaling`` node: the family analysis of :mod:`thinkalike.scaling.analysis` over the CKA tables."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from thinkalike.scaling.analysis import ScalingSettings, analyse_family
from thinkalike.scaling.figures import scaling_figure
from thinkalike.scaling.membership import ScalingPlan

logger = logging.getLogger(__name__)


def summarise_scaling(
    *tables: pd.DataFrame, settings: ScalingSettings, plan: ScalingPlan, pairs: list[tuple[str, str]]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any], Figure]:
    """The members table (table 1 with the measured columns), the pairs' early-layer table, the summary of the
    answers and the figure. ``tables`` are the CKA tables of ``pairs``, in order; ``settings`` the ``scaling``
    section's analysis settings, parsed once by the pipeline's builder."""
    by_pair = {(str(t["model_a"].iloc[0]), str(t["model_b"].iloc[0])): t for t in tables}
    missing = [pair for pair in pairs if pair not in by_pair]
    if missing:
        raise ValueError(f"scaling: CKA tables {missing} hold other models than their names say")
    result = analyse_family(by_pair, plan.family, plan.architectures, plan.twins, settings)
    summary = result.summary
    logger.info(
        "scaling: %d members, intra-model CKA vs size Spearman %.2f, outliers %s, blocks in %d of them and "
        "matched blocks in %d of their %d pairs",
        len(plan.family),
        summary["intra_vs_size_spearman"],
        summary["outliers"] or "none",
        len(summary["structured_members"]),
        len(summary["structured_pairs"]),
        summary["n_member_pairs"],
    )
    return result.members, result.pairs, summary, scaling_figure(result)
