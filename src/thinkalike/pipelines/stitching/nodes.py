"""Thin nodes of the ``stitching`` pipeline: every configured stitch of one ordered model pair, then a summary.

One node per ordered pair ``f → g`` (namespace ``models.stitching.<f>__<g>``) loads both zoo models, splits
the held-out token sequences into disjoint training and evaluation sets
(:func:`~thinkalike.stitching.split_indices`) and runs :func:`~thinkalike.stitching.stitch` for
every layer pair of the grid and every kind. With ``stitching.train_source: train_sequences`` φ
trains on the corpus's training sequences (the zoo's training data, many more tokens) instead of
the held-out training part; the evaluation split is the same either way. Identity stitching needs
equal widths: it is left out (logged) for pairs whose widths differ. The whole grid is one
:func:`~thinkalike.stitching.stitch_grid` call (f's features and the models' own losses computed once
per pair; each trained kind trained once per φ seed of ``stitching.phi_seeds``, the seeds in lockstep).
Special tokens are never targets with ``stitching.exclude_special_targets``. The node
saves the trained φ's of every seed (:func:`~thinkalike.stitching.pack_stitches`) and the evaluation
split (with its scored targets) beside its table and curves.

Penalty table: one row per stitch (layers, kind). ``loss``, ``penalty``, ``ci_low`` / ``ci_high`` and the
other single-stitch columns are the first φ seed's (``phi_seed``; seed 0 by default — the numbers a
single stitch always had), its interval the evaluation bootstrap; beside them the seed columns of
:func:`~thinkalike.stitching.seed_summary` (``n_phi_seeds``, ``phi_seeds``, ``penalty_seeds``,
``penalty_seed_mean``, ``penalty_seed_std``, ``penalty_seed_min``, ``penalty_seed_max``: φ's training
variability; ``penalty_seed_std`` NaN for a trained stitch with one seed). Identity stitching trains
nothing: one seed, spread 0. ``n_targets`` is the number of
scored evaluation targets, ``exclude_special_targets`` the rule. MLflow's
``<pair>.<kind>.penalty_<l>_<m>`` metric is the ``penalty`` column (the first seed's), and the
learning-curve histories are the first seed's (:mod:`~thinkalike.pipelines.stitching.mlflow_rules`).

``summarise_stitching`` concatenates the pairs' tables and curves, lists the saved φ's (every seed), and draws
the penalty figure (with the seeds' spread beside the intervals) and every pair's learning curves (and
heatmaps).

The pair nodes' settings are the ``stitching`` section parsed once by the pipeline's builder
(:class:`~thinkalike.pipelines.stitching.schema.StitchingParameters`, bound as ``settings``, where each default is
written); :meth:`~thinkalike.pipelines.stitching.schema.StitchingParameters.stitch_settings` and
:meth:`~thinkalike.pipelines.stitching.schema.StitchingParameters.seeds` hand them to :mod:`thinkalike.stitching`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.figures import dropdown_figure, figure_files
from thinkalike.models.handle import ModelHandle, default_device
from thinkalike.models.sources import load_saved_zoo_model
from thinkalike.pipelines.stitching.plan import layer_grid
from thinkalike.pipelines.stitching.schema import StitchingParameters
from thinkalike.stitching import (
    ROW_FIELDS,
    StitchResult,
    TokenSplit,
    excluded_target_ids,
    group_seeds,
    pack_stitches,
    seed_summary,
    split_indices,
    stitch_grid,
)
from thinkalike.stitching.figures import (
    curves_figure,
    penalty_figure,
    penalty_heatmap,
    penalty_heatmap_plotly,
    penalty_plotly,
)
from thinkalike.stitching.stitcher import scored_targets

logger = logging.getLogger(__name__)

#: :meth:`StitchResult.row` fields renamed for the penalty table.
RENAMED = {
    "f": "model_f",
    "g": "model_g",
    "kind": "stitch",
    "stitched_loss": "loss",
    "penalty_ci_low": "ci_low",
    "penalty_ci_high": "ci_high",
}

#: Leading columns of the penalty table; the remaining :data:`ROW_FIELDS` follow.
TABLE_LEAD = [
    "model_f",
    "layer_f",
    "model_g",
    "layer_g",
    "stitch",
    "loss",
    "ci_low",
    "ci_high",
    "g_loss",
    "f_loss",
    "penalty",
    "steps",
    "train_tokens",
    "eval_tokens",
    "n_targets",
    "exclude_special_targets",
    "penalty_seed_mean",
    "penalty_seed_std",
    "penalty_seed_min",
    "penalty_seed_max",
    "n_phi_seeds",
    "phi_seeds",
    "penalty_seeds",
]
TABLE_COLUMNS = (
    TABLE_LEAD
    + [RENAMED.get(field, field) for field in ROW_FIELDS if RENAMED.get(field, field) not in TABLE_LEAD]
    + ["train_source"]
)


def zoo_handle(
    model_name: str, weights: dict[str, torch.Tensor], config: dict[str, Any], tokenizer, settings: StitchingParameters
) -> ModelHandle:
    """A zoo model as a handle on ``stitching.device`` (null: CUDA when present, else CPU)."""
    return load_saved_zoo_model(weights, config, tokenizer, name=model_name, device=default_device(settings.device))


@dataclass(frozen=True)
class PairSplit:
    """φ's training and evaluation sequences: ``train`` from ``train_source`` (row numbers ``train_ids`` in that
    dataset), ``evaluation`` from the held-out sequences (row numbers ``eval_ids``)."""

    train: TokenSplit
    evaluation: TokenSplit
    train_ids: np.ndarray
    eval_ids: np.ndarray
    train_source: str

    def eval_arrays(self, scored: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The saved evaluation split: its token ids and mask, its rows in ``heldout_sequences``, the training
        rows (in ``train_source``) and, when given, ``scored_targets`` (1 where the token is a scored target:
        :func:`~thinkalike.stitching.stitcher.scored_targets`; its sum is the table's ``n_targets``)."""
        arrays = {
            "input_ids": self.evaluation.input_ids.numpy(),
            "attention_mask": self.evaluation.attention_mask.numpy(),
            "sequence_ids": self.eval_ids.astype(np.int64),
            "train_sequence_ids": self.train_ids.astype(np.int64),
        }
        if scored is not None:
            arrays["scored_targets"] = np.asarray(scored, dtype=np.int64)
        return arrays


def _first(sequences: dict[str, np.ndarray], limit: int | None, what: str) -> TokenSplit:
    input_ids = np.asarray(sequences["input_ids"])
    mask = sequences.get("attention_mask")
    if limit is not None:
        input_ids = input_ids[: int(limit)]
        mask = None if mask is None else np.asarray(mask)[: int(limit)]
    return TokenSplit.of(input_ids, mask, what=what)


def token_splits(
    sequences: dict[str, np.ndarray],
    settings: StitchingParameters,
    training_sequences: dict[str, np.ndarray] | None = None,
) -> PairSplit:
    """The evaluation split: ``stitching.eval_fraction`` of the distinct sequences among the first
    ``stitching.max_sequences`` held-out ones (all when null), drawn with ``stitching.split_seed``; 1: every one of
    them, in order. φ trains on the rest of them (``train_source: heldout``, which needs a fraction below 1) or on
    the first ``stitching.max_train_sequences`` of ``training_sequences`` (``train_source: train_sequences``)."""
    source = settings.train_source
    held = _first(sequences, settings.max_sequences, "held-out sequences")
    if settings.eval_fraction == 1:  # every held-out sequence evaluates (φ trains on the training sequences)
        train_ids, eval_ids = np.arange(0), np.arange(len(held))
    else:
        train_ids, eval_ids = split_indices(held, eval_fraction=settings.eval_fraction, seed=settings.split_seed)
    if source == "heldout":
        train = held.subset(train_ids)
    else:
        if training_sequences is None:
            raise ValueError("stitching.train_source is train_sequences but the node got no training sequences")
        train = _first(training_sequences, settings.max_train_sequences, "training sequences")
        train_ids = np.arange(len(train))
    return PairSplit(train, held.subset(eval_ids), train_ids, eval_ids, source)


def table_row(row: dict[str, Any], split: PairSplit, seeds: dict[str, Any]) -> dict[str, Any]:
    """A :meth:`StitchResult.row` (the first φ seed's) in the penalty table's columns, with the real-token counts
    of both splits and the seed columns ``seeds`` (:func:`~thinkalike.stitching.seed_summary`)."""
    renamed = {RENAMED.get(key, key): value for key, value in row.items()}
    renamed["train_tokens"] = int(split.train.attention_mask.sum())
    renamed["eval_tokens"] = int(split.evaluation.attention_mask.sum())
    renamed["train_source"] = split.train_source
    renamed.update(seeds)
    return {column: renamed[column] for column in TABLE_COLUMNS}


def _log_stitch(seeds: list[StitchResult]) -> None:
    first, summary = seeds[0], seed_summary(seeds)
    logger.info(
        "stitch %s@%d -> %s@%d (%s): penalty %.4f [%.4f, %.4f] on %d targets; %d φ seed(s): %.4f to %.4f; %.1f s",
        first.f,
        first.layer_f,
        first.g,
        first.layer_g,
        first.kind,
        first.penalty,
        first.evaluation.penalty_ci_low,
        first.evaluation.penalty_ci_high,
        first.evaluation.n_targets,
        summary["n_phi_seeds"],
        summary["penalty_seed_min"],
        summary["penalty_seed_max"],
        first.seconds,
    )


def stitch_models(
    f: ModelHandle, g: ModelHandle, split: PairSplit, settings: StitchingParameters
) -> tuple[pd.DataFrame, pd.DataFrame, list[StitchResult]]:
    """Every (layer pair, kind) of the grid for f → g, trained kinds once per φ seed: the penalty table (a row per
    stitch), the learning curves (every seed's) and the results (every seed's)."""
    kinds = list(settings.kinds)
    if "identity" in kinds and f.d_model != g.d_model:
        logger.info("stitching %s -> %s: no identity stitch (d_model %d vs %d)", f.name, g.name, f.d_model, g.d_model)
        kinds.remove("identity")
    grid = [
        (layer_f, layer_g, kind)
        for layer_f, layer_g in layer_grid(settings.layers, f.n_layers, g.n_layers)
        for kind in kinds
    ]
    results = stitch_grid(
        f,
        g,
        grid,
        split.train,
        split.evaluation,
        settings.stitch_settings(),
        phi_seeds=settings.seeds(),
        progress=settings.progress,
        on_stitch=_log_stitch,
    )
    rows = [table_row(group[0].row(), split, seed_summary(group)) for group in group_seeds(results)]
    curves = [result.curve for result in results if len(result.curve)]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS), _concat_curves(curves), results


PairOutputs = tuple[pd.DataFrame, pd.DataFrame, dict[str, torch.Tensor], dict[str, Any], dict[str, np.ndarray]]


def _pair_outputs(f: ModelHandle, g: ModelHandle, split: PairSplit, settings: StitchingParameters) -> PairOutputs:
    """The table, curves, trained φ's (state, config) and evaluation split of f → g."""
    table, curves, results = stitch_models(f, g, split, settings)
    stitch_settings = settings.stitch_settings()
    excluded = excluded_target_ids(f, g, stitch_settings.exclude_special_targets)
    phi_state, phi_config = pack_stitches(results, f.name, g.name, excluded_target_ids=excluded)
    phi_config.update(train_source=split.train_source, eval_source="heldout_sequences")
    scored = scored_targets(f, g, split.evaluation, stitch_settings, special_ids=excluded)
    return table, curves, phi_state, phi_config, split.eval_arrays(scored)


def _concat_curves(curves: list[pd.DataFrame]) -> pd.DataFrame:
    if curves:
        return pd.concat(curves, ignore_index=True)
    return pd.DataFrame(
        {
            "f": pd.Series(dtype="object"),
            "layer_f": pd.Series(dtype="int64"),
            "g": pd.Series(dtype="object"),
            "layer_g": pd.Series(dtype="int64"),
            "kind": pd.Series(dtype="object"),
            "phi_seed": pd.Series(dtype="int64"),
            "step": pd.Series(dtype="int64"),
        }
    )


def stitch_pair(
    sequences: dict[str, np.ndarray],
    tokenizer,
    weights_f: dict[str, torch.Tensor],
    config_f: dict[str, Any],
    weights_g: dict[str, torch.Tensor],
    config_g: dict[str, Any],
    training_sequences: dict[str, np.ndarray] | None = None,
    *,
    settings: StitchingParameters,
    model_f: str,
    model_g: str,
) -> PairOutputs:
    """Stitches zoo model ``model_f`` into ``model_g`` at every configured layer pair and kind."""
    f = zoo_handle(model_f, weights_f, config_f, tokenizer, settings)
    g = zoo_handle(model_g, weights_g, config_g, tokenizer, settings)
    return _pair_outputs(f, g, token_splits(sequences, settings, training_sequences), settings)


def stitch_self(
    sequences: dict[str, np.ndarray],
    tokenizer,
    weights: dict[str, torch.Tensor],
    config: dict[str, Any],
    training_sequences: dict[str, np.ndarray] | None = None,
    *,
    settings: StitchingParameters,
    model: str,
) -> PairOutputs:
    """The self baseline of zoo model ``model``: f = g = the model (identity penalties are 0 by construction)."""
    handle = zoo_handle(model, weights, config, tokenizer, settings)
    return _pair_outputs(handle, handle, token_splits(sequences, settings, training_sequences), settings)


PHI_COLUMNS = [
    "model_f",
    "layer_f",
    "model_g",
    "layer_g",
    "stitch",
    "phi_seed",
    "init",
    "objective",
    "n_parameters",
    "train_source",
    "n_eval_sequences",
    "eval_split_digest",
]


def phi_table(
    phi_state: dict[str, torch.Tensor], phi_config: dict[str, Any], eval_split: dict[str, np.ndarray]
) -> pd.DataFrame:
    """One row per saved φ of an ordered pair (every φ seed): its layers, kind, φ seed, initialisation, objective
    and parameter count
    (the saved tensors' elements), the source of its training tokens, and the evaluation split it was measured on
    (number of sequences, and the first 12 hex digits of the SHA-256 of their ``heldout_sequences`` rows: pairs
    with the same digest were evaluated on the same sequences)."""
    rows = np.ascontiguousarray(np.asarray(eval_split["sequence_ids"], dtype=np.int64))
    digest = hashlib.sha256(rows.tobytes()).hexdigest()[:12]
    records = []
    for key, saved in phi_config.get("stitches", {}).items():
        prefix = f"{key}."
        records.append(
            {
                "model_f": phi_config["f"],
                "layer_f": saved["layer_f"],
                "model_g": phi_config["g"],
                "layer_g": saved["layer_g"],
                "stitch": saved["kind"],
                "phi_seed": int(saved.get("phi_seed", 0)),
                "init": saved.get("init"),
                "objective": saved.get("objective"),
                "n_parameters": sum(
                    int(tensor.numel()) for name, tensor in phi_state.items() if name.startswith(prefix)
                ),
                "train_source": phi_config.get("train_source"),
                "n_eval_sequences": len(rows),
                "eval_split_digest": digest,
            }
        )
    return pd.DataFrame(records, columns=PHI_COLUMNS)


def summarise_stitching(*pair_outputs: Any, pairs: list[tuple[str, str]], names: list[str], heatmaps: bool):
    """All ordered pairs' penalty tables and learning curves in one each, the penalty figure per configured pair
    (f → g, g → f and both self baselines; matplotlib and plotly), the table of saved φ's (:func:`phi_table`) and
    every ordered pair's learning-curve figure (``<f>__<g>.png``); with ``heatmaps`` (``layers: all``) also every
    pair's penalty heatmaps (``<f>__<g>.png``, and one plotly figure with a dropdown of the pairs and kinds).

    ``pair_outputs``: the pairs' (``names``) tables, curves, φ states, φ configs and evaluation splits, each in
    the order of ``names``."""
    count = len(names)
    tables, curves, states, configs, splits = (
        pair_outputs[start : start + count] for start in range(0, 5 * count, count)
    )
    penalties = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=TABLE_COLUMNS)
    all_curves = _concat_curves([curve for curve in curves if len(curve)])
    phis = (
        pd.concat([phi_table(*saved) for saved in zip(states, configs, splits)], ignore_index=True)
        if names
        else pd.DataFrame(columns=PHI_COLUMNS)
    )
    outputs = (
        penalties,
        all_curves,
        penalty_figure(penalties, pairs),
        penalty_plotly(penalties, pairs),
        phis,
        figure_files(dict(zip(names, curves)), curves_figure),
    )
    if not heatmaps:
        return outputs
    by_pair = dict(zip(names, tables))
    by_kind = {
        f"{name} ({kind})": table[table["stitch"] == kind]
        for name, table in by_pair.items()
        for kind in dict.fromkeys(table["stitch"])
    }
    return (
        *outputs,
        figure_files(by_pair, penalty_heatmap),
        dropdown_figure(
            {name: penalty_heatmap_plotly(table) for name, table in by_kind.items()}, "Stitching penalty heatmaps"
        ),
    )
