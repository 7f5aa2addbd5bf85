"""Figures of the ``embedding`` pipeline (matplotlib object API, no pyplot, ≥ 1000 px wide; no Kedro)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from thinkalike.figures import legend_if_labelled

DPI = 100


def keep_k_figure(scores: pd.DataFrame, model: str) -> Figure:
    """Score against k (log axis), one line per E′ and distribution, one panel per variant (Dar et al. fig. 5);
    the embedding's condition number in the title."""
    variants = list(dict.fromkeys(scores["variant"]))
    figure = Figure(figsize=(6 * len(variants), 4.5), dpi=DPI, layout="constrained")
    axes = figure.subplots(1, len(variants), squeeze=False)[0]
    for axis, variant in zip(axes, variants):
        part = scores[scores["variant"] == variant]
        for (distribution, e_prime), line in part.groupby(["distribution", "e_prime"], sort=False):
            line = line.sort_values("k")
            axis.plot(
                line["k"],
                line["score"],
                marker="o",
                linestyle="-" if e_prime == "transpose" else "--",
                label=f"{distribution}, E′={'Eᵀ' if e_prime == 'transpose' else 'E⁺'}",
            )
        axis.set_xscale("log")
        axis.set_xlabel("k (entries kept per projection)")
        axis.set_ylabel("cos(G, G′)")
        axis.set_ylim(-0.05, 1.05)
        axis.set_title(variant.replace("_", " "))
        axis.grid(alpha=0.3)
        legend_if_labelled(axis, fontsize=8)
    condition = float(scores["condition_number"].iloc[0]) if len(scores) else float("nan")
    figure.suptitle(f"{model}: keep-k robust invertibility (V = {int(scores['k'].max())}, cond(E) = {condition:.3g})")
    return figure


def alignment_figure(similarity: pd.DataFrame, model_a: str, model_b: str) -> Figure:
    """Layer-similarity heatmaps (rows: layers of A, columns: layers of B), one column per group, one row per
    space; matched cells marked (Dar et al. fig. 3)."""
    groups = list(dict.fromkeys(similarity["group"]))
    spaces = list(dict.fromkeys(similarity["space"]))
    figure = Figure(figsize=(max(10.0, 2.6 * len(groups)), 2.8 * len(spaces) + 0.6), dpi=DPI, layout="constrained")
    axes = figure.subplots(max(1, len(spaces)), max(1, len(groups)), squeeze=False)
    for row, space in enumerate(spaces):
        for column, group in enumerate(groups):
            axis = axes[row, column]
            part = similarity[(similarity["space"] == space) & (similarity["group"] == group)]
            if part.empty:
                axis.set_axis_off()
                continue
            matrix = part.pivot(index="layer_a", columns="layer_b", values="similarity")
            image = axis.imshow(matrix.to_numpy(), cmap="viridis", origin="lower", aspect="auto")
            matched = part[part["matched"]]
            rows = {layer: i for i, layer in enumerate(matrix.index)}
            columns = {layer: i for i, layer in enumerate(matrix.columns)}
            axis.scatter(
                [columns[b] for b in matched["layer_b"]],
                [rows[a] for a in matched["layer_a"]],
                marker="x",
                color="red",
                s=30,
            )
            axis.set_xticks(range(len(matrix.columns)), matrix.columns)
            axis.set_yticks(range(len(matrix.index)), matrix.index)
            axis.set_title(f"{group} ({space})", fontsize=9)
            axis.set_xlabel(f"layer of {model_b}", fontsize=8)
            axis.set_ylabel(f"layer of {model_a}", fontsize=8)
            figure.colorbar(image, ax=axis, shrink=0.8)
    figure.suptitle(f"Layer alignment {model_a} vs {model_b}: mean |Pearson| (× = Hungarian match)")
    return figure


def alignment_summary_figure(matches: pd.DataFrame) -> Figure:
    """Fraction of diagonal matches per group, projected vs raw, one bar group per model pair."""
    figure = Figure(figsize=(12, 4.5), dpi=DPI, layout="constrained")
    axis = figure.subplots()
    if matches.empty:
        axis.text(0.5, 0.5, "no aligned pairs", ha="center", va="center")
        return figure
    labels = matches["model_a"] + " vs " + matches["model_b"] + " · " + matches["group"]
    table = matches.assign(label=labels).pivot_table(
        index="label", columns="space", values="diagonal_fraction", sort=False
    )
    positions = np.arange(len(table))
    width = 0.8 / max(1, len(table.columns))
    for i, space in enumerate(table.columns):
        axis.bar(positions + i * width, table[space].to_numpy(), width, label=space)
    axis.set_xticks(positions + width * (len(table.columns) - 1) / 2, table.index, rotation=60, ha="right", fontsize=7)
    axis.set_ylabel("fraction of layers matched to the same layer")
    axis.set_ylim(0, 1.05)
    legend_if_labelled(axis)
    axis.set_title("Diagonal-match fraction of the layer alignment, projected (vocabulary space) vs raw")
    return figure


def zero_shot_figure(table: pd.DataFrame) -> Figure:
    """Accuracy against the number of B's layers kept, one panel per fine-tuned model A, one line per B; A's own
    accuracy and chance as horizontal lines."""
    models = list(dict.fromkeys(table["model_a"])) or ["(none)"]
    figure = Figure(figsize=(max(10.0, 5.5 * len(models)), 4.5), dpi=DPI, layout="constrained")
    axes = figure.subplots(1, len(models), squeeze=False)[0]
    for axis, model in zip(axes, models):
        part = table[table["model_a"] == model]
        for donor, line in part.groupby("model_b", sort=False):
            line = line.sort_values("layers_from_b")
            axis.plot(line["layers_from_b"], line["accuracy"], marker="o", label=f"B = {donor}")
        if len(part):
            axis.axhline(float(part["own_accuracy"].iloc[0]), color="black", linestyle="--", label=f"{model} alone")
            axis.axhline(float(part["chance"].iloc[0]), color="grey", linestyle=":", label="chance (majority)")
            axis.set_title(f"A = {model} fine-tuned on {part['task'].iloc[0]}")
        axis.set_xlabel("layers of B kept (then x_B E_B E_A⁺ into A)")
        axis.set_ylabel("accuracy")
        axis.set_ylim(0, 1.05)
        axis.grid(alpha=0.3)
        legend_if_labelled(axis, fontsize=8)
    figure.suptitle("Zero-shot stitching through the vocabulary space")
    return figure
