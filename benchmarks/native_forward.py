"""The fast path of native zoo bridges (thinkalike.models.native_forward) against the TransformerBridge itself.

One training step's work (forward, a loss over every logit, backward into every parameter) and one stitching
tail's (forward from a residual stream after layer 0, backward into that stream only, parameters frozen), on the
zoo's own shapes, both paths in this process, interleaved, fastest of ``--repeats`` timings of ``--steps`` steps;
the ratio bridge / fast and the largest logit difference between the two are printed.

    python benchmarks/native_forward.py              # the default run's zoo shapes, 1 thread
    python benchmarks/native_forward.py --threads 2
"""

from __future__ import annotations

import argparse
import functools
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from thinkalike.models.bridge import bridge_logits, build_bridge_module  # noqa: E402
from thinkalike.models.native_forward import bridge_path  # noqa: E402

#: (name, bridge config, batch): the shapes of the default run (conf/base/parameters_zoo.yml, parameters_nli.yml).
SHAPES = [
    ("gelu_3l (zoo training, batch 16)", dict(n_layers=3, act_fn="gelu"), 16),
    ("solu_3l (stitching tail, batch 32)", dict(n_layers=3, act_fn="solu_ln"), 32),
    (
        "nli encoder 4l (rotary, bidirectional, batch 32)",
        dict(n_layers=4, act_fn="gelu", positional_embedding_type="rotary", attention_dir="bidirectional"),
        32,
    ),
]


def _step(module, ids, mask, tail: bool) -> None:
    if tail:
        residual = torch.randn(ids.shape[0], ids.shape[1], 64, requires_grad=True)
        from thinkalike.models.bridge import BridgeHandle

        logits = BridgeHandle.from_module("m", "zoo:m", module, None).logits_from_layer(residual, 0, ids, mask)
    else:
        logits = bridge_logits(module, ids, mask)
    logits.logsumexp(-1).mean().backward()


def _time(fn, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} steps, fastest of {args.repeats}\n")
    print("| shape | work | bridge (ms/step) | fast path (ms/step) | bridge / fast | max \\|Δ logits\\| |")
    print("|---|---|---:|---:|---:|---:|")
    for name, extra, batch in SHAPES:
        config = {
            "d_model": 64,
            "n_heads": 4,
            "d_head": 16,
            "d_mlp": 256,
            "d_vocab": 394,
            "n_ctx": 64,
            "seed": 0,
            **extra,
        }
        module = build_bridge_module(config)
        ids = torch.randint(0, 394, (batch, 64), generator=torch.Generator().manual_seed(0))
        mask = torch.ones_like(ids)
        with torch.no_grad():
            fast_logits = bridge_logits(module, ids, mask)
            with bridge_path(module):
                difference = float((bridge_logits(module, ids, mask) - fast_logits).abs().max())
        for work, tail in (("training step", False), ("stitching tail", True)):
            if tail:
                for parameter in module.parameters():
                    parameter.requires_grad_(False)
            best = {"bridge": float("inf"), "fast": float("inf")}
            step = functools.partial(_step, module, ids, mask, tail)
            for _ in range(args.repeats):
                with bridge_path(module):
                    best["bridge"] = min(best["bridge"], _time(step, args.steps))
                best["fast"] = min(best["fast"], _time(step, args.steps))
            print(
                f"| {name} | {work} | {best['bridge'] * 1e3:.1f} | {best['fast'] * 1e3:.1f} | "
                f"{best['bridge'] / best['fast']:.2f}× | {difference:.1e} |"
            )


if __name__ == "__main__":
    main()
