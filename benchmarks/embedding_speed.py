"""Top-k (input, output) token pairs of one head's E′ W_VO E: factored scan against the dense V × V product.

Random float32 weights: E (d × V), E′ = Eᵀ, one head's W_V (d × d_head) and W_O (d_head × d). Contenders:

* **factored**: ``top_k_of_product(E′ W_V, W_O E, k)`` (thinkalike.embedding.topk) — row blocks of at most
  ``DEFAULT_BLOCK_BYTES``, running top-k; the V × V matrix is never formed;
* **dense**: ``M = (E′ W_V)(W_O E)`` formed (V × V, the same multiply-adds), then its top-k: a row-wise
  ``topk`` and a top-k of the V·k candidates (a flattened ``topk`` would allocate 16 bytes per entry on CPU);
* **dense_paper**: the paper's ``E′ @ (W_V W_O) @ E`` (d × d in the middle: d/d_head times the
  multiply-adds), then the same top-k.

Each run is a fresh process (``spawn``): time of the contender's call, and its peak memory = the process's
peak resident set (``ru_maxrss``) minus the resident set just before the call (the inputs already exist).
Runs are interleaved round by round; the fastest time and the largest peak of each contender are reported.
Dense contenders run only at the ``--vocab`` size (a V × V float32 matrix of ``--vocab``²·4 bytes must fit
in RAM); ``--large-vocab`` is run factored only.

    python benchmarks/embedding_speed.py                          # V = 20,000 (dense fits) and 50,000, d = 512
    python benchmarks/embedding_speed.py --vocab 4000 --large-vocab 8000 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time

from thinkalike.embedding.topk import DEFAULT_BLOCK_BYTES


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _run(
    contender: str, vocab: int, d: int, d_head: int, k: int, threads: int, seed: int, block_mib: float, queue
) -> None:
    import torch

    from thinkalike.embedding.topk import top_k_of_product

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(seed)
    embedding = torch.randn(d, vocab, generator=g) / d**0.5
    w_v = torch.randn(d, d_head, generator=g) / d**0.5
    w_o = torch.randn(d_head, d, generator=g) / d_head**0.5
    inverse = embedding.T

    def dense_top_k(matrix: torch.Tensor):
        values, columns = matrix.topk(k, dim=1)
        best, flat = values.reshape(-1).topk(k)
        return best, flat // k, columns.reshape(-1)[flat]

    before = _rss_bytes()
    start = time.perf_counter()
    if contender == "factored":
        top = top_k_of_product(inverse @ w_v, w_o @ embedding, k, block_bytes=int(block_mib * 2**20))
        result = (top.values, top.rows, top.columns)
    elif contender == "dense":
        result = dense_top_k((inverse @ w_v) @ (w_o @ embedding))
    else:
        result = dense_top_k(inverse @ (w_v @ w_o) @ embedding)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    queue.put((seconds, max(peak, 0), result[0].tolist(), result[1].tolist(), result[2].tolist()))


def measure(contender: str, vocab: int, args) -> tuple[float, int, list, list, list]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(
        target=_run,
        args=(contender, vocab, args.d, args.d_head, args.k, args.threads, args.seed, args.block_mib, queue),
    )
    process.start()
    out = queue.get()
    process.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=20_000, help="V of the dense comparison")
    parser.add_argument("--large-vocab", type=int, default=50_000, help="V run factored only (0: skip)")
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--block-mib",
        type=float,
        default=DEFAULT_BLOCK_BYTES / 2**20,
        help="byte budget of one block of the factored scan (MiB)",
    )
    parser.add_argument(
        "--only", choices=["factored", "dense", "dense_paper"], default=None, help="run one contender (no comparison)"
    )
    args = parser.parse_args()

    runs: dict[tuple[str, int], list] = {}
    plan = [("factored", args.vocab), ("dense", args.vocab), ("dense_paper", args.vocab)]
    if args.large_vocab:
        plan.append(("factored", args.large_vocab))
    if args.only:
        plan = [entry for entry in plan if entry[0] == args.only]
    for repeat in range(args.repeats):
        for contender, vocab in plan:
            runs.setdefault((contender, vocab), []).append(measure(contender, vocab, args))
            seconds, peak = runs[(contender, vocab)][-1][:2]
            print(
                f"round {repeat + 1}: {contender:11s} V={vocab:6d}  {seconds:7.3f} s  peak {peak / 2**20:8.1f} MiB",
                flush=True,
            )

    print(
        f"\nd = {args.d}, d_head = {args.d_head}, k = {args.k}, float32, {args.threads} threads, factored blocks "
        f"of at most {args.block_mib:g} MiB"
    )
    if args.only:
        return
    factored = runs[("factored", args.vocab)]
    dense = runs[("dense", args.vocab)]
    same = all(f[3:] == dense[0][3:] for f in factored)  # the same (row, column) pairs in the same order
    dense_bytes = args.vocab**2 * 4
    print(f"V × V float32 at V = {args.vocab}: {dense_bytes / 2**20:.0f} MiB")
    print("| contender | V | time (fastest) | peak memory (largest) | peak / dense V×V |")
    print("|---|---:|---:|---:|---:|")
    for (contender, vocab), results in runs.items():
        seconds = min(r[0] for r in results)
        peak = max(r[1] for r in results)
        print(f"| {contender} | {vocab:,} | {seconds:.3f} s | {peak / 2**20:.1f} MiB | {peak / (vocab**2 * 4):.2%} |")
    ratio = min(r[0] for r in factored) / min(r[0] for r in dense)
    ratio_paper = min(r[0] for r in factored) / min(r[0] for r in runs[("dense_paper", args.vocab)])
    memory = max(r[1] for r in factored) / dense_bytes
    print(f"\nfactored / dense time: {ratio:.2f}× (target ≤ 1.5×); factored / dense_paper time: {ratio_paper:.2f}×")
    print(f"factored peak / dense V×V: {memory:.2%} (target ≤ 5 %)")
    print(f"same top-{args.k} pairs as dense: {same}")


if __name__ == "__main__":
    main()
