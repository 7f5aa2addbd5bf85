"""Loss sums per objective and the paired bootstrap interval of the penalty, against direct references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.models.training import causal_lm_loss, masked_lm_loss
from thinkalike.stitching import paired_bootstrap_ci
from thinkalike.stitching.data import (
    IGNORE,
    TokenSplit,
    loss_sum,
    target_count,
    targets_for,
)
from thinkalike.stitching.evaluate import BatchLosses


def test_loss_sums_are_the_token_weighted_objectives():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 20, (3, 7), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0
    logits = torch.randn(3, 7, 20, generator=generator)
    _, targets = targets_for(TokenSplit.of(ids, mask), "causal")
    count = target_count(targets, "causal")
    assert int(count) == 3 * 6 - 2
    torch.testing.assert_close(loss_sum(logits, targets, "causal") / count, causal_lm_loss(logits, ids, mask))
    masked = ids.masked_fill(torch.rand(3, 7, generator=generator) < 0.5, IGNORE)
    torch.testing.assert_close(
        loss_sum(logits, masked, "masked") / target_count(masked, "masked"), masked_lm_loss(logits, masked)
    )
    labels = torch.tensor([2, 0, 1])
    class_logits = torch.randn(3, 4, generator=generator)
    torch.testing.assert_close(
        loss_sum(class_logits, labels, "label") / 3, torch.nn.functional.cross_entropy(class_logits, labels)
    )


def test_paired_bootstrap_matches_a_direct_loop():
    rng = np.random.default_rng(0)
    counts = rng.integers(50, 100, size=12)
    own = BatchLosses(rng.uniform(1, 2, 12) * counts, counts)
    stitched = BatchLosses(own.sums + rng.normal(0.2, 0.05, 12) * counts, counts)
    low, high = paired_bootstrap_ci(stitched, own, n_bootstrap=500, level=0.9, seed=3)
    draws = np.random.default_rng(3).integers(0, 12, size=(500, 12))
    values = [(stitched.sums[d] - own.sums[d]).sum() / counts[d].sum() for d in draws]
    assert (low, high) == pytest.approx(tuple(np.quantile(values, [0.05, 0.95])), abs=1e-12)
    penalty = (stitched.sums - own.sums).sum() / counts.sum()
    assert low < penalty < high and stitched.mean - own.mean == pytest.approx(penalty)
    one = BatchLosses(stitched.sums[:1], counts[:1])
    assert paired_bootstrap_ci(one, BatchLosses(own.sums[:1], counts[:1])) == pytest.approx(
        ((stitched.sums[0] - own.sums[0]) / counts[0],) * 2
    )
