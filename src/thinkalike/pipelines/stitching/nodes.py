"""Thin nodes of the ``stitching`` pipeline: every configured stitch of one ordered model pair, then a summary.

One node per ordered pair ``f → g`` (namespace ``stitch_<f>__<g>``) loads both zoo models, splits
the held-out token sequences into disjoint training and evaluation sets
(:func:`~thinkalike.stitching.split_tokens`) and runs :func:`~thinkalike.stitching.stitch` for
every layer pair of the grid and every kind. Identity stitching needs equal widths: it is left
out (logged) for pairs whose widths differ. ``summarise_stitching`` concatenates the pairs' tables
and curves and draws the penalty figure.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from thinkalike.models.handle import ModelHandle, default_device
from thinkalike.models.sources import load_model
from thinkalike.pipelines.stitching.figure import penalty_figure
from thinkalike.pipelines.stitching.plan import layer_grid
from thinkalike.stitching import ROW_FIELDS, StitchSettings, TokenSplit, split_tokens, stitch

logger = logging.getLogger(__name__)

#: :meth:`StitchResult.row` fields renamed for the penalty table.
RENAMED = {"f": "model_f", "g": "model_g", "kind": "stitch", "stitched_loss": "loss", "penalty_ci_low": "ci_low",
           "penalty_ci_high": "ci_high"}

#: Leading columns of the penalty table; the remaining :data:`ROW_FIELDS` follow.
TABLE_LEAD = ["model_f", "layer_f", "model_g", "layer_g", "stitch", "loss", "ci_low", "ci_high", "g_loss", "f_loss",
              "penalty", "steps", "train_tokens", "eval_tokens"]
TABLE_COLUMNS = TABLE_LEAD + [RENAMED.get(field, field) for field in ROW_FIELDS
                              if RENAMED.get(field, field) not in TABLE_LEAD]


def zoo_handle(model_name: str, weights: dict[str, torch.Tensor], config: dict[str, Any], tokenizer,
               stitching: dict[str, Any]) -> ModelHandle:
    """A zoo model as a handle on ``stitching.device`` (null: CUDA when present, else CPU)."""
    return load_model(f"zoo:{config['name']}", name=model_name, zoo_artifacts={config["name"]: (config, weights)},
                      tokenizer=tokenizer, device=default_device(stitching.get("device")))


def token_splits(sequences: dict[str, np.ndarray], stitching: dict[str, Any]) -> tuple[TokenSplit, TokenSplit]:
    """Disjoint (train, eval) splits of the first ``stitching.max_sequences`` sequences (all when null):
    ``stitching.eval_fraction`` of the distinct sequences, drawn with ``stitching.split_seed``, for evaluation."""
    input_ids = np.asarray(sequences["input_ids"])
    mask = sequences.get("attention_mask")
    limit = stitching.get("max_sequences")
    if limit is not None:
        input_ids = input_ids[:int(limit)]
        mask = None if mask is None else np.asarray(mask)[:int(limit)]
    return split_tokens(input_ids, mask, eval_fraction=float(stitching.get("eval_fraction", 0.2)),
                        seed=int(stitching.get("split_seed", 0)))


def table_row(row: dict[str, Any], train: TokenSplit, evaluation: TokenSplit) -> dict[str, Any]:
    """A :meth:`StitchResult.row` in the penalty table's columns, with the real-token counts of both splits."""
    renamed = {RENAMED.get(key, key): value for key, value in row.items()}
    renamed["train_tokens"] = int(train.attention_mask.sum())
    renamed["eval_tokens"] = int(evaluation.attention_mask.sum())
    return {column: renamed[column] for column in TABLE_COLUMNS}


def stitch_models(f: ModelHandle, g: ModelHandle, train: TokenSplit, evaluation: TokenSplit,
                  stitching: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (layer pair, kind) of the grid for f → g: the penalty table and the learning curves."""
    settings = StitchSettings.from_dict(stitching.get("settings"))
    kinds = list(stitching.get("kinds") or ["affine_ln"])
    if "identity" in kinds and f.d_model != g.d_model:
        logger.info("stitching %s -> %s: no identity stitch (d_model %d vs %d)", f.name, g.name, f.d_model, g.d_model)
        kinds.remove("identity")
    rows, curves = [], []
    for layer_f, layer_g in layer_grid(stitching.get("layers", "diagonal"), f.n_layers, g.n_layers):
        for kind in kinds:
            result = stitch(f, g, layer_f, layer_g, kind, train, evaluation, settings,
                            progress=bool(stitching.get("progress", False)))
            logger.info("stitch %s@%d -> %s@%d (%s): penalty %.4f [%.4f, %.4f] in %.1f s", f.name, layer_f, g.name,
                        layer_g, kind, result.penalty, result.evaluation.penalty_ci_low,
                        result.evaluation.penalty_ci_high, result.seconds)
            rows.append(table_row(result.row(), train, evaluation))
            if len(result.curve):
                curves.append(result.curve)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS), _concat_curves(curves)


def _concat_curves(curves: list[pd.DataFrame]) -> pd.DataFrame:
    if curves:
        return pd.concat(curves, ignore_index=True)
    return pd.DataFrame({"f": pd.Series(dtype="object"), "layer_f": pd.Series(dtype="int64"),
                         "g": pd.Series(dtype="object"), "layer_g": pd.Series(dtype="int64"),
                         "kind": pd.Series(dtype="object"), "step": pd.Series(dtype="int64")})


def stitch_pair(sequences: dict[str, np.ndarray], tokenizer, weights_f: dict[str, torch.Tensor],
                config_f: dict[str, Any], weights_g: dict[str, torch.Tensor], config_g: dict[str, Any],
                stitching: dict[str, Any], *, model_f: str, model_g: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stitches zoo model ``model_f`` into ``model_g`` at every configured layer pair and kind."""
    f = zoo_handle(model_f, weights_f, config_f, tokenizer, stitching)
    g = zoo_handle(model_g, weights_g, config_g, tokenizer, stitching)
    train, evaluation = token_splits(sequences, stitching)
    return stitch_models(f, g, train, evaluation, stitching)


def stitch_self(sequences: dict[str, np.ndarray], tokenizer, weights: dict[str, torch.Tensor],
                config: dict[str, Any], stitching: dict[str, Any], *, model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The self baseline of zoo model ``model``: f = g = the model (identity penalties are 0 by construction)."""
    handle = zoo_handle(model, weights, config, tokenizer, stitching)
    train, evaluation = token_splits(sequences, stitching)
    return stitch_models(handle, handle, train, evaluation, stitching)


def summarise_stitching(*tables_then_curves: pd.DataFrame, pairs: list[tuple[str, str]]
                        ) -> tuple[pd.DataFrame, pd.DataFrame, Figure]:
    """All ordered pairs' penalty tables and learning curves in one each, and the penalty figure per configured
    pair (f → g, g → f and both self baselines). Inputs: the tables, then the curves, in the same order."""
    half = len(tables_then_curves) // 2
    tables, curves = tables_then_curves[:half], tables_then_curves[half:]
    penalties = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=TABLE_COLUMNS)
    all_curves = _concat_curves([curve for curve in curves if len(curve)])
    return penalties, all_curves, penalty_figure(penalties, pairs)
