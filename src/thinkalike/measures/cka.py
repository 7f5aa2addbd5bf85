r"""Linear CKA between all layer pairs of two models, one minibatch at a time.

Definitions (rows are tokens). For one layer's activations X (n × d), centre the columns,
Xc = X − 1μᵀ, and let K = XcXcᵀ with diagonal k (kᵢ = ‖xᵢ‖²), K̃ = K − diag(k) the Gram
with zeroed diagonal, u = K1 its row sums and r = K̃1 = u − k. Likewise L, l, v, s for Y.

- Unbiased HSIC₁ (Song et al. 2012; Nguyen et al. 2021), n ≥ 4::

      HSIC₁(K, L) = [tr(K̃L̃) + (1ᵀK̃1)(1ᵀL̃1)/((n−1)(n−2)) − (2/(n−2))·1ᵀK̃L̃1] / (n(n−3))

  with 1ᵀK̃L̃1 = (K̃1)·(L̃1) = r·s and 1ᵀK̃1 = Σr.
- Biased HSIC₀ = tr(KHLH)/(n−1)², H = I − 11ᵀ/n, evaluated for any K as
  [tr(KL) − (2/n)(K1)·(L1) + (1ᵀK1)(1ᵀL1)/n²]/(n−1)² with tr(KL) = tr(K̃L̃) + k·l
  (for exactly centred X this is ‖XcᵀYc‖²_F/(n−1)²).
- CKA = HSIC(K, L) / sqrt(HSIC(K, K)·HSIC(L, L)).

Only tr(K̃L̃) is expensive; it has two forms, chosen per batch by :func:`choose_form`:

- ``"gram"``: tr(K̃L̃) = vec(K̃)·vec(L̃). Every layer's Gram is computed once, and all
  tr(K̃ᵢK̃ⱼ) of the stacked layers of both models (cross and self terms) come from one
  product of flattened Grams, F Fᵀ. The Grams are symmetric, so only their strict upper
  triangle is formed and the product doubled: row blocks of ``block_rows`` tokens against the
  tokens from the block's first row on, the diagonal square cut to its strict upper part.
  The Grams (in ``gram_dtype``; see Precision) are never held whole; each block
  is cast to float64 before its contribution F_blk F_blkᵀ is added.
- ``"feature"``: tr(K̃L̃) = ‖XcᵀYc‖²_F − k·l, computed in float64 (cheap when d < n).

Precision. The float64 reference is CKA computed in float64 from the same input values
(``tests/reference_cka.py``). Columns are centred in the Gram dtype (first token subtracted
first, so constant columns become exactly 0); Grams are formed in ``gram_dtype`` and cast to
float64 block by block, before anything is summed; all reductions (products of flattened
Grams, vectors, HSIC formulas, aggregation) are float64. The Gram dtype decides the error:

- float64 Grams — float64 input, CUDA with TF32 matmuls allowed, or batches of fewer than
  :data:`FLOAT32_GRAMS_FROM` (256) tokens, whatever the input dtype: |ΔCKA| ≤ 1e-12 (largest
  measured 2e-13, at n = 4). Small batches need this: the unbiased HSIC is a difference of
  terms of similar size, and at n = 4 it amplifies float32 Gram rounding (relative 6e-8 per
  entry) to |ΔCKA| ≈ 1e-5 (n = 8: 8e-8, n = 64: 1e-8). Centring in float64 does not help:
  the error is the Grams' own rounding. Gram work per token grows with n (n·d multiply-adds
  per token and Gram), so float64 below 256 tokens costs no more per token than float32 at
  n = 1024, although float64 costs more than float32 at the same small n
  (``benchmarks/cka_speed.py`` times the grid).
- float32 Grams — ≤32-bit input on CPU (or CUDA without TF32) and n ≥ 256, about twice as
  fast as float64 on CPU: the only float32 rounding is that of individual Gram entries.
  |ΔCKA| < 1e-8 on Gaussian-like features: largest 8e-9 over 576 random cases (shared latent
  + noise of 0.3–3σ, column offsets up to 100σ, n = 256…2048, d = 8…768), 4e-10 on the
  benchmark's 12×12-layer data (n = 1024, d = 768). Rows of very unequal norm raise it: one
  attention-sink row of 50× norm, or Student-t₂ features, gave up to 3e-7. Pass
  ``gram_dtype=torch.float64`` (about 2× the Gram cost) when such data needs better than 1e-6.

Degenerate input: n < 4 raises; NaN/Inf raises naming model and layer. A layer that is
constant in a batch (zero variance: its Gram is exactly 0, so all its HSIC terms are 0) makes
that batch's CKA undefined for its row (model a) or column (model b); a ``RuntimeWarning``
names the model, the layer and the batch. :class:`CKAAccumulator` then either leaves the whole
row/column NaN in the aggregate (default: one constant batch undefines the layer's CKA for the
run, in both aggregations) or, with ``skip_constant_layers=True``, leaves out only that batch
for that layer's cells (each cell's batch count is reported). Minibatch aggregation and
significance: see :mod:`thinkalike.measures.significance`.

Cost model (multiply-adds per batch; float64 work counted twice when Grams are float32), for
La layers of width da, Lb of width db, Lt = La + Lb stacked layers (La when a model is
compared with itself) and P permutations:

- gram:    n²/2·(La·da + Lb·db) + 2·n²/2·Lt² + P·(G·Lb·n² + 2·La·Lb·n²)
- feature: 2·n·(La·Lb·da·db + La·da² + Lb·db²) + P·n·La·Lb·da·db

G = :data:`GATHER_COST`: a permuted Gram is a random gather of Lb·n² elements, memory-bound,
so a gathered element takes the time of G multiply-adds of a GEMM, which run from cache
(``benchmarks/cka_permutations.py`` times the form this cost model picks against the other
form at the zoo's shapes). The feature form's permutations run in float32 (``XcᵀP·Yc``
of the centred float64 inputs cast once per batch: one float32 GEMM per permutation instead
of a float64 one): a shuffled pair's HSIC is a null draw, compared only with the
observed value, and float32's relative error (~1e-7 of ‖XcᵀYc‖²) is far below the null's
spread; the observed values stay float64.

The gram form's memory is one block (Lt·block_rows·n) unless permutations are requested,
which keep the full float64 Grams of both models (Lt·n²·8 bytes).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import torch
from torch import Tensor

from thinkalike.measures.hsic import unbiased_hsic
from thinkalike.measures.significance import (
    Aggregation,
    ConfidenceInterval,
    aggregate_cell_sums,
    bootstrap_ci,
    check_aggregation,
    cka_from_hsic,
    permutation_p_values,
)

Estimator = Literal["unbiased", "biased"]
Form = Literal["auto", "gram", "feature"]
ESTIMATORS: tuple[str, ...] = get_args(Estimator)
FORMS: tuple[str, ...] = get_args(Form)
MIN_TOKENS = 4
FLOAT32_GRAMS_FROM = 256  # batches with fewer tokens get float64 Grams (precision: module docstring)
# 4 blocks at n = 1024: a smaller block forms less of its diagonal square's lower half (fewer ops), a larger one makes
# fewer, larger products (``benchmarks/cka_speed.py`` times the grid)
DEFAULT_BLOCK_ROWS = 256
_FEATURE_CHUNK_BYTES = 64 * 2**20
GATHER_COST = 200  # multiply-adds a gathered Gram element costs (cost model: module docstring)
_F64 = torch.float64

ActivationsLike = Tensor | np.ndarray


# --------------------------------------------------------------------------- inputs


def _as_activations(acts: ActivationsLike, model: str, device: torch.device | None) -> Tensor:
    """(L, n, d) tensor on ``device`` (a 2-D (n, d) input is one layer); no grad, float."""
    tensor = acts if isinstance(acts, Tensor) else torch.from_numpy(np.ascontiguousarray(acts))
    tensor = tensor.detach()
    if device is not None:
        tensor = tensor.to(device)
    if tensor.ndim == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.ndim != 3:
        raise ValueError(
            f"activations of model {model!r} must have shape (layers, tokens, features); got {tuple(tensor.shape)}"
        )
    if not tensor.is_floating_point():
        tensor = tensor.to(_F64)
    return tensor


def _check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}; got {estimator!r}")


def _check_token_counts(n_a: int, n_b: int, model_a: str, model_b: str) -> None:
    if n_a != n_b:
        raise ValueError(
            f"both models must see the same tokens: model {model_a!r} has {n_a} tokens "
            f"in this batch, model {model_b!r} has {n_b}"
        )
    if n_a < MIN_TOKENS:
        raise ValueError(
            f"CKA needs at least {MIN_TOKENS} tokens per batch (the unbiased HSIC divides by n-3); got n={n_a}"
        )


def default_gram_dtype(input_dtype: torch.dtype, device: torch.device, n_tokens: int | None = None) -> torch.dtype:
    """The Gram dtype used unless ``gram_dtype`` is given (precision: module docstring).

    float64 for float64 input, for batches of fewer than :data:`FLOAT32_GRAMS_FROM` tokens
    (``n_tokens``; None means a large batch), and on CUDA with TF32 matmuls allowed (float32
    Grams would lose ~3 digits there); float32 otherwise.
    """
    if input_dtype == _F64:
        return _F64
    if n_tokens is not None and n_tokens < FLOAT32_GRAMS_FROM:
        return _F64
    if device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        return _F64
    return torch.float32


def choose_form(
    n: int,
    layers_a: int,
    dim_a: int,
    layers_b: int,
    dim_b: int,
    *,
    same_model: bool = False,
    n_permutations: int = 0,
    gram_dtype: torch.dtype = torch.float32,
) -> Literal["gram", "feature"]:
    """Pick the cheaper way to get tr(K̃L̃) from the cost model in the module docstring."""
    w64 = 2.0 if gram_dtype != _F64 else 1.0
    widths_b = 0 if same_model else layers_b * dim_b
    stacked = layers_a if same_model else layers_a + layers_b
    half = n * n / 2.0
    gram = half * (layers_a * dim_a + widths_b) + w64 * half * stacked**2
    gram += n_permutations * (GATHER_COST * layers_b * n * n + w64 * layers_a * layers_b * n * n)
    pairs = layers_a * layers_b * dim_a * dim_b
    selves = layers_a * dim_a**2 + (0 if same_model else layers_b * dim_b**2)
    feature = w64 * n * (pairs + selves) + n_permutations * n * pairs  # float32 permutations
    return "feature" if feature < gram else "gram"


# --------------------------------------------------------------------------- workspace


class _Workspace:
    """Reusable scratch buffers, so large temporaries are not re-allocated every batch."""

    def __init__(self) -> None:
        self._buffers: dict[str, Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        numel = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < numel or buffer.dtype != dtype or buffer.device != device:
            buffer = torch.empty(numel, dtype=dtype, device=device)
            self._buffers[name] = buffer
        return buffer[:numel].view(shape)


# --------------------------------------------------------------------------- per-layer parts


def _center(x: Tensor, dtype: torch.dtype, out: Tensor | None, model: str) -> Tensor:
    """Column-centre each layer: (X − 1x₀ᵀ) − mean(X − 1x₀ᵀ).

    Subtracting the first token first makes constant columns exactly zero, so a constant layer
    has an exactly zero Gram. Raises if the activations hold NaN/Inf, naming the layers.
    """
    x = x.to(dtype)
    centred = torch.sub(x, x[:, :1], out=out) if out is not None else x - x[:, :1]
    column_sums = centred.sum(dim=1, keepdim=True)
    if not bool(torch.isfinite(column_sums).all()):
        bad = (~torch.isfinite(x)).flatten(1).any(dim=1).nonzero().flatten().tolist()
        if bad:
            raise ValueError(f"activations of model {model!r} contain NaN or Inf at layer(s) {bad}")
        raise ValueError(f"activations of model {model!r} overflow {dtype} when summed; pass gram_dtype=torch.float64")
    return centred.sub_(column_sums / x.shape[1])


def _row_sums(xc: Tensor) -> Tensor:
    """u = K1 = Xc(Xcᵀ1) per layer, (L, n) float64."""
    column_sums = xc.sum(dim=1, keepdim=True)
    return torch.bmm(xc, column_sums.mT).squeeze(-1).to(_F64)


@dataclass
class _Moments:
    """Cheap per-layer vectors of one model on one batch (float64)."""

    k: Tensor  # (L, n) diag of K
    u: Tensor  # (L, n) K1

    @property
    def r(self) -> Tensor:  # K̃1
        return self.u - self.k

    @property
    def k_sum(self) -> Tensor:  # tr K
        return self.k.sum(-1)

    @property
    def u_sum(self) -> Tensor:  # 1ᵀK1
        return self.u.sum(-1)

    @property
    def r_sum(self) -> Tensor:  # 1ᵀK̃1
        return self.u_sum - self.k_sum

    def permuted(self, perm: Tensor) -> _Moments:
        return _Moments(self.k[:, perm], self.u[:, perm])


def _moments(diag: Tensor, xc: Tensor, form: str) -> _Moments:
    """Moments of one side. K1 = Xc(Xcᵀ1) vanishes for centred X; the feature form (float64)
    evaluates it, the gram form takes it as 0, saving two passes over the activations: the
    centring residue |Xcᵀ1| ~ ε·√n·σ per column moves CKA by < 1e-9 (measured on float32
    input at n = 1024, d = 768), less than the float32 Grams' own rounding."""
    return _Moments(diag, _row_sums(xc) if form == "feature" else torch.zeros_like(diag))


def _hsic(trace: Tensor, a: _Moments, b: _Moments, n: int, estimator: Estimator, *, paired: bool) -> Tensor:
    """HSIC from tr(K̃L̃) and the moments (formulas in the module docstring).

    ``paired=False``: all pairs (La, Lb); ``paired=True``: layer i of a with layer i of b.
    """
    if paired:

        def dot(p: Tensor, q: Tensor) -> Tensor:
            return torch.linalg.vecdot(p, q)

        def outer(p: Tensor, q: Tensor) -> Tensor:
            return p * q
    else:

        def dot(p: Tensor, q: Tensor) -> Tensor:
            return p @ q.mT

        def outer(p: Tensor, q: Tensor) -> Tensor:
            return p[:, None] * q[None, :]

    if estimator == "unbiased":
        return unbiased_hsic(trace, outer(a.r_sum, b.r_sum), dot(a.r, b.r), n)
    numerator = trace + dot(a.k, b.k) - 2.0 / n * dot(a.u, b.u) + outer(a.u_sum, b.u_sum) / n**2
    return numerator / (n - 1) ** 2


# --------------------------------------------------------------------------- the two forms


def _gram_products(
    xs: list[Tensor], ws: _Workspace, *, block_rows: int, keep_grams: bool
) -> tuple[Tensor, Tensor, Tensor | None]:
    """tr(K̃ᵢK̃ⱼ) for all stacked layers i, j of ``xs``, the Grams' diagonals, optionally the Grams.

    Upper block triangle only (module docstring); returns (P (Lt, Lt), k (Lt, n), grams
    (Lt, n²) float64 with zero diagonal, or None).
    """
    n, dtype, device = xs[0].shape[1], xs[0].dtype, xs[0].device
    total = sum(x.shape[0] for x in xs)
    products = torch.zeros(total, total, dtype=_F64, device=device)
    diag = torch.empty(total, n, dtype=_F64, device=device)
    grams = torch.empty(total, n, n, dtype=_F64, device=device) if keep_grams else None
    for r0 in range(0, n, block_rows):
        r1 = min(r0 + block_rows, n)
        rows, cols = r1 - r0, n - r0
        block = ws.get("gram_block", (total, rows, cols), dtype, device)
        start = 0
        for x in xs:
            torch.bmm(x[:, r0:r1], x[:, r0:].mT, out=block[start : start + x.shape[0]])
            start += x.shape[0]
        if dtype != _F64:
            block = ws.get("gram_block64", (total, rows, cols), _F64, device).copy_(block)
        square = block[:, :, :rows]
        diag[:, r0:r1] = square.diagonal(dim1=1, dim2=2)
        if grams is not None:
            grams[:, r0:r1, r0:] = block
            grams[:, r1:, r0:r1] = block[:, :, rows:].mT
        square.triu_(1)  # keep i < j only: zero diagonal, lower part counted by the doubling
        flat = block.view(total, -1)
        products.addmm_(flat, flat.mT)
    if grams is not None:
        grams.diagonal(dim1=1, dim2=2).zero_()
    return 2.0 * products, diag, None if grams is None else grams.view(total, n * n)


def _feature_cross(xa: Tensor, xb: Tensor) -> Tensor:
    """‖XᵢᵀYⱼ‖²_F for all layer pairs, (La, Lb), float64 out; computed in the inputs' dtype (float64, or float32
    for the permutation null), chunked over layers of a."""
    (la, n, da), (lb, _, db) = xa.shape, xb.shape
    y_all = xb.permute(1, 0, 2).reshape(n, lb * db)
    chunk = max(1, _FEATURE_CHUNK_BYTES // (xa.element_size() * da * lb * db))
    out = torch.empty(la, lb, dtype=_F64, device=xa.device)
    for i0 in range(0, la, chunk):
        xs = xa[i0 : i0 + chunk]
        c = xs.shape[0]
        m = xs.permute(1, 0, 2).reshape(n, c * da).mT @ y_all
        out[i0 : i0 + c] = m.square_().view(c, da, lb, db).sum(dim=(1, 3), dtype=_F64)
    return out


# --------------------------------------------------------------------------- one batch


@dataclass
class _BatchTerms:
    """HSIC terms of one batch (float64 tensors on the input device)."""

    cross: Tensor  # (La, Lb)
    self_a: Tensor  # (La,)
    self_b: Tensor  # (Lb,)
    null_cross: Tensor | None  # (P, La, Lb) cross HSIC with shuffled token correspondence
    constant_a: Tensor  # (La,) bool
    constant_b: Tensor  # (Lb,) bool
    form: str
    same_model: bool


def _batch_terms(
    acts_a: Tensor,
    acts_b: Tensor | None,
    *,
    estimator: Estimator,
    form: Form,
    gram_dtype: torch.dtype | None,
    block_rows: int,
    n_permutations: int,
    generator: torch.Generator | None,
    ws: _Workspace,
    model_a: str,
    model_b: str,
) -> _BatchTerms:
    """All HSIC terms of one batch; ``acts_b=None`` compares model a with itself."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}; got {form!r}")
    same = acts_b is None
    la, n, da = acts_a.shape
    lb, n_b, db = (la, n, da) if acts_b is None else acts_b.shape
    _check_token_counts(n, n_b, model_a, model_b)
    dtype = gram_dtype or default_gram_dtype(acts_a.dtype, acts_a.device, n)
    if form == "auto":
        form = choose_form(n, la, da, lb, db, same_model=same, n_permutations=n_permutations, gram_dtype=dtype)
    if form == "feature":
        dtype = _F64
    xa = _center(acts_a, dtype, ws.get("centred_a", tuple(acts_a.shape), dtype, acts_a.device), model_a)
    xb = (
        xa
        if acts_b is None
        else _center(acts_b, dtype, ws.get("centred_b", tuple(acts_b.shape), dtype, acts_a.device), model_b)
    )

    grams_b = grams_a = None
    if form == "gram":
        products, diag, grams = _gram_products(
            [xa] if same else [xa, xb], ws, block_rows=block_rows, keep_grams=n_permutations > 0
        )
        ka, kb = diag[:la], diag[-lb:]
        trace_cross = products if same else products[:la, la:]
        trace_a, trace_b = products.diagonal()[:la], products.diagonal()[-lb:]
        if grams is not None:
            grams_a, grams_b = grams[:la], grams[-lb:]
    else:
        ka, kb = xa.square().sum(-1), xb.square().sum(-1)
        trace_cross = _feature_cross(xa, xb) - ka @ kb.mT
        trace_a = trace_cross.diagonal() if same else _feature_cross_self(xa) - torch.linalg.vecdot(ka, ka)
        trace_b = trace_a if same else _feature_cross_self(xb) - torch.linalg.vecdot(kb, kb)

    ma = _moments(ka, xa, form)
    mb = ma if same else _moments(kb, xb, form)
    constant_a, constant_b = ma.k_sum == 0, mb.k_sum == 0
    cross = _hsic(trace_cross, ma, mb, n, estimator, paired=False)
    self_a = _hsic(trace_a, ma, ma, n, estimator, paired=True)
    self_b = self_a if same else _hsic(trace_b, mb, mb, n, estimator, paired=True)

    null_cross = None
    if n_permutations > 0:
        nulls = []
        xa32, xb32 = (None, None) if grams_b is not None else (xa.float(), xb.float())  # null draws: float32
        for _ in range(n_permutations):
            perm = torch.randperm(n, generator=generator).to(acts_a.device)
            mb_perm = mb.permuted(perm)
            if grams_a is not None and grams_b is not None:  # kept together (form "gram")
                flat_index = (perm[:, None] * n + perm[None, :]).reshape(-1)
                trace_perm = grams_a @ grams_b[:, flat_index].mT
            else:
                assert xa32 is not None and xb32 is not None  # formed above when no Grams were kept
                trace_perm = _feature_cross(xa32, xb32[:, perm]) - ma.k @ mb_perm.k.mT
            nulls.append(_hsic(trace_perm, ma, mb_perm, n, estimator, paired=False))
        null_cross = torch.stack(nulls)
    return _BatchTerms(cross, self_a, self_b, null_cross, constant_a, constant_b, form, same)


def _feature_cross_self(x: Tensor) -> Tensor:
    """‖XᵢᵀXᵢ‖²_F per layer, (L,), float64."""
    return torch.bmm(x.mT, x).square_().sum(dim=(1, 2))


def _constant_warning(layer: int, model: str, side: str, batch: int | None, skip: bool | None) -> str:
    """The message for a layer that is constant in a batch (``batch=None``: a single batch).

    ``skip`` None: single-batch functions; False/True: an accumulator without/with
    ``skip_constant_layers``.
    """
    where = "" if batch is None else f" in batch {batch}"
    head = f"layer {layer} of model {model!r} is constant (zero variance){where}"
    if skip is None:
        return f"{head}; its CKA {side} is NaN"
    if skip:
        return f"{head}; that batch is left out of this layer's CKA {side} (skip_constant_layers=True)"
    return (
        f"{head}, so its aggregated CKA {side} is NaN for the whole run (one constant batch "
        "undefines the layer's CKA); pass skip_constant_layers=True (cka.skip_constant_layers in "
        "the pipeline) to leave out only this batch for this layer"
    )


def _warn_degenerate(
    terms: _BatchTerms, model_a: str, model_b: str, batch: int | None, skip: bool | None = None
) -> None:
    """Warn about constant layers and non-positive self-HSIC (their CKA cells become NaN)."""
    context = "" if batch is None else f" in batch {batch}"
    sides = [(model_a, "row", terms.constant_a, terms.self_a)]
    if not terms.same_model:
        sides.append((model_b, "column", terms.constant_b, terms.self_b))
    for model, side, constant, selves in sides:
        side = "row and column" if terms.same_model else side
        for layer in constant.nonzero().flatten().tolist():
            warnings.warn(_constant_warning(layer, model, side, batch, skip), RuntimeWarning, stacklevel=3)
        degenerate = ((selves <= 0) & ~constant).nonzero().flatten().tolist()
        for layer in degenerate:
            warnings.warn(
                f"layer {layer} of model {model!r} has a non-positive self-HSIC{context} "
                f"(too few tokens for the unbiased estimator?); its CKA {side} is NaN",
                RuntimeWarning,
                stacklevel=3,
            )


# --------------------------------------------------------------------------- public, one batch


@dataclass(frozen=True)
class HSICTerms:
    """HSIC terms of one batch as float64 numpy arrays."""

    cross: np.ndarray  # (La, Lb)
    self_a: np.ndarray  # (La,)
    self_b: np.ndarray  # (Lb,)
    form: str

    @property
    def cka(self) -> np.ndarray:
        return cka_from_hsic(self.cross, self.self_a, self.self_b)


def hsic_terms(
    acts_a: ActivationsLike,
    acts_b: ActivationsLike | None = None,
    *,
    estimator: Estimator = "unbiased",
    form: Form = "auto",
    gram_dtype: torch.dtype | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    model_a: str = "a",
    model_b: str = "b",
) -> HSICTerms:
    """HSIC terms of all layer pairs for one batch: acts_a (La, n, da), acts_b (Lb, n, db).

    ``acts_b=None`` (or the same object) compares model a with itself, reusing its Grams.
    """
    _check_estimator(estimator)
    a = _as_activations(acts_a, model_a, None)
    same = acts_b is None or acts_b is acts_a
    b = None if acts_b is None or acts_b is acts_a else _as_activations(acts_b, model_b, a.device)
    terms = _batch_terms(
        a,
        b,
        estimator=estimator,
        form=form,
        gram_dtype=gram_dtype,
        block_rows=block_rows,
        n_permutations=0,
        generator=None,
        ws=_Workspace(),
        model_a=model_a,
        model_b=model_a if same else model_b,
    )
    _warn_degenerate(terms, model_a, model_a if same else model_b, None)
    return HSICTerms(terms.cross.cpu().numpy(), terms.self_a.cpu().numpy(), terms.self_b.cpu().numpy(), terms.form)


def cka_matrix(
    acts_a: ActivationsLike,
    acts_b: ActivationsLike | None = None,
    *,
    estimator: Estimator = "unbiased",
    form: Form = "auto",
    gram_dtype: torch.dtype | None = None,
) -> np.ndarray:
    """La × Lb CKA matrix of one batch (float64 numpy)."""
    return hsic_terms(acts_a, acts_b, estimator=estimator, form=form, gram_dtype=gram_dtype).cka


def cka(x: ActivationsLike, y: ActivationsLike, *, estimator: Estimator = "unbiased", form: Form = "auto") -> float:
    """Linear CKA of two (n, d) feature matrices (rows = the same n tokens)."""
    for name, value in (("x", x), ("y", y)):
        if np.ndim(value) != 2:
            raise ValueError(f"{name} must be a 2-D (tokens, features) matrix; got shape {np.shape(value)}")
    return float(hsic_terms(x, y, estimator=estimator, form=form, model_a="x", model_b="y").cka[0, 0])


# --------------------------------------------------------------------------- streaming


@dataclass(frozen=True)
class CKAResult:
    """Aggregated CKA of a stream of batches, plus what significance needs.

    ``cross``/``self_a``/``self_b`` are the per-batch HSIC terms and ``constant_a`` (B, La) /
    ``constant_b`` (B, Lb) the per-batch constant-layer flags (None if not stored);
    ``n_batches_per_cell`` (La, Lb) counts the batches that entered each cell (fewer than
    ``n_batches`` only with ``skip_constant_layers``); ``null`` is the aggregated CKA under
    shuffled token correspondence (n_permutations, La, Lb) and ``p_values`` the one-sided
    permutation p-values (None without permutations).
    """

    cka: np.ndarray
    estimator: Estimator
    aggregation: Aggregation
    model_a: str
    model_b: str
    n_batches: int
    n_tokens: int
    cross: np.ndarray | None
    self_a: np.ndarray | None
    self_b: np.ndarray | None
    null: np.ndarray | None = None
    p_values: np.ndarray | None = None
    forms: tuple[str, ...] = field(default=())
    n_batches_per_cell: np.ndarray | None = None
    constant_a: np.ndarray | None = None
    constant_b: np.ndarray | None = None
    skip_constant_layers: bool = False

    def valid_batches(self) -> np.ndarray | None:
        """(B, La, Lb) bool: batch b enters cell (i, j) unless layer i of a or j of b was constant in it."""
        if self.constant_a is None or self.constant_b is None:
            return None
        return ~self.constant_a[:, :, None] & ~self.constant_b[:, None, :]

    def batch_cka(self) -> np.ndarray:
        """(B, La, Lb): each minibatch's own CKA, ``cross_b / sqrt(self_a_b · self_b_b)`` (NaN where a layer was
        constant in that batch) — what ``mean_of_ratios`` averages, and what a bootstrap over minibatches
        resamples."""
        if self.cross is None or self.self_a is None or self.self_b is None:
            raise ValueError("per-batch terms were not stored (store_batches=False)")
        values = cka_from_hsic(self.cross, self.self_a, self.self_b)
        valid = self.valid_batches()
        return values if valid is None else np.where(valid, values, np.nan)

    def bootstrap_ci(self, n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
        """Percentile bootstrap CI per cell from the stored per-batch terms (same aggregation).

        Each cell resamples among its own batches (see ``skip_constant_layers``); a cell whose
        CKA is NaN has a NaN interval.
        """
        if self.cross is None or self.self_a is None or self.self_b is None:
            raise ValueError("per-batch terms were not stored (store_batches=False)")
        valid = self.valid_batches()
        low, high = bootstrap_ci(
            self.cross,
            self.self_a,
            self.self_b,
            aggregation=self.aggregation,
            n_bootstrap=n_bootstrap,
            confidence=confidence,
            seed=seed,
            valid=None if valid is None or valid.all() else valid,
        )
        undefined = np.isnan(self.cka)
        return ConfidenceInterval(np.where(undefined, np.nan, low), np.where(undefined, np.nan, high))


class CKAAccumulator:
    """Streaming CKA over minibatches for every (layer of a, layer of b) pair.

    ``update(acts_a, acts_b)`` takes one batch, shapes (La, n, da) and (Lb, n, db) (torch or
    numpy; the device follows ``acts_a``); ``acts_b=None`` or ``acts_b is acts_a`` compares a
    model with itself. Memory is bounded by one batch plus O(n_batches·La·Lb) stored terms.
    With ``n_permutations > 0`` each batch is also scored under that many random shufflings of
    B's tokens (the same shuffle for every layer pair, seeded by ``seed``) to give p-values.

    Constant layers: if layer i of a (or j of b) is constant in batch b, that batch has no CKA
    for cell (i, j) and a ``RuntimeWarning`` names the layer and the batch. With
    ``skip_constant_layers=False`` (default) such a cell is NaN in the result — one constant
    batch undefines the layer's whole row (column). With ``skip_constant_layers=True`` only
    that batch is left out of that layer's cells: every sum of the aggregation runs over the
    cell's own batches (see :mod:`thinkalike.measures.significance`), the bootstrap resamples
    them and :attr:`CKAResult.n_batches_per_cell` counts them; a layer constant in every batch
    stays NaN.
    """

    def __init__(
        self,
        layers_a: int,
        layers_b: int,
        *,
        estimator: Estimator = "unbiased",
        aggregation: Aggregation = "mean_of_ratios",
        model_a: str = "a",
        model_b: str = "b",
        store_batches: bool = True,
        n_permutations: int = 0,
        seed: int = 0,
        form: Form = "auto",
        gram_dtype: torch.dtype | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        skip_constant_layers: bool = False,
    ) -> None:
        _check_estimator(estimator)
        check_aggregation(aggregation)
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}; got {form!r}")
        if n_permutations < 0:
            raise ValueError(f"n_permutations must be >= 0; got {n_permutations}")
        if not isinstance(skip_constant_layers, bool):
            raise ValueError(f"skip_constant_layers must be true or false; got {skip_constant_layers!r}")
        self.layers_a, self.layers_b = layers_a, layers_b
        self.estimator, self.aggregation = estimator, aggregation
        self.model_a, self.model_b = model_a, model_b
        self.store_batches, self.n_permutations = store_batches, n_permutations
        self.form, self.gram_dtype, self.block_rows = form, gram_dtype, block_rows
        self.skip_constant_layers = skip_constant_layers
        self._generator = torch.Generator().manual_seed(seed)
        self._workspace = _Workspace()
        self.n_batches = 0
        self.n_tokens = 0
        shape = (layers_a, layers_b)
        # per-cell sums over the batches that enter each cell (all of them without constant layers)
        self._sum_cross = np.zeros(shape)
        self._sum_self_a = np.zeros(shape)
        self._sum_self_b = np.zeros(shape)
        self._sum_ratios = np.zeros(shape)
        self._cell_batches = np.zeros(shape, dtype=np.int64)
        self._null_cross = np.zeros((n_permutations, *shape))
        self._null_ratios = np.zeros((n_permutations, *shape))
        self._batches: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._forms: list[str] = []

    def _checked(self, acts: ActivationsLike, layers: int, model: str, device: torch.device | None) -> Tensor:
        tensor = _as_activations(acts, model, device)
        if tensor.shape[0] != layers:
            raise ValueError(f"model {model!r} was declared with {layers} layers; got {tensor.shape[0]}")
        return tensor

    def update(self, acts_a: ActivationsLike, acts_b: ActivationsLike | None = None) -> None:
        """Add one batch (all validation happens before any state changes)."""
        a = self._checked(acts_a, self.layers_a, self.model_a, None)
        same = acts_b is None or acts_b is acts_a
        if same and self.layers_a != self.layers_b:
            raise ValueError(
                f"comparing a model with itself needs layers_a == layers_b; got {self.layers_a}, {self.layers_b}"
            )
        b = None if acts_b is None or acts_b is acts_a else self._checked(acts_b, self.layers_b, self.model_b, a.device)
        terms = _batch_terms(
            a,
            b,
            estimator=self.estimator,
            form=self.form,
            gram_dtype=self.gram_dtype,
            block_rows=self.block_rows,
            n_permutations=self.n_permutations,
            generator=self._generator,
            ws=self._workspace,
            model_a=self.model_a,
            model_b=self.model_b,
        )
        _warn_degenerate(terms, self.model_a, self.model_b, self.n_batches, self.skip_constant_layers)
        cross, self_a, self_b = (t.cpu().numpy() for t in (terms.cross, terms.self_a, terms.self_b))
        constant_a, constant_b = terms.constant_a.cpu().numpy(), terms.constant_b.cpu().numpy()
        valid = ~constant_a[:, None] & ~constant_b[None, :]
        self._sum_cross += np.where(valid, cross, 0.0)
        self._sum_self_a += np.where(valid, self_a[:, None], 0.0)
        self._sum_self_b += np.where(valid, self_b[None, :], 0.0)
        self._sum_ratios += np.where(valid, cka_from_hsic(cross, self_a, self_b), 0.0)
        self._cell_batches += valid
        if terms.null_cross is not None:
            null = terms.null_cross.cpu().numpy()
            self._null_cross += np.where(valid, null, 0.0)
            self._null_ratios += np.where(valid, cka_from_hsic(null, self_a[None], self_b[None]), 0.0)
        if self.store_batches:
            self._batches.append((cross, self_a, self_b, constant_a, constant_b))
        self._forms.append(terms.form)
        self.n_batches += 1
        self.n_tokens += a.shape[1]

    def _finish(self, sum_cross: np.ndarray, sum_ratios: np.ndarray) -> np.ndarray:
        """Aggregate per-cell sums; without ``skip_constant_layers`` a cell that lost a batch is NaN."""
        value = aggregate_cell_sums(
            sum_cross,
            self._sum_self_a,
            self._sum_self_b,
            sum_ratios,
            self._cell_batches,
            self.aggregation,
        )
        if not self.skip_constant_layers:
            value = np.where(self._cell_batches < self.n_batches, np.nan, value)
        return value

    def result(self) -> CKAResult:
        """Aggregate what has been seen so far (``self.aggregation``)."""
        if self.n_batches == 0:
            raise ValueError("no batches were added; call update() first")
        value = self._finish(self._sum_cross, self._sum_ratios)
        null = p_values = None
        if self.n_permutations > 0:
            null = self._finish(self._null_cross, self._null_ratios)
            p_values = permutation_p_values(value, null)
        stored = [np.stack(parts) for parts in zip(*self._batches)] if self.store_batches else [None] * 5
        return CKAResult(
            cka=value,
            estimator=self.estimator,
            aggregation=self.aggregation,
            model_a=self.model_a,
            model_b=self.model_b,
            n_batches=self.n_batches,
            n_tokens=self.n_tokens,
            cross=stored[0],
            self_a=stored[1],
            self_b=stored[2],
            null=null,
            p_values=p_values,
            forms=tuple(self._forms),
            n_batches_per_cell=self._cell_batches.copy(),
            constant_a=stored[3],
            constant_b=stored[4],
            skip_constant_layers=self.skip_constant_layers,
        )
