"""The one unbiased HSIC (measures/hsic.py) against Song et al.'s formula evaluated on explicit n × n kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.measures.hsic import unbiased_hsic


def song_hsic(k: np.ndarray, l: np.ndarray) -> float:  # noqa: E741 - the paper's L
    n = k.shape[0]
    kt, lt = k - np.diag(np.diag(k)), l - np.diag(np.diag(l))
    ones = np.ones(n)
    return float(
        (
            np.trace(kt @ lt)
            + (ones @ kt @ ones) * (ones @ lt @ ones) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * ones @ kt @ lt @ ones
        )
        / (n * (n - 3))
    )


@pytest.mark.parametrize("n", [4, 9, 40])
def test_the_terms_give_song_et_als_estimator_for_floats_and_tensors(n):
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=(n, 5)), rng.normal(size=(n, 3))
    k, l = x @ x.T, y @ y.T  # noqa: E741
    kt, lt = k - np.diag(np.diag(k)), l - np.diag(np.diag(l))
    terms = (float(np.trace(kt @ lt)), float(kt.sum() * lt.sum()), float(kt.sum(1) @ lt.sum(1)))
    assert unbiased_hsic(*terms, n) == pytest.approx(song_hsic(k, l), rel=1e-12, abs=1e-12)
    batched = unbiased_hsic(*(torch.tensor([t, 2 * t], dtype=torch.float64) for t in terms), n)
    assert batched.tolist() == pytest.approx([song_hsic(k, l), 2 * song_hsic(k, l)], rel=1e-12, abs=1e-12)
