"""The trained φ's of one ordered pair saved as one safetensors file + one JSON config (as the pipeline saves
them) re-evaluate, through ``evaluate_saved``, to the losses of the stitch that trained them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from thinkalike.stitching import (
    StitchConfigError,
    StitchSettings,
    evaluate_saved,
    pack_stitches,
    split_indices,
    stitch,
    stitch_grid,
    stitch_key,
    unpack_stitch,
)
from thinkalike.stitching.data import TokenSplit

SETTINGS = StitchSettings(
    steps=6, warmup_steps=1, tokens_per_step=256, batch_size=16, eval_batch_size=4, eval_every=3, n_bootstrap=200
)


@pytest.fixture(scope="module")
def solu_to_gelu(solu32, gelu32, random_tokens):
    """Three stitches of solu32 → gelu32 (affine_ln at layers (1, 1) and (2, 1), identity at (1, 1))."""
    train, evaluation = random_tokens
    return [
        stitch(solu32, gelu32, layer_f, layer_g, kind, train, evaluation, SETTINGS, progress=False)
        for layer_f, layer_g, kind in ((1, 1, "affine_ln"), (2, 1, "affine_ln"), (1, 1, "identity"))
    ]


def test_saved_stitches_reevaluate_to_the_same_losses(solu_to_gelu, solu32, gelu32, random_tokens, tmp_path):
    state, config = pack_stitches(solu_to_gelu, "solu", "gelu")
    assert sorted(config["stitches"]) == ["l1_m1.affine_ln", "l1_m1.identity", "l2_m1.affine_ln"]
    assert "l2_m1.affine_ln.delta_weight" in state and not any(key.startswith("l1_m1.identity") for key in state)
    save_file(state, str(tmp_path / "phi.safetensors"))
    (tmp_path / "phi.json").write_text(json.dumps(config))
    state, config = load_file(str(tmp_path / "phi.safetensors")), json.loads((tmp_path / "phi.json").read_text())
    settings = StitchSettings.model_validate(config["settings"])
    for result in solu_to_gelu:
        phi_config, phi_state = unpack_stitch(state, config, result.layer_f, result.layer_g, result.kind)
        again = evaluate_saved(
            phi_config, phi_state, solu32, gelu32, result.layer_f, result.layer_g, random_tokens[1], settings
        )
        # measured: identical to the last bit (same batches, same CPU kernels); 1e-6 leaves room for other BLAS
        assert again.stitched_loss == pytest.approx(result.stitched_loss, abs=1e-6)
        assert again.penalty == pytest.approx(result.penalty, abs=1e-6)
        assert (again.penalty_ci_low, again.penalty_ci_high) == pytest.approx(
            (result.evaluation.penalty_ci_low, result.evaluation.penalty_ci_high), abs=1e-6
        )
    trained = solu_to_gelu[0]
    assert trained.curve["heldout_penalty"].iloc[0] != pytest.approx(trained.penalty, abs=1e-4)  # φ did train


def test_every_phi_seed_is_saved_and_reevaluates_exactly(solu32, gelu32, random_tokens, tmp_path):
    """Two φ seeds of each trained kind (lockstep) and one identity stitch, tokens 2 and 3 never targets, packed
    as the pipeline packs them: each seed's φ comes back under its own key and re-evaluates to its own penalty."""
    train, evaluation = random_tokens
    grid = [(1, 1, "affine_ln"), (1, 1, "identity"), (2, 1, "affine")]
    results = stitch_grid(
        solu32, gelu32, grid, train, evaluation, SETTINGS, phi_seeds=[0, 3], special_ids=[2, 3], progress=False
    )
    assert [(r.layer_f, r.kind, r.phi_seed) for r in results] == [
        (1, "affine_ln", 0),
        (1, "affine_ln", 3),
        (1, "identity", 0),
        (2, "affine", 0),
        (2, "affine", 3),
    ]
    state, config = pack_stitches(results, "solu", "gelu", excluded_target_ids=[2, 3])
    assert sorted(config["stitches"]) == [
        "l1_m1.affine_ln",
        "l1_m1.identity",
        "l1_m1_s3.affine_ln",
        "l2_m1.affine",
        "l2_m1_s3.affine",
    ]
    assert config["phi_seeds"] == [0, 3] and config["excluded_target_ids"] == [2, 3]
    assert config["settings"]["exclude_special_targets"] is True
    save_file(state, str(tmp_path / "phi.safetensors"))
    (tmp_path / "phi.json").write_text(json.dumps(config))
    state, config = load_file(str(tmp_path / "phi.safetensors")), json.loads((tmp_path / "phi.json").read_text())
    settings = StitchSettings.model_validate(config["settings"])
    for result in results:
        phi_config, phi_state = unpack_stitch(
            state, config, result.layer_f, result.layer_g, result.kind, result.phi_seed
        )
        assert (
            config["stitches"][stitch_key(result.layer_f, result.layer_g, result.kind, result.phi_seed)]["phi_seed"]
            == result.phi_seed
        )
        again = evaluate_saved(
            phi_config,
            phi_state,
            solu32,
            gelu32,
            result.layer_f,
            result.layer_g,
            evaluation,
            settings,
            special_ids=config["excluded_target_ids"],
        )
        # measured: identical to the last bit (each seed's final evaluation runs alone, as here)
        assert again.penalty == result.penalty and again.stitched_loss == result.stitched_loss
        assert (again.penalty_ci_low, again.penalty_ci_high) == (
            result.evaluation.penalty_ci_low,
            result.evaluation.penalty_ci_high,
        )
    assert results[0].penalty != results[1].penalty
    with pytest.raises(StitchConfigError, match=r"'l1_m1_s1.affine_ln'.*saved: .*'l1_m1_s3.affine_ln'"):
        unpack_stitch(state, config, 1, 1, "affine_ln", 1)


def test_a_missing_stitch_is_named_with_the_saved_ones(solu_to_gelu):
    state, config = pack_stitches(solu_to_gelu, "solu", "gelu")
    with pytest.raises(StitchConfigError, match=r"'l0_m0.affine'.*'l1_m1.affine_ln'"):
        unpack_stitch(state, config, 0, 0, "affine")
    with pytest.raises(ValueError, match="'gelu' -> 'solu'"):
        pack_stitches(solu_to_gelu, "gelu", "solu")
    assert stitch_key(3, 1, "affine") == "l3_m1.affine" and stitch_key(3, 1, "affine", 2) == "l3_m1_s2.affine"


def test_split_indices_are_disjoint_and_cover_every_sequence():
    ids = np.arange(40 * 5).reshape(40, 5) % 17
    ids[7] = ids[3]  # a duplicate goes to the same side as its twin
    split = TokenSplit.of(ids)
    train, evaluation = split_indices(split, eval_fraction=0.25, seed=1)
    assert sorted(np.concatenate([train, evaluation]).tolist()) == list(range(40))
    keys = split.row_keys()
    assert not {keys[i] for i in train} & {keys[i] for i in evaluation}
    assert (3 in evaluation) == (7 in evaluation)
    assert 8 <= len(evaluation) <= 12
