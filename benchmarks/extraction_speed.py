"""Extraction (hooks + NaN checks + safetensors shards on disk) against a bare forward pass.

Same model, same token batches, same process, interleaved repeats; the fastest of each is kept:

* **bare**: ``module(input_ids, attention_mask)`` under ``torch.no_grad`` for every batch (logits);
* **extraction**: :func:`iter_activation_batches` written with :func:`write_activation_store`
  (what the ``activations`` pipeline does), into a fresh temporary directory each time (its
  removal afterwards is not timed).

Target: extraction / bare ≤ 1.15×.

    python benchmarks/extraction_speed.py                       # GPT-NeoX and GeLU bridge, zoo sizes
    python benchmarks/extraction_speed.py --sequences 64        # quicker
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from thinkalike.models.activation_store import write_activation_store  # noqa: E402
from thinkalike.models.architectures import build_zoo_module, hf_zoo_config, zoo_logits  # noqa: E402
from thinkalike.models.bridge import BridgeHandle  # noqa: E402
from thinkalike.models.extraction import iter_activation_batches  # noqa: E402
from thinkalike.models.hf import HFModelHandle  # noqa: E402

VOCAB = 400


def models(n_ctx: int, width: int, layers: int):
    neox = hf_zoo_config(
        "neox",
        "gpt_neox",
        "causal",
        vocab_size=VOCAB,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=4 * width,
        max_position_embeddings=n_ctx,
        rotary_pct=0.25,
    )
    bridge = {
        "name": "gelu",
        "family": "bridge",
        "objective": "causal",
        "bridge_config": {
            "n_layers": layers,
            "d_model": width,
            "n_heads": 4,
            "d_head": width // 4,
            "d_mlp": 4 * width,
            "act_fn": "gelu",
            "d_vocab": VOCAB,
            "n_ctx": n_ctx,
            "seed": 0,
        },
    }
    neox_module = build_zoo_module(neox, seed=0).eval()
    bridge_module = build_zoo_module(bridge, seed=0).eval()
    return [
        ("gpt_neox", neox, neox_module, HFModelHandle("neox", "zoo:neox", neox_module)),
        ("bridge_gelu", bridge, bridge_module, BridgeHandle.from_module("gelu", "zoo:gelu", bridge_module, None)),
    ]


def bare(config, module, ids, mask, batch_size):
    with torch.no_grad():
        for start in range(0, len(ids), batch_size):
            zoo_logits(module, config, ids[start : start + batch_size], mask[start : start + batch_size])


def extraction(handle, ids, mask, batch_size, directory):
    batches = iter_activation_batches(handle, ids, mask.numpy(), batch_size, progress=False)
    write_activation_store(directory, batches, model=handle.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=256)
    parser.add_argument("--n-ctx", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(5, VOCAB, size=(args.sequences, args.n_ctx)))
    mask = torch.ones_like(ids)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.sequences} sequences x {args.n_ctx} "
        f"tokens, batch {args.batch_size}, width {args.width}, {args.layers} layers"
    )
    for name, config, module, handle in models(args.n_ctx, args.width, args.layers):
        bare(config, module, ids[: args.batch_size], mask[: args.batch_size], args.batch_size)  # warm-up
        times = {"bare": [], "extraction": []}
        for _ in range(args.repeats):
            started = time.perf_counter()
            bare(config, module, ids, mask, args.batch_size)
            times["bare"].append(time.perf_counter() - started)
            with tempfile.TemporaryDirectory() as scratch:  # removing the files is not timed
                started = time.perf_counter()
                extraction(handle, ids, mask, args.batch_size, os.path.join(scratch, "store"))
                times["extraction"].append(time.perf_counter() - started)
        best = {key: min(value) for key, value in times.items()}
        print(
            f"{name:12s} bare {best['bare']:.3f} s  extraction {best['extraction']:.3f} s  "
            f"ratio {best['extraction'] / best['bare']:.3f}x (target <= 1.15x)"
        )


if __name__ == "__main__":
    main()
