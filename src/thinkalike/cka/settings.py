"""How CKA is estimated (:class:`CKASettings`, checked on construction) and each estimator's range (no Kedro)."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from thinkalike.measures.cka import Estimator
from thinkalike.measures.significance import Aggregation
from thinkalike.models.aligned_batches import check_pooling

CKA_RANGES = {"unbiased": (-1.0, 1.0), "biased": (0.0, 1.0)}

AUTO_POOLING = "auto"  # token when the two tokenizers agree, else word (resolved per pair)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"CKASettings.skip_constant_layers must be true or false, got {value!r}")
    return value


class CKASettings(BaseModel):
    """How CKA is estimated; checked on construction so bad config fails before any compute (strict types, unknown
    settings refused).

    ``skip_constant_layers``: a layer that is constant in a minibatch has no CKA for that
    batch. False (default): its cells are NaN for the run, and so are the mean matched CKA and
    the distance of the pair (with warnings naming layer and batch). True: only that batch is
    left out of that layer's cells, and summaries run over the finite matched layers (the
    tables report ``n_batches`` per cell and ``n_finite_layers`` per pair).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    estimator: Estimator = "unbiased"
    aggregation: Aggregation = "mean_of_ratios"
    pooling: str = "token"
    batch_tokens: int = 512
    n_bootstrap: int = 200
    n_permutations: int = 50
    confidence: float = 0.95
    seed: int = 0
    skip_constant_layers: Annotated[bool, BeforeValidator(_boolean)] = False
    # rows leave out special tokens (bos, eos, pad, cls, sep, mask; thinkalike.models.aligned_batches)
    exclude_special_tokens: bool = True

    @model_validator(mode="after")
    def _check(self) -> CKASettings:
        if self.pooling != AUTO_POOLING:
            try:
                check_pooling(self.pooling)
            except ValueError as error:
                raise ValueError(f"CKASettings.{error}") from None
        if self.batch_tokens < 4:
            raise ValueError(
                f"CKASettings.batch_tokens must be at least 4 (unbiased HSIC needs n >= 4), got {self.batch_tokens}"
            )
        if self.n_bootstrap < 0:
            raise ValueError(f"CKASettings.n_bootstrap must be >= 0, got {self.n_bootstrap}")
        if self.n_permutations < 0:
            raise ValueError(f"CKASettings.n_permutations must be >= 0, got {self.n_permutations}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"CKASettings.confidence must be in (0, 1), got {self.confidence}")
        return self


def resolve_pooling(settings: CKASettings, index_a: pd.DataFrame, index_b: pd.DataFrame) -> CKASettings:
    """``pooling: auto`` made concrete for one pair: ``token`` when the two index tables list the same
    token ids in the same order (same tokenizer on the same texts, e.g. a model with itself or two zoo
    models), else ``word``. Other poolings are returned unchanged."""
    if settings.pooling != AUTO_POOLING:
        return settings
    same_tokens = len(index_a) == len(index_b) and np.array_equal(
        index_a["token_id"].to_numpy(), index_b["token_id"].to_numpy()
    )
    return settings.model_copy(update={"pooling": "token" if same_tokens else "word"})
