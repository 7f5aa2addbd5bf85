"""An independent float64 numpy CKA reference written straight from the formulas (DESIGN.md)."""

from __future__ import annotations

import numpy as np


def ref_hsic(x: np.ndarray, y: np.ndarray, estimator: str) -> float:
    """HSIC of the linear Grams of column-centred x, y, straight from the definitions."""
    x = x - x.mean(axis=0)
    y = y - y.mean(axis=0)
    k, l = x @ x.T, y @ y.T  # noqa: E741 (the formula's K and L)
    n = k.shape[0]
    if estimator == "biased":
        h = np.eye(n) - np.ones((n, n)) / n
        return float(np.trace(k @ h @ l @ h)) / (n - 1) ** 2
    np.fill_diagonal(k, 0.0)
    np.fill_diagonal(l, 0.0)
    ones = np.ones(n)
    value = (
        np.trace(k @ l)
        + (ones @ k @ ones) * (ones @ l @ ones) / ((n - 1) * (n - 2))
        - 2.0 / (n - 2) * (ones @ k @ l @ ones)
    )
    return float(value) / (n * (n - 3))


def ref_cka(x: np.ndarray, y: np.ndarray, estimator: str) -> float:
    return ref_hsic(x, y, estimator) / np.sqrt(ref_hsic(x, x, estimator) * ref_hsic(y, y, estimator))


def ref_grid(a: np.ndarray, b: np.ndarray, estimator: str) -> np.ndarray:
    return np.array([[ref_cka(x, y, estimator) for y in b] for x in a])


def ref_aggregate(batches: list[tuple[np.ndarray, np.ndarray]], estimator: str, aggregation: str) -> np.ndarray:
    if aggregation == "mean_of_ratios":
        return np.mean([ref_grid(a, b, estimator) for a, b in batches], axis=0)
    cross = sum(np.array([[ref_hsic(x, y, estimator) for y in b] for x in a]) for a, b in batches)
    self_a = sum(np.array([ref_hsic(x, x, estimator) for x in a]) for a, _ in batches)
    self_b = sum(np.array([ref_hsic(y, y, estimator) for y in b]) for _, b in batches)
    return cross / np.sqrt(np.outer(self_a, self_b))
