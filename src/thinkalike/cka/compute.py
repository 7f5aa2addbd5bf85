"""CKA between two models' activation stores, as tables and their summaries (no Kedro).

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

How CKA is estimated: :mod:`thinkalike.cka.settings`; the figures of these tables: :mod:`thinkalike.cka.figures`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from thinkalike.cka.settings import CKASettings
from thinkalike.measures.blocks import best_contrast, layer_order_null, segment_blocks
from thinkalike.measures.cka import CKAAccumulator, CKAResult
from thinkalike.measures.distances import matched_summary
from thinkalike.models.activation_store import ActivationStore
from thinkalike.models.aligned_batches import aligned_minibatches

TABLE_COLUMNS = [
    "model_a",
    "layer_a",
    "model_b",
    "layer_b",
    "cka",
    "ci_low",
    "ci_high",
    "p_value",
    "n_batches",
    "n_tokens",
    "estimator",
    "aggregation",
    "pooling",
    "skip_constant_layers",
    "exclude_special_tokens",
    "batch_cka",
]
SUMMARY_KEYS = ["mean_matched_cka", "arccos_distance", "n_matched_layers", "n_finite_layers"]


def compute_cka(
    store_a: ActivationStore,
    index_a: pd.DataFrame,
    store_b: ActivationStore,
    index_b: pd.DataFrame,
    settings: CKASettings,
    *,
    model_a: str,
    model_b: str,
    device: str | None = None,
) -> CKAResult:
    """Streams aligned minibatches of the two stores through one :class:`CKAAccumulator` on ``device``.

    The stores may be streams kept on their model's device
    (:meth:`~thinkalike.models.activation_store.ActivationStream.kept_on_device`): then each minibatch goes from the
    forward pass to the accumulator on that device, and only the per-minibatch HSIC terms ((La, Lb) float64) reach
    the host. Peak device memory: one extraction batch of each model (``activations.batch_size`` sequences × all
    stored layers), plus the minibatch's centred copies and Gram blocks (:mod:`thinkalike.measures.cka`); nothing
    grows with the number of tokens.
    """
    import torch

    same_model = model_a == model_b
    accumulator = CKAAccumulator(
        len(store_a.layers),
        len(store_b.layers),
        estimator=settings.estimator,
        aggregation=settings.aggregation,
        model_a=model_a,
        model_b=model_b,
        n_permutations=0 if same_model else settings.n_permutations,
        seed=settings.seed,
        skip_constant_layers=settings.skip_constant_layers,
    )
    target = torch.device(device) if device else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    minibatches = aligned_minibatches(
        store_a,
        index_a,
        store_b,
        index_b,
        pooling=settings.pooling,
        batch_tokens=settings.batch_tokens,
        exclude_special_tokens=settings.exclude_special_tokens,
    )
    for acts_a, acts_b in tqdm(minibatches, desc=f"CKA {model_a} vs {model_b}", unit="minibatch", leave=False):
        tensor_a = torch.as_tensor(acts_a).to(target)  # a stream kept on the device is there already: no copy
        accumulator.update(tensor_a, None if same_model else torch.as_tensor(acts_b).to(target))
    if accumulator.n_batches == 0:
        raise ValueError(f"no minibatches to compare for {model_a!r} vs {model_b!r}")
    return accumulator.result()


def cka_long_table(
    result: CKAResult,
    settings: CKASettings,
    layer_ids_a: Sequence[int] | None = None,
    layer_ids_b: Sequence[int] | None = None,
) -> pd.DataFrame:
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
    per_cell = (
        result.n_batches_per_cell
        if result.n_batches_per_cell is not None
        else np.full(result.cka.shape, result.n_batches)
    )
    per_batch = (
        result.batch_cka().reshape(result.n_batches, -1).T
        if result.cross is not None
        else np.zeros((result.cka.size, 0))
    )
    table = pd.DataFrame(
        {
            "model_a": result.model_a,
            "layer_a": grid_a.ravel(),
            "model_b": result.model_b,
            "layer_b": grid_b.ravel(),
            "cka": result.cka.ravel(),
            "ci_low": np.asarray(low).ravel(),
            "ci_high": np.asarray(high).ravel(),
            "p_value": np.asarray(p_values).ravel(),
            "n_batches": np.asarray(per_cell, dtype=np.int64).ravel(),
            "n_tokens": result.n_tokens,
            "estimator": result.estimator,
            "aggregation": result.aggregation,
            "pooling": settings.pooling,
            "skip_constant_layers": bool(result.skip_constant_layers),
            "exclude_special_tokens": bool(settings.exclude_special_tokens),
            "batch_cka": list(per_batch),
        }
    )
    return table[TABLE_COLUMNS]


def layer_matrix(table: pd.DataFrame, column: str) -> np.ndarray:
    """The (La, Lb) matrix of one column of a pair's long table (rows: layers of a, columns: layers of b)."""
    return table.pivot(index="layer_a", columns="layer_b", values=column).sort_index().sort_index(axis=1).to_numpy()


def cka_matrix_from_table(table: pd.DataFrame) -> np.ndarray:
    """The (La, Lb) matrix of a pair's long table."""
    return layer_matrix(table, "cka")


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
    summary = matched_summary(
        cka_matrix_from_table(table),
        skip_undefined=_skips_constant_layers(table, skip_constant_layers),
        label=_pair_label(table),
    )
    return {
        "mean_matched_cka": summary.mean_cka,
        "arccos_distance": summary.distance,
        "n_matched_layers": float(summary.n_matched_layers),
        "n_finite_layers": float(summary.n_finite_layers),
    }


#: Block structure of a model's own layers × layers CKA (Brown et al. §5; :mod:`thinkalike.measures.blocks`): splits
#: of 2 … this many contiguous blocks are searched.
MAX_INTRA_BLOCKS = 6
#: Random layer orders of a model's own matrix for its contrast's null
#: (:func:`thinkalike.measures.blocks.layer_order_null`).
INTRA_NULL_PERMUTATIONS = 200
#: The cells of a pair of two models, which has no intra-model block structure.
NO_BLOCKS: dict[str, float | str] = {"block_contrast": float("nan"), "block_contrast_null": float("nan"), "blocks": ""}


def intra_blocks(table: pd.DataFrame) -> dict[str, float | str]:
    """A model's own CKA matrix cut into blocks: ``block_contrast``, the best split's within − between mean CKA over
    2 … :data:`MAX_INTRA_BLOCKS` blocks (continuous); ``block_contrast_null``, its mean over
    :data:`INTRA_NULL_PERMUTATIONS` random layer orders (seed 0); and ``blocks``, that split's layer runs
    (``"0–3, 4–30"``; ``""`` when its contrast is below :data:`~thinkalike.measures.blocks.DEFAULT_MIN_CONTRAST`: no
    block structure). NaN and ``""`` for fewer than 4 layers or a matrix with a NaN cell."""
    matrix = cka_matrix_from_table(table)
    if matrix.shape[0] < 4 or not np.isfinite(matrix).all():
        return dict(NO_BLOCKS)
    matrix = (matrix + matrix.T) / 2.0  # the unbiased estimator's two triangles agree to round-off
    segmentation = segment_blocks(matrix, MAX_INTRA_BLOCKS)
    runs = ", ".join(f"{first}–{last}" for first, last in segmentation.blocks) if segmentation.structured else ""
    null = layer_order_null(matrix, MAX_INTRA_BLOCKS, INTRA_NULL_PERMUTATIONS, seed=0)
    return {
        "block_contrast": best_contrast(matrix, MAX_INTRA_BLOCKS),
        "block_contrast_null": float(np.mean(null)),
        "blocks": runs,
    }


def distance_table(tables: Sequence[pd.DataFrame], skip_constant_layers: bool | None = None) -> pd.DataFrame:
    """One row per compared pair: layers, :func:`pair_summary` (means with their layer counts), tokens; for a model
    with itself also its :func:`intra_blocks` (NaN and ``""`` for pairs of two models)."""
    rows = []
    for table in tables:
        model_a, model_b = table["model_a"].iloc[0], table["model_b"].iloc[0]
        rows.append(
            {
                "model_a": model_a,
                "model_b": model_b,
                "layers_a": int(table["layer_a"].max()) + 1,
                "layers_b": int(table["layer_b"].max()) + 1,
                **pair_summary(table, skip_constant_layers),
                "n_tokens": int(table["n_tokens"].iloc[0]),
                **(intra_blocks(table) if model_a == model_b else NO_BLOCKS),
            }
        )
    columns = [
        "model_a",
        "model_b",
        "layers_a",
        "layers_b",
        *SUMMARY_KEYS,
        "n_tokens",
        "block_contrast",
        "block_contrast_null",
        "blocks",
    ]
    distances = pd.DataFrame(rows, columns=columns)
    return distances.astype({"n_matched_layers": "int64", "n_finite_layers": "int64"})
