"""Reference losses that a trained language model must beat."""

from __future__ import annotations

import numpy as np


def unigram_entropy_nats(train_ids: np.ndarray, heldout_ids: np.ndarray, vocab_size: int) -> float:
    """Cross-entropy (nats/token) on ``heldout_ids`` of an add-one-smoothed unigram model.

    The model is estimated on ``train_ids``: p(v) = (count(v) + 1) / (N + vocab_size), with N
    the number of training tokens. Token ids of any shape are flattened; every id must lie in
    ``[0, vocab_size)``. Pass the tokens that the language model is scored on (e.g. no padding).
    """
    train = np.asarray(train_ids).ravel()
    heldout = np.asarray(heldout_ids).ravel()
    if heldout.size == 0:
        raise ValueError("heldout_ids is empty")
    for name, ids in (("train_ids", train), ("heldout_ids", heldout)):
        if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
            raise ValueError(f"{name} has ids outside [0, vocab_size={vocab_size})")
    counts = np.bincount(train.astype(np.int64), minlength=vocab_size).astype(np.float64)
    log_probs = np.log(counts + 1.0) - np.log(train.size + vocab_size)
    return float(-log_probs[heldout.astype(np.int64)].mean())
