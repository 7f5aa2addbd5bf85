"""The vocabulary space itself: ``E``, its approximate right inverse ``E′``, token labels, input checks.

* ``E`` (d × V) is :meth:`ModelHandle.vocabulary_matrix` — the model's unembedding ``U`` raw (no
  centring, no LayerNorm folding, no bias), as Dar et al.'s code takes ``get_output_embeddings().weight.T``.
  A model without a linear LM head raises :class:`~thinkalike.models.handle.NoUnembeddingError`
  (``allow_input_embedding=True`` accepts the input embedding where the family ties its head to it).
* ``E′`` (V × d): ``"transpose"`` → ``Eᵀ`` (the paper's choice, the default) or ``"pinv"`` →
  ``E⁺ = torch.linalg.pinv(E)``; with ``rank E = d``, ``E E⁺ = I_d``.
* The condition number of ``E`` is ``σ_max / σ_min`` of its singular values (2-norm).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

import torch

from thinkalike.models.handle import ModelHandle, NoUnembeddingError

EPrimeKind = Literal["transpose", "pinv"]
E_PRIME_KINDS: tuple[str, ...] = get_args(EPrimeKind)


class EmbeddingSpaceError(ValueError):
    """Bad input to an embedding-space computation (the message names the argument or models at fault)."""


def check_e_prime_kind(kind: str, name: str = "e_prime") -> None:
    """Raises :class:`EmbeddingSpaceError` unless ``kind`` is one of :data:`E_PRIME_KINDS`."""
    if kind not in E_PRIME_KINDS:
        raise EmbeddingSpaceError(
            f"{name}: unknown E′ kind {kind!r}; use one of {list(E_PRIME_KINDS)} "
            "('transpose': E′ = Eᵀ, 'pinv': E′ = E⁺)"
        )


def check_k(k: int | Iterable[int], vocabulary_size: int, name: str = "k") -> None:
    """Raises :class:`EmbeddingSpaceError` unless every ``k`` is an integer in ``1 … V``."""
    values = [k] if isinstance(k, int) else list(k)
    if not values:
        raise EmbeddingSpaceError(f"{name}: no k given")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EmbeddingSpaceError(f"{name}: k must be a positive integer, got {value!r}")
        if value > vocabulary_size:
            raise EmbeddingSpaceError(f"{name}: k={value} exceeds the vocabulary size V={vocabulary_size}")


def vocabulary_embedding(handle: ModelHandle, *, allow_input_embedding: bool = False) -> torch.Tensor:
    """``E`` (d × V) of ``handle``, detached; raises :class:`NoUnembeddingError` (saying why) without an LM head."""
    try:
        matrix = handle.vocabulary_matrix(allow_input_embedding=allow_input_embedding)
    except NoUnembeddingError as error:
        raise NoUnembeddingError(
            f"embedding-space methods read vectors as v·E with E the linear unembedding: {error}"
        ) from None
    if matrix.dim() != 2 or matrix.shape[0] != handle.d_model:
        raise NoUnembeddingError(
            f"model {handle.name!r}: its unembedding has shape {tuple(matrix.shape)}, not (d_model={handle.d_model}, V)"
        )
    return matrix.detach()


def right_inverse(embedding: torch.Tensor, kind: str = "transpose") -> torch.Tensor:
    """``E′`` (V × d) of ``E`` (d × V): ``Eᵀ`` (``"transpose"``) or ``torch.linalg.pinv(E)`` (``"pinv"``, computed
    in float64 and returned in E's dtype)."""
    check_e_prime_kind(kind)
    if kind == "transpose":
        return embedding.T
    return torch.linalg.pinv(embedding.double()).to(embedding.dtype)


def condition_number(embedding: torch.Tensor) -> float:
    """``σ_max(E) / σ_min(E)`` over the min(d, V) singular values (float64); ``inf`` for a rank-deficient ``E``."""
    singular = torch.linalg.svdvals(embedding.detach().to(torch.float64))
    smallest = float(singular.min())
    return float("inf") if smallest == 0.0 else float(singular.max()) / smallest


def token_labels(tokenizer: Any, token_ids: Sequence[int]) -> list[str]:
    """Readable token strings for ``token_ids`` (the tokenizer's own pieces); ``"#<id>"`` where there is no
    tokenizer or the id is outside it (an unembedding padded beyond the tokenizer's vocabulary)."""
    ids = [int(i) for i in token_ids]
    if tokenizer is None:
        return [f"#{i}" for i in ids]
    size = len(tokenizer)
    pieces = tokenizer.convert_ids_to_tokens([i for i in ids if 0 <= i < size])
    lookup = dict(zip([i for i in ids if 0 <= i < size], pieces))
    return [lookup[i] if lookup.get(i) is not None else f"#{i}" for i in ids]


def token_ids(tokenizer: Any, tokens: Sequence[int | str], vocabulary_size: int, name: str = "tokens") -> list[int]:
    """Token ids of ``tokens`` (ids pass through; strings are looked up as whole vocabulary entries). Raises
    :class:`EmbeddingSpaceError` naming a token that is not in the vocabulary."""
    out = []
    vocabulary = tokenizer.get_vocab() if tokenizer is not None else {}
    for token in tokens:
        if isinstance(token, str):
            if token not in vocabulary:
                raise EmbeddingSpaceError(
                    f"{name}: {token!r} is not a token of the vocabulary"
                    + ("" if tokenizer is not None else " (the model has no tokenizer: give token ids)")
                )
            token = vocabulary[token]
        if not 0 <= int(token) < vocabulary_size:
            raise EmbeddingSpaceError(f"{name}: token id {token} outside 0 … {vocabulary_size - 1}")
        out.append(int(token))
    if not out:
        raise EmbeddingSpaceError(f"{name}: no tokens given")
    return out


def vocabulary_mismatch(
    a: ModelHandle, b: ModelHandle, embedding_a: torch.Tensor, embedding_b: torch.Tensor
) -> str | None:
    """Why ``a`` and ``b`` do not share one vocabulary space (``None`` when they do): their ``E`` must have the
    same V, and where both have a tokenizer, the same token → id map."""
    va, vb = embedding_a.shape[-1], embedding_b.shape[-1]
    if va != vb:
        return (
            f"model {a.name!r} and model {b.name!r} have different vocabularies (V = {va} and {vb}); "
            "the embedding space is shared only by models with one tokenizer"
        )
    ta, tb = a.tokenizer, b.tokenizer
    if ta is not None and tb is not None and ta is not tb and ta.get_vocab() != tb.get_vocab():
        return (
            f"model {a.name!r} and model {b.name!r} use different tokenizers (their token → id maps differ); "
            "the embedding space is shared only by models with one tokenizer"
        )
    return None


def check_same_vocabulary(a: ModelHandle, b: ModelHandle, embedding_a: torch.Tensor, embedding_b: torch.Tensor) -> None:
    """Raises :class:`EmbeddingSpaceError` naming both models when :func:`vocabulary_mismatch` finds a reason."""
    reason = vocabulary_mismatch(a, b, embedding_a, embedding_b)
    if reason is not None:
        raise EmbeddingSpaceError(reason)
