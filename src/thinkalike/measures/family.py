"""Summaries of CKA across a family of models of growing size (Brown et al. 2023 §5, figs. 9–10; no Kedro).

* :func:`mean_off_diagonal` — a model's intra-model similarity: the mean of ``S_ij`` over its layer pairs
  ``i ≠ j`` (fig. 10 plots it against scale);
* :func:`relative_depth_layers` — the layers of an ``L``-block model at relative depths ``d ∈ [0, 1]``:
  ``round(d · L)`` (residual stream 0 = embeddings, ``L`` = the last block), to compare early layers across
  depths;
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


def robust_z(values: Mapping[str, float]) -> dict[str, float]:
    """Each member's robust z-score against the family (module docstring)."""
    if len(values) < 3:
        raise ValueError(f"a robust z-score needs at least 3 members, got {len(values)}")
    data = np.array(list(values.values()), dtype=np.float64)
    median = float(np.median(data))
    spread = MAD_SCALE * float(np.median(np.abs(data - median)))
    if spread == 0.0:
        return {name: 0.0 if value == median else float(np.sign(value - median) * np.inf)
                for name, value in values.items()}
    return {name: (float(value) - median) / spread for name, value in values.items()}


def outliers(values: Mapping[str, float], threshold: float = OUTLIER_Z) -> list[str]:
    """The members whose ``|robust z|`` exceeds ``threshold``, most extreme first."""
    scores = robust_z(values)
    flagged = [name for name, z in scores.items() if abs(z) > threshold]
    return sorted(flagged, key=lambda name: -abs(scores[name]))
