"""Reading parameters in vocabulary terms (Dar et al. §3–4, appendix C): tidy tables and a markdown report.

* A d-vector ``v`` (an FF key or value, or any row of a vector group) reads as the top-k tokens of ``v·E``
  (sign ``+``) and of ``−v·E`` (sign ``−``).
* A head's ``W_VO = W_V W_O`` reads as ``E′ W_VO E`` (V × V; entry (i, j): input token i, output token j —
  row i of ``E′`` is token i's direction in the residual, column j of ``E`` reads token j out) and
  ``W_QK = W_Q W_Kᵀ`` as ``E′ W_QK E′ᵀ`` (entry (i, j): query-side token i, key-side token j). Their top-k
  (i, j) pairs come from the factors ``E′ W_V`` (V × d_head) and ``W_O E`` (d_head × V) (resp. ``E′ W_Q`` and
  ``(E′ W_K)ᵀ``) by :func:`~thinkalike.embedding.topk.top_k_of_product`; the V × V matrix is never formed.
* Knowledge lookup: with ``μ`` the mean column of ``E``, the query ``q = mean_t (E[:, t] − μ)`` over the given
  tokens ``t``; every FF value (or key) ``v`` of every layer is ranked by ``v·q``.

Tables (pandas, one row per listed token or pair):

* vectors: ``model, layer, group, neuron, sign, rank, token_id, token, score`` (``neuron`` is the row of the
  group: the FF neuron; for ``W_*`` vector groups ``head·d_head + column``);
* pairs: ``model, layer, group, head, rank, input_token_id, input_token, output_token_id, output_token, score``;
* lookup: ``model, layer, group, neuron, rank, score, top_tokens`` (the vector's own top tokens, joined).

Scores are raw logits ``v·E`` (resp. entries of the V × V matrix), in the compute dtype (float32 default).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from thinkalike.embedding.space import (
    check_e_prime_kind,
    check_k,
    right_inverse,
    token_ids,
    token_labels,
)
from thinkalike.embedding.topk import (
    DEFAULT_BLOCK_BYTES,
    rows_per_block,
    top_k_of_product,
)
from thinkalike.embedding.weights import (
    INTERACTION_GROUPS,
    VECTOR_GROUPS,
    ModelParameters,
)
from thinkalike.models.training import progress_bar

logger = logging.getLogger(__name__)

VECTOR_COLUMNS = ["model", "layer", "group", "neuron", "sign", "rank", "token_id", "token", "score"]
PAIR_COLUMNS = [
    "model",
    "layer",
    "group",
    "head",
    "rank",
    "input_token_id",
    "input_token",
    "output_token_id",
    "output_token",
    "score",
]
LOOKUP_COLUMNS = ["model", "layer", "group", "neuron", "rank", "score", "top_tokens"]


def top_tokens(
    vectors: torch.Tensor,
    embedding: torch.Tensor,
    k: int,
    *,
    largest: bool = True,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores, token_ids)``, each ``(n, k)``, best first: the top-k of each row of ``vectors @ E`` (or of
    ``−vectors @ E`` with ``largest=False``, scores then being ``−v·E``), in row blocks of ``block_bytes``."""
    check_k(k, embedding.shape[1])
    step = rows_per_block(embedding.shape[1], embedding.element_size(), block_bytes)
    scores, ids = [], []
    for start in range(0, vectors.shape[0], step):
        logits = vectors[start : start + step] @ embedding
        values, index = (logits if largest else logits.neg_()).topk(k, dim=1)
        scores.append(values)
        ids.append(index)
    return torch.cat(scores), torch.cat(ids)


def available_groups(parameters: ModelParameters, groups: Sequence[str]) -> list[str]:
    """The ``groups`` that ``parameters`` has; each missing one is logged as a note (why it is skipped)."""
    present = []
    for group in groups:
        reason = parameters.missing_reason(group)
        if reason is None:
            present.append(group)
        else:
            logger.warning("embedding: %s — skipped", reason)
    return present


def _compute(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return tensor.to(device=like.device, dtype=like.dtype)


def _selected(selection: Mapping[int, Sequence[int]] | None, layer: int, count: int) -> list[int]:
    if selection is None:
        return list(range(count))
    chosen = [int(i) for i in selection.get(layer, ())]
    bad = [i for i in chosen if not 0 <= i < count]
    if bad:
        raise IndexError(f"layer {layer}: indices {bad} outside 0 … {count - 1}")
    return chosen


def _check_layers(parameters: ModelParameters, selection: Mapping[int, Sequence[int]] | None, what: str) -> None:
    unknown = sorted(set(selection or {}) - set(parameters.layers))
    if unknown:
        raise IndexError(
            f"{what}: layers {unknown} were not extracted from {parameters.model!r} "
            f"(extracted: {list(parameters.layers)})"
        )


def read_vectors(
    parameters: ModelParameters,
    embedding: torch.Tensor,
    *,
    k: int = 20,
    groups: Sequence[str] = ("FF_key", "FF_value"),
    neurons: Mapping[int, Sequence[int]] | None = None,
    tokenizer: Any = None,
    dtype: torch.dtype = torch.float32,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> pd.DataFrame:
    """The vectors table (module docstring): top-k tokens of ``v·E`` and ``−v·E`` for every row of ``groups``
    (default the FF keys and values) of every extracted layer, or of the rows ``neurons[layer]`` only.
    Groups the model lacks are skipped with a logged note (:func:`available_groups`)."""
    unknown = [g for g in groups if g not in VECTOR_GROUPS]
    if unknown:
        raise ValueError(f"groups: unknown vector groups {unknown} (known: {list(VECTOR_GROUPS)})")
    embedding = embedding.detach().to(dtype)
    check_k(k, embedding.shape[1])
    _check_layers(parameters, neurons, "neurons")
    groups = available_groups(parameters, groups)
    frames = []
    for position, layer in enumerate(parameters.layers):
        for group in groups:
            rows = parameters.vectors(group, position)
            chosen = _selected(neurons, layer, rows.shape[0])
            if not chosen:
                continue
            vectors = _compute(rows[chosen], embedding)
            for sign, largest in (("+", True), ("-", False)):
                scores, ids = top_tokens(vectors, embedding, k, largest=largest, block_bytes=block_bytes)
                frames.append(
                    pd.DataFrame(
                        {
                            "model": parameters.model,
                            "layer": layer,
                            "group": group,
                            "neuron": np.repeat(chosen, k),
                            "sign": sign,
                            "rank": np.tile(np.arange(k), len(chosen)),
                            "token_id": ids.reshape(-1).cpu().numpy(),
                            "token": token_labels(tokenizer, ids.reshape(-1).tolist()),
                            "score": scores.reshape(-1).double().cpu().numpy(),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=VECTOR_COLUMNS)


def read_head_interactions(
    parameters: ModelParameters,
    embedding: torch.Tensor,
    *,
    k: int = 50,
    e_prime: str = "transpose",
    groups: Sequence[str] = INTERACTION_GROUPS,
    heads: Mapping[int, Sequence[int]] | None = None,
    tokenizer: Any = None,
    exclude_same_token: bool = False,
    dtype: torch.dtype = torch.float32,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    progress: bool = True,
) -> pd.DataFrame:
    """The pairs table (module docstring): the top-k (input, output) token pairs of ``E′ W_VO E`` and
    ``E′ W_QK E′ᵀ`` of every head (or of ``heads[layer]``), from the factors with memory ``O(block · V + k)``.
    ``exclude_same_token`` drops the pairs (x, x). ``E′`` per ``e_prime`` (:func:`right_inverse`). Groups the
    model lacks (Mamba has no attention heads) are skipped with a logged note (:func:`available_groups`)."""
    unknown = [g for g in groups if g not in INTERACTION_GROUPS]
    if unknown:
        raise ValueError(f"groups: unknown interaction groups {unknown} (known: {list(INTERACTION_GROUPS)})")
    check_e_prime_kind(e_prime)
    check_k(k, embedding.shape[1] - (1 if exclude_same_token else 0))
    _check_layers(parameters, heads, "heads")
    groups = available_groups(parameters, groups)
    embedding = embedding.detach().to(dtype)
    inverse = right_inverse(embedding, e_prime)  # V × d
    jobs = []
    for position, layer in enumerate(parameters.layers):
        for group in groups:
            first, second = parameters.interaction_factors(group, position)
            for head in _selected(heads, layer, first.shape[0]):
                jobs.append((position, layer, group, head))
    frames = []
    started = time.perf_counter()
    with progress_bar(len(jobs), f"embedding heads {parameters.model}", progress) as bar:
        for job, (position, layer, group, head) in enumerate(jobs):
            if job == 1:
                log_estimate(parameters.model, len(jobs), time.perf_counter() - started)
            first, second = parameters.interaction_factors(group, position)
            first, second = _compute(first[head], embedding), _compute(second[head], embedding)
            left = inverse @ first  # V × d_head
            right = second @ (embedding if group == "W_VO" else inverse.T)  # d_head × V
            top = top_k_of_product(left, right, k, exclude_diagonal=exclude_same_token, block_bytes=block_bytes)
            rows, columns = top.rows.tolist(), top.columns.tolist()
            frames.append(
                pd.DataFrame(
                    {
                        "model": parameters.model,
                        "layer": layer,
                        "group": group,
                        "head": head,
                        "rank": np.arange(len(top)),
                        "input_token_id": rows,
                        "input_token": token_labels(tokenizer, rows),
                        "output_token_id": columns,
                        "output_token": token_labels(tokenizer, columns),
                        "score": top.values.double().cpu().numpy(),
                    }
                )
            )
            bar.update(1)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PAIR_COLUMNS)


def log_estimate(model: str, n_products: int, first_seconds: float, *, threshold: float = 30.0) -> None:
    """Logs the expected time of ``n_products`` head products from the first one's (when over ``threshold`` s)."""
    expected = first_seconds * n_products
    if expected > threshold:
        logger.info(
            "embedding heads %s: %d head products, about %.0f s (the first took %.1f s); narrow them with "
            "embedding.readings.layers / heads",
            model,
            n_products,
            expected,
            first_seconds,
        )


def lookup_query(embedding: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """``q = mean_t (E[:, t] − μ)`` (d), ``μ`` the mean of the V columns of ``E`` (Dar et al. §4.1)."""
    centred = embedding[:, list(ids)] - embedding.mean(dim=1, keepdim=True)
    return centred.mean(dim=1)


def knowledge_lookup(
    parameters: ModelParameters,
    embedding: torch.Tensor,
    tokens: Sequence[int | str],
    *,
    group: str = "FF_value",
    top: int = 20,
    k_tokens: int = 10,
    tokenizer: Any = None,
    dtype: torch.dtype = torch.float32,
) -> pd.DataFrame:
    """The lookup table (module docstring): the ``top`` rows of ``group`` over all extracted layers with the
    largest ``v·q`` for the seed ``tokens`` (ids, or vocabulary strings looked up in ``tokenizer``), each with
    its own ``k_tokens`` top tokens."""
    if group not in ("FF_value", "FF_key"):
        raise ValueError(f"group: knowledge lookup ranks FF values or keys, got {group!r}")
    embedding = embedding.detach().to(dtype)
    ids = token_ids(tokenizer, tokens, embedding.shape[1])
    check_k(k_tokens, embedding.shape[1], "k_tokens")
    query = lookup_query(embedding, ids)
    layer_scores: list[torch.Tensor] = []
    owners: list[tuple[int, int, int]] = []
    for position, layer in enumerate(parameters.layers):
        rows = _compute(parameters.vectors(group, position), embedding)
        layer_scores.append(rows @ query)
        owners.extend((position, layer, neuron) for neuron in range(rows.shape[0]))
    scores = torch.cat(layer_scores)
    if not 1 <= top <= scores.numel():
        raise ValueError(f"top: {top} outside 1 … {scores.numel()} ({group} rows of the extracted layers)")
    values, order = scores.topk(top)
    records = []
    for rank, (value, index) in enumerate(zip(values.tolist(), order.tolist())):
        position, layer, neuron = owners[index]
        vector = _compute(parameters.vectors(group, position)[neuron : neuron + 1], embedding)
        _, best = top_tokens(vector, embedding, k_tokens)
        records.append(
            {
                "model": parameters.model,
                "layer": layer,
                "group": group,
                "neuron": neuron,
                "rank": rank,
                "score": value,
                "top_tokens": ", ".join(token_labels(tokenizer, best[0].tolist())),
            }
        )
    return pd.DataFrame.from_records(records, columns=LOOKUP_COLUMNS)


def _cell(text: Any) -> str:
    """A markdown table cell: pipes escaped, whitespace made visible, never empty."""
    text = str(text).replace("|", "\\|").replace("\n", "\\n")
    return text if text.strip() else repr(text)


def readings_report(
    vectors: pd.DataFrame | None = None,
    pairs: pd.DataFrame | None = None,
    *,
    title: str = "Parameters in embedding space",
    max_rows: int = 30,
    lookup: pd.DataFrame | None = None,
) -> str:
    """A markdown report of the given (already selected) tables, like the paper's appendix C: per head one
    table of (input → output) pairs for each of its groups; per FF neuron the top tokens of its key and value,
    both signs, side by side (C.3); the knowledge lookup's ranked vectors (C.4). ``max_rows`` rows each."""
    lines = [f"# {title}", ""]
    if pairs is not None and len(pairs):
        lines += [
            "## Attention heads",
            "",
            ("Top (input token → output token) pairs of E′W_VO E, and (query token, key token) pairs of E′W_QK E′ᵀ."),
            "",
        ]
        for (model, layer, head, group), table in pairs.groupby(["model", "layer", "head", "group"], sort=True):
            lines += [
                f"### {model} — layer {layer}, head {head}, {group}",
                "",
                "| rank | input | output | score |",
                "|---:|---|---|---:|",
            ]
            for row in table.sort_values("rank").head(max_rows).itertuples():
                lines.append(f"| {row.rank} | {_cell(row.input_token)} | {_cell(row.output_token)} | {row.score:.4g} |")
            lines.append("")
    if vectors is not None and len(vectors):
        lines += ["## Feed-forward neurons", "", "Top tokens of v·E (+) and −v·E (−) for the neuron's vectors.", ""]
        for (model, layer, neuron), table in vectors.groupby(["model", "layer", "neuron"], sort=True):
            columns = [
                (g, s)
                for g in dict.fromkeys(table["group"])
                for s in ("+", "-")
                if ((table["group"] == g) & (table["sign"] == s)).any()
            ]
            lists = {
                c: table[(table["group"] == c[0]) & (table["sign"] == c[1])]
                .sort_values("rank")["token"]
                .head(max_rows)
                .tolist()
                for c in columns
            }
            depth = max(len(v) for v in lists.values())
            lines += [
                f"### {model} — layer {layer}, neuron {neuron}",
                "",
                "| " + " | ".join(f"{g} {s}" for g, s in columns) + " |",
                "|" + "---|" * len(columns),
            ]
            for i in range(depth):
                lines.append("| " + " | ".join(_cell(lists[c][i]) if i < len(lists[c]) else "" for c in columns) + " |")
            lines.append("")
    if lookup is not None and len(lookup):
        lines += [
            "## Knowledge lookup",
            "",
            "| rank | model | layer | group | neuron | score | top tokens |",
            "|---:|---|---:|---|---:|---:|---|",
        ]
        for row in lookup.sort_values("rank").head(max_rows).itertuples():
            lines.append(
                f"| {row.rank} | {row.model} | {row.layer} | {row.group} | {row.neuron} | {row.score:.4g} "
                f"| {_cell(row.top_tokens)} |"
            )
        lines.append("")
    return "\n".join(lines)
