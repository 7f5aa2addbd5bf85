r"""Representational similarity analysis (Kriegeskorte et al. 2008).

Inputs X (n × d₁), Y (n × d₂), rows = the same n tokens; computed in float64.

- **RDM**: the condensed vector of the n(n − 1)/2 pairwise dissimilarities between tokens,
  ``scipy.spatial.distance.pdist(X, metric)``:
  ``"correlation"`` (Kriegeskorte's default): D_ij = 1 − Pearson(xᵢ, xⱼ) across features;
  ``"euclidean"``: D_ij = ‖xᵢ − xⱼ‖₂.
- **RSA** = correlation of the two RDMs: ``"spearman"`` (``scipy.stats.spearmanr``; ties get
  average ranks) or ``"pearson"`` (``scipy.stats.pearsonr``).

The MLEM pipeline's RSA baseline (:func:`thinkalike.mlem.similarity.rsa_similarity`) is the same
statistic on Euclidean distances of *sampled* stimulus pairs, stacked over many layers; this
module is the full-RDM form for one pair of inputs (and imports nothing from the MLEM package,
which pulls in torch model code).

Invariances. ``"correlation"`` RDMs: isotropic scaling and permutation of features (also any
per-token affine change xᵢ → aᵢxᵢ + bᵢ1 with aᵢ > 0), not orthogonal maps or translation
(the row means across features are not rotation invariant). ``"euclidean"`` RDMs: orthogonal
maps, isotropic scaling, translation, permutation. With ``"spearman"``, any strictly monotone
transform of either RDM too. Symmetric.

Undefined (NaN with a RuntimeWarning): a token whose features are all equal under
``"correlation"`` (its correlation with any token is undefined), or an RDM that is constant.
Cost: O(n²·d) time and O(n²) memory — subsample tokens for large n
(:func:`thinkalike.measures.registry.subsample_tokens`).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import pearsonr, spearmanr

from thinkalike.measures.inputs import paired_activations, undefined

Distance = Literal["correlation", "euclidean"]
Correlation = Literal["spearman", "pearson"]
DISTANCES: tuple[str, ...] = get_args(Distance)
CORRELATIONS: tuple[str, ...] = get_args(Correlation)
MIN_TOKENS = 3  # three pairs: the fewest for which a correlation of RDMs can say anything


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: {value!r} must be one of {choices}")


def rdm(matrix: np.ndarray, distance: Distance = "correlation") -> np.ndarray:
    """Condensed RDM (length n(n − 1)/2) of a float64 (n, d) matrix: ``pdist(matrix, distance)``."""
    _check_choice("distance", distance, DISTANCES)
    return pdist(matrix, metric=distance)


def rsa(x: Any, y: Any, distance: Distance = "correlation", correlation: Correlation = "spearman") -> float:
    """Spearman (or Pearson) correlation between the RDMs of x and y (module docstring)."""
    _check_choice("distance", distance, DISTANCES)
    _check_choice("correlation", correlation, CORRELATIONS)
    x_matrix, y_matrix = paired_activations(x, y, measure="rsa", min_tokens=MIN_TOKENS)
    rdms = []
    for name, matrix in (("x", x_matrix), ("y", y_matrix)):
        if distance == "correlation":
            flat = int(np.sum(np.ptp(matrix, axis=1) == 0))
            if flat:
                return undefined("rsa", f"{flat} token(s) of {name} have all features equal, so their "
                                        "correlation distance is undefined (use distance='euclidean')")
        dissimilarities = rdm(matrix, distance)
        if np.ptp(dissimilarities) == 0:
            return undefined("rsa", f"the RDM of {name} is constant")
        rdms.append(dissimilarities)
    statistic = spearmanr if correlation == "spearman" else pearsonr
    return float(statistic(*rdms).statistic)
