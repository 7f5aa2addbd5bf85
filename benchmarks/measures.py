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

Grid mode (``--grid L``): one model of L layers (n = the first ``--tokens``, d = the first of ``--dims``)
against itself, all measures in one table with the default configuration's options
(``conf/base/parameters_cka.yml``), and one calibration of that model against a second one (L layers
each side) with the configured calibration measures and ``--permutations`` permutations: the time and
the peak of traced memory (``tracemalloc``: numpy's buffers included) of each, for this checkout's
``thinkalike.measures`` and, in the same process, for the package as it was at git revision
``--before`` (its files loaded from ``git show`` under another name), with the ratio before / after.

    OMP_NUM_THREADS=1 python benchmarks/measures.py --grid 31 --tokens 512 --dims 576 576 --permutations 2

``--fit-rows``: the tables with the measures fitted to the rows as the pipeline runs them (the CCA family in at
most n // 10 principal components, :func:`thinkalike.measures.layerwise.fit_to_rows`), for the package at
``--before`` too when it has ``fit_to_rows``.

With ``--before``, the largest |after − before| of each measure's values over the table's cells is printed
too (the shape distances of a layer to itself, rounding noise of about 1e-8 around 0, apart from the other
cells), and of the calibration's null cells and z-scores.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

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


GRID_OPTIONS = {
    "angular_shape": {"alpha": 0.5},
    "svcca": {"keep": 0.99},
    "rsa": {"distance": "correlation", "correlation": "spearman"},
    "mutual_knn": {"k": 10},
    "cknna": {"k": 10},
    "knn_jaccard": {"k": 10},
}
CALIBRATION_MEASURES = ["cka", "procrustes", "mutual_knn"]


def measures_at(revision: str, folder: Path):
    """``thinkalike.measures`` as it was at ``revision``, importable as ``_measures_<revision>``."""
    name = "_measures_" + "".join(c if c.isalnum() else "_" for c in revision)
    package = folder / name
    package.mkdir()
    files = subprocess.run(
        ["git", "ls-tree", "--name-only", revision, "src/thinkalike/measures/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for path in files:
        if path.endswith(".py"):
            text = subprocess.run(
                ["git", "show", f"{revision}:{path}"], capture_output=True, text=True, check=True
            ).stdout
            (package / Path(path).name).write_text(text.replace("thinkalike.measures", name))
    sys.path.insert(0, str(folder))
    return importlib.import_module(f"{name}.layerwise"), importlib.import_module(f"{name}.calibration")


def traced(fn, *args, **kwargs) -> tuple[tuple[float, float, float], object]:
    """((wall seconds, peak traced MB, CPU seconds of this process), the result) of one call."""
    tracemalloc.start()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return (seconds, peak, cpu), result


def differences(after, before, names: list[str], n_layers: int, diagonal_noise: tuple[str, ...]) -> None:
    """Print, per measure, the largest |after − before| over the computed cells; for the shape distances of a layer
    to itself (sqrt or arccos of rounding, about 1e-8, not 0) separately from the other cells."""
    shape = (len(names), n_layers, n_layers)
    a, b = after.value.to_numpy().reshape(shape), before.value.to_numpy().reshape(shape)
    off = ~np.eye(n_layers, dtype=bool)
    print("\nmax |after - before| per measure (cells computed in both; NaN in one but not the other: counted)")
    for m, name in enumerate(names):
        both = ~np.isnan(a[m]) & ~np.isnan(b[m])
        mismatched = int((np.isnan(a[m]) != np.isnan(b[m])).sum())
        diff = np.where(both, np.abs(a[m] - b[m]), 0.0)
        line = f"  {name:20s} {diff.max():.2g}"
        if name in diagonal_noise:
            line += f" (off the diagonal {diff[off].max():.2g}; a layer to itself {np.diag(diff).max():.2g})"
        print(line + (f"; {mismatched} NaN mismatches" if mismatched else ""))


def grid(args: argparse.Namespace) -> None:
    from thinkalike.measures import calibration, layerwise
    from thinkalike.measures.distances import match_layers_by_relative_depth

    layers_a, layers_b = make_layers(args.grid, args.tokens[0], args.dims[0], args.dims[1], args.seed)
    grid_pairs = None if args.pairs == "all" else match_layers_by_relative_depth(args.grid, args.grid)
    with tempfile.TemporaryDirectory() as folder:
        before = measures_at(args.before, Path(folder)) if args.before else None
        print(
            f"{args.grid} layers x n = {args.tokens[0]} tokens x d = {args.dims[0]} (self table: "
            f"{args.grid**2 if grid_pairs is None else len(grid_pairs)} cells x {len(MEASURE_NAMES)} measures); "
            f"calibration vs a second model of width {args.dims[1]}: {CALIBRATION_MEASURES}, "
            f"{args.permutations} permutations; pairs: {args.pairs}",
            flush=True,
        )
        rows, results = [], {}
        for label, (table_module, calibration_module) in (
            ("after", (layerwise, calibration)),
            ("before", before or (None, None)),
        ):
            if table_module is None or (label == "after" and args.before_only):
                continue
            extra = {} if grid_pairs is None else {"pairs": grid_pairs}  # (the package before had no grid)
            names, options = list(MEASURE_NAMES), GRID_OPTIONS
            if args.fit_rows and hasattr(table_module, "fit_to_rows"):  # as the pipeline runs them (a package
                # before fit_to_rows could not)
                names, options, notes = table_module.fit_to_rows(names, options, args.tokens[0], args.dims[0])
                print(f"{label}: {'; '.join(notes) or 'nothing to fit'}", flush=True)
            table, results[label] = traced(table_module.measure_table, layers_a, None, names, options, **extra)
            print(f"{label}: table {table[0]:.1f} s ({table[2]:.1f} CPU s), peak {table[1]:.0f} MB", flush=True)
            if not args.permutations:
                rows.append((label, table, (float("nan"),) * 3))
                continue
            calibrated, results[label + " calibration"] = traced(
                calibration_module.calibrate,
                layers_a,
                layers_b,
                CALIBRATION_MEASURES,
                {"mutual_knn": {"k": 10}},
                n_permutations=args.permutations,
                seed=0,
                **extra,
            )
            print(
                f"{label}: calibration {calibrated[0]:.1f} s ({calibrated[2]:.1f} CPU s), peak {calibrated[1]:.0f} MB",
                flush=True,
            )
            rows.append((label, table, calibrated))
        if "after" in results and "before" in results:
            differences(results["after"], results["before"], names, args.grid, ("procrustes", "angular_shape"))
        if "after calibration" in results and "before calibration" in results:
            after, before_result = results["after calibration"], results["before calibration"]
            print(
                f"  calibration null cells: {np.nanmax(np.abs(after.null_cells - before_result.null_cells)):.2g}; "
                f"z: {np.nanmax(np.abs(after.scores.z - before_result.scores.z)):.2g}"
            )
        print(
            "\n| | table s | table CPU s | table peak MB | calibration s | calibration CPU s | calibration peak MB |"
            "\n|---|---:|---:|---:|---:|---:|---:|"
        )
        for label, table, calibrated in rows:
            print(
                f"| {label} | {table[0]:.1f} | {table[2]:.1f} | {table[1]:.0f} | {calibrated[0]:.1f} | "
                f"{calibrated[2]:.1f} | {calibrated[1]:.0f} |"
            )
        if len(rows) == 2:
            (_, ta, ca), (_, tb, cb) = rows
            print(
                f"| before / after | {tb[0] / ta[0]:.1f}x | {tb[2] / ta[2]:.1f}x | {tb[1] / ta[1]:.1f}x | "
                f"{cb[0] / ca[0]:.1f}x | {cb[2] / ca[2]:.1f}x | {cb[1] / ca[1]:.1f}x |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--dims", type=int, nargs=2, default=[64, 96], metavar=("D_A", "D_B"))
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timings per measure; the fastest is reported")
    parser.add_argument("--direct", action="store_true", help="also time the measure functions on every pair")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grid", type=int, default=0, help="grid mode: layers per model (module docstring)")
    parser.add_argument(
        "--permutations", type=int, default=20, help="grid mode: calibration permutations (0: no calibration)"
    )
    parser.add_argument("--before-only", action="store_true", help="grid mode: time only the package at --before")
    parser.add_argument(
        "--fit-rows",
        action="store_true",
        help="grid mode: the measures fitted to the rows as the pipeline runs them (the CCA family in "
        "at most n // 10 principal components; thinkalike.measures.layerwise.fit_to_rows)",
    )
    parser.add_argument("--before", default="", help="grid mode: git revision to compare with (e.g. HEAD)")
    parser.add_argument(
        "--pairs",
        choices=["all", "relative"],
        default="all",
        help="grid mode: every layer pair, or those matched by relative depth (cka.measures.layers)",
    )
    args = parser.parse_args()
    if args.grid:
        grid(args)
        return

    for tokens in args.tokens:
        layers_a, layers_b = make_layers(args.layers, tokens, *args.dims, args.seed)
        pairs = args.layers**2
        print(
            f"\n{args.layers}x{args.layers} layers, n = {tokens} tokens, d = {args.dims[0]} vs {args.dims[1]}; "
            f"fastest of {args.repeats}; ms per layer pair"
        )
        measure_table(layers_a[:1], layers_b[:1], MEASURE_NAMES)  # warm-up (imports, BLAS)
        table = {
            name: fastest(args.repeats, measure_table, layers_a, layers_b, [name]) / pairs for name in MEASURE_NAMES
        }
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
                line += f" {1e3 * calls[name]:9.2f} {calls[name] / calls['cka']:7.1f} {calls[name] / table[name]:13.1f}"
            print(line)
        line = f"{'sum of the above':22s} {1e3 * sum(table.values()):9.2f} {sum(table.values()) / table['cka']:7.1f}"
        if args.direct:
            line += f" {1e3 * sum(calls.values()):9.2f} {sum(calls.values()) / calls['cka']:7.1f}"
            line += f" {sum(calls.values()) / sum(table.values()):13.1f}"
        print(line)
        print(f"{'all in one table':22s} {1e3 * all_in_one:9.2f} {all_in_one / table['cka']:7.1f}")


if __name__ == "__main__":
    main()
