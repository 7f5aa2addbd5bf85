"""Stitching layers φ: kinds, parametrisation, closed-form least-squares initialisation, save/load; the
optimiser recipe and the schedule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinkalike.stitching import (
    KINDS,
    AffineStitch,
    StitchConfigError,
    StitchSettings,
    StitchTrainer,
    build_stitch_layer,
    learning_rate_factor,
    least_squares_map,
    load_stitch_layer,
)
from thinkalike.stitching.data import PreparedSplit
from thinkalike.stitching.layers import initialise_least_squares, resolve_init


def test_kinds_compute_their_formulas():
    h = torch.randn(5, 7, 6, dtype=torch.float32)
    assert torch.equal(build_stitch_layer("identity", 6, 6)(h), h)
    affine = build_stitch_layer("affine", 6, 6)
    torch.testing.assert_close(affine(h), h)  # starts at the identity map
    weight, bias = torch.randn(4, 6), torch.randn(4)
    narrow = build_stitch_layer("affine", 6, 4)
    narrow.set_initial_map(weight, bias)
    with torch.no_grad():
        narrow.delta_weight.add_(0.5)
        narrow.delta_bias.add_(-1.0)
    torch.testing.assert_close(narrow(h), h @ (weight + 0.5).T + (bias - 1.0))
    ln = build_stitch_layer("affine_ln", 6, 4)
    ln.set_initial_map(weight, bias)
    with torch.no_grad():
        ln.norm.weight.copy_(torch.linspace(0.5, 2.0, 6))
        ln.norm.bias.copy_(torch.linspace(-1.0, 1.0, 6))
    centred = h - h.mean(-1, keepdim=True)
    normed = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-5)
    expected = (normed * torch.linspace(0.5, 2.0, 6) + torch.linspace(-1.0, 1.0, 6)) @ weight.T + bias
    torch.testing.assert_close(ln(h), expected, rtol=1e-5, atol=1e-5)


def test_identity_kind_refuses_different_widths_naming_both():
    with pytest.raises(StitchConfigError, match=r"d_model 6 \(f\) and 4 \(g\)"):
        build_stitch_layer("identity", 6, 4)
    with pytest.raises(StitchConfigError, match="unknown stitching layer kind 'linear'.*identity, affine, affine_ln"):
        build_stitch_layer("linear", 6, 6)
    assert KINDS == ("identity", "affine", "affine_ln")


def test_initialisation_choice():
    assert resolve_init("affine", "auto", 8, 8) == "identity"
    assert resolve_init("affine", "auto", 8, 16) == "lstsq"
    assert resolve_init("affine_ln", "auto", 8, 8) == "lstsq"
    assert resolve_init("identity", "auto", 8, 8) == "none"
    with pytest.raises(StitchConfigError, match="equal widths"):
        resolve_init("affine", "identity", 8, 16)


def test_least_squares_matches_numpy_including_rank_deficient_inputs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 6)) * np.array([1, 2, 3, 0.5, 1, 4]) + 3.0
    true_w, true_b = rng.normal(size=(4, 6)), rng.normal(size=4)
    y = x @ true_w.T + true_b + 0.01 * rng.normal(size=(500, 4))
    weight, bias = least_squares_map(torch.as_tensor(x), torch.as_tensor(y))
    design = np.hstack([x, np.ones((500, 1))])
    reference = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(weight.numpy(), reference[:6].T, atol=1e-8)
    np.testing.assert_allclose(bias.numpy(), reference[6], atol=1e-8)
    # rank-deficient (a duplicated column): the minimum-norm solution still fits y exactly
    x2 = np.hstack([x, x[:, :1]])
    y2 = x @ true_w.T + true_b
    weight2, bias2 = least_squares_map(torch.as_tensor(x2), torch.as_tensor(y2))
    np.testing.assert_allclose(x2 @ weight2.numpy().T + bias2.numpy(), y2, atol=1e-8)
    np.testing.assert_allclose(weight2.numpy()[:, 0], weight2.numpy()[:, 6], atol=1e-8)  # split evenly: min norm


def test_least_squares_initialisation_of_affine_ln_reads_the_normalised_input():
    torch.manual_seed(0)
    x = torch.randn(400, 5) * 3 + 1
    layer = build_stitch_layer("affine_ln", 5, 3)
    with torch.no_grad():
        y = layer.norm(x) @ torch.randn(5, 3) + torch.randn(3)  # exactly affine in LN(x)
    initialise_least_squares(layer, [(x[:200], y[:200]), (x[200:], y[200:])])
    torch.testing.assert_close(layer(x), y, rtol=1e-4, atol=1e-4)
    assert torch.count_nonzero(layer.delta_weight) == 0


def test_state_dict_round_trip():
    layer = build_stitch_layer("affine_ln", 6, 4)
    layer.set_initial_map(torch.randn(4, 6), torch.randn(4))
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(torch.randn_like(p))
    copy = load_stitch_layer(layer.config(), layer.state_dict())
    h = torch.randn(3, 6)
    assert torch.equal(copy(h), layer(h))
    assert copy.config() == {"kind": "affine_ln", "d_in": 6, "d_out": 4, "eps": 1e-5}


def _split(n=8, seq=4, d=6):
    ids = torch.randint(0, 10, (n, seq))
    return PreparedSplit(ids, torch.ones_like(ids), ids, torch.randn(n, seq, d))


def test_optimiser_is_tuned_lens_sgd():
    layer = build_stitch_layer("affine_ln", 6, 6)
    settings = StitchSettings(steps=100, warmup_steps=10)
    trainer = StitchTrainer(layer, None, 1, _split(), "causal", settings)
    optimiser = trainer.optimizer
    assert isinstance(optimiser, torch.optim.SGD)
    decayed, undecayed = optimiser.param_groups
    assert decayed["nesterov"] and decayed["momentum"] == 0.9
    assert decayed["initial_lr"] == pytest.approx(1.0 * (1 - 0.9))
    assert decayed["weight_decay"] == 1e-3 and undecayed["weight_decay"] == 0.0
    assert {id(p) for p in decayed["params"]} == {id(layer.delta_weight), id(layer.delta_bias)}
    assert {id(p) for p in undecayed["params"]} == {id(p) for p in layer.norm.parameters()}
    assert isinstance(layer, AffineStitch)


def test_schedule_warms_up_then_decays_to_zero_at_the_end():
    steps, warmup = 2000, 200
    factors = np.array([learning_rate_factor(s, steps, warmup) for s in range(steps + 1)])
    np.testing.assert_allclose(factors[:warmup], np.arange(warmup) / warmup)
    assert factors[warmup] == 1.0 and factors.max() == 1.0
    np.testing.assert_allclose(np.diff(factors[warmup:]), -1.0 / (steps - warmup))
    assert factors[steps] == 0.0 and factors[steps - 1] > 0  # zero at the end, not at steps − warm-up
    assert learning_rate_factor(0, 10, 0) == 1.0
