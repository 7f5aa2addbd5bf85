"""One stitching training step against its floor and against a naive hook-style step.

Same models, same batch, same process, interleaved repeats; the fastest repeat of each is kept
(the machine is shared: minima over interleaved repeats are the least disturbed numbers):

* **floor**: g's tail alone — ``g.logits_from_layer(x, m)`` on a residual ``x`` that requires grad, the
  cross-entropy and its backward pass (what any stitch step must at least do);
* **step**: ``StitchTrainer.train_step`` — gather f's precomputed features, φ (affine), g's tail forward and
  backward, gradient clipping, SGD step, schedule step;
* **naive**: what a hook-based implementation does — f's full forward (its layer-l residual extracted with
  hooks, ``no_grad``), then g's *whole* forward with a hook replacing the output of block m − 1 by φ(f's
  residual) (g's prefix runs and its output is thrown away), backward, clipping, SGD step;
* **lockstep** (``--seeds S``, default 2): ``LockstepTrainer.train_step`` of S φ seeds — S batches through their
  own φ's, g's tail run once on the S × batch rows, per-seed clipping, one optimiser step;
* **separate**: the same S seeds as S plain ``StitchTrainer.train_step`` calls (what S seeds cost without
  lockstep).

Targets: step / floor ≤ 1.2×; lockstep / separate < 1 (seeds cheaper together than apart).

    python benchmarks/stitching_speed.py                    # bridges (GeLU -> SoLU) and GPT-NeoX, zoo sizes
    python benchmarks/stitching_speed.py --repeats 3        # quicker
    python benchmarks/stitching_speed.py --seeds 3          # three φ seeds in lockstep against three apart
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.architectures import build_zoo_module, hf_zoo_config  # noqa: E402
from thinkalike.models.bridge import BridgeHandle  # noqa: E402
from thinkalike.models.handle import default_device, first_tensor  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402
from thinkalike.stitching import LockstepTrainer, StitchSettings, StitchTrainer, build_stitch_layer  # noqa: E402
from thinkalike.stitching.data import TokenSplit, loss_sum, target_count  # noqa: E402
from thinkalike.stitching.stitcher import prepare_split  # noqa: E402
from thinkalike.stitching.train import frozen  # noqa: E402

VOCAB = 400


def pairs(n_ctx: int, width: int, layers: int, device: torch.device):
    """``(name, f, g)`` pairs: GeLU -> SoLU bridges (TransformerLens family) and two GPT-NeoX (transformers)."""

    def bridge(name, act_fn, seed):
        config = {
            "name": name,
            "family": "bridge",
            "objective": "causal",
            "bridge_config": {
                "n_layers": layers,
                "d_model": width,
                "n_heads": 4,
                "d_head": width // 4,
                "d_mlp": 4 * width,
                "act_fn": act_fn,
                "d_vocab": VOCAB,
                "n_ctx": n_ctx,
                "seed": seed,
            },
        }
        module = build_zoo_module(config).to(device).eval()
        return BridgeHandle.from_module(name, f"zoo:{name}", module, None)

    def neox(name, seed):
        config = hf_zoo_config(
            name,
            "gpt_neox",
            "causal",
            vocab_size=VOCAB,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=4,
            intermediate_size=4 * width,
            max_position_embeddings=n_ctx,
            rotary_pct=0.25,
            bos_token_id=0,
            eos_token_id=0,
        )
        return HFModelHandle(name, f"zoo:{name}", build_zoo_module(config, seed=seed).to(device).eval())

    return [
        ("bridge gelu->solu", bridge("gelu", "gelu", 0), bridge("solu", "solu_ln", 1)),
        ("gpt_neox", neox("neox-a", 0), neox("neox-b", 1)),
    ]


def naive_logits(g, layer_g: int, replacement: torch.Tensor, ids, mask):
    """g's whole forward with a hook replacing block ``layer_g − 1``'s output (the hook-style stitch)."""
    block = g.blocks[layer_g - 1] if isinstance(g, HFModelHandle) else g.module.blocks[layer_g - 1]

    def hook(_module, _args, output):
        if isinstance(output, tuple):
            return (replacement.to(first_tensor(output).dtype),) + tuple(output[1:])
        return replacement.to(output.dtype)

    handle = block.register_forward_hook(hook)
    try:
        return g.logits(ids, mask)
    finally:
        handle.remove()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-ctx", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per step (one micro-batch)")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--layer", type=int, default=2, help="stitch layer l = m (0 = embeddings)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=5, help="timed calls per repeat")
    parser.add_argument("--device", default=None)
    parser.add_argument("--seeds", type=int, default=2, help="φ seeds of the lockstep / separate comparison")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = default_device(args.device)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, VOCAB, size=(4 * args.batch_size, args.n_ctx))
    settings = StitchSettings(
        steps=10_000, warmup_steps=10, tokens_per_step=args.batch_size * args.n_ctx, batch_size=args.batch_size
    )
    print(
        f"torch {torch.__version__}, {device}, {torch.get_num_threads()} threads; batch {args.batch_size} x "
        f"{args.n_ctx} tokens, width {args.width}, {args.layers} layers, stitch at layer {args.layer}; "
        f"min over {args.repeats} interleaved repeats of {args.iterations} calls"
    )
    for name, f, g in pairs(args.n_ctx, args.width, args.layers, device):
        best = bench_pair(
            name, f, g, args.layer, ids, settings, device, args.batch_size, args.repeats, args.iterations, args.seeds
        )
        print(
            f"{name:18s} floor {best['floor']:7.2f} ms  step {best['step']:7.2f} ms  naive {best['naive']:7.2f} ms"
            f"  step/floor {best['step'] / best['floor']:.3f}x (target <= 1.2x)  naive/floor "
            f"{best['naive'] / best['floor']:.3f}x  naive/step {best['naive'] / best['step']:.2f}x"
        )
        print(
            f"{'':18s} {args.seeds} φ seeds: lockstep {best['lockstep']:7.2f} ms  separate "
            f"{best['separate']:7.2f} ms  lockstep/separate {best['lockstep'] / best['separate']:.3f}x  "
            f"lockstep/step {best['lockstep'] / best['step']:.2f}x"
        )


def bench_pair(
    name,
    f,
    g,
    layer: int,
    ids,
    settings: StitchSettings,
    device: torch.device,
    batch_size: int,
    repeats: int,
    iterations: int,
    seeds: int = 2,
) -> dict[str, float]:
    """Milliseconds per call of floor, step, naive, lockstep and separate (minimum over interleaved repeats)."""
    with frozen(f.module, g.module):
        train = prepare_split(f, layer, TokenSplit.of(ids), "causal", settings, device=device, masking=None, seed=0)
        phi = build_stitch_layer("affine", f.d_model, g.d_model).to(device)
        trainer = StitchTrainer(phi, g, layer, train, "causal", settings, name)
        index = torch.arange(batch_size, device=device)
        features, batch_ids, batch_mask, targets = train.batch(index)
        count = target_count(targets, "causal")

        def floor():
            x = features.detach().requires_grad_(True)
            loss = loss_sum(g.logits_from_layer(x, layer, batch_ids, batch_mask), targets, "causal") / count
            loss.backward()

        def step():
            trainer.train_step(index)

        def naive():
            with torch.no_grad():
                residual = f.residual_streams(batch_ids, batch_mask)[layer]
            logits = naive_logits(g, layer, phi(residual), batch_ids, batch_mask)
            (loss_sum(logits, targets, "causal") / count).backward()
            torch.nn.utils.clip_grad_norm_(trainer.parameters, 1.0)
            trainer.optimizer.step()
            trainer.optimizer.zero_grad(set_to_none=True)

        together = LockstepTrainer(
            [build_stitch_layer("affine", f.d_model, g.d_model).to(device) for _ in range(seeds)],
            g,
            layer,
            train,
            "causal",
            settings,
            name,
            seeds=range(seeds),
        )
        apart = [
            StitchTrainer(
                build_stitch_layer("affine", f.d_model, g.d_model).to(device), g, layer, train, "causal", settings, name
            )
            for _ in range(seeds)
        ]
        indices = [index] * seeds

        def lockstep():
            together.train_step(indices)

        def separate():
            for trainer in apart:
                trainer.train_step(index)

        runs = {"floor": floor, "step": step, "naive": naive, "lockstep": lockstep, "separate": separate}
        for fn in runs.values():  # warm-up
            fn()
        times: dict[str, list[float]] = {key: [] for key in runs}
        for _ in range(repeats):
            for key, fn in runs.items():
                sync(device)
                started = time.perf_counter()
                for _ in range(iterations):
                    fn()
                sync(device)
                times[key].append((time.perf_counter() - started) / iterations)
    return {key: min(value) * 1000 for key, value in times.items()}


if __name__ == "__main__":
    main()
