"""Aligning the layers of two models through the vocabulary space (Dar et al. §5.1).

For a parameter group (:data:`~thinkalike.embedding.weights.VECTOR_GROUPS`), layer i of model A holds
vectors ``x`` (rows, d_A) and layer j of B vectors ``y`` (d_B). Their projections ``x·E_A`` and ``y·E_B`` are
V-vectors over one vocabulary; the similarity of the layers is

    S[i, j] = mean over all pairs (x, y) of |r(x·E_A, y·E_B)|,

``r`` the Pearson correlation across the V coordinates. As the paper's ``kernelized_corr_coef``, ``r`` comes
from d × d Gram matrices and mean embeddings, never from the V-dimensional projections: with
``K_A = E_A E_Aᵀ``, ``K_B = E_B E_Bᵀ``, ``K_AB = E_A E_Bᵀ`` and ``m_A, m_B`` the mean columns of ``E_A, E_B``,

    mean(x·E_A) = x·m_A,   var(x·E_A) = x K_A xᵀ / V − (x·m_A)²,
    cov(x·E_A, y·E_B) = x K_AB yᵀ / V − (x·m_A)(y·m_B),   r = cov / sqrt(var_x var_y)

(population moments over the V coordinates; r does not depend on the normalisation). The baseline "raw"
(not projected) is the Pearson correlation across the d coordinates of ``x`` and ``y`` themselves (the paper's
``corr_coef``), defined only for equal widths. The one-to-one layer match maximises the summed similarity
(``scipy.optimize.linear_sum_assignment``, the Hungarian algorithm); the fraction of diagonal matches
(layer i ↔ layer i) summarises it. Everything is computed in float64.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from scipy.optimize import linear_sum_assignment

from thinkalike.embedding.space import (
    EmbeddingSpaceError,
    check_same_vocabulary,
    vocabulary_embedding,
)
from thinkalike.embedding.weights import (
    VECTOR_GROUPS,
    ModelParameters,
    extract_parameters,
)
from thinkalike.models.handle import ModelHandle

logger = logging.getLogger(__name__)

SPACES: tuple[str, ...] = ("projected", "raw")
SIMILARITY_COLUMNS = ["model_a", "model_b", "group", "space", "layer_a", "layer_b", "similarity", "matched"]
MATCH_COLUMNS = ["model_a", "model_b", "group", "space", "n_layers_a", "n_layers_b", "diagonal_fraction", "matching"]


@dataclass(frozen=True)
class ProjectionKernel:
    """What Pearson correlations of projections need of ``E_A`` and ``E_B``: ``K_A, K_B, K_AB`` (Grams),
    ``m_A, m_B`` (mean columns) and ``V`` (float64)."""

    gram_a: torch.Tensor
    gram_b: torch.Tensor
    gram_ab: torch.Tensor
    mean_a: torch.Tensor
    mean_b: torch.Tensor
    vocabulary_size: int


def projection_kernel(embedding_a: torch.Tensor, embedding_b: torch.Tensor) -> ProjectionKernel:
    """The :class:`ProjectionKernel` of ``E_A`` (d_A × V) and ``E_B`` (d_B × V)."""
    if embedding_a.shape[1] != embedding_b.shape[1]:
        raise EmbeddingSpaceError(
            f"E_A and E_B have different vocabularies (V = {embedding_a.shape[1]} and {embedding_b.shape[1]})"
        )
    a, b = embedding_a.detach().double(), embedding_b.detach().double()
    return ProjectionKernel(a @ a.T, b @ b.T, a @ b.T, a.mean(dim=1), b.mean(dim=1), a.shape[1])


def _moments(vectors: torch.Tensor, gram: torch.Tensor, mean: torch.Tensor, size: int):
    mu = vectors @ mean
    variance = ((vectors @ gram) * vectors).sum(dim=1) / size - mu**2
    return mu, variance.clamp_min(0).sqrt()


def kernelized_pearson(x: torch.Tensor, y: torch.Tensor, kernel: ProjectionKernel) -> torch.Tensor:
    """``r[a, b]`` = Pearson correlation of ``x[a]·E_A`` and ``y[b]·E_B`` across the V coordinates (n_x × n_y)."""
    x, y = x.to(kernel.gram_a), y.to(kernel.gram_b)
    mu_x, sd_x = _moments(x, kernel.gram_a, kernel.mean_a, kernel.vocabulary_size)
    mu_y, sd_y = _moments(y, kernel.gram_b, kernel.mean_b, kernel.vocabulary_size)
    covariance = (x @ kernel.gram_ab @ y.T) / kernel.vocabulary_size - torch.outer(mu_x, mu_y)
    return covariance / torch.outer(sd_x, sd_y)


def raw_pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``r[a, b]`` = Pearson correlation of ``x[a]`` and ``y[b]`` across their d coordinates (same d)."""
    if x.shape[1] != y.shape[1]:
        raise EmbeddingSpaceError(
            f"raw (unprojected) Pearson needs equal widths, got d = {x.shape[1]} and {y.shape[1]}"
        )
    x, y = x.double(), y.double()
    x = x - x.mean(dim=1, keepdim=True)
    y = y - y.mean(dim=1, keepdim=True)
    return (x / x.norm(dim=1, keepdim=True)) @ (y / y.norm(dim=1, keepdim=True)).T


def layer_similarity(
    vectors_a: Sequence[torch.Tensor], vectors_b: Sequence[torch.Tensor], kernel: ProjectionKernel | None
) -> np.ndarray:
    """``S`` (L_A × L_B): mean |r| over all pairs of vectors of layer i of A and layer j of B — projected through
    ``kernel`` (:func:`kernelized_pearson`), or raw (:func:`raw_pearson`) when ``kernel`` is None."""
    similarity = np.empty((len(vectors_a), len(vectors_b)))
    if kernel is None:
        for i, x in enumerate(vectors_a):
            for j, y in enumerate(vectors_b):
                similarity[i, j] = float(raw_pearson(x, y).abs().mean())
        return similarity
    size = kernel.vocabulary_size
    # Per layer once: x K_AB / V with A's moments; y with B's moments; then one product per layer pair.
    standard_b = []
    for y in vectors_b:
        y = y.to(kernel.gram_b)
        standard_b.append((y, *_moments(y, kernel.gram_b, kernel.mean_b, size)))
    for i, x in enumerate(vectors_a):
        x = x.to(kernel.gram_a)
        mu_x, sd_x = _moments(x, kernel.gram_a, kernel.mean_a, size)
        reads = x @ kernel.gram_ab / size
        for j, (y, mu_y, sd_y) in enumerate(standard_b):
            r = (reads @ y.T - torch.outer(mu_x, mu_y)) / torch.outer(sd_x, sd_y)
            similarity[i, j] = float(r.abs().mean())
    return similarity


def match_layers(similarity: np.ndarray) -> np.ndarray:
    """``match[i]`` = the layer of B matched to layer i of A (−1 when A is deeper than B and i is left over),
    maximising the summed similarity one-to-one (``linear_sum_assignment``)."""
    rows, columns = linear_sum_assignment(np.asarray(similarity), maximize=True)
    match = np.full(similarity.shape[0], -1, dtype=np.int64)
    match[rows] = columns
    return match


def diagonal_fraction(match: np.ndarray, layers_a: Sequence[int], layers_b: Sequence[int]) -> float:
    """Fraction of the matched layers of A whose match in B is the same layer number."""
    pairs = [(layers_a[i], layers_b[j]) for i, j in enumerate(match) if j >= 0]
    return float(np.mean([a == b for a, b in pairs])) if pairs else float("nan")


def align_layers(
    parameters_a: ModelParameters,
    parameters_b: ModelParameters,
    embedding_a: torch.Tensor,
    embedding_b: torch.Tensor,
    *,
    groups: Sequence[str] = VECTOR_GROUPS,
    spaces: Sequence[str] = SPACES,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(similarities, matches)``: the similarity table (``model_a, model_b, group, space, layer_a, layer_b,
    similarity, matched``) and the match table (``…, n_layers_a, n_layers_b, diagonal_fraction, matching``) for
    every group both models have (others skipped with a logged note) and every space (``projected``, ``raw`` —
    the latter skipped with a note for different widths)."""
    unknown = [s for s in spaces if s not in SPACES] + [g for g in groups if g not in VECTOR_GROUPS]
    if unknown:
        raise ValueError(f"unknown spaces/groups {unknown} (spaces: {list(SPACES)}, groups: {list(VECTOR_GROUPS)})")
    kernel = projection_kernel(embedding_a, embedding_b) if "projected" in spaces else None
    a_name, b_name = parameters_a.model, parameters_b.model
    width_a, width_b = embedding_a.shape[0], embedding_b.shape[0]
    similarity_frames, match_records = [], []
    for group in groups:
        reasons = [r for r in (parameters_a.missing_reason(group), parameters_b.missing_reason(group)) if r]
        if reasons:
            logger.warning("embedding alignment: %s — group skipped", "; ".join(reasons))
            continue
        vectors_a = [parameters_a.vectors(group, p) for p in range(parameters_a.n_layers)]
        vectors_b = [parameters_b.vectors(group, p) for p in range(parameters_b.n_layers)]
        for space in spaces:
            if space == "raw" and width_a != width_b:
                logger.warning(
                    "embedding alignment: no raw baseline for %r vs %r (d_model %d and %d)",
                    a_name,
                    b_name,
                    width_a,
                    width_b,
                )
                continue
            similarity = layer_similarity(vectors_a, vectors_b, kernel if space == "projected" else None)
            match = match_layers(similarity)
            la, lb = np.meshgrid(np.arange(similarity.shape[0]), np.arange(similarity.shape[1]), indexing="ij")
            similarity_frames.append(
                pd.DataFrame(
                    {
                        "model_a": a_name,
                        "model_b": b_name,
                        "group": group,
                        "space": space,
                        "layer_a": np.asarray(parameters_a.layers)[la.ravel()],
                        "layer_b": np.asarray(parameters_b.layers)[lb.ravel()],
                        "similarity": similarity.ravel(),
                        "matched": match[la.ravel()] == lb.ravel(),
                    }
                )
            )
            match_records.append(
                {
                    "model_a": a_name,
                    "model_b": b_name,
                    "group": group,
                    "space": space,
                    "n_layers_a": parameters_a.n_layers,
                    "n_layers_b": parameters_b.n_layers,
                    "diagonal_fraction": diagonal_fraction(match, parameters_a.layers, parameters_b.layers),
                    "matching": ", ".join(
                        f"{parameters_a.layers[i]}→{parameters_b.layers[j]}" for i, j in enumerate(match) if j >= 0
                    ),
                }
            )
    similarities = (
        pd.concat(similarity_frames, ignore_index=True)
        if similarity_frames
        else pd.DataFrame(columns=SIMILARITY_COLUMNS)
    )
    return similarities, pd.DataFrame.from_records(match_records, columns=MATCH_COLUMNS)


def align_models(
    handle_a: ModelHandle,
    handle_b: ModelHandle,
    *,
    groups: Sequence[str] = VECTOR_GROUPS,
    spaces: Sequence[str] = SPACES,
    allow_input_embedding: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`align_layers` of every layer of two models; first checks (naming both models) that they share a
    vocabulary (same V, and the same token → id map where both have a tokenizer) and have an unembedding."""
    embedding_a = vocabulary_embedding(handle_a, allow_input_embedding=allow_input_embedding)
    embedding_b = vocabulary_embedding(handle_b, allow_input_embedding=allow_input_embedding)
    check_same_vocabulary(handle_a, handle_b, embedding_a, embedding_b)
    return align_layers(
        extract_parameters(handle_a),
        extract_parameters(handle_b),
        embedding_a,
        embedding_b,
        groups=groups,
        spaces=spaces,
    )
