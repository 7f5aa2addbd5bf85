"""The zoo training loop on a tiny bigram model: learning, determinism, objectives."""

import numpy as np
import pytest
import torch

from thinkalike.models.training import (
    LanguageModelTrainer,
    MaskingTokens,
    TrainingConfig,
    adamw,
    causal_lm_loss,
    learning_rate_factor,
    mask_tokens,
)

VOCAB = 12


class Bigram(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(VOCAB, VOCAB)

    def forward(self, input_ids):
        return self.table(input_ids)


def logits_fn(module, input_ids, attention_mask):
    return module(input_ids)


def cyclic_sequences(n, n_ctx, seed):
    """Token t+1 = (t + 1) mod VOCAB: perfectly predictable from the previous token."""
    starts = np.random.default_rng(seed).integers(0, VOCAB, size=n)
    return (starts[:, None] + np.arange(n_ctx)[None]) % VOCAB


def test_causal_training_learns_a_deterministic_language():
    torch.manual_seed(0)
    config = TrainingConfig(steps=150, batch_size=8, learning_rate=0.3, warmup_steps=5, eval_every=50)
    trainer = LanguageModelTrainer(Bigram(), logits_fn, "causal", config)
    curve = trainer.train(cyclic_sequences(64, 16, 0), cyclic_sequences(16, 16, 1))
    assert list(curve["step"]) == [50, 100, 150]
    assert curve["heldout_loss"].iloc[-1] < 0.2 * np.log(VOCAB)


def test_training_is_deterministic_for_a_seed():
    def run():
        torch.manual_seed(123)
        module = Bigram()
        config = TrainingConfig(steps=20, batch_size=4, learning_rate=0.1, warmup_steps=2, eval_every=10, seed=7)
        LanguageModelTrainer(module, logits_fn, "causal", config).train(
            cyclic_sequences(32, 8, 0), cyclic_sequences(8, 8, 1)
        )
        return module.table.weight.detach().clone()

    assert torch.equal(run(), run())


def test_causal_loss_ignores_padding_targets():
    logits = torch.zeros(1, 4, VOCAB)
    logits[0, 0, 3] = 100.0  # predicts token 3 at position 1 perfectly
    ids = torch.tensor([[1, 3, 5, 7]])
    mask = torch.tensor([[1, 1, 0, 0]])
    assert float(causal_lm_loss(logits, ids, mask)) == pytest.approx(0.0, abs=1e-6)


def test_masking_never_selects_special_tokens_and_masks_about_the_rate():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(2, VOCAB, (64, 64), generator=generator)
    ids[:, 0] = 0  # a special token
    tokens = MaskingTokens(mask_id=1, special_ids=(0, 1), vocab_size=VOCAB)
    corrupted, targets = mask_tokens(ids, tokens, 0.15, generator)
    selected = targets != -100
    assert not selected[:, 0].any()
    assert 0.12 < selected.float().mean() < 0.18
    assert torch.equal(targets[selected], ids[selected])
    assert ((corrupted[selected] == 1).float().mean()) == pytest.approx(0.8, abs=0.05)
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_masked_objective_learns():
    torch.manual_seed(0)
    config = TrainingConfig(steps=150, batch_size=8, learning_rate=0.3, warmup_steps=5, eval_every=150)

    class Neighbour(torch.nn.Module):  # predicts a token from its left neighbour
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(VOCAB, VOCAB)

        def forward(self, ids):
            return torch.nn.functional.pad(self.table(ids)[:, :-1], (0, 0, 1, 0))

    masking = MaskingTokens(mask_id=0, special_ids=(0,), vocab_size=VOCAB)
    sequences = cyclic_sequences(64, 16, 0) % (VOCAB - 1) + 1
    curve = LanguageModelTrainer(Neighbour(), logits_fn, "masked", config, masking).train(sequences, sequences[:16])
    assert curve["heldout_loss"].iloc[-1] < 0.5 * np.log(VOCAB)


def test_per_position_mask_rates_select_only_where_they_are_positive():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(2, VOCAB, (64, 32), generator=generator)
    rates = torch.zeros(ids.shape)
    rates[:, 16:] = 0.5  # the "hypothesis" half
    _, targets = mask_tokens(ids, MaskingTokens(mask_id=1, special_ids=(0, 1), vocab_size=VOCAB), rates, generator)
    selected = targets != -100
    assert not selected[:, :16].any() and 0.45 < selected[:, 16:].float().mean() < 0.55


def test_trainer_masks_by_row_rates_and_does_not_attend_to_padding():
    seen = []

    def recording_logits(module, input_ids, attention_mask):
        seen.append((input_ids.clone(), attention_mask.clone()))
        return module(input_ids)

    pad, mask_id = 0, 1
    masking = MaskingTokens(mask_id=mask_id, special_ids=(pad, mask_id), vocab_size=VOCAB)
    rows = np.full((8, 10), 5)
    rows[:, 8:] = pad
    rates = np.zeros(rows.shape)
    rates[:, 4:8] = 0.9
    config = TrainingConfig(steps=5, batch_size=4, learning_rate=0.1, warmup_steps=1, eval_every=5, eval_batches=1)
    LanguageModelTrainer(Bigram(), recording_logits, "masked", config, masking, pad_id=pad).train(
        rows, rows[:2], mask_rates=rates
    )
    training_calls = seen[:5]
    for corrupted, attention in training_calls:
        assert (attention[:, 8:] == 0).all() and (attention[:, :8] == 1).all()
        assert (corrupted[:, :4] == 5).all()  # rate 0: never corrupted
    assert any((corrupted[:, 4:8] != 5).any() for corrupted, _ in training_calls)
    with pytest.raises(ValueError, match="mask_rates must be shaped like"):
        LanguageModelTrainer(Bigram(), logits_fn, "masked", config, masking).train(rows, rows, mask_rates=rates[:, :4])
    with pytest.raises(ValueError, match="masked objective only"):
        LanguageModelTrainer(Bigram(), logits_fn, "causal", config).train(rows, rows, mask_rates=rates)


def test_schedule_warms_up_then_decays_to_a_tenth():
    config = TrainingConfig(steps=100, warmup_steps=10)
    assert learning_rate_factor(0, config) == pytest.approx(0.1)
    assert learning_rate_factor(9, config) == pytest.approx(1.0)
    assert learning_rate_factor(100, config) == pytest.approx(0.1)


def test_bad_training_settings_are_named():
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainingConfig(steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="objective"):
        LanguageModelTrainer(Bigram(), logits_fn, "seq2seq", TrainingConfig())


def test_adamw_updates_every_tensor_as_torchs_per_tensor_loop_does_to_the_bit():
    """The trainers' optimiser (tensors updated together) against torch's per-tensor loop (its CPU default), over
    tensors of odd shapes with weight decay, 25 steps: the weights are equal, not close — the findings of a
    default run depend on it."""
    torch.manual_seed(3)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,)]
    start = [torch.randn(shape) for shape in shapes]
    gradients = [[torch.randn(shape) for shape in shapes] for _ in range(25)]

    def trained(make):
        parameters = [torch.nn.Parameter(t.clone()) for t in start]
        optimiser = make(parameters)
        for step_gradients in gradients:
            for parameter, gradient in zip(parameters, step_gradients):
                parameter.grad = gradient.clone()
            optimiser.step()
        return [parameter.detach() for parameter in parameters]

    ours = trained(lambda parameters: adamw(parameters, 3e-2, 0.1))
    loop = trained(lambda parameters: torch.optim.AdamW(parameters, lr=3e-2, weight_decay=0.1, foreach=False))
    assert all(torch.equal(a, b) for a, b in zip(ours, loop))
    assert not torch.equal(ours[0], start[0])  # the weights moved
