"""CKA between two models' activation stores, as tables and figures (no Kedro).

The long table has one row per (layer of a, layer of b): ``model_a, layer_a, model_b,
layer_b, cka, ci_low, ci_high, p_value, n_batches, n_tokens, estimator, aggregation, pooling,
skip_constant_layers, exclude_special_tokens`` (the ``cka`` pipeline adds the provenance columns
``activations_version_a/_b`` and ``spec_a/_b``). ``ci_low``/``ci_high`` are percentile-bootstrap limits over
minibatches; ``p_value`` is the permutation p-value (1 + #{null ≥ observed}) / (1 +
n_permutations) for "more similar than chance" (NaN when no permutations were asked for);
``batch_cka`` holds the cell's CKA in each minibatch, in order (NaN where a layer was constant in it; empty
when the per-batch terms were not kept), for statistics that resample minibatches (block stability);
``n_batches`` counts the minibatches that entered the cell (fewer than the run's batches only
where ``skip_constant_layers`` left out a batch in which the layer was constant). Layer 0 is
the embedding output.

Figures are :class:`matplotlib.figure.Figure` objects made without pyplot, so no backend is
chosen or forced here: they save anywhere (Kedro, MLflow) and display inline in notebooks.
They are sized to be read in a paper: at least :data:`MIN_FIGURE_WIDTH_IN` inches wide at
:data:`FIGURE_DPI` dots per inch (≥ 1050 px).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from cycler import cycler
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from thinkalike.measures.cka import ESTIMATORS, CKAAccumulator, CKAResult
from thinkalike.measures.distances import matched_summary
from thinkalike.measures.significance import AGGREGATIONS
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.alignment import aligned_minibatches, check_pooling

TABLE_COLUMNS = ["model_a", "layer_a", "model_b", "layer_b", "cka", "ci_low", "ci_high", "p_value", "n_batches",
                 "n_tokens", "estimator", "aggregation", "pooling", "skip_constant_layers",
                 "exclude_special_tokens", "batch_cka"]
SUMMARY_KEYS = ["mean_matched_cka", "arccos_distance", "n_matched_layers", "n_finite_layers"]
FIGURE_DPI = 150
MIN_FIGURE_WIDTH_IN = 7.0  # 7 in × 150 dpi = 1050 px
PLOTLY_WIDTH = 1050  # px: the interactive figures as wide as the PNGs
LAYER_LABEL = "layer (0 = embeddings)"
CKA_RANGES = {"unbiased": (-1.0, 1.0), "biased": (0.0, 1.0)}
_MAX_ANNOTATED_LAYERS = 16

AUTO_POOLING = "auto"  # token when the two tokenizers agree, else word (resolved per pair)

@dataclass(frozen=True)
class CKASettings:
    """How CKA is estimated; checked on construction so bad config fails before any compute.

    ``skip_constant_layers``: a layer that is constant in a minibatch has no CKA for that
    batch. False (default): its cells are NaN for the run, and so are the mean matched CKA and
    the distance of the pair (with warnings naming layer and batch). True: only that batch is
    left out of that layer's cells, and summaries run over the finite matched layers (the
    tables report ``n_batches`` per cell and ``n_finite_layers`` per pair).
    """

    estimator: str = "unbiased"
    aggregation: str = "mean_of_ratios"
    pooling: str = "token"
    batch_tokens: int = 1024
    n_bootstrap: int = 200
    n_permutations: int = 0
    confidence: float = 0.95
    seed: int = 0
    skip_constant_layers: bool = False
    # rows leave out special tokens (bos, eos, pad, cls, sep, mask; thinkalike.models.alignment)
    exclude_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"cka.estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"cka.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.pooling != AUTO_POOLING:
            check_pooling(self.pooling)
        if self.batch_tokens < 4:
            raise ValueError(f"cka.batch_tokens must be at least 4 (unbiased HSIC needs n >= 4), "
                             f"got {self.batch_tokens}")
        if self.n_bootstrap < 0 or self.n_permutations < 0:
            raise ValueError("cka.n_bootstrap and cka.n_permutations must be >= 0")
        if not 0 < self.confidence < 1:
            raise ValueError(f"cka.confidence must be in (0, 1), got {self.confidence}")
        if not isinstance(self.skip_constant_layers, bool):
            raise ValueError(f"cka.skip_constant_layers must be true or false, got {self.skip_constant_layers!r}")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, Any]) -> CKASettings:
        names = cls.__dataclass_fields__
        unknown = sorted(set(parameters) - set(names) - {"pairs", "groups", "device", "mode", "measures"})
        if unknown:
            raise ValueError(f"unknown cka parameter(s) {unknown}; known: {sorted(names)}")
        return cls(**{key: parameters[key] for key in names if key in parameters})


def compute_cka(store_a: ActivationStore, index_a: pd.DataFrame, store_b: ActivationStore, index_b: pd.DataFrame,
                settings: CKASettings, *, model_a: str, model_b: str, device: str | None = None) -> CKAResult:
    """Streams aligned minibatches of the two stores through one :class:`CKAAccumulator`."""
    import torch

    same_model = model_a == model_b
    accumulator = CKAAccumulator(len(store_a.layers), len(store_b.layers), estimator=settings.estimator,
                                 aggregation=settings.aggregation, model_a=model_a, model_b=model_b,
                                 n_permutations=0 if same_model else settings.n_permutations, seed=settings.seed,
                                 skip_constant_layers=settings.skip_constant_layers)
    target = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    minibatches = aligned_minibatches(store_a, index_a, store_b, index_b, pooling=settings.pooling,
                                      batch_tokens=settings.batch_tokens,
                                      exclude_special_tokens=settings.exclude_special_tokens)
    for acts_a, acts_b in tqdm(minibatches, desc=f"CKA {model_a} vs {model_b}", unit="minibatch", leave=False):
        tensor_a = torch.from_numpy(acts_a).to(target)
        accumulator.update(tensor_a, None if same_model else torch.from_numpy(acts_b).to(target))
    if accumulator.n_batches == 0:
        raise ValueError(f"no minibatches to compare for {model_a!r} vs {model_b!r}")
    return accumulator.result()


def cka_long_table(result: CKAResult, settings: CKASettings, layer_ids_a: Sequence[int] | None = None,
                   layer_ids_b: Sequence[int] | None = None) -> pd.DataFrame:
    """The long-form table of a pair (see module docstring).

    ``layer_ids_a``/``layer_ids_b``: the residual-stream numbers of the matrix rows/columns (the
    stores' ``layers``, when only a subset was stored); default 0, 1, ….
    """
    layers_a, layers_b = result.cka.shape
    ids_a = np.arange(layers_a) if layer_ids_a is None else np.asarray(layer_ids_a, dtype=np.int64)
    ids_b = np.arange(layers_b) if layer_ids_b is None else np.asarray(layer_ids_b, dtype=np.int64)
    if (len(ids_a), len(ids_b)) != (layers_a, layers_b):
        raise ValueError(f"layer ids ({len(ids_a)}, {len(ids_b)}) do not match the CKA matrix {result.cka.shape}")
    grid_a, grid_b = np.meshgrid(ids_a, ids_b, indexing="ij")
    if settings.n_bootstrap > 0 and result.n_batches > 1:
        interval = result.bootstrap_ci(settings.n_bootstrap, settings.confidence, settings.seed)
        low, high = interval.ci_low, interval.ci_high
    else:
        low = high = np.full_like(result.cka, np.nan)
    p_values = result.p_values if result.p_values is not None else np.full_like(result.cka, np.nan)
    per_cell = (result.n_batches_per_cell if result.n_batches_per_cell is not None
                else np.full(result.cka.shape, result.n_batches))
    per_batch = (result.batch_cka().reshape(result.n_batches, -1).T if result.cross is not None
                 else np.zeros((result.cka.size, 0)))
    table = pd.DataFrame({
        "model_a": result.model_a, "layer_a": grid_a.ravel(), "model_b": result.model_b, "layer_b": grid_b.ravel(),
        "cka": result.cka.ravel(), "ci_low": np.asarray(low).ravel(), "ci_high": np.asarray(high).ravel(),
        "p_value": np.asarray(p_values).ravel(), "n_batches": np.asarray(per_cell, dtype=np.int64).ravel(),
        "n_tokens": result.n_tokens, "estimator": result.estimator, "aggregation": result.aggregation,
        "pooling": settings.pooling, "skip_constant_layers": bool(result.skip_constant_layers),
        "exclude_special_tokens": bool(settings.exclude_special_tokens),
        "batch_cka": list(per_batch),
    })
    return table[TABLE_COLUMNS]


def _pivot(table: pd.DataFrame, column: str) -> np.ndarray:
    return table.pivot(index="layer_a", columns="layer_b", values=column).sort_index().sort_index(axis=1).to_numpy()


def cka_matrix_from_table(table: pd.DataFrame) -> np.ndarray:
    """The (La, Lb) matrix of a pair's long table."""
    return _pivot(table, "cka")


def _pair_label(table: pd.DataFrame) -> str:
    return f"{table['model_a'].iloc[0]!r} vs {table['model_b'].iloc[0]!r}"


def _skips_constant_layers(table: pd.DataFrame, skip_constant_layers: bool | None) -> bool:
    """The explicit choice, else the table's own record of the setting (False for older tables)."""
    if skip_constant_layers is not None:
        return bool(skip_constant_layers)
    if "skip_constant_layers" in table:
        return bool(table["skip_constant_layers"].iloc[0])
    return False


def pair_summary(table: pd.DataFrame, skip_constant_layers: bool | None = None) -> dict[str, float]:
    """Mean CKA and arccos product distance over relative-depth-matched layers, with their layer counts.

    ``mean_matched_cka`` = (1/m) Σᵢ CKAᵢ and ``arccos_distance`` = sqrt(Σᵢ arccos(CKAᵢ)²) over
    the m = ``n_matched_layers`` matched cells; ``n_finite_layers`` of them have a finite CKA.
    A NaN matched cell makes both NaN (with a ``RuntimeWarning`` naming the cells) unless
    ``skip_constant_layers`` (default: the setting recorded in the table), which averages over
    the finite cells only.
    """
    summary = matched_summary(cka_matrix_from_table(table),
                              skip_undefined=_skips_constant_layers(table, skip_constant_layers),
                              label=_pair_label(table))
    return {"mean_matched_cka": summary.mean_cka, "arccos_distance": summary.distance,
            "n_matched_layers": float(summary.n_matched_layers), "n_finite_layers": float(summary.n_finite_layers)}


def _layer_ids(table: pd.DataFrame, column: str) -> list[int]:
    """The residual-stream numbers of a table's matrix rows (``layer_a``) or columns (``layer_b``), in order."""
    return [int(layer) for layer in sorted(table[column].unique())]


def _layer_ticks(n_layers: int) -> list[int]:
    """Whole layers, every layer up to 16, else every k-th (k so that ≤ 16 ticks), always the last."""
    step = max(1, int(np.ceil(n_layers / _MAX_ANNOTATED_LAYERS)))
    ticks = list(range(0, n_layers, step))
    return ticks if ticks[-1] == n_layers - 1 else [*ticks, n_layers - 1]


def heatmap_figure(table: pd.DataFrame) -> Figure:
    """Brown et al.-style heatmap: layers of model b across, of model a up the side, CKA in [0, 1].

    Cells are ``clip(6 in / max(La, Lb), 0.25 in, 0.8 in)`` square; the figure is at least
    :data:`MIN_FIGURE_WIDTH_IN` wide at :data:`FIGURE_DPI`; values are printed in the cells up
    to 16 layers a side.
    """
    matrix = cka_matrix_from_table(table)
    layers_a, layers_b = matrix.shape
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    cell = float(np.clip(6.0 / max(layers_a, layers_b), 0.25, 0.8))
    size = (max(MIN_FIGURE_WIDTH_IN, cell * layers_b + 3.0), max(4.5, cell * layers_a + 1.8))
    figure = Figure(figsize=size, dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    image = axis.imshow(matrix, origin="lower", vmin=0.0, vmax=1.0, cmap="magma", aspect="auto")
    if max(layers_a, layers_b) <= _MAX_ANNOTATED_LAYERS:
        fontsize = float(np.clip(cell * 14.0, 6.0, 10.0))
        for (i, j), value in np.ndenumerate(matrix):
            if np.isfinite(value):
                axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=fontsize,
                          color="black" if value > 0.6 else "white")
    axis.set(xlabel=f"{model_b} {LAYER_LABEL}", ylabel=f"{model_a} {LAYER_LABEL}",
             title=f"CKA: {model_a} vs {model_b}", xticks=_layer_ticks(layers_b), yticks=_layer_ticks(layers_a))
    ids_a, ids_b = _layer_ids(table, "layer_a"), _layer_ids(table, "layer_b")
    axis.set_xticklabels([str(ids_b[i]) for i in _layer_ticks(layers_b)])
    axis.set_yticklabels([str(ids_a[i]) for i in _layer_ticks(layers_a)])
    figure.colorbar(image, ax=axis, label=f"{table['estimator'].iloc[0]} CKA")
    return figure


def heatmap_plotly(table: pd.DataFrame) -> go.Figure:
    """The same heatmap for kedro-viz previews, ticked at whole layers, with the CI on hover."""
    matrix = cka_matrix_from_table(table)
    low, high = _pivot(table, "ci_low"), _pivot(table, "ci_high")
    model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
    layers_a, layers_b = matrix.shape
    ids_a, ids_b = _layer_ids(table, "layer_a"), _layer_ids(table, "layer_b")
    grid_a, grid_b = np.meshgrid(ids_a, ids_b, indexing="ij")
    figure = go.Figure(go.Heatmap(z=matrix, x=list(range(layers_b)), y=list(range(layers_a)), zmin=0, zmax=1,
                                  colorscale="Magma", customdata=np.dstack([low, high, grid_a, grid_b]),
                                  hovertemplate="a layer %{customdata[2]}, b layer %{customdata[3]}<br>CKA %{z:.3f}"
                                                "<br>CI [%{customdata[0]:.3f}, %{customdata[1]:.3f}]<extra></extra>"))
    figure.update_layout(title=f"CKA: {model_a} vs {model_b}")
    ticks_a, ticks_b = _layer_ticks(layers_a), _layer_ticks(layers_b)
    figure.update_xaxes(title=f"{model_b} {LAYER_LABEL}", tickmode="array", tickvals=ticks_b,
                        ticktext=[str(ids_b[i]) for i in ticks_b])
    figure.update_yaxes(title=f"{model_a} {LAYER_LABEL}", tickmode="array", tickvals=ticks_a,
                        ticktext=[str(ids_a[i]) for i in ticks_a])
    return figure


def distance_table(tables: Sequence[pd.DataFrame], skip_constant_layers: bool | None = None) -> pd.DataFrame:
    """One row per compared pair: layers, :func:`pair_summary` (means with their layer counts), tokens."""
    rows = []
    for table in tables:
        rows.append({"model_a": table["model_a"].iloc[0], "model_b": table["model_b"].iloc[0],
                     "layers_a": int(table["layer_a"].max()) + 1, "layers_b": int(table["layer_b"].max()) + 1,
                     **pair_summary(table, skip_constant_layers), "n_tokens": int(table["n_tokens"].iloc[0])})
    columns = ["model_a", "model_b", "layers_a", "layers_b", *SUMMARY_KEYS, "n_tokens"]
    distances = pd.DataFrame(rows, columns=columns)
    return distances.astype({"n_matched_layers": "int64", "n_finite_layers": "int64"})


#: 40 distinct (line style, colour) combinations: the 10 tab10 colours solid, then dashed, …
DISTINCT_LINES = cycler(linestyle=["-", "--", "-.", ":"]) * cycler(color=list(matplotlib.colormaps["tab10"].colors))


def group_curves_figure(curves: pd.DataFrame, value_range: tuple[float, float] = (0.0, 1.0)) -> Figure:
    """Per-layer CKA curves with confidence bands, one line per group pair (Brown et al. figs 2b, 8).

    The y axis spans ``value_range`` (the estimator's CKA range, extended below 0 only when
    the data go there).
    """
    figure = Figure(figsize=(MIN_FIGURE_WIDTH_IN, 4.5), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    if curves.empty:
        axis.text(0.5, 0.5, "no between-model pairs with group labels", ha="center", va="center")
    axis.set_prop_cycle(DISTINCT_LINES)
    for (group_a, group_b), curve in curves.groupby(["group_a", "group_b"]):
        curve = curve.sort_values("relative_depth")
        line, = axis.plot(curve["relative_depth"], curve["mean"], marker="o", label=f"{group_a} vs {group_b}")
        axis.fill_between(curve["relative_depth"], curve["ci_low"].astype(float), curve["ci_high"].astype(float),
                          color=line.get_color(), alpha=0.2)
    values = curves[["mean", "ci_low"]].to_numpy(dtype=float) if not curves.empty else np.zeros(1)
    goes_negative = bool((values[np.isfinite(values)] < 0).any())
    low = value_range[0] if goes_negative else max(value_range[0], 0.0)
    axis.set(xlabel="relative depth (0 = embeddings, 1 = last layer)", ylabel="CKA of matched layers",
             ylim=(low - 0.02, value_range[1] + 0.02), title="CKA by group pair (mean, CI across model pairs)")
    if not curves.empty:
        axis.legend(fontsize=8)
    return figure


def distance_matrix_figure(distances: pd.DataFrame) -> Figure:
    """Models × models arccos distances, the value printed in each cell.

    Colours span the off-diagonal distances only; the diagonal (a model with itself, 0 by
    construction) and pairs that were not compared are drawn grey, not in the colour scale.
    """
    models = list(dict.fromkeys([*distances["model_a"], *distances["model_b"]]))
    position = {model: i for i, model in enumerate(models)}
    matrix = np.full((len(models), len(models)), np.nan)
    for row in distances.itertuples():
        matrix[position[row.model_a], position[row.model_b]] = row.arccos_distance
        matrix[position[row.model_b], position[row.model_a]] = row.arccos_distance
    diagonal = np.eye(len(models), dtype=bool)
    shown = np.ma.masked_array(matrix, mask=diagonal | ~np.isfinite(matrix))
    off_diagonal = matrix[~diagonal & np.isfinite(matrix)]
    vmin, vmax = (float(off_diagonal.min()), float(off_diagonal.max())) if off_diagonal.size else (0.0, 1.0)
    if vmax <= vmin:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    side = max(MIN_FIGURE_WIDTH_IN, 2.8 + 0.6 * len(models))
    figure = Figure(figsize=(side + 1.2, side), dpi=FIGURE_DPI, layout="constrained")
    axis = figure.subplots()
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.85")
    image = axis.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax)
    fontsize = 9 if len(models) <= 12 else 7
    for (i, j), value in np.ndenumerate(matrix):
        if np.isfinite(value):
            grey = bool(shown.mask[i, j])
            bright = not grey and (value - vmin) / (vmax - vmin) > 0.6
            axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=fontsize,
                      color="black" if grey or bright else "white")
    axis.set(xticks=range(len(models)), yticks=range(len(models)), title="arccos-CKA distance between models")
    axis.set_xticklabels(models, rotation=60, ha="right", fontsize=8)
    axis.set_yticklabels(models, fontsize=8)
    figure.colorbar(image, ax=axis, label="sqrt(Σ arccos(CKA)²) over matched layers (diagonal: grey)")
    return figure


def resolve_pooling(settings: CKASettings, index_a: pd.DataFrame, index_b: pd.DataFrame) -> CKASettings:
    """``pooling: auto`` made concrete for one pair: ``token`` when the two index tables list the same
    token ids in the same order (same tokenizer on the same texts, e.g. a model with itself or two zoo
    models), else ``word``. Other poolings are returned unchanged."""
    if settings.pooling != AUTO_POOLING:
        return settings
    same_tokens = len(index_a) == len(index_b) and np.array_equal(index_a["token_id"].to_numpy(),
                                                                  index_b["token_id"].to_numpy())
    return dataclasses.replace(settings, pooling="token" if same_tokens else "word")
