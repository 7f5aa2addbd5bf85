"""Distances from CKA and their group summaries (Williams et al. 2021).

- Angular CKA distance (a metric): θ = arccos(CKA), CKA clipped to [−1, 1] first so that
  rounding (CKA = 1 + 1e-12) cannot produce NaN.
- Model distance over matched layers i = 1..m: D = sqrt(Σᵢ θᵢ²) (the product metric).
- Layers of models of different depth are matched by relative depth: layer i of an L-layer
  model sits at depth i/(L−1) (a 1-layer model's only layer at depth 1, the output end).
  Each layer of the shallower model (m layers) is paired with the deeper model's (M layers)
  layer j = round(i·(M−1)/(m−1)), rounding halves up (e.g. m=3, M=4: i=1 → 1.5 → j=2).
- Undefined layers: a matched cell whose CKA is NaN (a layer constant in a batch, see
  :class:`thinkalike.measures.cka.CKAAccumulator`) makes the mean and the distance NaN, with a
  warning naming the cells, unless ``skip_undefined=True``; then both run over the F finite
  cells of the m matched ones (mean = (1/F) Σ CKAᵢ, D = sqrt(Σ θᵢ²) over those F) and F is
  reported beside them (:class:`MatchedSummary`).
- Group analysis: within- and between-group distance tables, and per-relative-depth CKA
  curves with confidence intervals across the model pairs of a group pair, clipped to the
  CKA range.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class MatchedSummary:
    """Mean CKA and product distance over the matched layers, and how many layers they cover."""

    mean_cka: float
    distance: float
    n_matched_layers: int
    n_finite_layers: int


def matched_summary(cka_matrix: np.ndarray, *, skip_undefined: bool = False, label: str = "") -> MatchedSummary:
    """Mean CKA (1/m) Σᵢ CKAᵢ and D = sqrt(Σᵢ arccos(CKAᵢ)²) over the m relative-depth-matched cells.

    If any matched cell is NaN both are NaN and a ``RuntimeWarning`` names the cells (``label``
    says which comparison), unless ``skip_undefined``: then both run over the finite cells only
    (NaN if there are none). ``n_finite_layers`` is reported either way.
    """
    cka_matrix = np.asarray(cka_matrix, dtype=np.float64)
    values = matched_cka(cka_matrix)[1]
    finite = np.isfinite(values)
    n_matched, n_finite = len(values), int(finite.sum())
    if n_finite < n_matched and not skip_undefined:
        cells = [pair for pair, ok in zip(match_layers_by_relative_depth(*cka_matrix.shape), finite) if not ok]
        where = f" of {label}" if label else ""
        warnings.warn(
            f"CKA{where} is NaN at matched layer pair(s) (layer of a, layer of b) {cells}: {n_finite} of "
            f"{n_matched} matched layers are finite, so the mean matched CKA and the arccos distance are NaN "
            "(a layer constant in a minibatch? skip_constant_layers leaves such batches out; "
            "skip_undefined=True averages over the finite layers only)",
            RuntimeWarning,
            stacklevel=2,
        )
    used = values[finite] if skip_undefined else values
    if used.size == 0:
        return MatchedSummary(float("nan"), float("nan"), n_matched, n_finite)
    return MatchedSummary(float(np.mean(used)), product_distance(used), n_matched, n_finite)


def model_distance(cka_matrix: np.ndarray, *, skip_undefined: bool = False) -> float:
    """Product distance over the relative-depth-matched cells of a (La, Lb) CKA matrix.

    NaN if a matched cell is NaN, unless ``skip_undefined`` (see :func:`matched_summary`).
    """
    cka_matrix = np.asarray(cka_matrix, dtype=np.float64)
    if skip_undefined:
        return matched_summary(cka_matrix, skip_undefined=True).distance
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


def group_distance_table(
    distances: pd.DataFrame, groups: Mapping[str, str], *, skip_undefined: bool = False
) -> pd.DataFrame:
    """Within- and between-group summary of pairwise model distances.

    ``distances`` is either a square table (index = columns = model names) or a long one with
    columns model_a, model_b, distance; each unordered pair of distinct models counts once.
    Returns columns group_a, group_b (sorted, group_a ≤ group_b), kind ("within"/"between"),
    mean, std (ddof=1; NaN for one pair), n (pairs) and n_finite (pairs with a finite
    distance). A NaN distance makes its group's mean and std NaN unless ``skip_undefined``,
    which summarises the n_finite finite ones.
    """
    table = _long_distances(distances)
    pairs = [_group_pair(groups, a, b) for a, b in zip(table["model_a"], table["model_b"])]
    table["group_a"] = [p[0] for p in pairs]
    table["group_b"] = [p[1] for p in pairs]

    def summarise(values: pd.Series) -> pd.Series:
        x = values.to_numpy(dtype=np.float64)
        finite = np.isfinite(x)
        used = x[finite] if skip_undefined else x
        mean = float(np.mean(used)) if used.size else np.nan
        std = float(np.std(used, ddof=1)) if used.size > 1 else np.nan
        return pd.Series({"mean": mean, "std": std, "n": len(x), "n_finite": int(finite.sum())})

    summary = table.groupby(["group_a", "group_b"])["distance"].apply(summarise).unstack().reset_index()
    summary["n"] = summary["n"].astype(int)
    summary["n_finite"] = summary["n_finite"].astype(int)
    summary.insert(2, "kind", np.where(summary["group_a"] == summary["group_b"], "within", "between"))
    return summary[["group_a", "group_b", "kind", "mean", "std", "n", "n_finite"]]


def mean_interval(
    values: np.ndarray,
    confidence: float,
    interval: Literal["t", "percentile"],
    value_range: tuple[float, float] = (-1.0, 1.0),
) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``, the interval clipped to ``value_range``.

    ``"t"``: ``scipy.stats.t.interval(confidence, n − 1, loc=mean, scale=s/√n)`` (s: sample
    standard deviation, ddof 1), i.e. mean ± t_{(1+c)/2, n−1}·s/√n, a CI of the mean; NaN for
    one value; (mean, mean) when all values are equal. ``"percentile"``: the (1−c)/2 and
    (1+c)/2 percentiles of the values (a spread band). A NaN value makes all three NaN.
    """
    x = np.asarray(values, dtype=np.float64)
    lo, hi = value_range
    if x.size == 0 or not np.isfinite(x).all():
        return np.nan, np.nan, np.nan
    mean = float(np.mean(x))
    if interval == "percentile":
        alpha = 100.0 * (1.0 - confidence) / 2.0
        low, high = np.percentile(x, [alpha, 100.0 - alpha])
    elif x.size < 2:
        return mean, np.nan, np.nan
    else:
        scale = float(np.std(x, ddof=1)) / np.sqrt(x.size)
        low, high = (mean, mean) if scale == 0.0 else stats.t.interval(confidence, x.size - 1, loc=mean, scale=scale)
    return mean, float(np.clip(low, lo, hi)), float(np.clip(high, lo, hi))


def layer_cka_curves(
    cka_matrices: Mapping[tuple[str, str], np.ndarray],
    groups: Mapping[str, str],
    *,
    confidence: float = 0.95,
    interval: Literal["t", "percentile"] = "t",
    n_points: int | None = None,
    value_range: tuple[float, float] = (-1.0, 1.0),
) -> pd.DataFrame:
    """Per-relative-depth CKA of matched layers, summarised over the pairs of each group pair.

    ``cka_matrices`` maps (model_a, model_b) to its CKA matrix; pairs of a model with itself are
    skipped. Each pair gives a curve at the shallower model's relative depths; with
    ``n_points`` every curve is linearly interpolated onto ``linspace(0, 1, n_points)`` so that
    models of different depth share a grid, otherwise depths are grouped as they are.
    Intervals are those of :func:`mean_interval` (``"t"``: scipy's t interval of the mean;
    ``"percentile"``: a spread band), clipped to ``value_range`` — the CKA estimator's range,
    [−1, 1] for unbiased CKA (the default), [0, 1] for biased. Returns columns group_a,
    group_b, relative_depth, mean, ci_low, ci_high, n.
    """
    if interval not in ("t", "percentile"):
        raise ValueError(f"interval must be 't' or 'percentile'; got {interval!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    if not value_range[0] < value_range[1]:
        raise ValueError(f"value_range must be (low, high) with low < high; got {value_range}")
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

    def summarise(values: pd.Series) -> pd.Series:
        mean, low, high = mean_interval(values.to_numpy(), confidence, interval, value_range)
        return pd.Series({"mean": mean, "ci_low": low, "ci_high": high, "n": len(values)})

    grouped = long.groupby(["group_a", "group_b", "relative_depth"])["cka"]
    summary = grouped.apply(summarise).unstack().reset_index()
    summary["n"] = summary["n"].astype(int)
    return summary[["group_a", "group_b", "relative_depth", "mean", "ci_low", "ci_high", "n"]]
