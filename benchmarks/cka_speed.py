"""Side-by-side speed of the all-layer-pairs CKA grid (not part of the test run).

Same random float32 activations for every contender: two models × L layers, B batches of
n tokens × d features (residual-stream-like: each layer adds noise to the previous one; model
b is a random rotation of model a plus noise, so CKA values span the range).

1. ours:     ``CKAAccumulator`` (unbiased, mean_of_ratios) over the full L×L grid.
2. ckatorch: ``ckatorch.core.cka_base(x, y, unbiased=True)`` looped over all L² pairs and B
             batches, then the per-batch values averaged (mean of ratios). Its rows are timed
             between timings of our update of the same batch, so that ratios can also be
             formed under the same machine load (the machine may be shared).
3. floor:    a bare loop computing every layer's Gram matrix XXᵀ per batch (2L Grams per
             batch) in the dtype our Grams use (float32 here).

Usage: python benchmarks/cka_speed.py [--layers 12 --batches 8 --tokens 1024 --dim 768]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from thinkalike.measures.cka import CKAAccumulator, CKAResult, default_gram_dtype


def make_activations(layers: int, batches: int, tokens: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(batches, layers, tokens, dim) float32 activations for models a and b."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(batches, layers, tokens, dim, generator=gen).cumsum(dim=1)
    rotation, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen))
    b = a @ rotation + 2.0 * torch.randn(batches, layers, tokens, dim, generator=gen).cumsum(dim=1)
    return a.float().contiguous(), b.float().contiguous()


def run_ours(a: torch.Tensor, b: torch.Tensor) -> CKAResult:
    acc = CKAAccumulator(a.shape[1], b.shape[1], estimator="unbiased", aggregation="mean_of_ratios")
    for batch_a, batch_b in zip(a, b):
        acc.update(batch_a, batch_b)
    return acc.result()


def run_ckatorch_interleaved(a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, list[float], list[float]]:
    """ckatorch over every pair and batch, timed per grid row (L pairs); our update of the same
    batch is timed just before and after each batch, so both see the same machine load."""
    from ckatorch.core import cka_base

    out = np.zeros((a.shape[1], b.shape[1]))
    row_times, ours_times = [], []
    scratch = CKAAccumulator(a.shape[1], b.shape[1], estimator="unbiased", aggregation="mean_of_ratios")
    for batch_a, batch_b in zip(a, b):
        ours_times.append(timed(scratch.update, batch_a, batch_b)[0])
        for i, x in enumerate(batch_a):
            start = time.perf_counter()
            for j, y in enumerate(batch_b):
                out[i, j] += cka_base(x, y, kernel="linear", unbiased=True).item()
            row_times.append(time.perf_counter() - start)
        ours_times.append(timed(scratch.update, batch_a, batch_b)[0])
    return out / a.shape[0], row_times, ours_times


def run_floor(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> None:
    gram = torch.empty(a.shape[2], a.shape[2], dtype=dtype)
    for batch_a, batch_b in zip(a, b):
        for x in (*batch_a, *batch_b):
            x = x.to(dtype)
            torch.mm(x, x.T, out=gram)


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=3, help="timings of ours and floor (interleaved); min reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-ckatorch", action="store_true")
    args = parser.parse_args()

    a, b = make_activations(args.layers, args.batches, args.tokens, args.dim, args.seed)
    gram_dtype = default_gram_dtype(a.dtype, a.device)
    print(
        f"{args.layers}x{args.layers} layers, {args.batches} batches x {args.tokens} tokens x {args.dim} dims "
        f"({a.dtype}); grams in {gram_dtype}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    run_ours(a[:1], b[:1])  # warm-up
    ours_times, floor_times = [], []
    for _ in range(args.repeats):
        t, ours = timed(run_ours, a, b)
        ours_times.append(t)
        t, _ = timed(run_floor, a, b, gram_dtype)
        floor_times.append(t)
    t_ours, t_floor = min(ours_times), min(floor_times)
    print(
        f"our form: {ours.forms[0]} (feature form: float64 XᵀY products, not comparable to the Gram floor)"
        if ours.forms[0] == "feature"
        else "our form: gram"
    )
    ours = ours.cka
    print(f"ours      {t_ours:8.3f} s   (runs: {', '.join(f'{t:.3f}' for t in ours_times)})")
    print(f"floor     {t_floor:8.3f} s   (runs: {', '.join(f'{t:.3f}' for t in floor_times)})")
    print(f"ours/floor      = {t_ours / t_floor:6.2f}x  (target <= 1.3x)")

    reference = run_ours(a.double(), b.double()).cka
    print(f"max |ours(float32 in) - ours(float64 in)| = {np.abs(ours - reference).max():.2e}")
    if not args.skip_ckatorch:
        theirs, row_times, ours_batch_times = run_ckatorch_interleaved(a, b)
        t_ckatorch = sum(row_times)
        same_window = t_ckatorch / (sum(ours_batch_times) / 2)
        best = len(row_times) * min(row_times) / (args.batches * min(ours_batch_times))
        print(
            f"ckatorch  {t_ckatorch:8.3f} s   ({len(row_times)} rows of {args.layers} pairs, "
            f"min row {min(row_times):.3f} s)"
        )
        print(f"ckatorch/ours   = {t_ckatorch / t_ours:6.1f}x  total vs ours' best run (target >= 25x)")
        print(f"ckatorch/ours   = {same_window:6.1f}x  each batch vs ours on it, interleaved (same load)")
        print(f"ckatorch/ours   = {best:6.1f}x  best ckatorch row vs best ours batch (least load)")
        print(f"max |ours - ckatorch| = {np.abs(ours - theirs).max():.2e}  (target <= 1e-6)")
    print("CKA grid (first rows):")
    print(np.array2string(ours[:3, :6], precision=4))


if __name__ == "__main__":
    main()
