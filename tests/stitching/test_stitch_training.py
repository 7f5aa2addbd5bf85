"""Learned stitching: self-stitching stays at penalty ≈ 0, a learned affine φ recovers a permutation of the
residual stream, the saved φ re-evaluates to the same loss, the curve follows the schedule, f is never
recomputed and g's prefix never runs during training, features can come from an activation store."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.stitching.toys import bridge_config, bridge_handle, hf_handle
from thinkalike.models.activation_store import write_activation_store
from thinkalike.models.extraction import iter_activation_batches
from thinkalike.models.training import MaskingTokens
from thinkalike.stitching import (
    StitchDivergedError,
    StitchSettings,
    evaluate_saved,
    features_from_store,
    learning_rate_factor,
    stitch,
)
from thinkalike.stitching.data import layer_features


def test_learned_self_stitch_starts_at_zero_and_stays_there(g8, g8_data):
    train, evaluation = g8_data
    settings = StitchSettings(
        steps=10, warmup_steps=1, tokens_per_step=32768, batch_size=512, eval_batch_size=128, eval_every=5
    )
    result = stitch(g8, g8, 1, 1, "affine", train, evaluation, settings, progress=False)
    assert result.init == "identity"
    assert abs(result.curve["heldout_penalty"].iloc[0]) <= 1e-7  # identity init: exactly g at step 0
    # measured: 6e-5 (CI −2.7e-4 … 3.9e-4); finite-sample noise ~ 72 parameters / (2 · 262k tokens) ≈ 1.4e-4
    assert abs(result.penalty) <= 1e-3
    assert result.row()["initial_heldout_penalty"] == result.curve["heldout_penalty"].iloc[0]


@pytest.fixture(scope="module")
def permutation_stitch(g8, g8_permuted, g8_data):
    permuted, perm = g8_permuted
    train, evaluation = g8_data
    settings = StitchSettings(
        steps=300, warmup_steps=30, tokens_per_step=1024, batch_size=512, eval_batch_size=128, eval_every=60
    )
    return stitch(g8, permuted, 1, 1, "affine", train, evaluation, settings, progress=False), perm, settings


def test_learned_affine_stitch_recovers_the_permutation(permutation_stitch):
    result, perm, _ = permutation_stitch
    curve = result.curve
    identity_penalty = curve["heldout_penalty"].iloc[0]  # φ starts at the identity: the identity stitch
    assert identity_penalty > 2.0  # measured 4.4
    # measured 0.041 (CI 0.034 … 0.048) after 300 steps of 1024 tokens: < 1 % of the identity penalty
    assert result.penalty < 0.1 and result.penalty < 0.02 * identity_penalty
    weight = result.load_phi().weight.detach()
    assert torch.equal(weight.argmax(dim=1), perm)  # φ maps g's dimension perm[i] to g′'s dimension i
    assert abs(result.f_loss - result.g_loss) < 1e-5  # g and g′ compute the same function


def test_learned_affine_ln_stitch_recovers_the_permutation(g8, g8_permuted, g8_data):
    permuted, perm = g8_permuted
    train, evaluation = g8_data
    settings = StitchSettings(
        steps=100, warmup_steps=10, tokens_per_step=1024, batch_size=512, eval_batch_size=128, eval_every=50
    )
    result = stitch(g8, permuted, 1, 1, "affine_ln", train, evaluation, settings, progress=False)
    assert result.init == "lstsq"  # LN(h) is not h, so affine_ln starts at the least-squares map
    assert result.penalty < 0.1  # measured 0.03 (identity stitching: 4.4)
    assert torch.equal(result.load_phi().weight.detach().argmax(dim=1), perm)


def test_saved_phi_reevaluates_to_the_same_loss(permutation_stitch, g8, g8_permuted, g8_data, tmp_path):
    result, _, settings = permutation_stitch
    path = tmp_path / "phi.safetensors"
    save_file(result.phi_state, str(path))
    evaluation = evaluate_saved(result.phi_config, load_file(str(path)), g8, g8_permuted[0], 1, 1, g8_data[1], settings)
    assert abs(evaluation.stitched_loss - result.stitched_loss) <= 1e-6
    assert abs(evaluation.penalty - result.penalty) <= 1e-6
    assert (evaluation.penalty_ci_low, evaluation.penalty_ci_high) == pytest.approx(
        (result.evaluation.penalty_ci_low, result.evaluation.penalty_ci_high), abs=1e-6
    )


def test_learning_curve_has_every_step_and_held_out_losses_every_n(permutation_stitch):
    result, _, settings = permutation_stitch
    curve = result.curve
    assert list(curve["step"]) == list(range(settings.steps + 1))
    assert {"f", "layer_f", "g", "layer_g", "kind"} <= set(curve.columns)
    evaluated = curve.dropna(subset=["heldout_loss"])["step"].tolist()
    assert evaluated == [0, 60, 120, 180, 240, 300]
    trained = curve[curve["step"] > 0]
    assert np.isfinite(trained["train_loss"]).all()
    expected_lr = [0.1 * learning_rate_factor(s - 1, settings.steps, settings.warmup_steps) for s in trained["step"]]
    np.testing.assert_allclose(trained["lr"], expected_lr)
    held = curve["heldout_penalty"].dropna().to_numpy()
    assert held[-1] < 0.05 * held[0]
    assert result.row()["final_train_loss"] == trained["train_loss"].iloc[-1]


def _count_calls(blocks):
    calls = [0]
    hook = blocks[0].register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls, hook


def test_f_is_computed_once_and_gs_prefix_never_runs_in_training(g8, g8_data):
    f = bridge_handle("f8", bridge_config(8, "gelu", seed=3))
    train, evaluation = g8_data[0][:256], g8_data[1][:64]
    counts = {}
    for steps in (4, 12):
        f_calls, f_hook = _count_calls(f.module.blocks)
        g_calls, g_hook = _count_calls(g8.module.blocks)
        try:
            stitch(
                f,
                g8,
                2,
                1,
                "affine",
                train,
                evaluation,
                StitchSettings(
                    steps=steps, warmup_steps=1, eval_every=100, tokens_per_step=512, batch_size=8, eval_batch_size=32
                ),
                progress=False,
            )
        finally:
            f_hook.remove()
            g_hook.remove()
        counts[steps] = (f_calls[0], g_calls[0])
    # f: once per feature batch (8 train + 2 eval), once for the check that its logits fit the targets and once
    # per batch of its own loss (2), whatever the step count; g's block 0 (before the stitch at layer 1): only for
    # g's own loss (2 evaluation batches, computed once), never in a training step
    assert counts[4] == counts[12] == (8 + 2 + 1 + 2, 2)


def test_features_from_an_activation_store_give_the_same_stitch(g8, g8_data, tmp_path):
    f = bridge_handle("f8", bridge_config(8, "gelu", seed=3))
    train, evaluation = g8_data[0][:128], g8_data[1][:64]
    mask = np.ones_like(train)
    mask[::4, -3:] = 0
    store = write_activation_store(
        tmp_path / "store", iter_activation_batches(f, train, mask, 32, progress=False), model="f8"
    )
    features, store_mask = features_from_store(store, 2)
    assert torch.equal(store_mask, torch.as_tensor(mask))
    computed = layer_features(f, 2, torch.as_tensor(train), torch.as_tensor(mask))
    assert torch.equal(features[store_mask.bool()], computed[store_mask.bool()])
    settings = StitchSettings(steps=6, warmup_steps=1, tokens_per_step=256, eval_every=3)
    from_store = stitch(
        f, g8, 2, 1, "affine", train, evaluation, settings, train_mask=mask, train_features=features, progress=False
    )
    direct = stitch(f, g8, 2, 1, "affine", train, evaluation, settings, train_mask=mask, progress=False)
    assert from_store.stitched_loss == pytest.approx(direct.stitched_loss, abs=1e-6)


def test_different_widths_start_at_the_least_squares_map(g8, g8_data):
    wide = bridge_handle("f16", bridge_config(16, "solu_ln", seed=2))
    train, evaluation = g8_data[0][:512], g8_data[1][:64]
    settings = StitchSettings(steps=20, warmup_steps=2, tokens_per_step=1024, eval_every=10)
    result = stitch(wide, g8, 1, 1, "affine", train, evaluation, settings, progress=False)
    assert result.init == "lstsq" and result.phi_config == {"kind": "affine", "d_in": 16, "d_out": 8, "eps": 1e-5}
    assert np.isfinite(result.curve["heldout_penalty"]).sum() == 3 and np.isfinite(result.penalty)


def test_least_squares_initialisation_finds_the_permutation_in_closed_form(g8, g8_permuted, g8_data):
    permuted, perm = g8_permuted
    train, evaluation = g8_data[0][:1024], g8_data[1][:64]
    result = stitch(
        g8,
        permuted,
        1,
        1,
        "affine",
        train,
        evaluation,
        StitchSettings(steps=1, warmup_steps=0, tokens_per_step=16, init="lstsq"),
        progress=False,
    )
    phi = result.load_phi()
    torch.testing.assert_close(phi.initial_weight, torch.eye(8)[perm], atol=1e-4, rtol=0)
    assert abs(result.curve["heldout_penalty"].iloc[0]) < 1e-4  # identity stitching of the same pair: 4.4


def test_masked_objective_trains(random_tokens):
    bert = hf_handle("bert")
    train, evaluation = random_tokens
    masking = MaskingTokens(mask_id=1, special_ids=(0, 1), vocab_size=48)
    result = stitch(
        bert,
        bert,
        2,
        2,
        "affine",
        train,
        evaluation,
        StitchSettings(steps=4, warmup_steps=1, tokens_per_step=256, eval_every=2),
        masking=masking,
        progress=False,
    )
    assert result.objective == "masked" and abs(result.curve["heldout_penalty"].iloc[0]) <= 1e-7
    assert np.isfinite(result.penalty) and result.f_loss == result.g_loss


def test_a_diverging_stitch_names_the_pair_and_suggests_a_smaller_lr_scale(gelu32, solu32, random_tokens):
    train, evaluation = random_tokens
    settings = StitchSettings(steps=20, warmup_steps=2, tokens_per_step=256, eval_every=5, lr_scale=1e12)
    with pytest.raises(StitchDivergedError, match=r"'gelu'@1 -> 'solu'@2 \(affine\).*smaller lr_scale"):
        stitch(gelu32, solu32, 1, 2, "affine", train, evaluation, settings, progress=False)
    g = bridge_handle("g", bridge_config(32, "gelu"))
    g.module.blocks[1].attn.o.bias.data.fill_(float("nan"))  # a model that outputs NaN: diverges at once
    with pytest.raises(StitchDivergedError, match="'gelu'@1 -> 'g'@1.*initialisation is nan, before any training"):
        stitch(gelu32, g, 1, 1, "affine", train, evaluation, StitchSettings(steps=2, warmup_steps=0), progress=False)
