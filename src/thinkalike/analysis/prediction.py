"""Prediction intervals for a rerun: does a new run's estimate lie where the committed replicates say an independent
draw lands (no Kedro)?

For a quantity with ``n`` committed replicate values (mean ``x̄``, sd ``s``), a new independent draw lies, with
probability ``1 − α``, within ``x̄ ± t₁₋α/2,ₙ₋₁ · s · √(1 + 1/n)``. Over ``K`` quantities checked at once the level is
split (Bonferroni: ``α = 0.05 / K``), so an honest rerun trips any of them with probability at most 5 %. The
half-width is never below the quantity's stated ``resolution`` nor ``1e-6 · max(1, |x̄|)`` (round-off)::

    half = max(t_{1 − 0.025/K, n − 1} · s · √(1 + 1/n), resolution, 1e-6 · max(1, |x̄|))

:func:`leave_one_out` measures the false-alarm rate on the committed values themselves: each replicate is checked
against the other ``n − 1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: The family-wise false-alarm rate an honest rerun is held to.
FAMILY_ALPHA = 0.05


@dataclass(frozen=True)
class CheckedNumber:
    """One quantity: the run's ``value``, the committed ``mean``, the ``half_width`` and whether it ``moved``."""

    name: str
    value: float
    mean: float
    half_width: float
    moved: bool


def half_width(values: Sequence[float], k: int, resolution: float = 0.0) -> float:
    """The prediction interval's half-width for one of ``k`` quantities checked together (module docstring)."""
    array = np.asarray(values, dtype=np.float64)
    n = len(array)
    if n < 2:
        raise ValueError(f"values: a prediction interval needs n ≥ 2 committed replicates, got {n}")
    if k < 1:
        raise ValueError(f"k: the number of checked quantities must be ≥ 1, got {k}")
    quantile = stats.t.ppf(1 - FAMILY_ALPHA / (2 * k), n - 1)
    spread = quantile * float(array.std(ddof=1)) * math.sqrt(1 + 1 / n)
    return max(spread, resolution, 1e-6 * max(1.0, abs(float(array.mean()))))


def check(
    committed: Mapping[str, Sequence[float]], run: Mapping[str, float], resolutions: Mapping[str, float] | None = None
) -> list[CheckedNumber]:
    """Each quantity in both ``committed`` (name → replicate values) and ``run`` (name → the new value), checked
    against its prediction interval, ``K`` the number checked."""
    names = [name for name in committed if name in run and len(committed[name]) >= 2]
    resolutions = resolutions or {}
    rows = []
    for name in names:
        values = committed[name]
        half = half_width(values, len(names), resolutions.get(name, 0.0))
        mean = float(np.mean(values))
        value = float(run[name])
        rows.append(CheckedNumber(name, value, mean, half, abs(value - mean) > half))
    return rows


def leave_one_out(committed: Mapping[str, Sequence[float]], resolutions: Mapping[str, float] | None = None) -> float:
    """The share of (replicate, quantity) checks that fail when each replicate is checked against the others (only
    quantities with ≥ 3 values: the rest leave fewer than 2); NaN when none can be checked."""
    usable = {name: list(v) for name, v in committed.items() if len(v) >= 3}
    if not usable:
        return math.nan
    n = min(len(v) for v in usable.values())
    failures = checks = 0
    for left_out in range(n):
        rest = {name: v[:left_out] + v[left_out + 1 :] for name, v in usable.items()}
        run = {name: v[left_out] for name, v in usable.items()}
        rows = check(rest, run, resolutions)
        failures += sum(row.moved for row in rows)
        checks += len(rows)
    return failures / checks
