"""Special tokens as rows of the CKA: a planted truth where they alone make two models look alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.reference_cka import ref_grid
from thinkalike.cka.compute import cka_long_table, compute_cka
from thinkalike.cka.settings import CKASettings
from thinkalike.models.activation_store import ActivationBatch, write_activation_store
from thinkalike.models.aligned_batches import AlignmentError, aligned_minibatches, pooled_rows

N_SEQUENCES, N_REAL, N_CTX, N_LAYERS = 12, 6, 8, 2  # each row: <bos>, 6 real tokens, <eos>


def planted_index() -> pd.DataFrame:
    """One sentence per row: ``<bos> w0 … w5 <eos>``, the same token stream for both models."""
    rows = []
    for sequence in range(N_SEQUENCES):
        for position in range(N_CTX):
            special = position in (0, N_CTX - 1)
            token = 2 if position == 0 else 3 if special else 10 + (7 * sequence + position) % 40
            rows.append(
                {
                    "sequence": sequence,
                    "position": position,
                    "token_id": token,
                    "sentence_id": sequence,
                    "word_index": -1 if special else position - 1,
                    "is_special": special,
                }
            )
    return pd.DataFrame(rows)


def planted_store(path, seed: int, width: int, model: str):
    """Residual streams whose real tokens are independent Gaussians (nothing shared between models) and
    whose ``<bos>`` / ``<eos>`` rows are huge outliers along two orthogonal directions of the model's own
    choosing (an attention sink and its partner: the same structure in every model)."""
    rng = np.random.default_rng(seed)
    residual = rng.standard_normal((N_LAYERS, N_SEQUENCES, N_CTX, width)).astype(np.float32)
    for layer in range(N_LAYERS):  # two orthonormal directions, drawn per model and layer
        directions = np.linalg.qr(rng.standard_normal((width, 2)))[0].T.astype(np.float32)
        residual[layer, :, 0] += 60.0 * directions[0]  # <bos>
        residual[layer, :, -1] += 30.0 * directions[1]  # <eos>
    mask = np.ones((N_SEQUENCES, N_CTX), dtype=np.int64)
    batches = [
        ActivationBatch.from_padded(residual[:, s : s + 5], mask[s : s + 5], s) for s in range(0, N_SEQUENCES, 5)
    ]
    return write_activation_store(path, batches, model=model), residual


@pytest.fixture
def planted(tmp_path):
    index = planted_index()
    store_a, residual_a = planted_store(tmp_path / "a", seed=1, width=8, model="a")
    store_b, residual_b = planted_store(tmp_path / "b", seed=2, width=6, model="b")
    return index, store_a, residual_a, store_b, residual_b


def _cka(planted, **settings) -> tuple[pd.DataFrame, object]:
    index, store_a, _, store_b, _ = planted
    chosen = CKASettings(batch_tokens=1000, n_bootstrap=0, **settings)  # one minibatch: every row at once
    result = compute_cka(store_a, index, store_b, index, chosen, model_a="a", model_b="b", device="cpu")
    return cka_long_table(result, chosen), result


def test_special_tokens_decide_cka_unless_excluded(planted):
    index, _, residual_a, _, residual_b = planted
    with_specials, result_in = _cka(planted, exclude_special_tokens=False)
    without, result_out = _cka(planted)  # the default
    assert (result_in.cka > 0.9).all(), result_in.cka  # the shared outliers alone make every layer pair "alike"
    assert (np.abs(result_out.cka) < 0.2).all(), result_out.cka  # the real tokens share nothing
    real = np.ones((N_SEQUENCES, N_CTX), dtype=bool)
    real[:, [0, -1]] = False
    expected = ref_grid(residual_a[:, real].astype(np.float64), residual_b[:, real].astype(np.float64), "unbiased")
    np.testing.assert_allclose(result_out.cka, expected, atol=1e-9)
    assert (without["n_tokens"] == N_SEQUENCES * N_REAL).all()
    assert (with_specials["n_tokens"] == N_SEQUENCES * N_CTX).all()
    assert without["exclude_special_tokens"].all() and not with_specials["exclude_special_tokens"].any()


def test_default_settings_exclude_special_tokens():
    assert CKASettings().exclude_special_tokens is True
    from thinkalike.pipelines.cka.schema import parse_cka

    assert parse_cka({}).estimation.exclude_special_tokens is True
    assert parse_cka({"exclude_special_tokens": False}).estimation.exclude_special_tokens is False


def test_a_token_special_on_either_side_is_left_out_of_both(planted):
    index, store_a, residual_a, store_b, residual_b = planted
    index_b = index.copy()
    index_b.loc[(index_b["sequence"] == 3) & (index_b["position"] == 4), "is_special"] = True  # b marks one more
    batches = list(aligned_minibatches(store_a, index, store_b, index_b, pooling="token", batch_tokens=16))
    acts_a = np.concatenate([a for a, _ in batches], axis=1)
    acts_b = np.concatenate([b for _, b in batches], axis=1)
    keep = ~(index["is_special"].to_numpy() | index_b["is_special"].to_numpy())
    assert acts_a.shape[1] == acts_b.shape[1] == keep.sum() == N_SEQUENCES * N_REAL - 1
    np.testing.assert_array_equal(acts_a, residual_a.reshape(N_LAYERS, -1, 8)[:, keep])
    np.testing.assert_array_equal(acts_b, residual_b.reshape(N_LAYERS, -1, 6)[:, keep])


def test_sequence_pooling_includes_special_tokens_only_when_asked(planted):
    index, store_a, residual_a, _, _ = planted
    _, pooled = next(pooled_rows(store_a, index, "sequence"))
    np.testing.assert_allclose(pooled[:, 0], residual_a[:, 0, 1:-1].mean(axis=1), rtol=1e-5)
    _, pooled = next(pooled_rows(store_a, index, "sequence", exclude_special_tokens=False))
    np.testing.assert_allclose(pooled[:, 0], residual_a[:, 0].mean(axis=1), rtol=1e-5)
    # word pooling: special tokens belong to no word, so both settings give the same words
    words = [
        np.concatenate([p for _, p in pooled_rows(store_a, index, "word", exclude_special_tokens=flag)], axis=1)
        for flag in (True, False)
    ]
    np.testing.assert_array_equal(words[0], words[1])
    assert words[0].shape[1] == N_SEQUENCES * N_REAL


def test_an_index_without_special_marks_is_an_error(planted):
    index, store_a, _, store_b, _ = planted
    with pytest.raises(AlignmentError, match="is_special"):
        list(
            aligned_minibatches(
                store_a,
                index.drop(columns="is_special"),
                store_b,
                index.drop(columns="is_special"),
                pooling="token",
                batch_tokens=16,
            )
        )
