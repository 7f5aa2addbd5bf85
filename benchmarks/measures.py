"""Per-layer-pair time of every registered measure in ``measure_table``, as a ratio to CKA's
(not part of the test run).

Two models × L layers of n tokens, model a of width d_a and model b of width d_b
(residual-stream-like: each layer adds noise to the previous one; model b is a random linear
map of model a's stream plus noise, so the measures span their range). For each measure
alone, ``measure_table(layers_a, layers_b, [name])`` is timed (``--repeats`` times, fastest
kept) and divided by the L² layer pairs; this includes the measure's per-layer preparation.
Then all measures in one table (preparations shared where measures share them). With
``--direct``, each measure's function is also called on every pair (the path without
per-layer preparation) for comparison.

Speed is reported as a ratio to CKA timed the same way in the same process (the machine may
be shared, so absolute times drift; the ratios drift less).

Usage: python benchmarks/measures.py [--tokens 512 1024 --dims 64 96 --layers 5 --repeats 3 --direct]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from thinkalike.measures.layerwise import measure_table
from thinkalike.measures.registry import MEASURE_NAMES, measure


def make_layers(
    layers: int, tokens: int, dim_a: int, dim_b: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(layers_a, layers_b): lists of float64 (tokens, dim) matrices."""
    rng = np.random.default_rng(seed)
    width = max(dim_a, dim_b)
    stream = rng.standard_normal((layers, tokens, width)).cumsum(axis=0)
    map_a = rng.standard_normal((width, dim_a)) / np.sqrt(width)
    map_b = rng.standard_normal((width, dim_b)) / np.sqrt(width)
    noise = 1.5 * rng.standard_normal((layers, tokens, dim_b)).cumsum(axis=0)
    return [s @ map_a for s in stream], [s @ map_b + e for s, e in zip(stream, noise)]


def fastest(repeats: int, fn, *args) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def direct(layers_a: list[np.ndarray], layers_b: list[np.ndarray], name: str) -> None:
    entry = measure(name)
    for x in layers_a:
        for y in layers_b:
            entry(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--dims", type=int, nargs=2, default=[64, 96], metavar=("D_A", "D_B"))
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timings per measure; the fastest is reported")
    parser.add_argument("--direct", action="store_true", help="also time the measure functions on every pair")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    for tokens in args.tokens:
        layers_a, layers_b = make_layers(args.layers, tokens, *args.dims, args.seed)
        pairs = args.layers**2
        print(f"\n{args.layers}x{args.layers} layers, n = {tokens} tokens, d = {args.dims[0]} vs {args.dims[1]}; "
              f"fastest of {args.repeats}; ms per layer pair")
        measure_table(layers_a[:1], layers_b[:1], MEASURE_NAMES)  # warm-up (imports, BLAS)
        table = {name: fastest(args.repeats, measure_table, layers_a, layers_b, [name]) / pairs
                 for name in MEASURE_NAMES}
        all_in_one = fastest(args.repeats, measure_table, layers_a, layers_b, MEASURE_NAMES) / pairs
        header = f"{'measure':22s} {'table':>9s} {'/ cka':>7s}"
        if args.direct:
            header += f" {'direct':>9s} {'/ cka':>7s} {'direct/table':>13s}"
        print(header)
        calls = {}
        if args.direct:
            calls = {name: fastest(1, direct, layers_a, layers_b, name) / pairs for name in MEASURE_NAMES}
        for name in MEASURE_NAMES:
            line = f"{name:22s} {1e3 * table[name]:9.2f} {table[name] / table['cka']:7.1f}"
            if args.direct:
                line += (f" {1e3 * calls[name]:9.2f} {calls[name] / calls['cka']:7.1f}"
                         f" {calls[name] / table[name]:13.1f}")
            print(line)
        line = f"{'sum of the above':22s} {1e3 * sum(table.values()):9.2f} {sum(table.values()) / table['cka']:7.1f}"
        if args.direct:
            line += f" {1e3 * sum(calls.values()):9.2f} {sum(calls.values()) / calls['cka']:7.1f}"
            line += f" {sum(calls.values()) / sum(table.values()):13.1f}"
        print(line)
        print(f"{'all in one table':22s} {1e3 * all_in_one:9.2f} {all_in_one / table['cka']:7.1f}")


if __name__ == "__main__":
    main()
