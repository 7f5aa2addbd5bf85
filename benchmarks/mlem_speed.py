"""MLEM speed: fit + permutation importance of one layer, cost against pairs per step, soft rank vs its rejected peer.

Synthetic layer with planted truth: ``--words`` stimuli, ``--features`` categorical features
(2–5 values each) plus one numeric, vectors = random projection to ``--dim`` of the one-hot
features scaled by known weights, plus noise. Reported:

1. one layer's ``fit_layer`` (5 folds, fit + held-out Spearman + importance): wall time, peak RSS;
2. milliseconds per training step against ``pairs_per_step`` (fixed number of steps): the cost
   per pair stays flat — linear in pairs, never in stimuli²;
3. the soft rank used (:func:`~thinkalike.mlem.softrank.soft_rank`, Blondel et al.'s l2 soft rank
   via PAV, O(m log m)) against the rejected sigmoid surrogate
   (:func:`~thinkalike.mlem.softrank.pairwise_soft_rank`, O(m²) time and memory): forward+backward
   time per call, and fit quality when the fit uses each.

Run: ``python benchmarks/mlem_speed.py`` (about two minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd
import torch
from scipy.stats import weightedtau

import thinkalike.mlem.fit as fit_module
from thinkalike.mlem.features import encode_features
from thinkalike.mlem.fit import MLEMSettings, fit_fold, fit_layer, single_threaded
from thinkalike.mlem.softrank import pairwise_soft_rank, pearson, soft_rank


def planted_layer(n: int, n_features: int, dim: int, seed: int = 0):
    """``(feature table, vectors (n, dim), true weight per feature)``."""
    rng = np.random.default_rng(seed)
    sizes = [2 + k % 4 for k in range(n_features)]
    scales = np.linspace(3.0, 0.0, n_features + 1)  # the numeric feature gets the middle scale below
    frame = pd.DataFrame({f"f{k}": rng.integers(0, size, n).astype(str) for k, size in enumerate(sizes)})
    frame["position"] = rng.integers(0, 12, n)
    blocks = [np.eye(size)[frame[f"f{k}"].astype(int)] * scales[k] for k, size in enumerate(sizes)]
    blocks.append((frame[["position"]].to_numpy() / 11.0) * 1.5)
    planted = np.concatenate(blocks, axis=1)
    projection = np.linalg.qr(rng.standard_normal((dim, planted.shape[1])))[0].T  # orthonormal rows
    vectors = planted @ projection + 0.3 * rng.standard_normal((n, dim)) / np.sqrt(dim / 64)
    kinds = {f"f{k}": "categorical" for k in range(n_features)} | {"position": "numeric"}
    truth = np.r_[scales[:n_features], 1.5]
    return encode_features(frame, kinds), vectors.astype(np.float32), truth


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_layer(features, vectors, truth, settings: MLEMSettings) -> dict[str, float]:
    start = time.perf_counter()
    fit = fit_layer(features, vectors, settings)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "steps": float(fit.steps.mean()),
        "heldout": float(fit.spearman.mean()),
        "tau": float(weightedtau(fit.weights.mean(axis=0), truth).statistic),
    }


def ms_per_step(features, vectors, pairs: int, steps: int = 40) -> float:
    settings = MLEMSettings(pairs_per_step=pairs, max_steps=steps, patience=10**6)
    data = torch.as_tensor(vectors)
    with single_threaded("cpu"):
        start = time.perf_counter()
        fit_fold(features, data, settings, pairs, torch.Generator().manual_seed(0))
        return (time.perf_counter() - start) / steps * 1e3


def rank_call_ms(function, m: int, repeats: int = 5) -> float:
    values = torch.rand(m, generator=torch.Generator().manual_seed(m)) * (m - 1)
    target = torch.randperm(m, generator=torch.Generator().manual_seed(1)).float()
    start = time.perf_counter()
    for _ in range(repeats):
        x = values.clone().requires_grad_(True)
        (-pearson(function(x), target)).backward()
    return (time.perf_counter() - start) / repeats * 1e3


def pairwise_loss(feature_distance, neural_ranks, strength):
    """The fit's loss with the sigmoid surrogate in place of the soft rank (same scaling to rank units)."""
    m = feature_distance.numel()
    low, high = feature_distance.detach().min(), feature_distance.detach().max()
    scaled = (feature_distance - low) * ((m - 1) / (high - low).clamp_min(1e-12))
    return -pearson(pairwise_soft_rank(scaled, strength), neural_ranks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--features", type=int, default=9, help="categorical features (one numeric is added)")
    args = parser.parse_args()
    features, vectors, truth = planted_layer(args.words, args.features, args.dim)
    print(
        f"torch {torch.__version__}, fits on 1 thread; {args.words} stimuli, d = {args.dim}, "
        f"{features.n_features} features ({args.features} categorical + position)\n"
    )

    before = peak_rss_mib()
    layer = time_layer(features, vectors, truth, MLEMSettings())
    print("1. one layer, default settings (5 folds, 1,024 pairs/step, 5 permutations, 4,000 held-out pairs/fold)")
    print(
        f"   {layer['seconds']:.1f} s ({layer['steps']:.0f} steps per fold on average); peak RSS "
        f"{peak_rss_mib():.0f} MiB ({peak_rss_mib() - before:+.0f} MiB during the fit); held-out Spearman "
        f"{layer['heldout']:.3f}; weighted tau of weights with the truth {layer['tau']:.3f}\n"
    )

    print("2. cost per training step against pairs per step (40 steps)")
    print(f"   {'pairs':>6} {'ms/step':>8} {'us/pair':>8}")
    for pairs in (512, 1024, 2048, 4096, 8192, 16384):
        ms = ms_per_step(features, vectors, pairs)
        print(f"   {pairs:>6} {ms:>8.2f} {ms / pairs * 1e3:>8.2f}")

    print("\n3. soft rank (PAV, used) vs pairwise sigmoid surrogate (rejected): forward + backward of one loss")
    print(f"   {'m':>6} {'PAV ms':>8} {'sigmoid ms':>11} {'sigmoid / PAV':>14} {'sigmoid n x n MiB':>18}")
    with single_threaded("cpu"):
        for m in (1024, 4096, 8192):
            pav = rank_call_ms(lambda x: soft_rank(x, 1.0), m)
            sigmoid = rank_call_ms(lambda x: pairwise_soft_rank(x, 1.0), m, repeats=2)
            print(f"   {m:>6} {pav:>8.2f} {sigmoid:>11.2f} {sigmoid / pav:>14.1f} {m * m * 4 / 2**20:>18.0f}")
    settings = MLEMSettings(n_folds=3, n_permutations=2)
    original = fit_module.spearman_loss
    try:
        fit_module.spearman_loss = pairwise_loss
        surrogate = time_layer(features, vectors, truth, settings)
    finally:
        fit_module.spearman_loss = original
    used = time_layer(features, vectors, truth, settings)
    print("\n   the whole fit (3 folds, 2 permutations, 1,024 pairs/step) with each:")
    print(f"   {'':>8} {'seconds':>8} {'steps':>6} {'held-out rho':>13} {'tau(truth)':>11}")
    for name, row in (("PAV", used), ("sigmoid", surrogate)):
        print(f"   {name:>8} {row['seconds']:>8.1f} {row['steps']:>6.0f} {row['heldout']:>13.3f} {row['tau']:>11.3f}")


if __name__ == "__main__":
    main()
