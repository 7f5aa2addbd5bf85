"""CKA between two models' activation stores, as tables and figures (no Kedro).

The long table has one row per (layer of a, layer of b): ``model_a, layer_a, model_b,
layer_b, cka, ci_low, ci_high, p_value, n_batches, n_tokens, estimator, aggregation, pooling``.
``ci_low``/``ci_high`` are percentile-bootstrap limits over minibatches; ``p_value`` is the
permutation p-value (1 + #{null ≥ observed}) / (1 + n_permutations) for "more similar than
chance" (NaN when no permutations were asked for). Layer 0 is the embedding output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from thinkalike.measures.cka import ESTIMATORS, CKAAccumulator, CKAResult
from thinkalike.measures.distances import matched_cka, model_distance
from thinkalike.measures.significance import AGGREGATIONS
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.alignment import aligned_minibatches, check_pooling

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TABLE_COLUMNS = ["model_a", "layer_a", "model_b", "layer_b", "cka", "ci_low", "ci_high", "p_value", "n_batches",
                 "n_tokens", "estimator", "aggregation", "pooling"]


@dataclass(frozen=True)
class CKASettings:
    """How CKA is estimated; checked on construction so bad config fails before any compute."""

    estimator: str = "unbiased"
    aggregation: str = "mean_of_ratios"
    pooling: str = "token"
    batch_tokens: int = 1024
    n_bootstrap: int = 200
    n_permutations: int = 0
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"cka.estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"cka.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        check_pooling(self.pooling)
        if self.batch_tokens < 4:
            raise ValueError(f"cka.batch_tokens must be at least 4 (unbiased HSIC needs n >= 4), "
                             f"got {self.batch_tokens}")
        if self.n_bootstrap < 0 or self.n_permutations < 0:
            raise ValueError("cka.n_bootstrap and cka.n_permutations must be >= 0")
        if not 0 < self.confidence < 1:
            raise ValueError(f"cka.confidence must be in (0, 1), got {self.confidence}")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> CKASettings:
        names = cls.__dataclass_fields__
        unknown = sorted(set(parameters) - set(names) - {"pairs", "groups", "device"})
        if unknown:
            raise ValueError(f"unknown cka parameter(s) {unknown}; known: {sorted(names)}")
        return cls(**{key: parameters[key] for key in names if key in parameters})


def compute_cka(store_a: ActivationStore, index_a: pd.DataFrame, store_b: ActivationStore, index_b: pd.DataFrame,
                settings: CKASettings, *, model_a: str, model_b: str, device: str | None = None) -> CKAResult:
    """Streams aligned minibatches of the two stores through one :class:`CKAAccumulator`."""
    import torch

    same_model = model_a == model_b
    accumulator = CKAAccumulator(store_a.n_layers + 1, store_b.n_layers + 1, estimator=settings.estimator,
                                 aggregation=settings.aggregation, model_a=model_a, model_b=model_b,
                                 n_permutations=0 if same_model else settings.n_permutations, seed=settings.seed)
    target = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for acts_a, acts_b in aligned_minibatches(store_a, index_a, store_b, index_b, pooling=settings.pooling,
                                              batch_tokens=settings.batch_tokens):
        tensor_a = torch.from_numpy(acts_a).to(target)
        accumulator.update(tensor_a, None if same_model else torch.from_numpy(acts_b).to(target))
    if accumulator.n_batches == 0:
        raise ValueError(f"no minibatches to compare for {model_a!r} vs {model_b!r}")
    return accumulator.result()


def cka_long_table(result: CKAResult, settings: CKASettings) -> pd.DataFrame:
    """The long-form table of a pair (see module docstring)."""
    layers_a, layers_b = result.cka.shape
    grid_a, grid_b = np.meshgrid(np.arange(layers_a), np.arange(layers_b), indexing="ij")
    if settings.n_bootstrap > 0 and result.n_batches > 1:
        interval = result.bootstrap_ci(settings.n_bootstrap, settings.confidence, settings.seed)
        low, high = interval.ci_low, interval.ci_high
    else:
        low = high = np.full_like(result.cka, np.nan)
    p_values = result.p_values if result.p_values is not None else np.full_like(result.cka, np.nan)
    table = pd.DataFrame({
        "model_a": result.model_a, "layer_a": grid_a.ravel(), "model_b": result.model_b, "layer_b": grid_b.ravel(),
        "cka": result.cka.ravel(), "ci_low": np.asarray(low).ravel(), "ci_high": np.asarray(high).ravel(),
        "p_value": np.asarray(p_values).ravel(), "n_batches": result.n_batches, "n_tokens": result.n_tokens,
        "estimator": result.estimator, "aggregation": result.aggregation, "pooling": settings.pooling,
    })
    return table[TABLE_COLUMNS]


def cka_matrix_from_table(table: pd.DataFrame) -> np.ndarray:
    """The (La, Lb) matrix of a pair's long table."""
    return table.pivot(index="layer_a", columns="layer_b", values="cka").sort_index().sort_index(axis=1).to_numpy()


def pair_summary(table: pd.DataFrame) -> dict[str, float]:
    """Mean CKA over relative-depth-matched layers and the arccos product distance."""
    matrix = cka_matrix_from_table(table)
    return {"mean_matched_cka": float(np.nanmean(matched_cka(matrix)[1])),
            "arccos_distance": float(model_distance(matrix))}


def heatmap_figure(table: pd.DataFrame):
    """Brown et al.-style heatmap: layers of model b across, of model a up the side, CKA in [0, 1]."""
    matrix = cka_matrix_from_table(table)
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    figure, axis = plt.subplots(figsize=(1.2 + 0.45 * matrix.shape[1] + 1.5, 1.2 + 0.45 * matrix.shape[0]))
    image = axis.imshow(matrix, origin="lower", vmin=0.0, vmax=1.0, cmap="magma", aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        if matrix.size <= 100 and np.isfinite(value):
            axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                      color="black" if value > 0.6 else "white")
    axis.set(xlabel=f"{model_b} layer", ylabel=f"{model_a} layer", title=f"CKA {model_a} vs {model_b}",
             xticks=range(matrix.shape[1]), yticks=range(matrix.shape[0]))
    figure.colorbar(image, ax=axis, label=f"{table['estimator'].iloc[0]} CKA")
    figure.tight_layout()
    return figure


def heatmap_plotly(table: pd.DataFrame) -> go.Figure:
    """The same heatmap for kedro-viz previews, with the confidence interval on hover."""
    matrix = cka_matrix_from_table(table)
    low = table.pivot(index="layer_a", columns="layer_b", values="ci_low").sort_index().to_numpy()
    high = table.pivot(index="layer_a", columns="layer_b", values="ci_high").sort_index().to_numpy()
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    figure = go.Figure(go.Heatmap(z=matrix, zmin=0, zmax=1, colorscale="Magma", customdata=np.dstack([low, high]),
                                  hovertemplate="a layer %{y}, b layer %{x}<br>CKA %{z:.3f}"
                                                "<br>CI [%{customdata[0]:.3f}, %{customdata[1]:.3f}]<extra></extra>"))
    figure.update_layout(title=f"CKA {model_a} vs {model_b}", xaxis_title=f"{model_b} layer",
                         yaxis_title=f"{model_a} layer")
    return figure


def distance_table(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per compared pair: layers, matched mean CKA and arccos distance."""
    rows = []
    for table in tables:
        rows.append({"model_a": table["model_a"].iloc[0], "model_b": table["model_b"].iloc[0],
                     "layers_a": int(table["layer_a"].max()) + 1, "layers_b": int(table["layer_b"].max()) + 1,
                     **pair_summary(table), "n_tokens": int(table["n_tokens"].iloc[0])})
    return pd.DataFrame(rows)


def group_curves_figure(curves: pd.DataFrame):
    """Per-layer CKA curves with confidence bands, one line per group pair (Brown et al. figs 2b, 8)."""
    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    if curves.empty:
        axis.text(0.5, 0.5, "no between-model pairs with group labels", ha="center", va="center")
    for (group_a, group_b), curve in curves.groupby(["group_a", "group_b"]):
        curve = curve.sort_values("relative_depth")
        line, = axis.plot(curve["relative_depth"], curve["mean"], marker="o", label=f"{group_a} vs {group_b}")
        axis.fill_between(curve["relative_depth"], curve["ci_low"], curve["ci_high"], color=line.get_color(),
                          alpha=0.2)
    axis.set(xlabel="relative depth", ylabel="CKA of matched layers", ylim=(0, 1.02), title="CKA by group")
    if not curves.empty:
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def distance_matrix_figure(distances: pd.DataFrame):
    """Models × models arccos distances (symmetric; blank where a pair was not compared)."""
    models = list(dict.fromkeys([*distances["model_a"], *distances["model_b"]]))
    position = {model: i for i, model in enumerate(models)}
    matrix = np.full((len(models), len(models)), np.nan)
    for row in distances.itertuples():
        matrix[position[row.model_a], position[row.model_b]] = row.arccos_distance
        matrix[position[row.model_b], position[row.model_a]] = row.arccos_distance
    size = 2.5 + 0.5 * len(models)
    figure, axis = plt.subplots(figsize=(size + 1.2, size))
    image = axis.imshow(np.ma.masked_invalid(matrix), cmap="viridis_r", vmin=0.0)
    axis.set(xticks=range(len(models)), yticks=range(len(models)), title="arccos-CKA distance between models")
    axis.set_xticklabels(models, rotation=60, ha="right", fontsize=8)
    axis.set_yticklabels(models, fontsize=8)
    figure.colorbar(image, ax=axis, label="sqrt(Σ arccos(CKA)²) over matched layers")
    figure.tight_layout()
    return figure
