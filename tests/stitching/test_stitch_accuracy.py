"""The accuracy penalty of a stitched classifier: counts against an independent argmax, the paired CI, g's counts
reused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.stitching import IdentityStitch, batch_correct, evaluate_stitch_accuracy
from thinkalike.stitching.data import PreparedSplit
from thinkalike.stitching.evaluate import BatchLosses


class LinearClassifier:
    """g: class logits = mean over positions of (features after the layer) @ W (the layer is ignored)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.device = torch.device("cpu")

    def logits_from_layer(self, residual, layer, input_ids, attention_mask):
        return residual.mean(dim=1) @ self.weight

    def logits(self, input_ids, attention_mask=None):
        raise AssertionError("g's own counts are given")


def test_accuracy_penalty_counts_and_interval():
    generator = torch.Generator().manual_seed(0)
    n, seq, d = 70, 3, 4
    features = torch.randn(n, seq, d, generator=generator)
    labels = torch.randint(0, 2, (n,), generator=generator)
    weight = torch.randn(d, 2, generator=generator)
    split = PreparedSplit(torch.zeros(n, seq, dtype=torch.long), torch.ones(n, seq, dtype=torch.long), labels, features)
    g = LinearClassifier(weight)
    correct = ((features.mean(dim=1) @ weight).argmax(-1) == labels).numpy()
    counts = batch_correct(lambda x, ids, mask: g.logits_from_layer(x, 0, ids, mask), split, 32)
    assert counts.counts.tolist() == [32, 32, 6]
    assert counts.sums.tolist() == [correct[:32].sum(), correct[32:64].sum(), correct[64:].sum()]
    # g's own predictions: all right; the stitched model (identity on these features) is right where `correct`
    own = BatchLosses(counts.counts.astype(float), counts.counts)
    result = evaluate_stitch_accuracy(IdentityStitch(d), g, 0, split, batch_size=32, n_bootstrap=200, g_correct=own)
    assert result.stitched_accuracy == pytest.approx(correct.mean())
    assert result.g_accuracy == 1.0
    assert result.penalty == pytest.approx(1.0 - correct.mean())
    assert result.penalty_ci_low <= result.penalty <= result.penalty_ci_high
    assert result.n_sequences == n and result.n_batches == 3
    same = evaluate_stitch_accuracy(IdentityStitch(d), g, 0, split, batch_size=32, g_correct=counts)
    assert same.penalty == 0.0 and same.penalty_ci_low == same.penalty_ci_high == 0.0
    with pytest.raises(ValueError, match="other batches"):
        evaluate_stitch_accuracy(IdentityStitch(d), g, 0, split, batch_size=16, g_correct=own)
    assert np.isclose(counts.mean, correct.mean())
