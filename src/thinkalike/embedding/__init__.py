"""Transformer parameters in the vocabulary ("embedding") space — Dar et al. 2022, "Analyzing Transformers
in Embedding Space" (no Kedro import; functions take handles / tensors and return tensors or pandas tables).

Conventions (those of the paper's public code)
----------------------------------------------
* ``E`` is the d × V matrix :meth:`ModelHandle.unembedding_matrix` returns (the output embedding), **raw**:
  no centring, no LayerNorm folding, no bias (:func:`space.vocabulary_embedding`; a model without a linear
  LM head raises :class:`~thinkalike.models.handle.NoUnembeddingError`).
* A d-vector ``v`` (row) is read as ``v·E``: V logits, one per vocabulary item.
* ``E′`` (V × d) is E's approximate right inverse: ``"transpose"`` → ``Eᵀ`` (default, the paper's choice)
  or ``"pinv"`` → ``E⁺ = torch.linalg.pinv(E)``.
* Row-vector convention ``x ↦ x W`` for every weight (TransformerLens shapes from
  :meth:`ModelHandle.layer_parameters`, biases omitted). FF keys are the columns of ``FF_in``, FF values the
  rows of ``FF_out``; per head ``W_VO = W_V W_O`` and ``W_QK = W_Q W_Kᵀ`` (d × d) are read as the V × V
  matrices ``E′ W_VO E`` (rows: input token, columns: output token) and ``E′ W_QK E′ᵀ`` (rows: query-side
  token, columns: key-side token) — only their top-k entries, from the factors, never the V × V matrix.

Modules: :mod:`~thinkalike.embedding.space` (E, E′, checks, token labels), :mod:`~.parameters` (parameter
vectors per family), :mod:`~.topk` (top-k of a factored product by row blocks), :mod:`~.reading` (tables and
report), :mod:`~.invertibility` (keep-k robust invertibility, appendix A), :mod:`~.alignment` (layer
alignment, §5.1), :mod:`~.zero_shot` (zero-shot stitching map, §5.2), :mod:`~.overlap` (key–value overlap of
top-k token sets, appendix B, fig. 6), :mod:`~.token_structure` (part-of-speech coherence of top-k tokens, §3
measured), :mod:`~.figures` (the pipeline's figures).
"""

from thinkalike.embedding.alignment import (
    ProjectionKernel,
    align_layers,
    align_models,
    diagonal_fraction,
    kernelized_pearson,
    layer_similarity,
    match_layers,
    projection_kernel,
    raw_pearson,
)
from thinkalike.embedding.invertibility import (
    DEFAULT_KS,
    default_k_grid,
    exact_score,
    ff_value_pool,
    keep_k,
    keep_k_score,
    keep_k_scores,
    paper_k,
    residual_pool,
)
from thinkalike.embedding.overlap import pair_overlap, summarise_overlap
from thinkalike.embedding.reading import (
    knowledge_lookup,
    read_head_interactions,
    read_vectors,
    readings_report,
    top_tokens,
)
from thinkalike.embedding.space import (
    E_PRIME_KINDS,
    EmbeddingSpaceError,
    check_e_prime_kind,
    check_k,
    check_same_vocabulary,
    condition_number,
    right_inverse,
    vocabulary_embedding,
)
from thinkalike.embedding.topk import TopEntries, top_k_of_product
from thinkalike.embedding.weights import (
    INTERACTION_GROUPS,
    VECTOR_GROUPS,
    ModelParameters,
    extract_parameters,
)
from thinkalike.embedding.zero_shot import zero_shot_map, zero_shot_stitch

__all__ = [
    "DEFAULT_KS",
    "E_PRIME_KINDS",
    "INTERACTION_GROUPS",
    "VECTOR_GROUPS",
    "EmbeddingSpaceError",
    "ModelParameters",
    "ProjectionKernel",
    "TopEntries",
    "align_layers",
    "align_models",
    "check_e_prime_kind",
    "check_k",
    "check_same_vocabulary",
    "condition_number",
    "default_k_grid",
    "paper_k",
    "diagonal_fraction",
    "exact_score",
    "extract_parameters",
    "ff_value_pool",
    "keep_k",
    "keep_k_score",
    "keep_k_scores",
    "kernelized_pearson",
    "knowledge_lookup",
    "layer_similarity",
    "match_layers",
    "pair_overlap",
    "projection_kernel",
    "raw_pearson",
    "read_head_interactions",
    "read_vectors",
    "readings_report",
    "residual_pool",
    "right_inverse",
    "summarise_overlap",
    "top_k_of_product",
    "top_tokens",
    "vocabulary_embedding",
    "zero_shot_map",
    "zero_shot_stitch",
]
