"""The nli experiment's figures (Brown et al. 2023 figs. 2a, 2b, 7) from the tables of :mod:`thinkalike.nli.analysis`
(no Kedro), in the style of :mod:`thinkalike.figures`: the copies' accuracies, identity-stitching penalties by group
relation, and the whole experiment on one plotly page."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from thinkalike.figures import FIGURE_DPI, MIN_FIGURE_WIDTH_IN, PLOTLY_WIDTH
from thinkalike.nli.analysis import GENERALIZING, HEURISTIC, MIDDLE, RELATIONS
from thinkalike.nli.verdicts import cka_relation

DATA_TITLES = {
    "test": "in-distribution test pairs (Brown et al. fig. 2a)",
    "ood": "OOD pairs (HANS-LO analogue, fig. 7)",
}
RELATION_LABELS = {
    "within_generalizing": "gen.-to-gen.",
    "within_heuristic": "heur.-to-heur.",
    "between": "between groups",
}
RELATION_COLORS = {"within_generalizing": "tab:blue", "within_heuristic": "tab:red", "between": "tab:purple"}


def accuracy_figure(groups: pd.DataFrame, baseline: pd.Series) -> Figure:
    """Histogram of the copies' OOD non-entailed accuracy coloured by group, the baseline as a line; beside it
    in-distribution against OOD accuracy per copy."""
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN * 1.5, 4.5), dpi=FIGURE_DPI, layout="constrained")
    hist, scatter = figure.subplots(1, 2)
    bins = np.linspace(0.0, 1.0, 21)
    colors = {GENERALIZING: "tab:blue", MIDDLE: "tab:gray", HEURISTIC: "tab:red"}
    values = [groups.loc[groups["group"] == g, "ood_non_entailed_accuracy"] for g in colors]
    hist.hist(values, bins=bins, stacked=True, color=list(colors.values()), label=list(colors))
    hist.axvline(baseline["ood_non_entailed_accuracy"], color="black", linestyle="--", label="lexical-overlap rule")
    hist.set(
        xlabel="OOD non-entailed accuracy (HANS-LO analogue)", ylabel="copies", title=f"{len(groups)} fine-tuned copies"
    )
    hist.legend(fontsize=8)
    for group, color in colors.items():
        part = groups[groups["group"] == group]
        scatter.scatter(part["test_accuracy"], part["ood_non_entailed_accuracy"], color=color, label=group)
    scatter.scatter(
        [baseline["test_accuracy"]],
        [baseline["ood_non_entailed_accuracy"]],
        color="black",
        marker="x",
        label="lexical-overlap rule",
    )
    scatter.set(
        xlabel="in-distribution test accuracy",
        ylabel="OOD non-entailed accuracy",
        title="in distribution vs out of distribution",
    )
    scatter.legend(fontsize=8)
    return figure


def stitching_figure(groups_table: pd.DataFrame) -> Figure:
    """Mean accuracy penalty by layer, one line per relation with its CI band; a panel per evaluation set."""
    datasets = [d for d in DATA_TITLES if d in set(groups_table["data"])] or ["test"]
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN * len(datasets) * 0.8, 4.5), dpi=FIGURE_DPI, layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(datasets), sharey=True))
    for axis, data in zip(axes, datasets):
        part = groups_table[groups_table["data"] == data]
        for kind in RELATIONS:
            rows = part[part["relation"] == kind].sort_values("layer")
            if rows.empty:
                continue
            axis.plot(
                rows["layer"],
                rows["mean_penalty"],
                marker="o",
                color=RELATION_COLORS[kind],
                label=RELATION_LABELS[kind],
            )
            axis.fill_between(
                rows["layer"],
                rows["ci_low"].astype(float),
                rows["ci_high"].astype(float),
                color=RELATION_COLORS[kind],
                alpha=0.2,
            )
        axis.axhline(0.0, color="black", linewidth=0.5)
        axis.set(xlabel="stitching layer l of g_{>l} ∘ f_{≤l} (0 = embeddings)", title=DATA_TITLES.get(data, data))
        if len(part):
            axis.set_xticks(sorted(part["layer"].unique()))
        axis.legend(fontsize=8)
    axes[0].set_ylabel("accuracy penalty (g − stitched)")
    return figure


def _interval_trace(x, mean, low, high, name: str, color: str, hover: str) -> go.Scatter:
    """A line with markers and asymmetric error bars ``[low, high]`` (a CI) for plotly."""
    mean, low, high = (np.asarray(v, dtype=float) for v in (mean, low, high))
    return go.Scatter(
        x=list(x),
        y=mean,
        name=name,
        mode="lines+markers",
        line={"color": color},
        legendgroup=name,
        error_y={"type": "data", "symmetric": False, "array": high - mean, "arrayminus": mean - low},
        hovertemplate=hover + " %{x}: %{y:.3f}<extra>" + name + "</extra>",
    )


_PLOTLY_GROUP_COLORS = {GENERALIZING: "blue", MIDDLE: "gray", HEURISTIC: "red"}
_PLOTLY_RELATION_COLORS = {"within_generalizing": "blue", "within_heuristic": "red", "between": "purple"}


def experiment_plotly(
    groups: pd.DataFrame, baseline: pd.Series, stitch_groups: pd.DataFrame, cka_curves: pd.DataFrame
) -> go.Figure:
    """The experiment on one kedro-viz page: per copy in-distribution vs OOD non-entailed accuracy (the
    lexical-overlap rule as a cross); the identity-stitching accuracy penalty by layer on test and OOD pairs
    (figs 2a, 7) and CKA by relative depth (fig. 2b) — mean per relation with its CI as error bars."""
    figure = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[
            "copies: in distribution vs OOD",
            "identity stitching, " + DATA_TITLES["test"],
            "identity stitching, " + DATA_TITLES["ood"],
            "CKA on in-distribution test tokens (fig. 2b)",
        ],
    )
    _add_copies_panel(figure, groups, baseline)
    _add_stitching_panels(figure, stitch_groups)
    _add_cka_panel(figure, cka_curves)
    figure.update_layout(
        title="Generalizing vs heuristic NLI copies (Brown et al. 2023 §4)", width=PLOTLY_WIDTH, height=800
    )
    return figure


def _add_copies_panel(figure: go.Figure, groups: pd.DataFrame, baseline: pd.Series) -> None:
    """Top left: each copy's in-distribution against OOD non-entailed accuracy, coloured by group, and the
    lexical-overlap rule as a cross."""
    for group, color in _PLOTLY_GROUP_COLORS.items():
        part = groups[groups["group"] == group]
        figure.add_trace(
            go.Scatter(
                x=part["test_accuracy"],
                y=part["ood_non_entailed_accuracy"],
                mode="markers",
                name=group,
                marker={"color": color, "size": 9},
                text=part["model"],
                hovertemplate="%{text}: test %{x:.3f}, OOD non-entailed %{y:.3f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    figure.add_trace(
        go.Scatter(
            x=[baseline["test_accuracy"]],
            y=[baseline["ood_non_entailed_accuracy"]],
            mode="markers",
            name="lexical-overlap rule",
            marker={"color": "black", "symbol": "x", "size": 11},
        ),
        row=1,
        col=1,
    )
    figure.update_xaxes(title_text="in-distribution test accuracy", row=1, col=1)
    figure.update_yaxes(title_text="OOD non-entailed accuracy", row=1, col=1)


def _add_stitching_panels(figure: go.Figure, stitch_groups: pd.DataFrame) -> None:
    """Top right (test pairs) and bottom left (OOD pairs): the identity-stitching accuracy penalty by layer, one
    line per group relation with its CI (in the legend once, from the test panel)."""
    for data, (row, col) in (("test", (1, 2)), ("ood", (2, 1))):
        part = stitch_groups[stitch_groups["data"] == data]
        for relation in RELATIONS:
            rows = part[part["relation"] == relation].sort_values("layer")
            if len(rows):
                trace = _interval_trace(
                    rows["layer"],
                    rows["mean_penalty"],
                    rows["ci_low"],
                    rows["ci_high"],
                    f"stitching: {RELATION_LABELS[relation]}",
                    _PLOTLY_RELATION_COLORS[relation],
                    "layer",
                )
                trace.showlegend = data == "test"
                figure.add_trace(trace, row=row, col=col)
        figure.update_xaxes(title_text="stitching layer l (0 = embeddings)", dtick=1, row=row, col=col)
        figure.update_yaxes(title_text="accuracy penalty (g − stitched)", row=row, col=col)


def _add_cka_panel(figure: go.Figure, cka_curves: pd.DataFrame) -> None:
    """Bottom right: the CKA of matched layers by relative depth, one line per group relation with its CI."""
    named = cka_curves.assign(
        relation=[cka_relation(a, b) for a, b in zip(cka_curves["group_a"], cka_curves["group_b"])]
    )
    for relation in RELATIONS:
        rows = named[named["relation"] == relation].sort_values("relative_depth")
        if len(rows):
            figure.add_trace(
                _interval_trace(
                    rows["relative_depth"],
                    rows["mean"],
                    rows["ci_low"],
                    rows["ci_high"],
                    f"CKA: {RELATION_LABELS[relation]}",
                    _PLOTLY_RELATION_COLORS[relation],
                    "relative depth",
                ),
                row=2,
                col=2,
            )
    figure.update_xaxes(title_text="relative depth (0 = embeddings, 1 = last layer)", row=2, col=2)
    figure.update_yaxes(title_text="CKA of matched layers", row=2, col=2)
