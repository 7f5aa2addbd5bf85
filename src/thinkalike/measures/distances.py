"""Distances from CKA and their group summaries (Williams et al. 2021).

- Angular CKA distance (a metric): θ = arccos(CKA), CKA clipped to [−1, 1] first so that
  rounding (CKA = 1 + 1e-12) cannot produce NaN.
- Model distance over matched layers i = 1..m: D = sqrt(Σᵢ θᵢ²) (the product metric).
- Layers of models of different depth are matched by relative depth: layer i of an L-layer
  model sits at depth i/(L−1) (a 1-layer model's only layer at depth 1, the output end).
  Each layer of the shallower model (m layers) is paired with the deeper model's (M layers)
  layer j = round(i·(M−1)/(m−1)), rounding halves up (e.g. m=3, M=4: i=1 → 1.5 → j=2).
- Group analysis: within- and between-group distance tables, and per-relative-depth CKA
  curves with confidence intervals across the model pairs of a group pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

ArrayLike = float | np.ndarray | list[float]


def arccos_cka(cka: ArrayLike) -> float | np.ndarray:
    """θ = arccos(clip(CKA, −1, 1)) in radians; NaN stays NaN; scalars give a float."""
    values = np.arccos(np.clip(np.asarray(cka, dtype=np.float64), -1.0, 1.0))
    return float(values) if values.ndim == 0 else values


def product_distance(cka_values: ArrayLike) -> float:
    """sqrt(Σᵢ arccos(CKAᵢ)²) over matched layers (NaN if any value is NaN)."""
    angles = np.atleast_1d(arccos_cka(cka_values))
    return float(np.sqrt(np.sum(np.square(angles))))


def relative_depth(layer: int, n_layers: int) -> float:
    """i/(L−1); 1.0 for a single-layer model."""
    return 1.0 if n_layers == 1 else layer / (n_layers - 1)


def match_layers_by_relative_depth(layers_a: int, layers_b: int) -> list[tuple[int, int]]:
    """(i, j) pairs (i indexes model a, j model b), one per layer of the shallower model.

    j (or i) = round-half-up(index·(M−1)/(m−1)) in exact integer arithmetic; see module doc.
    """
    if layers_a < 1 or layers_b < 1:
        raise ValueError(f"both models need at least one layer; got {layers_a} and {layers_b}")
    shallow, deep = sorted((layers_a, layers_b))
    if shallow == 1:
        partners = [deep - 1]
    else:
        partners = [(2 * i * (deep - 1) + (shallow - 1)) // (2 * (shallow - 1)) for i in range(shallow)]
    if layers_a <= layers_b:
        return list(enumerate(partners))
    return [(j, i) for i, j in enumerate(partners)]


def matched_cka(cka_matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(relative depths of the shallower model, CKA at the matched cells) of an La×Lb matrix."""
    cka_matrix = np.asarray(cka_matrix, dtype=np.float64)
    layers_a, layers_b = cka_matrix.shape
    pairs = match_layers_by_relative_depth(layers_a, layers_b)
    shallow_index, shallow_depth = (0, layers_a) if layers_a <= layers_b else (1, layers_b)
    depths = np.array([relative_depth(pair[shallow_index], shallow_depth) for pair in pairs])
    return depths, np.array([cka_matrix[i, j] for i, j in pairs])


def model_distance(cka_matrix: np.ndarray) -> float:
    """Product distance over the relative-depth-matched cells of a (La, Lb) CKA matrix."""
    return product_distance(matched_cka(cka_matrix)[1])


def _long_distances(distances: pd.DataFrame) -> pd.DataFrame:
    """Unordered pairs of distinct models: columns model_a, model_b, distance."""
    if {"model_a", "model_b", "distance"} <= set(distances.columns):
        table = distances[["model_a", "model_b", "distance"]]
    else:
        stacked = distances.stack()
        stacked.index.names = ["model_a", "model_b"]
        table = stacked.rename("distance").reset_index()
    table = table[table["model_a"] != table["model_b"]].copy()
    key = table[["model_a", "model_b"]].apply(lambda r: tuple(sorted(map(str, r))), axis=1)
    return table.loc[~key.duplicated()].reset_index(drop=True)


def _group_pair(groups: Mapping[str, str], model_a: str, model_b: str) -> tuple[str, str]:
    missing = [m for m in (model_a, model_b) if m not in groups]
    if missing:
        raise KeyError(f"model(s) {missing} have no group label")
    ga, gb = sorted((str(groups[model_a]), str(groups[model_b])))
    return ga, gb


def group_distance_table(distances: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
    """Within- and between-group summary of pairwise model distances.

    ``distances`` is either a square table (index = columns = model names) or a long one with
    columns model_a, model_b, distance; each unordered pair of distinct models counts once.
    Returns columns group_a, group_b (sorted, group_a ≤ group_b), kind ("within"/"between"),
    mean, std (ddof=1; NaN for one pair), n.
    """
    table = _long_distances(distances)
    pairs = [_group_pair(groups, a, b) for a, b in zip(table["model_a"], table["model_b"])]
    table["group_a"] = [p[0] for p in pairs]
    table["group_b"] = [p[1] for p in pairs]
    summary = (
        table.groupby(["group_a", "group_b"])["distance"].agg(mean="mean", std="std", n="count").reset_index()
    )
    summary.insert(2, "kind", np.where(summary["group_a"] == summary["group_b"], "within", "between"))
    return summary


def layer_cka_curves(
    cka_matrices: Mapping[tuple[str, str], np.ndarray],
    groups: Mapping[str, str],
    *,
    confidence: float = 0.95,
    interval: Literal["t", "percentile"] = "t",
    n_points: int | None = None,
) -> pd.DataFrame:
    """Per-relative-depth CKA of matched layers, summarised over the pairs of each group pair.

    ``cka_matrices`` maps (model_a, model_b) to its CKA matrix; pairs of a model with itself are
    skipped. Each pair gives a curve at the shallower model's relative depths; with
    ``n_points`` every curve is linearly interpolated onto ``linspace(0, 1, n_points)`` so that
    models of different depth share a grid, otherwise depths are grouped as they are.
    ``interval="t"``: mean ± t_{(1+c)/2, n−1}·s/√n (a CI of the mean); ``"percentile"``: the
    (1−c)/2 and (1+c)/2 percentiles of the pair values (a spread band). Returns columns
    group_a, group_b, relative_depth, mean, ci_low, ci_high, n.
    """
    if interval not in ("t", "percentile"):
        raise ValueError(f"interval must be 't' or 'percentile'; got {interval!r}")
    rows = []
    for (model_a, model_b), matrix in cka_matrices.items():
        if model_a == model_b:
            continue
        group_a, group_b = _group_pair(groups, model_a, model_b)
        depths, values = matched_cka(matrix)
        if n_points is not None:
            grid = np.linspace(0.0, 1.0, n_points)
            depths, values = grid, np.interp(grid, depths, values) if len(depths) > 1 else np.full(n_points, values[0])
        rows += [(group_a, group_b, round(float(d), 12), float(v)) for d, v in zip(depths, values)]
    long = pd.DataFrame(rows, columns=["group_a", "group_b", "relative_depth", "cka"])
    alpha = (1.0 - confidence) / 2.0

    def summarise(values: pd.Series) -> pd.Series:
        x = values.to_numpy(dtype=np.float64)
        mean = float(np.mean(x))
        if interval == "percentile":
            low, high = np.percentile(x, [100 * alpha, 100 * (1 - alpha)])
        elif len(x) > 1:
            half = stats.t.ppf(1 - alpha, len(x) - 1) * np.std(x, ddof=1) / np.sqrt(len(x))
            low, high = mean - half, mean + half
        else:
            low = high = np.nan
        return pd.Series({"mean": mean, "ci_low": low, "ci_high": high, "n": len(x)})

    grouped = long.groupby(["group_a", "group_b", "relative_depth"])["cka"]
    summary = grouped.apply(summarise).unstack().reset_index()
    summary["n"] = summary["n"].astype(int)
    return summary[["group_a", "group_b", "relative_depth", "mean", "ci_low", "ci_high", "n"]]
