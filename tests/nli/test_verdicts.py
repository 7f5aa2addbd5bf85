"""The NLI report's sentences on planted tables (no Kedro, no training): stitching, CKA and distance, which must
follow the numbers."""

from __future__ import annotations

import pandas as pd

from thinkalike.nli.analysis import RELATIONS
from thinkalike.nli.verdicts import (
    cka_sentence,
    distance_sentence,
    stitching_divergence,
    stitching_sentence,
)


def planted_stitching(diverging_layers: set[int], n_layers: int = 4) -> pd.DataFrame:
    rows = []
    for layer in range(n_layers + 1):
        for kind in RELATIONS:
            high = kind == "between" and layer in diverging_layers
            mean = 0.3 if high else 0.01
            rows.append(
                {
                    "data": "test",
                    "layer": layer,
                    "relative_depth": layer / n_layers,
                    "relation": kind,
                    "mean_penalty": mean,
                    "ci_low": mean - 0.02,
                    "ci_high": mean + 0.02,
                    "mean_stitched_accuracy": 0.9 - mean,
                    "n_pairs": 6,
                }
            )
    return pd.DataFrame(rows)


def test_the_stitching_sentence_follows_the_numbers():
    diverging = planted_stitching({3, 4})
    assert stitching_divergence(diverging, "test") == ([3, 4], [])
    sentence = stitching_sentence(diverging, "test")
    assert "diverge at layer(s) 3 and 4" in sentence and "0.300 between groups" in sentence
    flat = planted_stitching(set())
    assert "do not diverge" in stitching_sentence(flat, "test")
    # overlapping intervals: between is higher, but not beyond the within CIs
    overlapping = planted_stitching({4})
    overlapping.loc[overlapping["relation"] == "between", ["ci_low"]] = 0.0
    assert "do not diverge" in stitching_sentence(overlapping, "test")


def test_the_cka_and_distance_sentences_follow_the_numbers():
    rows = []
    for depth in (0.0, 0.5, 1.0):
        for a, b in (("generalizing", "generalizing"), ("generalizing", "heuristic"), ("heuristic", "heuristic")):
            low = a != b and depth == 1.0
            mean = 0.5 if low else 0.95
            rows.append(
                {
                    "group_a": a,
                    "group_b": b,
                    "relative_depth": depth,
                    "mean": mean,
                    "ci_low": mean - 0.02,
                    "ci_high": mean + 0.02,
                    "n": 4,
                }
            )
    curves = pd.DataFrame(rows)
    assert "diverge at relative depth(s) 1" in cka_sentence(curves)
    assert "do not diverge" in cka_sentence(curves.assign(mean=0.95, ci_low=0.93, ci_high=0.97))
    distances = pd.DataFrame(
        {
            "group_a": ["generalizing", "generalizing", "heuristic"],
            "group_b": ["generalizing", "heuristic", "heuristic"],
            "kind": ["within", "between", "within"],
            "mean": [0.2, 0.9, 0.3],
            "std": 0.1,
            "n": [1, 4, 1],
            "n_finite": [1, 4, 1],
        }
    )
    assert "farther apart than pairs within either group" in distance_sentence(distances)
    assert "no farther apart" in distance_sentence(distances.assign(mean=[0.2, 0.25, 0.3]))
