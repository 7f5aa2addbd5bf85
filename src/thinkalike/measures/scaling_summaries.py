"""Summaries of CKA across a family of models of growing size (Brown et al. 2023 §5, figs. 9–10; no Kedro).

* :func:`mean_off_diagonal` — a model's intra-model similarity: the mean of ``S_ij`` over its layer pairs
  ``i ≠ j`` (fig. 10 plots it against scale);
* :func:`relative_depth_layers` — the layers of an ``L``-block model at relative depths ``d ∈ [0, 1]``:
  ``round(d · L)`` (residual stream 0 = embeddings, ``L`` = the last block), to compare early layers across
  depths;
* :func:`depth_band_mean` — the mean CKA of two models' layers in a band of relative depth (fig. 9's
  "intermediate layers": every cell ``(i, j)`` with ``i / L_a`` and ``j / L_b`` in ``[low, high]``);
* :func:`robust_z` / :func:`outliers` — per member, how far its value lies from the family's median in units of
  the scaled median absolute deviation, ``z = (x − median) / (1.4826 · MAD)`` (1.4826 makes the MAD estimate σ
  for normal data; Iglewicz & Hoaglin flag ``|z| > 3.5``). A family whose MAD is 0 has ``z = 0`` for the
  members at the median and ``±inf`` for any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

MAD_SCALE = 1.4826
OUTLIER_Z = 3.5


def mean_off_diagonal(similarity: np.ndarray) -> float:
    """Mean of the off-diagonal cells of a square similarity matrix."""
    matrix = np.asarray(similarity, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"intra-model similarity needs a square matrix of at least 2 layers, got {matrix.shape}")
    return float(matrix[~np.eye(len(matrix), dtype=bool)].mean())


def relative_depth_layers(n_blocks: int, depths: Sequence[float]) -> list[int]:
    """Residual streams ``round(d · n_blocks)`` for each relative depth ``d`` in ``[0, 1]``."""
    if n_blocks < 1:
        raise ValueError(f"n_blocks must be at least 1, got {n_blocks}")
    bad = [d for d in depths if not 0.0 <= float(d) <= 1.0]
    if bad:
        raise ValueError(f"relative depths must lie in [0, 1], got {bad}")
    return [int(np.floor(float(d) * n_blocks + 0.5)) for d in depths]


def depth_band_mean(similarity: np.ndarray, low: float, high: float) -> float:
    """Mean of ``S_ij`` over the cells whose rows and columns both lie at relative depth ``[low, high]``: row ``i``
    of an ``(L_a + 1) × (L_b + 1)`` matrix (residual streams 0 … L_a) is at depth ``i / L_a``. NaN cells are
    left out; a band that holds no layer of one model raises ``ValueError``."""
    matrix = np.asarray(similarity, dtype=np.float64)
    if matrix.ndim != 2 or min(matrix.shape) < 2:
        raise ValueError(f"a depth band needs a matrix of at least 2 × 2 layers, got shape {matrix.shape}")
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"the depth band must satisfy 0 <= low <= high <= 1, got [{low}, {high}]")
    rows, columns = (np.arange(n) / (n - 1) for n in matrix.shape)
    in_rows = (rows >= low - 1e-12) & (rows <= high + 1e-12)
    in_columns = (columns >= low - 1e-12) & (columns <= high + 1e-12)
    if not in_rows.any() or not in_columns.any():
        raise ValueError(
            f"no layer of a {matrix.shape[0] - 1}- or {matrix.shape[1] - 1}-block model lies at "
            f"relative depth [{low}, {high}]"
        )
    return float(np.nanmean(matrix[np.ix_(in_rows, in_columns)]))


def robust_z(values: Mapping[str, float]) -> dict[str, float]:
    """Each member's robust z-score against the family (module docstring)."""
    if len(values) < 3:
        raise ValueError(f"a robust z-score needs at least 3 members, got {len(values)}")
    data = np.array(list(values.values()), dtype=np.float64)
    median = float(np.median(data))
    spread = MAD_SCALE * float(np.median(np.abs(data - median)))
    if spread == 0.0:
        return {
            name: 0.0 if value == median else float(np.sign(value - median) * np.inf) for name, value in values.items()
        }
    return {name: (float(value) - median) / spread for name, value in values.items()}


def outliers(values: Mapping[str, float], threshold: float = OUTLIER_Z) -> list[str]:
    """The members whose ``|robust z|`` exceeds ``threshold``, most extreme first."""
    scores = robust_z(values)
    flagged = [name for name, z in scores.items() if abs(z) > threshold]
    return sorted(flagged, key=lambda name: -abs(scores[name]))
