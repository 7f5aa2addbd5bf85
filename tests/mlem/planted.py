"""Planted-truth stimuli for the MLEM tests: vectors are concatenated one-hot features scaled by known weights."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Feature → (number of values, scale of its one-hot block); "unused" never enters the vectors.
PLANTED = {"a": (3, 3.0), "b": (2, 2.0), "c": (4, 1.2), "d": (2, 0.6), "unused": (3, 0.0)}


def planted_stimuli(n: int = 300, noise: float = 0.3, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``(feature frame, vectors)``: block k of a vector is ``scale_k · onehot(value_k)``, plus Gaussian noise.

    The squared distance of two stimuli is then ``Σ_k 2·scale_k² · Δf_k`` + noise, so the true MLEM
    weights rank like the scales, and "unused" has weight 0.
    """
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({name: rng.integers(0, size, n).astype(str) for name, (size, _) in PLANTED.items()})
    blocks = [np.eye(size)[frame[name].astype(int)] * scale for name, (size, scale) in PLANTED.items()]
    vectors = np.concatenate(blocks, axis=1)
    return frame, vectors + noise * rng.standard_normal(vectors.shape)


def true_scales(names) -> np.ndarray:
    return np.array([PLANTED[name][1] for name in names])


#: Bilinear planted truth: feature → (kind, number of values or None for numeric, weight w_k of W = diag(w)).
BILINEAR = {
    "a": ("categorical", 3, 1.0),
    "b": ("categorical", 2, 0.6),
    "x": ("numeric", None, 0.4),
    "c": ("categorical", 4, 0.2),
}


def bilinear_stimuli(n: int = 400, noise: float = 0.05, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``(feature frame, vectors)`` whose squared Euclidean distances are ``Δfᵀ W Δf`` (+ noise), ``W = diag(w)``.

    A categorical feature k is a one-hot block scaled by ``√(w_k/2)`` (two different values: squared
    distance ``w_k = w_k·Δf_k²``); the numeric feature ``x`` is uniform, min-max scaled to [0, 1] as
    :func:`~thinkalike.mlem.features.encode_features` scales it, and enters as one coordinate
    ``√w_x · x`` (squared distance ``w_x·Δf_x²``, ``Δf_x = |x_i − x_j|``). Gaussian noise of std
    ``noise`` is added to every coordinate.
    """
    rng = np.random.default_rng(seed)
    columns, blocks = {}, []
    for name, (kind, size, weight) in BILINEAR.items():
        if kind == "categorical":
            codes = rng.integers(0, size, n)
            columns[name] = codes.astype(str)
            blocks.append(np.eye(size)[codes] * np.sqrt(weight / 2))
        else:
            raw = rng.uniform(0.0, 1.0, n)
            scaled = (raw - raw.min()) / (raw.max() - raw.min())
            columns[name] = raw
            blocks.append(np.sqrt(weight) * scaled[:, None])
    vectors = np.concatenate(blocks, axis=1)
    return pd.DataFrame(columns), vectors + noise * rng.standard_normal(vectors.shape)


def bilinear_weights(names) -> np.ndarray:
    """The planted ``w`` in ``names`` order, normalised to unit Euclidean norm (as the fitted weights are)."""
    weights = np.array([BILINEAR[name][2] for name in names])
    return weights / np.linalg.norm(weights)
