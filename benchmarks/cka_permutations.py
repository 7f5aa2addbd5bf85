"""The CKA permutation null at the zoo's shapes: the form the cost model picks against the other form and a floor
(not part of the test run).

The default run's CKA pairs spend almost all their time on the permutation null (50 shuffles of the token
correspondence per minibatch). Same random residual-stream-like float32 activations (7 layers of width 80 against
9 of width 96, as neox_6l vs neox_8l; 6 minibatches of 512 tokens) for every contender:

1. auto:  ``CKAAccumulator(..., n_permutations=50)`` with ``form="auto"`` (the cost model's choice).
2. gram:  the same with ``form="gram"``: permuted Grams gathered (what ``auto`` chose before the cost model counted
          the gather).
3. floor: the permuted cross products alone, ‖XᵢᵀPYⱼ‖² for every layer pair, 50 permutations per minibatch, in
          float32 (one GEMM per permutation): the arithmetic no permutation null can skip.

Each is timed ``--repeats`` times, interleaved, on one thread; the fastest run of each is reported with the ratios,
and the p-values of auto and gram are compared (they must be equal).

Usage: python benchmarks/cka_permutations.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from thinkalike.measures.cka import CKAAccumulator

SHAPES = ((7, 80), (9, 96))
TOKENS, BATCHES, PERMUTATIONS = 512, 6, 50


def activations(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    (la, da), (lb, db) = SHAPES
    batches = []
    for _ in range(BATCHES):
        a = torch.randn(la, TOKENS, da, generator=generator).cumsum(dim=0)
        b = torch.randn(lb, TOKENS, db, generator=generator).cumsum(dim=0) + a[-1, :, :1]
        batches.append((a, b))
    return batches


def run(batches: list[tuple[torch.Tensor, torch.Tensor]], form: str):
    accumulator = CKAAccumulator(SHAPES[0][0], SHAPES[1][0], n_permutations=PERMUTATIONS, seed=0, form=form)
    for a, b in batches:
        accumulator.update(a, b)
    return accumulator.result()


def floor(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    generator = torch.Generator().manual_seed(0)
    for a, b in batches:
        xa = (a - a.mean(dim=1, keepdim=True)).permute(1, 0, 2).reshape(TOKENS, -1)
        xb = b - b.mean(dim=1, keepdim=True)
        for _ in range(PERMUTATIONS):
            y = xb[:, torch.randperm(TOKENS, generator=generator)].permute(1, 0, 2).reshape(TOKENS, -1)
            (xa.mT @ y).square_().sum()


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    batches = activations()
    times: dict[str, list[float]] = {"auto": [], "gram": [], "floor": []}
    results = {}
    for _ in range(args.repeats):
        for name in ("auto", "gram"):
            seconds, results[name] = timed(run, batches, name)
            times[name].append(seconds)
        times["floor"].append(timed(floor, batches)[0])
    best = {name: min(values) for name, values in times.items()}
    print(
        f"{SHAPES[0][0]}×{SHAPES[0][1]} against {SHAPES[1][0]}×{SHAPES[1][1]}, {BATCHES} minibatches of {TOKENS} "
        f"tokens, {PERMUTATIONS} permutations, 1 thread, fastest of {args.repeats}"
    )
    print("| contender | seconds |\n|---|---|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds:.2f} |")
    print(f"| **gram / auto** | **{best['gram'] / best['auto']:.2f}×** |")
    print(f"| **auto / floor** | **{best['auto'] / best['floor']:.2f}×** |")
    same = np.array_equal(results["auto"].p_values, results["gram"].p_values)
    print(f"| p-values of auto and gram equal | {same} |")
    print(
        f"| max |null auto − null gram| (CKA units) | {np.abs(results['auto'].null - results['gram'].null).max():.1e} |"
    )


if __name__ == "__main__":
    main()
