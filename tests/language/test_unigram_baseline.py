"""The unigram cross-entropy baseline against hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thinkalike.language.baselines import unigram_entropy_nats


def test_hand_computed_example():
    # vocab 4, train counts [2, 1, 0, 0] (N = 3) -> p = [3, 2, 1, 1] / 7
    train = np.array([0, 0, 1])
    heldout = np.array([[0, 2], [1, 3]])
    expected = -(math.log(3 / 7) + math.log(1 / 7) + math.log(2 / 7) + math.log(1 / 7)) / 4
    assert unigram_entropy_nats(train, heldout, vocab_size=4) == pytest.approx(expected, rel=1e-12)


def test_uniform_when_no_training_data():
    no_training = np.array([], dtype=np.int64)
    entropy = unigram_entropy_nats(no_training, np.array([1, 2]), 10)
    assert entropy == pytest.approx(math.log(10))


def test_errors():
    with pytest.raises(ValueError, match="heldout_ids"):
        unigram_entropy_nats(np.array([0]), np.array([], dtype=np.int64), 4)
    with pytest.raises(ValueError, match="vocab_size=4"):
        unigram_entropy_nats(np.array([0, 4]), np.array([1]), 4)
