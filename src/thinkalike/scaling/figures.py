"""The ``scaling`` figure (Brown et al. 2023 figs. 3, 9, 10) from a family analysis of
:mod:`thinkalike.scaling.analysis` (no Kedro), in the style of :mod:`thinkalike.figures`."""

from __future__ import annotations

from matplotlib.figure import Figure

from thinkalike.figures import FIGURE_DPI, MIN_FIGURE_WIDTH_IN
from thinkalike.scaling.analysis import ScalingResult


def scaling_figure(result: ScalingResult) -> Figure:
    """Four panels: intra-model mean CKA against size (fig. 10); each member's intermediate-band CKA against the
    others with its robust z (fig. 9); early-layer CKA between members (fig. 3); the largest member's intra-model
    CKA with its block boundaries."""
    members = result.members
    family = members[members["role"] == "member"]
    figure = Figure(figsize=(max(MIN_FIGURE_WIDTH_IN, 11.0), 8.0), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.subplots(2, 2)
    ax = axes[0, 0]
    ax.plot(family["n_parameters"], family["intra_mean"], "o-", color="tab:blue", label="family")
    for _, row in members.iterrows():
        ax.annotate(
            row["model"],
            (row["n_parameters"], row["intra_mean"]),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    twins = members[members["role"] == "twin"]
    if len(twins):
        ax.plot(twins["n_parameters"], twins["intra_mean"], "s", color="tab:orange", label="on-trend twin")
    ax.set_xscale("log")
    ax.set(
        xlabel="non-embedding parameters",
        ylabel="mean off-diagonal intra-model CKA",
        title="Intra-model similarity vs scale",
    )
    ax.legend(fontsize=7)
    ax = axes[0, 1]
    colours = [
        "tab:red" if flag else ("tab:orange" if off else "tab:blue")
        for flag, off in zip(family["outlier"], family["off_trend"])
    ]
    ax.bar(family["model"], family["band_mean_vs_others"], color=colours)
    for x, (value, z) in enumerate(zip(family["band_mean_vs_others"], family["robust_z"])):
        ax.annotate(f"z={z:.1f}", (x, value), ha="center", fontsize=7, xytext=(0, 2), textcoords="offset points")
    low, high = result.summary.get("band", [0.25, 0.75])
    ax.set(ylabel=f"mean CKA vs other members, depth {low:g}–{high:g}", title="Intermediate layers: the outlier")
    ax.tick_params(axis="x", labelsize=7, rotation=30)
    ax = axes[1, 0]
    depths = sorted(result.pairs["relative_depth"].unique())
    names = list(family["model"])
    for depth in depths:
        rows = result.pairs[
            (result.pairs["relative_depth"] == depth)
            & result.pairs["model_a"].isin(names)
            & result.pairs["model_b"].isin(names)
        ]
        ax.errorbar(
            range(len(rows)),
            rows["cka"],
            yerr=[rows["cka"] - rows["ci_low"], rows["ci_high"] - rows["cka"]],
            fmt="o",
            capsize=2,
            label=f"relative depth {depth:g}",
        )
    band_rows = result.pairs[result.pairs["model_a"].isin(names) & result.pairs["model_b"].isin(names)].drop_duplicates(
        ["model_a", "model_b"]
    )
    ax.plot(range(len(band_rows)), band_rows["band_mean"], "x", color="grey", label=f"band {low:g}–{high:g} mean")
    ax.set_xticks(
        range(len(band_rows)), [f"{a}\n{b}" for a, b in zip(band_rows["model_a"], band_rows["model_b"])], fontsize=5
    )
    ax.set(ylabel="CKA", title="Early layers across scale (every pair of members)")
    ax.legend(fontsize=7)
    ax = axes[1, 1]
    largest = family.sort_values("n_parameters")["model"].iloc[-1]
    matrix = result.intra[largest]
    image = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis", origin="lower")
    for boundary in result.boundaries.get(largest, []):
        ax.axhline(boundary - 0.5, color="white", linewidth=1.5)
        ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
    figure.colorbar(image, ax=ax, shrink=0.8, label="CKA")
    ax.set(xlabel="layer (0 = embeddings)", ylabel="layer", title=f"{largest}: intra-model CKA and its blocks")
    return figure
