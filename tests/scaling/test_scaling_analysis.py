"""The scaling-family analysis (thinkalike.scaling.analysis) on planted CKA tables: the planted blocks, the planted
outlier, its on-trend twin, the trend of intra-model similarity with size and the early-layer cells are recovered."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from thinkalike.scaling.analysis import (
    Architecture,
    ScalingConfigError,
    ScalingSettings,
    analyse_family,
    architecture_of,
    scaling_metrics,
)
from thinkalike.scaling.figures import scaling_figure

#: name: (d_model, blocks, heads, d_head); "l" is off-trend (head dimension 40), "l_twin" its on-trend twin
SHAPES = {
    "xs": (32, 2, 2, 16),
    "s": (48, 3, 3, 16),
    "m": (64, 4, 4, 16),
    "l": (80, 6, 2, 40),
    "xl": (96, 8, 6, 16),
    "l_twin": (80, 6, 5, 16),
}
ARCHITECTURES = {name: Architecture(d, n, h, dh, dh // 4, 4 * d) for name, (d, n, h, dh) in SHAPES.items()}
FAMILY = ["xs", "s", "m", "l", "xl"]
N_BATCHES = 4


def _long_table(a: str, b: str, matrix: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    batches = matrix[None] + rng.normal(scale=0.005, size=(N_BATCHES, *matrix.shape))
    if a == b:
        batches = (batches + batches.transpose(0, 2, 1)) / 2
    rows = []
    for i, j in itertools.product(range(matrix.shape[0]), range(matrix.shape[1])):
        values = batches[:, i, j]
        rows.append(
            {
                "model_a": a,
                "layer_a": i,
                "model_b": b,
                "layer_b": j,
                "cka": values.mean(),
                "ci_low": values.min(),
                "ci_high": values.max(),
                "batch_cka": list(values),
            }
        )
    return pd.DataFrame(rows)


def _intra(name: str) -> np.ndarray:
    """Blocks: embeddings + first block, the middle, the last block; intra similarity grows with size."""
    n = SHAPES[name][1] + 1
    level = {"xs": 0.1, "s": 0.3, "m": 0.5, "l": 0.6, "xl": 0.75, "l_twin": 0.6}[name]
    cuts = [0, 2, n - 1, n] if n > 3 else [0, 1, n]
    matrix = np.full((n, n), level - 0.1)  # mean off-diagonal: 0.10, 0.25, 0.46, 0.60, 0.78 from xs to xl
    for start, stop in zip(cuts[:-1], cuts[1:]):
        matrix[start:stop, start:stop] = level + 0.2
    np.fill_diagonal(matrix, 1.0)
    return matrix


def _between(a: str, b: str) -> np.ndarray:
    """CKA falls with the difference in relative depth; the off-trend member's intermediate layers are unlike."""
    depth_a = np.arange(SHAPES[a][1] + 1) / SHAPES[a][1]
    depth_b = np.arange(SHAPES[b][1] + 1) / SHAPES[b][1]
    matrix = 0.9 - 0.5 * np.abs(depth_a[:, None] - depth_b[None, :])
    for model, depths, axis in ((a, depth_a, 0), (b, depth_b, 1)):
        if model == "l":
            band = (depths >= 0.25) & (depths <= 0.75)
            if axis == 0:
                matrix[band, :] -= 0.35
            else:
                matrix[:, band] -= 0.35
    return matrix


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(0)
    models = FAMILY + ["l_twin"]
    out = {(m, m): _long_table(m, m, _intra(m), rng) for m in models}
    for a, b in itertools.combinations(models, 2):
        # some pairs stored in the other order, as the cka pipeline may have computed them
        a, b = (b, a) if (len(a) + len(b)) % 2 else (a, b)
        out[(a, b)] = _long_table(a, b, _between(a, b), rng)
    return out


def test_the_planted_outlier_is_flagged_and_its_twin_is_not(tables):
    result = analyse_family(tables, FAMILY, ARCHITECTURES, {"l": "l_twin"}, ScalingSettings(pair_resamples=1))
    summary = result.summary
    assert summary["outliers"] == ["l"]
    assert summary["trend_head_dim"] == 16
    members = result.members.set_index("model")
    assert members.loc["l", "off_trend"] and not members.loc["l_twin", "off_trend"]
    assert members.loc["l", "robust_z"] < -3.5
    twin = summary["twins"][0]
    assert twin["off_trend_flagged"] and not twin["twin_flagged"]
    assert twin["difference"] == pytest.approx(0.35, abs=0.05)  # the planted dip in the off-trend member's band
    assert twin["d_head_off_trend"] == 40 and twin["d_head_twin"] == 16


def test_planted_blocks_and_the_size_trend_are_recovered(tables):
    result = analyse_family(
        tables, FAMILY, ARCHITECTURES, {"l": "l_twin"}, ScalingSettings(n_resamples=50, pair_resamples=1)
    )
    members = result.members.set_index("model")
    assert members.loc["xl", "blocks"] == "0–1, 2–7, 8–8"
    assert members.loc["xl", "block_same_fraction"] == 1.0
    assert result.boundaries["xl"] == [2, 8]
    assert result.summary["intra_vs_size_spearman"] == pytest.approx(1.0)
    assert set(result.summary["structured_members"]) == set(FAMILY)


def test_planted_matched_blocks_between_two_members_are_recovered_from_either_stored_order(tables):
    """m (5 layers) against xl (9): m's 0–1, 2–3, 4 matched with xl's 0–1, 2–7, 8; every other pair keeps its smooth
    fall-off with depth. Stored as (m, xl) or as (xl, m), the pair row reads m's blocks as a's."""
    labels_m, labels_xl = np.array([0, 0, 1, 1, 2]), np.array([0, 0, 1, 1, 1, 1, 1, 1, 2])
    planted = np.where(labels_m[:, None] == labels_xl[None, :], 0.9, 0.3)
    for key in (("m", "xl"), ("xl", "m")):
        stored = {k: v for k, v in tables.items() if set(k) != {"m", "xl"}}
        matrix = planted if key == ("m", "xl") else planted.T
        stored[key] = _long_table(*key, matrix, np.random.default_rng(1))
        result = analyse_family(stored, FAMILY, ARCHITECTURES, {}, ScalingSettings(n_resamples=5, pair_resamples=10))
        row = result.pairs[(result.pairs["model_a"] == "m") & (result.pairs["model_b"] == "xl")].iloc[0]
        assert (row["blocks_a"], row["blocks_b"], row["n_blocks"]) == ("0–1, 2–3, 4–4", "0–1, 2–7, 8–8", 3), key
        assert row["block_within"] == pytest.approx(0.9, abs=0.01) and row["block_same_fraction"] == 1.0
        assert "m–xl" in result.summary["structured_pairs"]
    assert result.summary["n_member_pairs"] == 10


def test_early_layers_are_matched_by_relative_depth(tables):
    result = analyse_family(
        tables, FAMILY, ARCHITECTURES, {}, ScalingSettings(early_depths=(0.0, 0.5), pair_resamples=1)
    )
    pairs = result.pairs
    row = pairs[(pairs["model_a"] == "s") & (pairs["model_b"] == "xl") & (pairs["relative_depth"] == 0.5)].iloc[0]
    assert (row["layer_a"], row["layer_b"]) == (2, 4)  # round(0.5 * 3) = 2 (half up), 0.5 * 8 = 4
    expected = _between("s", "xl")[2, 4]
    assert row["cka"] == pytest.approx(expected, abs=0.02)
    assert len(pairs) == 10 * 2  # every pair of the 5 members, 2 depths
    assert set(result.summary["early"]) == {"0.0", "0.5"}


def test_outputs_for_mlflow_and_the_figure(tables):
    result = analyse_family(
        tables, FAMILY, ARCHITECTURES, {"l": "l_twin"}, ScalingSettings(n_resamples=20, pair_resamples=1)
    )
    metrics = scaling_metrics(result.summary)
    assert metrics["scaling.intra_vs_size_spearman"] == pytest.approx(1.0)
    assert "scaling.twin.l.difference" in metrics and "scaling.robust_z.xl" in metrics
    figure = scaling_figure(result)
    assert len(figure.axes) >= 4


def test_bad_settings_and_inputs_are_named(tables):
    with pytest.raises(ScalingConfigError, match="scaling.band"):
        ScalingSettings(band=(0.8, 0.2))
    with pytest.raises(ScalingConfigError, match="early_depths"):
        ScalingSettings(early_depths=(1.5,))
    with pytest.raises(ScalingConfigError, match="at least 3"):
        analyse_family(tables, ["xs", "s"], ARCHITECTURES, {}, ScalingSettings())
    with pytest.raises(ScalingConfigError, match="scaling.twins"):
        analyse_family(tables, FAMILY, ARCHITECTURES, {"l_twin": "l"}, ScalingSettings())
    missing = {key: value for key, value in tables.items() if set(key) != {"xs", "m"}}
    with pytest.raises(ScalingConfigError, match="no CKA table of 'xs' with 'm'|no CKA table of 'm' with 'xs'"):
        analyse_family(missing, FAMILY, ARCHITECTURES, {}, ScalingSettings())
    one_block = {**ARCHITECTURES, "xs": Architecture(32, 1, 2, 16, 4, 128)}
    with pytest.raises(ScalingConfigError, match=r"scaling.band \[0.25, 0.75\] holds no layer of 'xs'"):
        analyse_family(tables, FAMILY, one_block, {}, ScalingSettings())
    with pytest.raises(ScalingConfigError, match="'broken'"):
        architecture_of("broken", {"architecture": {"model_type": "gpt_neox", "hidden_size": 32}})


def test_architectures_of_both_zoo_families():
    neox = architecture_of(
        "n",
        {
            "family": "hf",
            "architecture": {
                "model_type": "gpt_neox",
                "hidden_size": 80,
                "num_hidden_layers": 6,
                "num_attention_heads": 2,
                "intermediate_size": 320,
                "rotary_pct": 0.25,
            },
        },
    )
    assert (neox.d_head, neox.rotary_dims, neox.n_parameters) == (40, 10, 6 * (4 * 80**2 + 2 * 80 * 320))
    bridge = architecture_of(
        "b",
        {
            "architecture": {
                "n_layers": 2,
                "d_model": 64,
                "n_heads": 4,
                "d_mlp": 256,
                "positional_embedding_type": "rotary",
            }
        },
    )
    assert (bridge.d_head, bridge.rotary_dims) == (16, 16)
