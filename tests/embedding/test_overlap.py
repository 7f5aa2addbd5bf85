"""Key–value overlap in embedding space (Dar et al. appendix B, fig. 6): the Jaccard of top-k token sets against a
plain-Python reference built from the raw weights, planted keys equal to their values, independent Gaussian keys
and values, the summary across layers, a real zoo bridge and a Mamba (no attention), and bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tests.embedding.conftest import TOY_D as D
from tests.embedding.conftest import TOY_D_HEAD as D_HEAD
from tests.embedding.conftest import TOY_D_MLP as D_MLP
from tests.embedding.conftest import TOY_HEADS as HEADS
from tests.embedding.conftest import toy_parameters
from thinkalike.embedding import extract_parameters, vocabulary_embedding
from thinkalike.embedding.overlap import (
    OVERLAP_COLUMNS,
    PAIRS,
    SUMMARY_COLUMNS,
    auto_k,
    jaccard,
    pair_overlap,
    random_derangement,
    summarise_overlap,
)


def raw_pairs(params: dict[str, torch.Tensor], pair: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The corresponding (first, second) d-vectors of one layer, read off the raw weights (not ModelParameters)."""
    if pair == "FF_key-FF_value":
        return [(params["FF_in"][:, i].numpy(), params["FF_out"][i].numpy()) for i in range(params["FF_out"].shape[0])]
    first, second = {"W_V-W_O": ("W_V", "W_O"), "W_Q-W_K": ("W_Q", "W_K")}[pair]
    out = []
    for head in range(params[first].shape[0]):
        for column in range(params[first].shape[2]):
            other = params[second][head][column] if second == "W_O" else params[second][head][:, column]
            out.append((params[first][head][:, column].numpy(), other.numpy()))
    return out


def reference_top(vector: np.ndarray, embedding: np.ndarray, k: int) -> set[int]:
    logits = vector @ embedding
    return {int(i) for i in np.argsort(-logits, kind="stable")[:k]}


def reference_jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b)


@pytest.fixture(scope="module")
def embedding() -> torch.Tensor:
    return torch.randn(D, 60, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def test_matched_and_random_equal_the_plain_python_reference(embedding):
    params, k = toy_parameters(), 7
    table = pair_overlap(params, embedding, k=k, n_random=1500, seed=3, dtype=torch.float64)
    assert list(table.columns) == OVERLAP_COLUMNS and len(table) == 2 * 3
    e = embedding.numpy()
    for row in table.itertuples():
        pairs = raw_pairs(params.groups[row.layer], row.pair)
        tops = [(reference_top(x, e, k), reference_top(y, e, k)) for x, y in pairs]
        matched = [reference_jaccard(a, b) for a, b in tops]
        off_diagonal = [
            reference_jaccard(tops[i][0], tops[j][1]) for i in range(len(tops)) for j in range(len(tops)) if i != j
        ]
        assert row.n_pairs == len(pairs) == (D_MLP if row.pair == "FF_key-FF_value" else HEADS * D_HEAD)
        assert row.matched_mean == pytest.approx(np.mean(matched), abs=1e-12)
        # a random derangement pairs each row with a uniform other row: the mean of many is the off-diagonal mean
        assert row.random_mean == pytest.approx(np.mean(off_diagonal), abs=0.01)
        assert row.difference == pytest.approx(row.matched_mean - row.random_mean)
        assert row.ratio == pytest.approx(row.matched_mean / row.random_mean)
        assert row.k == k and row.n_random == 1500 and row.random_sd > 0


def test_jaccard_of_arbitrary_id_sets_in_small_blocks():
    generator = torch.Generator().manual_seed(5)
    first = torch.stack([torch.randperm(30, generator=generator)[:6] for _ in range(25)])
    second = torch.stack([torch.randperm(30, generator=generator)[:6] for _ in range(25)])
    second[0] = first[0].flip(0)  # the same set in another order
    got = jaccard(first, second, 30, block_bytes=30 * 4)  # 4 rows per block
    expected = [reference_jaccard(set(a.tolist()), set(b.tolist())) for a, b in zip(first, second)]
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-15)
    assert got[0] == 1.0


def test_random_derangement_has_no_fixed_point():
    generator = torch.Generator().manual_seed(0)
    for n in (2, 3, 17):
        for _ in range(20):
            partner = random_derangement(n, generator)
            assert sorted(partner.tolist()) == list(range(n)) and not (partner == torch.arange(n)).any()
    with pytest.raises(ValueError, match=r"^n: "):
        random_derangement(1, generator)


def test_values_equal_to_their_keys_overlap_fully(embedding):
    params = toy_parameters(seed=2)
    for layer in params.groups:
        layer["FF_out"] = layer["FF_in"].T.clone()
        layer["W_O"] = layer["W_V"].transpose(1, 2).clone()
        layer["W_K"] = layer["W_Q"].clone()
    table = pair_overlap(params, embedding, k=5, n_random=5)
    assert (table["matched_mean"] == 1.0).all()
    assert (table["random_mean"] < 1.0).all() and (table["difference"] > 0).all()


def test_independent_keys_and_values_overlap_as_chance(embedding):
    """400 independent Gaussian keys and values per layer: matched and random are means of one distribution (each
    ≈ 0.06 here, above the uniform chance 5 / 115 as E is not isotropic; one mean's spread about 0.005, seen over
    seeds 0-4): their difference stays within 0.015, three standard deviations of a difference."""
    params = toy_parameters(layers=3, seed=4, n_mlp=400)
    table = pair_overlap(params, embedding, k=5, n_random=10, pairs=["FF_key-FF_value"])
    assert set(table["n_pairs"]) == {400}
    assert (table["difference"].abs() < 0.015).all(), table
    assert (table["random_sd"] < 0.01).all()


def test_summary_across_layers():
    table = pd.DataFrame(
        {
            "model": "m",
            "layer": [0, 1, 2, 0, 1, 2],
            "pair": ["FF_key-FF_value"] * 3 + ["W_V-W_O"] * 3,
            "k": 10,
            "matched_mean": [0.3, 0.2, 0.1, 0.05, 0.05, 0.05],
            "random_mean": [0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
        }
    ).assign(difference=lambda t: t["matched_mean"] - t["random_mean"])
    summary = summarise_overlap(table).set_index("pair")
    assert list(summarise_overlap(table).columns) == SUMMARY_COLUMNS
    assert summary.loc["FF_key-FF_value", "difference"] == pytest.approx(0.1)
    assert summary.loc["FF_key-FF_value", "ratio"] == pytest.approx(2.0)
    assert summary.loc["FF_key-FF_value", "layers_above"] == 2 and summary.loc["W_V-W_O", "layers_above"] == 0
    assert (summary["n_layers"] == 3).all()
    assert summarise_overlap(table.iloc[:0]).empty


def test_zoo_bridge_and_mamba(zoo_model, tiny_mamba, caplog):
    params = extract_parameters(zoo_model)
    matrix = vocabulary_embedding(zoo_model)
    table = pair_overlap(params, matrix, k=auto_k(matrix.shape[1]), n_random=3)
    assert len(table) == zoo_model.n_layers * len(PAIRS)
    assert np.isfinite(table[["matched_mean", "random_mean", "difference", "ratio"]].to_numpy()).all()
    assert table["matched_mean"].between(0, 1).all() and set(table["k"]) == {13}  # round(256 / 20)
    again = pair_overlap(params, matrix, k=13, n_random=3)
    pd.testing.assert_frame_equal(table, again)  # seeded
    with caplog.at_level("WARNING"):
        mamba = pair_overlap(extract_parameters(tiny_mamba), vocabulary_embedding(tiny_mamba), k=10, n_random=2)
    assert set(mamba["pair"]) == {"FF_key-FF_value"} and "W_V-W_O skipped" in caplog.text


def test_auto_k():
    assert (auto_k(50257), auto_k(394), auto_k(200), auto_k(5)) == (100, 20, 10, 1)


def test_one_row_has_no_random_pairing(embedding):
    table = pair_overlap(toy_parameters(layers=1, n_mlp=1), embedding, k=3, pairs=["FF_key-FF_value"])
    row = table.iloc[0]
    assert row["n_pairs"] == 1 and row["n_random"] == 0 and math.isnan(row["random_mean"]) and math.isnan(row["ratio"])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"k": 61}, r"^k: k=61 exceeds the vocabulary size V=60$"),
        ({"k": 0}, r"^k: k must be a positive integer, got 0$"),
        ({"k": 5, "n_random": 0}, r"^n_random: a positive number of random pairings, got 0$"),
        ({"k": 5, "pairs": ["FF_key-W_O"]}, r"^pairs: unknown pair kinds \['FF_key-W_O'\]"),
    ],
)
def test_bad_input_is_named(embedding, arguments, message):
    with pytest.raises(ValueError, match=message):
        pair_overlap(toy_parameters(layers=1), embedding, **arguments)
