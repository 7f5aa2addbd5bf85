"""What zoo training prints: one progress bar with the loss, and no TransformerLens device chatter."""

from __future__ import annotations

import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.bridge import bridge_logits, build_bridge_module  # noqa: E402
from thinkalike.models.training import LanguageModelTrainer, TrainingConfig, progress_label  # noqa: E402

CONFIG = {
    "n_layers": 1,
    "d_model": 16,
    "n_heads": 2,
    "d_head": 8,
    "d_mlp": 32,
    "d_vocab": 20,
    "n_ctx": 8,
    "act_fn": "gelu",
    "seed": 0,
}


def _sequences(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 20, size=(n, 8))


def test_training_a_bridge_prints_one_bar_with_the_loss_and_no_device_messages(capfd):
    module = build_bridge_module(CONFIG)
    config = TrainingConfig(steps=6, batch_size=4, warmup_steps=1, eval_every=3, eval_batches=1)
    with progress_label("tiny_bridge"):
        trainer = LanguageModelTrainer(module, lambda m, ids, mask: bridge_logits(m, ids, mask), "causal", config)
    curve = trainer.train(_sequences(16, 0), _sequences(4, 1))
    module.cpu()
    module.to(torch.device("cpu"))
    out, err = capfd.readouterr()
    assert "Moving model to device" not in out + err
    final = err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("tiny_bridge: 100%") and "6/6" in final
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d, loss \d+\.\d{3}, ", final)
    assert f"held-out {curve['heldout_loss'].iloc[-1]:.3f}" in final
    assert err.count("\n") == 1  # one line per model: the bar refreshes in place


def test_an_explicit_description_wins_and_progress_can_be_off(capfd):
    module = build_bridge_module(CONFIG)
    config = TrainingConfig(steps=2, batch_size=2, warmup_steps=0, eval_every=2, eval_batches=1)
    LanguageModelTrainer(module, bridge_logits, "causal", config, description="named").train(
        _sequences(4, 0), _sequences(2, 1)
    )
    assert capfd.readouterr().err.replace("\r", "\n").strip().splitlines()[-1].startswith("named: 100%")
    LanguageModelTrainer(module, bridge_logits, "causal", config, progress=False).train(
        _sequences(4, 0), _sequences(2, 1)
    )
    assert capfd.readouterr().err == ""
