"""Streaming CKA (straight from two models' forward passes) against extraction + stored CKA.

Same two models (GPT-NeoX and a GeLU bridge, as in ``extraction_speed.py``), same tokens:

* **stored**: both models extracted into activation stores on disk (what the ``activations``
  pipeline does), then :func:`thinkalike.cka.compute.compute_cka` reads the stores;
* **streaming**: ``compute_cka`` on the two lazy :class:`ActivationStream` s (what
  ``cka.mode: streaming`` does): each batch is computed when CKA needs it; nothing is written.

Each mode runs in its own child process, so its peak resident memory (``ru_maxrss``) is its own;
the child reports tokens/s, bytes written to disk and the CKA matrix, and the parent checks the
two matrices agree.

    python benchmarks/streaming_cka.py                     # 512 sequences x 64 tokens
    python benchmarks/streaming_cka.py --sequences 128      # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extraction_speed import VOCAB, models  # noqa: E402

from thinkalike.cka.compute import compute_cka  # noqa: E402
from thinkalike.cka.settings import CKASettings  # noqa: E402
from thinkalike.models.activation_store import ActivationStream, write_activation_store  # noqa: E402
from thinkalike.models.extraction import iter_activation_batches  # noqa: E402


class LazyBatches:
    """Re-iterable extraction of one handle (as the pipeline's ``ResidualBatches``)."""

    def __init__(self, handle, ids, mask, batch_size):
        self.handle, self.ids, self.mask, self.batch_size = handle, ids, mask, batch_size

    def __iter__(self):
        return iter_activation_batches(self.handle, self.ids, self.mask, self.batch_size, progress=False)


def token_index(mask: np.ndarray, ids: np.ndarray) -> pd.DataFrame:
    sequence, position = np.nonzero(mask)
    return pd.DataFrame(
        {
            "sequence": sequence,
            "position": position,
            "token_id": ids[sequence, position],
            "sentence_id": sequence,
            "word_index": position,
            "is_special": False,
        }
    )


def child(mode: str, args) -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(5, VOCAB, size=(args.sequences, args.n_ctx))
    mask = np.ones_like(ids)
    index = token_index(mask, ids)
    (_, _, _, handle_a), (_, _, _, handle_b) = models(args.n_ctx, args.width, args.layers)
    streams = [
        ActivationStream(h.name, LazyBatches(h, ids, mask, args.batch_size), n_layers=h.n_layers)
        for h in (handle_a, handle_b)
    ]
    settings = CKASettings(batch_tokens=args.batch_tokens, n_bootstrap=0, n_permutations=0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        if mode == "stored":
            sources = [
                write_activation_store(Path(scratch, s.model), s.batches, s.model, n_layers=s.n_layers) for s in streams
            ]
        else:
            sources = streams
        result = compute_cka(
            sources[0], index, sources[1], index, settings, model_a="neox", model_b="gelu", device="cpu"
        )
        seconds = time.perf_counter() - started
        disk_bytes = sum(path.stat().st_size for path in Path(scratch).rglob("*") if path.is_file())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "tokens": int(mask.sum()),
                "peak_mib": peak_mib,
                "disk_bytes": disk_bytes,
                "cka": result.cka.tolist(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=512)
    parser.add_argument("--n-ctx", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=["stored", "streaming"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args)
        return
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.sequences} sequences x "
        f"{args.n_ctx} tokens, batch {args.batch_size}, width {args.width}, {args.layers} layers, "
        f"CKA minibatch {args.batch_tokens} tokens"
    )
    results: dict[str, list[dict]] = {"stored": [], "streaming": []}
    for _ in range(args.repeats):  # interleaved
        for mode in results:
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, *sys.argv[1:]], capture_output=True, text=True, check=True
            ).stdout
            results[mode].append(json.loads(out.strip().splitlines()[-1]))
    best = {mode: min(runs, key=lambda r: r["seconds"]) for mode, runs in results.items()}
    for mode, run in best.items():
        print(
            f"{mode:9s} {run['tokens'] / run['seconds']:9.0f} tokens/s  ({run['seconds']:.2f} s, fastest of "
            f"{args.repeats})  peak RSS {max(r['peak_mib'] for r in results[mode]):.0f} MiB  "
            f"written {run['disk_bytes'] / 2**20:.1f} MiB"
        )
    ratio = best["streaming"]["seconds"] / best["stored"]["seconds"]
    disagreement = np.abs(np.array(best["stored"]["cka"]) - np.array(best["streaming"]["cka"])).max()
    print(f"streaming / stored time {ratio:.3f}x; max |CKA stored - CKA streaming| = {disagreement:.2e}")


if __name__ == "__main__":
    main()
