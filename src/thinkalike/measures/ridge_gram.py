r"""Linear predictivity's ridge errors as inner products with the target's token Gram (no Kedro).

:mod:`thinkalike.measures.predictivity` evaluates one cross-validated ridge fit per layer pair. When a
predictor X is compared with many targets Y, everything except one inner product per fold and α can be
moved to X's side (once per layer) and Y's side (once per layer), because every quantity the comparison
needs is a quadratic form in Y's centred rows. Notation as in :mod:`~thinkalike.measures.predictivity`:
a fold of N training tokens t and n_s test tokens s of the scaled predictor, Xc_t = U·diag(σ)·Vᵀ its
centred training rows (U: N × r), f_a = σ²/(σ² + α), the LOO weights w_a (one per training token and α),
T = (X_s − x̄_t)·V the test rows' projection; Y₀ = ``centred(Y)`` (n × d_y) and K = Y₀Y₀ᵀ (n × n) the
target's token Gram.

1. **LOO error of α** (what RidgeCV minimises within the fold): the training rows of Y centred on their
   own mean are J·Y₀[t] (J = I − 11ᵀ/N; a constant shift of Y's columns cancels), the LOO residuals are
   c = H_a·J·Y₀[t] with H_a = I − U·diag(f_a)·Uᵀ, so::

       err_a = Σᵢ w_aᵢ‖cᵢ‖² = ‖diag(√w_a)·H_a·J·Y₀[t]‖²_F = ⟨A_a, K[t, t]⟩_F,   A_a = S_a·S_aᵀ,  S_a = J·H_a·diag(√w_a)

   (H_a and J symmetric). A_a (N × N) belongs to X alone; K[t, t] to Y alone.
2. **Test residual at the chosen α**: the fold's predictions are Ŷ_s = B_a·(Y₀[t] − 1ȳ₀ₜᵀ) + ȳ_t with
   B_a = T·diag(σ/(σ² + α))·Uᵀ (n_s × N), so the residual is Y_s − Ŷ_s = D_a·Y₀ with D_a = C_a·P,
   C_a = [I on s | −B_a on t] (n_s × n) and P = I − 1mᵀ (m = 1/N on t, 0 on s: the training mean), and::

       Σ_{i∈s} ‖Y_i − Ŷ_i‖² = ‖D_a·Y₀‖²_F = ⟨D_aᵀD_a, K⟩_F.

3. **R²** pooled over outputs with variance weights: Σ_j den_j·(1 − num_j/den_j) / Σ_j den_j = 1 − Σ_j num_j / Σ_j
   den_j, so R² = 1 − Σ_folds ⟨D_aᵀD_a, K⟩_F / tr K (a column constant over tokens is exactly 0 in Y₀ and adds
   nothing to either sum).

Each symmetric form is stored as its packed upper triangle with the off-diagonal entries doubled, so an inner
product ⟨A, K⟩_F is one dot product of N(N + 1)/2 entries (:func:`packed`, :func:`packed_indices`). Every
quantity equals the one :mod:`~thinkalike.measures.predictivity` forms from Y's columns, in exact arithmetic;
in floating point to rounding (the errors are used only to pick α, the first of equal minima as RidgeCV).

Cost: per fold of X, the LOO forms take two symmetric rank-k products per α, n_alphas·(N²·r + N³)/2
multiply-adds, and a residual form n²·n_s/2 (made for the α chosen, on first use); per target Y, its Gram,
n²·d_y/2; per pair and fold, n_alphas·N²/2 for the errors and n²/2 for the residual, independent of the
widths. Against O(n·r·d_y) per pair and fold for the feature-space evaluation, this pays when a predictor
is compared with several wide targets (:func:`gram_path_pays`).

Memory: a predictor's LOO forms, n_folds·n_alphas·N(N + 1)/2 float64 (29 MB at n = 512, five folds, nine α),
for as long as its row is compared (at most :data:`LOO_FORMS_MAX_BYTES`, else the feature path is taken), and
per target K with its packed training blocks, about 3·n² float64 (6.5 MB at n = 512), kept with the target's
other preparations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

LOO_FORMS_MAX_BYTES = 256 * 2**20  # one predictor's LOO forms on the Gram path (held while its row is compared)


@lru_cache(maxsize=8)
def packed_indices(n: int, rows: tuple[int, int, int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(flat indices into an n × n matrix of its upper triangle, weights 1 on the diagonal and 2 off it).

    ``rows``: (start, stop, start, stop) of the tokens kept — the training tokens of a contiguous fold,
    two ranges — so that the indices pick the upper triangle of K[t, t] out of the full n × n K; None: all n.
    """
    kept = np.arange(n) if rows is None else np.concatenate([np.arange(rows[0], rows[1]), np.arange(rows[2], rows[3])])
    upper_rows, upper_cols = np.triu_indices(kept.size)
    flat = kept[upper_rows] * n + kept[upper_cols]
    weights = np.where(upper_rows == upper_cols, 1.0, 2.0)
    flat.setflags(write=False)
    weights.setflags(write=False)
    return flat, weights


def packed(matrix: np.ndarray, doubled: bool = False) -> np.ndarray:
    """The upper triangle of a symmetric square ``matrix`` (row by row), off-diagonal entries doubled when
    ``doubled``: ⟨A, K⟩_F = packed(A, doubled=True) · packed(K)."""
    flat, weights = packed_indices(matrix.shape[0])
    values = matrix.ravel()[flat]
    return values * weights if doubled else values


def loo_forms(u: np.ndarray, s2: np.ndarray, weights: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """(n_alphas, N(N + 1)/2): packed(A_a, doubled) for each α (module docstring, step 1).

    ``u`` (N × r) the fold's left singular vectors, ``s2`` (r,) σ², ``weights`` (n_alphas, N) the LOO weights.
    """
    n_train = u.shape[0]
    forms = np.empty((alphas.size, n_train * (n_train + 1) // 2))
    for a, alpha in enumerate(alphas):
        root = u * np.sqrt(s2 / (s2 + alpha))
        shrink = root @ root.T  # U·diag(f_a)·Uᵀ (numpy calls BLAS syrk for A·Aᵀ)
        np.negative(shrink, out=shrink)
        shrink.flat[:: n_train + 1] += 1.0  # H_a
        shrink -= shrink.mean(axis=0)  # J·H_a
        shrink *= np.sqrt(weights[a])  # S_a = J·H_a·diag(√w_a)
        forms[a] = packed(shrink @ shrink.T, doubled=True)
    return forms


def residual_form(projection: np.ndarray, gain: np.ndarray, u: np.ndarray, n_tokens: int, test: slice) -> np.ndarray:
    """packed(D_aᵀD_a, doubled) (n(n + 1)/2) of one fold at one α (module docstring, step 2).

    ``projection`` T (n_s × r), ``gain`` σ/(σ² + α) (r,), ``u`` U (N × r); the training tokens are all but ``test``.
    """
    n_test, n_train = projection.shape[0], u.shape[0]
    train = np.r_[0 : test.start, test.stop : n_tokens]
    residual = np.zeros((n_test, n_tokens))
    residual[:, train] = -((projection * gain) @ u.T)  # −B_a on the training tokens
    residual[:, test] = np.eye(n_test)
    residual[:, train] -= residual.sum(axis=1, keepdims=True) / n_train  # C_a·P
    return packed(residual.T @ residual, doubled=True)


@dataclass(frozen=True, eq=False)
class GramTarget:
    """A target Y's side of the Gram path: K = Y₀Y₀ᵀ, packed, its trace, and K[t, t] packed per fold."""

    gram: np.ndarray  # K (n × n)
    packed: np.ndarray  # packed(K)
    trace: float  # tr K = ‖Y₀‖²_F, R²'s denominator
    _folds: dict[tuple[tuple[int, int], ...], tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, centred: np.ndarray) -> GramTarget:
        """From Y₀ (n × d_y)."""
        gram = centred @ centred.T
        return cls(gram, packed(gram), float(np.trace(gram)))

    @classmethod
    def from_gram(cls, gram: np.ndarray) -> GramTarget:
        return cls(gram, packed(gram), float(np.trace(gram)))

    def training_blocks(self, folds: tuple[tuple[int, int], ...]) -> tuple[np.ndarray, ...]:
        """packed(K[t, t]) for each fold's training tokens t (``folds``: (start, stop) of each contiguous test fold)."""
        if folds not in self._folds:
            n = self.gram.shape[0]
            flat = self.gram.ravel()
            self._folds[folds] = tuple(flat[packed_indices(n, (0, start, stop, n))[0]] for start, stop in folds)
        return self._folds[folds]

    def permuted(self, permutation: np.ndarray) -> GramTarget:
        """The target of Y[π]: K with rows and columns permuted (no product)."""
        return GramTarget.from_gram(self.gram[np.ix_(permutation, permutation)])


@dataclass(frozen=True, eq=False)
class GramFold:
    """A predictor's fold on the Gram path: the LOO forms of every α, and the residual forms made so far."""

    loo: np.ndarray  # (n_alphas, N(N + 1)/2)
    residuals: dict[int, np.ndarray] = field(default_factory=dict, repr=False)


def loo_forms_bytes(n_tokens: int, fold_sizes: list[int], n_alphas: int) -> int:
    """Bytes of one predictor's LOO forms: n_alphas·N(N + 1)/2 float64 per fold."""
    return sum(8 * n_alphas * (n_tokens - size) * (n_tokens - size + 1) // 2 for size in fold_sizes)


def gram_path_pays(
    n_tokens: int, fold_sizes: list[int], n_alphas: int, width_x: int, width_y: int, comparisons: int
) -> bool:
    """Whether ``comparisons`` pairs with this predictor cost fewer multiply-adds on the Gram path, and its LOO
    forms fit in :data:`LOO_FORMS_MAX_BYTES` (29 MB at n = 512 with five folds and nine α; the limit is passed
    from n = 1526 on).

    Per fold (N training tokens, n_s test, r = min(N, d_x)): the feature path costs d_y·r·(N + r + n_s)
    (+ 2·N·r·d_y when r < N) per pair; the Gram path n_alphas·(N²·r + N³)/2 + n²·n_s/2 once and n_alphas·N²/2
    per pair, plus the target's Gram n²·d_y/2 (counted in full for every pair, though a target shares it).
    """
    if loo_forms_bytes(n_tokens, fold_sizes, n_alphas) > LOO_FORMS_MAX_BYTES:
        return False
    feature = setup = per_pair = 0.0
    for size in fold_sizes:
        train = n_tokens - size
        rank = min(train, width_x)
        feature += width_y * rank * (train + rank + size) + (2.0 * train * rank * width_y if rank < train else 0.0)
        setup += n_alphas * (train**2 * rank + train**3) / 2.0 + n_tokens**2 * size / 2.0
        per_pair += n_alphas * train**2 / 2.0
    per_pair += n_tokens**2 * width_y / 2.0
    return comparisons * (feature - per_pair) > setup
