"""Which next tokens are stitching targets: special tokens (the ``<bos>``/``<eos>`` between the sentences of a
packed row, padding, mask) are left out by default, in evaluation and in training; ``<unk>`` stays (real text).
The penalty is checked against a recomputation by hand (float64, an explicit loop over the targets)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.stitching.toys import ToyClassifier, ToyClassifierHandle
from thinkalike.stitching import StitchSettings, excluded_target_ids, stitch
from thinkalike.stitching.data import TokenSplit, targets_for
from thinkalike.stitching.stitcher import scored_targets

SETTINGS = StitchSettings(
    steps=4, warmup_steps=1, tokens_per_step=128, batch_size=8, eval_batch_size=4, eval_every=2, n_bootstrap=50
)


def _special(tokenizer) -> set[int]:
    """The grammar tokenizer's special tokens, listed by name (<unk> is not one of them: it is real text)."""
    return {tokenizer.convert_tokens_to_ids(token) for token in ("<pad>", "<bos>", "<eos>", "<mask>")}


def _by_hand(stitched_logits, own_logits, ids, keep) -> tuple[float, int]:
    """``(penalty, number of targets)``: mean over targets t (token t of a row, t ≥ 1, with ``keep(token)``) of
    −log p_stitched(token | position t − 1) minus the same for g alone, in float64."""
    log_s = torch.log_softmax(stitched_logits.double(), dim=-1).numpy()
    log_g = torch.log_softmax(own_logits.double(), dim=-1).numpy()
    total_s = total_g = 0.0
    count = 0
    for row in range(ids.shape[0]):
        for t in range(1, ids.shape[1]):
            token = int(ids[row, t])
            if keep(token):
                total_s -= log_s[row, t - 1, token]
                total_g -= log_g[row, t - 1, token]
                count += 1
    return total_s / count - total_g / count, count


def _logits(f, g, layer, ids):
    ids = torch.as_tensor(ids)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        residual = f.residual_streams(ids, mask)[layer]
        return g.logits_from_layer(residual, layer, ids, mask), g.logits(ids, mask)


def test_excluded_ids_follow_the_cka_rule(grammar_tokenizer, tokenized_pair):
    f, g = tokenized_pair
    special = _special(grammar_tokenizer)
    assert excluded_target_ids(f, g, True) == special and grammar_tokenizer.unk_token_id not in special
    assert excluded_target_ids(f, g, False) == frozenset()
    assert excluded_target_ids(f, g, True, special_ids=[7]) == {7}


@pytest.mark.parametrize("exclude", [True, False])
def test_identity_penalty_equals_the_recomputation_by_hand(tokenized_pair, packed_rows, grammar_tokenizer, exclude):
    f, g = tokenized_pair
    train, evaluation = packed_rows
    special = _special(grammar_tokenizer)
    assert np.isin(evaluation[:, 1:], list(special)).mean() > 0.05  # packed rows: <bos>/<eos> among the targets
    settings = StitchSettings(**{**SETTINGS.to_dict(), "exclude_special_targets": exclude})
    result = stitch(f, g, 1, 1, "identity", train, evaluation, settings, progress=False)
    stitched, own = _logits(f, g, 1, evaluation)
    penalty, count = _by_hand(
        stitched, own, evaluation, (lambda token: token not in special) if exclude else (lambda token: True)
    )
    assert result.evaluation.n_targets == count == result.row()["n_targets"]
    assert result.penalty == pytest.approx(penalty, abs=1e-5)
    assert result.row()["exclude_special_targets"] is exclude
    scored = scored_targets(f, g, evaluation, settings)
    assert scored.sum() == count and not scored[:, 0].any()
    expected = evaluation.shape[0] * (evaluation.shape[1] - 1)
    if exclude:  # the non-special next tokens, <unk> included
        assert count == int((~np.isin(evaluation[:, 1:], list(special))).sum()) < expected
        assert scored[::3, 5].all()  # the <unk>s
    else:
        assert count == expected


def test_training_scores_the_same_targets(tokenized_pair, packed_rows, grammar_tokenizer):
    """A self-stitch starts at φ = id, so its first training loss is g's own mean loss on the first step's
    sequences — over the non-special targets with the exclusion, over all of them without."""
    _, g = tokenized_pair
    train, evaluation = packed_rows
    special = _special(grammar_tokenizer)
    first = torch.randperm(len(train), generator=torch.Generator().manual_seed(SETTINGS.seed))[: 128 // 16]
    rows = train[first.numpy()]
    with torch.no_grad():
        log_g = torch.log_softmax(g.logits(torch.as_tensor(rows)).double(), dim=-1).numpy()
    losses = {}
    for exclude in (True, False):
        settings = StitchSettings(**{**SETTINGS.to_dict(), "exclude_special_targets": exclude})
        result = stitch(g, g, 1, 1, "affine", train, evaluation, settings, progress=False)
        losses[exclude] = result.curve.loc[result.curve["step"] == 1, "train_loss"].item()
        targets = [
            (r, t)
            for r in range(len(rows))
            for t in range(1, rows.shape[1])
            if not exclude or int(rows[r, t]) not in special
        ]
        expected = -np.mean([log_g[r, t - 1, rows[r, t]] for r, t in targets])
        assert losses[exclude] == pytest.approx(expected, abs=1e-5)
    assert abs(losses[True] - losses[False]) > 1e-3  # the two rules score different targets


def test_label_targets_are_never_excluded():
    ids = torch.randint(0, 48, (6, 5), generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    split = TokenSplit.of(ids, labels=labels)
    _, targets = targets_for(split, "label", exclude_ids=frozenset({0, 1, 2}))
    assert torch.equal(targets, labels)
    f = ToyClassifierHandle("f", ToyClassifier(seed=0))
    g = ToyClassifierHandle("g", ToyClassifier(seed=1))
    data = torch.randint(0, 48, (40, 6), generator=torch.Generator().manual_seed(1)).numpy()
    classes = np.arange(40) % 3
    kwargs = {"train_labels": classes[:30], "eval_labels": classes[30:], "progress": False}
    plain = stitch(
        f,
        g,
        1,
        1,
        "identity",
        data[:30],
        data[30:],
        StitchSettings(**{**SETTINGS.to_dict(), "exclude_special_targets": False}),
        **kwargs,
    )
    told = stitch(f, g, 1, 1, "identity", data[:30], data[30:], SETTINGS, special_ids=[0, 1, 2, 3], **kwargs)
    assert told.objective == "label" and told.evaluation.n_targets == plain.evaluation.n_targets == 10
    assert told.penalty == plain.penalty
