"""φ seeds: the seeds of a stitch trained in lockstep equal their separate trainings — fused (one pass of g's tail
for all seeds, the GPU default) to float round-off, unfused (the CPU default) exactly; seed 0 is the single
stitch; a pair's grid (shared features and own losses) equals its stitches run one by one; the seed summary;
bad seeds are refused naming ``phi_seeds``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from thinkalike.stitching import (
    LockstepTrainer,
    StitchConfigError,
    StitchSettings,
    StitchTrainer,
    build_stitch_layer,
    phi_seed_list,
    seed_summary,
    stitch,
    stitch_grid,
    stitch_seeds,
)
from thinkalike.stitching.data import TokenSplit
from thinkalike.stitching.stitcher import prepare_split
from thinkalike.stitching.train import frozen

SETTINGS = StitchSettings(
    steps=8, warmup_steps=2, tokens_per_step=256, batch_size=8, eval_batch_size=4, eval_every=4, n_bootstrap=100
)


@pytest.fixture(scope="module")
def lockstep(solu32, gelu32, random_tokens):
    """affine_ln (least-squares init) solu32 → gelu32 at layer 1: three φ seeds in lockstep, g's tail fused."""
    train, evaluation = random_tokens
    return stitch_seeds(
        solu32, gelu32, 1, 1, "affine_ln", train, evaluation, SETTINGS, phi_seeds=3, progress=False, fuse_seeds=True
    )


def test_lockstep_seeds_equal_their_separate_trainings(lockstep, solu32, gelu32, random_tokens):
    train, evaluation = random_tokens
    assert [result.phi_seed for result in lockstep] == [0, 1, 2]
    for result in lockstep:
        (alone,) = stitch_seeds(
            solu32, gelu32, 1, 1, "affine_ln", train, evaluation, SETTINGS, phi_seeds=[result.phi_seed], progress=False
        )
        assert alone.phi_seed == result.phi_seed
        for name, tensor in alone.phi_state.items():
            torch.testing.assert_close(result.phi_state[name], tensor, atol=1e-5, rtol=0)
        np.testing.assert_allclose(result.curve["train_loss"], alone.curve["train_loss"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(result.curve["heldout_loss"], alone.curve["heldout_loss"], atol=1e-5, rtol=0)
        assert result.penalty == pytest.approx(alone.penalty, abs=1e-5)
        assert result.evaluation.n_targets == alone.evaluation.n_targets
    # the seeds differ in their data order only: the same initial map, other trained deltas
    assert torch.equal(lockstep[0].phi_state["initial_weight"], lockstep[2].phi_state["initial_weight"])
    assert not torch.allclose(lockstep[0].phi_state["delta_weight"], lockstep[2].phi_state["delta_weight"])
    assert len({result.penalty for result in lockstep}) == 3


def test_unfused_seeds_are_exactly_their_separate_trainings(solu32, gelu32, random_tokens):
    train, evaluation = random_tokens
    together = stitch_seeds(
        solu32, gelu32, 1, 1, "affine", train, evaluation, SETTINGS, phi_seeds=[2, 0], progress=False
    )  # on the CPU: unfused by default
    for result in together:
        (alone,) = stitch_seeds(
            solu32, gelu32, 1, 1, "affine", train, evaluation, SETTINGS, phi_seeds=[result.phi_seed], progress=False
        )
        assert all(torch.equal(result.phi_state[k], v) for k, v in alone.phi_state.items())
        assert result.curve.equals(alone.curve) and result.penalty == alone.penalty


def test_seed_zero_is_the_single_stitch(lockstep, solu32, gelu32, random_tokens):
    train, evaluation = random_tokens
    single = stitch(solu32, gelu32, 1, 1, "affine_ln", train, evaluation, SETTINGS, progress=False)
    (one,) = stitch_seeds(solu32, gelu32, 1, 1, "affine_ln", train, evaluation, SETTINGS, phi_seeds=1, progress=False)
    assert one.penalty == single.penalty and all(torch.equal(one.phi_state[k], v) for k, v in single.phi_state.items())
    assert lockstep[0].penalty == pytest.approx(single.penalty, abs=1e-5)
    assert (single.row()["phi_seed"], lockstep[2].row()["phi_seed"]) == (0, 2)
    assert list(lockstep[1].curve["phi_seed"].unique()) == [1]


def test_lockstep_trainer_steps_equal_separate_trainers(solu32, gelu32, random_tokens):
    """One step at a time: the lockstep step's per-seed losses and φ's against a plain trainer per seed."""
    train, _ = random_tokens
    settings = StitchSettings(steps=5, warmup_steps=1, tokens_per_step=192, batch_size=4)  # 3 micro-batches per step
    with frozen(solu32.module, gelu32.module):
        prepared = prepare_split(
            solu32, 2, TokenSplit.of(train), "causal", settings, device=torch.device("cpu"), masking=None, seed=0
        )
        phis = [build_stitch_layer("affine", 32, 32) for _ in range(2)]
        together = LockstepTrainer(phis, gelu32, 1, prepared, "causal", settings, "lockstep", seeds=(0, 4), fuse=True)
        assert together.fuse and not LockstepTrainer(phis, gelu32, 1, prepared, "causal", settings).fuse  # CPU
        apart = []
        for seed in (0, 4):
            trainer = StitchTrainer(
                build_stitch_layer("affine", 32, 32),
                gelu32,
                1,
                prepared,
                "causal",
                StitchSettings(**{**settings.to_dict(), "seed": seed}),
                "alone",
            )
            apart.append(trainer)
        for _ in range(settings.steps):
            indices = together.next_indices()
            losses = together.train_step(indices)
            for which, trainer in enumerate(apart):
                index = trainer.next_indices()
                assert torch.equal(index, indices[which])  # seed k's order is settings.seed + k's
                assert float(trainer.train_step(index)) == pytest.approx(float(losses[which]), abs=1e-6)
        for phi, trainer in zip(phis, apart):
            torch.testing.assert_close(phi.delta_weight, trainer.phi.delta_weight, atol=1e-6, rtol=0)


def test_identity_stitching_has_one_seed(gelu32, solu32, random_tokens):
    results = stitch_seeds(gelu32, solu32, 1, 1, "identity", *random_tokens, SETTINGS, phi_seeds=3, progress=False)
    assert len(results) == 1 and results[0].phi_seed == 0
    summary = seed_summary(results)
    assert summary["n_phi_seeds"] == 1 and summary["penalty_seed_std"] == 0.0
    assert (
        summary["penalty_seed_min"] == summary["penalty_seed_max"] == summary["penalty_seed_mean"] == results[0].penalty
    )


def test_a_grid_equals_its_stitches_one_by_one(solu32, gelu32, random_tokens):
    """f's features once per layer for every kind, g's and f's own losses once: the same numbers, to the bit."""
    train, evaluation = random_tokens
    grid = [(0, 0, "affine"), (1, 1, "identity"), (1, 1, "affine_ln"), (2, 1, "affine_ln"), (2, 2, "affine")]
    together = stitch_grid(solu32, gelu32, grid, train, evaluation, SETTINGS, progress=False)
    assert [(r.layer_f, r.layer_g, r.kind) for r in together] == grid
    for result, (layer_f, layer_g, kind) in zip(together, grid):
        alone = stitch(solu32, gelu32, layer_f, layer_g, kind, train, evaluation, SETTINGS, progress=False)
        assert (result.penalty, result.g_loss, result.f_loss) == (alone.penalty, alone.g_loss, alone.f_loss)
        assert (result.evaluation.penalty_ci_low, result.evaluation.penalty_ci_high) == (
            alone.evaluation.penalty_ci_low,
            alone.evaluation.penalty_ci_high,
        )
        assert all(torch.equal(result.phi_state[k], v) for k, v in alone.phi_state.items())
        assert result.curve.equals(alone.curve)


def test_seed_summary_is_the_mean_and_spread_over_seeds(lockstep):
    summary = seed_summary(lockstep)
    penalties = np.array([result.penalty for result in lockstep])
    assert summary["n_phi_seeds"] == 3 and json.loads(summary["phi_seeds"]) == [0, 1, 2]
    assert json.loads(summary["penalty_seeds"]) == penalties.tolist()
    assert summary["penalty_seed_mean"] == pytest.approx(penalties.sum() / 3)
    assert summary["penalty_seed_std"] == pytest.approx(np.sqrt(((penalties - penalties.mean()) ** 2).sum() / 2))
    assert (summary["penalty_seed_min"], summary["penalty_seed_max"]) == (penalties.min(), penalties.max())
    one = seed_summary(lockstep[:1])  # a trained stitch with one seed: its spread was not measured
    assert one["n_phi_seeds"] == 1 and np.isnan(one["penalty_seed_std"])
    assert one["penalty_seed_min"] == one["penalty_seed_max"] == one["penalty_seed_mean"] == lockstep[0].penalty
    with pytest.raises(ValueError, match="seeds of one stitch"):
        seed_summary([lockstep[0], lockstep[0].__class__(**{**lockstep[0].__dict__, "layer_f": 0})])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, r"phi_seeds must be a number of seeds >= 1.*got 0"),
        (-2, r"phi_seeds must be a number of seeds >= 1.*got -2"),
        (1.5, r"phi_seeds must be .*got 1\.5"),
        (True, r"phi_seeds must be .*got True"),
        ("3", r"phi_seeds must be .*got '3'"),
        ([], r"phi_seeds must hold at least one seed"),
        ([0, 2, 0], r"phi_seeds must be distinct, got \[0\] more than once"),
        ([1, -1], r"phi_seeds must be integers >= 0, got \[-1\]"),
        ([1, 2.0], r"phi_seeds must be integers >= 0, got \[2\.0\]"),
    ],
)
def test_bad_phi_seeds_are_refused(value, message):
    with pytest.raises(StitchConfigError, match=message):
        phi_seed_list(value)


def test_good_phi_seeds():
    assert phi_seed_list(3) == (0, 1, 2) and phi_seed_list([5, 1]) == (5, 1) and phi_seed_list(np.int64(1)) == (0,)


def test_bad_seeds_fail_before_any_forward_pass(gelu32, solu32, random_tokens, monkeypatch):
    import thinkalike.stitching.stitcher as stitcher

    monkeypatch.setattr(stitcher, "layers_features", lambda *a, **k: pytest.fail("features were computed"))
    with pytest.raises(StitchConfigError, match="phi_seeds"):
        stitch_seeds(gelu32, solu32, 1, 1, "affine", *random_tokens, SETTINGS, phi_seeds=0, progress=False)
