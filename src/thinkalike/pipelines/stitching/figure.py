"""The stitching penalty figure in the style of Brown et al. (2023) fig. 1: penalty per layer, f → g, g → f
and both self baselines side by side (one column per configured pair, one row per stitch kind).

Made without pyplot (a :class:`matplotlib.figure.Figure`), like :mod:`thinkalike.reports.cka`'s figures.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from thinkalike.reports.cka import FIGURE_DPI, MIN_FIGURE_WIDTH_IN


def direction_lines(a: str, b: str) -> list[tuple[str, str, str, str]]:
    """(f, g, label, line style) of the four lines of configured pair (a, b)."""
    return [(a, b, f"{a} → {b}", "-"), (b, a, f"{b} → {a}", "-"),
            (a, a, f"{a} → {a} (self)", ":"), (b, b, f"{b} → {b} (self)", ":")]


def penalty_figure(penalties: pd.DataFrame, pairs: list[tuple[str, str]]) -> Figure:
    """Stitching penalty (nats/token, with its CI band) against f's layer (0 = embeddings), per pair and kind.

    Lines that the table lacks (``directions: forward``, no self baselines) are simply absent."""
    kinds = list(dict.fromkeys(penalties["stitch"])) if len(penalties) else ["none"]
    columns = max(1, len(pairs))
    figure = Figure(figsize=(max(MIN_FIGURE_WIDTH_IN, 4.2 * columns), 3.2 * len(kinds)), dpi=FIGURE_DPI,
                    layout="constrained")
    axes = figure.subplots(len(kinds), columns, squeeze=False)
    for row, kind in enumerate(kinds):
        for column, (a, b) in enumerate(pairs):
            axis = axes[row][column]
            for f, g, label, style in direction_lines(a, b):
                if (f, g) == (b, a) and a == b:
                    continue
                rows = penalties[(penalties["model_f"] == f) & (penalties["model_g"] == g)
                                 & (penalties["stitch"] == kind)].sort_values("layer_f")
                if rows.empty:
                    continue
                line, = axis.plot(rows["layer_f"], rows["penalty"], style, marker="o", label=label)
                axis.fill_between(rows["layer_f"], rows["ci_low"], rows["ci_high"], color=line.get_color(),
                                  alpha=0.15, linewidth=0)
            axis.axhline(0.0, color="0.6", linewidth=0.8)
            axis.set(title=f"{a} vs {b} — {kind}", xlabel="layer of f (0 = embeddings)",
                     ylabel="stitching penalty (nats/token)")
            axis.xaxis.get_major_locator().set_params(integer=True)
            axis.legend(fontsize=7)
    return figure
