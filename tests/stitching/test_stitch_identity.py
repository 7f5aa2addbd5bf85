"""Identity stitching: f = g reproduces g's own loss exactly at every layer (all families and objectives); a
function-preserving permutation of the residual stream keeps the logits but breaks identity stitching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.stitching.toys import (
    HF_TINY,
    N_CTX,
    VOCAB,
    ToyClassifier,
    ToyClassifierHandle,
    bridge_config,
    bridge_handle,
    hf_handle,
)
from thinkalike.models.training import MaskingTokens, causal_lm_loss
from thinkalike.stitching import ROW_FIELDS, StitchSettings, stitch

SETTINGS = StitchSettings(steps=10, warmup_steps=1, eval_batch_size=8)
MASKING = MaskingTokens(mask_id=1, special_ids=(0, 1), vocab_size=VOCAB)


def _padded(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mask = np.ones_like(tokens)
    mask[::3, -4:] = 0  # every third sequence is right-padded
    return np.where(mask == 1, tokens, 0), mask


@pytest.mark.parametrize("family", [*HF_TINY, "bridge-gelu", "bridge-solu"])
def test_identity_self_stitch_reproduces_g_loss_exactly(family, random_tokens):
    if family.startswith("bridge"):
        handle = bridge_handle(family, bridge_config(32, "gelu" if family.endswith("gelu") else "solu_ln"))
    else:
        handle = hf_handle(family)
    train, evaluation = random_tokens
    ids, mask = _padded(evaluation)
    for layer in range(handle.n_layers + 1):
        result = stitch(
            handle,
            handle,
            layer,
            layer,
            "identity",
            train,
            ids,
            SETTINGS,
            eval_mask=mask,
            masking=MASKING,
            progress=False,
        )
        assert abs(result.stitched_loss - result.g_loss) <= 1e-6, (family, layer)
        assert abs(result.penalty) <= 1e-6 and result.f_loss == result.g_loss
        assert result.objective == ("masked" if family == "bert" else "causal")
        assert result.evaluation.n_batches == 4 and result.curve.empty
    # g's own loss is the plain forward pass's loss (an independent path), scored as the training code scores it
    if family != "bert":
        t_ids, t_mask = torch.as_tensor(ids), torch.as_tensor(mask)
        with torch.no_grad():
            reference = causal_lm_loss(handle.logits(t_ids, t_mask), t_ids, t_mask)
        assert result.g_loss == pytest.approx(float(reference), abs=1e-6)
    row = result.row()
    assert list(row) == list(ROW_FIELDS) and row["kind"] == "identity" and row["steps"] == 0


def test_permuted_residual_stream_is_the_same_function(gelu32, gelu32_permuted):
    permuted, perm = gelu32_permuted
    ids = torch.randint(0, VOCAB, (4, N_CTX), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(permuted.logits(ids, mask), gelu32.logits(ids, mask), rtol=1e-5, atol=1e-5)
        streams, streams_p = gelu32.residual_streams(ids, mask), permuted.residual_streams(ids, mask)
    torch.testing.assert_close(streams_p, streams[..., perm], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(streams_p, streams, atol=1e-2)


def test_identity_stitch_into_the_permuted_model_has_a_large_penalty(gelu32, gelu32_permuted, gelu32_data):
    permuted, _ = gelu32_permuted
    train, evaluation = gelu32_data
    result = stitch(gelu32, permuted, 1, 1, "identity", train, evaluation, SETTINGS, progress=False)
    assert result.g_loss == pytest.approx(result.f_loss, abs=1e-5)  # same function, same loss
    assert result.penalty > 1.0 and result.evaluation.penalty_ci_low > 1.0
    assert result.evaluation.penalty_ci_low <= result.penalty <= result.evaluation.penalty_ci_high


def test_f_loss_is_fs_own_plain_forward_loss(gelu32, solu32, random_tokens):
    train, evaluation = random_tokens
    result = stitch(gelu32, solu32, 2, 1, "identity", train, evaluation, SETTINGS, progress=False)
    ids = torch.as_tensor(evaluation)
    with torch.no_grad():
        f_loss = causal_lm_loss(gelu32.logits(ids, torch.ones_like(ids)), ids, torch.ones_like(ids))
        g_loss = causal_lm_loss(solu32.logits(ids, torch.ones_like(ids)), ids, torch.ones_like(ids))
    assert result.f_loss == pytest.approx(float(f_loss), abs=1e-6)
    assert result.g_loss == pytest.approx(float(g_loss), abs=1e-6)
    assert result.penalty == pytest.approx(result.stitched_loss - result.g_loss, abs=1e-9)


def test_label_objective_with_a_classifier(random_tokens):
    f = ToyClassifierHandle("toy", ToyClassifier(seed=0))
    train, evaluation = random_tokens
    labels_train, labels_eval = (tokens[:, 0] % 3 for tokens in (train, evaluation))
    for layer in range(3):
        result = stitch(
            f,
            f,
            layer,
            layer,
            "identity",
            train,
            evaluation,
            SETTINGS,
            train_labels=labels_train,
            eval_labels=labels_eval,
            progress=False,
        )
        assert result.objective == "label" and abs(result.penalty) <= 1e-6
    ids = torch.as_tensor(evaluation)
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(f.logits(ids), torch.as_tensor(labels_eval))
    assert result.g_loss == pytest.approx(float(expected), abs=1e-6)
    # φ learned in closed form (least squares) between two different classifiers of different widths
    g = ToyClassifierHandle("toy-wide", ToyClassifier(d_model=24, seed=1))
    learned = stitch(
        f,
        g,
        1,
        1,
        "affine",
        train,
        evaluation,
        StitchSettings(steps=5, warmup_steps=1, eval_every=5, tokens_per_step=64),
        train_labels=labels_train,
        eval_labels=labels_eval,
        progress=False,
    )
    assert learned.init == "lstsq" and np.isfinite(learned.penalty) and np.isfinite(learned.f_loss)
