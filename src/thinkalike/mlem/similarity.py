"""How alike layers are: feature-based (MLEM profiles), RSA, and MDS maps of all layers.

* **Feature-based** (Jalouzot et al. 2024): the similarity of layers a and b is the weighted
  Kendall τ of their feature-importance profiles, ``scipy.stats.weightedtau(p_a, p_b)``
  (hyperbolic weigher 1/(r+1), ranks from both profiles averaged — so it is symmetric): it
  stresses agreement on the features that matter most. τ(p, p) = 1; a constant profile has no
  ranking, its τ is NaN.
* **RSA** (feature-agnostic baseline): the Spearman correlation of the two layers' neural
  distances over the same sampled stimulus pairs (``scipy.stats.spearmanr`` of the stacked
  distance vectors, all layers at once).
* **MDS**: ``sklearn.manifold.MDS`` (metric, 2-D) of the dissimilarity ``1 − similarity``
  (precomputed), classical-MDS initialisation, seeded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr, weightedtau
from sklearn.manifold import MDS

logger = logging.getLogger(__name__)

SIMILARITY_COLUMNS = ["model_a", "layer_a", "model_b", "layer_b", "similarity"]


def feature_similarity(profiles: np.ndarray) -> np.ndarray:
    """``(L, L)`` weighted Kendall τ between the rows of ``profiles`` ``(L, K)`` (module docstring)."""
    n = profiles.shape[0]
    matrix = np.full((n, n), np.nan)
    for a in range(n):
        for b in range(a, n):
            matrix[a, b] = matrix[b, a] = weightedtau(profiles[a], profiles[b]).statistic
    return matrix


def rsa_similarity(distances: np.ndarray) -> np.ndarray:
    """``(L, L)`` Spearman correlations between the rows of ``distances`` ``(L, P)`` (layers × shared pairs)."""
    if distances.shape[0] == 1:
        return np.ones((1, 1))
    statistic = spearmanr(distances, axis=1).statistic
    if np.ndim(statistic) == 0:  # two rows: scipy gives their one correlation, not the 2 x 2 matrix
        return np.array([[1.0, float(statistic)], [float(statistic), 1.0]])
    return statistic


def pair_distances(vectors: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Euclidean distances ``(layers, P)`` of the pairs ``(first[p], second[p])`` in ``vectors`` ``(layers, n, d)``."""
    return np.linalg.norm(vectors[:, first].astype(np.float64) - vectors[:, second].astype(np.float64), axis=2)


def sample_pairs(n: int, n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` pairs of distinct stimuli among ``n`` (uniform, seeded; for RSA)."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n, n_pairs)
    second = (first + rng.integers(1, n, n_pairs)) % n
    return first, second


def mds_coordinates(similarity: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D coordinates ``(L, 2)`` of the layers from ``1 − similarity`` (symmetrised, diagonal 0)."""
    dissimilarity = 1.0 - (similarity + similarity.T) / 2
    np.fill_diagonal(dissimilarity, 0.0)
    if len(dissimilarity) < 3:
        return np.column_stack(
            [np.arange(len(dissimilarity), dtype=float) * dissimilarity.max(initial=0.0), np.zeros(len(dissimilarity))]
        )
    mds = MDS(n_components=2, metric="precomputed", init="classical_mds", n_init=1, random_state=seed)
    return mds.fit_transform(dissimilarity)


def long_similarity(matrix: np.ndarray, labels: Sequence[tuple[str, int]]) -> pd.DataFrame:
    """The matrix as a long table (:data:`SIMILARITY_COLUMNS`), one row per ordered layer pair."""
    rows = [
        {
            "model_a": la[0],
            "layer_a": int(la[1]),
            "model_b": lb[0],
            "layer_b": int(lb[1]),
            "similarity": float(matrix[a, b]),
        }
        for a, la in enumerate(labels)
        for b, lb in enumerate(labels)
    ]
    return pd.DataFrame(rows, columns=SIMILARITY_COLUMNS)


def matrix_from_long(table: pd.DataFrame, labels: Sequence[tuple[str, int]]) -> np.ndarray:
    """The inverse of :func:`long_similarity` for ``labels`` (order kept)."""
    lookup = {(r.model_a, int(r.layer_a), r.model_b, int(r.layer_b)): r.similarity for r in table.itertuples()}
    return np.array([[lookup[(a[0], a[1], b[0], b[1])] for b in labels] for a in labels], dtype=float)


def finite_rows(matrix: np.ndarray) -> np.ndarray:
    """Boolean mask of the layers whose row and column are finite (the layers MDS can place)."""
    keep = np.ones(len(matrix), dtype=bool)
    while True:
        bad = ~np.isfinite(matrix[np.ix_(keep, keep)]).all(axis=1)
        if not bad.any():
            return keep
        keep[np.flatnonzero(keep)[np.argmax(bad)]] = False


def importance_profiles(
    profiles: pd.DataFrame, importance_column: str = "importance"
) -> tuple[list[tuple[str, int]], np.ndarray, list[str]]:
    """``(labels, (L, K) importances, features)`` from concatenated profile tables (their all-folds rows).

    Labels are ``(model, layer)`` in table order of the models, layers ascending; a feature a
    model dropped (single-valued on its stimuli) counts as importance 0 there.
    """
    from thinkalike.mlem.fit import ALL_FOLDS

    overall = profiles[profiles["fold"] == ALL_FOLDS]
    features = list(dict.fromkeys(overall["feature"]))
    models = list(dict.fromkeys(overall["model"]))
    wide = (
        overall.pivot_table(index=["model", "layer"], columns="feature", values=importance_column, aggfunc="first")
        .reindex(columns=features)
        .fillna(0.0)
    )
    labels = [
        (model, int(layer))
        for model in models
        for layer in sorted(overall.loc[overall["model"] == model, "layer"].unique())
    ]
    return labels, wide.loc[labels].to_numpy(dtype=float), features


def shared_pair_distances(distances: pd.DataFrame, labels: Sequence[tuple[str, int]]) -> np.ndarray:
    """``(L, P)`` distances of the pairs that every labelled layer has, from concatenated long tables
    (columns ``model, layer, pair, distance``)."""
    wide = distances.pivot_table(index=["model", "layer"], columns="pair", values="distance", aggfunc="first")
    wide = wide.reindex(pd.MultiIndex.from_tuples(labels, names=["model", "layer"])).dropna(axis=1)
    if wide.shape[1] < 3:
        raise ValueError(
            f"RSA: only {wide.shape[1]} stimulus pairs are shared by every layer of every model "
            "(different evaluation texts?)"
        )
    return wide.to_numpy(dtype=float)
