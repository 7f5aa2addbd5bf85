"""Fitting MLEM to one layer, held-out fit quality and permutation feature importance.

For stimulus vectors ``y_i`` (one layer) and features (:class:`~thinkalike.mlem.features.FeatureTable`):

* **Neural distance** of a pair: ``d_N = ((‖y_i − y_j‖₂ − min) / (max − min))²`` over the pairs
  at hand (Euclidean, min-max scaled, squared, as the MLEM code does). Every use below is
  through ranks, which these monotone steps leave unchanged.
* **Feature distance** ``d_F = Δfᵀ W Δf`` (:class:`~thinkalike.mlem.model.MetricModel`; diagonal
  ``W``: ``Σ_k w_k Δf_k²``).
* **Fit** (per fold): maximise ``Spearman(d_F, d_N)`` over fresh random pairs of training
  stimuli at every step (``pairs_per_step``; never an n × n matrix). The loss is
  ``−Pearson(soft_rank(d_F), rank(d_N))``: exact ranks for the fixed target, the l2 soft rank
  (:func:`~thinkalike.mlem.softrank.soft_rank`) for ``d_F``, applied after scaling ``d_F`` to
  the rank range ``[0, m − 1]`` so that ``rank_strength`` ε is in rank units (ε ≲ 1: nearly
  hard ranks, no gradient across ties; ε ≫ m: Pearson). AdamW (lr 0.1), at most
  ``max_steps``; stops when the loss has not improved by ``min_improvement`` for ``patience``
  steps.
* **Held out**: the stimuli are split in ``n_folds`` folds (``sklearn.model_selection.KFold``,
  shuffled); each fold's model is scored on pairs of its *test* stimuli only (all pairs, or
  ``heldout_pairs`` drawn without replacement) with exact Spearman (the Pearson correlation of average ranks,
  ``scipy.stats.spearmanr``'s definition, computed here: :func:`_spearman`).
* **Permutation importance** of feature k: on the same held-out pairs, shuffle column k of Δf
  (``n_permutations`` times; all of its columns with the same shuffle when it is indicator-coded,
  :func:`~thinkalike.mlem.features.indicator_coding`); importance = held-out Spearman − permuted Spearman. The profile
  reports the mean over folds × permutations with a t interval (``confidence``) over those
  ``n_folds · n_permutations`` values — a spread, as in the MLEM code's interval, not an exact
  coverage statement (folds share stimuli in training).

Everything is seeded (``seed``): pairs come from a ``torch.Generator`` / numpy ``Generator`` per
fold, so every layer of a model sees the same pairs and a rerun gives the same numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import t as student_t
from sklearn.model_selection import KFold

from thinkalike.mlem.features import (
    FeatureError,
    FeatureTable,
    correlated_features,
    feature_tensors,
    group_differences,
    pair_differences,
)
from thinkalike.mlem.model import MetricModel
from thinkalike.mlem.softrank import pearson, soft_rank
from thinkalike.models.training import progress_bar

logger = logging.getLogger(__name__)

#: ``fold`` value of the rows that aggregate all folds in a profile table.
ALL_FOLDS = -1
PROFILE_COLUMNS = [
    "model",
    "layer",
    "feature",
    "weight",
    "importance",
    "ci_low",
    "ci_high",
    "spearman_heldout",
    "fold",
    "kind",
    "n_stimuli",
    "n_heldout_pairs",
    "steps",
    "pairs_per_step",
    "interactions",
]


class MLEMSettings(BaseModel):
    """How one layer is fitted and scored (module docstring); ``pairs_per_step=None`` estimates it
    (:func:`estimate_pairs_per_step`). Strict types, unknown settings refused, each bound a field constraint."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    interactions: bool = False
    pairs_per_step: int | None = Field(1024, ge=16)  # None: estimated
    max_steps: int = Field(1000, gt=0)
    patience: int = Field(50, gt=0)
    min_improvement: float = Field(1e-3, ge=0)
    learning_rate: float = Field(0.1, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    rank_strength: float = Field(1.0, gt=0)
    n_folds: int = Field(5, ge=2)  # held-out scores need a test fold
    n_permutations: int = Field(5, gt=0)
    heldout_pairs: int = Field(4000, gt=0)
    confidence: float = Field(0.95, gt=0, lt=1)
    correlation_warning: float = Field(0.5, gt=0, le=1)
    seed: int = 0


@dataclass
class LayerFit:
    """A layer's fit over all folds: per-fold weights ``(F, K)``, held-out Spearman ``(F,)``,
    importances ``(F, n_permutations, K)``, steps ``(F,)``; optional W matrices ``(F, C, C)``.

    ``features`` are the features (K); with indicator coding a feature has several columns
    (``columns``, C of them): its weight is the sum of its columns' weights (``column_weights``
    ``(F, C)``), its importance permutes them together.
    """

    features: tuple[str, ...]
    kinds: tuple[str, ...]
    weights: np.ndarray
    spearman: np.ndarray
    importances: np.ndarray
    steps: np.ndarray
    heldout_pairs: np.ndarray
    pairs_per_step: int
    n_stimuli: int
    interactions: bool
    matrices: np.ndarray | None = field(default=None, repr=False)
    columns: tuple[str, ...] = ()
    column_weights: np.ndarray | None = field(default=None, repr=False)


def random_pairs(n: int, m: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``m`` uniform pairs ``(i, j)`` of distinct stimuli among ``n`` (fresh at every call)."""
    first = torch.randint(0, n, (m,), generator=generator)
    second = (first + torch.randint(1, n, (m,), generator=generator)) % n
    return first, second


def heldout_pairs(n: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """All ``n(n−1)/2`` pairs ``i < j`` when there are at most ``m``, else ``m`` of them drawn without replacement."""
    total = n * (n - 1) // 2
    if total <= m:
        first, second = np.triu_indices(n, k=1)
        return first.astype(np.int64), second.astype(np.int64)
    linear = np.sort(rng.choice(total, size=m, replace=False))
    # row i holds the pairs (i, i+1..n-1); it starts at linear index i·n − i(i+1)/2
    starts = np.arange(n) * n - np.arange(n) * (np.arange(n) + 1) // 2
    first = np.searchsorted(starts, linear, side="right") - 1
    second = linear - starts[first] + first + 1
    return first.astype(np.int64), second.astype(np.int64)


def neural_distances(vectors: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """``d_N`` of the pairs: Euclidean distance, min-max scaled over these pairs, squared."""
    # index_select, not vectors[first]: the same rows through torch's row gather, cheaper on a CPU than the general
    # advanced-indexing path (MLEM gathers fresh pairs at every step)
    distance = (vectors.index_select(0, first) - vectors.index_select(0, second)).norm(dim=1)
    low, high = distance.min(), distance.max()
    scaled = (distance - low) / (high - low) if high > low else torch.zeros_like(distance)
    return scaled.square()


def spearman_loss(feature_distance: torch.Tensor, neural_ranks: torch.Tensor, strength: float) -> torch.Tensor:
    """``−Pearson(soft_rank(d_F scaled to [0, m−1]), ranks of d_N)`` (module docstring)."""
    m = feature_distance.numel()
    low, high = feature_distance.detach().min(), feature_distance.detach().max()
    span = (high - low).clamp_min(1e-12)
    return -pearson(soft_rank((feature_distance - low) * ((m - 1) / span), strength), neural_ranks)


def estimate_pairs_per_step(
    features: FeatureTable,
    generator: torch.Generator,
    *,
    n_trials: int = 16,
    start: int = 1024,
    factor: float = 1.2,
    max_pairs: int = 65536,
    threshold: float = 0.02,
) -> int:
    """Pairs per step as the MLEM code estimates them: grow the sample (× ``factor``) until the
    correlations between Δf columns vary across ``n_trials`` samples by less than ``threshold``
    (largest standard deviation); at most ``max_pairs``."""
    values, categorical = feature_tensors(features)
    m = start
    while m < max_pairs:
        correlations = []
        for _ in range(n_trials):
            first, second = random_pairs(features.n_stimuli, m, generator)
            differences = pair_differences(values, categorical, first, second).double().numpy()
            with np.errstate(invalid="ignore", divide="ignore"):
                correlations.append(np.atleast_2d(np.corrcoef(differences, rowvar=False)))
        spread = np.nanmax(np.std(np.stack(correlations), axis=0)) if features.n_features > 1 else 0.0
        if not np.isfinite(spread) or spread < threshold:
            return m
        m = int(m * factor) + 1
    return max_pairs


def check_inputs(
    features: FeatureTable, layer_vectors: Mapping[int, np.ndarray], settings: MLEMSettings, what: str
) -> None:
    """Everything that can be wrong before fitting: raises ``ValueError`` naming ``what`` (the model) and the layer.

    NaN/inf in features or in any layer's vectors, a row count that differs from the features',
    fewer stimuli than ``2 · n_folds`` (each test fold needs a pair).
    """
    numeric = [k for k, kind in enumerate(features.kinds) if kind != "categorical"]
    codes = np.delete(features.values, numeric, axis=1)
    if np.isnan(codes).any() or np.isinf(features.values).any():
        raise FeatureError(f"{what}: NaN or inf in the categorical feature codes (undefined values must be marked)")
    minimum = 2 * settings.n_folds
    if features.n_stimuli < minimum:
        raise ValueError(
            f"{what}: {features.n_stimuli} stimuli are too few for mlem.fit.n_folds="
            f"{settings.n_folds} (each test fold needs at least 2 stimuli: at least {minimum})"
        )
    for layer, vectors in layer_vectors.items():
        if vectors.shape[0] != features.n_stimuli:
            raise ValueError(f"{what} layer {layer}: {vectors.shape[0]} vectors for {features.n_stimuli} stimuli")
        bad = ~np.isfinite(vectors)
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))
            raise ValueError(
                f"{what} layer {layer}: NaN or inf in the vectors of {len(rows)} stimuli "
                f"(e.g. rows {rows[:5].tolist()})"
            )


def warn_correlated(features: FeatureTable, settings: MLEMSettings, what: str) -> list[tuple[str, str, float]]:
    """Warn (once) about feature pairs whose Δf correlate with |r| > ``correlation_warning`` over 8,192 random pairs."""
    generator = torch.Generator().manual_seed(settings.seed)
    values, categorical = feature_tensors(features)
    first, second = random_pairs(features.n_stimuli, 8192, generator)
    differences = group_differences(pair_differences(values, categorical, first, second).double().numpy(), features)
    found = correlated_features(differences, features.feature_names, settings.correlation_warning)
    for a, b, r in found:
        logger.warning(
            "MLEM %s: features %r and %r are correlated (r = %.2f over random pairs): their weights and "
            "importances share credit",
            what,
            a,
            b,
            r,
        )
    return found


def fit_fold(
    features: FeatureTable,
    vectors: torch.Tensor,
    settings: MLEMSettings,
    pairs_per_step: int,
    generator: torch.Generator,
) -> tuple[MetricModel, int]:
    """One fold's model on its training stimuli (module docstring); returns it and the steps taken."""
    values, categorical = feature_tensors(features, vectors.device)
    model = MetricModel(features.n_features, settings.interactions).to(vectors.device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    best, waited, step = np.inf, 0, 0
    for step in range(1, settings.max_steps + 1):  # noqa: B007 - the steps taken are returned after the loop
        first, second = random_pairs(features.n_stimuli, pairs_per_step, generator)
        first, second = first.to(vectors.device), second.to(vectors.device)
        neural = neural_distances(vectors, first, second)
        target = average_ranks(neural).to(torch.float32)
        loss = spearman_loss(
            model(pair_differences(values, categorical, first, second)), target, settings.rank_strength
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        value = float(loss.detach())
        if value < best - settings.min_improvement:
            best, waited = value, 0
        else:
            waited += 1
            if waited >= settings.patience:
                break
    return model, step


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks of a 1-D tensor, ties given the mean of their ranks — ``scipy.stats.rankdata(values)``
    (method ``average``) computed in torch (float64), on the tensor's device: a sort and its runs of equal values.
    Written here because the fit ranks fresh pairs at every step, where scipy's per-call overhead (and, off the CPU,
    a copy to the host) would be paid each time (``benchmarks/mlem_speed.py`` times a layer's fit)."""
    if values.ndim != 1:
        raise ValueError(f"values: a 1-D tensor is needed, got shape {tuple(values.shape)}")
    ordered, order = torch.sort(values)
    _, run, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    last = torch.cumsum(counts, 0).to(torch.float64)  # the 1-based rank of each run's last member
    ranks = torch.empty(values.shape, dtype=torch.float64, device=values.device)
    ranks[order] = (last - (counts.to(torch.float64) - 1.0) / 2.0)[run]
    return ranks


def _centred_ranks(values: np.ndarray) -> np.ndarray | None:
    """Average ranks minus their mean (float64), or None when ``values`` is constant."""
    if np.ptp(values) == 0:
        return None
    ranks = average_ranks(torch.from_numpy(np.ascontiguousarray(values))).numpy()
    return ranks - ranks.mean()


def _spearman(x: np.ndarray, y_ranks: np.ndarray | None) -> float:
    """Spearman of ``x`` and the values whose :func:`_centred_ranks` are ``y_ranks``: the Pearson correlation of
    the average ranks (``scipy.stats.spearmanr``'s definition; equal to it within 1e-15, tested); 0 when either
    side is constant. The held-out side is ranked once per fold, not once per permutation."""
    x_ranks = _centred_ranks(x)
    if x_ranks is None or y_ranks is None:
        return 0.0
    return float(x_ranks @ y_ranks / np.sqrt((x_ranks @ x_ranks) * (y_ranks @ y_ranks)))


@torch.no_grad()
def score_fold(
    model: MetricModel, features: FeatureTable, vectors: torch.Tensor, settings: MLEMSettings, rng: np.random.Generator
) -> tuple[float, np.ndarray, int]:
    """Held-out Spearman on pairs of the test stimuli and the ``(n_permutations, K)`` permutation importances of the
    K features (a feature's columns permuted together)."""
    first, second = heldout_pairs(features.n_stimuli, settings.heldout_pairs, rng)
    values, categorical = feature_tensors(features, vectors.device)
    index_a = torch.as_tensor(first, device=vectors.device)
    index_b = torch.as_tensor(second, device=vectors.device)
    differences = pair_differences(values, categorical, index_a, index_b)
    neural = _centred_ranks(neural_distances(vectors, index_a, index_b).cpu().numpy())
    baseline = _spearman(model(differences).cpu().numpy(), neural)
    groups = features.group_columns()
    importances = np.zeros((settings.n_permutations, len(groups)))
    for k, columns in enumerate(groups):
        group = torch.as_tensor(columns, device=vectors.device)
        for r in range(settings.n_permutations):
            permuted = differences.clone()
            order = torch.as_tensor(rng.permutation(len(first)), device=vectors.device)
            permuted[:, group] = differences[order][:, group]
            importances[r, k] = baseline - _spearman(model(permuted).cpu().numpy(), neural)
    return baseline, importances, len(first)


@contextmanager
def single_threaded(device: torch.device | str) -> Iterator[None]:
    """One intra-op CPU thread inside the block (restored after); nothing changes on an accelerator.

    A step works on small tensors (``pairs_per_step × d``), too small to share among threads: a
    second thread adds its synchronisation to every operation, and waits for a core whenever another
    process holds one (the thread policy of :mod:`thinkalike.threads`).
    """
    if torch.device(device).type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def fit_layer(
    features: FeatureTable, vectors: np.ndarray, settings: MLEMSettings, *, device: torch.device | str = "cpu"
) -> LayerFit:
    """MLEM on one layer's ``vectors`` ``(n, d)`` over ``settings.n_folds`` folds of the stimuli.

    Call :func:`check_inputs` first (:func:`fit_layers` does). CPU work runs single-threaded
    (:func:`single_threaded`).
    """
    with single_threaded(device):
        return _fit_layer(features, vectors, settings, device)


def _fit_layer(
    features: FeatureTable, vectors: np.ndarray, settings: MLEMSettings, device: torch.device | str
) -> LayerFit:
    data = torch.as_tensor(np.asarray(vectors), dtype=torch.float32, device=device)
    folds = KFold(n_splits=settings.n_folds, shuffle=True, random_state=settings.seed)
    weights, scores, importances, steps, counts, matrices = [], [], [], [], [], []
    pairs_per_step = settings.pairs_per_step
    for fold, (train, test) in enumerate(folds.split(np.arange(features.n_stimuli))):
        generator = torch.Generator().manual_seed(settings.seed * 1000 + fold)
        rng = np.random.default_rng([settings.seed, fold])
        train_features = features.subset(train)
        if pairs_per_step is None:
            pairs_per_step = estimate_pairs_per_step(train_features, generator)
        model, taken = fit_fold(
            train_features, data[torch.as_tensor(train, device=device)], settings, pairs_per_step, generator
        )
        score, permuted, n_pairs = score_fold(
            model, features.subset(test), data[torch.as_tensor(test, device=device)], settings, rng
        )
        weights.append(model.feature_weights().cpu().numpy())
        matrices.append(model.weight_matrix().detach().cpu().numpy())
        scores.append(score)
        importances.append(permuted)
        steps.append(taken)
        counts.append(n_pairs)
    assert pairs_per_step is not None  # estimated on the first fold when not configured
    column_weights = np.stack(weights)
    feature_weights = np.stack([column_weights[:, columns].sum(axis=1) for columns in features.group_columns()], axis=1)
    return LayerFit(
        features.feature_names,
        features.feature_kinds,
        feature_weights,
        np.asarray(scores),
        np.stack(importances),
        np.asarray(steps),
        np.asarray(counts),
        int(pairs_per_step),
        features.n_stimuli,
        settings.interactions,
        np.stack(matrices) if settings.interactions else None,
        features.names,
        column_weights,
    )


def fit_layers(
    features: FeatureTable,
    layer_vectors: Mapping[int, np.ndarray],
    settings: MLEMSettings,
    *,
    what: str = "model",
    device: torch.device | str = "cpu",
    progress: bool = True,
) -> dict[int, LayerFit]:
    """:func:`fit_layer` for every layer, after :func:`check_inputs`, the correlation warning and the logged cost
    estimate (:func:`estimate_cost`, :func:`log_cost`); a progress bar (``MLEM <what>``) counts layers."""
    check_inputs(features, layer_vectors, settings, what)
    warn_correlated(features, settings, what)
    log_cost(estimate_cost(features, layer_vectors, settings, device=device), what)
    fits = {}
    with progress_bar(len(layer_vectors), f"MLEM {what}", progress) as bar:
        for layer, vectors in layer_vectors.items():
            fits[layer] = fit_layer(features, vectors, settings, device=device)
            bar.set_postfix_str(f"layer {layer}: heldout rho {fits[layer].spearman.mean():.2f}")
            bar.update(1)
    return fits


@dataclass(frozen=True)
class CostEstimate:
    """What :func:`fit_layers` will cost: ``layers × folds`` fits of at most ``max_steps`` steps each (early
    stopping usually ends them sooner), plus one held-out scoring with permutations per fit; the per-step and
    per-scoring seconds are measured on the data at hand (:func:`estimate_cost`)."""

    layers: int
    folds: int
    max_steps: int
    pairs_per_step: int
    seconds_per_step: float
    seconds_per_scoring: float

    @property
    def max_seconds(self) -> float:
        """The cost if no fit stops early."""
        return self.layers * self.folds * (self.max_steps * self.seconds_per_step + self.seconds_per_scoring)


def estimate_cost(
    features: FeatureTable,
    layer_vectors: Mapping[int, np.ndarray],
    settings: MLEMSettings,
    *,
    device: torch.device | str = "cpu",
    probe_steps: int = 10,
) -> CostEstimate:
    """Time ``probe_steps`` training steps and one held-out scoring on the first layer's first fold, and scale them
    to every layer and fold (:class:`CostEstimate`), after two untimed warm-up steps. ``pairs_per_step=None`` is
    timed at 1,024 pairs (the smallest the estimate gives). Costs ``probe_steps`` + 2 training steps and one scoring."""
    vectors = next(iter(layer_vectors.values()))
    train, test = next(
        KFold(n_splits=settings.n_folds, shuffle=True, random_state=settings.seed).split(np.arange(features.n_stimuli))
    )
    pairs = settings.pairs_per_step or 1024
    probe = settings.model_copy(update={"max_steps": probe_steps, "patience": probe_steps + 1})
    data = torch.as_tensor(np.asarray(vectors), dtype=torch.float32, device=device)
    train_features, train_vectors = features.subset(train), data[torch.as_tensor(train, device=device)]
    with single_threaded(device):
        # untimed warm-up: a process's first step pays one-off initialisation, not a cost to scale to every step
        fit_fold(
            train_features,
            train_vectors,
            probe.model_copy(update={"max_steps": 2}),
            pairs,
            torch.Generator().manual_seed(0),
        )
        start = time.perf_counter()
        model, steps = fit_fold(
            train_features, train_vectors, probe, pairs, torch.Generator().manual_seed(settings.seed)
        )
        per_step = (time.perf_counter() - start) / max(steps, 1)
        start = time.perf_counter()
        score_fold(
            model,
            features.subset(test),
            data[torch.as_tensor(test, device=device)],
            settings,
            np.random.default_rng(settings.seed),
        )
        scoring = time.perf_counter() - start
    return CostEstimate(len(layer_vectors), settings.n_folds, settings.max_steps, pairs, per_step, scoring)


def log_cost(cost: CostEstimate, what: str, minutes_from: float = 60.0) -> None:
    """Log ``cost`` before the fits: at INFO when they may take ``minutes_from`` seconds or more, else DEBUG."""
    level = logging.INFO if cost.max_seconds >= minutes_from else logging.DEBUG
    logger.log(
        level,
        "MLEM %s: %d layer(s) x %d folds x at most %d steps of %d pairs (%.1f ms/step here) + "
        "%.2f s of held-out scoring per fold: at most %.1f min (early stopping usually ends sooner; "
        "mlem.layers narrows the layers)",
        what,
        cost.layers,
        cost.folds,
        cost.max_steps,
        cost.pairs_per_step,
        cost.seconds_per_step * 1e3,
        cost.seconds_per_scoring,
        cost.max_seconds / 60,
    )


def interval(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and t interval over the first axis of ``samples`` (``(N, K)``): ``mean ± t_{(1+c)/2, N−1} · sd/√N``."""
    n = samples.shape[0]
    mean = samples.mean(axis=0)
    if n < 2:
        return mean, mean.copy(), mean.copy()
    half = student_t.ppf(0.5 + confidence / 2, n - 1) * samples.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def profile_table(fit: LayerFit, model: str, layer: int, confidence: float = 0.95) -> pd.DataFrame:
    """The layer's long profile table (:data:`PROFILE_COLUMNS`): one row per feature and fold, plus the
    ``fold = ALL_FOLDS`` rows (mean weight, importance mean and interval over folds × permutations,
    mean held-out Spearman)."""
    n_folds = len(fit.spearman)
    rows = []
    common = {
        "model": model,
        "layer": int(layer),
        "n_stimuli": fit.n_stimuli,
        "pairs_per_step": fit.pairs_per_step,
        "interactions": fit.interactions,
    }
    for fold in range(n_folds):
        mean, low, high = interval(fit.importances[fold], confidence)
        for k, name in enumerate(fit.features):
            rows.append(
                {
                    **common,
                    "feature": name,
                    "kind": fit.kinds[k],
                    "weight": float(fit.weights[fold, k]),
                    "importance": float(mean[k]),
                    "ci_low": float(low[k]),
                    "ci_high": float(high[k]),
                    "spearman_heldout": float(fit.spearman[fold]),
                    "fold": fold,
                    "n_heldout_pairs": int(fit.heldout_pairs[fold]),
                    "steps": int(fit.steps[fold]),
                }
            )
    pooled = fit.importances.reshape(-1, len(fit.features))
    mean, low, high = interval(pooled, confidence)
    for k, name in enumerate(fit.features):
        rows.append(
            {
                **common,
                "feature": name,
                "kind": fit.kinds[k],
                "weight": float(fit.weights[:, k].mean()),
                "importance": float(mean[k]),
                "ci_low": float(low[k]),
                "ci_high": float(high[k]),
                "spearman_heldout": float(fit.spearman.mean()),
                "fold": ALL_FOLDS,
                "n_heldout_pairs": int(fit.heldout_pairs.sum()),
                "steps": round(fit.steps.mean()),
            }
        )
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def settings_record(settings: MLEMSettings) -> dict[str, object]:
    """The settings as a plain dict (for logs and tables)."""
    return settings.model_dump()
