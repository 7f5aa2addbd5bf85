"""Bad input is refused with a message naming what is wrong, before any forward pass or training step."""

from __future__ import annotations

import numpy as np
import pytest

import thinkalike.stitching.stitcher as stitch_module
from tests.stitching.toys import bridge_config, bridge_handle
from thinkalike.stitching import (
    StitchConfigError,
    StitchSettings,
    check_stitch,
    split_tokens,
    stitch,
)


@pytest.fixture
def no_forward(monkeypatch):
    """Fails the test if :func:`stitch` gets as far as computing f's features."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("features were computed before the configuration error")

    monkeypatch.setattr(stitch_module, "layers_features", refuse)


def _tokenizer(words):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")


def test_identity_between_different_widths_names_both(no_forward, gelu32, random_tokens):
    narrow = bridge_handle("narrow", bridge_config(16, "gelu"))
    with pytest.raises(StitchConfigError, match=r"'narrow' has d_model 16, model 'gelu' has d_model 32"):
        stitch(narrow, gelu32, 1, 1, "identity", *random_tokens, progress=False)


@pytest.mark.parametrize(
    "layer_f,layer_g,which", [(3, 1, "f = model 'gelu'"), (1, -1, "g = model 'solu'"), (0, 2.5, "g = model 'solu'")]
)
def test_layer_out_of_range(no_forward, gelu32, solu32, random_tokens, layer_f, layer_g, which):
    with pytest.raises(StitchConfigError, match=rf"layer .* of {which} is out of range 0..2"):
        stitch(gelu32, solu32, layer_f, layer_g, "affine", *random_tokens, progress=False)


def test_different_token_streams(no_forward, random_tokens):
    words = [f"w{i}" for i in range(47)]
    a = bridge_handle("a", bridge_config(32, "gelu"), tokenizer=_tokenizer(words))
    b = bridge_handle("b", bridge_config(32, "gelu"), tokenizer=_tokenizer(list(reversed(words))))
    with pytest.raises(StitchConfigError, match="'a' and model 'b' use different tokenizers.*same token stream"):
        stitch(a, b, 1, 1, "affine", *random_tokens, progress=False)
    same = bridge_handle("c", bridge_config(32, "gelu", seed=4), tokenizer=_tokenizer(words))
    assert check_stitch(a, same, 1, 1, "affine") == "identity"  # an equal tokenizer (another object) is fine
    small_vocab = bridge_config(32, "gelu")
    small_vocab["bridge_config"]["d_vocab"] = 40
    c = bridge_handle("small", small_vocab)
    with pytest.raises(StitchConfigError, match=r"different vocabularies \(48 and 40 input tokens\)"):
        stitch(bridge_handle("d", bridge_config(32, "gelu")), c, 1, 1, "affine", *random_tokens, progress=False)


def test_unknown_kind(no_forward, gelu32, random_tokens):
    with pytest.raises(StitchConfigError, match="unknown stitching layer kind 'linear'; known kinds: identity, affine"):
        stitch(gelu32, gelu32, 1, 1, "linear", *random_tokens, progress=False)


def test_warmup_not_before_the_end(no_forward, gelu32, random_tokens):
    # the settings' own checks, raised inside pydantic's ValidationError (a ValueError)
    with pytest.raises(ValueError, match=r"warmup_steps \(200\) must be in \[0, steps\) with steps = 200"):
        stitch(gelu32, gelu32, 1, 1, "affine", *random_tokens, {"steps": 200, "warmup_steps": 200}, progress=False)
    with pytest.raises(ValueError, match="warmup_steps"):
        StitchSettings(steps=10, warmup_steps=11)
    with pytest.raises(ValueError, match=r"learning_rate\n  Extra inputs are not permitted"):
        StitchSettings.model_validate({"learning_rate": 0.1})
    with pytest.raises(ValueError, match=r"steps\n  Input should be a valid integer"):
        StitchSettings.model_validate({"steps": "150"})


def test_overlapping_or_one_sided_inputs(no_forward, gelu32, random_tokens):
    train, evaluation = random_tokens
    with pytest.raises(StitchConfigError, match="disjoint.*3 of 35 evaluation sequences"):
        stitch(gelu32, gelu32, 1, 1, "affine", train, np.vstack([evaluation, train[:3]]), progress=False)
    with pytest.raises(StitchConfigError, match="labels must be given for both"):
        stitch(
            gelu32, gelu32, 1, 1, "affine", train, evaluation, train_labels=np.zeros(len(train), int), progress=False
        )
    with pytest.raises(StitchConfigError, match="masked objective needs g's mask token"):
        stitch(gelu32, gelu32, 1, 1, "affine", train, evaluation, {"objective": "masked"}, progress=False)


def test_split_tokens_is_disjoint_and_keeps_duplicates_together():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 48, (50, 8))
    ids = np.vstack([ids, ids[:10]])  # ten sequences twice
    train, evaluation = split_tokens(ids, eval_fraction=0.2, seed=1)
    assert len(train) + len(evaluation) == 60
    assert not set(train.row_keys()) & set(evaluation.row_keys())
    assert 8 <= len(evaluation) <= 14
