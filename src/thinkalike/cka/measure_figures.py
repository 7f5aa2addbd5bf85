"""Figures of the measures beyond CKA, from the tables of :mod:`thinkalike.cka.measure_tables` (no Kedro): rogue
dimensions per layer, the grounding tests per measure, and every measure's heatmap of a pair, in the style of
:mod:`thinkalike.figures`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from thinkalike.cka.measure_tables import CONFIGURED, GROUNDING_TESTS, measure_matrix
from thinkalike.figures import FIGURE_DPI, LAYER_LABEL, MIN_FIGURE_WIDTH_IN, legend_if_labelled
from thinkalike.measures.registry import MEASURES
from thinkalike.measures.rogue import ROGUE_SHARE

OVERVIEW_DPI = 100
NULL_SCALE = 0.2  # the figure's nulls: red from a mean alikeness of 0.2 on inputs with no correspondence


def dimension_shares_figure(shares: pd.DataFrame) -> Figure:
    """The largest dimension's variance share per layer (by relative depth), one line per model, the rogue
    threshold dashed."""
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN, 4.5), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    for model, rows in shares.groupby("model", sort=False):
        depth = np.linspace(0.0, 1.0, len(rows)) if len(rows) > 1 else np.ones(1)
        axis.plot(depth, rows["top1_share"], marker="o", markersize=3, label=model)
    axis.axhline(ROGUE_SHARE, color="grey", linestyle="--", linewidth=1)
    axis.set(
        xlabel="relative depth (0 = embeddings)",
        ylabel="variance share of the largest dimension",
        ylim=(0, 1),
        title="Rogue dimensions (Timkey & van Schijndel 2021)",
    )
    legend_if_labelled(axis, fontsize=7, ncol=2)
    return figure


def grounding_figure(grounding: pd.DataFrame) -> Figure:
    """Measures (rows) × grounding tests (columns), each cell coloured by how well the measure passes — ρ for the
    rank tests, (AP − chance)/(1 − chance) for the ranking tests, 1 − |null alikeness|/:data:`NULL_SCALE` for the
    nulls, clipped to [0, 1] — and labelled with the score itself."""
    tests = [test for test in GROUNDING_TESTS if grounding[test].notna().any()]
    grades = np.full((len(grounding), len(tests)), np.nan)
    for column, test in enumerate(tests):
        score, chance = grounding[test].to_numpy(float), grounding[f"{test}_chance"].to_numpy(float)
        if test.startswith("null"):
            grade = 1.0 - np.abs(score) / NULL_SCALE
        elif test in ("specificity", "trained_vs_untrained"):
            grade = (score - chance) / (1.0 - chance)
        else:
            grade = score
        grades[:, column] = np.clip(grade, 0.0, 1.0)
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN, 0.42 * len(grounding) + 1.8), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    if not tests or grounding.empty:
        axis.text(0.5, 0.5, "no grounding test had a result in this run", ha="center", va="center")
        axis.set_axis_off()
        return figure
    axis.imshow(np.ma.masked_invalid(grades), cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    for (i, j), _grade in np.ndenumerate(grades):
        value = grounding[tests[j]].iloc[i]
        axis.text(j, i, "–" if not np.isfinite(value) else f"{value:.2f}", ha="center", va="center", fontsize=8)
    chance = {test: grounding[f"{test}_chance"].dropna() for test in tests}
    axis.set_xticks(
        range(len(tests)),
        [
            test.replace("_", " ")
            + (f"\n(chance {chance[test].iloc[0]:.2f})" if len(chance[test]) and chance[test].iloc[0] else "")
            for test in tests
        ],
        fontsize=8,
    )
    axis.set_yticks(range(len(grounding)), grounding["measure"], fontsize=8)
    axis.set_title("Grounding: green passes, red fails (cell: the score)", fontsize=10)
    return figure


def measures_heatmap_figure(table: pd.DataFrame) -> Figure:
    """One panel per measure (layers of b across, of a up the side), each with its own colour scale, its range in
    the title (no colour bars: each is one more axes to lay out and draw, eleven of them per figure)."""
    names = list(dict.fromkeys(table.loc[table["variant"] == CONFIGURED, "measure"]))
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    columns = min(4, max(1, len(names)))
    rows = int(np.ceil(len(names) / columns))
    # an overview at 100 dpi (≥ 1280 px wide for four panels), spaced by hand: the constrained layout solves the
    # spacing again at every draw, and 150 dpi would draw 2.25× the pixels, for a figure drawn for every pair
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN * FIGURE_DPI / OVERVIEW_DPI, 3.2 * columns), 2.8 * rows + 0.6),
        dpi=OVERVIEW_DPI,
    )
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    figure.subplots_adjust(left=0.06, right=0.98, bottom=0.06, top=0.9, wspace=0.35, hspace=0.55)
    for axis, name in zip(axes, names):
        matrix = measure_matrix(table, name)
        axis.imshow(
            matrix, origin="lower", cmap="magma" if MEASURES[name].kind == "similarity" else "viridis", aspect="auto"
        )
        low, high = np.nanmin(matrix), np.nanmax(matrix)
        axis.set_title(f"{name} ({MEASURES[name].kind}): {low:.2f} dark … {high:.2f} bright", fontsize=8)
        axis.set_xlabel(model_b, fontsize=8)
        axis.set_ylabel(model_a, fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in axes[len(names) :]:
        axis.set_visible(False)
    figure.suptitle(
        f"{model_a} vs {model_b}: every measure on {int(table['n_tokens'].iloc[0])} rows ({LAYER_LABEL})", fontsize=10
    )
    return figure
