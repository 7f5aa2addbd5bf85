"""What GGML block quantisation does to the embedding-space analyses: round trips and float-vs-quantised checks.

A GGUF checkpoint stores each weight matrix in blocks of 32 consecutive entries of its last (contiguous) axis;
the analyses see the dequantised values. The two block formats met here (``gguf.quants``, bit-exact with
``ggml-quants.c``), for a block ``x_1 … x_32``:

* **Q4_1** (SmolLM2's GGUF: every attention and FF matrix): ``m = min x``, ``d = (max x − m) / 15``,
  ``q_i = clip(trunc((x_i − m) / d + 0.5), 0, 15)``; stored: ``q_i`` (4 bits), ``d`` and ``m`` as float16;
  dequantised ``x̂_i = d₁₆ q_i + m₁₆``. Error per entry at most ``d / 2`` plus the float16 rounding of ``d``
  and ``m`` (``≤ 2⁻¹¹ (|m| + 15 d)``): a block's spread is cut into 16 levels.
* **Q8_0** (SmolLM2's GGUF: ``token_embd``, the tied E): ``d = max |x| / 127``, ``q_i = round(x_i / d)`` in
  −127 … 127; stored: ``q_i`` (8 bits) and ``d`` as float16; ``x̂_i = d₁₆ q_i``.

:func:`roundtrip` (:func:`q4_1_roundtrip`, :func:`q8_0_roundtrip`) is quantise-then-dequantise through the
``gguf`` package's public ``gguf.quants.quantize`` / ``gguf.quants.dequantize``; a last axis that is not a
multiple of 32 is refused. Quantise a matrix *as the checkpoint stores it*: a torch ``Linear`` weight
(out × in) or an embedding (V × d), so the blocks run along the same axis as in the file.

Comparisons (reference: float; other: the round trip):

* :func:`relative_frobenius_error`: ``‖A − Â‖_F / ‖A‖_F``;
* :func:`keep_k_comparison`: the keep-k scores of :func:`thinkalike.embedding.invertibility.keep_k_scores`
  with the float E and with the quantised E on the *same* sample (same seed: the same Gaussian draws, the same
  rows of a pool), both ``E′`` kinds; :func:`keep_k_gaps`: ``score(Eᵀ) − score(E⁺)`` of each;
* :func:`reading_overlap`: the vocabulary reading of a vector ``v`` is the top-k tokens of ``v·E`` (sign ``+``)
  and of ``−v·E`` (sign ``−``) (:func:`thinkalike.embedding.reading.top_tokens`); the agreement of two readings
  is the Jaccard overlap ``|A ∩ B| / |A ∪ B|`` of their token sets (:func:`jaccard`), 1 when identical.
  Conditions: ``E``: the float vector read through the quantised E; ``E and vectors``: the quantised vector
  through the quantised E (a GGUF, where every matrix is quantised).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from thinkalike.embedding.invertibility import keep_k_scores
from thinkalike.embedding.reading import top_tokens

#: GGML's block length for Q4_1 and Q8_0: entries of the last axis quantised together.
BLOCK_SIZE = 32
#: The block formats :func:`roundtrip` knows (names of ``gguf.GGMLQuantizationType``).
QUANT_TYPES: tuple[str, ...] = ("Q4_1", "Q8_0")
#: The k grid of ``conf/real``'s keep-k (Dar et al. App. A: 10 … 500, and 1000 on 300 Gaussian vectors).
REAL_KS: tuple[int, ...] = (10, 50, 100, 200, 300, 500, 1000)
READING_KS: tuple[int, ...] = (10, 50)
KEEP_K_COLUMNS = ["distribution", "variant", "e_prime", "k", "n", "float", "quantised", "difference"]
GAP_COLUMNS = ["distribution", "variant", "k", "float_gap", "quantised_gap", "gap_difference"]
OVERLAP_COLUMNS = ["group", "condition", "sign", "k", "vectors", "mean_jaccard", "min_jaccard", "identical_share"]


def _as_numpy(matrix: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().cpu().numpy()
    return np.ascontiguousarray(matrix, dtype=np.float32)


def roundtrip(matrix: np.ndarray | torch.Tensor, qtype: str = "Q4_1") -> np.ndarray:
    """``matrix`` quantised to GGML ``qtype`` in blocks of 32 along its last axis and dequantised (float32)."""
    import gguf

    if qtype not in QUANT_TYPES:
        raise ValueError(f"qtype: unknown block format {qtype!r}; use one of {list(QUANT_TYPES)}")
    array = _as_numpy(matrix)
    if array.ndim == 0 or array.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"{qtype} quantises blocks of {BLOCK_SIZE} along the last axis; got shape {array.shape}")
    kind = gguf.GGMLQuantizationType[qtype]
    return np.asarray(gguf.quants.dequantize(gguf.quants.quantize(array, kind), kind), dtype=np.float32).reshape(
        array.shape
    )


def q4_1_roundtrip(matrix: np.ndarray | torch.Tensor) -> np.ndarray:
    """:func:`roundtrip` with Q4_1 (SmolLM2's GGUF's attention and FF matrices)."""
    return roundtrip(matrix, "Q4_1")


def q8_0_roundtrip(matrix: np.ndarray | torch.Tensor) -> np.ndarray:
    """:func:`roundtrip` with Q8_0 (SmolLM2's GGUF's token embedding)."""
    return roundtrip(matrix, "Q8_0")


def relative_frobenius_error(reference: np.ndarray | torch.Tensor, other: np.ndarray | torch.Tensor) -> float:
    """``‖reference − other‖_F / ‖reference‖_F`` in float64."""
    a, b = _as_numpy(reference).astype(np.float64), _as_numpy(other).astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def keep_k_comparison(
    reference: torch.Tensor,
    quantised: torch.Tensor,
    *,
    pools: Mapping[str, torch.Tensor | None] | None = None,
    quantised_pools: Mapping[str, torch.Tensor | None] | None = None,
    ks: Sequence[int] = REAL_KS,
    n: int = 300,
    seed: int = 0,
) -> pd.DataFrame:
    """keep-k scores with the float E (``reference``, d × V) and the quantised E (d × V) on the same samples:
    ``distribution, variant, e_prime, k, n, float, quantised, difference`` (``quantised − float``). ``pools``
    as :func:`~thinkalike.embedding.invertibility.keep_k_scores` (default: Gaussian vectors only);
    ``quantised_pools``: the pools the quantised E is scored on (default ``pools``), e.g. quantised FF values."""
    if reference.shape != quantised.shape:
        raise ValueError(f"E shapes differ: {tuple(reference.shape)} and {tuple(quantised.shape)}")
    pools = {"gaussian": None} if pools is None else pools
    quantised_pools = pools if quantised_pools is None else quantised_pools
    if set(quantised_pools) != set(pools):
        raise ValueError(f"quantised_pools has {sorted(quantised_pools)}, pools has {sorted(pools)}")
    keys = ["distribution", "variant", "e_prime", "k", "n"]
    a = keep_k_scores(reference, pools, ks=ks, n=n, seed=seed)
    b = keep_k_scores(quantised, quantised_pools, ks=ks, n=n, seed=seed)
    table = a[[*keys, "score"]].merge(b[[*keys, "score"]], on=keys, suffixes=("_float", "_quantised"))
    table = table.rename(columns={"score_float": "float", "score_quantised": "quantised"})
    table["difference"] = table["quantised"] - table["float"]
    return table[KEEP_K_COLUMNS]


def keep_k_gaps(comparison: pd.DataFrame) -> pd.DataFrame:
    """``score(Eᵀ) − score(E⁺)`` (what the scorecard reads) with float and quantised E, per distribution,
    variant and k of a :func:`keep_k_comparison` table."""
    wide = comparison.pivot_table(
        index=["distribution", "variant", "k"], columns="e_prime", values=["float", "quantised"]
    )
    out = pd.DataFrame(
        {
            "float_gap": wide[("float", "transpose")] - wide[("float", "pinv")],
            "quantised_gap": wide[("quantised", "transpose")] - wide[("quantised", "pinv")],
        }
    ).reset_index()
    out["gap_difference"] = out["quantised_gap"] - out["float_gap"]
    return out[GAP_COLUMNS]


def jaccard(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> np.ndarray:
    """Per row, ``|A ∩ B| / |A ∪ B|`` of the token-id sets of row i of ``a`` and row i of ``b`` (n × k each)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"need two n × k arrays of the same shape; got {a.shape} and {b.shape}")
    out = np.empty(a.shape[0])
    for i, (row_a, row_b) in enumerate(zip(a, b, strict=True)):
        set_a, set_b = set(row_a.tolist()), set(row_b.tolist())
        out[i] = len(set_a & set_b) / len(set_a | set_b)
    return out


def reading_overlap(
    vectors: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    reference: torch.Tensor,
    quantised: torch.Tensor,
    ks: Sequence[int] = READING_KS,
) -> pd.DataFrame:
    """Agreement of vocabulary readings, float against quantised: ``vectors`` maps a group name to
    ``(float vectors, quantised vectors)`` (n × d each); E is ``reference`` / ``quantised`` (d × V). Rows
    ``group, condition, sign, k, vectors, mean_jaccard, min_jaccard, identical_share`` for the conditions
    ``E`` (float vectors through quantised E) and ``E and vectors`` (quantised vectors through quantised E)."""
    records = []
    widest = max(ks)
    for group, (plain, rounded) in vectors.items():
        for sign, largest in (("+", True), ("-", False)):
            base = top_tokens(plain, reference, widest, largest=largest)[1].numpy()
            for condition, x in (("E", plain), ("E and vectors", rounded)):
                other = top_tokens(x, quantised, widest, largest=largest)[1].numpy()
                for k in ks:  # top_tokens is sorted best first: the top k is the first k of the top max(ks)
                    scores = jaccard(base[:, :k], other[:, :k])
                    records.append(
                        {
                            "group": group,
                            "condition": condition,
                            "sign": sign,
                            "k": k,
                            "vectors": len(scores),
                            "mean_jaccard": float(scores.mean()),
                            "min_jaccard": float(scores.min()),
                            "identical_share": float((scores == 1.0).mean()),
                        }
                    )
    return pd.DataFrame.from_records(records, columns=OVERLAP_COLUMNS)
