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
