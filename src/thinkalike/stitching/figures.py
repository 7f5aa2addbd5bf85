"""Stitching figures: the penalty per layer in the style of Brown et al. (2023) fig. 1 (f → g, g → f and both
self baselines side by side, one column per configured pair, one row per stitch kind), learning curves in
the style of their fig. 6, and a penalty heatmap over (layer of f, layer of g) for the ``all`` grid; plotly
versions of the penalty figure and the heatmap for kedro-viz.

With several φ seeds (table columns ``penalty_seed_*``, ``n_phi_seeds`` > 1) the penalty figures show
both kinds of uncertainty side by side: the line and its band are the first seed's penalty and its
evaluation-bootstrap interval; beside each point (shifted right by :data:`SEED_OFFSET` layers) a square
marks the mean over φ seeds and a bar their min–max. The learning curves are the first seed's.

Made without pyplot (a :class:`matplotlib.figure.Figure`), at least ``MIN_FIGURE_WIDTH_IN`` × ``FIGURE_DPI``
(1050 px) wide, in the style of :mod:`thinkalike.figures`; plotly figures ``PLOTLY_WIDTH`` px wide. No Kedro.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib import colormaps
from matplotlib.figure import Figure
from plotly.subplots import make_subplots

from thinkalike.figures import FIGURE_DPI, MIN_FIGURE_WIDTH_IN, PLOTLY_WIDTH

#: How far right of its point (in layers) the φ-seed bar of a penalty is drawn.
SEED_OFFSET = 0.08


def seed_spread(rows: pd.DataFrame) -> pd.DataFrame | None:
    """``rows`` with a φ-seed spread to draw (any stitch with more than one seed), else ``None``."""
    if "penalty_seed_mean" not in rows or "n_phi_seeds" not in rows or not (rows["n_phi_seeds"] > 1).any():
        return None
    return rows[rows["n_phi_seeds"] > 1]


def first_seed(curves: pd.DataFrame) -> pd.DataFrame:
    """Each stitch's first φ seed's rows of a learning-curve table (all rows when it has no ``phi_seed``)."""
    if "phi_seed" not in curves or curves.empty:
        return curves
    first = curves.groupby(["kind", "layer_f", "layer_g"], sort=False)["phi_seed"].transform("first")
    return curves[curves["phi_seed"] == first]


def direction_lines(a: str, b: str) -> list[tuple[str, str, str, str]]:
    """(f, g, label, line style) of the four lines of configured pair (a, b)."""
    return [
        (a, b, f"{a} → {b}", "-"),
        (b, a, f"{b} → {a}", "-"),
        (a, a, f"{a} → {a} (self)", ":"),
        (b, b, f"{b} → {b} (self)", ":"),
    ]


def direction_rows(penalties: pd.DataFrame, kind: str, a: str, b: str) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """``(label, line style, rows by f's layer)`` of each line of :func:`direction_lines` with stitches of ``kind``."""
    for f, g, label, style in direction_lines(a, b):
        if (f, g) == (b, a) and a == b:
            continue
        rows = penalties[
            (penalties["model_f"] == f) & (penalties["model_g"] == g) & (penalties["stitch"] == kind)
        ].sort_values("layer_f")
        if not rows.empty:
            yield label, style, rows


def penalty_figure(penalties: pd.DataFrame, pairs: list[tuple[str, str]]) -> Figure:
    """Stitching penalty (nats/token, with its CI band) against f's layer (0 = embeddings), per pair and kind;
    with several φ seeds, their mean and min–max beside each point (module docstring).

    Lines that the table lacks (``directions: forward``, no self baselines) are simply absent."""
    kinds = list(dict.fromkeys(penalties["stitch"])) if len(penalties) else ["none"]
    columns = max(1, len(pairs))
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN, 4.2 * columns), 3.2 * len(kinds)), dpi=FIGURE_DPI, layout="constrained"
    )
    axes = figure.subplots(len(kinds), columns, squeeze=False)
    seeded = False
    for row, kind in enumerate(kinds):
        for column, (a, b) in enumerate(pairs):
            axis = axes[row][column]
            for label, style, rows in direction_rows(penalties, kind, a, b):
                (line,) = axis.plot(rows["layer_f"], rows["penalty"], style, marker="o", label=label)
                axis.fill_between(
                    rows["layer_f"], rows["ci_low"], rows["ci_high"], color=line.get_color(), alpha=0.15, linewidth=0
                )
                spread = seed_spread(rows)
                if spread is not None:
                    seeded = True
                    mean = spread["penalty_seed_mean"].to_numpy(float)
                    axis.errorbar(
                        spread["layer_f"] + SEED_OFFSET,
                        mean,
                        yerr=[
                            mean - spread["penalty_seed_min"].to_numpy(float),
                            spread["penalty_seed_max"].to_numpy(float) - mean,
                        ],
                        fmt="s",
                        markersize=3,
                        markerfacecolor="none",
                        color=line.get_color(),
                        capsize=2,
                        linewidth=0.9,
                    )
            axis.axhline(0.0, color="0.6", linewidth=0.8)
            axis.set(
                title=f"{a} vs {b} — {kind}",
                xlabel="layer of f (0 = embeddings)",
                ylabel="stitching penalty (nats/token)",
            )
            axis.xaxis.get_major_locator().set_params(integer=True)
            axis.legend(fontsize=7)
    level = f"{penalties['ci_level'].iloc[0]:.0%}" if "ci_level" in penalties and len(penalties) else "the"
    note = f"band: {level} bootstrap interval over evaluation batches"
    if seeded:
        note += " (first φ seed); squares and bars beside the points: mean and min–max over φ seeds"
    figure.suptitle(f"Stitching penalty (stitched loss − g's own loss); {note}", fontsize=9)
    return figure


def penalty_plotly(penalties: pd.DataFrame, pairs: list[tuple[str, str]]) -> go.Figure:
    """:func:`penalty_figure` for kedro-viz: the same lines (penalty against f's layer, CI as error bars), one
    subplot per (kind, configured pair); with several φ seeds, a marker trace beside each line (its legend group)
    with the seeds' mean and min–max as error bars."""
    kinds = list(dict.fromkeys(penalties["stitch"])) if len(penalties) else ["none"]
    columns = max(1, len(pairs))
    figure = make_subplots(
        rows=len(kinds),
        cols=columns,
        shared_yaxes=True,
        subplot_titles=[f"{a} vs {b} — {kind}" for kind in kinds for a, b in pairs] or None,
    )
    for row, kind in enumerate(kinds, start=1):
        for column, (a, b) in enumerate(pairs, start=1):
            for label, style, rows in direction_rows(penalties, kind, a, b):
                figure.add_trace(
                    go.Scatter(
                        x=rows["layer_f"],
                        y=rows["penalty"],
                        name=f"{label} ({kind})",
                        mode="lines+markers",
                        line={"dash": "solid" if style == "-" else "dot"},
                        error_y={
                            "type": "data",
                            "symmetric": False,
                            "array": rows["ci_high"] - rows["penalty"],
                            "arrayminus": rows["penalty"] - rows["ci_low"],
                        },
                        customdata=rows[["layer_g", "ci_low", "ci_high"]].to_numpy(),
                        hovertemplate="layer of f %{x} → layer of g %{customdata[0]}<br>penalty %{y:.4f} "
                        "[%{customdata[1]:.4f}, %{customdata[2]:.4f}]<extra>" + label + "</extra>",
                        legendgroup=f"{label} ({kind})",
                    ),
                    row=row,
                    col=column,
                )
                spread = seed_spread(rows)
                if spread is not None:
                    mean = spread["penalty_seed_mean"]
                    figure.add_trace(
                        go.Scatter(
                            x=spread["layer_f"] + SEED_OFFSET,
                            y=mean,
                            name=f"{label} ({kind}) φ seeds",
                            mode="markers",
                            marker={"symbol": "square-open", "size": 7},
                            legendgroup=f"{label} ({kind})",
                            showlegend=False,
                            error_y={
                                "type": "data",
                                "symmetric": False,
                                "array": spread["penalty_seed_max"] - mean,
                                "arrayminus": mean - spread["penalty_seed_min"],
                            },
                            customdata=spread[["penalty_seed_min", "penalty_seed_max", "n_phi_seeds"]].to_numpy(),
                            hovertemplate="mean over %{customdata[2]} φ seeds %{y:.4f}<br>min %{customdata[0]:.4f}, max "
                            "%{customdata[1]:.4f}<extra>" + label + "</extra>",
                        ),
                        row=row,
                        col=column,
                    )
            figure.update_xaxes(title_text="layer of f (0 = embeddings)", dtick=1, row=row, col=column)
        figure.update_yaxes(title_text="penalty (nats/token)", row=row, col=1)
    figure.update_layout(
        title="Stitching penalty (stitched loss − g's own loss)", width=PLOTLY_WIDTH, height=320 * len(kinds) + 80
    )
    return figure


def kind_panels(kinds: list[str], panel_inches: tuple[float, float], empty_message: str) -> tuple[Figure, np.ndarray]:
    """A figure with one panel per stitch kind, side by side (at least ``MIN_FIGURE_WIDTH_IN`` wide); with no
    kind, one blank panel that says ``empty_message``."""
    width, height = panel_inches
    figure = Figure(
        figsize=(max(MIN_FIGURE_WIDTH_IN, width * max(1, len(kinds))), height), dpi=FIGURE_DPI, layout="constrained"
    )
    axes = figure.subplots(1, max(1, len(kinds)), squeeze=False)[0]
    if not kinds:
        axes[0].text(0.5, 0.5, empty_message, ha="center", va="center")
        axes[0].set_axis_off()
    return figure, axes


def curves_figure(curves: pd.DataFrame) -> Figure:
    """Learning curves of one ordered pair in the style of Brown et al. (2023) fig. 6: one panel per kind; per
    layer pair (one colour) the training loss at every step (thin line) and the held-out loss every
    ``eval_every`` steps (dots, dashed), with g's own loss on the same held-out batches (grey). With several φ
    seeds, each stitch's first seed."""
    curves = first_seed(curves)
    kinds = list(dict.fromkeys(curves["kind"])) if len(curves) else []
    figure, axes = kind_panels(kinds, (4.5, 4.2), "no trained stitch (identity stitching only)")
    if not kinds:
        return figure
    f, g = curves["f"].iloc[0], curves["g"].iloc[0]
    layer_pairs = list(dict.fromkeys(zip(curves["layer_f"], curves["layer_g"])))
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(layer_pairs)))
    for axis, kind in zip(axes, kinds):
        of_kind = curves[curves["kind"] == kind]
        for colour, (layer_f, layer_g) in zip(colours, layer_pairs):
            rows = of_kind[(of_kind["layer_f"] == layer_f) & (of_kind["layer_g"] == layer_g)].sort_values("step")
            if rows.empty:
                continue
            trained = rows[rows["step"] > 0]
            axis.plot(trained["step"], trained["train_loss"], color=colour, linewidth=0.8, alpha=0.6)
            held = rows.dropna(subset=["heldout_loss"])
            axis.plot(
                held["step"], held["heldout_loss"], "--o", color=colour, markersize=3, label=f"l{layer_f} → m{layer_g}"
            )
        reference = (of_kind["heldout_loss"] - of_kind["heldout_penalty"]).dropna()
        if len(reference):
            axis.axhline(float(reference.iloc[0]), color="0.5", linestyle=":", label=f"{g}'s own held-out loss")
        axis.set(title=f"{f} → {g} — {kind}", xlabel="step", ylabel="loss (nats/token)")
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.legend(fontsize=7, title="line: training, dots: held-out", title_fontsize=7)
    return figure


def penalty_matrix(table: pd.DataFrame, kind: str) -> tuple[list[int], list[int], np.ndarray]:
    """``(layers of f, layers of g, penalties (len f, len g))`` of one kind; NaN where the grid has no stitch."""
    rows = table[table["stitch"] == kind]
    matrix = rows.pivot_table(index="layer_f", columns="layer_g", values="penalty", aggfunc="first")
    return [int(v) for v in matrix.index], [int(v) for v in matrix.columns], matrix.to_numpy(dtype=float)


def penalty_heatmap(table: pd.DataFrame) -> Figure:
    """Stitching penalty over (layer of g across, layer of f up the side), one panel per kind (``layers: all``);
    values printed in the cells up to 16 layers a side."""
    kinds = list(dict.fromkeys(table["stitch"])) if len(table) else []
    figure, axes = kind_panels(kinds, (4.6, 4.4), "no stitches")
    if not kinds:
        return figure
    f, g = table["model_f"].iloc[0], table["model_g"].iloc[0]
    for axis, kind in zip(axes, kinds):
        layers_f, layers_g, matrix = penalty_matrix(table, kind)
        image = axis.imshow(
            matrix, origin="lower", cmap="viridis", aspect="auto", vmin=min(0.0, float(np.nanmin(matrix)))
        )
        if max(matrix.shape) <= 16:
            for (i, j), value in np.ndenumerate(matrix):
                if np.isfinite(value):
                    axis.text(
                        j,
                        i,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if image.norm(value) > 0.6 else "white",
                    )
        axis.set(
            title=f"{f} → {g} — {kind}",
            xlabel=f"layer of g = {g} (0 = embeddings)",
            ylabel=f"layer of f = {f}",
            xticks=range(len(layers_g)),
            yticks=range(len(layers_f)),
        )
        axis.set_xticklabels([str(v) for v in layers_g])
        axis.set_yticklabels([str(v) for v in layers_f])
        figure.colorbar(image, ax=axis, label="penalty (nats/token)")
    return figure


def penalty_heatmap_plotly(table: pd.DataFrame) -> go.Figure:
    """:func:`penalty_heatmap` for kedro-viz, with the CI on hover."""
    kinds = list(dict.fromkeys(table["stitch"])) if len(table) else []
    figure = make_subplots(rows=1, cols=max(1, len(kinds)), subplot_titles=kinds or None)
    for column, kind in enumerate(kinds, start=1):
        layers_f, layers_g, matrix = penalty_matrix(table, kind)
        rows = table[table["stitch"] == kind]
        low = rows.pivot_table(index="layer_f", columns="layer_g", values="ci_low", aggfunc="first").to_numpy(float)
        high = rows.pivot_table(index="layer_f", columns="layer_g", values="ci_high", aggfunc="first").to_numpy(float)
        figure.add_trace(
            go.Heatmap(
                z=matrix,
                x=layers_g,
                y=layers_f,
                colorscale="Viridis",
                customdata=np.dstack([low, high]),
                colorbar={"x": column / max(1, len(kinds)) - 0.02, "len": 0.9},
                hovertemplate="layer of f %{y} → layer of g %{x}<br>penalty %{z:.4f}<br>CI [%{customdata[0]:.4f}, "
                "%{customdata[1]:.4f}]<extra>" + kind + "</extra>",
            ),
            row=1,
            col=column,
        )
        figure.update_xaxes(title_text="layer of g", dtick=1, row=1, col=column)
        figure.update_yaxes(title_text="layer of f", dtick=1, row=1, col=column)
    if kinds:
        figure.update_layout(title=f"Stitching penalty: {table['model_f'].iloc[0]} → {table['model_g'].iloc[0]}")
    figure.update_layout(width=max(PLOTLY_WIDTH, 520 * len(kinds)), height=480)
    return figure
