"""Replicates: the same experiments with every seed the results depend on changed, and the data kept (no Kedro).

Replicate ``r`` (the top-level parameter ``replicate``; 0 is the default run) adds ``r ×`` :data:`SEED_STRIDE` to every
seed of the parameters — every key named ``seed`` or ending in ``_seed`` whose value is an integer — except those
of the data (:data:`DATA_SEEDS`: the corpus and the NLI pairs), so every replicate compares like with like on the
same sentences and pairs. What moves:

* the zoo: each model's ``seed`` (its initialisation and its training data order);
* stitching: ``stitching.split_seed`` and ``stitching.settings.seed`` (φ's batches, evaluation sample and bootstrap;
  φ seed ``k`` is ``settings.seed + k``);
* NLI: ``nli.seed`` (each copy's head initialisation and data order), ``nli.encoder.seed`` and its pair text, the
  identity-stitching and CKA samples;
* MLEM: ``mlem.fit.seed`` (stimuli, folds and pairs);
* the measures' row samples, CKA's bootstrap and permutations, the embedding samples and its fine-tune, the
  scaling bootstrap.

A shift keeps equalities and differences between seeds within a replicate (the same-seed control still shares
``gelu_2l``'s seed; seed replicas stay distinct) and, with a stride larger than any seed of the configuration, never
makes one replicate's seed another's. A *corpus* replicate (``corpus.seed`` moved too) would also vary the
sentences, the tokenizer and so the vocabulary; it answers "does the finding hold for another sample of the
language", a wider question than these replicates ask, and is not run by default. An environment whose models do not
learn from the corpus (conf/real: pretrained checkpoints, fixed) asks for it with ``replicates.vary_data: true``
(:data:`VARY_DATA_KEY`): there the checkpoints cannot vary, and what does is the text sample.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

#: The top-level parameter that names the replicate (0: the default run's seeds).
REPLICATE_KEY = "replicate"

#: Replicate ``r`` adds ``r × SEED_STRIDE`` to each seed; larger than every seed the configuration sets.
SEED_STRIDE = 1000

#: Dotted paths of the sections whose seeds make the data: kept in every replicate.
DATA_SEEDS: tuple[str, ...] = ("corpus", "nli.pairs")

#: ``replicates.vary_data``: when true, the data's seeds (:data:`DATA_SEEDS`) move with the replicate too (default
#: false: every replicate compares like with like on the same sentences).
VARY_DATA_KEY = "vary_data"


def is_seed_key(key: Any) -> bool:
    """Whether a parameter key names a seed (``seed`` or ``…_seed``)."""
    return isinstance(key, str) and (key == "seed" or key.endswith("_seed"))


def seed_paths(parameters: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, int]]:
    """Every ``(dotted path, seed)`` of integer seeds in ``parameters``, in document order."""
    for key, value in parameters.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from seed_paths(value, f"{path}.")
        elif is_seed_key(key) and isinstance(value, int) and not isinstance(value, bool):
            yield path, value


def is_data_seed(path: str) -> bool:
    """Whether the seed at ``path`` makes the data (under a section of :data:`DATA_SEEDS`)."""
    return any(path == section or path.startswith(f"{section}.") for section in DATA_SEEDS)


def replicate_of(parameters: Mapping[str, Any]) -> int:
    """The replicate the parameters name (:data:`REPLICATE_KEY`, default 0); a ``ValueError`` naming the parameter
    for anything but a non-negative integer."""
    value = parameters.get(REPLICATE_KEY, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"{REPLICATE_KEY}: expected a non-negative integer (0: the default run's seeds), got {value!r}"
        )
    return value


def replicate_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``parameters`` with every seed outside the data shifted for its replicate: ``seed + replicate ×
    SEED_STRIDE`` (module docstring); a copy, the input untouched; replicate 0 returns them unchanged."""
    replicate = replicate_of(parameters)
    shifted = copy.deepcopy(dict(parameters))
    if replicate == 0:
        return shifted
    _shift(shifted, "", replicate * SEED_STRIDE, vary_data=varies_data(parameters))
    return shifted


def varies_data(parameters: Mapping[str, Any]) -> bool:
    """``replicates.vary_data`` of the parameters (:data:`VARY_DATA_KEY`; false when absent); a ``ValueError`` naming
    the parameter for anything but a boolean."""
    value = (parameters.get("replicates") or {}).get(VARY_DATA_KEY, False)
    if not isinstance(value, bool):
        raise ValueError(f"replicates.{VARY_DATA_KEY}: expected true or false, got {value!r}")
    return value


def _shift(node: dict[str, Any], prefix: str, offset: int, *, vary_data: bool) -> None:
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            node[key] = dict(value)
            _shift(node[key], f"{path}.", offset, vary_data=vary_data)
        elif (
            is_seed_key(key)
            and isinstance(value, int)
            and not isinstance(value, bool)
            and (vary_data or not is_data_seed(path))
        ):
            node[key] = value + offset
