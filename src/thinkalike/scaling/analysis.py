"""CKA across a width/depth family of models (Brown et al. 2023 §5, figs. 3, 9, 10, table 1), from the ``cka``
pipeline's tables; no Kedro (the figure: :mod:`thinkalike.scaling.figures`; which models form the family:
:mod:`thinkalike.scaling.membership`).

What is measured, for a family ``F`` (sizes, smallest first) and optional twins (an off-trend member ``o`` and a
model equal to it in all but its head dimension, on the family's trend):

* **architecture** (table 1): width, blocks, heads, head dimension, rotary dimensions and the non-embedding
  parameter count ``L · (4 d² + 2 d d_mlp)``; a member is *off-trend* when its head dimension differs from the
  family's most common one;
* **early-layer similarity across scale** (fig. 3): for every pair of members and each relative depth ``δ`` of
  ``early_depths``, the CKA (with the pipeline's bootstrap interval) of layers ``round(δ L_a)`` and
  ``round(δ L_b)``, beside the same pair's mean CKA over the intermediate band;
* **block structure**: each member's intra-model CKA matrix segmented into contiguous blocks
  (:func:`thinkalike.measures.blocks.block_stability`, over the minibatches' own matrices), and each pair's
  inter-model matrix into matched blocks (:func:`thinkalike.measures.blocks.cosegment_blocks`: a's t-th block
  with b's, bootstrapped over ``pair_resamples`` resamples — each pair's programme costs about ``n_a n_b`` times a
  member's);
* **intra-model similarity vs scale** (fig. 10): each member's mean off-diagonal intra-model CKA, and its
  Spearman correlation with the parameter count;
* **the outlier** (fig. 9): each member's mean intermediate-band CKA (:func:`~thinkalike.measures.scaling_summaries.
  depth_band_mean`) against every other member, its robust z-score across the family, the members flagged;
* **the cause**: the off-trend member against its twin — the same statistic for both, against the same other
  members, each one's z-score in the family (the twin in its sibling's place), and the CKA between the two.

The findings of the experiments report (``claims_scaling``) state each answer as claims beside the paper's, with a
verdict computed from the numbers (early layers: *reproduced* when every pair's matched early-layer CKA exceeds the
pairs' mean intermediate-band CKA, *inconclusive* when only the mean over pairs does, else *not reproduced*).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from thinkalike.cka.compute import cka_matrix_from_table
from thinkalike.measures.blocks import (
    CoSegmentation,
    Segmentation,
    best_contrast,
    block_stability,
    layer_order_null,
)
from thinkalike.measures.scaling_summaries import (
    OUTLIER_Z,
    depth_band_mean,
    mean_off_diagonal,
    relative_depth_layers,
    robust_z,
)

MEMBER_COLUMNS = [
    "model",
    "role",
    "d_model",
    "n_layers",
    "n_heads",
    "d_head",
    "rotary_dims",
    "d_mlp",
    "n_parameters",
    "off_trend",
    "intra_mean",
    "band_mean_vs_others",
    "robust_z",
    "outlier",
    "blocks",
    "n_blocks",
    "block_within",
    "block_between",
    "block_same_fraction",
    "block_contrast",
    "block_contrast_null",
]
PAIR_COLUMNS = [
    "model_a",
    "model_b",
    "relative_depth",
    "layer_a",
    "layer_b",
    "cka",
    "ci_low",
    "ci_high",
    "band_mean",
    "blocks_a",
    "blocks_b",
    "n_blocks",
    "block_within",
    "block_between",
    "block_same_fraction",
    "block_contrast",
]


class ScalingConfigError(ValueError):
    """A ``scaling`` setting or input that cannot be analysed; the message names it."""


@dataclass(frozen=True)
class Architecture:
    """One model's shape (table 1)."""

    d_model: int
    n_layers: int
    n_heads: int
    d_head: int
    rotary_dims: int
    d_mlp: int

    @property
    def n_parameters(self) -> int:
        """Non-embedding parameters ``L · (4 d² + 2 d d_mlp)`` (attention and MLP weights, no biases or norms)."""
        return self.n_layers * (4 * self.d_model**2 + 2 * self.d_model * self.d_mlp)


def architecture_of(name: str, entry: Mapping[str, Any]) -> Architecture:
    """The shape of a zoo model from its ``zoo.models`` entry (``hf`` GPT-NeoX or ``bridge``), or of any model
    from a ``scaling.architectures`` entry (keys d_model, n_layers, n_heads, d_head, rotary_dims, d_mlp)."""
    arch = dict(entry.get("architecture", entry))
    try:
        if "hidden_size" in arch:
            d_model, heads = int(arch["hidden_size"]), int(arch["num_attention_heads"])
            d_head = d_model // heads
            return Architecture(
                d_model,
                int(arch["num_hidden_layers"]),
                heads,
                d_head,
                int(d_head * float(arch.get("rotary_pct", 0.25))),
                int(arch.get("intermediate_size") or 4 * d_model),
            )
        d_model, heads = int(arch["d_model"]), int(arch["n_heads"])
        d_head = int(arch.get("d_head") or d_model // heads)
        rotary = arch.get("rotary_dims")
        if rotary is None:
            rotary = d_head if arch.get("positional_embedding_type") == "rotary" else 0
        return Architecture(
            d_model, int(arch["n_layers"]), heads, d_head, int(rotary), int(arch.get("d_mlp") or 4 * d_model)
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ScalingConfigError(
            f"scaling: cannot read the architecture of {name!r} ({error!r}); give it in "
            "scaling.architectures (d_model, n_layers, n_heads, d_head, rotary_dims, d_mlp)"
        ) from error


@dataclass(frozen=True)
class ScalingSettings:
    """``early_depths``: relative depths compared across members; ``band``: the intermediate band ``[low, high]``;
    ``max_blocks``, ``min_contrast``, ``n_resamples``, ``seed``: the block segmentation and its bootstrap
    (``pair_resamples`` resamples for the matched blocks of every pair); ``null_permutations``: random layer orders
    of each member's matrix for the contrast's null (:func:`~thinkalike.measures.blocks.layer_order_null`);
    ``outlier_z``: the robust z beyond which a member is flagged."""

    early_depths: tuple[float, ...] = (0.0, 0.25)
    band: tuple[float, float] = (0.25, 0.75)
    max_blocks: int = 4
    min_contrast: float = 0.1
    n_resamples: int = 200
    pair_resamples: int = 20
    null_permutations: int = 200
    seed: int = 0
    outlier_z: float = OUTLIER_Z

    def __post_init__(self) -> None:
        if not self.early_depths or any(not 0.0 <= float(d) <= 1.0 for d in self.early_depths):
            raise ScalingConfigError(
                f"scaling.early_depths must be relative depths in [0, 1], got {list(self.early_depths)}"
            )
        if len(self.band) != 2 or not 0.0 <= self.band[0] <= self.band[1] <= 1.0:
            raise ScalingConfigError(
                f"scaling.band must be [low, high] with 0 <= low <= high <= 1, got {list(self.band)}"
            )
        if (
            int(self.max_blocks) < 2
            or min(int(self.n_resamples), int(self.pair_resamples), int(self.null_permutations)) < 1
            or not self.outlier_z > 0
        ):
            raise ScalingConfigError(
                f"scaling: max_blocks must be >= 2, n_resamples, pair_resamples and null_permutations >= 1 and "
                f"outlier_z > 0, got {self.max_blocks}, {self.n_resamples}, "
                f"{self.pair_resamples}, {self.null_permutations}, {self.outlier_z}"
            )


@dataclass
class ScalingResult:
    """The tables of a family analysis and its answers (``summary``: JSON-serialisable numbers)."""

    members: pd.DataFrame
    pairs: pd.DataFrame
    intra: dict[str, np.ndarray] = field(default_factory=dict)
    boundaries: dict[str, list[int]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def _matrix(tables: Mapping[tuple[str, str], pd.DataFrame], a: str, b: str) -> tuple[np.ndarray, pd.DataFrame]:
    """The CKA matrix of ``a`` (rows) against ``b`` (columns), from whichever order the pair was computed in."""
    if (a, b) in tables:
        table = tables[(a, b)]
        return cka_matrix_from_table(table), table
    if (b, a) in tables:
        table = tables[(b, a)]
        return cka_matrix_from_table(table).T, table.rename(columns={"layer_a": "layer_b", "layer_b": "layer_a"})
    raise ScalingConfigError(
        f"scaling: no CKA table of {a!r} with {b!r} (the cka pipeline computes the family's pairs: run it first)"
    )


def _batch_matrices(table: pd.DataFrame) -> list[np.ndarray]:
    """The table's per-minibatch matrices (``batch_cka``), ``(L_a, L_b)`` each, model a's layers as rows."""
    ordered = table.sort_values(["layer_a", "layer_b"])
    n_a, n_b = int(ordered["layer_a"].nunique()), int(ordered["layer_b"].nunique())
    values = np.stack([np.asarray(v, dtype=np.float64) for v in ordered["batch_cka"]])
    return list(values.T.reshape(-1, n_a, n_b))


def _blocks_text(blocks: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{a}–{b}" for a, b in blocks)


def _model_blocks(table: pd.DataFrame, n_layers: int, settings: ScalingSettings) -> tuple[list[int], dict[str, Any]]:
    """One model's block structure: its boundaries and its member-table columns (the segmentation of the batches'
    mean, its stability over resamples, and the best contrast over splits whether structured or not)."""
    batches = _batch_matrices(table)
    most = min(settings.max_blocks, n_layers)
    stability = block_stability(batches, settings.n_resamples, settings.seed, most, settings.min_contrast)
    segmentation = stability.segmentation
    assert isinstance(segmentation, Segmentation)  # one model's matrix (matched=False)
    return list(segmentation.boundaries), {
        "blocks": _blocks_text(segmentation.blocks),
        "n_blocks": len(segmentation.blocks) if segmentation.structured else 1,
        "block_within": segmentation.within,
        "block_between": segmentation.between,
        "block_same_fraction": stability.same_blocks,
        "block_contrast": best_contrast(np.mean(batches, axis=0), most),
        "block_contrast_null": float(
            np.mean(layer_order_null(np.mean(batches, axis=0), most, settings.null_permutations, settings.seed))
        ),
    }


def _pair_blocks(table: pd.DataFrame, shape: tuple[int, ...], settings: ScalingSettings) -> dict[str, Any]:
    """Two models' matched blocks: the pair-table columns (as :func:`_model_blocks`, for the co-segmentation)."""
    batches = _batch_matrices(table)
    most = min(settings.max_blocks, *shape)
    matched = block_stability(
        batches, settings.pair_resamples, settings.seed, most, settings.min_contrast, matched=True
    )
    found = matched.segmentation
    assert isinstance(found, CoSegmentation)  # two models' matrix (matched=True)
    return {
        "blocks_a": _blocks_text(found.blocks_a),
        "blocks_b": _blocks_text(found.blocks_b),
        "n_blocks": len(found.blocks_a) if found.structured else 1,
        "block_within": found.within,
        "block_between": found.between,
        "block_same_fraction": matched.same_blocks,
        "block_contrast": best_contrast(np.mean(batches, axis=0), most, matched=True),
    }


@dataclass(frozen=True)
class _ModelStats:
    """Per model of a family analysis: its intra-model CKA matrix and block columns (members and twins), its mean
    intermediate-band CKA against the other members and its robust z-score (members only)."""

    intra: dict[str, np.ndarray]
    block_rows: dict[str, dict[str, Any]]
    against_others: dict[str, float]
    z: dict[str, float]


def analyse_family(
    tables: Mapping[tuple[str, str], pd.DataFrame],
    family: Sequence[str],
    architectures: Mapping[str, Architecture],
    twins: Mapping[str, str],
    settings: ScalingSettings,
) -> ScalingResult:
    """The family analysis of the module docstring. ``tables``: CKA long tables keyed by ``(model_a, model_b)``
    (every pair of ``family`` and of each twin with the family, and each model with itself); ``twins``:
    ``{off-trend member: its on-trend twin}``."""
    family = list(family)
    _check_family(family, architectures, twins, settings)
    head_dims = [architectures[m].d_head for m in family]
    trend_head_dim = max(set(head_dims), key=head_dims.count)
    everyone = family + list(twins.values())

    intra: dict[str, np.ndarray] = {}
    boundaries: dict[str, list[int]] = {}
    block_rows: dict[str, dict[str, Any]] = {}
    for model in everyone:
        matrix, table = _matrix(tables, model, model)
        intra[model] = matrix
        boundaries[model], block_rows[model] = _model_blocks(table, len(matrix), settings)

    low, high = settings.band

    def band(a: str, b: str) -> float:
        return depth_band_mean(_matrix(tables, a, b)[0], low, high)

    pairs = _pair_table(tables, everyone, architectures, settings)
    against_others = {m: float(np.mean([band(m, o) for o in family if o != m])) for m in family}
    stats = _ModelStats(intra, block_rows, against_others, robust_z(against_others))
    twin_models = set(twins.values())
    members = pd.DataFrame(
        [
            _member_row(model, architectures[model], model in twin_models, trend_head_dim, stats, settings)
            for model in everyone
        ],
        columns=MEMBER_COLUMNS,
    )
    summary = {
        **_family_summary(family, int(trend_head_dim), members, pairs, stats, settings),
        "twins": [_twin_summary(odd, twin, family, architectures, band, settings) for odd, twin in twins.items()],
    }
    return ScalingResult(members, pairs, intra, boundaries, summary)


def _check_family(
    family: list[str], architectures: Mapping[str, Architecture], twins: Mapping[str, str], settings: ScalingSettings
) -> None:
    """:class:`ScalingConfigError` for a family of fewer than 3 members, a twin that is not an off-trend member's
    outside the family, or an intermediate band that holds no layer of a member or twin."""
    if len(family) < 3:
        raise ScalingConfigError(f"scaling: a family needs at least 3 members, got {family}")
    for odd, twin in twins.items():
        if odd not in family or twin in family:
            raise ScalingConfigError(
                f"scaling.twins: {odd!r} must be a family member and {twin!r} not one (family: {family})"
            )
    low, high = settings.band
    for model in [*family, *twins.values()]:
        depths = np.arange(architectures[model].n_layers + 1) / architectures[model].n_layers
        if not ((depths >= low - 1e-12) & (depths <= high + 1e-12)).any():
            raise ScalingConfigError(
                f"scaling.band [{low}, {high}] holds no layer of {model!r} "
                f"({architectures[model].n_layers} blocks: relative depths "
                f"{[round(float(d), 3) for d in depths]}); widen the band"
            )


def _pair_table(
    tables: Mapping[tuple[str, str], pd.DataFrame],
    everyone: Sequence[str],
    architectures: Mapping[str, Architecture],
    settings: ScalingSettings,
) -> pd.DataFrame:
    """The pair table (:data:`PAIR_COLUMNS`): for every pair of ``everyone`` (in order) and each early relative
    depth, the CKA of the matched layers with its interval, beside the pair's band mean and matched blocks."""
    low, high = settings.band
    pair_rows = []
    for i, a in enumerate(everyone):
        for b in everyone[i + 1 :]:
            matrix, table = _matrix(tables, a, b)
            cells = table.set_index(["layer_a", "layer_b"])
            band_mean = depth_band_mean(matrix, low, high)
            pair_blocks = _pair_blocks(table, matrix.shape, settings)
            for depth in settings.early_depths:
                layer_a = relative_depth_layers(architectures[a].n_layers, [depth])[0]
                layer_b = relative_depth_layers(architectures[b].n_layers, [depth])[0]
                cell = cells.loc[(layer_a, layer_b)]
                pair_rows.append(
                    {
                        "model_a": a,
                        "model_b": b,
                        "relative_depth": float(depth),
                        "layer_a": layer_a,
                        "layer_b": layer_b,
                        "cka": float(cell["cka"]),
                        "ci_low": float(cell["ci_low"]),
                        "ci_high": float(cell["ci_high"]),
                        "band_mean": band_mean,
                        **pair_blocks,
                    }
                )
    return pd.DataFrame(pair_rows, columns=PAIR_COLUMNS)


def _member_row(
    model: str,
    arch: Architecture,
    is_twin: bool,
    trend_head_dim: int,
    stats: _ModelStats,
    settings: ScalingSettings,
) -> dict[str, Any]:
    """One model's row of the member table (:data:`MEMBER_COLUMNS`): its architecture, whether it is off-trend,
    its intra-model and band statistics, whether it is an outlier (members only) and its block columns."""
    z = stats.z.get(model)
    return {
        "model": model,
        "role": "twin" if is_twin else "member",
        **{k: getattr(arch, k) for k in ("d_model", "n_layers", "n_heads", "d_head", "rotary_dims", "d_mlp")},
        "n_parameters": arch.n_parameters,
        "off_trend": arch.d_head != trend_head_dim,
        "intra_mean": mean_off_diagonal(stats.intra[model]),
        "band_mean_vs_others": stats.against_others.get(model, np.nan),
        "robust_z": np.nan if z is None else z,
        "outlier": bool(abs(0.0 if z is None else z) > settings.outlier_z),
        **stats.block_rows[model],
    }


def _family_summary(
    family: list[str],
    trend_head_dim: int,
    members: pd.DataFrame,
    pairs: pd.DataFrame,
    stats: _ModelStats,
    settings: ScalingSettings,
) -> dict[str, Any]:
    """The summary's answers but the twins': the early-layer CKA across the members' pairs, the intra-model trend
    with size, the members' and the member pairs' block structure, the outliers."""
    low, high = settings.band
    on_family = members[members["role"] == "member"]
    rho = spearmanr(on_family["n_parameters"], on_family["intra_mean"]).statistic if len(on_family) > 2 else np.nan
    early = pairs[pairs["model_a"].isin(family) & pairs["model_b"].isin(family)]
    member_pairs = early.drop_duplicates(["model_a", "model_b"])
    block_rows, z = stats.block_rows, stats.z
    return {
        "family": family,
        "trend_head_dim": trend_head_dim,
        "band": [low, high],
        "early": {
            str(depth): {
                "mean": float(group["cka"].mean()),
                "min": float(group["cka"].min()),
                "max": float(group["cka"].max()),
            }
            for depth, group in early.groupby("relative_depth")
        },
        "band_mean_between_members": float(member_pairs["band_mean"].mean()),
        "intra_vs_size_spearman": float(rho),
        "intra_mean": {m: float(v) for m, v in zip(on_family["model"], on_family["intra_mean"])},
        "structured_members": [m for m in family if block_rows[m]["n_blocks"] > 1],
        "min_contrast": float(settings.min_contrast),
        "block_contrast": {m: block_rows[m]["block_contrast"] for m in family},
        "block_contrast_null": {m: block_rows[m]["block_contrast_null"] for m in family},
        "pair_block_contrast": {
            f"{a}–{b}": contrast
            for a, b, contrast in member_pairs[["model_a", "model_b", "block_contrast"]].itertuples(index=False)
        },
        "structured_pairs": [
            f"{a}–{b}" for a, b, n in member_pairs[["model_a", "model_b", "n_blocks"]].itertuples(index=False) if n > 1
        ],
        "n_member_pairs": int(len(member_pairs)),
        "outliers": [m for m in family if abs(z[m]) > settings.outlier_z],
        "robust_z": {m: float(v) for m, v in z.items()},
    }


def _twin_summary(
    odd: str,
    twin: str,
    family: Sequence[str],
    architectures: Mapping[str, Architecture],
    band,
    settings: ScalingSettings,
) -> dict[str, Any]:
    """The off-trend member and its twin against the same other members (the cause of the module docstring)."""
    others = [m for m in family if m != odd]
    odd_value = float(np.mean([band(odd, o) for o in others]))
    twin_value = float(np.mean([band(twin, o) for o in others]))
    with_odd = {m: float(np.mean([band(m, o) for o in family if o != m])) for m in family}
    with_twin = {
        (twin if m == odd else m): float(
            np.mean([band(twin if m == odd else m, twin if o == odd else o) for o in family if o != m])
        )
        for m in family
    }
    z_odd, z_twin = robust_z(with_odd)[odd], robust_z(with_twin)[twin]
    return {
        "off_trend": odd,
        "twin": twin,
        "d_head_off_trend": architectures[odd].d_head,
        "d_head_twin": architectures[twin].d_head,
        "band_mean_off_trend": odd_value,
        "band_mean_twin": twin_value,
        "difference": twin_value - odd_value,
        "z_off_trend": float(z_odd),
        "z_twin": float(z_twin),
        "off_trend_flagged": bool(abs(z_odd) > settings.outlier_z),
        "twin_flagged": bool(abs(z_twin) > settings.outlier_z),
        "band_mean_off_trend_vs_twin": band(odd, twin),
    }


def scaling_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """MLflow metrics of a summary: ``scaling.intra_vs_size_spearman``, ``scaling.intra_mean.<m>``,
    ``scaling.robust_z.<m>``, ``scaling.early_<depth>_mean`` and per twin ``scaling.twin.<m>.difference`` /
    ``z_off_trend`` / ``z_twin`` (finite values only)."""
    metrics = {
        "scaling.intra_vs_size_spearman": summary.get("intra_vs_size_spearman"),
        "scaling.band_mean_between_members": summary.get("band_mean_between_members"),
    }
    metrics.update({f"scaling.intra_mean.{m}": v for m, v in (summary.get("intra_mean") or {}).items()})
    metrics.update({f"scaling.robust_z.{m}": v for m, v in (summary.get("robust_z") or {}).items()})
    metrics.update({f"scaling.early_{depth}_mean": v["mean"] for depth, v in (summary.get("early") or {}).items()})
    for twin in summary.get("twins") or []:
        for key in ("difference", "z_off_trend", "z_twin"):
            metrics[f"scaling.twin.{twin['off_trend']}.{key}"] = twin[key]
    return {
        key: float(value) for key, value in metrics.items() if isinstance(value, (int, float)) and np.isfinite(value)
    }
