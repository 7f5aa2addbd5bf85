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
Preparation, once per input (:func:`prepare_rsa`, per distance and correlation): the RDM, its
average ranks for ``"spearman"``, centred and scaled to unit norm. Ranks are computed as
``scipy.stats.rankdata`` does (ties get the average of their positions, so the result does
not depend on the sort), so with numpy's default (unstable) sort rather than the stable sort
``rankdata`` uses. Comparison
(:func:`rsa_prepared`): one dot product of two n(n − 1)/2 vectors, clipped to [−1, 1] — the
Pearson correlation that ``spearmanr`` and ``pearsonr`` compute, to rounding.
Row permutations (the calibration null): ``PreparedRSA.permuted(π)`` is the preparation of X[π]: the
condensed RDM's entries (hence their ranks) move with the tokens
(:func:`thinkalike.measures.compact.permuted_condensed`), O(n²), no distances or sort.
Cost: O(n²·d) time per input for the RDM, O(n² log n) for its ranks, O(n²) per pair; O(n²)
memory per prepared input — subsample tokens for large n
(:func:`thinkalike.measures.registry.subsample_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import numpy as np
from scipy.spatial.distance import pdist

from thinkalike.measures.compact import permuted_condensed
from thinkalike.measures.inputs import check_same_tokens, checked_matrix, paired_activations, undefined
from thinkalike.measures.measure import QUADRATIC_MAX_TOKENS, Measure, MeasureOptions, option_check

Distance = Literal["correlation", "euclidean"]
Correlation = Literal["spearman", "pearson"]
DISTANCES: tuple[str, ...] = get_args(Distance)
CORRELATIONS: tuple[str, ...] = get_args(Correlation)
DEFAULT_DISTANCE: Distance = "correlation"
DEFAULT_CORRELATION: Correlation = "spearman"
MIN_TOKENS = 3  # three pairs: the fewest for which a correlation of RDMs can say anything


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: {value!r} must be one of {choices}")


def rdm(matrix: np.ndarray, distance: Distance = DEFAULT_DISTANCE) -> np.ndarray:
    """Condensed RDM (length n(n − 1)/2) of a float64 (n, d) matrix: ``pdist(matrix, distance)``."""
    _check_choice("distance", distance, DISTANCES)
    return pdist(matrix, metric=distance)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of a 1-D array, ties given their average rank (``scipy.stats.rankdata``'s default).

    The result is the same for any sort order within ties, so an unstable (faster) sort is used.
    """
    order = np.argsort(values)
    ordered = values[order]
    new_value = np.empty(ordered.size, dtype=bool)
    new_value[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new_value[1:])
    group = np.cumsum(new_value) - 1  # tie group of each sorted position
    bounds = np.append(np.flatnonzero(new_value), ordered.size)  # first position of each group, then the end
    ranks = np.empty(ordered.size, dtype=np.float64)
    ranks[order] = 0.5 * (bounds[group] + bounds[group + 1] + 1)
    return ranks


@dataclass(frozen=True, eq=False)
class PreparedRSA:
    """One input prepared for RSA with one distance and correlation (:func:`prepare_rsa`)."""

    n_tokens: int
    distance: str
    correlation: str
    unit: np.ndarray | None  # the (ranked) RDM minus its mean, unit norm; None when undefined
    problem: str | None  # why RSA is undefined for this input, with ``{name}`` for the input's name

    def permuted(self, permutation: np.ndarray) -> PreparedRSA:
        """The preparation of X[π] (module docstring)."""
        if self.unit is None:
            return self
        return PreparedRSA(
            self.n_tokens, self.distance, self.correlation, permuted_condensed(self.unit, permutation), None
        )


def prepare_rsa(
    x: Any, distance: Distance = DEFAULT_DISTANCE, correlation: Correlation = DEFAULT_CORRELATION, *, name: str = "x"
) -> PreparedRSA:
    """The RDM of ``x`` (ranked for Spearman), centred and scaled to unit norm, once."""
    _check_choice("distance", distance, DISTANCES)
    _check_choice("correlation", correlation, CORRELATIONS)
    matrix = checked_matrix(x, name, measure="rsa", min_tokens=MIN_TOKENS)
    n = matrix.shape[0]
    if distance == "correlation":
        flat = int(np.sum(np.ptp(matrix, axis=1) == 0))
        if flat:
            return PreparedRSA(
                n,
                distance,
                correlation,
                None,
                f"{flat} token(s) of {{name}} have all features equal, so their correlation "
                "distance is undefined (use distance='euclidean')",
            )
    dissimilarities = rdm(matrix, distance)
    if np.ptp(dissimilarities) == 0:
        return PreparedRSA(n, distance, correlation, None, "the RDM of {name} is constant")
    values = average_ranks(dissimilarities) if correlation == "spearman" else dissimilarities
    deviations = values - values.mean()
    return PreparedRSA(n, distance, correlation, deviations / np.linalg.norm(deviations), None)


def rsa_prepared(px: PreparedRSA, py: PreparedRSA) -> float:
    """:func:`rsa` of two inputs prepared with the same distance and correlation."""
    check_same_tokens(px.n_tokens, py.n_tokens)
    if (px.distance, px.correlation) != (py.distance, py.correlation):
        raise ValueError(
            f"distance, correlation: x was prepared with {(px.distance, px.correlation)}, "
            f"y with {(py.distance, py.correlation)}"
        )
    for name, prepared in (("x", px), ("y", py)):
        if prepared.problem is not None:
            return undefined("rsa", prepared.problem.format(name=name))
    if px.unit is None or py.unit is None:  # prepare_rsa leaves the unit out only with a problem
        raise ValueError("rsa: a preparation without a problem has no unit RDM vector")
    return float(np.clip(np.dot(px.unit, py.unit), -1.0, 1.0))


def rsa(x: Any, y: Any, distance: Distance = DEFAULT_DISTANCE, correlation: Correlation = DEFAULT_CORRELATION) -> float:
    """Spearman (or Pearson) correlation between the RDMs of x and y (module docstring)."""
    _check_choice("distance", distance, DISTANCES)
    _check_choice("correlation", correlation, CORRELATIONS)
    x_matrix, y_matrix = paired_activations(x, y, measure="rsa", min_tokens=MIN_TOKENS)
    return rsa_prepared(
        prepare_rsa(x_matrix, distance, correlation), prepare_rsa(y_matrix, distance, correlation, name="y")
    )


def _one_of(choices: tuple[str, ...]) -> Any:
    return option_check(lambda value: None if value in choices else f"{value!r} must be one of {', '.join(choices)}")


class RSAOptions(MeasureOptions):
    """RSA's options: the RDMs' distance and the correlation of the two RDMs."""

    distance: Annotated[Distance, _one_of(DISTANCES)] = DEFAULT_DISTANCE
    correlation: Annotated[Correlation, _one_of(CORRELATIONS)] = DEFAULT_CORRELATION


MEASURES = (
    Measure(
        "rsa",
        rsa,
        "similarity",
        False,
        frozenset({"isotropic_scaling", "permutation"}),
        "n²·d",
        True,
        QUADRATIC_MAX_TOKENS,
        prepare=prepare_rsa,
        compare=rsa_prepared,
        options=RSAOptions,
        min_tokens=MIN_TOKENS,
        order=70,
    ),
)
