"""Groups, identity stitching and CKA of fine-tuned NLI copies (Brown et al. 2023 §4); no Kedro import.

* Groups (:func:`split_groups`): copies ranked by OOD non-entailed accuracy (the HANS-LO analogue,
  ties broken by name); the top ``k`` are *generalizing*, the bottom ``k`` *heuristic*, the rest
  *middle* (in no group). The spread is ``max − min`` of that accuracy over the copies.
* Identity stitching (:func:`identity_stitch_table`): for copies f ≠ g and every layer l, the classifier
  ``g_{>l} ∘ f_{≤l}`` — g's blocks after l on f's residual stream after l (0 = embeddings) — scored by
  accuracy against g's own: penalty ``A_g − A_stitched`` with a paired bootstrap CI over evaluation
  batches (:func:`thinkalike.stitching.evaluate_stitch_accuracy`).
* Aggregation (:func:`aggregate_stitching`): per evaluation set and layer, the mean penalty over the
  ordered pairs of each relation (within-generalizing, within-heuristic, between: f and g in different
  groups, both directions) with the t interval of the mean across pairs
  (:func:`thinkalike.measures.distances.mean_interval`).
* Token activations for CKA (:func:`token_activations`): every layer's residual stream at the real,
  non-special tokens of the in-distribution test pairs (their CKA tables: :func:`copies_cka_tables`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from thinkalike.cka.compute import cka_long_table
from thinkalike.cka.settings import CKASettings
from thinkalike.language.packing import special_token_ids
from thinkalike.measures.cka import CKAAccumulator
from thinkalike.measures.distances import mean_interval, relative_depth
from thinkalike.models.handle import ModelHandle
from thinkalike.stitching import (
    IdentityStitch,
    TokenSplit,
    check_stitch,
    evaluate_stitch_accuracy,
)
from thinkalike.stitching.data import PreparedSplit
from thinkalike.stitching.evaluate import BatchLosses

if TYPE_CHECKING:
    pass

GENERALIZING, HEURISTIC, MIDDLE = "generalizing", "heuristic", "middle"
RELATIONS: tuple[str, ...] = ("within_generalizing", "within_heuristic", "between")
BASELINE = "heuristic_baseline"  # the lexical-overlap rule's rows in the accuracy table
GROUP_COLUMNS = ["model", "rank", "group", "test_accuracy", "ood_non_entailed_accuracy", "ood_entailed_accuracy"]
STITCH_COLUMNS = [
    "data",
    "model_f",
    "model_g",
    "layer",
    "relative_depth",
    "stitched_accuracy",
    "g_accuracy",
    "penalty",
    "ci_low",
    "ci_high",
    "ci_level",
    "n_sequences",
    "n_batches",
]
STITCH_GROUP_COLUMNS = [
    "data",
    "layer",
    "relative_depth",
    "relation",
    "mean_penalty",
    "ci_low",
    "ci_high",
    "mean_stitched_accuracy",
    "n_pairs",
]


def copy_names(n_copies: int) -> list[str]:
    """``copy_00``, ``copy_01``, … (at least two digits, so names sort in copy order)."""
    width = max(2, len(str(n_copies - 1)))
    return [f"copy_{i:0{width}d}" for i in range(n_copies)]


# --------------------------------------------------------------------------- groups


def accuracy_summary(accuracy: pd.DataFrame) -> pd.DataFrame:
    """One row per model of an :func:`~thinkalike.language.nli.accuracy_table` concatenation: ``test_accuracy``
    (in distribution), ``ood_non_entailed_accuracy`` and ``ood_entailed_accuracy`` (all OOD subcases)."""
    keyed = accuracy.set_index(["split", "subcase", "label"])
    wanted = {
        "test_accuracy": ("test", "all", "all"),
        "ood_non_entailed_accuracy": ("ood", "all", "non_entailed"),
        "ood_entailed_accuracy": ("ood", "all", "entailed"),
    }
    rows = []
    for model, part in keyed.groupby("model", sort=False):
        part = part.droplevel(0) if "model" in part.index.names else part
        rows.append({"model": model, **{name: float(part.loc[key, "accuracy"]) for name, key in wanted.items()}})
    return pd.DataFrame(rows, columns=["model", *wanted])


def split_groups(accuracy: pd.DataFrame, k: int) -> pd.DataFrame:
    """The copies (every model but :data:`BASELINE`) ranked by OOD non-entailed accuracy, best first (ties by
    name): rank 1..N, group ``generalizing`` for the top ``k``, ``heuristic`` for the bottom ``k``, ``middle``
    otherwise. ``ValueError`` unless 1 ≤ k ≤ N / 2."""
    summary = accuracy_summary(accuracy[accuracy["model"] != BASELINE])
    n = len(summary)
    if not 1 <= k <= n / 2:
        raise ValueError(f"group size k = {k} must be between 1 and N / 2 = {n / 2} for N = {n} copies")
    ranked = summary.sort_values(
        ["ood_non_entailed_accuracy", "model"], ascending=[False, True], kind="mergesort"
    ).reset_index(drop=True)
    ranked["rank"] = np.arange(1, n + 1)
    ranked["group"] = np.where(ranked["rank"] <= k, GENERALIZING, np.where(ranked["rank"] > n - k, HEURISTIC, MIDDLE))
    return ranked[GROUP_COLUMNS]


def ood_spread(groups: pd.DataFrame) -> float:
    """``max − min`` of the copies' OOD non-entailed accuracy."""
    values = groups["ood_non_entailed_accuracy"].to_numpy(dtype=float)
    return float(values.max() - values.min())


def relation(group_f: str, group_g: str) -> str | None:
    """``within_generalizing`` / ``within_heuristic`` / ``between`` for an ordered pair's groups; ``None`` when
    either copy is in the middle."""
    if MIDDLE in (group_f, group_g):
        return None
    if group_f == group_g:
        return f"within_{group_f}"
    return "between"


# --------------------------------------------------------------------------- identity stitching


def stratified_subset(pairs: pd.DataFrame, max_pairs: int | None, seed: int) -> pd.DataFrame:
    """At most ``max_pairs`` rows of ``pairs``, the same share of every (subcase, label) cell (largest
    remainders), drawn with ``seed``, in their original order; all rows when ``max_pairs`` is ``None`` or not
    smaller."""
    if max_pairs is None or len(pairs) <= max_pairs:
        return pairs
    rng = np.random.default_rng(seed)
    cells = pairs.groupby(["subcase", "label"], sort=True).indices
    quota = {key: max_pairs * len(rows) / len(pairs) for key, rows in cells.items()}
    counts = {key: int(np.floor(q)) for key, q in quota.items()}
    for key in sorted(quota, key=lambda key: counts[key] - quota[key])[: max_pairs - sum(counts.values())]:
        counts[key] += 1
    chosen = np.concatenate([rng.choice(rows, size=counts[key], replace=False) for key, rows in cells.items()])
    return pairs.iloc[np.sort(chosen)]


def correct_per_batch(correct: np.ndarray, batch_size: int) -> BatchLosses:
    """Per-sequence correctness (0/1) summed over consecutive batches of ``batch_size`` — the counts
    :func:`thinkalike.stitching.evaluate.batch_correct` gives for the same batches."""
    correct = np.asarray(correct, dtype=np.float64)
    starts = np.arange(0, len(correct), batch_size)
    return BatchLosses(np.add.reduceat(correct, starts), np.diff(np.append(starts, len(correct))).astype(np.int64))


def all_streams(handle: ModelHandle, split: TokenSplit, batch_size: int) -> torch.Tensor:
    """Residual streams after every layer, ``(n_layers + 1, n, seq, d_model)``, under ``no_grad``."""
    out = []
    with torch.no_grad():
        for start in range(0, len(split), batch_size):
            ids = split.input_ids[start : start + batch_size].to(handle.device)
            mask = split.attention_mask[start : start + batch_size].to(handle.device)
            out.append(handle.residual_streams(ids, mask))
    return torch.cat(out, dim=1)


def identity_stitch_table(
    f: ModelHandle,
    others: Mapping[str, ModelHandle],
    data: Mapping[str, TokenSplit],
    own_correct: Mapping[tuple[str, str], np.ndarray],
    layers: Sequence[int] | None = None,
    *,
    batch_size: int = 32,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    on_stitch: Callable[[], object] | None = None,
) -> pd.DataFrame:
    """Identity stitching of f into every other copy g at every layer, on every evaluation set of ``data``
    (name → labelled :class:`TokenSplit`): :data:`STITCH_COLUMNS`, one row per (data, g, layer).

    ``own_correct[(g, data)]``: g's own per-sequence correctness on that set (its predictions == labels, from
    its plain forward pass), so g runs only its tail here. Every stitch is checked first
    (:func:`~thinkalike.stitching.check_stitch`: equal widths, layers in range, same tokenizer) — a
    :class:`~thinkalike.stitching.StitchConfigError` names the models before any forward pass.
    """
    layers = list(range(f.n_layers + 1)) if layers is None else [int(layer) for layer in layers]
    for g in others.values():
        for layer in layers:
            check_stitch(f, g, layer, layer, "identity")
    rows = []
    phi = IdentityStitch(f.d_model)
    for name, split in data.items():
        if split.labels is None:
            raise ValueError(f"identity stitching scores labelled data: {name!r} has no labels")
        streams = all_streams(f, split, batch_size)
        labels = split.labels.to(f.device)
        for g_name, g in others.items():
            g_correct = correct_per_batch(own_correct[(g_name, name)], batch_size)
            for layer in layers:
                prepared = PreparedSplit(
                    split.input_ids.to(g.device), split.attention_mask.to(g.device), labels, streams[layer].to(g.device)
                )
                result = evaluate_stitch_accuracy(
                    phi,
                    g,
                    layer,
                    prepared,
                    batch_size=batch_size,
                    n_bootstrap=n_bootstrap,
                    level=level,
                    seed=seed,
                    g_correct=g_correct,
                )
                rows.append(
                    {
                        "data": name,
                        "model_f": f.name,
                        "model_g": g_name,
                        "layer": layer,
                        "relative_depth": relative_depth(layer, f.n_layers + 1),
                        "stitched_accuracy": result.stitched_accuracy,
                        "g_accuracy": result.g_accuracy,
                        "penalty": result.penalty,
                        "ci_low": result.penalty_ci_low,
                        "ci_high": result.penalty_ci_high,
                        "ci_level": result.ci_level,
                        "n_sequences": result.n_sequences,
                        "n_batches": result.n_batches,
                    }
                )
                if on_stitch is not None:
                    on_stitch()
    return pd.DataFrame(rows, columns=STITCH_COLUMNS)


def aggregate_stitching(table: pd.DataFrame, groups: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """:data:`STITCH_GROUP_COLUMNS`: per evaluation set, layer and relation (:data:`RELATIONS`), the mean
    accuracy penalty over the ordered pairs with its t interval across pairs (NaN for a single pair), and the
    mean stitched accuracy. Pairs with a middle copy are left out."""
    group_of = dict(zip(groups["model"], groups["group"]))
    labelled = table.assign(
        relation=[relation(group_of[f], group_of[g]) for f, g in zip(table["model_f"], table["model_g"])]
    )
    labelled = labelled[labelled["relation"].notna()]
    rows = []
    for (data, layer, kind), part in labelled.groupby(["data", "layer", "relation"], sort=True):
        mean, low, high = mean_interval(part["penalty"].to_numpy(), confidence, "t", (-1.0, 1.0))
        rows.append(
            {
                "data": data,
                "layer": int(layer),
                "relative_depth": float(part["relative_depth"].iloc[0]),
                "relation": kind,
                "mean_penalty": mean,
                "ci_low": low,
                "ci_high": high,
                "mean_stitched_accuracy": float(part["stitched_accuracy"].mean()),
                "n_pairs": len(part),
            }
        )
    return pd.DataFrame(rows, columns=STITCH_GROUP_COLUMNS)


# --------------------------------------------------------------------------- CKA


def token_activations(handle: ModelHandle, split: TokenSplit, tokenizer, batch_size: int = 64) -> np.ndarray:
    """Residual streams after every layer at the real, non-special tokens of ``split``, float32
    ``(n_layers + 1, n_tokens, d_model)`` (sequences in order, positions in order)."""
    special = torch.tensor(sorted(special_token_ids(tokenizer)), dtype=torch.long)
    streams = all_streams(handle, split, batch_size).cpu()
    keep = split.attention_mask.bool() & ~torch.isin(split.input_ids, special)
    return streams[:, keep].to(torch.float32).numpy()


def copies_cka_tables(
    activations: Mapping[str, np.ndarray], settings: CKASettings, on_pair: Callable[[], object] | None = None
) -> list[pd.DataFrame]:
    """CKA of every layer pair of every unordered pair of distinct models (``activations``: model → token
    activations of the same tokens), minibatches of ``settings.batch_tokens`` consecutive tokens (a last
    batch under 4 tokens is dropped); one :func:`~thinkalike.cka.compute.cka_long_table` per pair."""
    tables = []
    for model_a, model_b in itertools.combinations(activations, 2):
        a, b = activations[model_a], activations[model_b]
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"{model_a!r} and {model_b!r} have activations of {a.shape[1]} and {b.shape[1]} tokens")
        # CKASettings checks both names (its fields are typed str, the accumulator's the names' Literals)
        accumulator = CKAAccumulator(
            a.shape[0],
            b.shape[0],
            estimator=settings.estimator,
            aggregation=settings.aggregation,
            model_a=model_a,
            model_b=model_b,
            seed=settings.seed,
            skip_constant_layers=settings.skip_constant_layers,
        )
        for start in range(0, a.shape[1], settings.batch_tokens):
            stop = min(start + settings.batch_tokens, a.shape[1])
            if stop - start >= 4:
                accumulator.update(torch.from_numpy(a[:, start:stop]), torch.from_numpy(b[:, start:stop]))
        tables.append(cka_long_table(accumulator.result(), settings))
        if on_pair is not None:
            on_pair()
    return tables
