"""keep-k robust invertibility of ``E`` (Dar et al., appendix A), exactly as the paper's code computes it.

``keep_k(Z)`` keeps, in each row of ``Z``, the k entries of largest magnitude with their signs and zeroes the
rest (the paper's ``utils.keep_k`` with ``absolute=True``). For a sample ``X`` (n × d, rows are vectors of
the hidden space):

* **one sample** (the paper's code): ``G = X Xᵀ`` (n × n, diagonal included) and
  ``G′ = keep_k(X E) · keep_k(X E′ᵀ)ᵀ``; the score is the cosine of ``vec G`` and ``vec G′`` over all n²
  entries (one number, not an average of per-pair cosines);
* **two samples** (the paper's text: pairs x, y): ``X`` and ``Y`` drawn independently (disjoint rows of the
  same pool, or two normal draws), ``G = X Yᵀ``, ``G′ = keep_k(X E) · keep_k(Y E′ᵀ)ᵀ`` — no vector meets
  itself, so there is no diagonal.

Without truncation (k = V) ``G′ = X E E′ Xᵀ``: the *exact* score is the cosine of ``X Xᵀ`` and ``X (E E′) Xᵀ``
(:func:`exact_score`); for ``E′ = E⁺`` and ``rank E = d``, ``E E⁺ = I`` and it is 1. Distributions of ``X``:
``N(0, 1)`` entries, FF value rows of every layer (the paper's ``V``), residual states (any array whose last
axis is d, e.g. every layer's block outputs, as the paper's hidden states). The paper reports, for GPT-2
medium at k = 1000, 0.83 for ``Eᵀ`` and 0.10 for ``E⁺`` (it samples n = 1000 vectors in its code, 300 in
its text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from thinkalike.embedding.space import (
    E_PRIME_KINDS,
    check_e_prime_kind,
    check_k,
    condition_number,
    right_inverse,
)

#: The k grid of the issue (appendix A's small and large k), capped at V by :func:`default_k_grid`.
DEFAULT_KS: tuple[int, ...] = (10, 50, 100, 200, 300, 500, 1024, 2048, 4096)
#: Dar et al.'s small k as a share of V (k = 1000 of GPT-2's 50,257): the grid always holds round(0.02·V), so a
#: small vocabulary (the zoo's 394: k = 8) is scored where the paper's claim is made.
PAPER_K_SHARE = 0.02
VARIANTS: tuple[str, ...] = ("one_sample", "two_sample")
SCORE_COLUMNS = ["distribution", "variant", "e_prime", "k", "n", "score", "condition_number"]


def keep_k(values: torch.Tensor, k: int) -> torch.Tensor:
    """``values`` with all but the ``k`` largest-magnitude entries of each row (last axis) set to 0, signs kept."""
    _, index = values.abs().topk(k, dim=-1)
    return torch.zeros_like(values).scatter_(-1, index, values.gather(-1, index))


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.reshape(-1).double(), b.reshape(-1).double()
    return float(a @ b / (a.norm() * b.norm()))


def keep_k_score(
    x: torch.Tensor,
    embedding: torch.Tensor,
    k: int,
    e_prime: str = "transpose",
    *,
    y: torch.Tensor | None = None,
    inverse: torch.Tensor | None = None,
) -> float:
    """cos(vec G, vec G′) of the module docstring: one sample ``x`` (``y`` None, ``G = X Xᵀ``) or two samples
    (``G = X Yᵀ``). ``inverse``: a precomputed ``E′`` (V × d) of kind ``e_prime``."""
    check_e_prime_kind(e_prime)
    check_k(k, embedding.shape[1])
    inverse = right_inverse(embedding, e_prime) if inverse is None else inverse
    other = x if y is None else y
    exact = x @ other.T
    estimate = keep_k(x @ embedding, k) @ keep_k(other @ inverse.T, k).T
    return _cosine(exact, estimate)


def exact_score(
    x: torch.Tensor, embedding: torch.Tensor, e_prime: str = "transpose", *, y: torch.Tensor | None = None
) -> float:
    """cos(vec X Yᵀ, vec X (E E′) Yᵀ) (``Y = X`` by default): the keep-k score without truncation (k = V)."""
    inverse = right_inverse(embedding, e_prime)
    other = x if y is None else y
    return _cosine(x @ other.T, x @ (embedding @ inverse) @ other.T)


def paper_k(vocabulary_size: int) -> int:
    """The k at Dar et al.'s share of V, ``max(1, round(PAPER_K_SHARE · V))``."""
    return max(1, round(PAPER_K_SHARE * vocabulary_size))


def default_k_grid(vocabulary_size: int, ks: Iterable[int] = DEFAULT_KS) -> list[int]:
    """``ks`` below V, :func:`paper_k` (2 % of V), then V itself (the untruncated point, equal to
    :func:`exact_score`)."""
    return sorted({k for k in ks if k < vocabulary_size} | {paper_k(vocabulary_size), vocabulary_size})


def sample_rows(pool: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` distinct rows of ``pool`` (any shape ``(..., d)``, flattened to rows) drawn uniformly."""
    rows = pool.reshape(-1, pool.shape[-1])
    if not 1 <= n <= rows.shape[0]:
        raise ValueError(f"cannot draw {n} distinct rows from a pool of {rows.shape[0]}")
    return rows[torch.randperm(rows.shape[0], generator=generator)[:n].to(rows.device)]


def draw_samples(
    pool: torch.Tensor | None,
    n: int,
    d: int,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> dict[str, tuple]:
    """``{"one_sample": (X,), "two_sample": (X, Y)}``: from ``pool`` (None: ``N(0, 1)`` draws) — X of n rows;
    X and Y disjoint rows of ``pool`` (n each, or half the pool when it is smaller than 2n) or two normal draws."""
    if pool is None:
        x = torch.randn(n, d, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype)
        y = torch.randn(n, d, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype)
        return {"one_sample": (x,), "two_sample": (x, y)}
    if pool.shape[-1] != d:
        raise ValueError(f"the pool's vectors have {pool.shape[-1]} dimensions, E has d = {d}")
    pool = pool.reshape(-1, d).to(device=device, dtype=dtype)
    if pool.shape[0] < 2:
        raise ValueError(f"a pool of {pool.shape[0]} vector(s) cannot give two disjoint samples")
    x = sample_rows(pool, min(n, pool.shape[0]), generator)
    half = min(n, pool.shape[0] // 2)
    pair = sample_rows(pool, 2 * half, generator)
    return {"one_sample": (x,), "two_sample": (pair[:half], pair[half:])}


def keep_k_scores(
    embedding: torch.Tensor,
    pools: Mapping[str, torch.Tensor | None],
    *,
    ks: Sequence[int] | None = None,
    e_primes: Sequence[str] = E_PRIME_KINDS,
    n: int = 1000,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> pd.DataFrame:
    """The score table ``distribution, variant, e_prime, k, n, score, condition_number`` for every distribution
    (``pools``: name → pool of vectors, ``None`` for ``N(0, 1)``), both variants, every ``E′`` kind and every k
    (default :func:`default_k_grid`; a k above V raises). ``n``: vectors per sample (the paper's code: 1000)."""
    embedding = embedding.detach().to(dtype)
    d, vocabulary = embedding.shape
    for kind in e_primes:
        check_e_prime_kind(kind, "e_primes")
    ks = default_k_grid(vocabulary) if ks is None else sorted(set(ks))
    check_k(ks, vocabulary, "ks")
    if n < 1:
        raise ValueError(f"n: need at least one vector per sample, got {n}")
    generator = torch.Generator().manual_seed(seed)
    inverses = {kind: right_inverse(embedding, kind) for kind in e_primes}
    condition = condition_number(embedding)
    records = []
    for distribution, pool in pools.items():
        samples = draw_samples(pool, n, d, generator, dtype, embedding.device)
        for variant, sample in samples.items():
            x, y = sample[0], sample[-1]  # one sample: y is x
            exact = x @ y.T
            projected_x = x @ embedding
            for kind, inverse in inverses.items():
                projected_y = y @ inverse.T
                for k in ks:
                    estimate = keep_k(projected_x, k) @ keep_k(projected_y, k).T
                    records.append(
                        {
                            "distribution": distribution,
                            "variant": variant,
                            "e_prime": kind,
                            "k": k,
                            "n": x.shape[0],
                            "score": _cosine(exact, estimate),
                            "condition_number": condition,
                        }
                    )
    return pd.DataFrame.from_records(records, columns=SCORE_COLUMNS)


def ff_value_pool(vectors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The FF value rows of every layer stacked into one pool (the paper's ``V`` of all layers)."""
    return torch.cat([v.reshape(-1, v.shape[-1]) for v in vectors])


def residual_pool(states: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Residual states (any array whose last axis is d: tokens × d, or layers × tokens × d) as one pool of rows."""
    tensor = torch.as_tensor(np.asarray(states)) if not isinstance(states, torch.Tensor) else states
    return tensor.reshape(-1, tensor.shape[-1])
