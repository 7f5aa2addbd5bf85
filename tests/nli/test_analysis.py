"""The NLI experiment's groups on a planted accuracy table (no Kedro, no training)."""

from __future__ import annotations

import pandas as pd
import pytest

from thinkalike.nli.analysis import BASELINE, split_groups


def test_groups_on_a_planted_table_and_k_too_large():
    accuracy = pd.DataFrame(
        [
            {"model": m, "split": s, "subcase": "all", "label": lab, "n_pairs": 10, "accuracy": acc}
            for m, ood in [("a", 0.1), ("b", 0.5), ("c", 0.3), ("d", 0.5), ("e", 0.0), (BASELINE, 0.0)]
            for s, lab, acc in [("test", "all", 0.9), ("ood", "non_entailed", ood), ("ood", "entailed", 0.9)]
        ]
    )
    groups = split_groups(accuracy, 2)
    assert list(groups["model"]) == ["b", "d", "c", "a", "e"]  # ties by name
    assert list(groups["group"]) == ["generalizing", "generalizing", "middle", "heuristic", "heuristic"]
    with pytest.raises(ValueError, match="k = 3 must be between 1 and N / 2 = 2.5"):
        split_groups(accuracy, 3)
