"""How CKA is estimated (:class:`CKASettings`, checked on construction) and each estimator's range (no Kedro)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from thinkalike.measures.cka import ESTIMATORS, Estimator
from thinkalike.measures.significance import AGGREGATIONS, Aggregation
from thinkalike.models.aligned_batches import check_pooling

CKA_RANGES = {"unbiased": (-1.0, 1.0), "biased": (0.0, 1.0)}

AUTO_POOLING = "auto"  # token when the two tokenizers agree, else word (resolved per pair)


@dataclass(frozen=True)
class CKASettings:
    """How CKA is estimated; checked on construction so bad config fails before any compute.

    ``skip_constant_layers``: a layer that is constant in a minibatch has no CKA for that
    batch. False (default): its cells are NaN for the run, and so are the mean matched CKA and
    the distance of the pair (with warnings naming layer and batch). True: only that batch is
    left out of that layer's cells, and summaries run over the finite matched layers (the
    tables report ``n_batches`` per cell and ``n_finite_layers`` per pair).
    """

    estimator: Estimator = "unbiased"
    aggregation: Aggregation = "mean_of_ratios"
    pooling: str = "token"
    batch_tokens: int = 512
    n_bootstrap: int = 200
    n_permutations: int = 50
    confidence: float = 0.95
    seed: int = 0
    skip_constant_layers: bool = False
    # rows leave out special tokens (bos, eos, pad, cls, sep, mask; thinkalike.models.aligned_batches)
    exclude_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"cka.estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"cka.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.pooling != AUTO_POOLING:
            check_pooling(self.pooling)
        if self.batch_tokens < 4:
            raise ValueError(
                f"cka.batch_tokens must be at least 4 (unbiased HSIC needs n >= 4), got {self.batch_tokens}"
            )
        if self.n_bootstrap < 0 or self.n_permutations < 0:
            raise ValueError("cka.n_bootstrap and cka.n_permutations must be >= 0")
        if not 0 < self.confidence < 1:
            raise ValueError(f"cka.confidence must be in (0, 1), got {self.confidence}")
        if not isinstance(self.skip_constant_layers, bool):
            raise ValueError(f"cka.skip_constant_layers must be true or false, got {self.skip_constant_layers!r}")


def resolve_pooling(settings: CKASettings, index_a: pd.DataFrame, index_b: pd.DataFrame) -> CKASettings:
    """``pooling: auto`` made concrete for one pair: ``token`` when the two index tables list the same
    token ids in the same order (same tokenizer on the same texts, e.g. a model with itself or two zoo
    models), else ``word``. Other poolings are returned unchanged."""
    if settings.pooling != AUTO_POOLING:
        return settings
    same_tokens = len(index_a) == len(index_b) and np.array_equal(
        index_a["token_id"].to_numpy(), index_b["token_id"].to_numpy()
    )
    return dataclasses.replace(settings, pooling="token" if same_tokens else "word")
