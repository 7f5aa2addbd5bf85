"""Key–value overlap in the embedding space (Dar et al. 2022, appendix B, figure 6).

A d-vector ``v`` reads as its V logits ``v·E`` (``E``: d × V, :mod:`~thinkalike.embedding.space`). For two
vectors ``x`` and ``y``::

    sim_k(x, y) = |top-k(x·E) ∩ top-k(y·E)| / |top-k(x·E) ∪ top-k(y·E)|

the Jaccard index of their k tokens of largest logit (the paper's "top activated indices": sign ``+``). It is
taken over the corresponding vectors of one layer (:mod:`~thinkalike.embedding.weights` for the rows):

* ``FF_key-FF_value``: column i of ``FF_in`` with row i of ``FF_out`` (FF neuron i);
* ``W_V-W_O``: column j of head h's ``W_V`` with row j of its ``W_O`` (row ``h·d_head + j`` of both groups);
* ``W_Q-W_K``: column j of head h's ``W_Q`` with column j of its ``W_K``.

``matched`` is the mean ``sim_k`` over the n pairs ``(i, i)``; ``random`` the mean over the pairs ``(i, π(i))``
for ``n_random`` random derangements ``π`` of the layer's n rows (across heads, within the layer). Each ``π`` is a
single n-cycle (``σ(i) ↦ σ(i+1)`` for a random permutation ``σ``), so every row meets a partner other than its own,
uniform among the n − 1 others: its expectation is the mean over all off-diagonal pairs. A layer with one row has
no random pairing (``NaN``). The paper (GPT-2 medium, k = 100) finds matched well above random.

Chance level: two independent uniform k-sets of V tokens share k²/V tokens on average, a Jaccard of about
``k / (2V − k)`` — 0.001 at GPT-2's V = 50257 with k = 100, but 0.15 at the zoo's V = 394 (k a quarter of the
vocabulary), 0.026 with k = 20. :func:`auto_k` keeps the paper's 100 and caps it at V / 20.

Top-k sets are found in row blocks of at most ``block_bytes`` of logits (never the n × V matrix), in the compute
dtype (float32 default); the Jaccard of a block of pairs scatters one side's k indices into a boolean V-row per
pair and gathers the other side's: ``|A ∩ B| = Σ mask_A[B]``, ``|A ∪ B| = 2k − |A ∩ B|``. Ties at the k-th logit
are broken by ``torch.topk``. No Kedro here; the pipeline node is
:func:`thinkalike.pipelines.embedding.nodes.key_value_overlap`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import pandas as pd
import torch

from thinkalike.embedding.reading import top_tokens
from thinkalike.embedding.space import check_k
from thinkalike.embedding.topk import DEFAULT_BLOCK_BYTES, rows_per_block
from thinkalike.embedding.weights import ModelParameters

logger = logging.getLogger(__name__)

#: Pair kind → (first vector group, second vector group); row i of one corresponds to row i of the other.
PAIRS: dict[str, tuple[str, str]] = {
    "FF_key-FF_value": ("FF_key", "FF_value"),
    "W_V-W_O": ("W_V", "W_O"),
    "W_Q-W_K": ("W_Q", "W_K"),
}
#: The paper's k (GPT-2 medium, V = 50257).
PAPER_K = 100
#: :func:`auto_k` keeps k at most V / AUTO_K_FRACTION.
AUTO_K_FRACTION = 20
OVERLAP_COLUMNS = [
    "model",
    "layer",
    "pair",
    "k",
    "n_pairs",
    "n_random",
    "matched_mean",
    "random_mean",
    "random_sd",
    "difference",
    "ratio",
]
SUMMARY_COLUMNS = [
    "model",
    "pair",
    "k",
    "n_layers",
    "matched_mean",
    "random_mean",
    "difference",
    "ratio",
    "layers_above",
]


def auto_k(vocabulary_size: int) -> int:
    """The paper's k = 100, capped at V / 20 (rounded, at least 1): 100 for GPT-2, 20 for the zoo's V = 394."""
    return max(1, min(PAPER_K, round(vocabulary_size / AUTO_K_FRACTION)))


def jaccard(
    first: torch.Tensor, second: torch.Tensor, vocabulary_size: int, *, block_bytes: int = DEFAULT_BLOCK_BYTES
) -> torch.Tensor:
    """Row-wise Jaccard index of two ``(n, k)`` tensors of token ids (each row k distinct ids in ``0 … V−1``):
    ``(n,)`` float64, ``|A ∩ B| / (2k − |A ∩ B|)``, with a boolean ``(block, V)`` mask per block of rows."""
    if first.dim() != 2 or first.shape != second.shape:
        raise ValueError(
            f"first, second: two (n, k) id tensors of one shape, got {tuple(first.shape)} and {tuple(second.shape)}"
        )
    n, k = first.shape
    result = torch.empty(n, dtype=torch.float64, device=first.device)
    step = rows_per_block(vocabulary_size, 1, block_bytes)
    for start in range(0, n, step):
        ids_a, ids_b = first[start : start + step], second[start : start + step]
        mask = torch.zeros(ids_a.shape[0], vocabulary_size, dtype=torch.bool, device=first.device)
        mask.scatter_(1, ids_a, True)
        shared = mask.gather(1, ids_b).sum(dim=1, dtype=torch.float64)
        result[start : start + step] = shared / (2 * k - shared)
    return result


def random_derangement(n: int, generator: torch.Generator) -> torch.Tensor:
    """A random permutation of ``0 … n−1`` with no fixed point (``n ≥ 2``): one n-cycle, each row's partner uniform
    among the n − 1 others."""
    if n < 2:
        raise ValueError(f"n: a derangement needs at least 2 rows, got {n}")
    order = torch.randperm(n, generator=generator)
    partner = torch.empty(n, dtype=torch.long)
    partner[order] = order.roll(-1)
    return partner


def _pairs_present(parameters: ModelParameters, pairs: Sequence[str]) -> list[str]:
    present = []
    for pair in pairs:
        reasons = [r for group in PAIRS[pair] if (r := parameters.missing_reason(group)) is not None]
        if reasons:
            logger.warning("embedding overlap: %s — %s skipped", "; ".join(dict.fromkeys(reasons)), pair)
        else:
            present.append(pair)
    return present


def pair_overlap(
    parameters: ModelParameters,
    embedding: torch.Tensor,
    *,
    k: int,
    n_random: int = 10,
    seed: int = 0,
    pairs: Sequence[str] = tuple(PAIRS),
    dtype: torch.dtype = torch.float32,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> pd.DataFrame:
    """One row per extracted layer and pair kind (:data:`OVERLAP_COLUMNS`): ``n_pairs`` corresponding pairs,
    ``matched_mean`` their mean ``sim_k``, ``random_mean`` the mean over ``n_random`` random derangements (seeded by
    ``seed``; ``random_sd`` the standard deviation of the per-derangement means, NaN with one), ``difference =
    matched − random`` and ``ratio = matched / random`` (NaN where random is 0). Pair kinds the model lacks (Mamba's
    attention) are skipped with a logged note. Raises ``ValueError`` naming the argument for ``k`` outside
    ``1 … V``, ``n_random < 1`` or an unknown pair kind."""
    unknown = [pair for pair in pairs if pair not in PAIRS]
    if unknown:
        raise ValueError(f"pairs: unknown pair kinds {unknown} (known: {list(PAIRS)})")
    vocabulary = embedding.shape[1]
    check_k(k, vocabulary)
    if isinstance(n_random, bool) or not isinstance(n_random, int) or n_random < 1:
        raise ValueError(f"n_random: a positive number of random pairings, got {n_random!r}")
    embedding = embedding.detach().to(dtype)
    generator = torch.Generator().manual_seed(seed)
    present = _pairs_present(parameters, pairs)
    records = []
    for position, layer in enumerate(parameters.layers):
        for pair in present:
            first, second = (
                top_tokens(
                    parameters.vectors(group, position).to(device=embedding.device, dtype=dtype),
                    embedding,
                    k,
                    block_bytes=block_bytes,
                )[1]
                for group in PAIRS[pair]
            )
            if first.shape != second.shape:
                raise ValueError(f"{parameters.model} layer {layer}: {pair} has {len(first)} and {len(second)} rows")
            n = first.shape[0]
            matched = float(jaccard(first, second, vocabulary, block_bytes=block_bytes).mean())
            means = [
                float(
                    jaccard(
                        first,
                        second[random_derangement(n, generator).to(second.device)],
                        vocabulary,
                        block_bytes=block_bytes,
                    ).mean()
                )
                for _ in range(n_random if n >= 2 else 0)
            ]
            baseline = sum(means) / len(means) if means else math.nan
            spread = float(torch.tensor(means, dtype=torch.float64).std()) if len(means) > 1 else math.nan
            records.append(
                {
                    "model": parameters.model,
                    "layer": layer,
                    "pair": pair,
                    "k": k,
                    "n_pairs": n,
                    "n_random": len(means),
                    "matched_mean": matched,
                    "random_mean": baseline,
                    "random_sd": spread,
                    "difference": matched - baseline,
                    "ratio": matched / baseline if baseline > 0 else math.nan,
                }
            )
    return pd.DataFrame.from_records(records, columns=OVERLAP_COLUMNS)


def summarise_overlap(table: pd.DataFrame) -> pd.DataFrame:
    """Per model and pair kind (:data:`SUMMARY_COLUMNS`), across the layers of a :func:`pair_overlap` table: the
    mean matched, random and difference, ``ratio`` of the two means, and ``layers_above`` — the layers where matched
    exceeds random."""
    if table.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    grouped = table.groupby(["model", "pair", "k"], sort=False)
    summary = grouped.agg(
        n_layers=("layer", "size"),
        matched_mean=("matched_mean", "mean"),
        random_mean=("random_mean", "mean"),
        difference=("difference", "mean"),
        layers_above=("difference", lambda values: int((values > 0).sum())),
    ).reset_index()
    positive = summary["random_mean"] > 0
    summary["ratio"] = (summary["matched_mean"] / summary["random_mean"]).where(positive)
    return summary[SUMMARY_COLUMNS]
